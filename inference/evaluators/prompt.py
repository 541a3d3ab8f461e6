"""The prompt-based evaluator (paper §3.2): an instruction LLM scores every (query, chunk), ALL chunk
decisions of a batch of queries in ONE batched backend call, in one of two scoring modes:

* ``json`` (default): each decision is a JSON object decoded under the versioned contract
  (:mod:`inference.evaluators.contract`);
* ``logprobs``: each decision is one prefill over a short scoring prompt whose claim inventory is lettered
  options, and the evidence is read from the next-token distribution over the letters
  (:mod:`inference.evaluators.logprob`); a query without candidates first gets its claims from one short
  generation per query. A backend without log-probabilities (an OpenAI-compatible server that reports
  none) falls back to ``json`` with a warning, and the result's ``meta`` says so.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace

import torch

from inference.alignment import ClaimAligner
from inference.backends.base import (
    Backend,
    GenerationConfig,
    LabelScoringBackend,
    LogprobsUnsupportedError,
)
from inference.evaluators.base import (
    YES_NO,
    EvaluationResult,
    FrameClaim,
    build_frame,
    check_batch,
    frame_claims,
    frame_source,
)
from inference.evaluators.contract import (
    CONTRACT_VERSION,
    EVIDENCE_MAX,
    OUTPUT_SCHEMA,
    SCORING_MODES,
    build_prompt,
)
from inference.evaluators.grounding import ground_results
from inference.evaluators.logprob import (
    CONTENT_FREE,
    MAX_OPTIONS,
    SCORING_VERSION,
    build_claims_prompt,
    build_scoring_prompt,
    check_label_settings,
    label_evidence,
    option_labels,
    parse_claim_list,
)
from inference.evaluators.parsing import parse_decision
from inference.io import rounded
from inference.types import Chunk, ChunkEvidence
from training.utils.text import normalize_text

__all__ = ["SCORING_MODES", "PromptEvaluator"]


class PromptEvaluator:
    """Prompt-based evaluator over any :class:`~inference.backends.base.Backend`.

    Args:
        backend: The model backend (transformers, llama.cpp, vLLM, OpenAI-compatible HTTP).
        generation: Decoding settings (greedy by default); the JSON schema is added when ``constrained``.
        constrained: Ask the backend for JSON-schema-constrained decoding where it offers it.
        aligner: Claim aligner for the frame (default: rule-based, no similarity model).
        max_chunk_chars: Chunks are cut to this many characters so that prompts fit the context.
        grounding: Drop evidence for claims a chunk does not state: ``strict``, ``lenient`` or ``off``
            (:mod:`inference.evaluators.grounding`).
        scoring: ``json`` (decode the contract's JSON object) or ``logprobs`` (read the letters'
            next-token probabilities; see the module docstring).
        logprob_scale: ``logprobs``: evidence of an option that gets all the probability.
        logprob_floor: ``logprobs``: option probabilities below this give no evidence.
        claims_max_tokens: ``logprobs``: new tokens of the per-query claim-listing generation.
        max_claims: ``logprobs``: claims kept from that list (at most
            :data:`~inference.evaluators.logprob.MAX_OPTIONS`).
        logprob_debias: ``logprobs``: divide each query's option probabilities by those after a
            content-free chunk (one more prefill per query; contextual calibration).
        claim_extractor: ``logprobs``: where the claims of a query without candidates come from instead of
            the claim-listing generation: ``(queries, chunk texts) -> claims per query``, e.g. a learned
            checkpoint's span head (:meth:`~inference.evaluators.learned.LearnedEvaluator.extract_claims`).

    Counters (over the evaluator's lifetime): ``passes`` (batched model calls), ``decisions`` (logical
    decisions) and ``counts`` (valid / repaired / failed outputs).
    """

    name = "prompt"

    def __init__(
        self,
        backend: Backend,
        generation: GenerationConfig | None = None,
        *,
        constrained: bool = True,
        aligner: ClaimAligner | None = None,
        max_chunk_chars: int = 4000,
        grounding: str = "lenient",
        scoring: str = "json",
        logprob_scale: float = float(EVIDENCE_MAX),
        logprob_floor: float = 0.1,
        claims_max_tokens: int = 48,
        max_claims: int = 8,
        logprob_debias: bool = True,
        claim_extractor: Callable[[Sequence[str], Sequence[Sequence[str]]], list[list[str]]] | None = None,
    ) -> None:
        if scoring not in SCORING_MODES:
            raise ValueError(f"scoring must be one of {', '.join(SCORING_MODES)}; got {scoring!r}")
        check_label_settings(logprob_scale, logprob_floor, prefix="logprob_")
        if not 1 <= int(max_claims) <= MAX_OPTIONS:
            raise ValueError(f"max_claims must be in 1..{MAX_OPTIONS}; got {max_claims!r}")
        self.scoring = scoring
        self.logprob_scale = float(logprob_scale)
        self.logprob_floor = float(logprob_floor)
        self.claims_max_tokens = int(claims_max_tokens)
        self.max_claims = int(max_claims)
        self.logprob_debias = bool(logprob_debias)
        self.claim_extractor = claim_extractor
        self._fallback: str | None = None
        self.backend = backend
        self.generation = generation or GenerationConfig(max_tokens=128)
        self.constrained = constrained
        self.aligner = aligner or ClaimAligner()
        self.max_chunk_chars = max_chunk_chars
        self.grounding = grounding
        self.passes = 0
        self.decisions = 0
        self.counts = {"valid": 0, "repaired": 0, "failed": 0}

    def evaluate(
        self, query: str, chunks: Sequence[Chunk], candidates: Sequence[str] = ()
    ) -> EvaluationResult:
        """All k decisions of one query in one batched pass."""
        return self.evaluate_batch([query], [chunks], [candidates])[0]

    def evaluate_batch(
        self,
        queries: Sequence[str],
        chunks: Sequence[Sequence[Chunk]],
        candidates: Sequence[Sequence[str]] | None = None,
    ) -> list[EvaluationResult]:
        """Every chunk decision of every query in ONE batched backend call (``logprobs``: plus one claim-listing
        call for the queries without candidates), then the grounding check."""
        cands = check_batch(queries, chunks, candidates)
        if self.scoring == "logprobs" and self._fallback is None:
            if not isinstance(self.backend, LabelScoringBackend):
                self._fall_back(f"the {getattr(self.backend, 'name', 'given')} backend cannot score labels")
            else:
                try:
                    results = self._evaluate_logprobs(queries, chunks, cands)
                except LogprobsUnsupportedError as exc:
                    self._fall_back(str(exc))
                else:
                    return ground_results(results, self.grounding, self.aligner)
        results = self._evaluate_json(queries, chunks, cands)
        return ground_results(results, self.grounding, self.aligner)

    def _fall_back(self, reason: str) -> None:
        """Switch this evaluator to JSON scoring for good, with a warning that says why."""
        self._fallback = reason
        warnings.warn(
            f"evaluator.scoring=logprobs is not available ({reason}); scoring with the JSON contract instead",
            stacklevel=3,
        )

    def _evaluate_json(
        self, queries: Sequence[str], chunks: Sequence[Sequence[Chunk]], cands: list[list[str]]
    ) -> list[EvaluationResult]:
        """The ``json`` mode: one contract prompt per chunk, all decoded in one batched call."""
        prompts = [
            build_prompt(q, c.text[: self.max_chunk_chars], cand)
            for q, cs, cand in zip(queries, chunks, cands)
            for c in cs
        ]
        gen = self.generation
        use_schema = self.constrained and getattr(self.backend, "supports_json_schema", False)
        gen = replace(gen, json_schema=OUTPUT_SCHEMA if use_schema else None)
        t0 = time.perf_counter()
        outputs = self.backend.generate(prompts, gen) if prompts else []
        if prompts:
            self.passes += 1
        t_eval = time.perf_counter() - t0
        results, pos = [], 0
        for q, cs, cand in zip(queries, chunks, cands):
            t1 = time.perf_counter()
            outs = outputs[pos : pos + len(cs)]
            pos += len(cs)
            parsed = [parse_decision(o.text, cand) for o in outs]
            frame, evidence, supports = build_frame(
                [c.id for c in cs],
                [p.claim if p.stance == "supports" and p.evidence > 0 else None for p in parsed],
                [p.evidence for p in parsed],
                cand,
                self.aligner,
            )
            decisions = []
            counts = {"valid": 0, "repaired": 0, "failed": 0}
            for c, p, o, j in zip(cs, parsed, outs, supports):
                counts["valid" if p.valid else "repaired" if p.repaired else "failed"] += 1
                decisions.append(
                    ChunkEvidence(
                        chunk_id=c.id,
                        claim=frame[j].text
                        if j is not None
                        else (p.claim if p.stance == "refutes" else None),
                        answer=p.answer,
                        stance=p.stance,
                        rationale=p.rationale,
                        evidence={frame[j].id: p.evidence} if j is not None else {},
                        valid=p.valid,
                        repaired=p.repaired,
                        raw=o.text,
                        errors=p.errors,
                        extracted=p.claim or p.answer or None,
                    )
                )
            for k, v in counts.items():
                self.counts[k] += v
            self.decisions += len(cs)
            results.append(
                EvaluationResult(
                    query=q,
                    chunks=list(cs),
                    decisions=decisions,
                    claims=frame,
                    evidence=evidence,
                    logical_decisions=len(cs),
                    batched_passes=1 if cs else 0,
                    counts=counts,
                    timings={"evaluate": t_eval, "align": time.perf_counter() - t1},
                    evaluator=self.name,
                    meta={
                        "contract_version": CONTRACT_VERSION,
                        "backend": getattr(self.backend, "name", type(self.backend).__name__),
                        "constrained": bool(outs) and all(o.constrained for o in outs),
                        "batch_queries": len(queries),
                        **({"scoring": "json", "scoring_fallback": self._fallback} if self._fallback else {}),
                    },
                )
            )
        return results

    def _claims(self, queries: Sequence[str], chunks: Sequence[Sequence[Chunk]], cands: list[list[str]]):
        """Where each query's claims come from (``candidates``, ``yes/no``, ``generated`` or ``spans``) and
        the raw claim texts: one claim-listing generation per query that needs it, all in one batched call
        (or one call of the ``claim_extractor``)."""
        found = "spans" if self.claim_extractor is not None else "generated"
        modes = [frame_source(q, cand, found) for q, cand in zip(queries, cands)]
        raw: list[list[str]] = [
            list(cand) if mode == "candidates" else list(YES_NO) if mode == "yes/no" else []
            for cand, mode in zip(cands, modes)
        ]
        need = [n for n, m in enumerate(modes) if m == found and chunks[n]]
        if need and self.claim_extractor is not None:
            listed = self.claim_extractor(
                [queries[n] for n in need], [[c.text for c in chunks[n]] for n in need]
            )
            for n, claims in zip(need, listed):
                raw[n] = list(claims)[: self.max_claims]
        elif need:
            outs = self.backend.generate(
                [build_claims_prompt(queries[n], [c.text for c in chunks[n]]) for n in need],
                GenerationConfig(max_tokens=self.claims_max_tokens, temperature=0.0),
            )
            self.passes += 1
            for n, o in zip(need, outs):
                raw[n] = parse_claim_list(o.text, self.max_claims)
        return modes, raw, set(need)

    def _evaluate_logprobs(
        self, queries: Sequence[str], chunks: Sequence[Sequence[Chunk]], cands: list[list[str]]
    ) -> list[EvaluationResult]:
        """The ``logprobs`` mode: the frame of each query (candidates, yes/no or one claim-listing
        generation), then one scoring prompt per (query, chunk), all scored in one batched prefill."""
        t0 = time.perf_counter()
        modes, raw, generated = self._claims(queries, chunks, cands)
        t1 = time.perf_counter()
        # listed claims are merged by the aligner's rules; candidates and yes/no stay one claim each
        frames: list[list[FrameClaim]] = [
            frame_claims(
                self.aligner.align(claims)
                if mode in ("generated", "spans")
                else self.aligner.align([], inventory=claims)
            )
            for claims, mode in zip(raw, modes)
        ]
        t2 = time.perf_counter()
        prompts, spans = [], []
        for q, cs, frame in zip(queries, chunks, frames):
            shown = [fc.text for fc in frame[:MAX_OPTIONS]]
            start = len(prompts)
            if shown:
                prompts += [build_scoring_prompt(q, c.text[: self.max_chunk_chars], shown) for c in cs]
            end = len(prompts)
            if shown and cs and self.logprob_debias:  # the query's option prior, after a content-free chunk
                prompts.append(build_scoring_prompt(q, CONTENT_FREE, shown))
            spans.append((start, end, len(shown)))
        width = max((m for _, _, m in spans), default=0)
        labels = option_labels(width)
        scores = self.backend.score_labels(prompts, labels) if prompts else []
        if prompts:
            self.passes += 1
        t3 = time.perf_counter()
        first_token_only = sorted({lab for s in scores for lab in s.first_token_only})
        results = []
        for q, cs, frame, mode, (a, b, m) in zip(queries, chunks, frames, modes, spans):
            evidence = torch.zeros(len(cs), len(frame), dtype=torch.float64)
            probs = torch.zeros(len(cs), m + 1, dtype=torch.float64)
            if b > a:
                own = [s.logprobs[: m + 1] for s in scores[a:b]]  # this query's letters, its "none" last
                prior = torch.tensor(scores[b].logprobs[: m + 1]) if self.logprob_debias else None
                ev, probs = label_evidence(
                    torch.tensor(own, dtype=torch.float64), self.logprob_scale, self.logprob_floor, prior
                )
                evidence[:, :m] = ev
            decisions = []
            for i, c in enumerate(cs):
                row = probs[i]
                top = int(row[:m].argmax()) if m else -1
                supports = top >= 0 and float(evidence[i, top]) > 0 and float(row[top]) > float(row[m])
                if supports:
                    frame[top].chunk_ids.append(c.id)
                shown = {fc.id: rounded(float(row[j])) for j, fc in enumerate(frame[:m])}
                decisions.append(
                    ChunkEvidence(
                        chunk_id=c.id,
                        claim=frame[top].text if supports else None,
                        answer=normalize_text(frame[top].text) if supports else None,
                        stance="supports" if supports else "irrelevant",
                        rationale=(
                            f"option probabilities {shown}, none {float(row[m]):.3f}"
                            if m
                            else "no candidate claim"
                        ),
                        evidence={
                            fc.id: rounded(float(evidence[i, j]))
                            for j, fc in enumerate(frame)
                            if evidence[i, j] > 0
                        },
                        raw=json.dumps({"options": shown, "none": rounded(float(row[m]))}) if m else None,
                    )
                )
            self.decisions += len(cs)
            self.counts["valid"] += len(cs)
            results.append(
                EvaluationResult(
                    query=q,
                    chunks=list(cs),
                    decisions=decisions,
                    claims=frame,
                    evidence=evidence,
                    logical_decisions=len(cs),
                    batched_passes=int(b > a) + int(len(results) in generated),
                    counts={"valid": len(cs), "repaired": 0, "failed": 0},
                    timings={"claims": t1 - t0, "align": t2 - t1, "evaluate": t3 - t2},
                    evaluator=self.name,
                    meta={
                        "contract_version": SCORING_VERSION,
                        "scoring": "logprobs",
                        "backend": getattr(self.backend, "name", type(self.backend).__name__),
                        "claims_from": mode,
                        "claims_listed": len(frame) if mode in ("generated", "spans") else None,
                        "options_scored": m,
                        "label_first_token_only": first_token_only,
                        "logprob_scale": self.logprob_scale,
                        "logprob_floor": self.logprob_floor,
                        "logprob_debias": self.logprob_debias,
                        "batch_queries": len(queries),
                    },
                )
            )
        return results
