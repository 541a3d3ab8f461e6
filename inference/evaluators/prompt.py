"""The prompt-based evaluator (paper §3.2): an instruction LLM scores every (query, chunk) under the
versioned JSON contract, ALL chunk decisions of a batch of queries in ONE batched backend call."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from inference.alignment import ClaimAligner
from inference.backends.base import Backend, GenerationConfig
from inference.evaluators.base import EvaluationResult, build_frame, check_batch
from inference.evaluators.contract import CONTRACT_VERSION, OUTPUT_SCHEMA, build_prompt
from inference.evaluators.grounding import ground_results
from inference.evaluators.parsing import parse_decision
from inference.types import Chunk, ChunkEvidence

__all__ = ["PromptEvaluator"]


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
    ) -> None:
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
        """Every chunk decision of every query in ONE batched backend call, then the grounding check."""
        cands = check_batch(queries, chunks, candidates)
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
                    },
                )
            )
        return ground_results(results, self.grounding, self.aligner)
