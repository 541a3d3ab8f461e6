import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from evidential import (
    ConfigError,
    FusionResult,
    MassState,
    ShapeError,
    UnknownNameError,
    combine,
    fuse,
    opinions_from_evidence,
    pad_evidence,
)
from evidential.reference import reference_fuse

F64 = torch.float64
RULES = ("lambda", "yager", "dempster")


def _fuse(ev, **kw) -> FusionResult:
    return fuse(opinions_from_evidence(torch.as_tensor(ev, dtype=F64)), **kw)


def _close(x, y, tol=1e-12):
    return torch.allclose(torch.as_tensor(x, dtype=F64), torch.as_tensor(y, dtype=F64), atol=tol, rtol=0)


# --- hand-computed cases -------------------------------------------------------------------------


def test_design_test_vector_yager_and_dempster():
    # b1 = (0.6, 0), b2 = (0, 0.6), u = 0.4 each, K = 0.36
    ev = [[3.0, 0.0], [0.0, 3.0]]
    y = _fuse(ev, rule="yager")
    assert _close(y.belief, [0.24, 0.24]) and _close(y.uncertainty, 0.52)
    assert _close(y.step_conflict, [0.36]) and _close(y.mean_pairwise_conflict, 0.36)
    d = _fuse(ev, rule="dempster")
    assert _close(d.belief, [0.375, 0.375]) and _close(d.uncertainty, 0.25)


def test_lambda_rule_hand_computed():
    r = _fuse([[3.0, 0.0], [0.0, 3.0]], lam=0.6)
    # h = 0.16, K = 0.36 -> m(Θ) = 0.16 + 0.216 = 0.376 ; singletons share 0.624 equally
    assert _close(r.uncertainty, 0.376) and _close(r.belief, [0.312, 0.312])
    assert _close(r.ignorance, 0.16) and _close(r.conflict, 0.216)
    assert _close(r.confidence, 0.312) and int(r.selected) == 0


def test_lambda_zero_keeps_joint_ignorance_and_renormalizes_singletons():
    r = _fuse([[3.0, 0.0], [0.0, 3.0]], lam=0.0)
    assert _close(r.uncertainty, 0.16) and _close(r.belief, [0.42, 0.42])
    assert _close(r.conflict, 0.0)


def test_agreeing_chunks_three_step_fold():
    # two chunks for a1 (b = 0.6, u = 0.4), then one for a2: by hand
    r = _fuse([[3.0, 0.0], [3.0, 0.0], [0.0, 3.0]], lam=0.6)
    # step 1: K = 0, n1 = .36 + .24 + .24 = .84, h = .16 -> (0.84, 0), Θ = 0.16 (all ignorance)
    # step 2: K = 0.84*0.6 = 0.504, n1 = 0.84*0.4 = 0.336, n2 = 0.16*0.6 = 0.096, h = 0.064
    #         Θ = 0.064 + 0.6*0.504 = 0.3664 ; singletons = (0.432 + 0.4*0.504) * n/0.432
    rest = 0.432 + 0.4 * 0.504
    assert _close(r.uncertainty, 0.3664)
    assert _close(r.belief, [rest * 0.336 / 0.432, rest * 0.096 / 0.432])
    assert _close(r.step_conflict, [0.0, 0.504])
    assert _close(r.ignorance, 0.064) and _close(r.conflict, 0.3024)
    assert _close(r.mean_pairwise_conflict, (0.0 + 0.36 + 0.36) / 3)


def test_fold_order_is_part_of_the_result():
    # commutative per step, but not associative: rank order changes the result
    ev = torch.tensor([[3.0, 0.0], [0.0, 3.0], [5.0, 1.0]], dtype=F64)
    a = _fuse(ev)
    b = _fuse(ev[[2, 0, 1]])
    assert not _close(a.uncertainty, b.uncertainty, 1e-6)
    swapped = _fuse(ev[[1, 0, 2]])  # swapping the first two only is commutativity
    assert _close(a.uncertainty, swapped.uncertainty) and _close(a.belief, swapped.belief)


