"""The span loss of the claim-extraction head: hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from training.learned.span_loss import SpanLoss, span_loss


def test_span_loss_values():
    logits = torch.tensor([[0.0, math.log(3.0), 0.0]])  # softmax = (0.2, 0.6, 0.2)
    val = span_loss(logits, logits, torch.tensor([1]), torch.tensor([2]))
    assert val.item() == pytest.approx(0.5 * (-math.log(0.6) - math.log(0.2)), abs=1e-6)
    assert SpanLoss(reduction="none")(logits, logits, torch.tensor([0]), torch.tensor([0])).shape == (1,)
