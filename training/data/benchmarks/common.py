"""What every benchmark reader shares: validated records, question ids, answer frames and evaluation instances.

* :func:`read_records` yields the records of a JSONL file (or of a Parquet file, ``.parquet``: one record
  per row, numbered from 1 like lines) with their line numbers, checking the required fields and their
  types; every error is a :class:`~training.data.annotated.TrainingDataError`
  naming the file, the line and the field.
* :func:`question_id` is the query key of a question (``<dataset>:<sha1[:12]>``): the ``query_id`` of the
  training rows and the ``split_key`` of the evaluation instances built from the same record.
* :func:`answer_frame` / :func:`dedup_answers` collapse answers that are equal after SQuAD normalization.
* :class:`EvalInstance` is one evaluation question (passages, their labels, gold and wrong answers, the
  expected behaviour); :func:`split_of` is its side of the learned evaluator's split by question.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NoReturn

from training.data.annotated import (
    SPLIT_SEED,
    SPLITS,
    VALIDATION_FRACTION,
    TrainingDataError,
    question_bucket,
)
from training.data.chunk import Chunk
from training.utils.io import iter_jsonl
from training.utils.text import normalize_text

__all__ = [
    "EXPECTED_BEHAVIOURS",
    "EvalInstance",
    "Chunk",
    "answer_frame",
    "dedup_answers",
    "fail",
    "iter_rows",
    "make_passages",
    "passage_label",
    "question_id",
    "read_records",
    "split_of",
    "string_list",
]

EXPECTED_BEHAVIOURS = ("answerable", "ambiguous", "misinformation", "conflict", "unanswerable")


def fail(where: str | Path, msg: str) -> NoReturn:
    """Raise :class:`TrainingDataError` as ``<where>: <msg>`` (``where`` is ``file:line``)."""
    raise TrainingDataError(f"{where}: {msg}")


def iter_rows(path: str | Path, what: str) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` of a JSONL file's non-empty lines, or ``(row, record)`` of a ``.parquet`` file's rows
    (numbered from 1); a missing or unreadable file raises :class:`TrainingDataError` naming it."""
    p = Path(path)
    if p.suffix != ".parquet":
        yield from iter_jsonl(p, what, TrainingDataError)
        return
    if not p.is_file():
        raise TrainingDataError(f"{p}: no such {what} file; give the path of a {what} JSONL or Parquet file")
    import pyarrow.parquet as pq  # heavy: only for Parquet input

    try:
        table = pq.read_table(p)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ...
        raise TrainingDataError(f"{p}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
    yield from enumerate(table.to_pylist(), 1)


def read_records(
    path: str | Path, what: str, required: dict[str, type], limit: int | None = None
) -> Iterator[tuple[Path, int, dict]]:
    """Yield ``(path, line, record)`` for the first ``limit`` records of a JSONL (or Parquet) file of ``what``
    records.

    Every record must be a JSON object holding each key of ``required`` with a value of its type.
    """
    p = Path(path)
    n_out = 0
    for line, rec in iter_rows(p, what):
        if not isinstance(rec, dict):
            fail(f"{p}:{line}", f"expected a JSON object, got {type(rec).__name__}")
        for key, kind in required.items():
            if key not in rec:
                fail(f"{p}:{line}", f"missing field {key!r} ({what} records have {', '.join(required)})")
            if not isinstance(rec[key], kind):
                fail(f"{p}:{line}", f"field {key!r} must be a {kind.__name__}, got {type(rec[key]).__name__}")
        yield p, line, rec
        n_out += 1
        if limit is not None and n_out >= limit:
            return


def question_id(dataset: str, text: str) -> str:
    """The query key of a question: ``<dataset>:`` and the first 12 hex digits of the sha1 of ``text``."""
    return f"{dataset}:{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def answer_frame(answers: list[str]) -> tuple[list[str], dict[str, int]]:
    """Distinct claims (first surface form kept, stripped) and their normalized-text index."""
    claims: list[str] = []
    index: dict[str, int] = {}
    for a in answers:
        key = normalize_text(a)
        if key and key not in index:
            index[key] = len(claims)
            claims.append(a.strip())
    return claims, index


def dedup_answers(answers: list[str]) -> list[str]:
    """Distinct answers after SQuAD normalization, first surface form kept (stripped); empty ones dropped."""
    return answer_frame(answers)[0]


def string_list(value: Any, where: str, name: str) -> list[str]:
    """``value`` when it is a list of strings; else an error naming ``where`` and the field ``name``."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        fail(where, f"field {name!r} must be a list of strings")
    return value


def split_of(key: str, validation_fraction: float = VALIDATION_FRACTION, seed: int = SPLIT_SEED) -> str:
    """``train`` or ``validation`` of the training split by question
    (:func:`training.data.annotated.split_by_question`) for the query key ``key``."""
    return "validation" if question_bucket(key, seed) < validation_fraction else "train"


def make_passages(instance_id: str, items: list[tuple[str, str | None]]) -> list[Chunk]:
    """``(text, source)`` pairs in dataset order → passages ``<instance_id>/<j>`` ranked 1..n, no score."""
    return [Chunk(f"{instance_id}/{j}", text, source, j + 1, None) for j, (text, source) in enumerate(items)]


def passage_label(kind: str | None, answer: str | None) -> dict[str, str | None]:
    """The label of one passage: its ``type`` and the ``answer`` it states (``None``: none)."""
    return {"type": kind, "answer": answer}


@dataclass
class EvalInstance:
    """One evaluation question with its passages, their labels and what a good answer does.

    Attributes:
        id: Stable unique id within the dataset (from the record's key).
        dataset: The registry name of the dataset.
        question: The question.
        passages: The dataset's passages in its order (ranks 1..n, no score).
        passage_labels: Parallel to ``passages``: ``{"type": str | None, "answer": str | None}``.
        gold_answers: Every valid answer (and alias).
        wrong_answers: Planted or contradicted answers where known, else empty.
        expected_behaviour: One of :data:`EXPECTED_BEHAVIOURS` (the dataset's behaviour rule).
        conflict_sides: For conflict / ambiguous instances, the answer groups a conflict-aware answer names.
        split: ``train`` or ``validation`` of the learned evaluator's split (see :func:`split_of`).
        meta: Dataset-specific extras (always ``line`` / ``source`` and ``split_key``).
    """

    id: str
    dataset: str
    question: str
    passages: list[Chunk]
    passage_labels: list[dict]
    gold_answers: list[str]
    wrong_answers: list[str]
    expected_behaviour: str
    conflict_sides: list[list[str]]
    split: str
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.expected_behaviour not in EXPECTED_BEHAVIOURS:
            raise TrainingDataError(
                f"instance {self.id!r}: expected_behaviour must be one of {', '.join(EXPECTED_BEHAVIOURS)}; "
                f"got {self.expected_behaviour!r}"
            )
        if self.split not in SPLITS:
            raise TrainingDataError(
                f"instance {self.id!r}: split must be one of {', '.join(SPLITS)}; got {self.split!r}"
            )
        if len(self.passage_labels) != len(self.passages):
            raise TrainingDataError(
                f"instance {self.id!r}: {len(self.passage_labels)} passage labels for {len(self.passages)} passages"
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; :meth:`from_dict` reads it back."""
        return {
            "id": self.id,
            "dataset": self.dataset,
            "question": self.question,
            "passages": [p.to_dict() for p in self.passages],
            "passage_labels": [dict(x) for x in self.passage_labels],
            "gold_answers": list(self.gold_answers),
            "wrong_answers": list(self.wrong_answers),
            "expected_behaviour": self.expected_behaviour,
            "conflict_sides": [list(s) for s in self.conflict_sides],
            "split": self.split,
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "instance") -> EvalInstance:
        """The instance written by :meth:`to_dict`; a missing or malformed field raises
        :class:`~training.data.annotated.TrainingDataError`."""
        if not isinstance(d, dict):
            fail(where, f"expected a JSON object (an evaluation instance), got {type(d).__name__}")
        names = [f.name for f in fields(cls)]
        for name in names:
            if name not in d and name != "meta":
                fail(where, f"missing field {name!r} (evaluation instances have {', '.join(names)})")
        unknown = sorted(set(d) - set(names))
        if unknown:
            fail(where, f"unknown field {unknown[0]!r}; evaluation instances have {', '.join(names)}")
        passages = d["passages"]
        if not isinstance(passages, list) or not all(isinstance(p, dict) for p in passages):
            fail(where, "field 'passages' must be a list of passage objects")
        try:
            items = [Chunk(**p) for p in passages]
        except TypeError as exc:
            fail(where, f"field 'passages' holds a bad passage ({exc})")
        return cls(
            id=d["id"],
            dataset=d["dataset"],
            question=d["question"],
            passages=items,
            passage_labels=[dict(x) for x in d["passage_labels"]],
            gold_answers=list(d["gold_answers"]),
            wrong_answers=list(d["wrong_answers"]),
            expected_behaviour=d["expected_behaviour"],
            conflict_sides=[list(s) for s in d["conflict_sides"]],
            split=d["split"],
            meta=dict(d.get("meta") or {}),
        )
