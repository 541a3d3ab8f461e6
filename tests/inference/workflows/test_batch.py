"""Reading a questions JSONL for `evidential-rag batch` and answering it in batches."""

from __future__ import annotations

import json

import pytest

from inference.types import Chunk, DataError
from inference.workflows.batch import BatchQuestion, answer_questions, read_questions


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_read_questions_chunks_candidates_and_ids(tmp_path):
    f = _write(
        tmp_path / "q.jsonl",
        [
            {
                "id": "x",
                "question": "Q1?",
                "docs": ["a", {"text": "b", "id": "B", "source": "s"}],
                "c": ["yes"],
            },
            {"query": "Q2?", "docs": []},
            {"question": "Q3?", "docs": ["c"]},
        ],
    )
    got = read_questions(f, "docs", "c")
    assert got[0] == BatchQuestion(
        "x", "Q1?", [Chunk("d1", "a", None, rank=1), Chunk("B", "b", "s", rank=2)], ["yes"]
    )
    assert got[1] == BatchQuestion("2", "Q2?", [], [])  # the line number is the default id
    assert [q.id for q in read_questions(f, "docs", limit=2)] == ["x", "2"]
    assert read_questions(f)[0].chunks is None  # no chunks field: the pipeline retrieves


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ([1], "expected a JSON object"),
        ({"question": " "}, "field 'question' must be a non-empty string"),
        ({"question": "q", "docs": "a"}, "field 'docs' must be a list of chunks"),
        ({"question": "q", "docs": [3]}, r"docs\[0\] must be a string or an object with 'text'"),
        ({"question": "q", "docs": [], "c": "yes"}, "field 'c' must be a list of strings"),
    ],
)
def test_read_questions_names_the_bad_row(tmp_path, row, message):
    f = _write(tmp_path / "q.jsonl", [row])
    with pytest.raises(DataError, match=message) as info:
        read_questions(f, "docs", "c")
    assert f"{f}:1" in str(info.value)


def test_answer_questions_batches_in_order():
    class Fake:
        def __init__(self):
            self.calls = []

        def ask_batch(self, questions, chunks, candidates):
            self.calls.append(list(questions))
            return [{"route": "direct", "q": q} for q in questions]

    rag = Fake()
    qs = [BatchQuestion(str(i), f"q{i}", None, []) for i in range(5)]
    records = answer_questions(rag, qs, batch_size=2)
    assert rag.calls == [["q0", "q1"], ["q2", "q3"], ["q4"]]
    assert [(r["id"], r["q"]) for r in records] == [(str(i), f"q{i}") for i in range(5)]
