"""The span loss of the claim-extraction head: hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from training.learned.span_loss import SpanLoss, span_loss


def test_span_loss_values():
    logits = torch.tensor([[0.0, math.log(3.0), 0.0]])  # softmax = (0.2, 0.6, 0.2)
    val = span_loss(logits, logits, torch.tensor([1]), torch.tensor([2]))
    assert val.item() == pytest.approx(0.5 * (-math.log(0.6) - math.log(0.2)), abs=1e-6)
    assert SpanLoss(reduction="none")(logits, logits, torch.tensor([0]), torch.tensor([0])).shape == (1,)


def test_mask_targets_give_the_marginal_likelihood():
    logits = torch.tensor([[0.0, math.log(3.0), math.log(2.0), 0.0], [1.0, 0.0, 0.0, 0.0]])
    starts = torch.tensor([[False, True, True, False], [True, False, False, False]])
    ends = torch.tensor([[False, False, True, False], [True, False, False, False]])
    got = span_loss(logits, logits, starts, ends, reduction="none")
    # row 0: softmax (1, 3, 2, 1) / 7; start over tokens 1 and 2 (5/7), end at token 2 (2/7)
    assert got[0].item() == pytest.approx(0.5 * (-math.log(5 / 7) - math.log(2 / 7)), abs=1e-6)
    # a one-hot mask is the cross-entropy of its index
    assert got[1].item() == pytest.approx(
        span_loss(logits[1:], logits[1:], torch.tensor([0]), torch.tensor([0])).item()
    )
    assert span_loss(logits, logits, starts, ends, reduction="sum").item() == pytest.approx(got.sum().item())


@given(st.lists(st.floats(-20, 20), min_size=2, max_size=12), st.data())
@settings(max_examples=100, deadline=None)
def test_more_allowed_positions_never_raise_the_loss(values, data):
    logits = torch.tensor([values])  # the loss computes in float32
    t = len(values)
    first = data.draw(st.integers(0, t - 1))
    extra = data.draw(st.lists(st.integers(0, t - 1), max_size=t))
    one = torch.zeros(1, t, dtype=torch.bool)
    one[0, first] = True
    many = one.clone()
    many[0, extra] = True
    assert span_loss(logits, logits, many, many).item() <= span_loss(logits, logits, one, one).item() + 1e-5
    assert span_loss(logits, logits, one, one).item() == pytest.approx(
        span_loss(logits, logits, torch.tensor([first]), torch.tensor([first])).item(), abs=1e-5
    )


def test_bad_masks_are_refused():
    logits = torch.zeros(1, 3)
    with pytest.raises(ValueError, match="shape"):
        span_loss(logits, logits, torch.ones(1, 4, dtype=torch.bool), torch.ones(1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="at least one"):
        span_loss(logits, logits, torch.zeros(1, 3, dtype=torch.bool), torch.ones(1, 3, dtype=torch.bool))
