"""The pure calibration math (training.calibration.fit): hand-computed cases, properties, the file format."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from evidential import fuse, opinions_from_evidence, route
from evidential.routing import ROUTES
from training.calibration import (
    CALIBRATION_FORMAT,
    CALIBRATION_VERSION,
    ROUTE_MAP_MIN_QUERIES,
    SCALE_GRID,
    STATE_RATIO_GRID,
    Calibration,
    CalibrationData,
    CalibrationError,
    EvidenceCalibrator,
    apply_evidence_transform,
    checkpoint_fingerprint,
    cross_validate,
    evaluate_parameters,
    fit_calibration,
    fit_evidence_scale,
    fit_isotonic,
    fit_route_isotonic,
    fit_thresholds,
    fold_of,
    fused_outputs,
    isotonic_map,
    route_isotonic_map,
    set_hits,
)
from training.trainer.trainer import QueryExample, expected_route, score_outcomes


def _single(evidences, gold, expected):
    """Queries of one chunk each: evidence rows, gold claim lists and expected route names."""
    return CalibrationData.from_queries(
        [torch.tensor([row], dtype=torch.float64) for row in evidences], gold, expected
    )


# ---- transform and data --------------------------------------------------------------------------------
def test_evidence_transform_hand_values():
    e = torch.tensor([[4.0, 0.0], [1.0, 9.0]], dtype=torch.float64)
    assert torch.equal(apply_evidence_transform(e), e)  # identity
    assert apply_evidence_transform(e, 2.0, 0.5).tolist() == [[4.0, 0.0], [2.0, 6.0]]  # 2 · √e
    assert apply_evidence_transform(e, 0.5, 2.0).tolist() == [[8.0, 0.0], [0.5, 40.5]]  # zero stays zero
    for bad in ((0.0, 1.0), (1.0, 0.0), (-1.0, 1.0), (math.inf, 1.0), (1.0, math.nan)):
        with pytest.raises(CalibrationError, match="scale and power"):
            apply_evidence_transform(e, *bad)


def test_calibration_data_pads_and_checks():
    d = CalibrationData.from_queries(
        [torch.tensor([[1.0, 0.0, 2.0]]), torch.tensor([[3.0], [0.0]])],
        [[2], None],
        ["direct", "abstain"],
        ["q1", "q2"],
    )
    assert d.evidence.shape == (2, 2, 3) and len(d) == 2
    assert d.chunk_mask.tolist() == [[True, False], [True, True]]
    assert d.claim_mask.tolist() == [[True, True, True], [True, False, False]]
    assert d.gold.tolist() == [[False, False, True], [False, False, False]]
    assert d.has_gold.tolist() == [True, False] and d.expected.tolist() == [0, 2]
    assert d.subset([1]).keys == ["q2"]
    with pytest.raises(CalibrationError, match="unknown expected route"):
        CalibrationData.from_queries([torch.ones(1, 1)], [[0]], ["maybe"])
    with pytest.raises(CalibrationError, match="gold index 3"):
        CalibrationData.from_queries([torch.ones(1, 2)], [[3]], ["direct"])
    with pytest.raises(CalibrationError, match="non-negative"):
        CalibrationData.from_queries([-torch.ones(1, 2)], [[0]], ["direct"])


def test_fused_outputs_design_vector_and_scale_sweep():
    # the worked example of docs/method.md: b¹ = (0.6, 0), b² = (0, 0.6), u = 0.4 → Yager b = (0.24, 0.24), U = 0.52
    d = CalibrationData.from_queries([torch.tensor([[3.0, 0.0], [0.0, 3.0]])], [[0]], ["conflict"])
    res, conf, correct = fused_outputs(d, 1.0, 1.0, lam=1.0)
    assert res.uncertainty.item() == pytest.approx(0.52) and conf.item() == pytest.approx(0.24)
    assert correct.tolist() == [True]  # ties select the first claim, which is gold
    # scale 0.5 on e = 3 is e = 1.5: b = 1.5 / 3.5 per chunk
    res, conf, _ = fused_outputs(d, 0.5, 1.0, lam=1.0)
    b, u = 1.5 / 3.5, 2 / 3.5
    assert res.uncertainty.item() == pytest.approx(u * u + b * b)  # h + K (Yager)
    # a tensor of scales fuses the sweep in one call, equal to one call per scale
    scales = torch.tensor([0.25, 1.0, 4.0], dtype=torch.float64)
    res_s, conf_s, _ = fused_outputs(d, scales, 1.0, lam=0.6)
    for i, s in enumerate(scales.tolist()):
        r, c, _ = fused_outputs(d, s, 1.0, lam=0.6)
        assert res_s.uncertainty[i].item() == pytest.approx(r.uncertainty.item())
        assert conf_s[i].item() == pytest.approx(c.item())


# ---- the evidence scale ----------------------------------------------------------------------------------
def test_fit_evidence_scale_hand_computed():
    # one chunk, evidence (1, 0) over 2 claims: confidence = s / (s + 2). 4 of 5 queries correct → the NLL
    # optimum is confidence 0.8, i.e. s = 8 = 2^(12/4), on the grid; the power cannot matter (1^p = 1), so
    # the tie goes to p = 1.
    d = _single([[1.0, 0.0]] * 5, [[0], [0], [0], [0], [1]], ["direct"] * 5)
    fit = fit_evidence_scale(d, lam=0.6)
    assert (fit.scale, fit.power) == (8.0, 1.0)
    assert fit.nll == pytest.approx(-(0.8 * math.log(0.8) + 0.2 * math.log(0.2)))
    assert fit.nll_identity == pytest.approx(-(0.8 * math.log(1 / 3) + 0.2 * math.log(2 / 3)))
    # half right: the optimum is confidence 0.5, s = 2
    d = _single([[1.0, 0.0]] * 4, [[0], [1], [0], [1]], ["direct"] * 4)
    assert fit_evidence_scale(d).scale == 2.0
    # all right: as sure as the grid allows
    assert fit_evidence_scale(_single([[1.0, 0.0]] * 3, [[0]] * 3, ["direct"] * 3)).scale == max(SCALE_GRID)
    # no gold reference: nothing to fit
    fit = fit_evidence_scale(_single([[1.0, 0.0]], [None], ["direct"]))
    assert (fit.scale, fit.power, fit.fitted) == (1.0, 1.0, False)


def test_fit_evidence_scale_power_sharpens_spread_evidence():
    # evidence (4, 1) over 2 claims, right 95 % of the time: a power > 1 lowers the runner-up's share, which
    # a scale alone cannot do; the fitted power must be > 1 and beat the best scale-only NLL
    d = _single([[4.0, 1.0]] * 20, [[0]] * 19 + [[1]], ["direct"] * 20)
    with_power = fit_evidence_scale(d)
    scale_only = fit_evidence_scale(d, powers=(1.0,))
    assert with_power.power >= 1.0 and with_power.nll <= scale_only.nll


# ---- thresholds --------------------------------------------------------------------------------------
def test_fit_thresholds_hand_computed():
    # one chunk, one claim: U = 1 / (e + 1) → U = 0.1, 0.2, 0.5, 1.0 (λ plays no part)
    ev = [[9.0], [4.0], [1.0], [0.0]]
    d = _single(ev, [[0]] * 4, ["direct", "direct", "conflict", "abstain"])
    fit = fit_thresholds(d, prior=(0.6, 0.35, 0.65))
    assert (fit.lam, fit.tau1, fit.tau2, fit.route_accuracy) == (0.6, 0.35, 0.65, 1.0)  # prior kept
    fit = fit_thresholds(d, prior=(0.6, 0.3, 0.7))
    assert (fit.tau1, fit.tau2) == (0.3, 0.7)
    # U = 0.4 should answer directly: τ1 must exceed 0.4; the closest grid value to the prior is 0.425
    ev = [[9.0], [1.5], [1.0], [0.0]]  # U = 0.1, 0.4, 0.5, 1.0
    d = _single(ev, [[0]] * 4, ["direct", "direct", "conflict", "abstain"])
    fit = fit_thresholds(d, prior=(0.6, 0.35, 0.65))
    assert (fit.tau1, fit.tau2, fit.route_accuracy) == (0.425, 0.65, 1.0)
    # the same data routed with the fitted values agrees with evidential.route
    res = fuse(opinions_from_evidence(torch.tensor([[1.5]])), lam=fit.lam)
    assert route(res, fit.tau1, fit.tau2).names == "direct"
    with pytest.raises(CalibrationError, match="unknown routing policy"):
        fit_thresholds(d, policy="nope")


def test_fit_thresholds_lambda_breaks_ties_by_ece():
    # two chunks that disagree (3, 0) / (0, 3), the first is gold: confidence depends on λ, U too. All
    # expected routes are "conflict", which some threshold pair reaches for every λ → route accuracy ties
    # at 1 and λ is chosen by the ECE: the confidence closest to 1 (always right) is λ = 0 (max singletons).
    ev = torch.tensor([[3.0, 0.0], [0.0, 3.0]], dtype=torch.float64)
    d = CalibrationData.from_queries([ev] * 3, [[0]] * 3, ["conflict"] * 3)
    fit = fit_thresholds(d, prior=(0.6, 0.35, 0.65))
    assert fit.route_accuracy == 1.0 and fit.lam == 0.0
    eces = {lam: evaluate_parameters(d, lam=lam)["ece"] for lam in (0.0, 0.5, 1.0)}
    assert fit.ece == pytest.approx(eces[0.0]) and eces[0.0] < eces[0.5] < eces[1.0]
    # other rules do not search λ
    assert fit_thresholds(d, rule="yager", prior=(0.6, 0.35, 0.65)).lam == 0.6


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(
            st.lists(st.floats(0, 8, allow_nan=False), min_size=2, max_size=2),
            st.lists(st.floats(0, 8, allow_nan=False), min_size=2, max_size=2),
            st.sampled_from(["direct", "conflict", "abstain"]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_fit_thresholds_is_the_grid_optimum(rows):
    evs = [torch.tensor([a, b], dtype=torch.float64) for a, b, _ in rows]
    d = CalibrationData.from_queries(evs, [[0]] * len(rows), [r for *_, r in rows])
    lams, taus = (0.0, 0.5, 1.0), (0.0, 0.25, 0.5, 0.75, 1.0)
    fit = fit_thresholds(d, lams=lams, taus=taus, prior=(0.5, 0.25, 0.75), data_thresholds=False)
    # brute force with evidential.fuse / evidential.route, one query at a time
    fused = {lam: [fuse(opinions_from_evidence(e), lam=lam) for e in evs] for lam in lams}
    best = max(
        sum(route(r, a, b).names == want for r, (*_, want) in zip(fused[lam], rows))
        for lam in lams
        for a in taus
        for b in taus
        if a < b
    )
    assert fit.route_accuracy == pytest.approx(best / len(rows))
    got = sum(route(r, fit.tau1, fit.tau2).names == want for r, (*_, want) in zip(fused[fit.lam], rows))
    assert got == best


# ---- isotonic ----------------------------------------------------------------------------------------
def test_fit_isotonic_hand_computed_and_applied():
    iso = fit_isotonic([0.2, 0.4, 0.6, 0.8], [False, True, False, True])
    cal = Calibration(evaluator="learned", isotonic=iso)
    # the violating pair (0.4 → 1, 0.6 → 0) pools to 0.5
    assert [cal.calibrated_confidence(x) for x in (0.2, 0.4, 0.5, 0.6, 0.8)] == pytest.approx(
        [0.0, 0.5, 0.5, 0.5, 1.0]
    )
    assert cal.calibrated_confidence(0.95) == 1.0 and cal.calibrated_confidence(0.1) == 0.0  # clipped
    assert cal.calibrated_confidence(0.0) == 0.0  # nothing selected stays 0
    assert cal.calibrated_confidence(torch.tensor([0.3, 0.7])).tolist() == pytest.approx([0.25, 0.75])
    assert Calibration(evaluator="learned").calibrated_confidence(0.37) == 0.37  # identity without a map
    with pytest.raises(CalibrationError, match="at least 2"):
        fit_isotonic([0.5], [True])
    with pytest.raises(CalibrationError, match="--no-isotonic"):
        fit_isotonic([0.5, 0.5], [True, False])


@given(
    st.lists(st.tuples(st.floats(0.01, 1), st.booleans()), min_size=2, max_size=30),
    st.lists(st.floats(0.001, 1), min_size=1, max_size=10),
)
def test_isotonic_breakpoints_reproduce_sklearn(samples, queries):
    from sklearn.isotonic import IsotonicRegression

    x = [c for c, _ in samples]
    y = [float(ok) for _, ok in samples]
    if len(set(x)) < 2:
        return
    iso = fit_isotonic(x, y)
    ref = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(x, y)
    cal = Calibration(evaluator="prompt", isotonic=iso)
    got = [cal.calibrated_confidence(q) for q in queries]
    assert got == pytest.approx(ref.predict(np.array(queries)).tolist(), abs=1e-9)
    assert all(a <= b + 1e-12 for a, b in zip(sorted(got), sorted(got)[1:]))


# ---- the whole fit, evaluation and cross-validation ------------------------------------------------------
def _random_queries(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    evs, gold, exp = [], [], []
    for i in range(n):
        k, m = 1 + i % 4, 2 + i % 3
        evs.append(torch.rand(k, m, generator=g, dtype=torch.float64) * 4)
        gold.append([i % m] if i % 5 else None)
        exp.append(("direct", "conflict", "abstain")[i % 3])
    return evs, gold, exp, [f"q{i}" for i in range(n)]


def _random_data(n=40, seed=0):
    return CalibrationData.from_queries(*_random_queries(n, seed))


def test_fit_calibration_is_deterministic_and_complete():
    d = _random_data()
    a, b = fit_calibration(d), fit_calibration(d)
    assert a == b
    assert set(a) >= {"scale", "power", "lam", "tau1", "tau2", "rule", "policy", "isotonic", "fit"}
    assert a["scale"] in SCALE_GRID and 0 <= a["tau1"] < a["tau2"] <= 1 and a["isotonic"] is not None
    after = evaluate_parameters(d, **{k: a[k] for k in ("scale", "power", "lam", "tau1", "tau2", "isotonic")})
    # the thresholds search includes (scale, power, prior λ/τ): the in-sample route accuracy cannot be worse
    at_prior = evaluate_parameters(d, scale=a["scale"], power=a["power"])
    assert after["route_accuracy"] >= at_prior["route_accuracy"]
    assert after["route_accuracy"] == pytest.approx(a["fit"]["route_accuracy"])
    assert fit_calibration(d, isotonic=False)["isotonic"] is None


def test_evidence_calibrator_fits_then_applies():
    d = _random_data()
    cal = EvidenceCalibrator(policy="paper", prior=(0.6, 0.35, 0.65))
    with pytest.raises(CalibrationError, match="not fitted"):
        cal(d.evidence)
    assert cal.fit(d) is cal
    ref = fit_calibration(d, policy="paper", prior=(0.6, 0.35, 0.65))
    assert cal.params == {
        k: ref[k]
        for k in (
            "scale",
            "power",
            "lam",
            "tau1",
            "tau2",
            "rule",
            "policy",
            "isotonic",
            "state_ratio",
            "state_ratio_yes_no",
            "state_witness_ratio",
            "confidence_input",
            "isotonic_routes",
            "reader_map",
        )
    }
    assert cal.params["state_ratio_yes_no"] is None  # no yes/no query: no bar of its own
    assert cal.report == ref["fit"]
    ev = torch.tensor([[0.0, 1.0, 3.0]], dtype=torch.float64)
    assert torch.equal(
        cal(ev), ref["scale"] * ev ** ref["power"] if ref["power"] != 1.0 else ref["scale"] * ev
    )
    iso = ref["isotonic"]
    assert cal.confidence(0.5) == float(np.interp(0.5, iso["x"], iso["y"])) and cal.confidence(0.0) == 0.0
    assert cal.evaluate(d) == evaluate_parameters(d, **cal.params)
    assert cal.cross_validate(d, 4) == cross_validate(d, 4, policy="paper", prior=(0.6, 0.35, 0.65))


def test_fold_of_and_cross_validation():
    keys = [f"q{i}" for i in range(23)]
    folds = fold_of(keys, 5)
    assert fold_of(keys, 5) == folds and sorted(set(folds)) == [0, 1, 2, 3, 4]
    assert max(folds.count(f) for f in range(5)) - min(folds.count(f) for f in range(5)) <= 1
    d = _random_data(30)
    cv = cross_validate(d, 3)
    assert cv == cross_validate(d, 3)  # deterministic
    assert (
        cv["queries"] == 30 and len(cv["per_fold"]) == 3 and sum(f["queries"] for f in cv["per_fold"]) == 30
    )
    assert 0 <= cv["route_accuracy"] <= 1 and 0 <= cv["ece"] <= 1
    assert len(cv["_confidence"]) == cv["queries_with_gold"] == int(d.has_gold.sum())
    with pytest.raises(CalibrationError, match="folds"):
        cross_validate(d, 1)
    # per source: the keys "q<i>" have no "source:" prefix, so they are one source named ""
    assert list(cv["ece_by_source"]) == [""]
    assert cv["ece_by_source"][""]["queries"] == cv["queries_with_gold"]
    assert cv["ece_by_source"][""]["ece"] == pytest.approx(cv["ece"])


def test_route_isotonic_maps_hand_computed_and_applied():
    """Direct answers: right at high mass, wrong at low; conflict answers: right at any mass (a conflict moves
    mass into U). One pooled monotone map cannot say both; a map per route can."""
    conf = torch.tensor([0.2, 0.4, 0.6, 0.8] * 8 + [0.05, 0.1] * 16, dtype=torch.float64)
    ok = torch.tensor([False, False, True, True] * 8 + [True, True] * 16)
    routes = torch.tensor([0] * 32 + [1] * 32)
    maps = fit_route_isotonic(conf, ok, routes)
    assert set(maps) == {"direct", "conflict"}
    assert maps["direct"] == {"x": [0.2, 0.4, 0.6, 0.8], "y": [0.0, 0.0, 1.0, 1.0]}
    assert maps["conflict"] == {"x": [0.05, 0.1], "y": [1.0, 1.0]}
    pooled = fit_isotonic(conf.tolist(), ok.tolist())
    cal = Calibration(evaluator="learned", isotonic=pooled, isotonic_routes=maps)
    assert cal.calibrated_confidence(0.1, route="conflict") == 1.0
    assert cal.calibrated_confidence(0.3, route="direct") == 0.0
    assert cal.calibrated_confidence(0.1, route="abstain") == cal.calibrated_confidence(0.1)  # no map: pooled
    assert cal.calibrated_confidence(0.0, route="conflict") == 0.0  # nothing stated stays 0
    got = cal.calibrated_confidence(np.array([0.1, 0.3, 0.7]), route=["conflict", "direct", "direct"])
    assert got.tolist() == [1.0, 0.0, 1.0]
    back = Calibration.from_dict(cal.to_dict())
    assert back.isotonic_routes == maps and back.to_dict() == cal.to_dict()
    # too few answers on a route: that route keeps the pooled map
    assert fit_route_isotonic(conf, ok, routes, min_queries=33) is None
    assert set(fit_route_isotonic(conf[:40], ok[:40], routes[:40])) == {"direct"}
    with pytest.raises(CalibrationError, match="unknown route 'maybe'"):
        Calibration(evaluator="learned", isotonic=pooled, isotonic_routes={"maybe": pooled})
    with pytest.raises(CalibrationError, match="needs parameters.isotonic"):
        Calibration(evaluator="learned", isotonic_routes=maps)
    with pytest.raises(CalibrationError, match="isotonic_routes.direct: x and y must be non-decreasing"):
        Calibration(
            evaluator="learned", isotonic=pooled, isotonic_routes={"direct": {"x": [0.5, 0.2], "y": [0, 1]}}
        )
    with pytest.raises(CalibrationError, match="got 2 routes for 3"):
        cal.calibrated_confidence(np.array([0.1, 0.3, 0.7]), route=["direct", "direct"])


def test_fit_calibration_fits_route_maps_and_cross_fitting_applies_them():
    d = _random_data(120, seed=3)
    on, off = fit_calibration(d), fit_calibration(d, route_maps=False)
    assert off["isotonic_routes"] is None and on["isotonic"] == off["isotonic"]
    params = {k: on[k] for k in on if k != "fit"}
    after = evaluate_parameters(d, **params, details=True)
    raw = evaluate_parameters(d, **{**params, "isotonic": None, "isotonic_routes": None}, details=True)
    routes = [ROUTES[i] for i, g in zip(after["_routes"], d.has_gold.tolist()) if g]
    assert on["isotonic_routes"] is not None and set(on["isotonic_routes"]) <= {"direct", "conflict"}
    assert all(routes.count(name) >= ROUTE_MAP_MIN_QUERIES for name in on["isotonic_routes"])
    # each answer's stated mass goes through its route's map (the pooled one for a route without its own)
    want = route_isotonic_map(np.array(raw["_confidence"]), routes, on["isotonic"], on["isotonic_routes"])
    assert after["_confidence"] == pytest.approx(want.tolist(), abs=1e-12)
    assert after["_correct"] == raw["_correct"]
    cv_on, cv_off = cross_validate(d, 4), cross_validate(d, 4, route_maps=False)
    assert cv_on["route_accuracy"] == cv_off["route_accuracy"]  # the maps change the confidence only
    assert cv_on["_correct"] == cv_off["_correct"]


def test_batched_metrics_equal_score_outcomes():
    """The grid's batched scoring agrees with the trainer's per-query training.trainer.trainer.score_outcomes."""
    g = torch.Generator().manual_seed(3)
    outcomes = []
    for i in range(25):
        k, m = 1 + i % 5, 2 + i % 3
        labels = [(j + i) % m if (i + j) % 3 else None for j in range(k)]
        gold = [i % m] if i % 4 else None
        ex = QueryExample(
            key=f"q{i}",
            query=f"question {i}?",
            chunks=[f"c{j}" for j in range(k)],
            claims=[f"a{j}" for j in range(m)],
            labels=labels,
            gold=gold,
            doc_types=[None] * k,
            source="ramdocs",
        )
        outcomes.append((ex, torch.rand(k, m, generator=g, dtype=torch.float64) * 3))
    d = CalibrationData.from_examples(outcomes)
    assert d.expected.tolist() == [
        ("direct", "conflict", "abstain").index(expected_route(ex)) for ex, _ in outcomes
    ]
    for lam, t1, t2, policy in (
        (0.6, 0.35, 0.65, "paper"),
        (0.2, 0.1, 0.5, "decomposed"),
        (1.0, 0.4, 0.9, "paper"),
    ):
        ref = score_outcomes(outcomes, 1.0, lam, "lambda", (t1, t2), policy)
        got = evaluate_parameters(d, lam=lam, tau1=t1, tau2=t2, policy=policy)
        assert got["route_accuracy"] == pytest.approx(ref["route_accuracy"])
        assert got["ece"] == pytest.approx(ref["ece"]) and got["selected_accuracy"] == pytest.approx(
            ref["selected_accuracy"]
        )
        assert got["routes"] == {r: ref["routes"].get(r, 0) for r in ("direct", "conflict", "abstain")}


# ---- the file ------------------------------------------------------------------------------------------
def test_calibration_round_trip_and_refusals():
    cal = Calibration(
        evaluator="learned",
        scale=2.0,
        power=1.25,
        lam=0.3,
        tau1=0.2,
        tau2=0.7,
        isotonic={"x": [0.1, 0.9], "y": [0.2, 0.95]},
        evaluator_info={"checkpoint": "ckpt", "fingerprint": "sha256:ab"},
        data={"queries": 3},
        metrics={"before": {"ece": 0.4}},
        extra={"command": "evidential-rag calibrate"},
    )
    d = json.loads(json.dumps(cal.to_dict()))
    assert d["format"] == CALIBRATION_FORMAT and d["version"] == CALIBRATION_VERSION
    assert d["evaluator"] == {"name": "learned", "checkpoint": "ckpt", "fingerprint": "sha256:ab"}
    back = Calibration.from_dict(d)
    assert back == cal and back.fingerprint == "sha256:ab"
    assert back.fusion_overrides() == {"lam": 0.3, "tau1": 0.2, "tau2": 0.7}
    assert back.apply_to_evidence(torch.tensor([[4.0]])).item() == pytest.approx(2.0 * 4**1.25)
    bad = [
        ({"format": "other"}, "not a calibration file"),
        ({"version": 99}, "version 99 is not supported"),
        ({"parameters": {**d["parameters"], "tau1": 0.8}}, "tau1 < tau2"),
        ({"parameters": {**d["parameters"], "scale": -1}}, "parameters.scale"),
        ({"parameters": {**d["parameters"], "lam": "x"}}, "parameters.lam"),
        ({"parameters": {k: v for k, v in d["parameters"].items() if k != "power"}}, "parameters.power"),
        ({"parameters": {**d["parameters"], "isotonic": {"x": [0.5, 0.1], "y": [0, 1]}}}, "non-decreasing"),
        ({"parameters": {**d["parameters"], "policy": "nope"}}, "routing policy"),
        ({"evaluator": "learned"}, "'evaluator'"),
    ]
    for change, msg in bad:
        with pytest.raises(CalibrationError, match=msg):
            Calibration.from_dict({**d, **change})
    with pytest.raises(CalibrationError, match="not a calibration file"):
        Calibration.from_dict([1, 2])


def test_checkpoint_fingerprint(tmp_path):
    ck = tmp_path / "ck"
    (ck / "adapter").mkdir(parents=True)
    (ck / "learned_config.json").write_text('{"encoder": "x"}')
    (ck / "heads.safetensors").write_bytes(b"\x00\x01heads")
    (ck / "adapter" / "adapter_model.safetensors").write_bytes(b"lora")
    (ck / "adapter" / "README.md").write_text("generated")
    fp = checkpoint_fingerprint(ck)
    assert fp.startswith("sha256:") and len(fp) == 7 + 64
    copy = tmp_path / "copy"
    shutil.copytree(ck, copy)
    (copy / "adapter" / "README.md").write_text("another generated card")  # not part of the weights
    (copy / "model_card.json").write_text("{}")
    assert checkpoint_fingerprint(copy) == fp
    (copy / "adapter" / "adapter_model.safetensors").write_bytes(b"LORA")
    assert checkpoint_fingerprint(copy) != fp
    (ck / "heads.safetensors").unlink()
    with pytest.raises(CalibrationError, match="missing"):
        checkpoint_fingerprint(ck)


def test_fit_state_ratio_hand_computed():
    from training.calibration import fit_state_ratio, set_hits

    # query 0: two valid answers (masses 0.4 / 0.3); query 1: gold 0.5 vs a planted 0.15
    belief = torch.tensor([[0.4, 0.3, 0.0], [0.5, 0.15, 0.0]], dtype=torch.float64)
    data = CalibrationData.from_queries(
        [torch.ones(1, 2, dtype=torch.float64), torch.ones(1, 2, dtype=torch.float64)],
        [[0, 1], [0]],
        ["conflict", "direct"],
    )
    routes = torch.tensor([1, 0])
    # bars in (0.3, 0.75]: both valid answers of query 0 stated, the planted one of query 1 dropped
    assert set_hits(data, belief[:, :2], routes, 0.5).tolist() == [True, True]
    assert set_hits(data, belief[:, :2], routes, 0.2).tolist() == [True, False]
    assert set_hits(data, belief[:, :2], routes, 0.9).tolist() == [False, True]
    ratio, acc = fit_state_ratio(data, belief[:, :2], routes, prior=0.5)
    assert ratio == 0.5 and acc == 1.0
    ratio, acc = fit_state_ratio(data, belief[:, :2], routes, prior=0.0)  # closest optimum to the prior
    assert ratio == 0.35 and acc == 1.0
    # an abstention states nothing: never the gold set
    assert set_hits(data, belief[:, :2], torch.tensor([2, 2]), 0.5).tolist() == [False, False]


def test_fitted_state_ratio_round_trips_through_the_file():
    d = _random_data()
    fitted = fit_calibration(d, state_prior=0.5)
    assert fitted["state_ratio"] in STATE_RATIO_GRID and 0 <= fitted["fit"]["set_accuracy"] <= 1
    cal = Calibration(evaluator="learned", **{k: fitted[k] for k in fitted if k != "fit"})
    back = Calibration.from_dict(cal.to_dict())
    assert back.state_ratio == fitted["state_ratio"]
    assert back.fusion_overrides()["state_ratio"] == fitted["state_ratio"]
    old = cal.to_dict()
    del old["parameters"]["state_ratio"]  # a file written before the stated-set bar still loads
    assert "state_ratio" not in Calibration.from_dict(old).fusion_overrides()
    with pytest.raises(CalibrationError, match="state_ratio"):
        Calibration(evaluator="learned", state_ratio=1.5)


def test_fit_state_ratio_weights_every_source_equally():
    from training.calibration import fit_state_ratio

    # three yes/no queries where only the top claim is gold (a bar above 0.6 is right) and one RAMDocs query
    # with two valid answers at 0.5 / 0.3 (a bar at or under 0.6 is right): counted per query, the yes/no
    # data would decide; weighted per source, both count half and the tie goes to the bar nearest the prior
    yes_no = [torch.tensor([[4.0, 0.0]], dtype=torch.float64)] * 3
    data = CalibrationData.from_queries(
        [*yes_no, torch.ones(1, 2, dtype=torch.float64)],
        [[0], [0], [0], [0, 1]],
        ["direct", "direct", "direct", "conflict"],
        ["conflictqa:a", "conflictqa:b", "conflictqa:c", "ramdocs:d"],
    )
    belief = torch.tensor([[0.5, 0.35], [0.5, 0.35], [0.5, 0.35], [0.5, 0.3]], dtype=torch.float64)
    routes = torch.tensor([0, 0, 0, 1])
    ratio, acc = fit_state_ratio(data, belief, routes, prior=0.5)
    assert ratio == 0.5 and acc == 0.5  # ramdocs right, conflictqa wrong: (0 + 1) / 2
    micro = CalibrationData.from_queries(
        [*yes_no, torch.ones(1, 2, dtype=torch.float64)],
        [[0], [0], [0], [0, 1]],
        ["direct", "direct", "direct", "conflict"],
        ["q:a", "q:b", "q:c", "q:d"],  # one source: each query counts once, the yes/no majority wins
    )
    ratio, acc = fit_state_ratio(micro, belief, routes, prior=0.5)
    assert ratio == 0.75 and acc == 0.75


def test_yes_no_frames_get_a_bar_of_their_own():
    """Open frames and yes/no frames are fitted apart: the RAMDocs query with two valid answers (0.5 / 0.3)
    wants a bar <= 0.6, the yes/no queries whose second verdict is wrong want one above 0.6; with one bar per
    kind both are right, and set_hits applies each query its own bar."""
    ev_yn = torch.tensor([[3.0, 2.0]], dtype=torch.float64)  # both verdicts have mass; only "yes" is gold
    ev_open = torch.tensor([[5.0, 0.0], [0.0, 3.0]], dtype=torch.float64)  # two valid answers
    data = CalibrationData.from_examples(
        [
            (
                QueryExample(
                    f"conflictqa:{i}", "q?", ["c"], ["yes", "no"], [0], [0], ["memory"], "conflictqa"
                ),
                ev_yn,
            )
            for i in range(3)
        ]
        + [
            (
                QueryExample(
                    "ramdocs:d",
                    "q?",
                    ["c1", "c2"],
                    ["Kazan", "Giraldi"],
                    [0, 1],
                    [0, 1],
                    ["correct"] * 2,
                    "ramdocs",
                ),
                ev_open,
            )
        ]
    )
    assert data.yes_no.tolist() == [True, True, True, False]
    fitted = fit_calibration(data, state_prior=0.5, fit_power=False, isotonic=False)
    assert fitted["state_ratio_yes_no"] > fitted["state_ratio"]
    res = fuse(
        opinions_from_evidence(data.evidence * fitted["scale"], data.claim_mask, data.chunk_mask),
        lam=fitted["lam"],
    )
    routes = torch.zeros(4, dtype=torch.long)
    both = set_hits(data, res.belief, routes, fitted["state_ratio"], fitted["state_ratio_yes_no"])
    assert both.tolist() == [True, True, True, True]
    one = set_hits(data, res.belief, routes, fitted["state_ratio"])  # the open bar for every query
    assert one.tolist()[3] is True and not all(one.tolist()[:3])
    cal = Calibration(evaluator="learned", **{k: fitted[k] for k in fitted if k != "fit"})
    assert (
        Calibration.from_dict(cal.to_dict()).fusion_overrides()["state_ratio_yes_no"]
        == fitted["state_ratio_yes_no"]
    )
    with pytest.raises(CalibrationError, match="state_ratio_yes_no"):
        Calibration(evaluator="learned", state_ratio_yes_no=-0.1)


def test_a_yes_no_conflict_with_both_answers_gold_does_not_move_the_yes_no_bar():
    """Three single-answer yes/no questions want a bar above 0.6 (only "yes" is right); two yes/no conflicts
    whose gold is both answers (a WikiContradict question given its two sides) would want one at or below it.
    The yes/no bar is fitted on the single-answer questions only, so the conflicts cannot pull it down to
    stating both verdicts everywhere."""
    ev_yn = torch.tensor([[3.0, 2.0]], dtype=torch.float64)

    def ex(key, gold):
        return QueryExample(key, "q?", ["c"], ["yes", "no"], [0], gold, ["memory"], key.split(":")[0])

    single = [(ex(f"conflictqa:{i}", [0]), ev_yn) for i in range(3)]
    conflicts = [(ex(f"wikicontradict:{i}", [0, 1]), ev_yn) for i in range(2)]
    alone = fit_calibration(CalibrationData.from_examples(single), fit_power=False, isotonic=False)
    both = fit_calibration(CalibrationData.from_examples(single + conflicts), fit_power=False, isotonic=False)
    assert alone["state_ratio_yes_no"] > 0.6
    assert both["state_ratio_yes_no"] == alone["state_ratio_yes_no"]
    only_conflicts = fit_calibration(
        CalibrationData.from_examples(conflicts), fit_power=False, isotonic=False
    )
    assert only_conflicts["state_ratio_yes_no"] == 0.5  # nothing to fit it on: the prior bar
    assert only_conflicts["fit"]["set_accuracy_yes_no"] == 0.0


def test_set_hits_leave_out_a_claim_only_an_edited_copy_backs():
    # chunk 0 backs the gold A, chunk 1 (a copy of chunk 0) the planted B: at a bar of 0.2 B is stated
    # unless the copy rule drops it
    ev = torch.tensor([[5.0, 0.0], [0.0, 4.0]], dtype=torch.float64)
    belief = torch.tensor([[0.5, 0.3]], dtype=torch.float64)
    routes = torch.tensor([1])
    plain = CalibrationData.from_queries([ev], [[0]], ["conflict"])
    copied = CalibrationData.from_queries([ev], [[0]], ["conflict"], copies=[[[1], [0]]])
    assert plain.copies.shape == (1, 2, 2) and not bool(plain.copies.any())
    assert set_hits(plain, belief, routes, 0.2).tolist() == [False]
    assert set_hits(copied, belief, routes, 0.2).tolist() == [True]
    assert copied.subset([0]).copies.tolist() == copied.copies.tolist()
    with pytest.raises(CalibrationError, match="copy pair"):
        CalibrationData.from_queries([ev], [[0]], ["conflict"], copies=[[[2], []]])


def test_from_examples_finds_copies_in_the_chunk_texts():
    base = " ".join(f"word{i}" for i in range(20))
    ex = QueryExample(
        "k",
        "q?",
        [base + " 1900", base + " 1905", "unrelated"],
        ["1900", "1905"],
        [0, 1, None],
        [0],
        ["correct", "misinfo", "noise"],
        None,
    )
    ev = torch.tensor([[5.0, 0.0], [0.0, 4.0], [0.0, 0.0]], dtype=torch.float64)
    assert CalibrationData.from_examples([(ex, ev)], 0.8).copies[0].tolist() == [
        [False, True, False],
        [True, False, False],
        [False, False, False],
    ]
    assert not bool(CalibrationData.from_examples([(ex, ev)]).copies.any())


def test_answer_hits_and_the_isotonic_target_are_the_answer_as_stated():
    from training.calibration import answer_hits

    # query 0: the selected claim (0.5) is wrong, the second stated claim (0.3) is gold
    belief = torch.tensor([[0.5, 0.3], [0.5, 0.3]], dtype=torch.float64)
    ev = torch.tensor([[5.0, 0.0], [0.0, 4.0]], dtype=torch.float64)
    data = CalibrationData.from_queries([ev, ev], [[1], [1]], ["conflict", "conflict"])
    assert answer_hits(data, belief, torch.tensor([1, 1]), 0.5).tolist() == [True, True]
    assert answer_hits(data, belief, torch.tensor([1, 2]), 0.5).tolist() == [True, False]  # abstention
    assert answer_hits(data, belief, torch.tensor([1, 1]), 1.0).tolist() == [False, False]  # only the top
    m = evaluate_parameters(data, lam=0.6, tau1=0.0, tau2=1.0, state_ratio=0.5)
    assert m["selected_accuracy"] == 0.0 and m["answer_accuracy"] == 1.0


def test_a_side_conflict_is_right_when_it_states_the_datasets_answer():
    """ConflictQA-style: the gold reference holds both sides (route and stated-set fits), the truth only the
    dataset's answer (claim 0): stating only the other side is a conflict answer, not a right one."""
    from training.calibration import answer_hits, set_hits

    ev = torch.tensor([[5.0, 0.0], [0.0, 4.0]], dtype=torch.float64)
    data = CalibrationData.from_queries(
        [ev, ev, ev],
        [[0, 1], [0, 1], [0]],
        ["conflict"] * 3,
        conflict_gold=[True, True, False],
        truth=[[0], [0], None],
    )
    assert data.truth.tolist() == [[True, False], [True, False], [True, False]]
    both = torch.tensor([[0.4, 0.4], [0.1, 0.5], [0.4, 0.4]], dtype=torch.float64)
    routes = torch.tensor([1, 1, 1])
    # query 0 states both sides, query 1 only the other side (0.1 < 0.5 · 0.5), query 2 both
    assert answer_hits(data, both, routes, 0.5).tolist() == [True, False, True]
    assert set_hits(data, both, routes, 0.5).tolist() == [True, False, False]  # sets judge by gold
    assert data.subset([1]).truth.tolist() == [[True, False]]
    assert CalibrationData.from_queries([ev], [[1]], ["direct"]).truth.tolist() == [[False, True]]  # = gold
    with pytest.raises(CalibrationError, match="truth index 5"):
        CalibrationData.from_queries([ev], [[0]], ["direct"], truth=[[5]])
    with pytest.raises(CalibrationError, match="one entry per query"):
        CalibrationData.from_queries([ev], [[0]], ["direct"], truth=[])


