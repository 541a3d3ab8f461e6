"""The deterministic template generator (paper §3.5 routes, no model): evaluation baseline and LLM fallback.

It renders the three routes of Eq 15 from the fused evidence alone: the direct answer states the selected
claim (Eq 27) with its supporting chunks, and the other stated claims when several clear the bar
(:func:`evidential.stated_mask`); the conflict-aware answer says that the sources disagree and lists the
stated claims, highest mass first, with their sources (when it states one claim and no other claim holds
mass, it says that the sources do not settle the question instead: there is nothing to disagree with); the
abstention declines and says what evidence would be needed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from inference.generation.base import (
    GENERATORS,
    GenerationInput,
    GenerationOutput,
    cited_chunk_ids,
    is_inconclusive,
    presented_claims,
    rendered_route,
)

__all__ = ["ABSTAIN_TEXT", "TemplateGenerator", "template_response"]

ABSTAIN_TEXT = (
    "I cannot answer reliably: the retrieved sources do not give enough consistent evidence. "
    "A source that states the answer explicitly would be needed."
)


def template_response(
    route_name: str,
    claims: Sequence[Mapping[str, Any]],
    answer: str | None,
    stated: Sequence[str] | None = None,
) -> str:
    """A deterministic, LLM-free rendering of the three routes (paper §3.5, Eq 15).

    Args:
        route_name: ``direct``, ``conflict`` or ``abstain``.
        claims: Dicts with ``text``, ``mass`` (fused singleton mass) and ``chunk_ids``.
        answer: The selected claim's text (Eq 27), or ``None``.
        stated: The claims the answer states (the record's ``stated_claims``); ``None``: the selected claim
            (direct) or every claim with positive mass (conflict).

    A direct route without a selected claim, or a conflict route without a claim of positive mass, has
    nothing to present and renders the abstention. A conflict route that states one claim names it as the
    best-supported answer: the sources disagree when other claims hold mass, and they do not settle the
    question when none does (:func:`~inference.generation.base.is_inconclusive`). A direct route that
    states several claims gives each with its sources (the question may name several entities). Ties in
    mass keep the claims' frame order.
    A claim no chunk supports (mass from alignment alone) is listed without a sources part.
    """
    inp = GenerationInput(
        "",
        route_name,
        [dict(c, id=c.get("id", ""), chunk_ids=list(c.get("chunk_ids", []))) for c in claims],
        answer=answer,
        stated=list(stated) if stated is not None else None,
    )
    shown = presented_claims(inp)
    r = rendered_route(inp)
    if r == "direct" and len(shown) == 1:
        return f"{answer} [sources: {', '.join(shown[0]['chunk_ids'])}]"
    parts = [
        c["text"] + (f" [sources: {', '.join(c['chunk_ids'])}]" if c["chunk_ids"] else "") for c in shown
    ]
    if r == "direct":
        return (
            "The sources support several answers, which may refer to different entities of that name: "
            + "; ".join(parts)
            + "."
        )
    if r == "conflict" and len(parts) == 1:
        lead = "The sources do not settle this" if is_inconclusive(inp) else "The sources disagree"
        return f"{lead}; the best-supported answer is {parts[0]}."
    if r == "conflict":
        return "The sources disagree; competing answers: " + "; ".join(parts) + "."
    return ABSTAIN_TEXT


class TemplateGenerator:
    """Deterministic generator over :func:`template_response`; makes no model call (``passes`` stays 0)."""

    name = "template"

    def __init__(self) -> None:
        self.passes = 0

    def render(self, inp: GenerationInput) -> GenerationOutput:
        """The template output of one input (``seconds`` left at 0)."""
        return GenerationOutput(
            text=template_response(inp.route, inp.claims, inp.answer, inp.stated),
            route=rendered_route(inp),
            cited_chunk_ids=cited_chunk_ids(inp),
            generator=self.name,
        )

    def generate_batch(self, inputs: Sequence[GenerationInput]) -> list[GenerationOutput]:
        """One templated output per input."""
        t0 = time.perf_counter()
        outs = [self.render(i) for i in inputs]
        seconds = time.perf_counter() - t0
        for o in outs:
            o.seconds = seconds
        return outs


@GENERATORS.register("template")
def template_generator(cfg, backend=None) -> TemplateGenerator:
    """Build the template generator (the config's backend is not used)."""
    return TemplateGenerator()
