"""The RAMDocs behaviour rule on the real records; one record, both outputs."""

from __future__ import annotations

from collections import Counter

import pytest

from inference.evaluation.datasets import load_eval_dataset
from inference.ramdocs import SAMPLE_PATH
from inference.workflows import demo
from training.data.benchmarks import (
    BEHAVIOUR_RULES,
    build_ramdocs,
    ramdocs_instances,
    read_ramdocs,
    record_kind,
)
from training.data.benchmarks.ramdocs import KINDS, RULES


@pytest.fixture(scope="module")
def path(shared_data):
    return shared_data / "ramdocs" / "RAMDocs_test.jsonl"


def test_rule_counts_on_the_shared_file(path):
    records = read_ramdocs(path)
    assert len(records) == 347
    assert Counter(record_kind(r) for r in records) == {
        "ambiguous": 275,
        "misinformation": 41,
        "answerable": 29,
        "unanswerable": 2,
    }
    # ambiguity is checked before misinformation: these ambiguous records also hold a misinfo document
    both = [
        r
        for r in records
        if record_kind(r) == "ambiguous" and any(d["type"] == "misinfo" for d in r["documents"])
    ]
    assert len(both) == 128


def test_rule_counts_on_the_shipped_sample():
    assert Counter(record_kind(r) for r in read_ramdocs(SAMPLE_PATH)) == {
        "ambiguous": 23,
        "answerable": 12,
        "misinformation": 1,
    }


def test_rule_order_on_real_records(path):
    by_line = {r["_line"]: r for r in read_ramdocs(path)}
    assert record_kind(by_line[1]) == "answerable"  # Bobby Carpenter: three correct documents, one noise
    assert record_kind(by_line[2]) == "misinformation"  # Lahu Ke Do Rang: one gold, planted "Raj Kapoor"
    assert record_kind(by_line[6]) == "unanswerable"  # only noise and a misinfo document
    assert record_kind(by_line[25]) == "unanswerable"  # a single noise document
    rec = next(
        r
        for r in by_line.values()
        if len(r["gold_answers"]) >= 2 and any(d["type"] == "misinfo" for d in r["documents"])
    )
    assert record_kind(rec) == "ambiguous"
    one_gold = {**rec, "gold_answers": rec["gold_answers"][:1]}
    assert record_kind(one_gold) == "misinformation"
    no_misinfo = {**one_gold, "documents": [d for d in rec["documents"] if d["type"] != "misinfo"]}
    assert record_kind(no_misinfo) == "answerable"
    # two gold answers equal after normalization are one answer
    assert record_kind({**no_misinfo, "gold_answers": ["The Beatles", "beatles"]}) == "answerable"


def test_rules_table_names_the_kinds():
    assert BEHAVIOUR_RULES["ramdocs"] == RULES
    assert [kind for _, kind in RULES] == ["unanswerable", "ambiguous", "misinformation", "answerable"]
    assert set(KINDS) == {kind for _, kind in RULES}


def test_demo_and_evaluation_use_the_same_rule(path):
    records = read_ramdocs(path)
    instances = ramdocs_instances(path)
    assert [i.expected_behaviour for i in instances] == [record_kind(r) for r in records]
    assert instances == load_eval_dataset("ramdocs", path)
    assert demo.record_kind is record_kind and demo.KINDS == KINDS


def test_one_record_gives_both_outputs(path):
    rows = build_ramdocs(path, limit=2)
    instances = ramdocs_instances(path, limit=2)
    for inst in instances:
        mine = [r for r in rows if r.query_id == inst.id]
        assert inst.meta["split_key"] == inst.id
        assert [r.chunk for r in mine] == [p.text for p in inst.passages]
        assert [r.doc_type for r in mine] == [x["type"] for x in inst.passage_labels]
        for r, lab in zip(mine, inst.passage_labels):
            if r.label is not None:
                assert r.candidates[r.label].lower() == lab["answer"].lower()
    second = instances[1]
    assert second.expected_behaviour == "misinformation" and second.wrong_answers == ["Raj Kapoor"]
    assert (
        sum(r.label is not None for r in rows if r.query_id == second.id)
        == len(second.passages) - second.meta["n_noise"]
    )
