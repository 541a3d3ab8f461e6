"""Run configuration: typed dataclasses loaded from YAML with ``--set key=value`` overrides.

One source of truth for YAML files and CLI flags: every field has help text (``metadata["help"]``), and a
bad value fails at load time with a :class:`evidential.ConfigError` naming the dotted field
(e.g. ``fusion.tau2``). Named configs (``paper``, ``cpu``) resolve to ``configs/<name>.yaml`` in the
repository; any other path works too.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from evidential import FusionConfig
from evidential.errors import ConfigError

from .evaluators.config import EvaluatorConfig

__all__ = [
    "CONFIG_DIR",
    "EvidenceConfig",
    "ModelsConfig",
    "RunConfig",
    "load_config",
    "apply_overrides",
    "to_dict",
]

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


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

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"k must be an integer >= 1; got {self.k!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError(f"seed must be an integer; got {self.seed!r}")


def _build(cls: type, data: Any, prefix: str):
    if data is None:
        data = {}
    if not isinstance(data, dict):
        where = prefix.rstrip(".") or "the config"
        raise ConfigError(f"{where} must be a mapping of fields; got {type(data).__name__} {data!r}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(
            f"unknown config field '{prefix}{unknown[0]}'; known fields of {prefix.rstrip('.') or 'the config'}: "
            + ", ".join(known)
        )
    kwargs = {}
    for name, value in data.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = _build(hint, value, f"{prefix}{name}.")
        else:
            kwargs[name] = _coerce(value, hint, f"{prefix}{name}")
    # each section's __post_init__ names its fields with their dotted path (fusion.lam, models.reranker, ...)
    return cls(**kwargs)


def _coerce(value: Any, hint: Any, name: str) -> Any:
    """Accept ints for float fields; everything else is checked by the dataclass itself."""
    args = (
        typing.get_args(hint)
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
        else (hint,)
    )
    if float in args and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def to_dict(cfg: Any) -> dict:
    """The config as plain data (for YAML/JSON and run records)."""
    return dataclasses.asdict(cfg)


def _parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like key=value, e.g. fusion.lam=0.5")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {item!r} has an empty key; use e.g. fusion.tau1=0.3")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {item!r}: value is not valid YAML ({exc.__class__.__name__})") from None
    return key.split("."), value


def apply_overrides(data: dict, overrides: list[str] | tuple[str, ...]) -> dict:
    """Apply ``a.b=value`` overrides (values parsed as YAML scalars) to a nested dict, returning a copy."""
    out = _deepcopy(data)
    for item in overrides:
        path, value = _parse_override(item)
        node = out
        for part in path[:-1]:
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(f"override {item!r}: {part!r} is not a section")
            node = nxt
        node[path[-1]] = value
    return out


def _deepcopy(d: Any) -> Any:
    return {k: _deepcopy(v) for k, v in d.items()} if isinstance(d, dict) else d


def resolve_config_path(path: str | Path) -> Path:
    """A path, or a config name resolved to ``configs/<name>.yaml``."""
    p = Path(path)
    if p.exists():
        return p
    named = CONFIG_DIR / f"{path}.yaml"
    if p.suffix == "" and named.exists():
        return named
    available = sorted(x.stem for x in CONFIG_DIR.glob("*.yaml")) if CONFIG_DIR.is_dir() else []
    raise ConfigError(
        f"config file {str(path)!r} not found; give a YAML path"
        + (f" or one of the named configs: {', '.join(available)}" if available else "")
    )


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Load a :class:`RunConfig` from YAML (or the embedded defaults when ``path`` is None) plus overrides.

    Raises:
        ConfigError: Unreadable YAML, unknown fields or invalid values, naming the field.
    """
    data: dict = {}
    if path is not None:
        p = resolve_config_path(path)
        try:
            loaded = yaml.safe_load(p.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{p}: not valid YAML: {exc}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{p}: the top level must be a mapping of fields, got {type(loaded).__name__}")
        data = loaded or {}
    data = apply_overrides(data, overrides)
    return _build(RunConfig, data, "")
