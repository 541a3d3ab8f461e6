"""The evaluator interface: ``evaluate(query, chunks) -> EvaluationResult``, a batch form, a registry.

An evaluator turns a query and its retrieved chunks into one :class:`~inference.types.ChunkEvidence` per
chunk (a *logical decision*) over an aligned claim frame, plus the evidence tensor ``[k, M]`` ready for
:func:`evidential.opinions_from_evidence`. Evaluators are chosen by name through :data:`EVALUATORS`
(``prompt``, ``learned``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from evidential.registry import Registry
from inference.alignment import ClaimAligner
from inference.types import Chunk, ChunkEvidence
from training.learned.model import is_yes_no_question

__all__ = [
    "EVALUATORS",
    "YES_NO",
    "EvaluationResult",
    "Evaluator",
    "FrameClaim",
    "build_frame",
    "check_batch",
    "frame_claims",
    "frame_source",
]

#: The frame of a yes/no question.
YES_NO = ("yes", "no")


@dataclass
class FrameClaim:
    """One candidate of the aligned frame ``Θ_q``: display ``text``, the ids of the chunks that support it,
    the surface ``forms`` merged into it and the rules that merged them."""

    id: str
    text: str
    chunk_ids: list[str] = field(default_factory=list)
    forms: list[str] = field(default_factory=list)
    merge_rules: list[str] = field(default_factory=list)


@dataclass
class EvaluationResult:
    """Everything an evaluator concluded about one query.

    Attributes:
        query: The query.
        chunks: The chunks in rank order.
        decisions: One :class:`ChunkEvidence` per chunk (same order).
        claims: The aligned frame (``M`` claims).
        evidence: Evidence tensor ``[k, M]`` (float64), row i = chunk i.
        logical_decisions: Evaluator decisions made (``k``).
        batched_passes: Batched model passes this query took part in (a pass shared by a batch of queries
            counts once for each of them; the batch total is in the evaluator's counters).
        counts: ``{"valid": n, "repaired": n, "failed": n}`` over the decisions.
        timings: Seconds per stage (``evaluate``, ``align``).
        evaluator: Evaluator name; ``meta`` holds its version information (contract version, model, ...).
    """

    query: str
    chunks: list[Chunk]
    decisions: list[ChunkEvidence]
    claims: list[FrameClaim]
    evidence: torch.Tensor
    logical_decisions: int
    batched_passes: int
    counts: dict[str, int]
    timings: dict[str, float]
    evaluator: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def claim_texts(self) -> list[str]:
        return [c.text for c in self.claims]


@runtime_checkable
class Evaluator(Protocol):
    """What every evaluator provides."""

    name: str

    def evaluate(
        self, query: str, chunks: Sequence[Chunk], candidates: Sequence[str] = ()
    ) -> EvaluationResult: ...

    def evaluate_batch(
        self,
        queries: Sequence[str],
        chunks: Sequence[Sequence[Chunk]],
        candidates: Sequence[Sequence[str]] | None = None,
    ) -> list[EvaluationResult]: ...


# name -> factory(EvaluatorConfig) -> Evaluator
EVALUATORS: Registry[Any] = Registry("evaluator")


def check_batch(
    queries: Sequence[str], chunks: Sequence[Sequence[Chunk]], candidates: Sequence[Sequence[str]] | None
) -> list[list[str]]:
    """Check that a batch's lists line up and return the candidate lists (empty ones when ``None``)."""
    if len(chunks) != len(queries):
        raise ValueError(f"got {len(queries)} queries but {len(chunks)} chunk lists")
    cands = [list(c) for c in candidates] if candidates is not None else [[] for _ in queries]
    if len(cands) != len(queries):
        raise ValueError(f"got {len(queries)} queries but {len(cands)} candidate lists")
    return cands


def frame_source(query: str, candidates: Sequence[str], found: str) -> str:
    """Where a query's frame comes from: ``candidates`` when some are given, ``yes/no`` for a yes/no
    question (:data:`YES_NO`), otherwise ``found`` (the evaluator's own claims: ``extracted``, ``generated``,
    ``spans``)."""
    return "candidates" if candidates else "yes/no" if is_yes_no_question(query) else found


def frame_claims(alignment) -> list[FrameClaim]:
    """The frame ``a1, a2, ...`` of an :class:`~inference.alignment.Alignment`'s claims."""
    return [
        FrameClaim(id=f"a{j + 1}", text=c.text, forms=list(c.forms)) for j, c in enumerate(alignment.claims)
    ]


def build_frame(
    chunk_ids: Sequence[str],
    claims: Sequence[str | None],
    strengths: Sequence[float],
    candidates: Sequence[str],
    aligner: ClaimAligner,
) -> tuple[list[FrameClaim], torch.Tensor, list[int | None]]:
    """Align the chunks' claims (after the ``candidates``) into a frame and build the evidence ``[k, M]``.

    Chunk ``i`` gives ``strengths[i]`` to the frame claim its ``claims[i]`` aligns to; a chunk without a
    claim (or with zero strength) gives nothing (ignorance). Returns the frame, the evidence and, per
    chunk, the frame index it supports (``None`` for none).
    """
    alignment = aligner.align(list(claims), inventory=list(candidates))
    frame = frame_claims(alignment)
    for merge in alignment.merges:
        for fc in frame:
            if merge.a in fc.forms and merge.rule not in fc.merge_rules:
                fc.merge_rules.append(merge.rule)
    evidence = torch.zeros(len(chunk_ids), len(frame), dtype=torch.float64)
    supports: list[int | None] = []
    for i, (cid, j, s) in enumerate(zip(chunk_ids, alignment.index, strengths)):
        if j is None or not s > 0:
            supports.append(None)
            continue
        evidence[i, j] = float(s)
        frame[j].chunk_ids.append(cid)
        supports.append(j)
    return frame, evidence, supports
