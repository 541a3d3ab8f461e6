"""The systems an evaluation compares, chosen by name through :data:`SYSTEMS`, all on one harness.

Every system answers the same instances from the same chunks (the harness selects them once per instance),
with the same generator model and decoding settings, context budget (``k`` chunks, ``max_chunk_chars``
each) and generation length — the paper's matched comparison (§4.2). Models load once per evaluation: the
systems share one loaded generator backend through :class:`SharedModels`.

A system is a class with ``name``, ``__init__(config, shared)``, ``answer_batch(questions, chunks) ->
list[answer record]``, ``set_seed(seed)`` and ``describe() -> dict``; a system with ``uses_extra_chunks = True`` (Corrective RAG)
also gets ``extra_chunks``, the instance's next-ranked passages (its offline stand-in for web search).

Registered: ``evidential`` (the config's evaluator), ``evidential-learned``, ``evidential-prompt``, the
ablations ``evidential-no-fusion`` (evidence averaging), ``evidential-no-routing`` (always direct) and
``evidential-decomposed`` (the decomposed routing policy), and the baselines ``naive``, ``corrective`` and
``selfrag``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from evidential.registry import Registry
from inference.config import RunConfig
from inference.types import Chunk

__all__ = [
    "SYSTEMS",
    "BaselineSystem",
    "CorrectiveSystem",
    "EvidentialDecomposedSystem",
    "EvidentialLearnedSystem",
    "EvidentialNoFusionSystem",
    "EvidentialNoRoutingSystem",
    "EvidentialPromptSystem",
    "EvidentialSystem",
    "NaiveSystem",
    "SelfRAGSystem",
    "SharedModels",
    "build_systems",
    "seed_everything",
]

SYSTEMS: Registry = Registry("system")


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (every system's sampling starts from the same state for a seed)."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class SharedModels:
    """Models loaded once and shared by the systems of one evaluation (the generator backend)."""

    def __init__(self, config: RunConfig):
        self.config = config
        self._generator_backend = None
        self._learned_evaluator = None

    @property
    def generator_backend(self):
        """The loaded generator backend (``None`` with the template generator)."""
        if self._generator_backend is None and self.config.generator.name == "llm":
            from inference.backends import load_backend

            self._generator_backend = load_backend(self.config.generator.backend)
        return self._generator_backend

    @property
    def learned_evaluator(self):
        """The learned evaluator (``config.evaluator`` with ``name: learned``), loaded once: EvidentialRAG's
        when it runs one, shared with Corrective RAG's retrieval evaluator."""
        if self._learned_evaluator is None:
            from inference.evaluators import build_evaluator

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


def _with_seed(config: RunConfig, seed: int) -> RunConfig:
    gen = config.generator
    return replace(config, seed=seed, generator=replace(gen, generation=replace(gen.generation, seed=seed)))


@SYSTEMS.register("evidential")
class EvidentialSystem:
    """EvidentialRAG (:class:`~inference.rag.evidential.EvidentialRAG`) with the configured evaluator
    (``evidential-learned`` / ``evidential-prompt`` force one, for prompt-vs-learned in one run)."""

    name = "evidential"
    evaluator: str | None = None  # None = the config's evaluator.name
    fusion_overrides: dict[str, Any] = {}  # the ablation systems' changes to the fusion section

    def __init__(self, config: RunConfig, shared: SharedModels):
        from inference.evaluators import build_evaluator
        from inference.generation import build_generator, can_share_backend
        from inference.rag.evidential import EvidentialRAG

        if self.evaluator is not None:
            config = replace(config, evaluator=replace(config.evaluator, name=self.evaluator))
        if self.fusion_overrides:
            config = replace(config, fusion=replace(config.fusion, **self.fusion_overrides))
        backend = shared._generator_backend
        evaluator = generator = None
        if backend is not None:
            generator = build_generator(config.generator, backend)
            if config.evaluator.name == "prompt" and can_share_backend(
                config.evaluator.backend, config.generator.backend
            ):
                evaluator = build_evaluator(config.evaluator, backend=backend)
        self.rag = EvidentialRAG(config, evaluator=evaluator, generator=generator)
        shared.offer_generator_backend(getattr(self.rag.generator, "backend", None))
        if config.evaluator.name == "learned":
            shared.offer_learned_evaluator(self.rag.evaluator)

    def set_seed(self, seed: int) -> None:
        gen = getattr(self.rag.generator, "generation", None)
        if gen is not None:
            self.rag.generator.generation = replace(gen, seed=seed)
        self.rag.config = _with_seed(self.rag.config, seed)

    def answer_batch(self, questions: Sequence[str], chunks: Sequence[Sequence[Chunk]]) -> list[dict]:
        return self.rag.ask_batch(questions, chunks)

    def describe(self) -> dict[str, Any]:
        cfg = self.rag.config
        out = {"evaluator": cfg.evaluator.name, "generator": cfg.generator.name}
        if cfg.evaluator.name == "learned":
            out["checkpoint"] = str(cfg.evaluator.checkpoint)
        else:
            out["evaluator_model"] = cfg.evaluator.backend.model
        if cfg.generator.name == "llm":
            out["generator_model"] = cfg.generator.backend.model
        return out


@SYSTEMS.register("evidential-learned")
class EvidentialLearnedSystem(EvidentialSystem):
    """EvidentialRAG with the learned evaluator, whatever the config says."""

    name = "evidential-learned"
    evaluator = "learned"


