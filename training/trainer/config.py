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
from training.utils.configio import (
    apply_overrides,
    build_dataclass,
    check_fields,
    is_device_spec,
    read_yaml_mapping,
)

__all__ = [
    "MIXED_PRECISION",
    "SPAN_OCCURRENCES",
    "DataSourceConfig",
    "LossConfig",
    "TrainConfig",
    "load_train_config",
]

REPO_ROOT = Path(__file__).resolve().parents[2]

_NON_NEGATIVE = {"range": (0.0, None)}
#: Allowed values of ``LossConfig.span_occurrences``.
SPAN_OCCURRENCES = ("first", "all")
#: Allowed values of ``TrainConfig.mixed_precision``.
MIXED_PRECISION = ("no", "bf16", "fp16")
_POSITIVE = {"range": (0.0, None), "ends": "()"}


@dataclass
class DataSourceConfig:
    """One source of annotated chunks: a registered builder over a benchmark file, or an annotated JSONL."""

    name: str = field(
        default="annotated",
        metadata={
            "help": "'annotated' (an annotated-chunk JSONL, docs/data.md) or a builder: ramdocs, wikicontradict, conflictqa, musique."
        },
    )
    path: str = field(
        default="",
        metadata={"help": "File path (relative paths: from the working directory, then the repository)."},
    )
    limit: int | None = field(
        default=None,
        metadata={"help": "Read at most this many records (null: all).", "range": (1, None), "null": "all"},
    )
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
        if not isinstance(self.options, dict):
            raise ConfigError(f"data[].options must be a mapping; got {self.options!r}")
        check_fields(self, "data[]")

    def resolved_path(self) -> Path:
        p = Path(self.path)
        if p.is_absolute() or p.exists():
            return p
        return REPO_ROOT / p if (REPO_ROOT / p).exists() else p


