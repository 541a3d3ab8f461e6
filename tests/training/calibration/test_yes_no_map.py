"""The yes/no confidence map (``isotonic_yes_no``), the source-balanced fit of the evidence scale and the
thresholds, and the power chosen by the stated sets: hand-computed cases, identities of isotonic regression
and the file format."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from training.calibration import (
    POWER_GRID,
    ROUTE_MAP_MIN_QUERIES,
    Calibration,
    CalibrationData,
    CalibrationError,
    cross_validate,
    evaluate_parameters,
    fit_calibration,
    fit_evidence_scale,
    fit_thresholds,
    isotonic_map,
)
from training.calibration.apply import calibrated_confidence, yes_no_isotonic_map

POOLED = {"x": [0.0, 1.0], "y": [0.0, 1.0]}
YES_NO = {"x": [0.2, 0.8], "y": [0.3, 0.6]}


def _mixed(n_yes_no=40, n_open=40, seed=0):
    """Random one- to three-chunk queries: ``n_yes_no`` over the frame [yes, no], ``n_open`` over three open
    claims, each with a gold claim (every fifth open query without one) and keys of two sources."""
    g = torch.Generator().manual_seed(seed)
    evs, gold, exp, keys, yn = [], [], [], [], []
    for i in range(n_yes_no + n_open):
        is_yn = i < n_yes_no
        m = 2 if is_yn else 3
        evs.append(torch.rand(1 + i % 3, m, generator=g, dtype=torch.float64) * 4)
        gold.append([i % m] if is_yn or i % 5 else None)
        exp.append(("direct", "conflict")[i % 2])
        keys.append(f"{'conflictqa' if is_yn else 'ramdocs'}:{i}")
        yn.append(is_yn)
    return CalibrationData.from_queries(evs, gold, exp, keys, yes_no=yn)


def test_yes_no_map_by_hand():
    # one flag for one confidence, one per element of an array or a tensor; others keep the route maps' value
    assert yes_no_isotonic_map(0.5, 0.9, True, YES_NO) == pytest.approx(0.45)
    assert yes_no_isotonic_map(0.5, 0.9, False, YES_NO) == 0.9
    assert (
        yes_no_isotonic_map(0.5, 0.9, True, None) == 0.9
        and yes_no_isotonic_map(0.5, 0.9, None, YES_NO) == 0.9
    )
    conf = np.array([0.5, 0.5, 0.0])
    mapped = np.array([0.9, 0.9, 0.0])
    out = yes_no_isotonic_map(conf, mapped, [True, False, True], YES_NO)
    assert out.tolist() == pytest.approx([0.45, 0.9, 0.0])  # nothing stated stays 0
    assert mapped.tolist() == [0.9, 0.9, 0.0]  # the input is not modified
    t = yes_no_isotonic_map(
        torch.tensor([0.1, 0.9]), torch.tensor([0.2, 0.7]), torch.tensor([True, True]), YES_NO
    )
    assert t.tolist() == pytest.approx([0.3, 0.6])  # clipped outside the breakpoints
    with pytest.raises(CalibrationError, match="got 1 yes/no flags for 3 confidences"):
        yes_no_isotonic_map(conf, mapped, [True], YES_NO)
    # through calibrated_confidence: the yes/no map replaces the route maps, the reader map still follows
    assert calibrated_confidence(0.5, "conflict", POOLED, None, None, None, True, YES_NO) == pytest.approx(
        0.45
    )
    assert calibrated_confidence(0.5, "conflict", POOLED, None, None, None, False, YES_NO) == 0.5


def test_yes_no_map_in_the_calibration_file():
    cal = Calibration(evaluator="learned", isotonic=POOLED, isotonic_yes_no=YES_NO)
    assert cal.calibrated_confidence(0.5, route="direct", yes_no=True) == pytest.approx(0.45)
    assert cal.calibrated_confidence(0.5, route="direct", yes_no=False) == 0.5
    assert cal.calibrated_confidence(0.5, route="direct") == 0.5  # no flag: not a yes/no answer
    got = cal.calibrated_confidence(np.array([0.5, 0.5]), route=["direct", "conflict"], yes_no=[True, False])
    assert got.tolist() == pytest.approx([0.45, 0.5])
    back = Calibration.from_dict(cal.to_dict())
    assert back.isotonic_yes_no == YES_NO and back.to_dict() == cal.to_dict()
    old = cal.to_dict()
    del old["parameters"]["isotonic_yes_no"]  # a file fitted before the yes/no map reads as none
    assert Calibration.from_dict(old).isotonic_yes_no is None
    assert "isotonic_yes_no" not in Calibration(evaluator="learned", isotonic=POOLED).to_dict()["parameters"]
    with pytest.raises(CalibrationError, match="isotonic_yes_no needs parameters.isotonic"):
        Calibration(evaluator="learned", isotonic_yes_no=YES_NO)
    with pytest.raises(CalibrationError, match="isotonic_yes_no: x and y must be non-decreasing"):
        Calibration(evaluator="learned", isotonic=POOLED, isotonic_yes_no={"x": [0.8, 0.2], "y": [0, 1]})
    with pytest.raises(CalibrationError, match="isotonic_yes_no must be null or"):
        Calibration(evaluator="learned", isotonic=POOLED, isotonic_yes_no={"x": [2.0], "y": [0.5]})


def test_fit_calibration_fits_a_yes_no_map_on_yes_no_answers_only():
    d = _mixed()
    kw = dict(fit_power=False, route_maps=False, reader_maps=False)
    on, off = fit_calibration(d, **kw), fit_calibration(d, **kw, yes_no_maps=False)
    assert off["isotonic_yes_no"] is None and on["isotonic_yes_no"] is not None
    params = {k: on[k] for k in on if k != "fit"}
    after = evaluate_parameters(d, **params, details=True)
    raw = evaluate_parameters(d, **{**params, "isotonic": None, "isotonic_yes_no": None}, details=True)
    assert after["_correct"] == raw["_correct"] and after["route_accuracy"] == raw["route_accuracy"]
    yn = d.yes_no[d.has_gold].numpy()
    conf, raw_conf, ok = (np.array(v) for v in (after["_confidence"], raw["_confidence"], after["_correct"]))
    # each kind of answer goes through its own map
    assert conf[yn] == pytest.approx(isotonic_map(raw_conf[yn], on["isotonic_yes_no"]), abs=1e-12)
    assert conf[~yn] == pytest.approx(isotonic_map(raw_conf[~yn], on["isotonic"]), abs=1e-12)
    # isotonic regression keeps the mean in sample: on each kind, mean confidence = accuracy
    assert conf[yn].mean() == pytest.approx(ok[yn].mean(), abs=1e-9)
    assert conf[~yn].mean() == pytest.approx(ok[~yn].mean(), abs=1e-9)
    # without the yes/no map only the pooled mean is kept
    pooled = np.array(
        evaluate_parameters(d, **{k: off[k] for k in off if k != "fit"}, details=True)["_confidence"]
    )
    assert pooled.mean() == pytest.approx(ok.mean(), abs=1e-9)
    # cross-fitting applies it and changes the confidence only
    cv_on, cv_off = cross_validate(d, 4, **kw), cross_validate(d, 4, **kw, yes_no_maps=False)
    assert cv_on["_correct"] == cv_off["_correct"] and cv_on["route_accuracy"] == cv_off["route_accuracy"]


def test_too_few_yes_no_answers_get_no_map_of_their_own():
    d = _mixed(n_yes_no=ROUTE_MAP_MIN_QUERIES - 1)
    assert fit_calibration(d, fit_power=False)["isotonic_yes_no"] is None
    only_yes_no = _mixed(n_yes_no=ROUTE_MAP_MIN_QUERIES, n_open=0)
    fitted = fit_calibration(only_yes_no, fit_power=False, reader_maps=False)
    # no open answer is left: the pooled map is fitted on the yes/no answers too
    assert fitted["isotonic_yes_no"] is not None and fitted["isotonic"] == fitted["isotonic_yes_no"]


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
    d = _mixed(n_yes_no=0, n_open=60, seed=4)
    best = fit_calibration(d, isotonic=False)

    def set_acc(fitted):
        return evaluate_parameters(d, **{k: fitted[k] for k in fitted if k != "fit"})["set_accuracy"]

    per_power = {p: set_acc(fit_calibration(d, isotonic=False, powers=(p,))) for p in POWER_GRID}
    assert best["power"] in POWER_GRID and set_acc(best) == max(per_power.values())
    assert fit_calibration(d, isotonic=False, fit_power=False)["power"] == 1.0