def test_stated_mass_and_a_fresh_fit_maps_it():
    from training.calibration import stated_mass

    belief = torch.tensor([[0.5, 0.3], [0.5, 0.3]], dtype=torch.float64)
    ev = torch.tensor([[5.0, 0.0], [0.0, 4.0]], dtype=torch.float64)
    data = CalibrationData.from_queries([ev, ev], [[1], [1]], ["conflict", "conflict"])
    routes = torch.tensor([1, 2])
    assert stated_mass(data, belief, routes, 0.5).tolist() == pytest.approx([0.8, 0.0])
    assert stated_mass(data, belief, torch.tensor([1, 1]), 1.0).tolist() == pytest.approx([0.5, 0.5])
    fitted = fit_calibration(_random_data(), state_prior=0.5)
    assert fitted["confidence_input"] == "stated"
    cal = Calibration(evaluator="learned", **{k: fitted[k] for k in fitted if k != "fit"})
    back = Calibration.from_dict(cal.to_dict())
    assert back.confidence_input == "stated"
    assert back.calibrated_confidence(0.1, 0.9) == pytest.approx(float(isotonic_map(0.9, back.isotonic)))
    with pytest.raises(CalibrationError, match="stated_mass"):
        back.calibrated_confidence(0.1)
    with pytest.raises(CalibrationError, match="confidence_input"):
        Calibration(evaluator="learned", confidence_input="mean")


