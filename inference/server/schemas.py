"""The pydantic request models of the HTTP server (``POST /ask``), their limits taken from the server
settings, and the conversion of request chunks to :class:`~inference.types.Chunk`."""

from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from inference.types import Chunk, rank_order

if TYPE_CHECKING:
    from inference.server.config import ServerConfig

__all__ = ["FuseRequest", "request_models", "to_chunks"]


def request_models(s: "ServerConfig") -> tuple[type[BaseModel], type[BaseModel]]:
    """The request models ``(ChunkIn, AskRequest)``, with the limits of ``s`` as field constraints."""

    class ChunkIn(BaseModel):
        """A retrieved chunk."""

        model_config = ConfigDict(extra="forbid", strict=True)

        id: str = Field(min_length=1, max_length=256, description="Chunk id (unique within the request).")
        text: str = Field(max_length=s.max_chunk_chars, description="Chunk text.")
        source: str | None = Field(default=None, max_length=2048, description="Doc id, url or title.")
        rank: int | None = Field(default=None, ge=1, description="Rank (1 = best); none: list order.")
        score: float | None = Field(default=None, allow_inf_nan=False, description="Retrieval score.")

    class AskRequest(BaseModel):
        """One question, with chunks (or the server's index), an evaluator and fusion overrides."""

        model_config = ConfigDict(extra="forbid", strict=True)

        question: str = Field(min_length=1, max_length=s.max_question_chars, description="The question.")
        chunks: list[ChunkIn] | None = Field(
            default=None,
            max_length=s.max_chunks,
            description="Retrieved chunks; omitted: search the server's index (--index).",
        )
        evaluator: str | None = Field(
            default=None, min_length=1, max_length=64, description="Evaluator name (default: the server's)."
        )
        candidates: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
            default_factory=list,
            max_length=s.max_candidates,
            description="Candidate claims that open the inventory (e.g. yes, no).",
        )
        lam: float | None = Field(default=None, allow_inf_nan=False, description="fusion.lam override.")
        tau1: float | None = Field(default=None, allow_inf_nan=False, description="fusion.tau1 override.")
        tau2: float | None = Field(default=None, allow_inf_nan=False, description="fusion.tau2 override.")
        rule: str | None = Field(default=None, max_length=32, description="fusion.rule override.")
        policy: str | None = Field(default=None, max_length=32, description="fusion.policy override.")
        include_chunk_text: bool = Field(
            default=False,
            description="Also return each chunk's text in the record's retrieval.chunks (the inspector page "
            "shows retrieved chunks with it).",
        )

        @field_validator("question")
        @classmethod
        def _not_blank(cls, v: str) -> str:
            if not v.strip():
                raise ValueError("question must not be empty or blank")
            return v

        @field_validator("candidates")
        @classmethod
        def _no_blank_candidates(cls, v: list[str]) -> list[str]:
            if any(not c.strip() for c in v):
                raise ValueError("candidates must be non-blank strings")
            return v

        @model_validator(mode="after")
        def _unique_ids(self):
            if self.chunks:
                seen: set[str] = set()
                for c in self.chunks:
                    if c.id in seen:
                        raise ValueError(f"duplicate chunk id {c.id!r}")
                    seen.add(c.id)
            return self

    return ChunkIn, AskRequest


def to_chunks(items: list) -> list[Chunk]:
    """Request chunks → :class:`Chunk` in rank order; chunks without rank keep list order (as ``load_chunks``)."""
    return rank_order([Chunk(c.id, c.text, c.source, c.rank, c.score) for c in items])


class FuseRequest(BaseModel):
    """``POST /fuse``: an answer record to fuse and route again, with fusion overrides (no model call)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    record: dict = Field(description="An answer record of /ask (or of ask --json, batch, evaluate).")
    lam: float | None = Field(default=None, allow_inf_nan=False, description="fusion.lam override.")
    tau1: float | None = Field(default=None, allow_inf_nan=False, description="fusion.tau1 override.")
    tau2: float | None = Field(default=None, allow_inf_nan=False, description="fusion.tau2 override.")
    rule: str | None = Field(default=None, max_length=32, description="fusion.rule override.")
    policy: str | None = Field(default=None, max_length=32, description="fusion.policy override.")
