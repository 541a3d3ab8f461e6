"""From an evaluation to the answer record: opinions → fusion → routing → a templated response.

This module is the part every entry point shares:
it fuses an :class:`~inference.evaluators.base.EvaluationResult`, routes it and renders the answer record
(docs/data.md). ``response`` comes from the deterministic template of the route
(:func:`inference.generation.template_response`, re-exported here); an LLM generator's answer replaces it
through :func:`inference.generation.attach_generation`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from evidential import (
    FusionConfig,
    copy_contested,
    copy_pairs,
    fuse,
    merge_copies,
    opinions_from_evidence,
    route,
    select_uncontested,
    witnessed_claims,
)
from inference.evaluators.base import EvaluationResult, FrameClaim
from inference.generation.base import GenerationInput, cited_chunk_ids
from inference.generation.template import template_response
from inference.io import rounded
from inference.types import Chunk, ChunkEvidence, DataError
from training.calibration.apply import answer_reader_score
from training.utils.metrics import stated_claims
from training.utils.text import near_copies

__all__ = [
    "AnswerRecord",
    "ChunkDecision",
    "ClaimRecord",
    "FusionInfo",
    "GenerationInfo",
    "RetrievalInfo",
    "RetrievedChunk",
    "answer_record",
    "build_answer_record",
    "calibrated_record_confidence",
    "record_evidence",
    "record_copies",
    "refuse_record",
    "template_response",
]


def _plain(cls, data: dict[str, Any]):
    """A flat record dataclass from its dict (the dataclass's fields, in any order)."""
    return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def _as_dict(obj) -> dict[str, Any]:
    """A flat record dataclass as a dict in field order (values copied one level deep)."""
    out = {}
    for f in fields(obj):
        v = getattr(obj, f.name)
        out[f.name] = list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v
    return out


@dataclass
class ClaimRecord:
    """A frame claim of the answer record: id, text, fused belief ``mass``, the chunks and surface forms."""

    id: str
    text: str
    mass: float
    chunk_ids: list[str] = field(default_factory=list)
    forms: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClaimRecord:
        return _plain(cls, data)


@dataclass
class ChunkDecision:
    """What the evaluator decided about one chunk (``chunks`` of the answer record)."""

    chunk_id: str
    rank: int | None
    source: str | None
    claim: str | None
    answer: str | None
    stance: str
    rationale: str
    evidence: dict[str, float]
    valid: bool
    repaired: bool
    errors: list[str]
    grounded: bool | None = None
    grounding_notes: list[str] = field(default_factory=list)
    #: ids of the other chunks that are near-copies of this one (fusion.copy_overlap;
    #: training.utils.text.near_copies)
    copies: list[str] = field(default_factory=list)
    #: the answer read from the chunk before the support decision (ChunkEvidence.extracted)
    extracted: str | None = None
    #: the span head's reader score of the chunk (ChunkEvidence.reader_score); None where it was not read
    reader_score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChunkDecision:
        return _plain(cls, data)


@dataclass
class FusionInfo:
    """The fusion settings the record was fused and routed with."""

    rule: str
    lam: float
    tau1: float
    tau2: float
    policy: str
    state_ratio: float | None = None
    state_ratio_yes_no: float | None = None
    copy_overlap: float | None = None
    state_witness_ratio: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusionInfo:
        return _plain(cls, data)


@dataclass
class GenerationInfo:
    """The generator's block (:func:`inference.generation.attach_generation`)."""

    generator: str
    route: str | None
    fallback: bool | str | None
    fallback_reason: str | None
    raw: str | None
    prompt_version: str | None
    finish_reason: str | None
    batched_passes: int

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationInfo:
        return _plain(cls, data)


@dataclass
class RetrievedChunk:
    """A chunk the answer was computed from: id, rank, retrieval score and source; ``text`` only when the
    caller asked for it (``include_text``; left out of the JSON while ``None``)."""

    id: str
    rank: int | None
    score: float | None
    source: str | None
    text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = _as_dict(self)
        if out["text"] is None:
            del out["text"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RetrievedChunk:
        return _plain(cls, data)


@dataclass
class RetrievalInfo:
    """The ``retrieval`` block: whether the chunks were retrieved, the index, the retriever's description
    (``retriever``, ``reranker``, ``reranked``, ...; kept as ``details``) and the chunks."""

    retrieved: bool
    index: str | None
    details: dict[str, Any] = field(default_factory=dict)
    chunks: list[RetrievedChunk] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "retrieved": self.retrieved,
            "index": self.index,
            **self.details,
            "chunks": [c.to_dict() for c in self.chunks],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RetrievalInfo:
        details = {k: v for k, v in data.items() if k not in ("retrieved", "index", "chunks")}
        return cls(
            retrieved=data["retrieved"],
            index=data.get("index"),
            details=details,
            chunks=[RetrievedChunk.from_dict(c) for c in data.get("chunks", [])],
        )


# the record's parts that only some records carry (omitted from the JSON when None), in their JSON order
_OPTIONAL = ("calibrated_confidence", "calibration", "generation", "retrieval", "evaluator_passes", "k")


@dataclass
class AnswerRecord:
    """The answer record (docs/data.md) as a typed object; :meth:`to_dict` is the JSON form.

    The fields up to ``fusion`` and ``stated_claims`` (the claims the answer states, by fused mass:
    :func:`training.utils.metrics.stated_claims`; in the JSON right after ``answer``) are always present
    (:func:`build_answer_record`); the pipeline adds
    ``calibrated_confidence`` and ``calibration`` (with a calibration file), ``generation`` (the generator's
    block), ``retrieval``, ``evaluator_passes`` and ``k``, each left out of the JSON while ``None``.
    """

    question: str
    response: str
    cited_chunk_ids: list[str]
    route: str
    answer: str | None
    claims: list[ClaimRecord]
    uncertainty: float
    ignorance: float
    conflict: float
    mean_pairwise_conflict: float
    confidence: float
    step_conflict: list[float]
    chunks: list[ChunkDecision]
    output_counts: dict[str, int]
    timings: dict[str, float]
    logical_decisions: int
    batched_passes: int
    evaluator: str
    evaluator_meta: dict[str, Any]
    fusion: FusionInfo
    calibrated_confidence: float | None = None
    calibration: dict[str, Any] | None = None
    generation: GenerationInfo | None = None
    retrieval: RetrievalInfo | None = None
    evaluator_passes: int | None = None
    k: int | None = None
    stated_claims: list[str] = field(default_factory=list)
    #: fused mass of the stated set (Σ of its claims' masses): the belief that the answer as stated holds the
    #: truth; what a calibration with ``confidence_input: stated`` maps to ``calibrated_confidence``
    stated_mass: float | None = None
    #: claims left out of the stated set because only edited copies back them (evidential.copy_contested)
    copy_contested: list[str] = field(default_factory=list)
    #: the reader score of the answer's chunks (training.calibration.answer_reader_score): how sure the span
    #: head is that the chunks backing the answer answer the question; what a calibration's reader map
    #: corrects ``calibrated_confidence`` by. None when no chunk was read (given candidates, yes/no frames)
    reader_score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready record (keys in the documented order, nested parts as dicts)."""
        out: dict[str, Any] = {}
        names = [f.name for f in fields(self) if f.name != "stated_claims"]
        names.insert(names.index("answer") + 1, "stated_claims")  # the JSON keeps it next to the answer
        for name in names:
            v = getattr(self, name)
            if name in _OPTIONAL and v is None:
                continue
            if name in ("claims", "chunks"):
                v = [x.to_dict() for x in v]
            elif hasattr(v, "to_dict"):
                v = v.to_dict()
            elif isinstance(v, list):
                v = list(v)
            elif isinstance(v, dict):
                v = dict(v)
            out[name] = v
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnswerRecord:
        """The record from its JSON form (:meth:`to_dict`'s output, e.g. a line of ``ask --json``)."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in known}
        kw["claims"] = [ClaimRecord.from_dict(c) for c in data["claims"]]
        kw["chunks"] = [ChunkDecision.from_dict(c) for c in data["chunks"]]
        kw["fusion"] = FusionInfo.from_dict(data["fusion"])
        if data.get("generation") is not None:
            kw["generation"] = GenerationInfo.from_dict(data["generation"])
        if data.get("retrieval") is not None:
            kw["retrieval"] = RetrievalInfo.from_dict(data["retrieval"])
        return cls(**kw)


def answer_record(
    result: EvaluationResult, fusion: FusionConfig, question: str | None = None
) -> dict[str, Any]:
    """Fuse and route one evaluation and return the answer record (JSON-ready)."""
    return build_answer_record(result, fusion, question).to_dict()


def build_answer_record(
    result: EvaluationResult,
    fusion: FusionConfig,
    question: str | None = None,
    copies: list[list[int]] | None = None,
) -> AnswerRecord:
    """Fuse and route one evaluation and return the typed answer record.

    ``copies`` (per chunk, the indices of its near-copies) defaults to
    :func:`~training.utils.text.near_copies` of the chunk texts at ``fusion.copy_overlap``. Copies that back
    the same claim are fused as one source (:func:`evidential.merge_copies`); claims that only edited copies
    back (:func:`evidential.copy_contested`) stay out of the stated set and are listed in
    ``copy_contested``. The record's chunk decisions keep each chunk's own evidence."""
    t0 = time.perf_counter()
    if copies is None:
        copies = near_copies([c.text for c in result.chunks], fusion.copy_overlap)
    pairs = copy_pairs(copies) if any(copies) and result.claims else None
    evidence = result.evidence if pairs is None else merge_copies(result.evidence, pairs)
    ops = opinions_from_evidence(evidence, sanitize=fusion.sanitize)
    res = fuse(ops, lam=fusion.lam, rule=fusion.rule)
    decision = route(res, fusion.tau1, fusion.tau2, fusion.policy).names
    contested = [False] * len(result.claims)
    sel = int(res.selected)
    if pairs is not None:
        contested_t = copy_contested(res.belief, ops.evidence, pairs)
        contested = contested_t.tolist()
        sel = int(select_uncontested(res.belief, contested_t))
    witnessed = (
        witnessed_claims(ops.evidence, fusion.state_witness_ratio).tolist()
        if fusion.state_witness_ratio is not None and result.claims
        else None
    )
    t_fuse = time.perf_counter() - t0
    answer = result.claims[sel].text if sel >= 0 else None
    stated = stated_claims(
        [c.text for c in result.claims],
        res.belief.tolist(),
        decision,
        sel,
        fusion.state_ratio,
        fusion.state_ratio_yes_no,
        contested,
        witnessed,
    )
    claims = [
        ClaimRecord(c.id, c.text, rounded(res.belief[j]), list(c.chunk_ids), list(c.forms))
        for j, c in enumerate(result.claims)
    ]
    claim_dicts = [c.to_dict() for c in claims]
    cited = cited_chunk_ids(
        GenerationInput(
            question if question is not None else result.query,
            decision,
            claim_dicts,
            rounded(res.uncertainty),
            answer=answer,
            stated=stated,
        )
    )
    return AnswerRecord(
        question=question if question is not None else result.query,
        response=template_response(decision, claim_dicts, answer, stated),
        cited_chunk_ids=cited,
        route=decision,
        answer=answer,
        claims=claims,
        uncertainty=rounded(res.uncertainty),
        ignorance=rounded(res.ignorance),
        conflict=rounded(res.conflict),
        mean_pairwise_conflict=rounded(res.mean_pairwise_conflict),
        confidence=rounded(res.confidence),
        step_conflict=[rounded(x) for x in res.step_conflict],
        chunks=[
            ChunkDecision(
                chunk_id=d.chunk_id,
                rank=c.rank,
                source=c.source,
                claim=d.claim,
                answer=d.answer,
                stance=d.stance,
                rationale=d.rationale,
                evidence={k: rounded(v) for k, v in d.evidence.items()},
                valid=d.valid,
                repaired=d.repaired,
                errors=d.errors,
                grounded=d.grounded,
                grounding_notes=list(d.grounding_notes),
                copies=[result.chunks[j].id for j in copies[i]],
                extracted=d.extracted,
                reader_score=d.reader_score,
            )
            for i, (d, c) in enumerate(zip(result.decisions, result.chunks))
        ],
        output_counts=dict(result.counts),
        timings={**{k: rounded(v) for k, v in result.timings.items()}, "fuse_route": rounded(t_fuse)},
        logical_decisions=result.logical_decisions,
        batched_passes=result.batched_passes,
        evaluator=result.evaluator,
        evaluator_meta=result.meta,
        fusion=FusionInfo(
            fusion.rule,
            fusion.lam,
            fusion.tau1,
            fusion.tau2,
            fusion.policy,
            fusion.state_ratio,
            fusion.state_ratio_yes_no,
            fusion.copy_overlap,
            fusion.state_witness_ratio,
        ),
        stated_claims=stated,
        stated_mass=rounded(
            sum(float(res.belief[j]) for j, c in enumerate(result.claims) if c.text in stated)
        ),
        copy_contested=[c.text for c, x in zip(result.claims, contested) if x],
        reader_score=_answer_reader(result, sel),
    )


def _answer_reader(result: EvaluationResult, selected: int) -> float | None:
    """The answer's reader score (:func:`training.calibration.answer_reader_score`), None without one."""
    scores = [d.reader_score for d in result.decisions]
    if selected < 0 or all(x is None for x in scores) or not result.claims:
        return None
    reader = torch.tensor([math.nan if x is None else float(x) for x in scores], dtype=torch.float64)
    r = float(answer_reader_score(result.evidence, reader, torch.tensor(selected)))
    return rounded(r) if math.isfinite(r) else None


def record_evidence(record: Mapping[str, Any], where: str = "answer record") -> torch.Tensor:
    """The ``[k, M]`` evidence an answer record was fused from: ``chunks[i].evidence[claim id]`` with the
    claims in frame order (float64; a claim a chunk does not list gets 0).

    Raises:
        DataError: ``record`` has no ``claims`` / ``chunks`` lists, a chunk has no ``evidence`` object,
            evidence names a claim id the record does not list, or a value is not a finite number >= 0.
    """
    if not isinstance(record, Mapping):
        raise DataError(f"{where} must be a JSON object; got {type(record).__name__}")
    claims, chunks = record.get("claims"), record.get("chunks")
    if not isinstance(claims, list) or not isinstance(chunks, list):
        raise DataError(
            f"{where} needs 'claims' and 'chunks' lists (the record of /ask, ask --json or batch)"
        )
    index: dict[str, int] = {}
    for j, c in enumerate(claims):
        if not isinstance(c, Mapping) or not isinstance(c.get("id"), str):
            raise DataError(f"{where}: claims[{j}] must be an object with a string 'id'")
        index[c["id"]] = j
    ev = torch.zeros(len(chunks), len(claims), dtype=torch.float64)
    for t, ch in enumerate(chunks):
        cev = ch.get("evidence") if isinstance(ch, Mapping) else None
        if not isinstance(cev, Mapping):
            raise DataError(
                f"{where}: chunks[{t}] has no 'evidence' object to re-fuse (a baseline's record?)"
            )
        for cid, value in cev.items():
            if cid not in index:
                raise DataError(
                    f"{where}: chunks[{t}] ({ch.get('chunk_id')!r}) has evidence for claim {cid!r}, which the "
                    "record's claims do not list"
                )
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise DataError(
                    f"{where}: chunks[{t}].evidence[{cid!r}] = {value!r} is not a finite number >= 0"
                )
            ev[t, index[cid]] = float(value)
    return ev


def record_copies(record: Mapping[str, Any]) -> list[list[int]]:
    """Per chunk of an answer record (its JSON form), the indices of the chunks its ``copies`` names (ids
    the record does not list are ignored; a record from before the field has none)."""
    chunks = record.get("chunks") or []
    index = {ch.get("chunk_id"): t for t, ch in enumerate(chunks)}
    return [sorted(index[c] for c in (ch.get("copies") or []) if c in index) for ch in chunks]


def refuse_record(
    record: AnswerRecord | Mapping[str, Any], fusion: FusionConfig, calibration=None
) -> AnswerRecord:
    """Fuse and route an answer record's per-chunk evidence again under ``fusion`` — no model call.

    The record's claims, chunk decisions and evidence (:func:`record_evidence`: the evaluator's evidence,
    before any calibration) are fused and routed as :func:`build_answer_record` does — after the
    calibration's evidence transform when ``calibration`` is given, as the pipeline does — and the route's
    template writes the response (as ``sweep`` does; the record's ``generation`` block is dropped). The
    retrieval block, ``k``, pass counts, evaluator timings and the calibration block are kept. The chunks'
    recorded ``copies`` decide which claims are copy-contested (a record keeps no chunk text to compare
    again); ``fusion.copy_overlap`` null turns the rule off.

    Args:
        record: An answer record (typed, or its JSON form).
        fusion: The fusion settings to re-fuse with.
        calibration: The calibration the record was answered with
            (:class:`~training.calibration.Calibration`: its ``apply_to_evidence`` and
            ``calibrated_confidence``); ``None``: the evidence is fused as recorded and
            ``calibrated_confidence`` is left out.

    Raises:
        DataError: The record is not an EvidentialRAG answer record (see :func:`record_evidence`).
    """
    data = record.to_dict() if isinstance(record, AnswerRecord) else record
    evidence = record_evidence(data)
    if calibration is not None:
        evidence = calibration.apply_to_evidence(evidence)
    try:
        rec = AnswerRecord.from_dict(data)
        # the evidence and the settings are checked; what fails from here on is a field of the wrong type
        # (from_dict does not type-check every field: a string where an object belongs, a null timing)
        copies = record_copies(data) if fusion.copy_overlap is not None else [[] for _ in rec.chunks]
        out = build_answer_record(_evaluation_result(rec, evidence), fusion, rec.question, copies)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise DataError(f"answer record is incomplete or malformed ({type(exc).__name__}: {exc})") from None
    out.retrieval, out.k, out.evaluator_passes = rec.retrieval, rec.k, rec.evaluator_passes
    out.logical_decisions, out.batched_passes = len(rec.chunks), rec.evaluator_passes or 0
    if calibration is not None:
        out.calibrated_confidence = calibrated_record_confidence(calibration, out)
        out.calibration = rec.calibration
    return out


def calibrated_record_confidence(calibration: Any, rec: AnswerRecord) -> float:
    """The record's calibrated confidence, rounded: ``calibration``'s maps
    (:meth:`training.calibration.Calibration.calibrated_confidence`) of its confidence or stated mass, by its
    route and its reader score."""
    return rounded(
        calibration.calibrated_confidence(rec.confidence, rec.stated_mass, rec.route, rec.reader_score)
    )


def _evaluation_result(rec: AnswerRecord, evidence: torch.Tensor) -> EvaluationResult:
    """The evaluator output a record was built from, with ``evidence`` as its evidence matrix."""
    return EvaluationResult(
        query=rec.question,
        chunks=[Chunk(d.chunk_id, "", d.source, d.rank) for d in rec.chunks],
        decisions=[
            ChunkEvidence(
                chunk_id=d.chunk_id,
                claim=d.claim,
                answer=d.answer,
                stance=d.stance,
                rationale=d.rationale,
                evidence=dict(d.evidence),
                valid=d.valid,
                repaired=d.repaired,
                errors=list(d.errors),
                grounded=d.grounded,
                grounding_notes=list(d.grounding_notes),
                extracted=d.extracted,
                reader_score=d.reader_score,
            )
            for d in rec.chunks
        ],
        claims=[FrameClaim(c.id, c.text, list(c.chunk_ids), list(c.forms)) for c in rec.claims],
        evidence=evidence,
        logical_decisions=len(rec.chunks),
        batched_passes=rec.evaluator_passes or 0,
        counts=dict(rec.output_counts),
        timings={k: v for k, v in rec.timings.items() if k not in ("fuse_route", "generate")},
        evaluator=rec.evaluator,
        meta=dict(rec.evaluator_meta),
    )