@dataclass
class LossConfig:
    """Loss terms and weights; a weight of 0 switches a term off (ablations)."""

    edl_kind: str = field(
        default="mse",
        metadata={
            "help": "Chunk-level EDL data term: mse, log or digamma.",
            "choices": ("mse", "log", "digamma"),
            "must": "be mse, log or digamma",
        },
    )
    edl_weight: float = field(
        default=1.0, metadata={"help": "Weight of the chunk-level EDL loss.", **_NON_NEGATIVE}
    )
    kl_weight: float = field(
        default=1.0,
        metadata={"help": "Weight of the annealed KL regularizer on labelled chunks.", **_NON_NEGATIVE},
    )
    null_kl_weight: float = field(
        default=1.0,
        metadata={"help": "Weight of the KL term on chunks that support nothing.", **_NON_NEGATIVE},
    )
    annealing_epochs: float = field(
        default=2.0, metadata={"help": "Epochs until the KL coefficient reaches 1.", **_NON_NEGATIVE}
    )
    query_weight: float = field(
        default=0.5,
        metadata={
            "help": "Weight of the query-level loss through fusion (fused masses vs gold claim / Θ).",
            **_NON_NEGATIVE,
        },
    )
    span_weight: float = field(
        default=0.5, metadata={"help": "Weight of the span (claim-extraction) loss.", **_NON_NEGATIVE}
    )
    span_occurrences: str = field(
        default="first",
        metadata={
            "help": "Which occurrences of a chunk's answer the span loss targets: 'first' (cross-entropy of "
            "the first occurrence) or 'all' (marginal likelihood over every occurrence, Clark and Gardner "
            "2018: pointing at a later mention of the same answer is not penalised).",
            "choices": SPAN_OCCURRENCES,
        },
    )
    lam: float = field(
        default=0.6,
        metadata={
            "help": "λ of the fusion the query-level loss differentiates through.",
            "range": (0.0, 1.0),
        },
    )
    rule: str = field(
        default="lambda", metadata={"help": "Fusion rule of the query-level loss.", "choices": FUSION_RULES}
    )
    distill_weight: float = field(
        default=0.0,
        metadata={
            "help": "Weight of the soft-target loss toward a teacher's evidence on rows that carry "
            "teacher_evidence (evidential-rag distill); 0: off.",
            **_NON_NEGATIVE,
        },
    )
    distill_kind: str = field(
        default="log_mse",
        metadata={
            "help": "Distillation loss: log_mse (squared error of log(1+e)) or kl (KL(Dir(e_s+1) || Dir(e_t+1))).",
            "choices": ("log_mse", "kl"),
            "must": "be log_mse or kl",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self, "loss")
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
        default=0.2,
        metadata={"help": "Share of questions held out for validation.", "range": (0.0, 1.0), "ends": "()"},
    )
    split_seed: int = field(
        default=0, metadata={"help": "Seed of the deterministic split by question.", "range": (0, None)}
    )
    seed: int = field(
        default=0, metadata={"help": "Seed of initialisation, shuffling and dropout.", "range": (0, None)}
    )
    epochs: int = field(default=3, metadata={"help": "Maximum number of epochs.", "range": (1, None)})
    batch_queries: int = field(
        default=4,
        metadata={"help": "Queries per optimizer step (all their chunk×claim pairs).", "range": (1, None)},
    )
    max_chunks_per_query: int = field(
        default=6, metadata={"help": "Chunks kept per query (in file order).", "range": (1, None)}
    )
    span_chunks_per_query: int | None = field(
        default=None,
        metadata={
            "help": "Chunks of each query that train the span head per step (rotating through the query's "
            "chunks; null: all of them). Yes/no questions never train it: their claims are not extracted.",
            "range": (1, None),
            "null": "all",
        },
    )
    max_claims_per_query: int = field(
        default=6,
        metadata={"help": "Candidates kept per query (gold and labelled first).", "range": (1, None)},
    )
    learning_rate: float = field(
        default=5e-4, metadata={"help": "AdamW learning rate of the LoRA adapters.", **_POSITIVE}
    )
    head_learning_rate: float = field(
        default=1e-3, metadata={"help": "AdamW learning rate of the heads.", **_POSITIVE}
    )
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay.", **_NON_NEGATIVE})
    warmup_ratio: float = field(
        default=0.06,
        metadata={"help": "Share of steps with linear warm-up.", "range": (0.0, 1.0), "ends": "[)"},
    )
    grad_clip: float = field(default=1.0, metadata={"help": "Gradient-norm clip (0: off).", **_NON_NEGATIVE})
    early_stopping_patience: int = field(
        default=2,
        metadata={
            "help": "Stop after this many epochs without a better validation loss (0: off).",
            "range": (0, None),
        },
    )
    save_every_steps: int = field(
        default=50,
        metadata={
            "help": "Write the resumable checkpoint every N optimizer steps (and each epoch).",
            "range": (1, None),
        },
    )
    support_threshold: float = field(
        default=1.0,
        metadata={
            "help": "Evidence below which a chunk counts as supporting nothing (claim accuracy).",
            **_NON_NEGATIVE,
        },
    )
    max_validation_queries: int | None = field(
        default=None,
        metadata={
            "help": "Evaluate on at most this many validation queries per epoch (null: all).",
            "range": (1, None),
            "null": "all",
        },
    )
    device: str = field(
        default="auto",
        metadata={
            "help": "'auto' (CUDA when present), 'cpu' or 'cuda[:n]'. Under `accelerate launch` with several "
            "processes each process takes the device accelerate assigns it ('cpu': CPU processes over gloo).",
            "check": is_device_spec,
            "must": "be 'auto', 'cpu' or 'cuda[:n]'",
        },
    )
    gradient_accumulation_steps: int = field(
        default=1,
        metadata={
            "help": "Encoder passes each process splits its share of an optimizer step's batch_queries "
            "queries into (less memory per pass; the step's gradient is that of the whole batch either way).",
            "range": (1, None),
        },
    )
    mixed_precision: str = field(
        default="no",
        metadata={
            "help": "Precision of the encoder passes: 'no' (float32), 'bf16' (CPU or GPU) or 'fp16' (CUDA "
            "only, with loss scaling). Losses and fusion always run in float32/float64.",
            "choices": MIXED_PRECISION,
        },
    )
    trackers: list[str] = field(
        default_factory=list,
        metadata={
            "help": "accelerate trackers that receive the training and validation metrics besides log.jsonl, "
            "e.g. [tensorboard] (needs tensorboard or tensorboardX installed); [] (default): none. Any name "
            "of accelerate.tracking.LOGGER_TYPE_TO_CLASS: aim, clearml, comet_ml, dvclive, mlflow, "
            "swanlab, tensorboard, trackio, wandb.",
        },
    )
    tracking_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder of the trackers that write files (tensorboard: its event files); null: "
            "OUTPUT/tracking.",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.data:
            raise ConfigError("data must list at least one source (e.g. {name: ramdocs, path: ...})")
        from accelerate.tracking import LOGGER_TYPE_TO_CLASS

        if not isinstance(self.trackers, list) or not all(isinstance(t, str) for t in self.trackers):
            raise ConfigError(f"trackers must be a list of tracker names; got {self.trackers!r}")
        for name in self.trackers:
            if name not in LOGGER_TYPE_TO_CLASS:
                raise ConfigError(
                    f"trackers: unknown tracker {name!r}; choose from {', '.join(sorted(LOGGER_TYPE_TO_CLASS))}"
                )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_train_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read a training config (a path, or a name in ``configs/``) with ``key=value`` overrides."""
    return build_dataclass(TrainConfig, apply_overrides(read_yaml_mapping(path), list(overrides)), "")