# ---- the witness bar -------------------------------------------------------------------------------------
def _witness_data():
    """Query 0 (RAMDocs-style): two documents for A, one for B (another entity of the same name), gold {A, B}.
    Query 1: two documents for A, a weaker single one for a planted C, gold {A}."""
    ev0 = torch.tensor([[6.0, 0.0], [6.0, 0.0], [0.0, 5.0]], dtype=torch.float64)
    ev1 = torch.tensor([[6.0, 0.0], [6.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    return CalibrationData.from_queries(
        [ev0, ev1], [[0, 1], [0]], ["direct", "direct"], ["ramdocs:a", "ramdocs:b"]
    )


def test_witness_mask_reads_the_evidence_as_fused():
    from training.calibration import witness_mask

    data = _witness_data()
    assert witness_mask(data, 1.0, 1.0, None) is None and witness_mask(data, 1.0, 1.0, "off") is None
    assert witness_mask(data, 1.0, 1.0, 0.8).tolist() == [[True, True], [True, False]]  # 5 >= 4.8; 2 < 4.8
    assert witness_mask(data, 3.0, 1.0, 0.8).tolist() == [[True, True], [True, False]]  # scale-free
    # the power is applied first: 5² = 25 < 0.8 · 36
    assert witness_mask(data, 1.0, 2.0, 0.8).tolist() == [[True, False], [True, False]]


def test_fit_witness_ratio_states_the_single_valid_answer_and_not_the_planted_one():
    from training.calibration import fit_witness_ratio, witness_mask

    data = _witness_data()
    res, _, _ = fused_outputs(data)
    routes = torch.tensor([0, 0])
    # at the bar 0.5 the fused masses state A alone in both queries: query 0 misses B
    assert set_hits(data, res.belief, routes, 0.5).tolist() == [False, True]
    w, acc = fit_witness_ratio(data, res.belief, routes, 0.5)
    # B (5 of the strongest 6) is witnessed, C (2 of 6) is not: the highest bar that keeps both right
    assert w == 0.8 and acc == 1.0
    assert set_hits(data, res.belief, routes, 0.5, None, witness_mask(data, 1.0, 1.0, w)).tolist() == [
        True,
        True,
    ]
    # with no query that needs a witness, the tie goes to "off"
    one = data.subset([1])
    assert fit_witness_ratio(one, res.belief[[1]], routes[[1]], 0.5) == ("off", 1.0)
    with pytest.raises(CalibrationError, match="witness ratios"):
        fit_witness_ratio(data, res.belief, routes, 0.5, ratios=(1.5,))


def test_fit_calibration_fits_the_witness_bar_and_the_file_keeps_it():
    fitted = fit_calibration(
        _witness_data(), state_prior=0.5, fixed_state_ratio=0.5, isotonic=False, fit_power=False
    )
    assert fitted["state_ratio"] == 0.5 and fitted["state_witness_ratio"] == 0.8
    assert fitted["fit"]["set_accuracy_witness"] == 1.0 and fitted["fit"]["set_accuracy"] == 0.5
    assert fit_calibration(_witness_data(), witness_ratios=None)["state_witness_ratio"] is None
    cal = Calibration(evaluator="learned", **{k: fitted[k] for k in fitted if k != "fit"})
    back = Calibration.from_dict(cal.to_dict())
    assert back.state_witness_ratio == 0.8 and back.fusion_overrides()["state_witness_ratio"] == 0.8
    off = Calibration(evaluator="learned", state_witness_ratio="off")
    assert (
        Calibration.from_dict(off.to_dict()).fusion_overrides()["state_witness_ratio"] is None
    )  # turns it off
    old = cal.to_dict()
    del old["parameters"]["state_witness_ratio"]  # a file fitted before the witness bar keeps the config's
    assert "state_witness_ratio" not in Calibration.from_dict(old).fusion_overrides()
    for bad in (1.5, -0.1, "on"):
        with pytest.raises(CalibrationError, match="state_witness_ratio"):
            Calibration(evaluator="learned", state_witness_ratio=bad)
    # cross-fitting scores each held-out query with the witness bar fitted on the others
    cv = cross_validate(_witness_data(), folds=2, fixed_state_ratio=0.5, isotonic=False, fit_power=False)
    assert [f["state_witness_ratio"] for f in cv["per_fold"]] in (["off", 0.8], [0.8, "off"])


def test_a_conflicts_sides_as_gold_serve_the_answer_fits_not_the_selected_claim_ones():
    """Conflict queries whose gold is their two sides (calibration only): "the selected claim is gold" holds
    whatever the evidence says, so they must not move the evidence scale or the thresholds' ECE tie-break;
    they do enter the confidence map of the answer as stated."""
    evs, gold, exp, keys = _random_queries(60, seed=5)
    d = CalibrationData.from_queries(evs, gold, exp, keys)
    ev = torch.tensor([[4.0, 0.0], [0.0, 3.0]], dtype=torch.float64)  # two chunks, two sides
    both = CalibrationData.from_queries(
        evs + [ev] * 12,
        gold + [[0, 1]] * 12,
        exp + ["conflict"] * 12,
        keys + [f"wikicontradict:{i}" for i in range(12)],
        conflict_gold=[False] * 60 + [True] * 12,
    )
    assert both.selected_gold.tolist() == d.has_gold.tolist() + [False] * 12
    assert both.subset([len(d)]).conflict_gold.tolist() == [True]
    alone, joined = fit_evidence_scale(d), fit_evidence_scale(both)
    assert (joined.scale, joined.power, joined.nll) == (alone.scale, alone.power, alone.nll)
    # marked as ordinary gold, the same queries do pull the scale (they reward confidence on a conflict)
    plain = dataclasses.replace(both, conflict_gold=torch.zeros(len(both), dtype=torch.bool))
    assert fit_evidence_scale(plain).nll != alone.nll
    # the answer-level metrics see them: a conflict answer that states either side is right
    scored = evaluate_parameters(both, lam=0.6, tau1=0.35, tau2=0.99, state_ratio=0.5, details=True)
    assert scored["queries_with_gold"] == int(d.has_gold.sum()) + 12
    assert scored["_routes"][-12:] == [1] * 12 and scored["_correct"][-12:] == [True] * 12