def test_degenerate_total_conflict_puts_all_mass_on_theta():
    # two dogmatic opinions (u = 0) on different claims: K = 1, Σn = 0
    a = MassState(torch.tensor([1.0, 0.0], dtype=F64), *(torch.tensor(x, dtype=F64) for x in (0.0, 0.0, 0.0)))
    b = MassState(torch.tensor([0.0, 1.0], dtype=F64), *(torch.tensor(x, dtype=F64) for x in (0.0, 0.0, 0.0)))
    for rule in RULES:
        state, k = combine(a, b, lam=0.6, rule=rule)
        assert float(k) == 1.0
        assert state.singletons.tolist() == [0.0, 0.0]
        assert float(state.theta) == 1.0, rule  # the paper's formula would keep only λK = 0.6
        assert float(state.conflict) == 1.0 and float(state.ignorance) == 0.0


def test_huge_evidence_keeps_masses_exact():
    r = fuse(opinions_from_evidence(torch.tensor([[1e12, 0.0], [0.0, 1e12]])), lam=0.6)
    total = r.belief.sum() + r.uncertainty
    assert abs(float(total) - 1.0) < 1e-6
    assert math.isclose(float(r.uncertainty), 0.6, abs_tol=1e-5)  # ~ all conflict, λ of it to Θ
    assert math.isclose(float(r.belief[0]), 0.2, abs_tol=1e-5)


# --- edge cases ----------------------------------------------------------------------------------


def test_no_chunks_and_empty_frame_are_vacuous():
    for ev in (torch.zeros(0, 3), torch.zeros(4, 0), torch.zeros(0, 0)):
        r = fuse(opinions_from_evidence(ev))
        assert float(r.uncertainty) == 1.0 and float(r.ignorance) == 1.0 and float(r.conflict) == 0.0
        assert float(r.confidence) == 0.0 and int(r.selected) == -1
        assert r.step_conflict.shape[-1] == max(ev.shape[0] - 1, 0)


def test_single_chunk_is_its_own_opinion():
    op = opinions_from_evidence(torch.tensor([[4.0, 1.0, 0.0]], dtype=F64))
    r = fuse(op)
    assert torch.equal(r.belief, op.belief[0]) and torch.equal(r.uncertainty, op.vacuity[0])
    assert r.step_conflict.shape == (0,)


def test_single_real_chunk_after_padding_is_exact():
    ev = torch.tensor([[[0.0, 0.0], [4.0, 1.0], [9.0, 9.0]]], dtype=F64)
    op = opinions_from_evidence(ev, chunk_mask=torch.tensor([[False, True, False]]))
    r = fuse(op)
    assert torch.equal(r.belief[0], op.belief[0, 1]) and torch.equal(r.uncertainty[0], op.vacuity[0, 1])
    assert r.step_conflict.tolist() == [[0.0, 0.0]]


def test_bad_arguments():
    op = opinions_from_evidence(torch.ones(2, 2))
    with pytest.raises(ConfigError, match="lam"):
        fuse(op, lam=1.5)
    with pytest.raises(UnknownNameError, match="lambda, yager|dempster, lambda, yager"):
        fuse(op, rule="nope")
    with pytest.raises(TypeError, match="opinions_from_evidence"):
        fuse(torch.ones(2, 2))
    with pytest.raises(ShapeError, match="chunk_mask"):
        fuse(op, chunk_mask=torch.ones(3, dtype=torch.bool))


# --- properties ----------------------------------------------------------------------------------

evidence_value = st.one_of(st.just(0.0), st.floats(0, 10), st.floats(0, 1e12))


@st.composite
def query_evidence(draw, max_k=6, max_m=5):
    k = draw(st.integers(0, max_k))
    m = draw(st.integers(0, max_m))
    return [[draw(evidence_value) for _ in range(m)] for _ in range(k)], m


