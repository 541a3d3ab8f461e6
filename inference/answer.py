"""From an evaluation to the answer record: opinions → fusion → routing → a templated response.

The pipeline issue adds retrieval and an LLM generator; this module is the part every entry point shares:
it fuses an :class:`~inference.evaluators.base.EvaluationResult`, routes it and renders the answer record
(DESIGN.md §3). ``response`` comes from the deterministic template of the route
(:func:`inference.generation.template_response`, re-exported here); an LLM generator's answer replaces it
through :func:`inference.generation.attach_generation`.
"""

from __future__ import annotations

import time
from typing import Any

from evidential import FusionConfig, fuse, opinions_from_evidence, route
from inference.evaluators.base import EvaluationResult
from inference.generation.base import GenerationInput, cited_chunk_ids
from inference.generation.template import template_response
from inference.io import rounded

__all__ = ["answer_record", "template_response"]


def answer_record(
    result: EvaluationResult, fusion: FusionConfig, question: str | None = None
) -> dict[str, Any]:
    """Fuse and route one evaluation and return the answer record (JSON-ready)."""
    t0 = time.perf_counter()
    ops = opinions_from_evidence(result.evidence, sanitize=fusion.sanitize)
    res = fuse(ops, lam=fusion.lam, rule=fusion.rule)
    decision = route(res, fusion.tau1, fusion.tau2, fusion.policy).names
    t_fuse = time.perf_counter() - t0
    sel = int(res.selected)
    answer = result.claims[sel].text if sel >= 0 else None
    claims = [
        {
            "id": c.id,
            "text": c.text,
            "mass": rounded(res.belief[j]),
            "chunk_ids": list(c.chunk_ids),
            "forms": list(c.forms),
        }
        for j, c in enumerate(result.claims)
    ]
    cited = cited_chunk_ids(
        GenerationInput(
            question if question is not None else result.query,
            decision,
            claims,
            rounded(res.uncertainty),
            answer=answer,
        )
    )
    return {
        "question": question if question is not None else result.query,
        "response": template_response(decision, claims, answer),
        "cited_chunk_ids": cited,
        "route": decision,
        "answer": answer,
        "claims": claims,
        "uncertainty": rounded(res.uncertainty),
        "ignorance": rounded(res.ignorance),
        "conflict": rounded(res.conflict),
        "mean_pairwise_conflict": rounded(res.mean_pairwise_conflict),
        "confidence": rounded(res.confidence),
        "step_conflict": [rounded(x) for x in res.step_conflict],
        "chunks": [
            {
                "chunk_id": d.chunk_id,
                "rank": c.rank,
                "source": c.source,
                "claim": d.claim,
                "answer": d.answer,
                "stance": d.stance,
                "rationale": d.rationale,
                "evidence": {k: rounded(v) for k, v in d.evidence.items()},
                "valid": d.valid,
                "repaired": d.repaired,
                "errors": d.errors,
            }
            for d, c in zip(result.decisions, result.chunks)
        ],
        "output_counts": dict(result.counts),
        "timings": {**{k: rounded(v) for k, v in result.timings.items()}, "fuse_route": rounded(t_fuse)},
        "logical_decisions": result.logical_decisions,
        "batched_passes": result.batched_passes,
        "evaluator": result.evaluator,
        "evaluator_meta": result.meta,
        "fusion": {
            "rule": fusion.rule,
            "lam": fusion.lam,
            "tau1": fusion.tau1,
            "tau2": fusion.tau2,
            "policy": fusion.policy,
        },
    }
