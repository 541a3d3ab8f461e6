import math

import pytest
import torch
from torch.distributions import Dirichlet, kl_divergence

from evidential import (
    EDLDigammaLoss,
    EDLLogLoss,
    EDLMSELoss,
    annealing_coefficient,
    edl_data_term,
    edl_loss,
    kl_dirichlet_uniform,
)

F64 = torch.float64
E = torch.tensor([[1.0, 0.0]], dtype=F64)
Y = torch.tensor([[1.0, 0.0]], dtype=F64)


def test_data_terms_hand_computed():
    # α = (2, 1), S = 3, p = (2/3, 1/3)
    assert math.isclose(float(edl_data_term(E, Y, "mse")), 1 / 9 + 1 / 9 + (4 / 9) / 4)
    assert math.isclose(float(edl_data_term(E, Y, "log")), math.log(3) - math.log(2))
    assert math.isclose(float(edl_data_term(E, Y, "digamma")), 0.5)  # ψ(3) − ψ(2) = 1/2


def test_kl_matches_torch_distributions():
    assert math.isclose(float(kl_dirichlet_uniform(E)), math.log(2) - 0.5, rel_tol=1e-12)
    assert float(kl_dirichlet_uniform(E, Y)) == pytest.approx(0.0, abs=1e-12)  # target evidence removed
    torch.manual_seed(0)
    e = torch.rand(6, 4, dtype=F64) * 5
    want = kl_divergence(Dirichlet(e + 1), Dirichlet(torch.ones_like(e)))
    assert torch.allclose(kl_dirichlet_uniform(e), want, atol=1e-10)


def test_multi_hot_targets_are_normalized():
    e = torch.tensor([[2.0, 2.0, 0.0]], dtype=F64)
    multi = torch.tensor([[1.0, 1.0, 0.0]], dtype=F64)
    assert torch.allclose(edl_data_term(e, multi, "log"), edl_data_term(e, multi / 2, "log"))
    # α̃ removes the evidence of both labelled claims -> KL is 0 for the remaining e = 0
    assert float(kl_dirichlet_uniform(e, multi)) == pytest.approx(0.0, abs=1e-12)


def test_all_zero_target_has_only_the_regularizer():
    e = torch.tensor([[3.0, 1.0]], dtype=F64)
    zero = torch.zeros_like(e)
    for kind in ("mse", "log", "digamma"):
        assert float(edl_data_term(e, zero, kind)) == 0.0
        # unannealed even at step 0
        assert float(edl_loss(e, zero, kind, step=0)) == pytest.approx(float(kl_dirichlet_uniform(e)))
    # a labelled row at step 0 has no KL yet
    assert float(edl_loss(E, Y, "log", step=0)) == pytest.approx(math.log(3 / 2))


def test_claim_mask_ignores_padding_even_garbage():
    e = torch.tensor([[1.0, 0.0, 1e6]], dtype=F64)
    y = torch.tensor([[1.0, 0.0, 1.0]], dtype=F64)
    mask = torch.tensor([[True, True, False]])
    for kind in ("mse", "log", "digamma"):
        assert torch.allclose(edl_data_term(e, y, kind, mask), edl_data_term(E, Y, kind))
    assert torch.allclose(kl_dirichlet_uniform(e, None, mask), kl_dirichlet_uniform(E))
    assert (
        float(edl_loss(torch.zeros(1, 2), torch.zeros(1, 2), claim_mask=torch.zeros(1, 2, dtype=torch.bool)))
        == 0.0
    )


def test_row_mask_and_reductions():
    e = torch.tensor([[1.0, 0.0], [5.0, 5.0]], dtype=F64)
    y = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=F64)
    per_row = edl_loss(e, y, "mse", reduction="none")
    assert per_row.shape == (2,)
    assert torch.isclose(edl_loss(e, y, "mse", reduction="sum"), per_row.sum())
    masked = edl_loss(e, y, "mse", row_mask=torch.tensor([True, False]))
    assert torch.isclose(masked, per_row[0])
    with pytest.raises(ValueError, match="reduction"):
        edl_loss(e, y, reduction="avg")
    with pytest.raises(ValueError, match="kind"):
        edl_data_term(e, y, "hinge")


def test_annealing():
    assert annealing_coefficient(0, 10) == 0.0 and annealing_coefficient(5, 10) == 0.5
    assert annealing_coefficient(50, 10) == 1.0 and annealing_coefficient(3, 0) == 1.0


@pytest.mark.parametrize("loss_cls", [EDLMSELoss, EDLLogLoss, EDLDigammaLoss])
def test_each_loss_decreases_on_a_toy_problem(loss_cls):
    torch.manual_seed(0)
    x = torch.randn(32, 6)
    labels = (x[:, 0] > 0).long()
    target = torch.nn.functional.one_hot(labels, 2).to(torch.float32)
    target[:8] = 0  # some chunks support nothing
    model = torch.nn.Linear(6, 2)
    loss_fn = loss_cls(annealing_steps=0)  # full KL from the start: losses comparable across steps
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(150):
        ev = torch.nn.functional.softplus(model(x))
        loss = loss_fn(ev, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses[::10]
    assert all(b <= a + 1e-6 for a, b in zip(losses[10::10], losses[20::10])), losses[::10]
    ev = torch.nn.functional.softplus(model(x)).detach()
    labelled = ev[8:]
    assert (
        labelled.gather(1, labels[8:, None]) > labelled.gather(1, 1 - labels[8:, None])
    ).float().mean() > 0.9


def test_all_zero_target_drives_evidence_down():
    logits = torch.full((4, 3), 2.0, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=0.1)
    start = torch.nn.functional.softplus(logits).sum().item()
    for _ in range(200):
        loss = EDLMSELoss()(torch.nn.functional.softplus(logits), torch.zeros(4, 3))
        opt.zero_grad()
        loss.backward()
        opt.step()
    end = torch.nn.functional.softplus(logits).sum().item()
    assert end < 0.2 * start


def test_loss_module_validation():
    with pytest.raises(ValueError, match="annealing_steps"):
        EDLMSELoss(annealing_steps=-1)
    with pytest.raises(ValueError, match="reduction"):
        EDLLogLoss(reduction="avg")
