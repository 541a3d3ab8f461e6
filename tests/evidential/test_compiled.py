import math

import pytest
import torch

from evidential import InvalidEvidenceError, ShapeError, fuse, fuse_evidence, opinions_from_evidence
from evidential.fusion import sum_of_others


@pytest.mark.parametrize("m", [0, 1, 3, 8, 40])
def test_sum_of_others_both_branches(m):
    x = torch.rand(4, 3, m, dtype=torch.float64)
    want = x.sum(-1, keepdim=True) - x
    assert torch.allclose(sum_of_others(x), want, atol=1e-12)


def _same(a, b, tol):
    for name in (
        "belief",
        "uncertainty",
        "ignorance",
        "conflict",
        "step_conflict",
        "mean_pairwise_conflict",
        "confidence",
    ):
        assert getattr(a, name).dtype == getattr(b, name).dtype, name
        assert torch.allclose(getattr(a, name), getattr(b, name), atol=tol, rtol=0), name
    assert torch.equal(a.selected, b.selected)
    assert torch.equal(a.claim_mask, b.claim_mask)


@pytest.mark.parametrize("rule", ["lambda", "yager", "dempster"])
def test_eager_fuse_evidence_equals_fuse(rule):
    torch.manual_seed(0)
    ev = torch.rand(50, 5, 6, dtype=torch.float64) * 10
    cm = torch.rand(50, 6) > 0.3
    km = torch.rand(50, 5) > 0.3
    _same(
        fuse_evidence(ev, 0.4, rule, cm, km),
        fuse(opinions_from_evidence(ev, cm, km), lam=0.4, rule=rule),
        1e-12,
    )
    _same(fuse_evidence(ev, 0.4, rule), fuse(opinions_from_evidence(ev), lam=0.4, rule=rule), 1e-12)
    lean = fuse_evidence(ev, 0.4, rule, pairwise=False)
    assert bool(lean.mean_pairwise_conflict.isnan().all())


def test_compiled_path_matches_the_eager_reference():
    """Every compiled check in ONE test on tiny shapes: each (rule, masks, dtype, k, M) is a compilation of
    seconds, paid again by every pytest worker that compiles. test_columns.py checks the compiled function's
    equations eagerly on every rule and edge case, and their gradients."""
    torch.manual_seed(1)
    ev = torch.rand(300, 3, 3) * 10
    ev[ev < 3] = 0
    cm = torch.rand(300, 3) > 0.2
    km = torch.rand(300, 3) > 0.2
    ev[0] = 0  # all-zero evidence
    km[1] = False  # no real chunk
    km[2, 1:] = False  # one real chunk
    cm[3] = False  # empty frame
    for kw in ({}, {"claim_mask": cm, "chunk_mask": km}):
        for lam in (0.0, 0.6, 1.0):
            eager = fuse_evidence(ev, lam, **kw)
            compiled = fuse_evidence(ev, lam, compiled=True, **kw)
            _same(compiled, eager, 2e-6)
    # leading batch dims are flattened and restored; all-true masks are dropped (same graph as no mask)
    ev4 = ev[:12].reshape(3, 4, 3, 3)
    _same(
        fuse_evidence(ev4, 0.6, compiled=True, chunk_mask=torch.ones(3, 4, 3, dtype=torch.bool)),
        fuse(opinions_from_evidence(ev4), lam=0.6),
        2e-6,
    )
    # the evidence check inside the compiled loop hands over to the full check (same graph)
    bad = ev[:20].clone()
    bad[3, 2, 1] = math.nan
    with pytest.raises(InvalidEvidenceError, match=r"evidence\[3, 2, 1\]"):
        fuse_evidence(bad, 0.6, compiled=True)
    with pytest.warns(RuntimeWarning, match="sanitized 1"):
        got = fuse_evidence(bad, 0.6, compiled=True, sanitize=True)
    _same(got, fuse(opinions_from_evidence(bad.nan_to_num(0.0)), lam=0.6), 2e-6)
    bad[3, 2, :2] = 3e38  # finite, but the sum overflows: the full check finds nothing wrong
    _same(fuse_evidence(bad, 0.6, compiled=True), fuse(opinions_from_evidence(bad), lam=0.6), 2e-6)


def test_fuse_evidence_validates():
    with pytest.raises(ShapeError):
        fuse_evidence(torch.ones(3))
    with pytest.raises(ValueError, match=r"evidence\[0, 1\]"):
        fuse_evidence(torch.tensor([[1.0, -2.0]]))
