"""What every RAG system shares, the one registry of systems, and the models an evaluation loads once.

A system is a subclass of :class:`RAGSystem`: it is built from a :class:`~inference.config.RunConfig` (and an
index folder or an already-built retriever; without either, chunks are given per question), answers a batch
with :meth:`RAGSystem.ask_batch` (one JSON-ready record per question), takes a seed with
:meth:`RAGSystem.set_seed` and says what it runs with :meth:`RAGSystem.describe`. Each system is registered
in :data:`SYSTEMS` (by :mod:`inference.rag`) under the name ``evidential-rag evaluate --systems`` accepts, and builds itself on the
models of one evaluation with :meth:`RAGSystem.from_shared` (:class:`SharedModels`: the generator backend and
the learned evaluator are loaded once and shared by all the systems of the run).
"""

from __future__ import annotations

import abc
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evidential.errors import ConfigError, UnknownNameError
from evidential.registry import Registry
from inference.backends import load_backend
from inference.evaluators import build_evaluator
from inference.retrieval import build_retriever
from inference.types import Chunk

if TYPE_CHECKING:
    from inference.config import RunConfig

__all__ = [
    "SYSTEMS",
    "RAGSystem",
    "SharedModels",
    "SystemView",
    "build_systems",
    "config_with_seed",
    "seed_everything",
]

# name -> RAGSystem subclass (the names `evaluate --systems` accepts)
SYSTEMS: Registry = Registry("system")


class SystemView:
    """A read-only view of some names of :data:`SYSTEMS` (``get``, ``names``, ``in``, iteration)."""

    def __init__(self, kind: str, names: Sequence[str]) -> None:
        self.kind = kind
        self._names = tuple(names)

    def get(self, name: str) -> type[RAGSystem]:
        """The system registered as ``name`` (one of this view's names)."""
        if name not in self._names:
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; choose one of: {', '.join(sorted(self._names))}"
            )
        return SYSTEMS.get(name)

    def names(self) -> tuple[str, ...]:
        return self._names

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (every system's sampling starts from the same state for a seed)."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def config_with_seed(config: RunConfig, seed: int) -> RunConfig:
    """``config`` with ``seed`` as the run seed and the generator's decoding seed."""
    gen = config.generator
    return replace(config, seed=seed, generator=replace(gen, generation=replace(gen.generation, seed=seed)))


def check_llm_generator(config: RunConfig, system: str) -> None:
    """Every baseline generates with the LLM generator (there is no templated baseline)."""
    if config.generator.name != "llm":
        raise ConfigError(f"{system} needs an LLM generator (generator.name: llm)")


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


class SharedModels:
    """Models loaded once and shared by the systems of one evaluation (the generator backend, the learned
    evaluator)."""

    def __init__(self, config: RunConfig):
        self.config = config
        self._generator_backend = None
        self._learned_evaluator = None

    @property
    def loaded_generator_backend(self):
        """The generator backend if one is loaded already (``None`` otherwise; loads nothing)."""
        return self._generator_backend

    @property
    def generator_backend(self):
        """The loaded generator backend (``None`` with the template generator)."""
        if self._generator_backend is None and self.config.generator.name == "llm":
            self._generator_backend = load_backend(self.config.generator.backend)
        return self._generator_backend

    @property
    def learned_evaluator(self):
        """The learned evaluator (``config.evaluator`` with ``name: learned``), loaded once: EvidentialRAG's
        when it runs one, shared with Corrective RAG's retrieval evaluator."""
        if self._learned_evaluator is None:
            self._learned_evaluator = build_evaluator(replace(self.config.evaluator, name="learned"))
        return self._learned_evaluator

    def offer_learned_evaluator(self, evaluator) -> None:
        """Share an already-loaded learned evaluator with the systems built after it."""
        if self._learned_evaluator is None and evaluator is not None:
            self._learned_evaluator = evaluator

    def offer_generator_backend(self, backend) -> None:
        """Use an already-loaded generator backend (the pipeline's) for the systems built after it."""
        if self._generator_backend is None and backend is not None:
            self._generator_backend = backend


class RAGSystem(abc.ABC):
    """The base of every RAG system: config, retriever (or chunks given per question), seeding,
    :meth:`describe`, :meth:`ask` / :meth:`ask_batch` and load ``timings``.

    Args:
        config: The run config (``k``, ``generator``, ``retrieval`` / ``models``, ...).
        index: An index folder built by ``evidential-rag index`` (``None``: chunks are given per question).
        retriever: An already-built retriever (shared between systems); ``None`` builds one over ``index``.

    Subclasses set :attr:`name`, implement :meth:`ask_batch` and, when they take Corrective RAG's
    expansion pool, set :attr:`uses_extra_chunks` (the harness then passes ``extra_chunks``).
    """

    name: str = "system"
    uses_extra_chunks: bool = False

    def __init__(self, config: RunConfig, index: str | Path | None = None, *, retriever=None):
        self.config = config
        self.index = Path(index) if index is not None else None
        self.timings: dict[str, float] = {}
        self.retriever = retriever
        if self.retriever is None and self.index is not None:
            t0 = time.perf_counter()
            self.retriever = build_retriever(self.index, config)
            self.timings["load_retriever"] = time.perf_counter() - t0

    @classmethod
    def from_shared(cls, config: RunConfig, shared: SharedModels) -> RAGSystem:
        """The system on the models of one evaluation (``shared``), for chunks given per question."""
        return cls(config)

    def ask(self, question: str, chunks: Sequence[Chunk] | None = None, **kwargs: Any) -> dict[str, Any]:
        """Answer one question (``chunks`` given: no retrieval)."""
        return self.ask_batch([question], [chunks] if chunks is not None else None, **kwargs)[0]

    @abc.abstractmethod
    def ask_batch(
        self, questions: Sequence[str], chunks: Sequence[Sequence[Chunk] | None] | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Answer every question (one record each); ``chunks`` entries that are ``None`` are retrieved.
        Every system implements it (the base cannot be instantiated)."""

    def set_seed(self, seed: int) -> None:
        """Use ``seed`` for the run and the generator's decoding from now on."""
        self.config = config_with_seed(self.config, seed)

    def details(self) -> dict[str, Any]:
        """The system's own settings that :meth:`describe` adds."""
        return {}

    def describe(self) -> dict[str, Any]:
        """What the system runs with (recorded in an evaluation's ``run.json``)."""
        return {"generator": "llm", "generator_model": self.config.generator.backend.model, **self.details()}


def build_systems(
    names: Sequence[str], config: RunConfig, shared: SharedModels | None = None
) -> dict[str, RAGSystem]:
    """Build the named systems once, sharing the generator backend; ``evidential*`` systems are built first
    so that the pipeline's backend (shared with the prompt evaluator when it names the same model) serves
    all. ``shared`` may carry an already-loaded generator backend (:meth:`SharedModels.offer_generator_backend`).
    """
    for n in names:
        SYSTEMS.get(n)  # unknown names fail before any model loads, listing the known ones
    shared = shared if shared is not None else SharedModels(config)
    order = sorted(names, key=lambda n: not n.startswith("evidential"))
    built = {n: SYSTEMS.get(n).from_shared(config, shared) for n in order}
    return {n: built[n] for n in names}
