"""The chunk: a piece of text with its id, source, rank and score — what a dataset gives with a question and
what retrieval returns (:mod:`inference.types` re-exports it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Chunk"]


@dataclass
class Chunk:
    """A chunk of text: ``id``, ``text``, ``source`` (doc id / url / title), ``rank`` (1 = best), ``score``.

    The passages a dataset gives with a question, and the chunks retrieval returns (re-exported by
    :mod:`inference.types`)."""

    id: str
    text: str
    source: str | None = None
    rank: int | None = None
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
