"""The evidence distillation loss (soft teacher targets): hand values, closed-form KL, gradients, masks."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.distributions import Dirichlet, kl_divergence

from evidential.errors import ShapeError
from evidential.losses import (
    EvidenceDistillationLoss,
    evidence_distillation_loss,
    kl_dirichlet,
    kl_dirichlet_uniform,
)

F64 = torch.float64
KINDS = ("log_mse", "kl")


def test_log_mse_hand_computed():
    s = torch.tensor([[0.0, 0.0], [1.0, 3.0]], dtype=F64)
    t = torch.tensor([[7.0, 0.0], [1.0, 0.0]], dtype=F64)
    per_row = evidence_distillation_loss(s, t, "log_mse", reduction="none")
    assert per_row[0].item() == pytest.approx(math.log(8) ** 2)  # (log 1 − log 8)² + 0
    assert per_row[1].item() == pytest.approx(math.log(4) ** 2)  # 0 + (log 4 − log 1)²
    mean = evidence_distillation_loss(s, t, "log_mse")
    assert mean.item() == pytest.approx((math.log(8) ** 2 + math.log(4) ** 2) / 2)
    assert evidence_distillation_loss(s, t, "log_mse", reduction="sum").item() == pytest.approx(
        math.log(8) ** 2 + math.log(4) ** 2
    )


def test_kl_hand_computed_and_matches_torch_distributions():
    # KL(Dir(2, 1) ‖ Dir(1, 1)) = log 2 − 1/2 (as for the EDL regularizer)
    s = torch.tensor([[1.0, 0.0]], dtype=F64)
    assert evidence_distillation_loss(s, torch.zeros_like(s), "kl").item() == pytest.approx(math.log(2) - 0.5)
    torch.manual_seed(0)
    a = torch.rand(8, 5, dtype=F64) * 6
    b = torch.rand(8, 5, dtype=F64) * 6
    want = kl_divergence(Dirichlet(a + 1), Dirichlet(b + 1))
    got = evidence_distillation_loss(a, b, "kl", reduction="none")
    assert torch.allclose(got, want, atol=1e-10)
    assert torch.allclose(kl_dirichlet(a + 1, b + 1), want, atol=1e-10)


def test_kl_toward_a_silent_teacher_is_the_edl_regularizer():
    s = torch.tensor([[3.0, 0.5, 0.0], [0.0, 0.0, 0.0]], dtype=F64)
    got = evidence_distillation_loss(s, torch.zeros_like(s), "kl", reduction="none")
    assert torch.allclose(got, kl_dirichlet_uniform(s), atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_zero_exactly_when_student_equals_teacher(kind):
    t = torch.tensor([[7.0, 0.0, 2.5], [0.0, 0.0, 0.0]], dtype=F64)
    assert evidence_distillation_loss(t.clone(), t, kind).item() == pytest.approx(0.0, abs=1e-12)
    assert evidence_distillation_loss(t + 0.5, t, kind).item() > 1e-4


@pytest.mark.parametrize("kind", KINDS)
def test_gradient_gradcheck_and_direction(kind):
    torch.manual_seed(1)
    s = (torch.rand(3, 4, dtype=F64) * 4).requires_grad_()
    t = torch.rand(3, 4, dtype=F64) * 4
    assert torch.autograd.gradcheck(lambda x: evidence_distillation_loss(x, t, kind), (s,))
    # a student below the teacher on every claim of a row is pushed up, above it pushed down
    low = torch.tensor([[0.0, 0.0]], dtype=F64, requires_grad=True)
    high = torch.tensor([[9.0, 9.0]], dtype=F64, requires_grad=True)
    target = torch.tensor([[4.0, 4.0]], dtype=F64)
    evidence_distillation_loss(low, target, "log_mse").backward()
    evidence_distillation_loss(high, target, "log_mse").backward()
    assert bool((low.grad < 0).all()) and bool((high.grad > 0).all())
    # the teacher is a target: no gradient flows into it
    tt = target.clone().requires_grad_()
    assert not evidence_distillation_loss(high.detach(), tt, kind).requires_grad


def test_one_claim_frames_kl_is_zero_but_log_mse_matches_magnitude():
    s = torch.tensor([[0.0]], dtype=F64)
    t = torch.tensor([[9.0]], dtype=F64)
    assert evidence_distillation_loss(s, t, "kl").item() == pytest.approx(0.0, abs=1e-12)
    assert evidence_distillation_loss(s, t, "log_mse").item() == pytest.approx(math.log(10) ** 2)


@pytest.mark.parametrize("kind", KINDS)
def test_masks_ignore_padding_even_garbage(kind):
    s = torch.tensor([[1.0, 2.0, 1e6], [5.0, 5.0, 5.0]], dtype=F64, requires_grad=True)
    t = torch.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=F64)
    claim_mask = torch.tensor([[True, True, False], [True, True, True]])
    row_mask = torch.tensor([True, False])
    got = evidence_distillation_loss(s, t, kind, claim_mask=claim_mask, row_mask=row_mask)
    want = evidence_distillation_loss(s[:1, :2], t[:1, :2], kind)
    assert got.item() == pytest.approx(want.item())
    got.backward()
    assert s.grad[0, 2] == 0 and bool((s.grad[1] == 0).all())
    # no counted row: 0, not NaN
    none = evidence_distillation_loss(s, t, kind, row_mask=torch.tensor([False, False]))
    assert none.item() == 0.0


@given(
    st.integers(1, 4).flatmap(
        lambda m: st.tuples(
            st.lists(st.floats(0, 1e3, allow_nan=False), min_size=m, max_size=m),
            st.lists(st.floats(0, 1e3, allow_nan=False), min_size=m, max_size=m),
        )
    ),
    st.sampled_from(KINDS),
)
def test_non_negative_for_any_non_negative_evidence(pair, kind):
    s, t = (torch.tensor([x], dtype=F64) for x in pair)
    value = evidence_distillation_loss(s, t, kind).item()
    assert math.isfinite(value) and value >= -1e-9


def test_module_delegates_and_validates():
    s = torch.tensor([[1.0, 0.0], [0.0, 4.0]])
    t = torch.tensor([[3.0, 0.0], [0.0, 4.0]])
    for kind in KINDS:
        mod = EvidenceDistillationLoss(kind, reduction="none")
        assert torch.equal(mod(s, t), evidence_distillation_loss(s, t, kind, reduction="none"))
        assert kind in repr(mod)
    with pytest.raises(ValueError, match="kind must be one of"):
        EvidenceDistillationLoss("huber")
    with pytest.raises(ValueError, match="reduction"):
        EvidenceDistillationLoss(reduction="max")
    with pytest.raises(ValueError, match="unknown distillation loss kind"):
        evidence_distillation_loss(s, t, "huber")
    with pytest.raises(ShapeError, match="same shape"):
        evidence_distillation_loss(s, t[:, :1])
    with pytest.raises(ShapeError, match="same shape"):
        kl_dirichlet(s + 1, t[:1] + 1)
