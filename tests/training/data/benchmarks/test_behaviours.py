"""The behaviour rule of every other dataset, counted on the real files; readers give both outputs."""

from __future__ import annotations

from collections import Counter

from training.data.benchmarks import (
    annotation_instances,
    build_conflictqa,
    build_musique,
    build_wikicontradict,
    conflictqa_instances,
    crag_instances,
    musique_instances,
    wikicontradict_instances,
)
from training.data.benchmarks.conflictqa import read_sides


def _kinds(instances):
    return dict(Counter(i.expected_behaviour for i in instances))


def test_wikicontradict_every_question_is_a_conflict(shared_data):
    folder = shared_data / "wikicontradict"
    qa = wikicontradict_instances(folder / "wikicontradict_qa_refined.jsonl")
    assert _kinds(qa) == {"conflict": 165}
    raw = annotation_instances(
        folder / "wikicontradict_instances.jsonl", qa_path=folder / "wikicontradict_qa_refined.jsonl"
    )
    assert _kinds(raw) == {"conflict": 165}
    rows = build_wikicontradict(folder / "wikicontradict_qa_refined.jsonl")
    assert {r.query_id for r in rows} <= {i.id for i in qa}


def test_conflictqa_every_question_is_a_conflict(shared_data):
    path = shared_data / "conflictqa" / "conflictQA-strategyQA-gpt4.jsonl"
    instances = conflictqa_instances([path])
    assert _kinds(instances) == {"conflict": 979}
    rows = build_conflictqa(path)
    by_key = {i.id: i for i in instances}
    readable = {i.id for i in instances if i.meta["sides_read"]}
    assert {r.query_id for r in rows} <= readable
    for r in rows[:40]:  # the training label is the side the evaluation label names
        inst = by_key[r.query_id]
        assert r.candidates[r.label] in {x["answer"] for x in inst.passage_labels}
        assert [r.candidates[g] for g in r.gold] == inst.gold_answers


def test_conflictqa_sides_from_the_answer_sentences():
    rec = {"ground_truth": [True], "memory_answer": "Yes, it is.", "counter_answer": "No, it is not."}
    sides = read_sides(rec, "here")
    assert (sides.gold, sides.memory, sides.counter, sides.readable) == ("yes", "yes", "no", True)
    both = read_sides({**rec, "memory_answer": "It is not."}, "here")
    assert (both.memory, both.counter, both.readable) == (None, None, False)


def test_musique_and_crag_behaviours(shared_data):
    path = shared_data / "musique" / "musique_ans_v1.0_dev_subset.jsonl"
    instances = musique_instances(path)
    assert _kinds(instances) == {"answerable": 140}
    assert {r.query_id for r in build_musique(path)} == {i.meta["split_key"] for i in instances}
    crag = crag_instances(shared_data / "crag" / "crag_dev_example.jsonl", page_text=lambda html: "page")
    assert _kinds(crag) == {"answerable": 6, "unanswerable": 1}
    assert all(p.text == "page" for i in crag for p in i.passages)
