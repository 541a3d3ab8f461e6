"""Generation of the routed answer (paper §3.5; routing, Eq 15), chosen by name through
:data:`GENERATORS`: ``llm`` (an instruction LLM writes every route, template fallback) and ``template``
(deterministic, no model)."""

from __future__ import annotations

from inference.backends.base import Backend, BackendConfig
from inference.generation.base import (
    GENERATORS,
    GenerationInput,
    GenerationOutput,
    Generator,
    attach_generation,
    cited_chunk_ids,
    generation_input_from_record,
    is_inconclusive,
    presented_claims,
    ranked_claims,
    rendered_route,
    stream_generation,
)
from inference.generation.config import GeneratorConfig
from inference.generation.llm import LLMGenerator, check_output
from inference.generation.prompt import (
    GENERATION_PROMPT_VERSION,
    ROUTE_INSTRUCTIONS,
    SYSTEM_PREAMBLE,
    build_generation_prompt,
    echoes_prompt,
    evidence_summary,
)
from inference.generation.template import ABSTAIN_TEXT, TemplateGenerator, template_response

__all__ = [
    "ABSTAIN_TEXT",
    "GENERATION_PROMPT_VERSION",
    "GENERATORS",
    "ROUTE_INSTRUCTIONS",
    "SYSTEM_PREAMBLE",
    "GenerationInput",
    "GenerationOutput",
    "Generator",
    "GeneratorConfig",
    "LLMGenerator",
    "TemplateGenerator",
    "attach_generation",
    "build_generation_prompt",
    "echoes_prompt",
    "build_generator",
    "can_share_backend",
    "check_output",
    "cited_chunk_ids",
    "evidence_summary",
    "generation_input_from_record",
    "is_inconclusive",
    "presented_claims",
    "ranked_claims",
    "rendered_route",
    "stream_generation",
    "template_response",
]


def build_generator(cfg: GeneratorConfig, backend: Backend | None = None) -> Generator:
    """The generator named by ``cfg.name``.

    Args:
        cfg: The generator section of the run config.
        backend: An already-loaded backend to use instead of loading ``cfg.backend`` (the ``llm``
            generator); see :func:`can_share_backend`. The template generator ignores it.
    """
    return GENERATORS.get(cfg.name)(cfg, backend)


def can_share_backend(a: BackendConfig, b: BackendConfig) -> bool:
    """True when two backend sections load the same model the same way, so that one loaded backend can
    serve both (e.g. the prompt evaluator and the generator). Conservative: every field must be equal."""
    return a == b
