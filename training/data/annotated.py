"""The annotated-chunk format (docs/data.md): the user-facing contract of learned-evaluator training data.

One JSON object per line::

    {"query": "...", "chunk": "...", "candidates": ["Paris", "Lyon"], "label": 0,
     "gold": [0], "source_dataset": "ramdocs", "split": "train", "doc_type": "correct"}

* ``query``, ``chunk`` (strings) and ``candidates`` (a list of distinct claim strings; may be empty only when
  ``label`` is null) are required;
* ``label`` is the index of the candidate the chunk supports, or ``null`` when it supports none;
* optional: ``gold`` (indices of the candidates that are right answers to the query: enables the
  query-level loss through fusion), ``source_dataset``, ``split`` (``train`` / ``validation``; absent =
  decided by :func:`split_by_question`), ``doc_type`` (e.g. ``correct`` / ``misinfo`` / ``noise``, kept
  for per-type reports), ``query_id`` (groups rows into one query; default: the query text),
  ``teacher_evidence`` (a teacher evaluator's non-negative evidence for each candidate, parallel to
  ``candidates``: the soft target of distillation, ``evidential-rag distill``). A row with
  ``teacher_evidence`` may leave ``label`` out: it then has no human label (``labelled`` is false) and
  trains only on the teacher — ``"label": null`` still means "supports none of the candidates".

Rows of one query must share the same ``candidates`` (the query's frame) and ``gold``. Every error names
the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evidential.errors import EvidentialError
from training.utils.configio import is_int
from training.utils.io import iter_jsonl, write_jsonl

__all__ = [
    "SPLITS",
    "SPLIT_SEED",
    "VALIDATION_FRACTION",
    "AnnotatedChunk",
    "QueryGroup",
    "TrainingDataError",
    "group_by_query",
    "load_annotated",
    "question_bucket",
    "split_by_question",
    "validate_row",
    "write_annotated",
]

SPLITS = ("train", "validation")
VALIDATION_FRACTION = 0.2  # the default share of questions in validation (TrainConfig's default too)
SPLIT_SEED = 0  # the default seed of the split by question (TrainConfig's default too)


class TrainingDataError(EvidentialError):
    """An annotated-chunk file or row that does not follow the format; the message names file, line, field."""


@dataclass
class AnnotatedChunk:
    """One (query, chunk) training example of the annotated-chunk format."""

    query: str
    chunk: str
    candidates: list[str]
    label: int | None
    gold: list[int] | None = None
    source_dataset: str | None = None
    split: str | None = None
    doc_type: str | None = None
    query_id: str | None = None
    teacher_evidence: list[float] | None = None
    labelled: bool = True  # False: no human label (``label`` left out; only ``teacher_evidence`` trains)

    @property
    def key(self) -> str:
        """The query this row belongs to (``query_id`` or the query text)."""
        return self.query_id or self.query

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if v is not None or k == "label"}
        if not d.pop("labelled"):
            d.pop("label")
        return d


def validate_row(row: Any, where: str = "row") -> AnnotatedChunk:
    """Check one parsed row and return it as an :class:`AnnotatedChunk`; ``where`` prefixes messages."""
    if not isinstance(row, dict):
        raise TrainingDataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    known = {f for f in AnnotatedChunk.__dataclass_fields__} - {"labelled"}
    unknown = sorted(set(row) - known)
    if unknown:
        raise TrainingDataError(
            f"{where}: unknown field {unknown[0]!r}; annotated chunks have {', '.join(sorted(known))}"
        )
    for key in ("query", "chunk"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise TrainingDataError(f"{where}: field {key!r} must be a non-empty string")
    cands = row.get("candidates")
    if not isinstance(cands, list) or not all(isinstance(c, str) and c.strip() for c in cands):
        raise TrainingDataError(f"{where}: field 'candidates' must be a list of non-empty strings")
    if len(set(cands)) != len(cands):
        raise TrainingDataError(f"{where}: field 'candidates' has a repeated claim; list each claim once")
    teacher = row.get("teacher_evidence")
    if teacher is not None:
        if not isinstance(teacher, list) or len(teacher) != len(cands):
            raise TrainingDataError(
                f"{where}: field 'teacher_evidence' must be a list of {len(cands)} numbers, one per candidate"
            )
        for j, v in enumerate(teacher):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise TrainingDataError(
                    f"{where}: field 'teacher_evidence'[{j}] must be a finite number >= 0; got {v!r}"
                )
    if "label" not in row and teacher is None:
        raise TrainingDataError(
            f"{where}: missing field 'label' (candidate index, or null for no support; only rows with "
            "'teacher_evidence' may leave it out)"
        )
    label = row.get("label")
    if label is not None and (not is_int(label) or not 0 <= label < len(cands)):
        raise TrainingDataError(
            f"{where}: field 'label' must be null or an index into candidates (0..{len(cands) - 1}); got {label!r}"
        )
    gold = row.get("gold")
    if gold is not None and (
        not isinstance(gold, list) or not all(is_int(g) and 0 <= g < len(cands) for g in gold)
    ):
        raise TrainingDataError(
            f"{where}: field 'gold' must be a list of indices into candidates (0..{len(cands) - 1}); got {gold!r}"
        )
    split = row.get("split")
    if split is not None and split not in SPLITS:
        raise TrainingDataError(f"{where}: field 'split' must be one of {', '.join(SPLITS)}; got {split!r}")
    for key in ("source_dataset", "doc_type", "query_id"):
        if row.get(key) is not None and not isinstance(row[key], str):
            raise TrainingDataError(f"{where}: field {key!r} must be a string")
    return AnnotatedChunk(
        query=row["query"],
        chunk=row["chunk"],
        candidates=list(cands),
        label=label,
        gold=list(gold) if gold is not None else None,
        source_dataset=row.get("source_dataset"),
        split=split,
        doc_type=row.get("doc_type"),
        query_id=row.get("query_id"),
        teacher_evidence=[float(v) for v in teacher] if teacher is not None else None,
        labelled="label" in row,
    )


def load_annotated(path: str | Path) -> list[AnnotatedChunk]:
    """Read and validate an annotated-chunk JSONL file; errors name the file, line and field.

    Rows of one query must agree on ``candidates`` and ``gold``.
    """
    p = Path(path)
    rows: list[AnnotatedChunk] = []
    first: dict[str, tuple[int, AnnotatedChunk]] = {}
    for n, raw in iter_jsonl(p, "annotated-chunk", TrainingDataError):
        row = validate_row(raw, f"{p}:{n}")
        if row.key in first:
            line, ref = first[row.key]
            if row.candidates != ref.candidates:
                raise TrainingDataError(
                    f"{p}:{n}: field 'candidates' differs from line {line} of the same query; rows of a query share its frame"
                )
            if row.gold != ref.gold:
                raise TrainingDataError(f"{p}:{n}: field 'gold' differs from line {line} of the same query")
        else:
            first[row.key] = (n, row)
        rows.append(row)
    if not rows:
        raise TrainingDataError(f"{p}: the file holds no annotated chunks")
    return rows


def write_annotated(path: str | Path, rows: Iterable[AnnotatedChunk]) -> Path:
    """Write rows as annotated-chunk JSONL (atomically)."""
    return write_jsonl(path, (r.to_dict() for r in rows))


@dataclass
class QueryGroup:
    """The rows of one query, in order: its chunks, shared frame (``candidates``) and ``gold`` indices."""

    key: str
    query: str
    candidates: list[str]
    gold: list[int] | None
    rows: list[AnnotatedChunk] = field(default_factory=list)
    split: str | None = None


def group_by_query(rows: Sequence[AnnotatedChunk]) -> list[QueryGroup]:
    """Group rows by query (first-appearance order)."""
    groups: dict[str, QueryGroup] = {}
    for r in rows:
        g = groups.get(r.key)
        if g is None:
            g = groups[r.key] = QueryGroup(r.key, r.query, list(r.candidates), r.gold, split=r.split)
        g.rows.append(r)
    return list(groups.values())


def question_bucket(key: str, seed: int) -> float:
    """The deterministic position in ``[0, 1)`` of the query key ``key`` under ``seed`` (sha256 of both):
    the split by question sends a key to validation when it falls below the validation fraction."""
    digest = hashlib.sha256(f"{seed}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_by_question(
    rows: Sequence[AnnotatedChunk], validation_fraction: float = VALIDATION_FRACTION, seed: int = SPLIT_SEED
) -> tuple[list[AnnotatedChunk], list[AnnotatedChunk]]:
    """Deterministic train/validation split by question: no question lands on both sides.

    Rows with an explicit ``split`` keep it (for every row of their query); the others go to validation when
    the hash of ``(seed, query key)`` falls below ``validation_fraction``.
    """
    if not 0 <= validation_fraction < 1:
        raise TrainingDataError(f"validation_fraction must lie in [0, 1); got {validation_fraction!r}")
    explicit: dict[str, str] = {}
    for r in rows:
        if r.split is not None:
            prev = explicit.setdefault(r.key, r.split)
            if prev != r.split:
                raise TrainingDataError(
                    f"query {r.query[:60]!r} has rows in both splits; a question belongs to one split"
                )
    train: list[AnnotatedChunk] = []
    val: list[AnnotatedChunk] = []
    for r in rows:
        side = explicit.get(r.key) or (
            "validation" if question_bucket(r.key, seed) < validation_fraction else "train"
        )
        (val if side == "validation" else train).append(r)
    return train, val
