"""ECE, stated claims and RAMDocs strict exact match."""

from __future__ import annotations

import pytest

from training.utils.metrics import expected_calibration_error, stated_claims, strict_exact_match


def test_ece_hand_computed():
    # bins of width 1/15: 0.9 -> bin 13 (acc 0.5, conf 0.9), 0.2 -> bin 2 (acc 0, conf 0.2)
    assert expected_calibration_error([0.9, 0.9, 0.2], [True, False, False]) == pytest.approx(
        2 / 3 * 0.4 + 1 / 3 * 0.2
    )
    assert expected_calibration_error([1.0, 1.0], [True, True]) == 0.0  # 1.0 falls in the last bin
    assert expected_calibration_error([0.0], [True]) == 1.0
    assert expected_calibration_error([], []) == 0.0
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        expected_calibration_error([1.5], [True])


def test_stated_claims_by_route():
    claims, masses = ["A", "B", "C"], [0.5, 0.15, 0.05]
    assert stated_claims(claims, masses, "direct", 0) == ["A"]
    assert stated_claims(claims, masses, "conflict", 0) == ["A", "B"]
    assert stated_claims(claims, masses, "abstain", 0) == []


def test_strict_exact_match():
    assert strict_exact_match(["Paris", "Lyon"], ["paris", "the lyon"], ["Nice"])
    assert not strict_exact_match(["Paris"], ["paris", "lyon"])
    assert not strict_exact_match(["Paris", "Nice"], ["paris"], ["nice"])
    assert not strict_exact_match([], [])
