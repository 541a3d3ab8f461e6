"""Rule-only baseline: majority vote over the evaluator's extracted claims, no evidential fusion.

It runs the same evaluator as EvidentialRAG on the same chunks (the learned evaluator by default: the same
claim extraction, alignment and per-chunk decisions), then counts one vote per chunk for the claim the chunk
supports. The claim(s) with the most votes are stated (ties: all of them); no vote abstains. Evidence
magnitudes, fusion, ``U`` and routing play no part, so a gain of EvidentialRAG over this baseline is a gain
of the evidential method over counting. The answer is written by the configured generator from the same
generation input as EvidentialRAG's (masses = vote shares), so the template and LLM comparisons match.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference.evaluators import build_evaluator
from inference.generation import GenerationInput, build_generator
from inference.io import rounded
from inference.rag.base import RAGSystem, SharedModels, given_or_retrieved
from inference.types import Chunk

if TYPE_CHECKING:
    from inference.config import RunConfig

__all__ = ["MajorityVoteRAG", "majority_vote"]


def majority_vote(decisions: Sequence[Any]) -> tuple[dict[str, list[str]], list[str]]:
    """Votes of chunk decisions: claim text → the ids of the chunks that support it (first-seen order), and
    the claims with the most votes (ties keep first-seen order; empty when no chunk supports a claim).

    >>> from inference.types import ChunkEvidence
    >>> ds = [ChunkEvidence("c1", "A", "a", "supports"), ChunkEvidence("c2", "B", "b", "supports"),
    ...       ChunkEvidence("c3", "A", "a", "supports"), ChunkEvidence("c4", None, None, "irrelevant")]
    >>> majority_vote(ds)
    ({'A': ['c1', 'c3'], 'B': ['c2']}, ['A'])
    """
    votes: dict[str, list[str]] = {}
    for d in decisions:
        if d.stance == "supports" and d.claim:
            votes.setdefault(d.claim, []).append(d.chunk_id)
    top = max((len(v) for v in votes.values()), default=0)
    return votes, [c for c, v in votes.items() if len(v) == top and top > 0]


class MajorityVoteRAG(RAGSystem):
    """Majority vote over the evaluator's per-chunk claims (see the module docstring).

    Args:
        config: The run config (``k``, ``evaluator``, ``generator``).
        index: Index folder for retrieval (``None``: chunks are given per question).
        evaluator, generator, retriever: Already-built components (``None`` builds them from the config).
    """

    name = "majority"

    def __init__(
        self,
        config: RunConfig,
        index: str | Path | None = None,
        *,
        evaluator=None,
        generator=None,
        retriever=None,
    ):
        super().__init__(config, index, retriever=retriever)
        self.evaluator = evaluator if evaluator is not None else build_evaluator(config.evaluator)
        self.generator = generator if generator is not None else build_generator(config.generator)

    @classmethod
    def from_shared(cls, config: RunConfig, shared: SharedModels) -> MajorityVoteRAG:
        """The baseline on the evaluation's learned evaluator (or the configured evaluator on the shared
        backend) and generator backend."""
        evaluator = shared.learned_evaluator if config.evaluator.name == "learned" else None
        if evaluator is None and shared.loaded_generator_backend is not None:
            evaluator = build_evaluator(config.evaluator, backend=shared.loaded_generator_backend)
        backend = shared.generator_backend if config.generator.name == "llm" else None
        return cls(config, evaluator=evaluator, generator=build_generator(config.generator, backend))

    def describe(self) -> dict[str, Any]:
        out = {"evaluator": self.config.evaluator.name, "generator": self.config.generator.name}
        if self.config.generator.name == "llm":
            out["generator_model"] = self.config.generator.backend.model
        return out

    def ask_batch(
        self,
        questions: Sequence[str],
        chunks: Sequence[Sequence[Chunk] | None] | None = None,
        candidates: Sequence[Sequence[str]] | None = None,
    ) -> list[dict[str, Any]]:
        """One evaluator call and one generator call for the whole batch."""
        questions = list(questions)
        rows, need, t_ret = given_or_retrieved(questions, chunks, self.config.k, self.retriever)
        cands = [list(c) for c in candidates] if candidates is not None else [[] for _ in questions]
        t0 = time.perf_counter()
        results = self.evaluator.evaluate_batch(questions, rows, cands)
        t_eval = time.perf_counter() - t0
        inputs, tallies = [], []
        for q, cs, res in zip(questions, rows, results):
            votes, top = majority_vote(res.decisions)
            n = max(len(cs), 1)
            claims = [
                {"id": f"v{j + 1}", "text": c, "mass": rounded(len(ids) / n), "chunk_ids": list(ids)}
                for j, (c, ids) in enumerate(votes.items())
            ]
            route = "direct" if top else "abstain"
            inputs.append(
                GenerationInput(
                    q,
                    route,
                    claims,
                    uncertainty=0.0 if top else 1.0,
                    answer=top[0] if top else None,
                    chunks=list(cs),
                    stated=list(top),
                )
            )
            tallies.append((route, claims, top))
        t0 = time.perf_counter()
        outputs = self.generator.generate_batch(inputs)
        t_gen = time.perf_counter() - t0
        return [
            {
                "system": self.name,
                "question": q,
                "response": out.text,
                "route": out.route,
                "answer": top[0] if top else None,
                "stated_claims": list(top),
                "votes": {c["text"]: len(c["chunk_ids"]) for c in claims},
                "cited_chunk_ids": list(out.cited_chunk_ids),
                "chunks": [
                    {
                        "chunk_id": d.chunk_id,
                        "rank": c.rank,
                        "source": c.source,
                        "claim": d.claim,
                        "stance": d.stance,
                    }
                    for d, c in zip(res.decisions, cs)
                ],
                "timings": {
                    "retrieve": rounded(t_ret if i in need else 0.0),
                    "evaluate": rounded(t_eval),
                    "generate": rounded(t_gen),
                },
                "logical_decisions": res.logical_decisions + int(out.batched_passes > 0),
                "batched_passes": res.batched_passes + out.batched_passes,
            }
            for i, (q, cs, res, out, (route, claims, top)) in enumerate(
                zip(questions, rows, results, outputs, tallies)
            )
        ]
