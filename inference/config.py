"""Run configuration: typed dataclasses loaded from YAML with ``--set key=value`` overrides.

One source of truth for YAML files and CLI flags: every field has help text (``metadata["help"]``), and a
bad value fails at load time with a :class:`evidential.ConfigError` naming the dotted field
(e.g. ``fusion.tau2``). Named configs (``paper``, ``cpu``) resolve to ``configs/<name>.yaml`` in the
repository; any other path works too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from evidential import FusionConfig
from evidential.errors import ConfigError
from inference.evaluators.config import EvaluatorConfig
from inference.generation.config import GeneratorConfig
from inference.rag.config import BaselinesConfig
from inference.retrieval.config import RetrievalConfig
from training.utils.configio import (
    CONFIG_DIR,
    apply_overrides,
    build_dataclass,
    read_yaml_mapping,
    to_dict,
)

__all__ = [
    "CONFIG_DIR",
    "EvidenceConfig",
    "ModelsConfig",
    "RunConfig",
    "load_config",
    "apply_overrides",
    "to_dict",
]


@dataclass
class ModelsConfig:
    """Models of the full pipeline, as hub ids or local paths (the same code path loads both)."""

    embedder: str = field(
        default="sentence-transformers/all-MiniLM-L6-v2",
        metadata={
            "help": "Dense retriever (sentence-transformers). CPU default: the packaged all-MiniLM-L6-v2; paper: BAAI/bge-large-en-v1.5."
        },
    )
    reranker: str | None = field(
        default=None,
        metadata={
            "help": "Cross-encoder reranker, or null for none (no reranker ships offline). Paper: BAAI/bge-reranker-v2-m3."
        },
    )
    evaluator: str = field(
        default="HuggingFaceTB/SmolLM2-135M-Instruct",
        metadata={
            "help": "Instruction LLM of the prompt-based evaluator. Paper: meta-llama/Meta-Llama-3-8B-Instruct."
        },
    )
    generator: str = field(
        default="HuggingFaceTB/SmolLM2-135M-Instruct",
        metadata={
            "help": "Instruction LLM that writes the routed answer. Paper: meta-llama/Meta-Llama-3-8B-Instruct."
        },
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name == "reranker":
                continue
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"models.{f.name} must be a non-empty model id or path; got {value!r}")


@dataclass
class EvidenceConfig:
    """Evidence built from dataset labels (the demo's oracle evaluator, and tests)."""

    strength: float = field(
        default=5.0,
        metadata={
            "help": "Evidence a labelled document gives the answer it states (the prompt evaluator's 0-10 scale)."
        },
    )

    def __post_init__(self) -> None:
        if (
            isinstance(self.strength, bool)
            or not isinstance(self.strength, (int, float))
            or not self.strength > 0
        ):
            raise ConfigError(f"evidence.strength must be a number > 0; got {self.strength!r}")
        self.strength = float(self.strength)


@dataclass
class RunConfig:
    """Top-level configuration of an EvidentialRAG run."""

    k: int = field(default=5, metadata={"help": "Number of retrieved (reranked) chunks per query (paper 5)."})
    seed: int = field(default=0, metadata={"help": "Random seed recorded with every run."})
    fusion: FusionConfig = field(default_factory=FusionConfig, metadata={"help": "Fusion and routing."})
    models: ModelsConfig = field(default_factory=ModelsConfig, metadata={"help": "Model ids or paths."})
    evaluator: EvaluatorConfig = field(
        default_factory=EvaluatorConfig, metadata={"help": "Evidence evaluator."}
    )
    evidence: EvidenceConfig = field(
        default_factory=EvidenceConfig, metadata={"help": "Label-derived evidence."}
    )
    generator: GeneratorConfig = field(
        default_factory=GeneratorConfig,
        metadata={"help": "Generator of the routed answer (paper §3.5): llm or template."},
    )
    retrieval: RetrievalConfig = field(
        default_factory=RetrievalConfig,
        metadata={"help": "Indexing, retrieval (dense / bm25 / hybrid) and reranking."},
    )
    baselines: BaselinesConfig = field(
        default_factory=BaselinesConfig,
        metadata={"help": "Settings of the Corrective RAG and Self-RAG baselines (evidential-rag evaluate)."},
    )
    calibration: str | None = field(
        default=None,
        metadata={
            "help": "Calibration file written by `evidential-rag calibrate` (evidence scale, λ, τ1/τ2, isotonic "
            "confidence map), or null for none. It must have been fitted for this evaluator and checkpoint "
            "(or prompt model); its λ/τ replace fusion.lam/tau1/tau2."
        },
    )

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"k must be an integer >= 1; got {self.k!r}")
        if self.calibration is not None and (
            not isinstance(self.calibration, str) or not self.calibration.strip()
        ):
            raise ConfigError(f"calibration must be a file path or null; got {self.calibration!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError(f"seed must be an integer; got {self.seed!r}")


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Load a :class:`RunConfig` from YAML (or the embedded defaults when ``path`` is None) plus overrides.

    Raises:
        ConfigError: Unreadable YAML, unknown fields or invalid values, naming the field.
    """
    data = read_yaml_mapping(path) if path is not None else {}
    return build_dataclass(RunConfig, apply_overrides(data, overrides), "")
