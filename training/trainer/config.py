"""Configuration of learned-evaluator training (``evidential-rag train --config FILE``).

One YAML file (e.g. ``configs/learned-minilm.yaml``) holds a :class:`TrainConfig`: the model architecture
(:class:`~training.learned.model.LearnedModelConfig`), the data sources, the loss terms (each switchable for
ablations) and the optimisation schedule. Every field has help text; a bad value fails at load with a
:class:`evidential.ConfigError` naming the dotted field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidential.errors import ConfigError
from evidential.fusion import FUSION_RULES
from training.data.benchmarks import BUILDERS
from training.learned.model import LearnedModelConfig
from training.utils.configio import apply_overrides, build_dataclass, read_yaml_mapping

__all__ = ["DataSourceConfig", "LossConfig", "TrainConfig", "load_train_config"]

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class DataSourceConfig:
    """One source of annotated chunks: a registered builder over a benchmark file, or an annotated JSONL."""

    name: str = field(
        default="annotated",
        metadata={
            "help": "'annotated' (an annotated-chunk JSONL, DESIGN.md §3) or a builder: ramdocs, wikicontradict, conflictqa, musique."
        },
    )
    path: str = field(
        default="",
        metadata={"help": "File path (relative paths: from the working directory, then the repository)."},
    )
    limit: int | None = field(default=None, metadata={"help": "Read at most this many records (null: all)."})
    options: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "Builder options, e.g. {labeling: credibility} for ramdocs, {max_negatives: 4} for musique."
        },
    )

    def __post_init__(self) -> None:
        if self.name != "annotated" and self.name not in BUILDERS:
            raise ConfigError(
                f"data[].name must be 'annotated' or one of {', '.join(BUILDERS.names())}; got {self.name!r}"
            )
        if not isinstance(self.path, str) or not self.path:
            raise ConfigError(f"data[].path must name a file (source {self.name!r})")
        if self.limit is not None and (
            isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1
        ):
            raise ConfigError(f"data[].limit must be null or an integer >= 1; got {self.limit!r}")
        if not isinstance(self.options, dict):
            raise ConfigError(f"data[].options must be a mapping; got {self.options!r}")

    def resolved_path(self) -> Path:
        p = Path(self.path)
        if p.is_absolute() or p.exists():
            return p
        return REPO_ROOT / p if (REPO_ROOT / p).exists() else p


@dataclass
class LossConfig:
    """Loss terms and weights; a weight of 0 switches a term off (ablations)."""

    edl_kind: str = field(default="mse", metadata={"help": "Chunk-level EDL data term: mse, log or digamma."})
    edl_weight: float = field(default=1.0, metadata={"help": "Weight of the chunk-level EDL loss."})
    kl_weight: float = field(
        default=1.0, metadata={"help": "Weight of the annealed KL regularizer on labelled chunks."}
    )
    null_kl_weight: float = field(
        default=1.0, metadata={"help": "Weight of the KL term on chunks that support nothing."}
    )
    annealing_epochs: float = field(
        default=2.0, metadata={"help": "Epochs until the KL coefficient reaches 1."}
    )
    query_weight: float = field(
        default=0.5,
        metadata={"help": "Weight of the query-level loss through fusion (fused masses vs gold claim / Θ)."},
    )
    span_weight: float = field(default=0.5, metadata={"help": "Weight of the span (claim-extraction) loss."})
    lam: float = field(
        default=0.6, metadata={"help": "λ of the fusion the query-level loss differentiates through."}
    )
    rule: str = field(default="lambda", metadata={"help": "Fusion rule of the query-level loss."})
    distill_weight: float = field(
        default=0.0,
        metadata={
            "help": "Weight of the soft-target loss toward a teacher's evidence on rows that carry "
            "teacher_evidence (evidential-rag distill); 0: off."
        },
    )
    distill_kind: str = field(
        default="log_mse",
        metadata={
            "help": "Distillation loss: log_mse (squared error of log(1+e)) or kl (KL(Dir(e_s+1) || Dir(e_t+1)))."
        },
    )

    def __post_init__(self) -> None:
        if self.edl_kind not in ("mse", "log", "digamma"):
            raise ConfigError(f"loss.edl_kind must be mse, log or digamma; got {self.edl_kind!r}")
        if self.distill_kind not in ("log_mse", "kl"):
            raise ConfigError(f"loss.distill_kind must be log_mse or kl; got {self.distill_kind!r}")
        for name in (
            "edl_weight",
            "kl_weight",
            "null_kl_weight",
            "annealing_epochs",
            "query_weight",
            "span_weight",
            "distill_weight",
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ConfigError(f"loss.{name} must be a number >= 0; got {v!r}")
        if not isinstance(self.lam, (int, float)) or not 0 <= self.lam <= 1:
            raise ConfigError(f"loss.lam must lie in [0, 1]; got {self.lam!r}")
        if self.rule not in FUSION_RULES:
            raise ConfigError(
                f"loss.rule must be one of {', '.join(FUSION_RULES.names())}; got {self.rule!r}"
            )
        if self.edl_weight == 0 and self.query_weight == 0 and self.distill_weight == 0:
            raise ConfigError(
                "loss.edl_weight, loss.query_weight and loss.distill_weight are all 0: nothing would train "
                "the evidence"
            )


@dataclass
class TrainConfig:
    """Everything ``evidential-rag train`` needs."""

    model: LearnedModelConfig = field(default_factory=LearnedModelConfig, metadata={"help": "Architecture."})
    data: list[DataSourceConfig] = field(
        default_factory=list, metadata={"help": "Training data sources (merged, then split by question)."}
    )
    loss: LossConfig = field(default_factory=LossConfig, metadata={"help": "Loss terms and weights."})
    validation_fraction: float = field(
        default=0.2, metadata={"help": "Share of questions held out for validation."}
    )
    split_seed: int = field(default=0, metadata={"help": "Seed of the deterministic split by question."})
    seed: int = field(default=0, metadata={"help": "Seed of initialisation, shuffling and dropout."})
    epochs: int = field(default=3, metadata={"help": "Maximum number of epochs."})
    batch_queries: int = field(
        default=4, metadata={"help": "Queries per optimizer step (all their chunk×claim pairs)."}
    )
    max_chunks_per_query: int = field(default=6, metadata={"help": "Chunks kept per query (in file order)."})
    max_claims_per_query: int = field(
        default=6, metadata={"help": "Candidates kept per query (gold and labelled first)."}
    )
    learning_rate: float = field(default=5e-4, metadata={"help": "AdamW learning rate of the LoRA adapters."})
    head_learning_rate: float = field(default=1e-3, metadata={"help": "AdamW learning rate of the heads."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay."})
    warmup_ratio: float = field(default=0.06, metadata={"help": "Share of steps with linear warm-up."})
    grad_clip: float = field(default=1.0, metadata={"help": "Gradient-norm clip (0: off)."})
    early_stopping_patience: int = field(
        default=2, metadata={"help": "Stop after this many epochs without a better validation loss (0: off)."}
    )
    save_every_steps: int = field(
        default=50,
        metadata={"help": "Write the resumable checkpoint every N optimizer steps (and each epoch)."},
    )
    support_threshold: float = field(
        default=1.0,
        metadata={"help": "Evidence below which a chunk counts as supporting nothing (claim accuracy)."},
    )
    max_validation_queries: int | None = field(
        default=None,
        metadata={"help": "Evaluate on at most this many validation queries per epoch (null: all)."},
    )
    device: str = field(default="auto", metadata={"help": "'auto' (CUDA when present), 'cpu' or 'cuda[:n]'."})

    def __post_init__(self) -> None:
        def integer(name: str, low: int) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ConfigError(f"{name} must be an integer >= {low}; got {v!r}")

        for name, low in (
            ("epochs", 1),
            ("batch_queries", 1),
            ("max_chunks_per_query", 1),
            ("max_claims_per_query", 1),
            ("early_stopping_patience", 0),
            ("save_every_steps", 1),
            ("seed", 0),
            ("split_seed", 0),
        ):
            integer(name, low)
        if not isinstance(self.validation_fraction, (int, float)) or not 0 < self.validation_fraction < 1:
            raise ConfigError(f"validation_fraction must lie in (0, 1); got {self.validation_fraction!r}")
        for name in ("learning_rate", "head_learning_rate"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not v > 0:
                raise ConfigError(f"{name} must be > 0; got {v!r}")
        for name in ("weight_decay", "grad_clip", "support_threshold"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or v < 0:
                raise ConfigError(f"{name} must be >= 0; got {v!r}")
        if not isinstance(self.warmup_ratio, (int, float)) or not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"warmup_ratio must lie in [0, 1); got {self.warmup_ratio!r}")
        if self.max_validation_queries is not None:
            integer("max_validation_queries", 1)
        if not isinstance(self.device, str) or not (
            self.device in ("auto", "cpu") or self.device.startswith("cuda")
        ):
            raise ConfigError(f"device must be 'auto', 'cpu' or 'cuda[:n]'; got {self.device!r}")
        if not self.data:
            raise ConfigError("data must list at least one source (e.g. {name: ramdocs, path: ...})")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_train_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read a training config (a path, or a name in ``configs/``) with ``key=value`` overrides."""
    return build_dataclass(TrainConfig, apply_overrides(read_yaml_mapping(path), list(overrides)), "")
