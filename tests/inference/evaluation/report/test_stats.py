"""Per-seed metrics, mean ± std over seeds, evaluator validity and p-values on hand-made rows."""

from __future__ import annotations

import pytest

from inference.evaluation.report import aggregate
from inference.evaluation.report.stats import (
    evaluator_validity,
    mean_or_none,
    mean_std_cell,
    paired_pvalues,
    rows_by_seed,
    seed_metrics,
)


def test_mean_helpers_skip_missing_values():
    assert mean_or_none([1.0, None, 2.0]) == 1.5
    assert mean_or_none([None]) is None
    assert mean_std_cell([1.0, None, 3.0]) == {"mean": 2.0, "std": pytest.approx(1.4142135, abs=1e-6)}
    assert mean_std_cell([0.5]) == {"mean": 0.5, "std": 0.0}
    assert mean_std_cell([None, None]) == {"mean": None, "std": None}


def test_rows_by_seed_groups_in_seed_order(rows_factory):
    rows = [rows_factory(123, "a"), rows_factory(42, "a"), rows_factory(123, "b")]
    got = rows_by_seed(rows)
    assert list(got) == [42, 123]
    assert [r["id"] for r in got[123]] == ["a", "b"]


def test_seed_metrics_hand_checked(rows_factory):
    rows = [
        rows_factory(1, "a", accuracy=1.0, confidence=0.9, route="direct", latency=2.0),
        rows_factory(
            1,
            "b",
            behaviour="conflict",
            accuracy=0.0,
            confidence=0.3,
            route="conflict",
            latency=4.0,
            labels={"unsupported_assertion": True, "conflict_recognition": True},
        ),
        rows_factory(1, "c", behaviour="unanswerable", accuracy=None, refused=True, route="abstain"),
        rows_factory(1, "d", accuracy=0.0, refused=True, route="abstain", latency=9.0, reused=7),
    ]
    m = seed_metrics(rows)
    assert m["n"] == 4.0
    assert m["accuracy"] == pytest.approx(1 / 3) and m["em"] == m["f1"] == m["rouge_l"] == m["accuracy"]
    assert m["bertscore"] is None and m["strict_em"] is None
    assert m["hallucination_rate"] == 0.5  # one of the two answered rows is flagged
    assert m["conflict_resolution_rate"] == 1.0
    # refused c (should) and d (should not): precision 1/2, recall 1/1
    assert m["refusal_precision"] == 0.5 and m["refusal_recall"] == 1.0
    assert m["refusal_f1"] == pytest.approx(2 / 3)
    assert m["abstention_rate"] == 0.5
    assert m["latency_s"] == pytest.approx(7 / 3)  # the reused row's latency is left out
    assert m["logical_decisions"] == 2.0 and m["batched_passes"] == 2.0  # 4 passes / batch of 2
    assert m["route_direct"] == 0.25 and m["route_conflict"] == 0.25 and m["route_abstain"] == 0.5
    assert m["ece"] is not None and m["aurc"] is not None
    assert m["peak_rss_mib"] is None


def test_paired_pvalues_leave_out_reused_rows_and_the_reference(rows_factory):
    ref = [rows_factory(s, i, accuracy=0.0) for s in (1, 2) for i in "abcd"]
    same = [rows_factory(s, i, accuracy=0.0, reused=1 if s == 2 else None) for s in (1, 2) for i in "abcd"]
    pv = paired_pvalues({"ref": ref, "same": same}, "ref")
    assert list(pv) == ["same"]
    assert pv["same"]["accuracy"] == 1.0 and pv["same"]["f1"] == 1.0  # identical scores
    assert pv["same"]["strict_em"] is None  # no strict EM on either side
    only_reused = [rows_factory(1, "a", reused=0)]
    assert paired_pvalues({"ref": ref, "x": only_reused}, "ref")["x"]["accuracy"] is None
    assert paired_pvalues({"ref": ref}, None) == {} and paired_pvalues({"ref": ref}, "other") == {}


def test_evaluator_validity_against_passage_labels(rows_factory):
    chunks = [
        {
            "chunk_id": "d0",
            "evidence": {"c0": 3.0},
            "valid": True,
            "claim": "Paris",
            "answer": "Paris",
            "grounded": True,
        },
        {
            "chunk_id": "d1",
            "evidence": {"c0": 0.5},
            "valid": False,
            "repaired": True,
            "errors": ["x"],
            "grounded": False,
        },
    ]
    rec = {"chunks": chunks, "timings": {"extract": 0.2, "evaluate": 0.6}}
    instances = {
        "a": {
            "chunks": [{"id": "d0"}, {"id": "d1"}],
            "labels": [{"type": "correct", "answer": "Paris"}, {"type": "irrelevant"}],
        }
    }
    v = evaluator_validity([rows_factory(1, "a", record=rec)], instances)
    assert v == {
        "chunks": 2.0,
        "json_validity": 0.5,
        "repair_rate": 0.5,
        "failure_rate": 0.5,
        "extraction_fidelity": 1.0,
        "ungrounded_rate": 0.5,
        "evidence_label_spearman": pytest.approx(1.0),
        "evaluator_latency_s": pytest.approx(0.4),  # 0.8 s per batched call / batch of 2
    }
    assert evaluator_validity([rows_factory(1, "a")], instances) is None  # a baseline: no evidence
    # a record with the answer read from each chunk is measured on that, not on the supported claim
    read = [{**chunks[0], "extracted": "Lyon"}, {**chunks[1], "extracted": None}]
    v = evaluator_validity([rows_factory(1, "a", record={**rec, "chunks": read})], instances)
    assert v["extraction_fidelity"] == 0.0
    read[0]["extracted"] = "Paris, France"  # contains the labelled answer
    v = evaluator_validity([rows_factory(1, "a", record={**rec, "chunks": read})], instances)
    assert v["extraction_fidelity"] == 1.0


def test_aggregate_summarises_seeds_behaviours_and_cost(rows_factory):
    ev = [rows_factory(s, "a", accuracy=acc, latency=3.0) for s, acc in ((1, 1.0), (2, 0.0))]
    ev += [rows_factory(s, "b", behaviour="unanswerable", refused=True, latency=3.0) for s in (1, 2)]
    naive = [rows_factory(s, i, latency=1.5) for s in (1, 2) for i in "ab"]
    out = aggregate({"evidential": ev, "naive": naive}, {}, "naive")
    S = out["systems"]
    assert out["reference"] == "naive" and list(out["p_values"]) == ["evidential"]
    assert (
        S["evidential"]["seeds"]["1"]["accuracy"] == 1.0 and S["evidential"]["seeds"]["2"]["accuracy"] == 0.5
    )
    assert S["evidential"]["mean_std"]["accuracy"] == {"mean": 0.75, "std": pytest.approx(0.353553, abs=1e-6)}
    assert S["evidential"]["relative_cost_vs_naive"] == 2.0 and S["naive"]["relative_cost_vs_naive"] == 1.0
    assert list(S["evidential"]["behaviours"]) == ["answerable", "unanswerable"]
    assert S["evidential"]["behaviours"]["unanswerable"]["abstention_rate"] == {"mean": 1.0, "std": 0.0}
    assert S["evidential"]["validity"] is None and S["evidential"]["reused_seeds"] == []
