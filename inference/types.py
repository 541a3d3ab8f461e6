"""Data contracts shared by evaluators, the pipeline and training (docs/data.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evidential.errors import EvidentialError
from inference.io import iter_jsonl
from training.data.chunk import Chunk

__all__ = ["STANCES", "Chunk", "ChunkEvidence", "DataError", "load_chunks", "rank_order"]

STANCES = ("supports", "refutes", "irrelevant")


class DataError(EvidentialError):
    """A data file or record that does not follow its documented format."""


@dataclass
class ChunkEvidence:
    """What an evaluator concluded about one chunk (one logical decision).

    Attributes:
        chunk_id: The chunk's id.
        claim: The answer-bearing claim the chunk supports (frame text after alignment), or None.
        answer: The normalized value of that claim, or None.
        stance: ``supports`` / ``refutes`` / ``irrelevant``.
        rationale: A short reason (no hidden reasoning).
        evidence: Frame claim id → non-negative evidence (empty or all zero = ignorance).
        valid: The model output was schema-valid as produced.
        repaired: The output was invalid but repaired conservatively.
        raw: The model's raw output (for audits), when there was one.
        errors: What was wrong with the output, if anything.
        grounded: Every claim the chunk gave evidence to is stated in its text
            (:mod:`inference.evaluators.grounding`); ``False`` when some evidence was dropped, ``None`` when
            grounding is off or has not run.
        grounding_notes: One line per claim whose evidence grounding dropped, with the reason.
        extracted: The answer the evaluator read from the chunk before any support decision (the learned
            evaluator's repaired span, or on given candidates the one it supports; the prompt evaluator's
            claim), or None when it read none; what claim-extraction fidelity is measured on.
        reader_score: The learned evaluator's reader score of the chunk: its span head's best answer span over
            the no-answer score (:meth:`training.learned.model.EvidentialEvaluatorModel.decode_spans`), or
            None where no span pass read it (given candidates, yes/no frames, the prompt evaluator).
    """

    chunk_id: str
    claim: str | None = None
    answer: str | None = None
    stance: str = "irrelevant"
    rationale: str = ""
    evidence: dict[str, float] = field(default_factory=dict)
    valid: bool = True
    repaired: bool = False
    raw: str | None = None
    errors: list[str] = field(default_factory=list)
    grounded: bool | None = None
    grounding_notes: list[str] = field(default_factory=list)
    extracted: str | None = None
    reader_score: float | None = None

    @property
    def failed(self) -> bool:
        """Neither valid nor repairable: the chunk counts as ignorance."""
        return not self.valid and not self.repaired

    def to_dict(self, raw: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not raw:
            d.pop("raw")
        return d


def load_chunks(path: str | Path) -> list[Chunk]:
    """Read chunks from JSONL (``id``, ``text``, optional ``source``, ``rank``, ``score``), in rank order.

    Rows without ``rank`` keep file order. Errors name the file, line and field.
    """
    p = Path(path)
    chunks: list[Chunk] = []
    seen: set[str] = set()
    for n, row in iter_jsonl(p, "chunks", DataError):
        if not isinstance(row, dict):
            raise DataError(f"{p}:{n}: expected a JSON object with id and text")
        cid = row.get("id")
        if isinstance(cid, int) and not isinstance(cid, bool):
            cid = str(cid)
        if not isinstance(cid, str) or not cid:
            raise DataError(f"{p}:{n}: field 'id' must be a non-empty string")
        if cid in seen:
            raise DataError(f"{p}:{n}: duplicate chunk id {cid!r}")
        seen.add(cid)
        text = row.get("text")
        if not isinstance(text, str):
            raise DataError(f"{p}:{n}: field 'text' must be a string")
        rank = row.get("rank")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)):
            raise DataError(f"{p}:{n}: field 'rank' must be an integer")
        score = row.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            raise DataError(f"{p}:{n}: field 'score' must be a number")
        source = row.get("source")
        if source is not None and not isinstance(source, str):
            raise DataError(f"{p}:{n}: field 'source' must be a string")
        chunks.append(Chunk(cid, text, source, rank, score))
    if not chunks:
        raise DataError(f"{p}: the file holds no chunks")
    return rank_order(chunks)


def rank_order(chunks: list[Chunk]) -> list[Chunk]:
    """Chunks sorted by ``rank``; chunks without one keep their order after the ranked ones and get the
    rank of their position."""
    order = sorted(range(len(chunks)), key=lambda i: (chunks[i].rank is None, chunks[i].rank or 0, i))
    out = [chunks[i] for i in order]
    for r, c in enumerate(out, 1):
        if c.rank is None:
            c.rank = r
    return out
