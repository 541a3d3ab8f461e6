"""Configuration of the evaluators (the ``evaluator`` section of a run config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evidential.errors import ConfigError
from inference.backends.base import BackendConfig, GenerationConfig

__all__ = ["EvaluatorConfig"]


@dataclass
class EvaluatorConfig:
    """Which evaluator turns (query, chunk) pairs into evidence, and with which model."""

    name: str = field(
        default="learned",
        metadata={
            "help": "Evaluator: 'prompt' (instruction LLM + JSON contract) or 'learned' (LoRA-tuned evidential head)."
        },
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

    checkpoint: str = field(
        default="checkpoints/learned-minilm",
        metadata={
            "help": "Learned evaluator checkpoint folder (relative paths: from the working directory, then the repository). Default: the shipped CPU checkpoint."
        },
    )
    support_threshold: float = field(
        default=1.0,
        metadata={"help": "Learned evaluator: evidence at which a chunk counts as supporting its top claim."},
    )
    device: str = field(
        default="cpu", metadata={"help": "Learned evaluator device: 'cpu', 'cuda[:n]' or 'auto'."}
    )

    def resolved_checkpoint(self) -> Path:
        """The checkpoint folder: as given, or relative to the repository when not found from here."""
        p = Path(self.checkpoint)
        if p.is_absolute() or p.exists():
            return p
        repo = Path(__file__).resolve().parents[2] / p
        return repo if repo.exists() else p

    def __post_init__(self) -> None:
        from inference.evaluators import EVALUATORS

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
        if not isinstance(self.checkpoint, str) or not self.checkpoint.strip():
            raise ConfigError(f"evaluator.checkpoint must be a folder path; got {self.checkpoint!r}")
        if (
            isinstance(self.support_threshold, bool)
            or not isinstance(self.support_threshold, (int, float))
            or self.support_threshold < 0
        ):
            raise ConfigError(
                f"evaluator.support_threshold must be a number >= 0; got {self.support_threshold!r}"
            )
        if not isinstance(self.device, str) or not (
            self.device in ("cpu", "auto") or self.device.startswith("cuda")
        ):
            raise ConfigError(f"evaluator.device must be 'cpu', 'cuda[:n]' or 'auto'; got {self.device!r}")
        if not isinstance(self.constrained, bool):
            raise ConfigError(f"evaluator.constrained must be true or false; got {self.constrained!r}")
