"""ConflictQA-StrategyQA (ICLR 2024): yes/no questions with a parametric-memory and a counter-memory passage.

A row holds ``question``, ``ground_truth`` (``[True]`` / ``[False]``), ``memory_answer`` /
``counter_answer`` (the answer sentences of the two sides), ``parametric_memory`` / ``counter_memory``
(the two passages) and optionally the two ``*_aligned_evidence`` passages. :func:`read_sides` reads a row
once: the gold ``yes`` / ``no`` from ``ground_truth`` and each passage's yes/no side from its answer
sentence (the negated one is "no"; unreadable where both or neither sentence is negated).

* training rows (:func:`build_conflictqa`): the memory passages support the memory side, the counter
  passages the counter side; frame ``["yes", "no"]``; over one file or a folder of model files
  (:func:`conflictqa_files`), a question is used once (first occurrence of its normalized text wins); a
  question whose first row's sides cannot be read is skipped.
* evaluation instances (:func:`conflictqa_instances`): over one or several files, deduplicated by
  normalized question (first occurrence wins); labels ``memory`` / ``counter_memory`` with the side read
  (``None`` where unreadable); gold = the ground truth, wrong = the opposite; sides ``[["yes"], ["no"]]``.

Behaviour rule (:data:`RULES`): every question is a ``conflict`` (the two passages argue for opposite
answers by construction).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from training.data.annotated import AnnotatedChunk, TrainingDataError
from training.data.benchmarks.common import (
    EvalInstance,
    fail,
    make_passages,
    passage_label,
    question_id,
    read_records,
    split_of,
)
from training.utils.text import normalize_text

__all__ = [
    "REQUIRED",
    "RULES",
    "YES_NO",
    "Sides",
    "build_conflictqa",
    "conflictqa_files",
    "conflictqa_instances",
    "read_sides",
]

RULES: tuple[tuple[str, str], ...] = (("every question (memory vs counter-memory passages)", "conflict"),)
# the fields every ConflictQA-StrategyQA row must carry
REQUIRED: dict[str, type] = {
    "question": str,
    "ground_truth": list,
    "memory_answer": str,
    "counter_answer": str,
    "parametric_memory": str,
    "counter_memory": str,
}
YES_NO = ("yes", "no")
_NEGATION = re.compile(r"\b(?:not|no|never|cannot|none|neither|nor)\b|n't\b", re.IGNORECASE)
_TRUTH = {"true": "yes", "false": "no", "yes": "yes", "no": "no"}
# passage field -> the side it argues for
_PASSAGES = (("parametric_memory", "memory"), ("counter_memory", "counter"))
_ALIGNED = (("parametric_memory_aligned_evidence", "memory"), ("counter_memory_aligned_evidence", "counter"))


@dataclass(frozen=True)
class Sides:
    """What a row says: ``gold`` (``yes`` / ``no``), and the ``memory`` and ``counter`` sides (``None``
    both when the answer sentences cannot be read)."""

    gold: str
    memory: str | None
    counter: str | None

    @property
    def readable(self) -> bool:
        return self.memory is not None


def read_sides(rec: dict, where: str) -> Sides:
    """The gold answer and the two passages' yes/no sides of a validated row (see the module doc)."""
    truth = {_TRUTH.get(str(t).strip().lower()) for t in rec["ground_truth"]} - {None}
    if len(truth) != 1:
        fail(where, f"field 'ground_truth' must hold one of True/False; got {rec['ground_truth']!r}")
    mem_neg = bool(_NEGATION.search(rec["memory_answer"]))
    if mem_neg == bool(_NEGATION.search(rec["counter_answer"])):
        return Sides(next(iter(truth)), None, None)
    return Sides(next(iter(truth)), *(("no", "yes") if mem_neg else ("yes", "no")))


def _passages(rec: dict, aligned_evidence: bool) -> list[tuple[str, str]]:
    """``(field, side)`` of the row's non-empty passages, in training and evaluation order."""
    items = [*_PASSAGES, *(_ALIGNED if aligned_evidence else ())]
    return [(name, side) for name, side in items if isinstance(rec.get(name), str) and rec[name].strip()]


