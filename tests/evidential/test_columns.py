"""The column form of opinions + fusion (what ``fuse_evidence(compiled=True)`` compiles), run eagerly against
the tensor reference: cheap, so every rule, mask and edge case is checked here; test_compiled.py checks that
compiling it changes nothing."""

import pytest
import torch

from evidential import COLUMN_RULES, FUSION_RULES, fuse, fuse_columns, opinions_from_evidence
from evidential.columns import others_columns
from evidential.fusion import sum_of_others

FIELDS = (
    "belief",
    "uncertainty",
    "ignorance",
    "conflict",
    "step_conflict",
    "mean_pairwise_conflict",
    "confidence",
)


def edge_batch(k: int, m: int, dtype=torch.float64, seed: int = 0):
    """Random evidence with edge-case queries: all-zero evidence, no real chunk, one real chunk, one real
    claim, total conflict (huge evidence on different claims), and per-query λ including 0 and 1."""
    g = torch.Generator().manual_seed(seed)
    n = 24
    ev = (torch.rand(n, k, m, generator=g, dtype=dtype) * 6).where(
        torch.rand(n, k, m, generator=g) > 0.4, torch.zeros((), dtype=dtype)
    )
    cm = torch.rand(n, m, generator=g) > 0.25
    km = torch.rand(n, k, generator=g) > 0.25
    ev[0] = 0  # all-zero evidence
    km[1] = False  # no real chunk
    km[2] = False
    km[2, k - 1] = True  # one real chunk (the last)
    cm[3] = False
    cm[3, 0] = True  # one real claim
    cm[4] = False  # empty frame
    ev[5] = 0
    for i in range(k):  # total conflict: chunk i backs claim i mod M with huge evidence
        ev[5, i, i % m] = 1e9
    cm[5], km[5] = True, True
    lam = torch.rand(n, generator=g, dtype=dtype)
    lam[::3], lam[1::3] = 0.0, 1.0
    return ev, cm, km, lam


def run_columns(ev, lam, rule, cm=None, km=None, pairwise=True):
    """``fuse_columns`` on a flat batch, eagerly."""
    return fuse_columns(ev, cm, km, torch.as_tensor(lam, dtype=ev.dtype), rule, pairwise)


def assert_matches(out, ref, tol):
    for name, got in zip(FIELDS, out[:7]):
        want = getattr(ref, name)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert torch.allclose(got, want, atol=tol, rtol=0), (name, float((got - want).abs().max()))
    assert torch.equal(out[7], ref.selected)
    assert bool(out[8])


def test_every_pairwise_rule_has_a_column_form():
    assert set(COLUMN_RULES.names()) == set(FUSION_RULES.names())


@pytest.mark.parametrize("m", [1, 2, 5, 9])
def test_others_columns_equal_sum_of_others(m):
    x = torch.rand(7, m, dtype=torch.float64)
    got = torch.stack(others_columns(list(x.unbind(-1))), -1)
    assert torch.equal(got, sum_of_others(x))


@pytest.mark.parametrize("rule", sorted(COLUMN_RULES.names()))
@pytest.mark.parametrize("k,m", [(1, 3), (2, 1), (4, 3)])
def test_columns_match_the_tensor_reference(rule, k, m):
    ev, cm, km, lam = edge_batch(k, m)
    ref = fuse(opinions_from_evidence(ev, cm, km), lam=lam, rule=rule)
    assert_matches(run_columns(ev, lam, rule, cm, km), ref, 1e-12)
    ref = fuse(opinions_from_evidence(ev), lam=lam, rule=rule)
    assert_matches(run_columns(ev, lam, rule), ref, 1e-12)
    # only one kind of mask, and a scalar λ
    ref = fuse(opinions_from_evidence(ev, chunk_mask=km), lam=0.3, rule=rule)
    assert_matches(run_columns(ev, 0.3, rule, km=km), ref, 1e-12)
    ref = fuse(opinions_from_evidence(ev, claim_mask=cm), lam=0.3, rule=rule)
    assert_matches(run_columns(ev, 0.3, rule, cm=cm), ref, 1e-12)


def test_columns_float32_and_without_the_pairwise_diagnostic():
    ev, cm, km, _ = edge_batch(5, 8, torch.float32)
    ref = fuse(opinions_from_evidence(ev, cm, km), lam=0.6)
    out = run_columns(ev, 0.6, "lambda", cm, km)
    assert_matches(out, ref, 1e-6)
    lean = run_columns(ev, 0.6, "lambda", cm, km, pairwise=False)
    assert lean[5] is None
    for a, b in zip(lean[:5] + lean[6:8], out[:5] + out[6:8]):
        assert torch.equal(a, b)


def test_columns_flag_bad_evidence():
    ev = torch.rand(3, 2, 2)
    assert bool(fuse_columns(ev, None, None, torch.tensor(0.5))[-1])
    for bad in (float("nan"), float("inf"), -1.0):
        e = ev.clone()
        e[1, 0, 1] = bad
        assert not bool(fuse_columns(e, None, None, torch.tensor(0.5))[-1])


@pytest.mark.parametrize("rule", sorted(COLUMN_RULES.names()))
def test_columns_gradients(rule):
    g = torch.Generator().manual_seed(3)
    ev = (torch.rand(3, 3, 2, generator=g, dtype=torch.float64) * 4 + 0.1).requires_grad_()
    lam = torch.tensor([0.2, 0.6, 0.9], dtype=torch.float64, requires_grad=True)
    km = torch.tensor([[True, True, True], [True, False, True], [True, True, True]])

    def f(e, lam_):
        out = fuse_columns(e, None, km, lam_, rule)
        return out[0], out[1], out[3], out[4], out[5]

    assert torch.autograd.gradcheck(f, (ev, lam))
