"""Configuration of the generator (the ``generator`` section of a run config; paper §3.5)."""

from __future__ import annotations

from dataclasses import dataclass, field

from evidential.errors import ConfigError
from inference.backends.base import BackendConfig, GenerationConfig
from inference.generation.base import GENERATORS
from inference.generation.prompt import CHUNK_CONTEXTS
from training.utils.configio import check_fields

__all__ = ["GeneratorConfig"]


@dataclass
class GeneratorConfig:
    """Which generator writes the routed answer (paper §3.5), and with which model."""

    name: str = field(
        default="llm",
        metadata={
            "help": "Generator: 'llm' (instruction LLM writes every route, template fallback) or 'template' "
            "(deterministic, no model).",
            "choices": GENERATORS,
        },
    )
    backend: BackendConfig = field(
        default_factory=BackendConfig,
        metadata={
            "help": "Model backend of the llm generator (unused by 'template'). When it equals the evaluator's "
            "backend, the pipeline loads the model once and shares it."
        },
    )
    generation: GenerationConfig = field(
        default_factory=lambda: GenerationConfig(max_tokens=128),
        metadata={"help": "Decoding settings of the llm generator (greedy; free text, no JSON schema)."},
    )
    max_chunk_chars: int = field(
        default=1000,
        metadata={
            "help": "Each chunk's text is cut to this many characters in the generator prompt.",
            "range": (100, None),
        },
    )
    chunk_context: str = field(
        default="cited",
        metadata={
            "help": "Which chunks the llm generator's prompt quotes: 'cited' — only the chunks that support the claims the route presents (none on an abstention), so a planted or off-topic chunk the evidence left out cannot leak into the answer and the prompt is shorter; 'all' — every retrieved chunk.",
            "choices": CHUNK_CONTEXTS,
        },
    )
    fallback_to_template: bool = field(
        default=True,
        metadata={
            "help": "Replace an LLM answer that fails the post-check (empty, or missing the claims its route "
            "presents) by the template's; the raw LLM text stays in the record."
        },
    )

    def __post_init__(self) -> None:
        check_fields(self, "generator")
        if not isinstance(self.backend, BackendConfig):
            raise ConfigError(
                f"generator.backend must be a backend section; got {type(self.backend).__name__}"
            )
        if not isinstance(self.generation, GenerationConfig):
            raise ConfigError(
                f"generator.generation must be a generation section; got {type(self.generation).__name__}"
            )
        if self.generation.json_schema is not None:
            raise ConfigError("generator.generation.json_schema must be null: the generator writes free text")