@SYSTEMS.register("evidential-prompt")
class EvidentialPromptSystem(EvidentialSystem):
    """EvidentialRAG with the prompt evaluator, whatever the config says."""

    name = "evidential-prompt"
    evaluator = "prompt"


@SYSTEMS.register("evidential-no-fusion")
class EvidentialNoFusionSystem(EvidentialSystem):
    """Ablation (Table 12): EvidentialRAG without conflict-preserving fusion — the chunks' evidence is
    averaged into one opinion (``fusion.rule = "average"``), so conflict never reaches ``U``."""

    name = "evidential-no-fusion"
    fusion_overrides = {"rule": "average"}


@SYSTEMS.register("evidential-no-routing")
class EvidentialNoRoutingSystem(EvidentialSystem):
    """Ablation (Table 12): EvidentialRAG without routing — always the direct answer
    (``fusion.policy = "direct"``)."""

    name = "evidential-no-routing"
    fusion_overrides = {"policy": "direct"}


@SYSTEMS.register("evidential-decomposed")
class EvidentialDecomposedSystem(EvidentialSystem):
    """EvidentialRAG with the decomposed routing policy (conflict-dominated uncertainty explains the
    conflict, ignorance-dominated uncertainty abstains) instead of the paper's Eq 15."""

    name = "evidential-decomposed"
    fusion_overrides = {"policy": "decomposed"}


class BaselineSystem:
    """What the baseline systems share: a baseline object ``self.rag`` (``config`` + ``ask_batch``) on the
    shared generator backend; subclasses build it and add their own ``describe`` details."""

    name = "baseline"

    def set_seed(self, seed: int) -> None:
        self.rag.config = _with_seed(self.rag.config, seed)

    def answer_batch(
        self, questions: Sequence[str], chunks: Sequence[Sequence[Chunk]], **kwargs
    ) -> list[dict]:
        return self.rag.ask_batch(questions, chunks, **kwargs)

    def details(self) -> dict[str, Any]:
        """The baseline's own settings for :meth:`describe`."""
        return {}

    def describe(self) -> dict[str, Any]:
        return {
            "generator": "llm",
            "generator_model": self.rag.config.generator.backend.model,
            **self.details(),
        }


@SYSTEMS.register("naive")
class NaiveSystem(BaselineSystem):
    """Naive RAG (:class:`~inference.rag.NaiveRAG`): the k chunks in one prompt, no evaluator."""

    name = "naive"

    def __init__(self, config: RunConfig, shared: SharedModels):
        from inference.rag import NaiveRAG

        self.rag = NaiveRAG(config, backend=shared.generator_backend)


@SYSTEMS.register("corrective")
class CorrectiveSystem(BaselineSystem):
    """Corrective RAG (:class:`~inference.rag.CorrectiveRAG`; settings ``baselines.corrective``): the
    retrieval evaluator (the learned evaluator's relevance by default, shared with EvidentialRAG) picks
    correct / ambiguous / incorrect; the incorrect branch's web search is replaced by expanded retrieval
    (the harness's ``extra_chunks`` — the instance's next-ranked passages — or the index)."""

    name = "corrective"
    uses_extra_chunks = True

    def __init__(self, config: RunConfig, shared: SharedModels):
        from inference.rag import CorrectiveRAG

        settings = config.baselines.corrective
        evaluator = shared.learned_evaluator if settings.retrieval_evaluator == "learned" else None
        self.rag = CorrectiveRAG(
            config, backend=shared.generator_backend, evaluator=evaluator, corrective=settings
        )

    def details(self) -> dict[str, Any]:
        c = self.rag.corrective
        return {
            "retrieval_evaluator": c.retrieval_evaluator,
            "thresholds": {"upper": c.upper, "lower": c.lower},
        }


@SYSTEMS.register("selfrag")
class SelfRAGSystem(BaselineSystem):
    """Self-RAG (:class:`~inference.rag.SelfRAG`; settings ``baselines.selfrag``): the prompted-reflection
    reimplementation on the shared generator by default, or the released checkpoint's reflection tokens
    (``baselines.selfrag.mode: checkpoint`` with ``generator.backend.model: selfrag/selfrag_llama2_7b``)."""

    name = "selfrag"

    def __init__(self, config: RunConfig, shared: SharedModels):
        from inference.rag import SelfRAG

        self.rag = SelfRAG(config, backend=shared.generator_backend, selfrag=config.baselines.selfrag)

    def details(self) -> dict[str, Any]:
        return {"mode": self.rag.selfrag.mode}


def build_systems(
    names: Sequence[str], config: RunConfig, shared: SharedModels | None = None
) -> dict[str, Any]:
    """Build the named systems once, sharing the generator backend; ``evidential`` is built first so that
    the pipeline's backend (shared with the prompt evaluator when it names the same model) serves all.
    ``shared`` may carry an already-loaded generator backend (:meth:`SharedModels.offer_generator_backend`).
    """
    for n in names:
        SYSTEMS.get(n)  # unknown names fail before any model loads, listing the known ones
    shared = shared if shared is not None else SharedModels(config)
    order = sorted(names, key=lambda n: not n.startswith("evidential"))
    built = {n: SYSTEMS.get(n)(config, shared) for n in order}
    return {n: built[n] for n in names}
