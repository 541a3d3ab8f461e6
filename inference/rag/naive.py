"""Naive RAG: the top-k chunks pasted into one prompt, the generator answers (no evaluator, no routing).

Same retriever, same generator model and decoding settings, same per-chunk character budget as the
EvidentialRAG pipeline it is compared with; one logical decision and one batched pass per query.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evidential.errors import ConfigError
from inference.backends import load_backend
from inference.backends.base import Backend, Prompt
from inference.generation.prompt import quoted_chunks
from inference.io import rounded
from inference.types import Chunk

if TYPE_CHECKING:
    from inference.config import RunConfig

__all__ = [
    "NAIVE_PROMPT_VERSION",
    "NaiveRAG",
    "build_baseline_retriever",
    "check_llm_generator",
    "given_or_retrieved",
    "naive_prompt",
]

NAIVE_PROMPT_VERSION = "naive/1.0"
NAIVE_SYSTEM = (
    "You answer questions from retrieved passages. Use only the passages; answer concisely and cite the ids "
    "of the passages you used in square brackets."
)


def naive_prompt(question: str, chunks: Sequence[Chunk], max_chunk_chars: int) -> Prompt:
    """The chat prompt of Naive RAG: the passages (delimited as in every other prompt) and the question."""
    user = f"PASSAGES:\n{quoted_chunks(list(chunks), max_chunk_chars)}\n\nQUESTION: {question}\n\nANSWER:"
    return [{"role": "system", "content": NAIVE_SYSTEM}, {"role": "user", "content": user}]


def check_llm_generator(config: RunConfig, system: str) -> None:
    """Every baseline generates with the LLM generator (there is no templated baseline)."""
    if config.generator.name != "llm":
        raise ConfigError(f"{system} needs an LLM generator (generator.name: llm)")


def build_baseline_retriever(config: RunConfig, index: str | Path | None, retriever=None):
    """The given retriever, else one over ``index`` (``None`` when neither: chunks come per question)."""
    if retriever is None and index is not None:
        from inference.retrieval import build_retriever

        retriever = build_retriever(index, config)
    return retriever


def given_or_retrieved(
    questions: Sequence[str], chunks: Sequence[Sequence[Chunk] | None] | None, k: int, retriever
) -> tuple[list[list[Chunk]], list[int], float]:
    """Each question's chunks: the given ones cut to ``k``, else top-``k`` retrieved in ONE batched call.

    Returns ``(rows, retrieved, seconds)``: the chunk lists, the indices of the questions that were
    retrieved for, and the retrieval time per retrieved question.
    """
    given = list(chunks) if chunks is not None else [None] * len(questions)
    if len(given) != len(questions):
        raise ConfigError(f"got {len(questions)} questions but {len(given)} chunk lists")
    rows = [list(c)[:k] if c is not None else [] for c in given]
    need = [i for i, c in enumerate(given) if c is None]
    seconds = 0.0
    if need:
        if retriever is None:
            raise ConfigError("no index loaded: pass an index folder or give chunks")
        t0 = time.perf_counter()
        got = retriever.search_batch([questions[i] for i in need], k)
        seconds = (time.perf_counter() - t0) / len(need)
        for i, cs in zip(need, got):
            rows[i] = list(cs)[:k]
    return rows, need, seconds


class NaiveRAG:
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
        self.config = config
        self.backend = backend if backend is not None else load_backend(config.generator.backend)
        self.retriever = build_baseline_retriever(config, index, retriever)
        self.passes = 0

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
