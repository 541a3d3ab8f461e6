"""The calibration file format: the shipped calibration.json reads, round-trips and applies as written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from training.calibration import (
    CALIBRATION_FORMAT,
    CALIBRATION_VERSION,
    Calibration,
    CalibrationError,
    apply_evidence_transform,
    isotonic_map,
    read_calibration,
)

SHIPPED = Path(__file__).resolve().parents[3] / "checkpoints" / "learned-minilm" / "calibration.json"


def test_shipped_calibration_round_trips_and_applies():
    raw = json.loads(SHIPPED.read_text(encoding="utf-8"))
    cal = read_calibration(SHIPPED)
    assert cal.to_dict() == raw  # the format is a contract: nothing added, dropped or renamed
    p = raw["parameters"]
    assert (cal.scale, cal.power, cal.lam, cal.tau1, cal.tau2) == (
        p["scale"],
        p["power"],
        p["lam"],
        p["tau1"],
        p["tau2"],
    )
    ev = torch.tensor([[0.0, 0.5, 2.0], [3.0, 0.0, 1.0]], dtype=torch.float64)
    assert torch.allclose(cal.apply_to_evidence(ev), p["scale"] * ev ** p["power"], rtol=0, atol=1e-12)
    conf = np.array([0.0, 0.05, 0.3, 0.7, 1.0])
    want = np.where(conf > 0, np.interp(conf, p["isotonic"]["x"], p["isotonic"]["y"]), 0.0)
    # the shipped file maps the stated set's fused mass (confidence_input "stated"), not the top mass
    assert cal.confidence_input == p["confidence_input"] == "stated"
    assert np.array_equal(cal.calibrated_confidence(np.zeros(5), conf), want)
    assert cal.calibrated_confidence(0.9, 0.3) == float(want[2])
    # a map per answering route with enough validation answers (the shipped fit routes most of them to
    # conflict, so only that route has its own): its answers take it, the other routes the pooled map
    assert p["isotonic_routes"] and cal.isotonic_routes == p["isotonic_routes"]
    assert set(p["isotonic_routes"]) <= {"direct", "conflict"}
    for name, m in p["isotonic_routes"].items():
        assert cal.calibrated_confidence(0.9, 0.3, name) == float(np.interp(0.3, m["x"], m["y"]))
    for name in {"direct", "conflict", "abstain"} - set(p["isotonic_routes"]):
        assert cal.calibrated_confidence(0.9, 0.3, name) == float(want[2])
    witness = p["state_witness_ratio"]
    assert cal.fusion_overrides() == {
        "lam": p["lam"],
        "tau1": p["tau1"],
        "tau2": p["tau2"],
        "state_ratio": p["state_ratio"],
        "state_ratio_yes_no": p["state_ratio_yes_no"],
        "state_witness_ratio": None if witness == "off" else witness,
    }
    # fitted on WikiContradict's conflicts too (both sides gold, calibration only)
    assert raw["data"]["conflict_gold"] is True and raw["data"]["conflict_queries_given_gold"] > 0
    # and on ConflictQA's two sides (memory vs counter-memory passages) as conflicts
    assert raw["data"]["side_conflicts"] is True


def test_apply_helpers_by_hand():
    e = torch.tensor([0.0, 1.0, 4.0])
    assert apply_evidence_transform(e, 2.0, 0.5).tolist() == [0.0, 2.0, 4.0]
    assert apply_evidence_transform(e).tolist() == [0.0, 1.0, 4.0]
    with pytest.raises(CalibrationError, match="finite and > 0"):
        apply_evidence_transform(e, 0.0)
    iso = {"x": [0.2, 0.6], "y": [0.1, 0.9]}
    assert isotonic_map(0.4, iso) == pytest.approx(0.5)
    assert isotonic_map(0.0, iso) == 0.0 and isotonic_map(0.9, iso) == 0.9  # 0 stays 0; beyond x: last y
    assert isotonic_map(0.4, None) == 0.4
    t = isotonic_map(torch.tensor([0.1, 0.4]), iso)
    assert t.tolist() == pytest.approx([0.1, 0.5])


def test_read_calibration_refuses_bad_files(tmp_path):
    with pytest.raises(CalibrationError, match="not found"):
        read_calibration(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(CalibrationError, match="corrupted calibration file"):
        read_calibration(bad)
    old = tmp_path / "old.json"
    d = Calibration(evaluator="learned").to_dict()
    assert (d["format"], d["version"]) == (CALIBRATION_FORMAT, CALIBRATION_VERSION)
    old.write_text(json.dumps({**d, "version": 99}), encoding="utf-8")
    with pytest.raises(CalibrationError, match=r"old.json: calibration version 99 is not supported"):
        read_calibration(old)


@pytest.mark.parametrize("key", ["rule", "policy"])
@pytest.mark.parametrize("value", [[], ["lambda"], {"a": 1}, [[[]]]])
def test_unhashable_rule_or_policy_is_a_calibration_error(key, value):
    # found by the CI fuzzer: a list where a registry name belongs raised TypeError
    with pytest.raises(CalibrationError, match=rf"parameters\.{key}: unknown"):
        Calibration(evaluator="learned", **{key: value})
