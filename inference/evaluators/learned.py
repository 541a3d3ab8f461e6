"""The learned evaluator: a LoRA-fine-tuned evidential head (``training.learned.model``) behind the evaluator
interface, so it feeds the same alignment, fusion and routing as the prompt evaluator.

Per batch of queries it runs two batched encoder passes (three when a query's chunks give no span), each
shared by every query of the batch:

1. **claim extraction** (only for queries with neither candidates nor a yes/no form): the span head reads
   each ``[query; chunk]`` and proposes the chunk's answer span (or none); when no chunk of a query beats
   the no-answer score by ``span_null_margin``, its chunks are read again at ``span_fallback_margin`` (an
   empty frame would abstain whatever the chunks say); the spans are aligned into the query's frame
   ``Θ_q`` by the claim aligner, and every chunk keeps its reader score (``ChunkEvidence.reader_score``:
   the best span's score over the no-answer score);
2. **evidence**: one encoding per chunk that lists the frame's claims gives ``e_i ∈ R^M`` for all ``k × M``
   (chunk, claim) pairs of the query at once.

Yes/no questions get the frame ``{yes, no}``; candidates passed in (from a prompt evaluator, a dataset, the
user) open the frame instead of extraction. A chunk *supports* the claim with its largest evidence when that
evidence reaches ``support_threshold``; otherwise it counts as irrelevant, though its (small) evidence is
still fused as given.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from inference.alignment import ClaimAligner
from inference.evaluators.base import (
    YES_NO,
    EvaluationResult,
    FrameClaim,
    check_batch,
    frame_claims,
    frame_source,
)
from inference.evaluators.grounding import ground_results
from inference.io import rounded
from inference.types import Chunk, ChunkEvidence
from training.utils.text import normalize_text

__all__ = ["LearnedEvaluator", "YES_NO"]


class LearnedEvaluator:
    """Evaluator over a trained :class:`~training.learned.model.EvidentialEvaluatorModel`.

    Args:
        model: The model (see :func:`training.learned.checkpoint.load_learned_model`).
        aligner: Claim aligner for extracted spans.
        support_threshold: Evidence at which a chunk counts as supporting its top claim.
        max_chunk_chars: Chunks are cut to this many characters (the encoder truncates tokens anyway).
        checkpoint: Where the model came from (recorded in every result's ``meta``).
        span_repair: Repair extracted spans' edges (:func:`training.utils.spans.repair_span`).
        span_null_margin: A chunk's span is extracted when it beats the no-answer score by more than this.
        span_fallback_margin: When no chunk of a query beats ``span_null_margin``, its chunks' best spans are
            extracted again at this lower margin (one more encoder pass over that query's chunks only), so
            the evidence, not an empty frame, decides whether the query abstains; ``None``: off.
        grounding: Drop evidence for claims a chunk does not state: ``strict``, ``lenient`` or ``off``
            (:mod:`inference.evaluators.grounding`).
        span_candidates: Spans per chunk proposed to the frame: the best one, plus up to ``n - 1``
            non-overlapping next-best spans within ``span_candidate_margin`` of it
            (:meth:`~training.learned.model.EvidentialEvaluatorModel.extract_span_candidates`); the evidential
            head then weighs them all.
        span_candidate_margin: How far (start + end logits) below the best span an alternate may score.
    """

    name = "learned"

    def __init__(
        self,
        model,
        aligner: ClaimAligner | None = None,
        support_threshold: float = 1.0,
        max_chunk_chars: int = 4000,
        checkpoint: str | Path | None = None,
        span_repair: bool = True,
        span_null_margin: float = 0.0,
        span_fallback_margin: float | None = -3.0,
        grounding: str = "lenient",
        span_candidates: int = 1,
        span_candidate_margin: float = 2.0,
    ):
        self.model = model
        self.aligner = aligner or ClaimAligner()
        self.support_threshold = float(support_threshold)
        self.max_chunk_chars = max_chunk_chars
        self.checkpoint = str(checkpoint) if checkpoint is not None else None
        self.span_repair = bool(span_repair)
        self.span_null_margin = float(span_null_margin)
        self.span_fallback_margin = None if span_fallback_margin is None else float(span_fallback_margin)
        self.grounding = grounding
        self.span_candidates = int(span_candidates)
        self.span_candidate_margin = float(span_candidate_margin)
        self.passes = 0
        self.decisions = 0
        self.counts = {"valid": 0, "repaired": 0, "failed": 0}
        card = Path(checkpoint) / "model_card.json" if checkpoint is not None else None
        self.card: dict[str, Any] = {}
        if card is not None and card.is_file():
            self.card = json.loads(card.read_text(encoding="utf-8"))

    def evaluate(
        self, query: str, chunks: Sequence[Chunk], candidates: Sequence[str] = ()
    ) -> EvaluationResult:
        return self.evaluate_batch([query], [chunks], [candidates])[0]

    @torch.no_grad()
    def evaluate_batch(
        self,
        queries: Sequence[str],
        chunks: Sequence[Sequence[Chunk]],
        candidates: Sequence[Sequence[str]] | None = None,
    ) -> list[EvaluationResult]:
        """All queries' chunk decisions in at most two batched encoder passes (see the module docstring), then
        the grounding check (:func:`inference.evaluators.grounding.ground_results`)."""
        cands = check_batch(queries, chunks, candidates)
        texts = [[c.text[: self.max_chunk_chars] for c in cs] for cs in chunks]
        modes = [frame_source(q, cand, "extracted") for q, cand in zip(queries, cands)]
        t0 = time.perf_counter()
        spans, scores, fell_back = self._extract(queries, texts, modes)
        t1 = time.perf_counter()
        frames = [
            self._frame(cs, cand, mode, spans.get(n))
            for n, (cs, cand, mode) in enumerate(zip(chunks, cands, modes))
        ]
        t2 = time.perf_counter()
        # pass 2: evidence for every (chunk, claim) pair of every query
        mats = self.model.evidence_matrices(
            list(queries), texts, [[fc.text for fc in frame] for frame in frames]
        )
        if any(t and f for t, f in zip(texts, frames)):
            self.passes += 1
        timings = {"extract": t1 - t0, "align": t2 - t1, "evaluate": time.perf_counter() - t2}
        results = []
        for n, (q, cs, frame, ev) in enumerate(zip(queries, chunks, frames, mats)):
            ev = ev.detach().to("cpu", torch.float64)
            self.decisions += len(cs)
            self.counts["valid"] += len(cs)
            results.append(
                EvaluationResult(
                    query=q,
                    chunks=list(cs),
                    decisions=self._decisions(cs, frame, ev, spans.get(n), scores.get(n)),
                    claims=frame,
                    evidence=ev if frame else torch.zeros(len(cs), 0, dtype=torch.float64),
                    logical_decisions=len(cs),
                    batched_passes=int(n in spans) + int(n in fell_back) + int(bool(cs) and bool(frame)),
                    counts={"valid": len(cs), "repaired": 0, "failed": 0},
                    timings=dict(timings),
                    evaluator=self.name,
                    meta={
                        "checkpoint": self.checkpoint,
                        "encoder": self.model.config.encoder,
                        "claims_from": modes[n],
                        "span_fallback": n in fell_back,
                        "support_threshold": self.support_threshold,
                        "batch_queries": len(queries),
                        "train_command": self.card.get("command"),
                    },
                )
            )
        return ground_results(results, self.grounding, self.aligner)

    @torch.no_grad()
    def extract_claims(self, queries: Sequence[str], chunk_texts: Sequence[Sequence[str]]) -> list[list[str]]:
        """The span head's claims of every query's chunks, unaligned: each chunk's best span first, then the
        alternates (``span_candidates``); one batched encoder pass for all queries (and one more for the
        queries whose chunks gave no span, ``span_fallback_margin``). Other evaluators use it as their claim
        source (the prompt evaluator's ``logprob_claims: spans``)."""
        texts = [[t[: self.max_chunk_chars] for t in ts] for ts in chunk_texts]
        spans, _, _ = self._extract(queries, texts, ["extracted"] * len(queries))
        return [[t for t in _span_texts(spans.get(n, [])) if t] for n in range(len(queries))]

    def _extract(
        self, queries: Sequence[str], texts: list[list[str]], modes: list[str]
    ) -> tuple[dict[int, list], dict[int, list[float]], set[int]]:
        """Pass 1: the span head's claim(s) of every chunk, for the queries whose claims are extracted
        (query index → one list of spans per chunk, best first) and each chunk's reader score (query index
        → one score per chunk), in one batched encoder pass when any query needs it; then, for the queries
        none of whose chunks gave a span, one more pass at ``span_fallback_margin``. Also returns the
        indices of those queries."""
        need = [n for n, m in enumerate(modes) if m == "extracted" and texts[n]]
        spans, scores = self._spans(queries, texts, need, self.span_null_margin)
        fallback = self.span_fallback_margin
        empty = [n for n in need if not any(spans[n])]
        if not empty or fallback is None or fallback >= self.span_null_margin:
            return spans, scores, set()
        more, _ = self._spans(queries, texts, empty, fallback)  # the scores do not depend on the margin
        spans.update(more)
        return spans, scores, set(empty)

    def _spans(
        self, queries: Sequence[str], texts: list[list[str]], which: list[int], null_margin: float
    ) -> tuple[dict[int, list], dict[int, list[float]]]:
        """The span head's candidates and reader scores of the chunks of queries ``which`` at
        ``null_margin``, in one batched encoder pass (query index → one list of spans, and one score, per
        chunk)."""
        if not which:
            return {}, {}
        flat = self.model.decode_spans(
            [queries[n] for n in which for _ in texts[n]],
            [t for n in which for t in texts[n]],
            n=self.span_candidates,
            margin=self.span_candidate_margin,
            repair=self.span_repair,
            null_margin=null_margin,
        )
        self.passes += 1
        spans, scores, pos = {}, {}, 0
        for n in which:
            part = flat[pos : pos + len(texts[n])]
            spans[n] = [x for x, _ in part]
            scores[n] = [float(v) for _, v in part]
            pos += len(texts[n])
        return spans, scores

    def _frame(
        self, chunks: Sequence[Chunk], candidates: Sequence[str], mode: str, spans
    ) -> list[FrameClaim]:
        """The query's frame: the candidates, yes/no, or the aligned extracted spans."""
        inventory = list(candidates) if mode == "candidates" else list(YES_NO) if mode == "yes/no" else []
        raw = _span_texts(spans) if spans is not None else [None] * len(chunks)
        return frame_claims(self.aligner.align(raw, inventory=inventory))

    def _decisions(
        self, chunks: Sequence[Chunk], frame: list[FrameClaim], ev: torch.Tensor, spans, scores=None
    ) -> list:
        """One decision per chunk: it supports its largest-evidence claim when that evidence reaches
        ``support_threshold`` (the claim then lists the chunk), else it is irrelevant; with the chunk's
        reader score where the span head read it (``scores``)."""
        decisions = []
        for i, c in enumerate(chunks):
            row = ev[i] if frame else torch.zeros(0, dtype=torch.float64)
            top = int(row.argmax()) if row.numel() else -1
            supports = top >= 0 and float(row[top]) >= self.support_threshold
            if supports:
                frame[top].chunk_ids.append(c.id)
            found = [x.text for x in spans[i] if x.text] if spans is not None else []
            why = f"span {found[0]!r}; " if found else ""
            if len(found) > 1:
                why += f"alternates {', '.join(repr(x) for x in found[1:])}; "
            decisions.append(
                ChunkEvidence(
                    chunk_id=c.id,
                    claim=frame[top].text if supports else None,
                    answer=normalize_text(frame[top].text) if supports else None,
                    stance="supports" if supports else "irrelevant",
                    rationale=why
                    + (
                        f"largest evidence {float(row[top]):.2f} for {frame[top].text!r}"
                        if top >= 0
                        else "no candidate claim"
                    ),
                    evidence={
                        fc.id: rounded(float(row[j])) for j, fc in enumerate(frame) if float(row[j]) > 0
                    },
                    # the repaired span; on a frame of given candidates (no span pass), the claim it supports
                    extracted=found[0]
                    if found
                    else (frame[top].text if supports and spans is None else None),
                    reader_score=rounded(scores[i]) if scores is not None else None,
                )
            )
        return decisions


def _span_texts(spans) -> list[str | None]:
    """Every chunk's best span first (``None`` where a chunk has none: one entry per chunk), then the
    alternates."""
    return [c[0].text if c else None for c in spans] + [x.text for c in spans for x in c[1:]]
