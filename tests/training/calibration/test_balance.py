"""The source-balanced fit of the evidence scale and of the thresholds, and the evidence power chosen by the
stated sets: hand-computed cases and the property that the kept power is the best of its candidates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from training.calibration import (
    POWER_GRID,
    CalibrationData,
    evaluate_parameters,
    fit_calibration,
    fit_evidence_scale,
    fit_thresholds,
)


def _open(n=60, seed=4):
    """Random one- to three-chunk queries over three claims, each with a gold claim but every fifth."""
    g = torch.Generator().manual_seed(seed)
    evs = [torch.rand(1 + i % 3, 3, generator=g, dtype=torch.float64) * 4 for i in range(n)]
    gold = [[i % 3] if i % 5 else None for i in range(n)]
    expected = [("direct", "conflict")[i % 2] for i in range(n)]
    return CalibrationData.from_queries(evs, gold, expected, [f"ramdocs:{i}" for i in range(n)])


def test_fit_thresholds_weighs_each_source_equally():
    """Five one-chunk queries with the same evidence (U = 1 / (1 + 1) = 0.5: one route for all): three of
    source a call for a conflict-aware answer, one each of b and c for a direct answer. Counted per query the
    conflict route wins 3 : 2; each source weighted equally the direct route wins 2/3 : 1/3."""
    evs, gold = [torch.tensor([[1.0]], dtype=torch.float64)] * 5, [[0]] * 5
    expected = ["conflict"] * 3 + ["direct"] * 2
    d = CalibrationData.from_queries(evs, gold, expected, ["a:1", "a:2", "a:3", "b:1", "c:1"])
    fit = fit_thresholds(d, prior=(0.6, 0.35, 0.65))
    assert fit.tau1 > 0.5 and fit.route_accuracy == pytest.approx(2 / 3)
    one_source = CalibrationData.from_queries(evs, gold, expected, [f"q:{i}" for i in range(5)])
    fit = fit_thresholds(one_source, prior=(0.6, 0.35, 0.65))
    assert fit.tau1 <= 0.5 < fit.tau2 and fit.route_accuracy == pytest.approx(3 / 5)


def test_fit_evidence_scale_weighs_each_source_equally():
    """Source a: 9 queries whose one claim (evidence 1) is always gold want a large scale (confidence → 1);
    source b: 1 query whose claim is never gold wants a small one. Weighted per source they pull equally, so
    the fitted scale is smaller than the per-query fit's."""
    evs = [torch.tensor([[1.0, 0.0]], dtype=torch.float64)] * 10
    gold = [[0]] * 9 + [[1]]
    per_query = CalibrationData.from_queries(evs, gold, ["direct"] * 10, [f"q:{i}" for i in range(10)])
    per_source = CalibrationData.from_queries(
        evs, gold, ["direct"] * 10, [f"a:{i}" for i in range(9)] + ["b:0"]
    )
    a, b = fit_evidence_scale(per_query, powers=(1.0,)), fit_evidence_scale(per_source, powers=(1.0,))
    assert b.scale < a.scale
    # a listed power alone is searched (the identity's loss is still reported)
    only = fit_evidence_scale(per_query, powers=(0.5,))
    assert only.power == 0.5 and np.isfinite(only.nll_identity)


def test_the_power_kept_states_the_right_sets_most_often():
    """fit_calibration fits the rest of the setting at each power and keeps the one whose stated sets are
    right most often: its set accuracy is the best of the powers' own fits (one source: unweighted)."""
    d = _open()
    best = fit_calibration(d, isotonic=False)

    def set_acc(fitted):
        return evaluate_parameters(d, **{k: fitted[k] for k in fitted if k != "fit"})["set_accuracy"]

    per_power = {p: set_acc(fit_calibration(d, isotonic=False, powers=(p,))) for p in POWER_GRID}
    assert best["power"] in POWER_GRID and set_acc(best) == max(per_power.values())
    assert fit_calibration(d, isotonic=False, fit_power=False)["power"] == 1.0
