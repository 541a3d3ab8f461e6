"""The EvidentialRAG pipeline: retrieve → rerank → batched evaluate → align → opinions → fuse → route → generate.

:class:`EvidentialRAG` loads every model once (retriever, evaluator, generator; the prompt evaluator and the
LLM generator share one backend when they name the same model) and answers one question or a batch. In
batch mode the evaluator and the generator each make ONE batched call for all the questions, so the prompt
evaluator + LLM generator cost ``k + 1`` logical decisions and 2 batched passes per query.

The answer record is :func:`inference.answer.answer_record`'s plus the generator's
``response``/``cited_chunk_ids``/``generation`` block, ``retrieval`` (retriever, reranker — ``null`` with
``reranked: false`` on the CPU default — and the retrieved chunks' ids and scores), per-stage ``timings``
(``retrieve``, ``extract``, ``evaluate``, ``align``, ``fuse_route``, ``generate``), ``logical_decisions`` and
``batched_passes`` (evaluator + generator).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from evidential import FusionConfig
from evidential.errors import ConfigError
from inference.answer import (
    AnswerRecord,
    RetrievalInfo,
    RetrievedChunk,
    build_answer_record,
    calibrated_record_confidence,
)
from inference.calibration import calibration_record, resolve_calibration
from inference.evaluators import build_evaluator
from inference.evaluators.base import EvaluationResult
from inference.generation import (
    GenerationInput,
    GenerationOutput,
    attach_generation,
    build_generator,
    can_share_backend,
    generation_input_from_record,
    stream_generation,
)
from inference.io import rounded
from inference.rag.base import RAGSystem, SharedModels
from inference.types import Chunk

if TYPE_CHECKING:
    from inference.config import RunConfig

__all__ = [
    "EvidentialDecomposed",
    "EvidentialLearned",
    "EvidentialNoFusion",
    "EvidentialNoRouting",
    "EvidentialPrompt",
    "EvidentialRAG",
]


@dataclass
class _Evidence:
    """A batch after evaluation, fusion and routing, before generation (:meth:`EvidentialRAG._evidence`)."""

    records: list[AnswerRecord]
    results: list[EvaluationResult]
    rows: list[list[Chunk]]
    retrieved: set[int]
    per_query_retrieve: float
    inputs: list[GenerationInput]
    include_text: bool = False


class EvidentialRAG(RAGSystem):
    """The full pipeline over one :class:`~inference.config.RunConfig`.

    Args:
        config: The run config (k, fusion, evaluator, generator, retrieval, models).
        index: An index folder built by ``evidential-rag index`` (or ``None``: chunks are passed per question).
        evaluator, generator, retriever: Already-built components (tests, servers); ``None`` builds them
            from the config.

    With ``config.calibration`` set (a file, or ``auto``: the learned checkpoint's own calibration when it
    applies, :func:`inference.calibration.resolve_calibration`), the calibration is loaded once (a named file
    is refused when fitted for another evaluator, checkpoint or fusion setting): its λ/τ1/τ2 and stated-set
    bar replace the config's, the evidence is scaled (``e' = s · e^p``) before fusion, and every record gets
    ``calibrated_confidence`` (the isotonic map of ``confidence``) and ``calibration`` (file, fingerprint).

    Subclasses registered as ablations set :attr:`evaluator_name` (force the evaluator) and
    :attr:`fusion_overrides` (replace fields of the fusion section) before anything is built.
    """

    name = "evidential"
    evaluator_name: ClassVar[str | None] = None  # None = the config's evaluator.name
    fusion_overrides: ClassVar[dict[str, Any]] = {}

    @classmethod
    def configured(cls, config: RunConfig) -> RunConfig:
        """``config`` with this variant's evaluator and fusion changes."""
        if cls.evaluator_name is not None:
            config = replace(config, evaluator=replace(config.evaluator, name=cls.evaluator_name))
        if cls.fusion_overrides:
            config = replace(config, fusion=replace(config.fusion, **cls.fusion_overrides))
        return config

    def __init__(
        self,
        config: RunConfig,
        index: str | Path | None = None,
        *,
        evaluator=None,
        generator=None,
        retriever=None,
    ):
        config = self.configured(config)
        self.calibration_info: dict[str, Any] | None = None
        self.calibration, path, self.calibration_note = resolve_calibration(config)
        if self.calibration is not None:
            self.calibration_info = calibration_record(self.calibration, path)
            config = replace(config, fusion=replace(config.fusion, **self.calibration.fusion_overrides()))
        super().__init__(config)
        t0 = time.perf_counter()
        self.evaluator = evaluator if evaluator is not None else build_evaluator(config.evaluator)
        self.timings["load_evaluator"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if generator is None:
            shared = getattr(self.evaluator, "backend", None)
            same = (
                shared is not None
                and config.evaluator.name == "prompt"
                and can_share_backend(config.evaluator.backend, config.generator.backend)
            )
            generator = build_generator(config.generator, shared if same else None)
        self.generator = generator
        self.timings["load_generator"] = time.perf_counter() - t0
        self.index = Path(index) if index is not None else None
        self.retriever = retriever
        if self.retriever is None and self.index is not None:
            from inference.retrieval import build_retriever

            t0 = time.perf_counter()
            self.retriever = build_retriever(self.index, config)
            self.timings["load_retriever"] = time.perf_counter() - t0

    @classmethod
    def from_shared(cls, config: RunConfig, shared: SharedModels) -> EvidentialRAG:
        """The pipeline on the evaluation's shared generator backend (also the prompt evaluator's when it
        names the same model); offers its own backend and learned evaluator to the systems built after it."""
        config = cls.configured(config)
        backend = shared.loaded_generator_backend
        evaluator = generator = None
        if backend is not None:
            generator = build_generator(config.generator, backend)
            if config.evaluator.name == "prompt" and can_share_backend(
                config.evaluator.backend, config.generator.backend
            ):
                evaluator = build_evaluator(config.evaluator, backend=backend)
        rag = cls(config, evaluator=evaluator, generator=generator)
        shared.offer_generator_backend(getattr(rag.generator, "backend", None))
        if config.evaluator.name == "learned":
            shared.offer_learned_evaluator(rag.evaluator)
        return rag

    def set_seed(self, seed: int) -> None:
        gen = getattr(self.generator, "generation", None)
        if gen is not None:
            self.generator.generation = replace(gen, seed=seed)
        super().set_seed(seed)

    def describe(self) -> dict[str, Any]:
        cfg = self.config
        out = {"evaluator": cfg.evaluator.name, "generator": cfg.generator.name}
        if cfg.evaluator.name == "learned":
            out["checkpoint"] = str(cfg.evaluator.checkpoint)
        else:
            out["evaluator_model"] = cfg.evaluator.backend.model
        if cfg.generator.name == "llm":
            out["generator_model"] = cfg.generator.backend.model
        out["calibration"] = (self.calibration_info or {}).get("file") or self.calibration_note
        return out

    # ------------------------------------------------------------------------------------------------
    def retrieve(self, questions: Sequence[str]) -> tuple[list[list[Chunk]], float]:
        if self.retriever is None:
            raise ConfigError(
                "no index loaded: pass --index DIR (built by `evidential-rag index`) or give chunks"
            )
        t0 = time.perf_counter()
        out = self.retriever.search_batch(list(questions), self.config.k)
        return out, time.perf_counter() - t0

    def ask(  # type: ignore[override]
        self,
        question: str,
        chunks: Sequence[Chunk] | None = None,
        candidates: Sequence[str] = (),
        fusion: FusionConfig | None = None,
    ) -> dict[str, Any]:
        """Answer one question (``chunks`` given: no retrieval)."""
        return self.ask_batch([question], [chunks] if chunks is not None else None, [candidates], fusion)[0]

    def ask_batch(
        self,
        questions: Sequence[str],
        chunks: Sequence[Sequence[Chunk] | None] | None = None,
        candidates: Sequence[Sequence[str]] | None = None,
        fusion: FusionConfig | None = None,
    ) -> list[dict[str, Any]]:
        """Answer a batch: one retrieval call, one batched evaluator call, one batched generator call."""
        return [r.to_dict() for r in self.answer_records(questions, chunks, candidates, fusion)]

    def answer_records(
        self,
        questions: Sequence[str],
        chunks: Sequence[Sequence[Chunk] | None] | None = None,
        candidates: Sequence[Sequence[str]] | None = None,
        fusion: FusionConfig | None = None,
        include_text: bool = False,
    ) -> list[AnswerRecord]:
        """:meth:`ask_batch` with typed records (:class:`~inference.answer.AnswerRecord`); with
        ``include_text`` the record's ``retrieval.chunks`` also carry each chunk's ``text``."""
        ev = self._evidence(questions, chunks, candidates, fusion, include_text)
        outputs = self.generator.generate_batch(ev.inputs)
        return [self._finish(ev, i, out) for i, out in enumerate(outputs)]

    def answer_stream(
        self,
        question: str,
        chunks: Sequence[Chunk] | None = None,
        candidates: Sequence[str] = (),
        fusion: FusionConfig | None = None,
        cancel: threading.Event | None = None,
        include_text: bool = False,
    ) -> Iterator[tuple[str, Any]]:
        """Answer one question in stages, for streaming: yields ``("record", AnswerRecord)`` once the
        evidence is fused and routed (retrieval, evaluation, fusion and routing done; ``response`` empty,
        no ``generation`` block yet), then ``("delta", str)`` for each piece of the response as the
        generator writes it (:func:`~inference.generation.stream_generation`; the template writes its text
        in one piece), then ``("done", AnswerRecord)``: the record :meth:`answer_records` returns for the same
        input. Setting ``cancel`` stops the generation after the current token.
        """
        chunk_lists = [chunks] if chunks is not None else None
        ev = self._evidence([question], chunk_lists, [candidates], fusion, include_text)
        first = self._finish(ev, 0, None)
        first.response = ""
        yield "record", first
        for item in stream_generation(self.generator, ev.inputs[0], cancel):
            if isinstance(item, str):
                yield "delta", item
            else:
                yield "done", self._finish(ev, 0, item)

    def _evidence(
        self,
        questions: Sequence[str],
        chunks: Sequence[Sequence[Chunk] | None] | None,
        candidates: Sequence[Sequence[str]] | None,
        fusion: FusionConfig | None,
        include_text: bool = False,
    ) -> _Evidence:
        """Retrieve where no chunks are given, evaluate (one batched call), calibrate, fuse and route."""
        questions = list(questions)
        for q in questions:
            if not isinstance(q, str) or not q.strip():
                raise ConfigError("every question must be a non-empty string")
        k = self.config.k
        fusion = fusion or self.config.fusion
        given = list(chunks) if chunks is not None else [None] * len(questions)
        if len(given) != len(questions):
            raise ConfigError(f"got {len(questions)} questions but {len(given)} chunk lists")
        need = [i for i, c in enumerate(given) if c is None]
        per_query_retrieve = 0.0
        rows: list[list[Chunk]] = [list(c)[:k] if c is not None else [] for c in given]
        if need:
            got, secs = self.retrieve([questions[i] for i in need])
            per_query_retrieve = secs / len(need)
            for i, cs in zip(need, got):
                rows[i] = list(cs)[:k]
        cands = [list(c) for c in candidates] if candidates is not None else [[] for _ in questions]
        results = self.evaluator.evaluate_batch(questions, rows, cands)
        cal = self.calibration
        if cal is not None:
            results = [replace(r, evidence=cal.apply_to_evidence(r.evidence)) for r in results]
        records = [build_answer_record(res, fusion, q) for res, q in zip(results, questions)]
        if cal is not None:
            for rec in records:
                rec.calibrated_confidence = calibrated_record_confidence(cal, rec)
                rec.calibration = dict(self.calibration_info or {})
        inputs = [generation_input_from_record(r.to_dict(), cs) for r, cs in zip(records, rows)]
        return _Evidence(records, results, rows, set(need), per_query_retrieve, inputs, include_text)

    def _finish(self, ev: _Evidence, i: int, gen: GenerationOutput | None) -> AnswerRecord:
        """Record ``i`` of ``ev`` with the generator's output ``gen`` (``None``: not generated yet), the
        retrieval block, the timings and the pass counts."""
        rec, res, rows = ev.records[i], ev.results[i], ev.rows[i]
        rec = AnswerRecord.from_dict(
            attach_generation(rec.to_dict(), gen) if gen is not None else rec.to_dict()
        )
        retrieved = i in ev.retrieved
        info = dict(getattr(self.retriever, "info", {}) or {}) if self.retriever is not None else {}
        rec.retrieval = RetrievalInfo(
            retrieved=retrieved,
            index=str(self.index) if retrieved and self.index is not None else None,
            details=dict(info) if retrieved else {"retriever": None, "reranker": None, "reranked": False},
            chunks=[
                RetrievedChunk(c.id, c.rank, c.score, c.source, c.text if ev.include_text else None)
                for c in rows
            ],
        )
        rec.timings = {"retrieve": rounded(ev.per_query_retrieve if retrieved else 0.0), **rec.timings}
        passes = gen.batched_passes if gen is not None else 0
        rec.logical_decisions = res.logical_decisions + (1 if passes else 0)
        rec.batched_passes = res.batched_passes + passes
        rec.evaluator_passes = res.batched_passes
        rec.k = self.config.k
        return rec

    def with_fusion(self, **overrides: Any) -> FusionConfig:
        """The pipeline's fusion config with some fields replaced (validated)."""
        return replace(self.config.fusion, **overrides)


class EvidentialLearned(EvidentialRAG):
    """EvidentialRAG with the learned evaluator, whatever the config says."""

    name = "evidential-learned"
    evaluator_name = "learned"


class EvidentialPrompt(EvidentialRAG):
    """EvidentialRAG with the prompt evaluator, whatever the config says."""

    name = "evidential-prompt"
    evaluator_name = "prompt"


class EvidentialNoFusion(EvidentialRAG):
    """Ablation (Table 12): EvidentialRAG without conflict-preserving fusion — the chunks' evidence is
    averaged into one opinion (``fusion.rule = "average"``), so conflict never reaches ``U``."""

    name = "evidential-no-fusion"
    fusion_overrides = {"rule": "average"}


class EvidentialNoRouting(EvidentialRAG):
    """Ablation (Table 12): EvidentialRAG without routing — always the direct answer
    (``fusion.policy = "direct"``)."""

    name = "evidential-no-routing"
    fusion_overrides = {"policy": "direct"}


class EvidentialDecomposed(EvidentialRAG):
    """EvidentialRAG with the decomposed routing policy (conflict-dominated uncertainty explains the
    conflict, ignorance-dominated uncertainty abstains) instead of the paper's Eq 15."""

    name = "evidential-decomposed"
    fusion_overrides = {"policy": "decomposed"}
