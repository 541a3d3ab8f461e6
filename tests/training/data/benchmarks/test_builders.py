"""Builders on the real records of ../shared/data."""

from __future__ import annotations

from collections import Counter

import pytest

from training.data.annotated import TrainingDataError
from training.data.benchmarks import BUILDERS, build_dataset, read_ramdocs
from training.utils.text import normalize_text


def test_registry():
    assert set(BUILDERS.names()) >= {"ramdocs", "wikicontradict", "conflictqa", "musique"}


def test_ramdocs_stance_vs_credibility(shared_data):
    path = shared_data / "ramdocs" / "RAMDocs_test.jsonl"
    recs = read_ramdocs(path)
    stance = build_dataset("ramdocs", path, labeling="stance")
    cred = build_dataset("ramdocs", path, labeling="credibility")
    n_docs = sum(len(r["documents"]) for r in recs)
    assert len(stance) == len(cred) == n_docs == 1919
    types = Counter(r.doc_type for r in stance)
    assert types == {"correct": 1328, "noise": 379, "misinfo": 212}
    for s, c in zip(stance, cred):
        assert s.candidates == c.candidates and s.gold == c.gold
        if s.doc_type == "noise":
            assert s.label is None and c.label is None
        elif s.doc_type == "correct":
            assert s.label == c.label is not None and s.label in s.gold
        else:  # misinformation: stance supports the planted answer, credibility gives no support
            assert c.label is None and s.label is not None
    # a misinformation document's stance label is one of the record's wrong answers
    rec = next(r for r in recs if any(d["type"] == "misinfo" for d in r["documents"]))
    rows = [x for x in stance if x.query == rec["question"]]
    mis = next(x for x in rows if x.doc_type == "misinfo")
    assert normalize_text(mis.candidates[mis.label]) in {normalize_text(w) for w in rec["wrong_answers"]}


def test_wikicontradict_two_passages_two_answers(shared_data):
    rows = build_dataset("wikicontradict", shared_data / "wikicontradict" / "wikicontradict_qa_refined.jsonl")
    assert len(rows) == 330
    by_q = {}
    for r in rows:
        by_q.setdefault(r.key, []).append(r)
    assert all(len(v) == 2 and [x.label for x in v] == [0, 1] and v[0].gold is None for v in by_q.values())


def test_conflictqa_yes_no_sides(shared_data):
    rows = build_dataset(
        "conflictqa", shared_data / "conflictqa" / "conflictQA-strategyQA-gpt4.jsonl", limit=50
    )
    assert len({r.key for r in rows}) == 50
    assert all(r.candidates == ["yes", "no"] for r in rows)
    first = rows[0]  # "Are more people today related to Genghis Khan than Julius Caesar?" ground truth True
    assert first.query.startswith("Are more people today related to Genghis Khan")
    assert first.gold == [0] and first.doc_type == "memory" and first.label == 0
    counter = next(r for r in rows if r.key == first.key and r.doc_type == "counter")
    assert counter.label == 1


def test_musique_supporting_paragraphs(shared_data):
    rows = build_dataset(
        "musique", shared_data / "musique" / "musique_ans_v1.0_dev_subset.jsonl", limit=10, max_negatives=2
    )
    by_q = Counter(r.key for r in rows)
    assert len(by_q) == 10
    sup = [r for r in rows if r.doc_type == "supporting"]
    assert sup and all(r.label == 0 for r in sup)
    assert all(r.label is None for r in rows if r.doc_type == "distractor")
    assert all(sum(1 for r in rows if r.key == k and r.doc_type == "distractor") == 2 for k in by_q)


def test_bad_record_names_file_and_line(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(
        '{"question": "q", "documents": [{"text": "t", "type": "odd", "answer": "a"}], "gold_answers": [], "wrong_answers": []}\n'
    )
    with pytest.raises(TrainingDataError, match=r"r.jsonl:1: documents\[0\].type is 'odd'"):
        build_dataset("ramdocs", p)
    with pytest.raises(TrainingDataError, match="labeling must be one of stance, credibility"):
        build_dataset("ramdocs", p, labeling="x")


def test_conflictqa_folder_reads_the_model_files_as_evaluate_does(shared_data):
    """A folder path reads every model file in name order and keeps a question's first occurrence, with the
    aligned passages: the same passages `evaluate` gives the question (``conflictqa_instances``)."""
    from training.data.benchmarks import conflictqa_files, conflictqa_instances

    folder = shared_data / "conflictqa"
    files = conflictqa_files(folder)
    assert [f.name for f in files] == sorted(f.name for f in folder.glob("*.jsonl")) and len(files) == 8
    rows = build_dataset("conflictqa", folder, limit=60)
    by_key: dict[str, list[str]] = {}
    for r in rows:
        by_key.setdefault(r.key, []).append(r.chunk)
    assert len(by_key) == 60
    instances = {i.id: i for i in conflictqa_instances(files, limit=80)}
    for key, texts in by_key.items():
        assert texts == [p.text for p in instances[key].passages]  # the first file's four passages
    assert {len(t) for t in by_key.values()} == {4}  # two sides, each with its aligned evidence
    # the GPT-4 file alone gives other passages for a question the ChatGPT file (first by name) also holds
    gpt4 = build_dataset("conflictqa", folder / "conflictQA-strategyQA-gpt4.jsonl", aligned_evidence=True)
    shared = [r for r in gpt4 if r.key in by_key]
    assert shared and any(r.chunk not in by_key[r.key] for r in shared)
    # files restricts the folder; with a file path it is refused, and a pattern must match
    only = build_dataset("conflictqa", folder, files="*gpt4*", limit=5)
    assert [r.chunk for r in only] == [r.chunk for r in gpt4[: len(only)]]
    with pytest.raises(TrainingDataError, match="needs a folder"):
        build_dataset("conflictqa", folder / "conflictQA-strategyQA-gpt4.jsonl", files="*.jsonl")
    with pytest.raises(TrainingDataError, match="no file matches"):
        build_dataset("conflictqa", folder, files="nothing-*.jsonl")
