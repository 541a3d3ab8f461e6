"""Naive RAG: the top-k chunks pasted into one prompt, the generator answers (no evaluator, no routing).

Same retriever, same generator model and decoding settings, same per-chunk character budget as the
EvidentialRAG pipeline it is compared with; one logical decision and one batched pass per query.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference.backends import load_backend
from inference.backends.base import Backend, Prompt
from inference.generation.prompt import quoted_chunks
from inference.io import rounded
from inference.rag.base import RAGSystem, SharedModels, check_llm_generator, given_or_retrieved
from inference.types import Chunk

if TYPE_CHECKING:
    from inference.config import RunConfig

__all__ = ["NAIVE_PROMPT_VERSION", "NaiveRAG", "naive_prompt"]

NAIVE_PROMPT_VERSION = "naive/1.0"
NAIVE_SYSTEM = (
    "You answer questions from retrieved passages. Use only the passages; answer concisely and cite the ids "
    "of the passages you used in square brackets."
)


def naive_prompt(question: str, chunks: Sequence[Chunk], max_chunk_chars: int) -> Prompt:
    """The chat prompt of Naive RAG: the passages (delimited as in every other prompt) and the question."""
    user = f"PASSAGES:\n{quoted_chunks(list(chunks), max_chunk_chars)}\n\nQUESTION: {question}\n\nANSWER:"
    return [{"role": "system", "content": NAIVE_SYSTEM}, {"role": "user", "content": user}]


class NaiveRAG(RAGSystem):
    """Retrieve top-k (or take the given chunks) and generate in one batched call for all questions.

    Args:
        config: The run config (``k``, ``generator`` section, ``retrieval`` / ``models``).
        index: Index folder for retrieval (``None``: chunks are given per question).
        backend: An already-loaded generator backend (share it with the pipeline it is compared with).
        retriever: An already-built retriever (share it too).
    """

    name = "naive"

    def __init__(
        self,
        config: RunConfig,
        index: str | Path | None = None,
        *,
        backend: Backend | None = None,
        retriever=None,
    ):
        check_llm_generator(config, "Naive RAG")
        super().__init__(config, index, retriever=retriever)
        self.backend = backend if backend is not None else load_backend(config.generator.backend)
        self.passes = 0

    @classmethod
    def from_shared(cls, config: RunConfig, shared: SharedModels) -> NaiveRAG:
        """Naive RAG on the evaluation's shared generator backend."""
        return cls(config, backend=shared.generator_backend)

    def ask_batch(
        self, questions: Sequence[str], chunks: Sequence[Sequence[Chunk] | None] | None = None
    ) -> list[dict[str, Any]]:
        """Answer every question with one retrieval call and ONE batched generation call."""
        questions = list(questions)
        rows, need, t_ret = given_or_retrieved(questions, chunks, self.config.k, self.retriever)
        gcfg = self.config.generator
        prompts = [naive_prompt(q, cs, gcfg.max_chunk_chars) for q, cs in zip(questions, rows)]
        t0 = time.perf_counter()
        gens = self.backend.generate(prompts, gcfg.generation)
        t_gen = time.perf_counter() - t0
        self.passes += 1
        return [
            {
                "system": self.name,
                "question": q,
                "response": g.text.strip(),
                "route": "direct",
                "chunks": [{"chunk_id": c.id, "rank": c.rank, "source": c.source} for c in cs],
                "timings": {"retrieve": rounded(t_ret if i in need else 0.0), "generate": rounded(t_gen)},
                "logical_decisions": 1,
                "batched_passes": 1,
                "prompt_version": NAIVE_PROMPT_VERSION,
            }
            for i, (q, cs, g) in enumerate(zip(questions, rows, gens))
        ]
