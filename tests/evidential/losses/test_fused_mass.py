"""The query-level loss through fusion (:mod:`evidential.losses.fused_mass`): hand-computed values and gradients."""

from __future__ import annotations

import math

import pytest
import torch

from evidential.errors import ShapeError
from evidential.losses import FusedMassLoss, fused_mass_loss


def test_single_chunk_is_its_own_opinion():
    ev = torch.tensor([[[4.0, 0.0]]], dtype=torch.float64)  # b = (4/6, 0), u = 2/6
    on_claim = fused_mass_loss(ev, torch.tensor([[1.0, 0.0, 0.0]]), eps=0.0)
    on_theta = fused_mass_loss(ev, torch.tensor([[0.0, 0.0, 1.0]]), eps=0.0)
    assert on_claim.item() == pytest.approx(-math.log(4 / 6), abs=1e-12)
    assert on_theta.item() == pytest.approx(-math.log(2 / 6), abs=1e-12)


def test_conflict_yager_matches_readme_numbers():
    ev = torch.tensor([[[3.0, 0.0], [0.0, 3.0]]], dtype=torch.float64)  # Yager: b = 0.24 / 0.24, U = 0.52
    loss = fused_mass_loss(ev, torch.tensor([[0.5, 0.5, 0.0]]), rule="yager", eps=0.0)
    assert loss.item() == pytest.approx(-math.log(0.24), abs=1e-9)
    loss_theta = fused_mass_loss(ev, torch.tensor([[0.0, 0.0, 1.0]]), rule="yager", eps=0.0)
    assert loss_theta.item() == pytest.approx(-math.log(0.52), abs=1e-9)


def test_gradient_discounts_misinformation():
    """Pushing the fused mass to the gold claim lowers the evidence of the chunk that contradicts it."""
    ev = torch.tensor([[[3.0, 0.0], [3.0, 0.0], [0.0, 3.0]]], dtype=torch.float64, requires_grad=True)
    fused_mass_loss(ev, torch.tensor([[1.0, 0.0, 0.0]])).backward()
    assert ev.grad[0, 2, 1] > 0  # gradient descent lowers the misinformation evidence
    assert ev.grad[0, 0, 0] < 0  # and raises the gold evidence


def test_masks_and_reduction():
    ev = torch.tensor(
        [[[4.0, 0.0, 9.0], [0.0, 0.0, 9.0]], [[1.0, 1.0, 0.0], [2.0, 0.0, 0.0]]], dtype=torch.float64
    )
    target = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    claim_mask = torch.tensor([[True, True, False], [True, True, True]])
    chunk_mask = torch.tensor([[True, False], [True, True]])
    per = fused_mass_loss(ev, target, claim_mask, chunk_mask, reduction="none")
    # query 0: one real chunk over 2 real claims: b0 = 4/6
    assert per[0].item() == pytest.approx(-math.log(4 / 6 + 1e-6), abs=1e-9)
    mean = fused_mass_loss(ev, target, claim_mask, chunk_mask, row_mask=torch.tensor([True, False]))
    assert mean.item() == pytest.approx(per[0].item())
    module = FusedMassLoss(lam=0.6, reduction="sum")
    assert module(ev, target, claim_mask, chunk_mask).item() == pytest.approx(per.sum().item())


def test_target_shape_is_checked():
    with pytest.raises(ShapeError, match=r"M \+ 1 = 3 entries"):
        fused_mass_loss(torch.ones(1, 2, 2), torch.ones(1, 2))


def test_lambda_is_the_share_of_conflict_sent_to_theta():
    """λ weights the Θ side: m(Θ) = h + λK, and the singletons share Σn + (1 − λ)K."""
    # b = (0.6, 0) and (0, 0.6), u = 0.4 each: K = 0.36, h = 0.16, n = (0.24, 0.24)
    ev = torch.tensor([[[3.0, 0.0], [0.0, 3.0]]], dtype=torch.float64)
    on_theta = torch.tensor([[0.0, 0.0, 1.0]])
    on_claim = torch.tensor([[1.0, 0.0, 0.0]])
    for lam in (0.0, 0.25, 0.6, 1.0):
        loss = FusedMassLoss(lam=lam, eps=0.0)
        assert loss(ev, on_theta).item() == pytest.approx(-math.log(0.16 + lam * 0.36), abs=1e-12)
        assert loss(ev, on_claim).item() == pytest.approx(-math.log(0.24 + (1 - lam) * 0.18), abs=1e-12)
    # so a larger λ makes "this conflict is uncertain" cheaper and "claim 0 is right" dearer
    low, high = FusedMassLoss(lam=0.2, eps=0.0), FusedMassLoss(lam=0.8, eps=0.0)
    assert high(ev, on_theta) < low(ev, on_theta) and high(ev, on_claim) > low(ev, on_claim)
