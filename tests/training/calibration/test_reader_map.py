"""The reader map: the calibrated confidence corrected by the reader score of the answer's chunks —
hand-computed values, properties, the fit on data whose reader scores decide correctness, the file format
and the cross-fitting."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from training.calibration import (
    READER_MAP_MIN_QUERIES,
    Calibration,
    CalibrationData,
    CalibrationError,
    answer_reader,
    answer_reader_score,
    cross_validate,
    evaluate_parameters,
    fit_calibration,
    fit_reader_map,
    reader_map,
)

PARAMS = {"coef": [1.0, 0.5], "intercept": -1.0, "clip": [-5.0, 15.0], "eps": 0.001}


def _sigmoid(z):
    return 1.0 / (1.0 + math.exp(-z))


def test_answer_reader_score_takes_the_answers_backing_chunks_else_any_chunk():
    ev = torch.tensor([[3.0, 0.0], [0.0, 2.0], [1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    reader = torch.tensor([2.5, 9.0, 4.0, 12.0], dtype=torch.float64)
    # claim 0 is backed by chunks 0 and 2 (their largest evidence); chunk 3 backs nothing
    assert answer_reader_score(ev, reader, torch.tensor(0)).item() == 4.0
    assert answer_reader_score(ev, reader, torch.tensor(1)).item() == 9.0
    # no backing chunk with a score: the best score of any chunk
    nan = math.nan
    assert answer_reader_score(ev, torch.tensor([nan, nan, nan, 12.0]), torch.tensor(0)).item() == 12.0
    # no score at all, or no selected claim: NaN
    assert math.isnan(answer_reader_score(ev, torch.full((4,), nan), torch.tensor(0)).item())
    assert math.isnan(answer_reader_score(ev, reader, torch.tensor(-1)).item())
    # batched: one score per query
    got = answer_reader_score(torch.stack([ev, ev]), torch.stack([reader, reader]), torch.tensor([0, 1]))
    assert got.tolist() == [4.0, 9.0]


def test_reader_map_hand_computed():
    z = 1.0 * math.log(0.8 / 0.2) + 0.5 * 6.0 - 1.0
    assert reader_map(0.8, 6.0, PARAMS) == pytest.approx(_sigmoid(z))
    assert reader_map(0.8, 40.0, PARAMS) == pytest.approx(reader_map(0.8, 15.0, PARAMS))  # clipped
    assert reader_map(1.0, 0.0, PARAMS) == pytest.approx(_sigmoid(math.log(0.999 / 0.001) - 1.0))  # eps
    # nothing stated, no reader score, no map: unchanged
    assert reader_map(0.0, 6.0, PARAMS) == 0.0
    assert reader_map(0.8, None, PARAMS) == 0.8 and reader_map(0.8, math.nan, PARAMS) == 0.8
    assert reader_map(0.8, 6.0, None) == 0.8
    t = reader_map(torch.tensor([0.8, 0.0, 0.8]), torch.tensor([6.0, 6.0, math.nan]), PARAMS)
    assert t.tolist() == pytest.approx([_sigmoid(z), 0.0, 0.8])


@given(
    st.floats(0.0, 1.0),
    st.floats(-20.0, 20.0),
    st.floats(-20.0, 20.0),
    st.floats(-3.0, 3.0),
    st.floats(0.0, 3.0),
)
def test_reader_map_is_a_probability_and_rises_with_the_reader_score(c, r1, r2, a, b):
    p = {**PARAMS, "coef": [a, b]}
    lo, hi = sorted((r1, r2))
    x, y = reader_map(c, lo, p), reader_map(c, hi, p)
    assert 0.0 <= x <= 1.0 and 0.0 <= y <= 1.0
    assert x <= y + 1e-12  # a non-negative reader weight never lowers the confidence of a better read
    if c == 0.0:
        assert x == y == 0.0


def _reader_data(n=120, seed=0):
    """Open one-chunk queries whose answer is right exactly when its chunk's reader score is high, with
    fused masses that do not tell: the reader score is the only signal."""
    g = torch.Generator().manual_seed(seed)
    evs, gold, exp, reader = [], [], [], []
    for i in range(n):
        top = 2.0 + float(torch.rand(1, generator=g)) * 6.0
        evs.append(torch.tensor([[top, 0.5]], dtype=torch.float64))
        right = i % 2 == 0  # the evidence favours claim 0 either way: the answer is right when it is gold
        gold.append([0] if right else [1])
        exp.append("direct")
        reader.append(
            [8.0 + float(torch.rand(1, generator=g)) * 4 if right else float(torch.rand(1, generator=g)) * 2]
        )
    return CalibrationData.from_queries(evs, gold, exp, [f"q{i}" for i in range(n)], reader=reader)


def test_fit_reader_map_learns_a_positive_reader_weight_and_needs_enough_answers():
    c = torch.full((40,), 0.6, dtype=torch.float64)
    r = torch.tensor([10.0] * 20 + [1.0] * 20, dtype=torch.float64)
    y = torch.tensor([True] * 20 + [False] * 20)
    p = fit_reader_map(c, r, y)
    assert p is not None and p["coef"][1] > 0 and p["queries"] == 40
    assert reader_map(0.6, 10.0, p) > 0.5 > reader_map(0.6, 1.0, p)
    assert (
        fit_reader_map(
            c[: READER_MAP_MIN_QUERIES - 1], r[: READER_MAP_MIN_QUERIES - 1], y[: READER_MAP_MIN_QUERIES - 1]
        )
        is None
    )
    assert fit_reader_map(c, r, torch.ones(40, dtype=torch.bool)) is None  # one outcome
    assert fit_reader_map(c, torch.full((40,), math.nan), y) is None  # no reader score


def test_fit_calibration_fits_the_reader_map_and_cross_fitting_applies_it():
    d = _reader_data()
    on, off = fit_calibration(d), fit_calibration(d, reader_maps=False)
    assert off["reader_map"] is None and on["reader_map"] is not None and on["reader_map"]["coef"][1] > 0
    params = {k: on[k] for k in on if k != "fit"}
    with_map = evaluate_parameters(d, **params)
    without = evaluate_parameters(d, **{**params, "reader_map": None})
    # the mass alone cannot tell right from wrong (a constant confidence can still have ECE 0); the reader
    # score can, so the Brier score falls
    assert with_map["brier"] < 0.5 * without["brier"]
    assert with_map["answer_accuracy"] == without["answer_accuracy"]
    cv_on, cv_off = cross_validate(d, 4), cross_validate(d, 4, reader_maps=False)
    assert cv_on["_correct"] == cv_off["_correct"] and cv_on["brier"] < 0.5 * cv_off["brier"]
    # data without reader scores (yes/no frames, given candidates, the prompt evaluator): no map
    plain = CalibrationData.from_queries(
        [e[: int(m.sum())] for e, m in zip(d.evidence, d.chunk_mask)],
        [[int(torch.nonzero(g).flatten()[0])] for g in d.gold],
        ["direct"] * len(d),
    )
    fitted = fit_calibration(plain)
    assert fitted["reader_map"] is None and any("reader map skipped" in n for n in fitted["fit"]["notes"])


def test_answer_reader_of_calibration_data_reads_the_selected_claims_chunks():
    d = CalibrationData.from_queries(
        [torch.tensor([[3.0, 0.0], [0.0, 1.0]], dtype=torch.float64)],
        [[0]],
        ["direct"],
        reader=[[7.5, 2.0]],
    )
    belief = torch.tensor([[0.6, 0.2]], dtype=torch.float64)
    assert answer_reader(d, belief).tolist() == [7.5]
    assert answer_reader(d, torch.tensor([[0.1, 0.6]], dtype=torch.float64)).tolist() == [2.0]


def test_calibration_data_checks_reader_scores():
    ev = [torch.ones(2, 2, dtype=torch.float64)]
    d = CalibrationData.from_queries(ev, [[0]], ["direct"], reader=[[1.5, None]])
    assert d.reader[0, 0].item() == 1.5 and math.isnan(d.reader[0, 1].item())
    assert torch.isnan(CalibrationData.from_queries(ev, [[0]], ["direct"]).reader).all()
    assert d.subset([0]).reader[0, 0].item() == 1.5
    with pytest.raises(CalibrationError, match="1 reader scores for 2 chunks"):
        CalibrationData.from_queries(ev, [[0]], ["direct"], reader=[[1.0]])
    with pytest.raises(CalibrationError, match="not finite"):
        CalibrationData.from_queries(ev, [[0]], ["direct"], reader=[[math.inf, 1.0]])
    with pytest.raises(CalibrationError, match="one entry per query"):
        CalibrationData.from_queries(ev, [[0]], ["direct"], reader=[[1.0, 1.0], [1.0, 1.0]])


def test_the_reader_map_round_trips_through_the_file_and_corrects_answers_only():
    iso = {"x": [0.0, 1.0], "y": [0.0, 1.0]}
    cal = Calibration(evaluator="learned", isotonic=iso, confidence_input="stated", reader_map=dict(PARAMS))
    again = Calibration.from_dict(cal.to_dict())
    assert again.reader_map == cal.reader_map and again.to_dict() == cal.to_dict()
    z = math.log(0.8 / 0.2) + 0.5 * 6.0 - 1.0
    assert cal.calibrated_confidence(0.9, 0.8, "conflict", 6.0) == pytest.approx(_sigmoid(z))
    assert cal.calibrated_confidence(0.9, 0.8, "abstain", 6.0) == pytest.approx(0.8)  # never an abstention
    assert cal.calibrated_confidence(0.9, 0.8, "direct") == pytest.approx(0.8)  # no reader score
    # files written before the reader map have none: the isotonic value stands
    old = cal.to_dict()
    del old["parameters"]["reader_map"]
    assert Calibration.from_dict(old).calibrated_confidence(0.9, 0.8, "conflict", 6.0) == pytest.approx(0.8)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ([1, 2], "must be null or an object"),
        ({"coef": [1.0, 0.5], "intercept": 0.0, "clip": [-5.0, 15.0]}, r"reader_map\.eps' is missing"),
        ({**PARAMS, "coef": [1.0]}, "coef must be a list of two finite numbers"),
        ({**PARAMS, "coef": [1.0, math.nan]}, "coef must be a list of two finite numbers"),
        ({**PARAMS, "clip": [5.0, -5.0]}, "lo < hi"),
        ({**PARAMS, "intercept": "x"}, "intercept must be a finite number"),
        ({**PARAMS, "eps": 0.0}, r"eps must lie in \(0.0, 0.5\]"),
    ],
)
def test_a_bad_reader_map_is_refused_with_the_field_named(bad, match):
    with pytest.raises(CalibrationError, match=match):
        Calibration(evaluator="learned", reader_map=bad)
