"""The generator interface (paper §3.5): what a generator reads, what it writes, and the registry.

The generator writes the user-facing answer of a routed query (route of Eq 15). It receives the query,
the ranked evidence summary (the aligned claims with their fused masses and supporting chunk ids), the
fused uncertainty ``U_global`` (Eqs 13-15) with its ignorance and conflict parts, the selected claim (Eq 27)
and the retrieved chunks. Every generator answers a *batch* of queries at once; an LLM generator makes ONE
backend call for the whole batch (one batched model pass).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from evidential import ROUTES
from evidential.registry import Registry
from inference.types import Chunk, DataError
from training.utils.metrics import is_yes_no_frame

__all__ = [
    "GENERATORS",
    "GenerationInput",
    "GenerationOutput",
    "Generator",
    "attach_generation",
    "cited_chunk_ids",
    "generation_input_from_record",
    "is_inconclusive",
    "presented_claims",
    "ranked_claims",
    "rendered_route",
    "stream_generation",
]

_CLAIM_KEYS = ("id", "text", "mass", "chunk_ids")


@dataclass
class GenerationInput:
    """Everything the generator reads for one query (paper §3.5).

    Attributes:
        question: The user's question.
        route: The routing decision (Eq 15 or another policy): ``direct``, ``conflict`` or ``abstain``.
        claims: The aligned frame as the answer record holds it: dicts with ``id``, ``text``, ``mass`` (fused
            singleton mass ``m⁽ᵏ⁾({a_j})``) and ``chunk_ids`` (the chunks that support the claim, in rank
            order); other keys are kept and ignored.
        uncertainty: ``U_global = m⁽ᵏ⁾(Θ)`` (Eq 13).
        ignorance: The part of ``U_global`` that came from joint ignorance (vacuity).
        conflict: The part of ``U_global`` that came from transferred conflict (``λK``).
        answer: The selected claim's text (the highest-mass claim, Eq 27), or ``None`` when no claim has mass.
        chunks: The retrieved chunks in rank order; the prompt quotes their text (cut to a character budget).
        stated: The texts of the claims the answer states (the record's ``stated_claims``,
            :func:`evidential.stated_mask`); ``None``: the selected claim (direct) or every claim with
            positive mass (conflict).
    """

    question: str
    route: str
    claims: list[dict[str, Any]] = field(default_factory=list)
    uncertainty: float = 1.0
    ignorance: float = 0.0
    conflict: float = 0.0
    answer: str | None = None
    chunks: list[Chunk] = field(default_factory=list)
    stated: list[str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.question, str):
            raise DataError(
                f"generation input: question must be a string; got {type(self.question).__name__}"
            )
        if self.route not in ROUTES:
            raise DataError(f"generation input: route must be one of {', '.join(ROUTES)}; got {self.route!r}")
        for i, c in enumerate(self.claims):
            if not isinstance(c, Mapping) or any(k not in c for k in _CLAIM_KEYS):
                raise DataError(
                    f"generation input: claims[{i}] must be a mapping with {', '.join(_CLAIM_KEYS)} "
                    "(as inference.answer.answer_record writes them)"
                )
        for name in ("uncertainty", "ignorance", "conflict"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not -1e-6 <= value <= 1 + 1e-6
            ):
                raise DataError(f"generation input: {name} must be a number in [0, 1]; got {value!r}")
        if self.answer is not None and not isinstance(self.answer, str):
            raise DataError(f"generation input: answer must be a string or null; got {self.answer!r}")
        if any(not isinstance(c, Chunk) for c in self.chunks):
            raise DataError("generation input: chunks must be inference.types.Chunk objects")
        if self.stated is not None and (
            not isinstance(self.stated, list) or any(not isinstance(t, str) for t in self.stated)
        ):
            raise DataError(
                f"generation input: stated must be a list of claim texts or null; got {self.stated!r}"
            )


@dataclass
class GenerationOutput:
    """What a generator wrote for one query.

    Attributes:
        text: The response shown to the user (the template's text when the LLM output fell back).
        route: The route the text was written for: the input route, except that a route with nothing to
            present (``direct`` without a selected claim, ``conflict`` without a supported claim) is
            rendered as ``abstain``.
        cited_chunk_ids: Ids of the chunks supporting the claims the route presents: the selected claim's
            (direct), every supported competing claim's in mass order (conflict), none (abstain).
        generator: Name of the generator (``llm``, ``template``).
        batched_passes: Batched model passes this output took part in (1 for an LLM batch, shared by the
            batch; 0 for the template).
        seconds: Wall time of the batched call this output came from (shared by the batch).
        fallback: True when the LLM text failed the post-check and the template replaced it.
        fallback_reason: Why the LLM text failed the post-check (also set when falling back is disabled;
            then ``fallback`` stays False and ``text`` is the LLM's).
        raw: The LLM's raw text (``None`` for the template), kept even when it was replaced.
        prompt_version: :data:`~inference.generation.prompt.GENERATION_PROMPT_VERSION` of the prompt used.
        finish_reason: The backend's finish reason (``stop``, ``length``, ...), when an LLM wrote the text.
    """

    text: str
    route: str
    cited_chunk_ids: list[str]
    generator: str
    batched_passes: int = 0
    seconds: float = 0.0
    fallback: bool = False
    fallback_reason: str | None = None
    raw: str | None = None
    prompt_version: str | None = None
    finish_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class Generator(Protocol):
    """What every generator provides: one output per input, the whole batch at once.

    ``passes`` counts the batched model calls made over the generator's lifetime (0 for the template).
    """

    name: str
    passes: int

    def generate_batch(self, inputs: Sequence[GenerationInput]) -> list[GenerationOutput]: ...


def stream_generation(
    generator: Generator, inp: GenerationInput, cancel: threading.Event | None = None
) -> Iterator[str | GenerationOutput]:
    """Write the answer of one input and yield its text in pieces as it is generated, then the finished
    :class:`GenerationOutput` — the output ``generator.generate_batch([inp])`` gives.

    A generator with its own ``stream(inp, cancel)`` (the LLM generator over a streaming backend) yields
    token pieces; any other (the template) yields its whole text as one piece. The pieces join to the
    generated text; when the LLM text falls back to the template, the final output's ``text`` is the
    template's (``fallback`` says so) while the pieces were the LLM's.
    """
    stream = getattr(generator, "stream", None)
    if callable(stream):
        yield from stream(inp, cancel)
        return
    out = generator.generate_batch([inp])[0]
    if out.text:
        yield out.text
    yield out


# name -> factory(GeneratorConfig, backend: Backend | None) -> Generator
GENERATORS: Registry[Any] = Registry("generator")


def ranked_claims(claims: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Claims with positive fused mass, highest first; ties keep frame order (a stable sort)."""
    return sorted((c for c in claims if c["mass"] > 0), key=lambda c: -c["mass"])


def _selected(inp: GenerationInput) -> Mapping[str, Any] | None:
    if inp.answer is None:
        return None
    return next((c for c in ranked_claims(inp.claims) if c["text"] == inp.answer), None)


def rendered_route(inp: GenerationInput) -> str:
    """The route the answer is written for: ``inp.route`` unless that route has nothing to present, and the
    conflict-aware answer for a direct route that states both verdicts of a yes/no frame (answers that
    exclude each other cannot both hold, as two valid answers for different entities can)."""
    if inp.route == "direct" and _selected(inp) is None:
        return "abstain"
    if (
        inp.route == "direct"
        and inp.stated is not None
        and len(set(inp.stated)) > 1
        and is_yes_no_frame(inp.stated)
    ):
        return "conflict"
    if inp.route == "conflict" and not ranked_claims(inp.claims):
        return "abstain"
    return inp.route


def presented_claims(inp: GenerationInput) -> list[Mapping[str, Any]]:
    """The claims the rendered route presents (Eq 15): the selected claim (direct), the claims with
    positive fused mass in mass order (conflict), none (abstain). With ``inp.stated`` the direct route
    adds the other stated claims after the selected one and the conflict route keeps only stated claims."""
    r = rendered_route(inp)
    ranked = ranked_claims(inp.claims)
    stated = set(inp.stated) if inp.stated is not None else None
    if r == "direct":
        sel = _selected(inp)
        if sel is None:
            return []
        extra = [c for c in ranked if stated is not None and c["text"] in stated and c is not sel]
        return [sel, *extra]
    if r == "conflict":
        kept = [c for c in ranked if stated is None or c["text"] in stated]
        return kept or ranked[:1]
    return []


def is_inconclusive(inp: GenerationInput) -> bool:
    """Whether a conflict-aware answer has no competing claim to state: the conflict route presents one
    claim and no other claim holds fused mass. The uncertainty that chose the route is then ignorance (weak
    evidence for one answer), not disagreement, and the answer must not say that the sources disagree."""
    if rendered_route(inp) != "conflict":
        return False
    return len(presented_claims(inp)) == 1 and len(ranked_claims(inp.claims)) == 1


def cited_chunk_ids(inp: GenerationInput) -> list[str]:
    """The supporting chunk ids of the presented claims, in order, without repeats."""
    out: list[str] = []
    for c in presented_claims(inp):
        for cid in c["chunk_ids"]:
            if cid not in out:
                out.append(cid)
    return out


def generation_input_from_record(record: Mapping[str, Any], chunks: Sequence[Chunk] = ()) -> GenerationInput:
    """The generator's input from an answer record (:func:`inference.answer.answer_record`) and its chunks.

    Raises:
        DataError: The record lacks a field the generator reads, or a field has the wrong type.
    """
    missing = [k for k in ("question", "route", "claims", "uncertainty") if k not in record]
    if missing:
        raise DataError(
            f"answer record lacks {', '.join(missing)}; build it with inference.answer.answer_record"
        )
    return GenerationInput(
        question=record["question"],
        route=record["route"],
        claims=[dict(c) for c in record["claims"]],
        uncertainty=record["uncertainty"],
        ignorance=record.get("ignorance", 0.0),
        conflict=record.get("conflict", 0.0),
        answer=record.get("answer"),
        chunks=list(chunks),
        stated=list(record["stated_claims"]) if record.get("stated_claims") is not None else None,
    )


def attach_generation(record: Mapping[str, Any], output: GenerationOutput) -> dict[str, Any]:
    """A copy of the answer record with the generator's ``response``, ``cited_chunk_ids``, a ``generation``
    block (generator, rendered route, fallback and its reason, raw LLM text, prompt version, passes) and
    ``timings["generate"]``."""
    out = dict(record)
    out["response"] = output.text
    out["cited_chunk_ids"] = list(output.cited_chunk_ids)
    out["generation"] = {
        "generator": output.generator,
        "route": output.route,
        "fallback": output.fallback,
        "fallback_reason": output.fallback_reason,
        "raw": output.raw,
        "prompt_version": output.prompt_version,
        "finish_reason": output.finish_reason,
        "batched_passes": output.batched_passes,
    }
    out["timings"] = {**dict(record.get("timings", {})), "generate": round(output.seconds, 6)}
    return out
