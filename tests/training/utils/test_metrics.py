"""Reliability bins, ECE, stated claims and RAMDocs strict exact match."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from training.utils.metrics import (
    expected_calibration_error,
    reliability_bins,
    span_matches,
    stated_claims,
    strict_exact_match,
)
from training.utils.text import normalize_text


def test_reliability_bins_hand_computed():
    # 4 bins of width 0.25: (0, .25] holds 0 and 0.25, (.25, .5] 0.3, (.75, 1] 0.8 and 1.0
    bins = reliability_bins([0.0, 0.25, 0.3, 0.8, 1.0], [False, True, True, False, True], n_bins=4)
    assert bins.count.tolist() == [2, 1, 0, 2]
    assert bins.confidence[0] == pytest.approx(0.125) and bins.accuracy[0] == 0.5
    assert bins.confidence[1] == pytest.approx(0.3) and bins.accuracy[1] == 1.0
    assert math.isnan(bins.confidence[2]) and math.isnan(bins.accuracy[2])
    assert bins.confidence[3] == pytest.approx(0.9) and bins.accuracy[3] == 0.5
    # ECE = 2/5 |0.5 - 0.125| + 1/5 |1 - 0.3| + 2/5 |0.5 - 0.9|
    assert expected_calibration_error(
        [0.0, 0.25, 0.3, 0.8, 1.0], [False, True, True, False, True], n_bins=4
    ) == pytest.approx(0.4 * 0.375 + 0.2 * 0.7 + 0.4 * 0.4)
    empty = reliability_bins([], [], n_bins=3)
    assert empty.count.tolist() == [0, 0, 0] and np.isnan(empty.accuracy).all()
    with pytest.raises(ValueError, match="differ in length"):
        reliability_bins([0.5], [True, False])
    with pytest.raises(ValueError, match="n_bins"):
        reliability_bins([0.5], [True], n_bins=0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.0, 1.0, allow_nan=False), st.booleans()),
        min_size=1,
        max_size=40,
    ),
    st.integers(1, 20),
)
def test_ece_is_the_bin_weighted_gap_and_lies_in_0_1(pairs, n_bins):
    conf = [c for c, _ in pairs]
    ok = [k for _, k in pairs]
    ece = expected_calibration_error(conf, ok, n_bins)
    bins = reliability_bins(conf, ok, n_bins)
    assert 0.0 <= ece <= 1.0
    assert int(bins.count.sum()) == len(pairs)
    has = bins.count > 0
    expected = float(np.sum(bins.count[has] / len(pairs) * np.abs(bins.accuracy[has] - bins.confidence[has])))
    assert ece == pytest.approx(expected, abs=1e-12)


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
    assert stated_claims(claims, masses, "conflict", 0) == ["A"]  # B is under half of A's mass
    assert stated_claims(claims, masses, "conflict", 0, ratio=0.3) == ["A", "B"]
    assert stated_claims(claims, masses, "conflict", 0, ratio=0.0) == ["A", "B", "C"]
    assert stated_claims(claims, [0.2, 0.5, 0.3], "direct", 0) == ["A", "B", "C"]  # selected claim first
    assert stated_claims(claims, masses, "abstain", 0) == []


def test_stated_claims_add_witnesses_in_open_frames_only():
    claims, masses = ["A", "B", "C"], [0.5, 0.15, 0.05]
    assert stated_claims(claims, masses, "direct", 0, witnessed=[False, False, True]) == ["A", "C"]
    assert stated_claims(claims, masses, "abstain", 0, witnessed=[True, True, True]) == []
    # a yes/no verdict excludes the other one: its bar alone decides
    assert stated_claims(["yes", "no"], [0.6, 0.1], "direct", 0, 0.5, witnessed=[True, True]) == ["yes"]


def test_strict_exact_match():
    assert strict_exact_match(["Paris", "Lyon"], ["paris", "the lyon"], ["Nice"])
    assert not strict_exact_match(["Paris"], ["paris", "lyon"])
    assert not strict_exact_match(["Paris", "Nice"], ["paris"], ["nice"])
    assert not strict_exact_match([], [])


def test_span_matches_on_real_cuts():
    # the cuts the issue lists: a truncated name or date still overlaps its label on word boundaries
    assert span_matches("Ahmed", "Ahmed Hussen") and span_matches("Aguadilla, Puerto Rico", "Puerto Rico")
    assert span_matches("the Killers", "The Killers.")  # SQuAD normalisation: articles, case, punctuation
    assert not span_matches("footballer", "Football") and not span_matches("12,878", "4,411")
    assert not span_matches("basketball", "AFL") and not span_matches(None, "AFL")


@given(st.text(max_size=30), st.text(max_size=30))
@settings(max_examples=200, deadline=None)
def test_span_matches_is_symmetric_and_reflexive(a, b):
    assert span_matches(a, b) == span_matches(b, a)
    assert span_matches(a, a) == bool(normalize_text(a))
