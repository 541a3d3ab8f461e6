"""The LLM generator (paper §3.5): an instruction LLM writes the routed answer of every query of a batch in
ONE batched backend call, then a post-check falls back to the template where the text is unusable."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace

from inference.alignment import normalize_text
from inference.backends.base import (
    Backend,
    BackendError,
    Generation,
    GenerationConfig,
    StreamingBackend,
    load_backend,
)
from inference.generation.base import (
    GENERATORS,
    GenerationInput,
    GenerationOutput,
    presented_claims,
    ranked_claims,
    rendered_route,
)
from inference.generation.prompt import GENERATION_PROMPT_VERSION, build_generation_prompt, echoes_prompt
from inference.generation.template import TemplateGenerator

__all__ = ["MAX_REPETITION", "LLMGenerator", "check_output", "repetition_ratio"]

#: Above this share of repeated word trigrams an answer counts as degenerate (a looping small model).
MAX_REPETITION = 0.5


def _mentions(text_norm: str, claim: str) -> bool:
    """Whether the normalized text contains the normalized claim as whole words."""
    needle = normalize_text(claim)
    return bool(needle) and f" {needle} " in f" {text_norm} "


def repetition_ratio(text: str, n: int = 3) -> float:
    """Share of repeated word ``n``-grams in ``text`` (0: none repeats; near 1: one phrase over and over)."""
    words = text.lower().split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return 1 - len(set(grams)) / len(grams) if grams else 0.0


def check_output(inp: GenerationInput, text: str) -> str | None:
    """The post-check of an LLM answer; returns why it is unusable, or ``None`` when it passes.

    Rules (by the rendered route, Eq 15): the text is non-empty, does not echo the ``<chunk>`` delimiters
    or the prompt (:func:`~inference.generation.prompt.echoes_prompt`: its section headers, an evidence
    summary line, or a run of the instructions' words) and is not degenerate (of 12 or more words, at most
    half the word trigrams repeat). A direct answer states every presented claim (the selected one, Eq 27,
    and the other stated claims); a conflict-aware answer names at least two of the presented competing
    claims (all of them when fewer); neither names a supported claim it does not present (a claim below
    the stated-set bar, e.g. a planted one). Claims
    match SQuAD-normalized, as whole words.
    An abstention only has to pass the general rules.
    """
    if not text.strip():
        return "empty output"
    if "<chunk>" in text or "</chunk>" in text:
        return "output echoes the <chunk> delimiters"
    echo = echoes_prompt(text)
    if echo is not None:
        return f"output echoes the prompt ({echo!r})"
    if len(text.split()) >= 12 and repetition_ratio(text) > MAX_REPETITION:
        return f"degenerate repetition ({repetition_ratio(text):.0%} of the word trigrams repeat)"
    r = rendered_route(inp)
    claims = presented_claims(inp)
    norm = normalize_text(text)
    shown = [c["text"] for c in claims]
    if r == "direct":
        missing = [t for t in shown if not _mentions(norm, t)]
        if missing:
            which = "selected" if missing[0] == shown[0] else "stated"
            return f"direct answer does not state the {which} claim {missing[0]!r}"
    if r == "conflict":
        need = min(2, len(claims))
        named = sum(_mentions(norm, t) for t in shown)
        if named < need:
            return f"conflict-aware answer names {named} of the {len(claims)} competing claims; needs {need}"
    if r in ("direct", "conflict"):
        rest = f" {norm} "
        for t in sorted(shown, key=len, reverse=True):
            rest = rest.replace(f" {normalize_text(t)} ", " ")
        named = [
            c["text"]
            for c in ranked_claims(inp.claims)
            if c["text"] not in shown and _mentions(rest, c["text"])
        ]
        if named and r == "direct":
            return f"direct answer also names competing claims {named!r}"
        if named:
            return f"conflict-aware answer names claims below the stated-set bar {named!r}"
    return None


class LLMGenerator:
    """Generator over any :class:`~inference.backends.base.Backend` (paper §3.5).

    The LLM writes all three routes from the prompt of
    :func:`~inference.generation.prompt.build_generation_prompt`; the whole batch is ONE backend call.
    Each text then goes through :func:`check_output`; a failing text is replaced by the template's
    (``fallback=True`` with the reason; ``raw`` keeps the LLM text) unless ``fallback_to_template`` is off.
    Cited chunk ids are those of the claims the route presents, not parsed from the text.

    Args:
        backend: The model backend (may be shared with the prompt evaluator).
        generation: Decoding settings (greedy, 128 new tokens by default); free text, never a JSON schema.
        max_chunk_chars: Each chunk's text is cut to this many characters in the prompt.
        chunk_context: Which chunks the prompt quotes (:data:`~inference.generation.prompt.CHUNK_CONTEXTS`).
        fallback_to_template: Replace texts that fail the post-check by the template's.

    Counters (over the generator's lifetime): ``passes`` (batched model calls), ``generated`` (outputs)
    and ``fallbacks`` (outputs replaced by the template).
    """

    name = "llm"

    def __init__(
        self,
        backend: Backend,
        generation: GenerationConfig | None = None,
        *,
        max_chunk_chars: int = 1000,
        fallback_to_template: bool = True,
        chunk_context: str = "cited",
    ) -> None:
        self.backend = backend
        self.generation = replace(generation or GenerationConfig(max_tokens=128), json_schema=None)
        self.max_chunk_chars = max_chunk_chars
        self.chunk_context = chunk_context
        self.fallback_to_template = fallback_to_template
        self.template = TemplateGenerator()
        self.passes = 0
        self.generated = 0
        self.fallbacks = 0

    def generate_batch(self, inputs: Sequence[GenerationInput]) -> list[GenerationOutput]:
        """The answers of every input from ONE batched backend call."""
        if not inputs:
            return []
        prompts = [build_generation_prompt(i, self.max_chunk_chars, self.chunk_context) for i in inputs]
        t0 = time.perf_counter()
        gens = self.backend.generate(prompts, self.generation)
        seconds = time.perf_counter() - t0
        self.passes += 1
        if len(gens) != len(prompts):
            raise BackendError(
                f"backend {getattr(self.backend, 'name', '?')!r} returned {len(gens)} generations for "
                f"{len(prompts)} prompts"
            )
        outs = [self._output(inp, g, seconds) for inp, g in zip(inputs, gens)]
        self.generated += len(outs)
        return outs

    def _output(self, inp: GenerationInput, g: Generation, seconds: float) -> GenerationOutput:
        """The output of one generated text: post-checked, replaced by the template's when it fails."""
        fallback_out = self.template.render(inp)
        text = g.text.strip()
        reason = check_output(inp, text)
        use_template = reason is not None and self.fallback_to_template
        self.fallbacks += use_template
        return GenerationOutput(
            text=fallback_out.text if use_template else text,
            route=fallback_out.route,
            cited_chunk_ids=fallback_out.cited_chunk_ids,
            generator=self.name,
            batched_passes=1,
            seconds=seconds,
            fallback=use_template,
            fallback_reason=reason,
            raw=g.text,
            prompt_version=GENERATION_PROMPT_VERSION,
            finish_reason=g.finish_reason,
        )

    def stream(
        self, inp: GenerationInput, cancel: threading.Event | None = None
    ) -> Iterator[str | GenerationOutput]:
        """Write one answer and yield its text in pieces as the backend decodes it, then the finished
        :class:`GenerationOutput` (post-checked like :meth:`generate_batch`'s; one pass).

        The pieces join to the stripped LLM text — leading whitespace is dropped and trailing whitespace
        held back until more text follows — so for a greedy request they equal ``generate_batch([inp])``'s
        ``raw.strip()``, which is its ``text`` unless the post-check fell back to the template. A backend
        without streaming (:class:`~inference.backends.base.StreamingBackend`) answers in one piece.
        """
        if not isinstance(self.backend, StreamingBackend):
            out = self.generate_batch([inp])[0]
            if out.raw and out.raw.strip():
                yield out.raw.strip()
            yield out
            return
        prompt = build_generation_prompt(inp, self.max_chunk_chars, self.chunk_context)
        t0 = time.perf_counter()
        held, started, final = "", False, None
        for item in self.backend.stream(prompt, self.generation, cancel):
            if isinstance(item, Generation):
                final = item
                continue
            if not started:
                item = item.lstrip()
                started = bool(item)
            text = held + item
            body = text.rstrip()
            held = text[len(body) :]
            if body:
                yield body
        if final is None:
            raise BackendError(f"backend {self.backend.name!r} ended its stream without a generation")
        self.passes += 1
        self.generated += 1
        yield self._output(inp, final, time.perf_counter() - t0)


@GENERATORS.register("llm")
def llm_generator(cfg, backend: Backend | None = None) -> LLMGenerator:
    """Build the LLM generator from a ``GeneratorConfig``; loads ``cfg.backend`` unless a loaded backend is
    passed (e.g. the prompt evaluator's, when both name the same model)."""
    return LLMGenerator(
        backend if backend is not None else load_backend(cfg.backend),
        cfg.generation,
        max_chunk_chars=cfg.max_chunk_chars,
        fallback_to_template=cfg.fallback_to_template,
        chunk_context=cfg.chunk_context,
    )