@given(
    query_evidence(), st.floats(0, 1), st.sampled_from(RULES), st.sampled_from([torch.float32, torch.float64])
)
def test_masses_are_a_distribution_and_decomposition_adds_up(q, lam, rule, dtype):
    ev, m = q
    r = fuse(opinions_from_evidence(torch.tensor(ev, dtype=dtype).reshape(len(ev), m)), lam=lam, rule=rule)
    masses = r.masses
    assert ((masses >= 0) & (masses <= 1 + 1e-6)).all()
    assert abs(float(masses.sum()) - 1.0) < 1e-6
    assert abs(float(r.ignorance + r.conflict - r.uncertainty)) < 1e-6
    assert float(r.ignorance) >= 0 and float(r.conflict) >= -1e-7
    assert ((r.step_conflict >= 0) & (r.step_conflict <= 1)).all()


@given(query_evidence(), st.floats(0, 1), st.sampled_from(RULES))
def test_matches_plain_python_reference(q, lam, rule):
    ev, m = q
    r = fuse(opinions_from_evidence(torch.tensor(ev, dtype=F64).reshape(len(ev), m)), lam=lam, rule=rule)
    ref = reference_fuse(ev, lam, rule)
    # K is summed without cancellation, so even evidence up to 1e12 matches the plain double loop
    tol = 1e-9
    assert _close(r.uncertainty, ref["uncertainty"], tol) and _close(r.ignorance, ref["ignorance"], tol)
    assert _close(r.conflict, ref["conflict"], tol)
    if ev:
        assert _close(r.belief, ref["belief"], tol) and _close(r.step_conflict, ref["step_conflict"], tol)
        assert _close(r.mean_pairwise_conflict, ref["mean_pairwise_conflict"], tol)


@given(query_evidence(), st.sampled_from([torch.float32, torch.float64]))
def test_lambda_one_equals_yager(q, dtype):
    ev, m = q
    op = opinions_from_evidence(torch.tensor(ev, dtype=dtype).reshape(len(ev), m))
    a, b = fuse(op, lam=1.0, rule="lambda"), fuse(op, rule="yager")
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    for x, y in (
        (a.belief, b.belief),
        (a.uncertainty, b.uncertainty),
        (a.conflict, b.conflict),
        (a.ignorance, b.ignorance),
    ):
        assert torch.allclose(x, y, atol=tol, rtol=0)


@given(st.lists(query_evidence(), min_size=1, max_size=6), st.floats(0, 1), st.sampled_from(RULES))
def test_batched_with_padding_equals_per_query_loop(queries, lam, rule):
    items = [torch.tensor(ev, dtype=F64).reshape(len(ev), m) for ev, m in queries]
    evidence, claim_mask, chunk_mask = pad_evidence(items, num_claims=[m for _, m in queries])
    # garbage at padded positions must not matter, not even NaN
    evidence = torch.where(
        claim_mask.unsqueeze(1) & chunk_mask.unsqueeze(2), evidence, torch.full_like(evidence, float("nan"))
    )
    batched = fuse(opinions_from_evidence(evidence, claim_mask, chunk_mask), lam=lam, rule=rule)
    for i, x in enumerate(items):
        one = fuse(opinions_from_evidence(x), lam=lam, rule=rule)
        m, k = x.shape[1], x.shape[0]
        assert _close(batched.belief[i, :m], one.belief, 1e-12)
        assert (batched.belief[i, m:] == 0).all()
        for name in ("uncertainty", "ignorance", "conflict", "mean_pairwise_conflict", "confidence"):
            assert _close(getattr(batched, name)[i], getattr(one, name), 1e-12), name
        assert _close(batched.step_conflict[i, : max(k - 1, 0)], one.step_conflict, 1e-12)
        assert int(batched.selected[i]) == int(one.selected)


