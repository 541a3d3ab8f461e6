"""Run configuration: typed dataclasses loaded from YAML with ``--set key=value`` overrides.

One source of truth for YAML files and CLI flags: every field has help text (``metadata["help"]``), and a
bad value fails at load time with a :class:`evidential.ConfigError` naming the dotted field
(e.g. ``fusion.tau2``). Named configs (``paper``, ``cpu``) resolve to ``configs/<name>.yaml`` in the
repository; any other path works too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evidential import FusionConfig
from evidential.errors import ConfigError
from inference.evaluators.config import EvaluatorConfig
from inference.generation.config import GeneratorConfig
from inference.rag.config import BaselinesConfig
from inference.retrieval.config import DEFAULT_EMBEDDER, RetrievalConfig
from training.utils.configio import (
    CONFIG_DIR,
    apply_overrides,
    build_dataclass,
    check_fields,
    read_yaml_mapping,
    resolve_config_path,
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


_MODEL_ID = "be a non-empty model id or path"


@dataclass
class ModelsConfig:
    """Models of the full pipeline, as hub ids or local paths (the same code path loads both)."""

    embedder: str = field(
        default=DEFAULT_EMBEDDER,
        metadata={
            "help": "Dense retriever (sentence-transformers). CPU default: the packaged all-MiniLM-L6-v2; paper: BAAI/bge-large-en-v1.5.",
            "must": _MODEL_ID,
        },
    )
    reranker: str | None = field(
        default=None,
        metadata={
            "help": "Cross-encoder reranker, or null for none (no reranker ships offline). Paper: BAAI/bge-reranker-v2-m3.",
            "must": _MODEL_ID + " or null (none)",
        },
    )
    evaluator: str = field(
        default="HuggingFaceTB/SmolLM2-135M-Instruct",
        metadata={
            "help": "Instruction LLM of the prompt-based evaluator. Paper: meta-llama/Meta-Llama-3-8B-Instruct.",
            "must": _MODEL_ID,
        },
    )
    generator: str = field(
        default="HuggingFaceTB/SmolLM2-135M-Instruct",
        metadata={
            "help": "Instruction LLM that writes the routed answer. Paper: meta-llama/Meta-Llama-3-8B-Instruct.",
            "must": _MODEL_ID,
        },
    )

    def __post_init__(self) -> None:
        check_fields(self, "models")


@dataclass
class EvidenceConfig:
    """Evidence built from dataset labels (the demo's oracle evaluator, and tests)."""

    strength: float = field(
        default=5.0,
        metadata={
            "help": "Evidence a labelled document gives the answer it states (the prompt evaluator's 0-10 scale).",
            "range": (0.0, None),
            "ends": "()",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self, "evidence")


@dataclass
class RunConfig:
    """Top-level configuration of an EvidentialRAG run."""

    k: int = field(
        default=10,
        metadata={
            "help": "Number of retrieved (reranked) chunks per query (CPU default 10: every document of a "
            "RAMDocs question, and more sources for fusion to weigh against a planted one; paper 5).",
            "range": (1, None),
        },
    )
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
        default="auto",
        metadata={
            "help": "Calibration file written by `evidential-rag calibrate` (evidence scale, λ, τ1/τ2, stated-set "
            "bar, isotonic confidence map); 'auto' (default): the learned checkpoint's own calibration.json when "
            "it fits the run (none for the prompt evaluator or another fusion rule); null: none. A named file "
            "must have been fitted for this evaluator and checkpoint (or prompt model); its λ/τ/bar replace "
            "fusion.lam/tau1/tau2/state_ratio/state_ratio_yes_no.",
            "must": "be a file path, 'auto' or null",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Load a :class:`RunConfig` from YAML (or the embedded defaults when ``path`` is None) plus overrides.

    Raises:
        ConfigError: Unreadable YAML, unknown fields or invalid values, naming the field (and the file,
            for a value that comes from it).
    """
    if path is None:
        return build_dataclass(RunConfig, apply_overrides({}, overrides), "")
    data = read_yaml_mapping(path)
    try:
        return build_dataclass(RunConfig, apply_overrides(data, overrides), "")
    except ConfigError as exc:
        if overrides:
            try:
                build_dataclass(RunConfig, data, "")
            except ConfigError:
                pass
            else:
                raise  # the file is fine: the overrides are at fault
        raise ConfigError(f"{resolve_config_path(path)}: {exc}") from None
