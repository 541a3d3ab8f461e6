"""Shared pieces of the benchmark readers: records, question ids, answer frames, instances and the split."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from training.data.annotated import SPLIT_SEED, VALIDATION_FRACTION, TrainingDataError, question_bucket
from training.data.benchmarks import BEHAVIOUR_RULES, EXPECTED_BEHAVIOURS, Chunk, EvalInstance, split_of
from training.data.benchmarks.common import (
    answer_frame,
    dedup_answers,
    make_passages,
    question_id,
    read_records,
)
from training.trainer.config import TrainConfig


def test_question_id_is_the_sha1_prefix():
    assert question_id("ramdocs", "x") == "ramdocs:11f6ad8ec52a"
    assert len(question_id("musique", "2hop__1")) == len("musique:") + 12


def test_answer_frame_and_dedup():
    claims, index = answer_frame(["The Beatles", " beatles ", "Queen", "", "a"])
    assert claims == ["The Beatles", "Queen"] and index == {"beatles": 0, "queen": 1}
    assert dedup_answers(["Stanley", "Stanley, ND", "stanley"]) == ["Stanley", "Stanley, ND"]


def test_read_records_names_file_line_and_field(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text('{"q": "a"}\n\n[1]\n', encoding="utf-8")
    assert [(line, rec) for _p, line, rec in read_records(p, "X", {"q": str}, limit=1)] == [(1, {"q": "a"})]
    with pytest.raises(TrainingDataError, match=r"r\.jsonl:3: expected a JSON object, got list"):
        list(read_records(p, "X", {"q": str}))
    p.write_text('{"q": 1}\n', encoding="utf-8")
    with pytest.raises(TrainingDataError, match=r"r\.jsonl:1: field 'q' must be a str, got int"):
        list(read_records(p, "X", {"q": str}))
    with pytest.raises(TrainingDataError, match=r"r\.jsonl:1: missing field 'z' \(X records have z\)"):
        list(read_records(p, "X", {"z": str}))


def test_split_defaults_are_the_training_defaults():
    defaults = {f.name: f.default for f in fields(TrainConfig)}
    assert (VALIDATION_FRACTION, SPLIT_SEED) == (defaults["validation_fraction"], defaults["split_seed"])
    key = question_id("ramdocs", "1\x00What sport is Bobby Carpenter associated with?")
    assert split_of(key) == ("validation" if question_bucket(key, 0) < 0.2 else "train")
    assert split_of(key, 0.0) == "train" and split_of(key, 0.999999) == "validation"


def test_eval_instance_round_trip_and_checks():
    inst = EvalInstance(
        id="d:1",
        dataset="d",
        question="q?",
        passages=make_passages("d:1", [("text a", "src"), ("text b", None)]),
        passage_labels=[{"type": "t", "answer": "a"}, {"type": "t", "answer": None}],
        gold_answers=["a"],
        wrong_answers=[],
        expected_behaviour="answerable",
        conflict_sides=[],
        split="train",
    )
    assert inst.passages == [
        Chunk("d:1/0", "text a", "src", 1, None),
        Chunk("d:1/1", "text b", None, 2, None),
    ]
    d = json.loads(json.dumps(inst.to_dict()))
    assert EvalInstance.from_dict(d) == inst
    with pytest.raises(TrainingDataError, match="at: unknown field 'extra'"):
        EvalInstance.from_dict({**d, "extra": 1}, "at")
    with pytest.raises(TrainingDataError, match="bad passage"):
        EvalInstance.from_dict({**d, "passages": [{"id": "x"}]})
    with pytest.raises(TrainingDataError, match="1 passage labels for 2 passages"):
        EvalInstance(**{**inst.__dict__, "passage_labels": inst.passage_labels[:1]})


def test_every_rule_names_an_expected_behaviour():
    assert set(BEHAVIOUR_RULES) == {
        "ramdocs",
        "wikicontradict",
        "wikicontradict-instances",
        "conflictqa",
        "musique",
        "crag",
    }
    assert {kind for rules in BEHAVIOUR_RULES.values() for _, kind in rules} == set(EXPECTED_BEHAVIOURS)


def test_parquet_rows_read_as_jsonl_lines(shared_data, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    from training.data.benchmarks import build_ramdocs, ramdocs_instances

    src = shared_data / "ramdocs" / "RAMDocs_test.jsonl"
    with src.open(encoding="utf-8") as fh:
        rows = [json.loads(next(fh)) for _ in range(3)]
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    parquet = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    assert build_ramdocs(parquet) == build_ramdocs(jsonl)
    a, b = ramdocs_instances(parquet), ramdocs_instances(jsonl)
    assert [{**x.to_dict(), "meta": None} for x in a] == [{**x.to_dict(), "meta": None} for x in b]
    assert a[1].meta["line"] == 2 and a[1].meta["source"] == str(parquet)
    rows[1]["question"] = None
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    with pytest.raises(
        TrainingDataError, match=r"r\.parquet:2: field 'question' must be a str, got NoneType"
    ):
        build_ramdocs(parquet)
    (tmp_path / "bad.parquet").write_text("not parquet", encoding="utf-8")
    with pytest.raises(TrainingDataError, match=r"bad\.parquet: not a readable Parquet file"):
        build_ramdocs(tmp_path / "bad.parquet")
