"""The annotated-chunk contract: validation messages, grouping and the split by question."""

from __future__ import annotations

import json

import pytest

from training.data.annotated import (
    AnnotatedChunk,
    TrainingDataError,
    group_by_query,
    load_annotated,
    split_by_question,
    write_annotated,
)


def _write(tmp_path, rows):
    p = tmp_path / "a.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


GOOD = {"query": "q1", "chunk": "Paris is big.", "candidates": ["Paris", "Lyon"], "label": 0, "gold": [0]}


def test_round_trip(tmp_path):
    rows = [AnnotatedChunk(**{**GOOD, "split": "train"}), AnnotatedChunk(**{**GOOD, "label": None})]
    path = write_annotated(tmp_path / "x.jsonl", rows)
    back = load_annotated(path)
    assert [r.label for r in back] == [0, None]
    assert back[0].split == "train" and back[0].gold == [0]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {**GOOD, "label": 2},
            "line 1: field 'label' must be null or an index into candidates (0..1); got 2",
        ),
        ({**GOOD, "candidates": ["a", "a"]}, "field 'candidates' has a repeated claim"),
        ({k: v for k, v in GOOD.items() if k != "label"}, "missing field 'label'"),
        ({**GOOD, "query": ""}, "field 'query' must be a non-empty string"),
        ({**GOOD, "gold": [5]}, "field 'gold' must be a list of indices"),
        ({**GOOD, "split": "test"}, "field 'split' must be one of train, validation"),
        ({**GOOD, "extra": 1}, "unknown field 'extra'"),
    ],
)
def test_errors_name_file_line_field(tmp_path, row, message):
    path = _write(tmp_path, [row])
    with pytest.raises(TrainingDataError) as exc:
        load_annotated(path)
    text = str(exc.value).replace(f"{path}:1", "line 1")
    assert message in text
    assert str(path) in str(exc.value)


def test_rows_of_a_query_share_the_frame(tmp_path):
    path = _write(tmp_path, [GOOD, {**GOOD, "candidates": ["Paris", "Nice"]}])
    with pytest.raises(TrainingDataError, match=r":2: field 'candidates' differs from line 1"):
        load_annotated(path)


def test_invalid_json_and_empty_file(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"query": \n', encoding="utf-8")
    with pytest.raises(TrainingDataError, match=r"bad.jsonl:1: not valid JSON"):
        load_annotated(p)
    p.write_text("\n", encoding="utf-8")
    with pytest.raises(TrainingDataError, match="holds no annotated chunks"):
        load_annotated(p)


def test_split_is_deterministic_and_by_question():
    rows = [AnnotatedChunk(f"q{i // 3}", f"c{i}", ["a"], None) for i in range(300)]
    tr1, va1 = split_by_question(rows, 0.2, seed=1)
    tr2, va2 = split_by_question(rows, 0.2, seed=1)
    assert [r.chunk for r in va1] == [r.chunk for r in va2]
    assert not {r.query for r in tr1} & {r.query for r in va1}
    assert 0.1 < len({r.query for r in va1}) / 100 < 0.3
    _, va3 = split_by_question(rows, 0.2, seed=2)
    assert {r.query for r in va3} != {r.query for r in va1}


def test_explicit_split_wins_and_must_agree():
    rows = [AnnotatedChunk("q", "c1", [], None, split="validation"), AnnotatedChunk("q", "c2", [], None)]
    tr, va = split_by_question(rows, 0.01)
    assert not tr and len(va) == 2
    rows.append(AnnotatedChunk("q", "c3", [], None, split="train"))
    with pytest.raises(TrainingDataError, match="both splits"):
        split_by_question(rows)


def test_group_by_query_keeps_order():
    rows = [
        AnnotatedChunk("b", "1", ["x"], 0),
        AnnotatedChunk("a", "2", ["y"], None),
        AnnotatedChunk("b", "3", ["x"], None),
    ]
    groups = group_by_query(rows)
    assert [g.query for g in groups] == ["b", "a"]
    assert [r.chunk for r in groups[0].rows] == ["1", "3"]