def conflictqa_files(path: str | Path, files: str | list[str] | None = None) -> list[Path]:
    """The ConflictQA files that ``path`` names: the file itself, or the folder's files matching ``files``
    (names or glob patterns, in that order; default ``*.jsonl``), each pattern's matches sorted by name.

    Raises:
        TrainingDataError: ``files`` with a file path, or a pattern that matches no file.
    """
    p = Path(path)
    if not p.is_dir():
        if files is not None:
            raise TrainingDataError(
                f"ConflictQA option files needs a folder as path; {p} is a file, which is read alone"
            )
        return [p]
    patterns = [files] if isinstance(files, str) else (files or ["*.jsonl"])
    found: list[Path] = []
    for pattern in patterns:
        matches = sorted(f for f in p.glob(pattern) if f.is_file())
        if not matches:
            raise TrainingDataError(f"ConflictQA folder {p}: no file matches {pattern!r}")
        found += [m for m in matches if m not in found]
    return found


def _first_rows(files: Iterable[str | Path]) -> Iterator[tuple[Path, int, dict]]:
    """``(file, line, row)`` of the first row of each question over ``files`` in order (by normalized
    question text), readable sides or not: the row both the training builder and ``evaluate`` read."""
    seen: set[str] = set()
    for file in files:
        for p, line, rec in read_records(file, "ConflictQA", REQUIRED, None):
            norm = normalize_text(rec["question"])
            if norm not in seen:
                seen.add(norm)
                yield p, line, rec


def build_conflictqa(
    path: str | Path,
    *,
    limit: int | None = None,
    aligned_evidence: bool = True,
    files: str | list[str] | None = None,
) -> list[AnnotatedChunk]:
    """ConflictQA-StrategyQA rows → yes/no frames; memory vs counter-memory passages (see module doc).

    ``path`` is one file or a folder of model files (:func:`conflictqa_files`; ``files`` restricts it), read
    in that order as ``evaluate`` reads it. A question repeated in the files is used once, as its first
    occurrence (by normalized text) gives it, and skipped when that row's yes/no sides cannot be read;
    ``limit`` counts the questions used.
    """
    rows: list[AnnotatedChunk] = []
    used = 0
    candidates = list(YES_NO)
    for p, line, rec in _first_rows(conflictqa_files(path, files)):
        sides = read_sides(rec, f"{p}:{line}")
        if not sides.readable:
            continue
        qid = question_id("conflictqa", rec["question"])
        for name, side in _passages(rec, aligned_evidence):
            rows.append(
                AnnotatedChunk(
                    query=rec["question"],
                    chunk=rec[name],
                    candidates=candidates,
                    label=candidates.index(getattr(sides, side)),
                    gold=[candidates.index(sides.gold)],
                    source_dataset="conflictqa",
                    doc_type=side,
                    query_id=qid,
                )
            )
        used += 1
        if limit is not None and used >= limit:
            return rows
    return rows


def conflictqa_instances(
    files: Iterable[str | Path],
    limit: int | None = None,
    source: str | None = None,
    aligned_evidence: bool = True,
) -> list[EvalInstance]:
    """ConflictQA-StrategyQA rows of ``files`` (in that order) → yes/no ``conflict`` instances,
    deduplicated by normalized question (first occurrence wins); ``source`` replaces the file name in
    ``meta["source"]``."""
    label = {"memory": "memory", "counter": "counter_memory"}
    out: list[EvalInstance] = []
    for file, line, rec in _first_rows(files):
        sides = read_sides(rec, f"{file}:{line}")
        key = question_id("conflictqa", rec["question"])  # the training builder's query key
        items = _passages(rec, aligned_evidence)
        out.append(
            EvalInstance(
                id=key,
                dataset="conflictqa",
                question=rec["question"],
                passages=make_passages(key, [(rec[name], name) for name, _ in items]),
                passage_labels=[passage_label(label[side], getattr(sides, side)) for _, side in items],
                gold_answers=[sides.gold],
                wrong_answers=[YES_NO[1 - YES_NO.index(sides.gold)]],
                expected_behaviour="conflict",
                conflict_sides=[[a] for a in YES_NO],
                split=split_of(key),
                meta={
                    "source": str(file) if source is None else source,
                    "line": line,
                    "split_key": key,
                    "memory_answer": rec["memory_answer"],
                    "counter_answer": rec["counter_answer"],
                    "sides_read": sides.readable,
                    "popularity": rec.get("popularity"),
                },
            )
        )
        if limit is not None and len(out) >= limit:
            return out
    return out
