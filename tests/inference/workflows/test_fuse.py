"""`fuse_evidence`, the computation behind `evidential-rag fuse`."""

from __future__ import annotations

import math

import pytest

from evidential.config import FusionConfig
from evidential.errors import EvidentialError
from inference.workflows.fuse import fuse_evidence


def test_fuse_evidence_yager_design_vector():
    out, caught = fuse_evidence([[3, 0], [0, 3]], ["a", "b"], FusionConfig(rule="yager"))
    assert caught == []
    # each chunk: b = 3/5, u = 2/5; yager moves the conflict K = 0.6 * 0.6 to Θ
    assert out["opinions"][0] == {"chunk": 0, "belief": {"a": 0.6, "b": 0.0}, "vacuity": 0.4}
    assert out["fused"]["belief"] == {"a": 0.24, "b": 0.24}
    assert out["U_global"] == 0.52 and out["ignorance"] == 0.16 and out["conflict"] == 0.36
    assert out["step_conflict"] == [0.36] and out["route"] == "conflict"
    assert out["config"]["rule"] == "yager" and out["claims"] == ["a", "b"]


def test_fuse_evidence_no_chunks_and_sanitize():
    out, _ = fuse_evidence([], ["a"], FusionConfig())
    assert out["opinions"] == [] and out["U_global"] == 1.0 and out["selected_claim"] is None
    out, caught = fuse_evidence([[math.nan, 2.0]], ["a", "b"], FusionConfig(sanitize=True))
    assert caught == [
        "sanitized 1 NaN/infinite/negative evidence value(s) to 0 (ignorance); first at evidence[0, 0] = nan"
    ]
    with pytest.raises(EvidentialError, match=r"evidence\[0, 0\]"):
        fuse_evidence([[-1.0, 2.0]], ["a", "b"], FusionConfig())