def test_padding_chunks_anywhere_is_invariant():
    ev = torch.tensor([[2.0, 0.5], [0.0, 4.0], [1.0, 1.0]], dtype=F64)
    ref = _fuse(ev)
    padded = torch.zeros(6, 2, dtype=F64)
    padded[[0, 2, 5]] = ev
    padded[[1, 3, 4]] = 7.0
    mask = torch.tensor([True, False, True, False, False, True])
    r = fuse(opinions_from_evidence(padded), chunk_mask=mask)
    assert _close(r.belief, ref.belief) and _close(r.uncertainty, ref.uncertainty)
    assert _close(r.mean_pairwise_conflict, ref.mean_pairwise_conflict)


def test_lambda_tensor_fuses_a_sweep_in_one_call():
    ev = torch.tensor([[3.0, 0.0], [0.0, 3.0]], dtype=F64).expand(5, 2, 2)
    lams = torch.linspace(0, 1, 5, dtype=F64)
    r = fuse(opinions_from_evidence(ev), lam=lams)
    assert _close(r.uncertainty, 0.16 + 0.36 * lams)


# --- differentiability ---------------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES)
def test_gradcheck_through_fuse(rule):
    torch.manual_seed(0)
    ev = (torch.rand(2, 4, 3, dtype=F64) * 5 + 0.1).requires_grad_()
    claim_mask = torch.tensor([[True, True, True], [True, True, False]])
    chunk_mask = torch.tensor([[True, True, True, True], [True, False, True, True]])

    def f(e):
        r = fuse(opinions_from_evidence(e, claim_mask, chunk_mask), lam=0.6, rule=rule)
        return r.belief, r.uncertainty, r.ignorance, r.conflict, r.mean_pairwise_conflict

    assert torch.autograd.gradcheck(f, (ev,))


def test_gradcheck_through_lambda():
    ev = torch.tensor([[3.0, 0.5], [0.2, 3.0], [1.0, 1.0]], dtype=F64)
    op = opinions_from_evidence(ev)
    lam = torch.tensor(0.4, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: fuse(op, lam=x).uncertainty, (lam,))


def test_float32_and_float64_agree():
    torch.manual_seed(1)
    ev = torch.rand(64, 5, 8) * 10
    a = fuse(opinions_from_evidence(ev))
    b = fuse(opinions_from_evidence(ev.double()))
    assert a.belief.dtype == torch.float32 and b.belief.dtype == F64
    assert torch.allclose(a.belief.double(), b.belief, atol=1e-5)
    assert torch.allclose(a.uncertainty.double(), b.uncertainty, atol=1e-5)


@pytest.mark.gpu
def test_cuda_matches_cpu():
    torch.manual_seed(2)
    ev = torch.rand(128, 5, 8, dtype=F64) * 10
    mask = torch.rand(128, 5) > 0.2
    cpu = fuse(opinions_from_evidence(ev, chunk_mask=mask))
    gpu = fuse(opinions_from_evidence(ev.cuda(), chunk_mask=mask.cuda()))
    assert gpu.belief.is_cuda
    assert torch.allclose(gpu.belief.cpu(), cpu.belief, atol=1e-12)
    assert torch.allclose(gpu.uncertainty.cpu(), cpu.uncertainty, atol=1e-12)


@pytest.mark.gpu
def test_cuda_float32_and_gradcheck():
    torch.manual_seed(3)
    ev = torch.rand(64, 5, 8) * 10
    cpu = fuse(opinions_from_evidence(ev))
    gpu = fuse(opinions_from_evidence(ev.cuda()))
    assert gpu.belief.dtype == torch.float32 and gpu.belief.is_cuda
    assert torch.allclose(gpu.belief.cpu(), cpu.belief, atol=1e-5)
    x = (torch.rand(2, 3, 4, dtype=F64, device="cuda") * 5).requires_grad_()
    assert torch.autograd.gradcheck(lambda e: fuse(opinions_from_evidence(e)).uncertainty, (x,))
