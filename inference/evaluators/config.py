"""Configuration of the evaluators (the ``evaluator`` section of a run config)."""

from __future__ import annotations

from dataclasses import dataclass, field

from evidential.errors import ConfigError

from ..backends.base import BackendConfig, GenerationConfig

__all__ = ["EvaluatorConfig"]


@dataclass
class EvaluatorConfig:
    """Which evaluator turns (query, chunk) pairs into evidence, and with which model."""

    name: str = field(
        default="prompt",
        metadata={"help": "Evaluator: 'prompt' (instruction LLM + JSON contract); 'learned' once it ships."},
    )
    backend: BackendConfig = field(
        default_factory=BackendConfig, metadata={"help": "Model backend of the prompt evaluator."}
    )
    generation: GenerationConfig = field(
        default_factory=lambda: GenerationConfig(max_tokens=128),
        metadata={
            "help": "Decoding settings of the prompt evaluator (greedy; the JSON schema is added when constrained)."
        },
    )
    constrained: bool = field(
        default=True, metadata={"help": "Use JSON-schema-constrained decoding where the backend offers it."}
    )
    max_chunk_chars: int = field(
        default=4000, metadata={"help": "Chunks are cut to this many characters in the prompt."}
    )
    similarity: str = field(
        default="none",
        metadata={
            "help": "Paraphrase merging in claim alignment: 'none' (rules only) or 'minilm' (packaged all-MiniLM-L6-v2)."
        },
    )
    similarity_threshold: float = field(
        default=0.92, metadata={"help": "Cosine similarity above which paraphrases merge (conservative)."}
    )
    number_tolerance: float = field(
        default=0.0, metadata={"help": "Relative tolerance under which two numbers are the same claim."}
    )

    def __post_init__(self) -> None:
        from . import EVALUATORS

        if self.name not in EVALUATORS:
            raise ConfigError(
                f"evaluator.name must be one of {', '.join(EVALUATORS.names())}; got {self.name!r}"
            )
        if self.similarity not in ("none", "minilm"):
            raise ConfigError(f"evaluator.similarity must be 'none' or 'minilm'; got {self.similarity!r}")
        if not isinstance(self.similarity_threshold, (int, float)) or not 0 < self.similarity_threshold <= 1:
            raise ConfigError(
                f"evaluator.similarity_threshold must lie in (0, 1]; got {self.similarity_threshold!r}"
            )
        if not isinstance(self.number_tolerance, (int, float)) or not 0 <= self.number_tolerance < 1:
            raise ConfigError(f"evaluator.number_tolerance must lie in [0, 1); got {self.number_tolerance!r}")
        if (
            isinstance(self.max_chunk_chars, bool)
            or not isinstance(self.max_chunk_chars, int)
            or self.max_chunk_chars < 100
        ):
            raise ConfigError(
                f"evaluator.max_chunk_chars must be an integer >= 100; got {self.max_chunk_chars!r}"
            )
        if not isinstance(self.constrained, bool):
            raise ConfigError(f"evaluator.constrained must be true or false; got {self.constrained!r}")
