"""Typed configs from YAML and ``key=value`` overrides: one implementation for every config in the project.

Configs are dataclasses whose fields carry help text (``metadata["help"]``) and declare the values they allow
(``metadata["choices"]``, ``metadata["range"]``, ...); each ``__post_init__`` calls :func:`check_fields` (one
validator for every config, defined in :mod:`evidential.config` so that the core's own config uses it too)
and adds its cross-field rules, with messages naming the dotted field (``fusion.tau2``, ``loss.query_weight``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from evidential.config import check_fields, is_int
from evidential.errors import ConfigError

__all__ = [
    "apply_overrides",
    "build_dataclass",
    "check_fields",
    "is_device_spec",
    "is_int",
    "read_yaml_mapping",
    "resolve_config_path",
    "to_dict",
]

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"


def is_device_spec(x: object) -> bool:
    """True for a device setting ``'cpu'``, ``'auto'`` or ``'cuda[:n]'``."""
    return isinstance(x, str) and (x in ("cpu", "auto") or x.startswith("cuda"))


def build_dataclass(cls: type, data: Any, prefix: str = ""):
    """Build dataclass ``cls`` from plain data; nested dataclasses and lists of them are built recursively.

    Unknown fields fail naming their dotted path; each section's ``__post_init__`` checks its values.
    """
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
            kwargs[name] = build_dataclass(hint, value, f"{prefix}{name}.")
        elif typing.get_origin(hint) is list and dataclasses.is_dataclass(typing.get_args(hint)[0]):
            if not isinstance(value, list):
                raise ConfigError(f"{prefix}{name} must be a list of mappings; got {value!r}")
            item = typing.get_args(hint)[0]
            kwargs[name] = [build_dataclass(item, v, f"{prefix}{name}[{i}].") for i, v in enumerate(value)]
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
    except RecursionError:
        raise ConfigError(f"override {item[:80]!r}: value is nested too deeply") from None
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


def resolve_config_path(path: str | Path, config_dir: Path = CONFIG_DIR) -> Path:
    """A path, or a config name resolved to ``configs/<name>.yaml``."""
    p = Path(path)
    if p.exists():
        return p
    named = config_dir / f"{path}.yaml"
    if p.suffix == "" and named.exists():
        return named
    available = sorted(x.stem for x in config_dir.glob("*.yaml")) if config_dir.is_dir() else []
    raise ConfigError(
        f"config file {str(path)!r} not found; give a YAML path"
        + (f" or one of the named configs: {', '.join(available)}" if available else "")
    )


def read_yaml_mapping(path: str | Path) -> dict:
    """Read a YAML config file (a path or a name in ``configs/``) whose top level is a mapping."""
    p = resolve_config_path(path)
    try:
        loaded = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte {exc.start + 1})") from None
    except RecursionError:
        raise ConfigError(f"{p}: not a usable config (nested too deeply)") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of fields, got {type(loaded).__name__}")
    return loaded or {}
