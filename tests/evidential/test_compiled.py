import pytest
import torch

from evidential import ShapeError, fuse, fuse_evidence, opinions_from_evidence
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
        assert torch.allclose(getattr(a, name), getattr(b, name), atol=tol, rtol=0), name
    assert torch.equal(a.selected, b.selected)


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


def test_compiled_path_matches_the_eager_reference():
    torch.manual_seed(1)
    ev = torch.rand(300, 5, 8) * 10
    ev[ev < 3] = 0
    cm = torch.rand(300, 8) > 0.2
    km = torch.rand(300, 5) > 0.2
    for kw in ({}, {"claim_mask": cm, "chunk_mask": km}):
        eager = fuse_evidence(ev, 0.6, **kw)
        compiled = fuse_evidence(ev, 0.6, compiled=True, **kw)
        _same(compiled, eager, 2e-6)


def test_fuse_evidence_validates():
    with pytest.raises(ShapeError):
        fuse_evidence(torch.ones(3))
    with pytest.raises(ValueError, match=r"evidence\[0, 1\]"):
        fuse_evidence(torch.tensor([[1.0, -2.0]]))
