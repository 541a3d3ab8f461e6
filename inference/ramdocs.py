"""RAMDocs records (MADAM-RAG, MIT license) and evidence derived from their per-document labels.

The records are read by :mod:`training.data.benchmarks.ramdocs` (one parser, and the behaviour rule
:func:`record_kind` that the demo and the evaluation share); this module adds the shipped sample and
:func:`label_evidence`. Each record lists its retrieved documents with a type (``correct`` / ``misinfo`` /
``noise``) and the answer the document states. :func:`label_evidence` turns those labels into the evidence an
ideal *stance* evaluator would give: a ``correct`` or ``misinfo`` document gives ``strength`` evidence to the
answer it states, a ``noise`` document gives none (ignorance). Answers are aligned by SQuAD-style
normalization (case, punctuation, articles, whitespace), the conservative exact-match alignment of labelled
values.

A sample of 36 records ships with the package (``inference/data/ramdocs_sample.jsonl``, attribution and
license in that folder); the full shared portion is ``../shared/data/ramdocs/RAMDocs_test.jsonl``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from inference.alignment import normalize_text
from inference.types import DataError
from training.data.annotated import TrainingDataError
from training.data.benchmarks.ramdocs import DOC_TYPES, KINDS, read_ramdocs, record_kind

__all__ = [
    "DOC_TYPES",
    "KINDS",
    "SAMPLE_PATH",
    "DataError",
    "LabelEvidence",
    "label_evidence",
    "load_ramdocs",
    "normalize_answer",
    "record_kind",
]

SAMPLE_PATH = Path(__file__).resolve().parent / "data" / "ramdocs_sample.jsonl"


# SQuAD normalization, the conservative exact-match alignment of labelled values (one implementation).
normalize_answer = normalize_text


def load_ramdocs(path: str | Path | None = None, limit: int | None = None) -> list[dict]:
    """Read and validate RAMDocs JSONL (default: the shipped sample). Errors name the file, line and field."""
    try:
        records = read_ramdocs(Path(path) if path is not None else SAMPLE_PATH, limit)
    except TrainingDataError as exc:
        raise DataError(str(exc)) from None
    return [{k: v for k, v in r.items() if k != "_line"} for r in records]


@dataclass(frozen=True)
class LabelEvidence:
    """Evidence of one record: ``claims`` (display texts of the aligned frame), ``evidence`` ``[k, M]``,
    ``doc_types`` and the frame index each document supports (``None`` for noise)."""

    claims: list[str]
    evidence: torch.Tensor
    doc_types: list[str]
    supports: list[int | None]


def label_evidence(
    record: dict,
    strength: float = 5.0,
    types: tuple[str, ...] = DOC_TYPES,
    candidates: list[str] | None = None,
    dtype=torch.float64,
) -> LabelEvidence:
    """Evidence from the document labels (stance labeling: misinformation supports what it states).

    Args:
        record: A RAMDocs record.
        strength: Evidence a ``correct``/``misinfo`` document gives the answer it states.
        types: Keep only documents of these types (e.g. ``("noise",)`` for a noise-only retrieval).
        candidates: Claims that open the frame before the documents' answers (e.g. the gold and wrong
            answers), so that a frame exists even when no kept document supports anything.
        dtype: Tensor dtype.
    """
    if not strength > 0:
        raise DataError(f"strength must be > 0; got {strength}")
    docs = [d for d in record["documents"] if d["type"] in types]
    frame: dict[str, int] = {}
    claims: list[str] = []
    for c in candidates or []:
        key = normalize_answer(c)
        if key not in frame:
            frame[key] = len(claims)
            claims.append(c)
    supports: list[int | None] = []
    for d in docs:
        if d["type"] == "noise":
            supports.append(None)
            continue
        key = normalize_answer(d["answer"])
        if key not in frame:
            frame[key] = len(claims)
            claims.append(d["answer"])
        supports.append(frame[key])
    ev = torch.zeros(len(docs), len(claims), dtype=dtype)
    for i, j in enumerate(supports):
        if j is not None:
            ev[i, j] = strength
    return LabelEvidence(claims, ev, [d["type"] for d in docs], supports)
