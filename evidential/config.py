"""Typed, validated configuration of the evidential core (stdlib dataclasses, peft ``LoraConfig`` style).

Every field carries its help text in ``metadata["help"]`` and declares the values it allows next to it
(``metadata["choices"]``, ``metadata["range"]``, ...); :func:`check_fields` validates those declarations for
every config of the project, from its ``__post_init__``, with messages naming the dotted field
(``fusion.tau2``). YAML loading and ``--set key=value`` overrides live in :mod:`training.utils.configio`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import Field, dataclass, field, fields
from typing import Any

from evidential.errors import ConfigError
from evidential.fusion import fusion_rule_names
from evidential.routing import ROUTING_POLICIES

__all__ = ["FusionConfig", "check_fields", "is_int"]

_KINDS = {"int": int, "float": float, "bool": bool, "str": str}


def is_int(x: object) -> bool:
    """True for an ``int`` that is not a ``bool``."""
    return isinstance(x, int) and not isinstance(x, bool)


def _kind(f: Field) -> tuple[type | None, bool]:
    """The scalar kind (int, float, bool, str, or None for anything else) of a field and whether None is allowed."""
    declared = f.metadata.get("type")
    annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    parts = {p.strip() for p in annotation.split("|")}
    nullable = "None" in parts
    if declared is not None:
        return declared, nullable
    rest = parts - {"None"}
    return (_KINDS.get(rest.pop()) if len(rest) == 1 else None), nullable


def _bound(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _choice_names(choices: Any) -> Iterable[Any]:
    """Allowed values from a tuple, a :class:`~evidential.registry.Registry` or a zero-argument callable."""
    if callable(choices):
        choices = choices()
    return choices.names() if hasattr(choices, "names") else choices


def _must(meta: Any, kind: type | None, nullable: bool) -> str:
    """What the field must be, as a message phrase: ``be an integer >= 1``, ``lie in [0, 1)``, ..."""
    if "must" in meta:
        return meta["must"]
    low, high = meta.get("range", (None, None))
    ends = meta.get("ends", "[]")
    if "choices" in meta:
        phrase = "be one of " + ", ".join(map(str, _choice_names(meta["choices"])))
    elif kind is bool:
        phrase = "be true or false"
    elif kind is int:
        phrase = "be an integer"
        if low is not None and high is not None:
            phrase += f" from {low} to {high}"
        elif low is not None:
            phrase += f" >= {low}"
        elif high is not None:
            phrase += f" <= {high}"
    elif kind is float:
        if low is not None and high is not None:
            phrase = f"lie in {ends[0]}{_bound(low)}, {_bound(high)}{ends[1]}"
        elif low is not None:
            phrase = f"be a number {'>=' if ends[0] == '[' else '>'} {_bound(low)}"
        elif high is not None:
            phrase = f"be a number {'<=' if ends[1] == ']' else '<'} {_bound(high)}"
        else:
            phrase = "be a number"
    elif kind is str:
        phrase = "be a string" if meta.get("allow_empty") else "be a non-empty string"
    else:
        phrase = "be valid"
    if nullable:
        phrase += " or null" + (f" ({meta['null']})" if "null" in meta else "")
    if "note" in meta:
        phrase += f" ({meta['note']})"
    return phrase


def _allowed(value: Any, meta: Any, kind: type | None) -> bool:
    if kind is bool and not isinstance(value, bool):
        return False
    if kind is int and not is_int(value):
        return False
    if kind is float and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
    ):
        return False
    if kind is str and (not isinstance(value, str) or not (meta.get("allow_empty") or value.strip())):
        return False
    if "choices" in meta:
        try:
            if value not in _choice_names(meta["choices"]):
                return False
        except TypeError:  # an unhashable value looked up in a registry
            return False
    if "range" in meta:
        low, high = meta["range"]
        ends = meta.get("ends", "[]")
        if low is not None and not (value >= low if ends[0] == "[" else value > low):
            return False
        if high is not None and not (value <= high if ends[1] == "]" else value < high):
            return False
    check: Callable[[Any], bool] | None = meta.get("check")
    return check is None or bool(check(value))


def check_fields(cfg: Any, section: str = "") -> None:
    """Validate every field of the dataclass ``cfg`` against the constraints declared in its metadata.

    The kind comes from the annotation (``int``, ``float``, ``bool``, ``str``, each optionally ``| None``) or
    ``metadata["type"]``; ``int`` excludes ``bool``, ``float`` accepts finite ints and floats and stores them
    as ``float``, ``str`` must be non-empty unless ``metadata["allow_empty"]``. Declarations in ``metadata``:

    * ``choices``: allowed values (a tuple, a :class:`~evidential.registry.Registry`, or a zero-argument
      callable returning either; resolved at validation time);
    * ``range``: ``(low, high)``, either end ``None`` for unbounded, with ``ends`` (default ``"[]"``) saying
      which ends are closed, e.g. ``"[)"``;
    * ``check``: a predicate for anything else;
    * ``must``: the phrase of the error message (``"be 'cpu', 'cuda[:n]' or 'auto'"``) when the derived one
      (``be an integer >= 1``, ``lie in [0, 1)``, ``be one of a, b``) says less; ``null``: what null means
      (``"= k"``); ``note``: a remark appended in parentheses.

    Cross-field rules (``tau1 < tau2``) stay explicit checks in the config's ``__post_init__``.

    Args:
        cfg: A dataclass instance.
        section: The dotted section of ``cfg`` in the run config (``"fusion"``, ``"baselines.corrective"``;
            ``""`` for the top level), prefixed to field names in messages.

    Raises:
        ConfigError: ``<section>.<field> must <phrase>; got <value>`` for the first field that fails.
    """
    prefix = f"{section}." if section else ""
    for f in fields(cfg):
        meta = f.metadata
        kind, nullable = _kind(f)
        value = getattr(cfg, f.name)
        if value is None and nullable:
            continue
        if not _allowed(value, meta, kind):
            raise ConfigError(f"{prefix}{f.name} must {_must(meta, kind, nullable)}; got {value!r}")
        if kind is float:
            setattr(cfg, f.name, float(value))


@dataclass
class FusionConfig:
    """How chunk opinions are fused and routed (paper §3.4-3.5, Table 14 defaults)."""

    lam: float = field(
        default=0.6,
        metadata={
            "help": "Conflict-transfer weight λ ∈ [0, 1] of the 'lambda' rule: the share of the conflict K moved to Θ (paper 0.6).",
            "range": (0.0, 1.0),
        },
    )
    rule: str = field(
        default="lambda",
        metadata={
            "help": "Combination rule: 'lambda' (paper, Eqs 10-11), 'yager' (λ = 1), 'dempster' (classic normalized) or 'average' (evidence averaging, no conflict transfer); the last two are ablations.",
            "choices": fusion_rule_names,
        },
    )
    tau1: float = field(
        default=0.35,
        metadata={
            "help": "Routing threshold τ1: U_global below it answers directly (paper 0.35).",
            "range": (0.0, 1.0),
            "must": "satisfy 0 <= tau1 < tau2 <= 1",
        },
    )
    tau2: float = field(
        default=0.65,
        metadata={
            "help": "Routing threshold τ2: U_global at or above it abstains (paper 0.65); 0 <= τ1 < τ2 <= 1.",
            "range": (0.0, 1.0),
            "must": "satisfy 0 <= tau1 < tau2 <= 1",
        },
    )
    policy: str = field(
        default="paper",
        metadata={
            "help": "Routing policy: 'paper' (Eq 15 on U_global), 'decomposed' (uses the ignorance/conflict split) or 'direct' (no routing: always answer; the ablation).",
            "choices": ROUTING_POLICIES,
        },
    )
    state_ratio: float = field(
        default=0.5,
        metadata={
            "help": "Bar of the stated set: a claim is stated when its fused mass reaches this share of the top claim's mass (the direct route adds such claims to the selected one, the conflict route states only them; 0: every claim with positive mass). Fitted by `calibrate`.",
            "range": (0.0, 1.0),
        },
    )
    state_ratio_yes_no: float | None = field(
        default=None,
        metadata={
            "help": "Bar of the stated set for yes/no frames (every claim 'yes' or 'no': answers that exclude each other); null: state_ratio. Fitted by `calibrate` on the yes/no questions apart from the open ones.",
            "range": (0.0, 1.0),
        },
    )
    state_witness_ratio: float | None = field(
        default=None,
        metadata={
            "help": "Witness bar of the stated set (open frames; evidential.witnessed_claims): a claim below the fused-mass bar is stated too when some chunk backs it with at least this share of the query's strongest chunk evidence (several valid answers for different entities, each with a source of its own; edited copies are still dropped). null: off. Fitted by `calibrate` beside state_ratio.",
            "range": (0.0, 1.0),
            "null": "off",
        },
    )
    copy_overlap: float | None = field(
        default=0.8,
        metadata={
            "help": "Edited copies: two chunks whose distinct words overlap at least this much (share of the shorter chunk's words; training.utils.text.near_copies) are copies of one text, and a claim whose every backing chunk copies a chunk that backs a better-supported claim (more backing chunks, then more fused mass) is neither stated nor the answer (evidential.copy_contested: a planted edit of a real document is not a second valid answer). null: off.",
            "range": (0.0, 1.0),
            "ends": "(]",
            "null": "off",
        },
    )
    sanitize: bool = field(
        default=False,
        metadata={
            "help": "Map NaN/infinite/negative evidence to zero (ignorance) with a warning instead of raising."
        },
    )

    def __post_init__(self) -> None:
        check_fields(self, "fusion")
        if not self.tau1 < self.tau2:
            raise ConfigError(
                f"fusion.tau1 and fusion.tau2 must satisfy 0 <= tau1 < tau2 <= 1; got tau1={self.tau1}, tau2={self.tau2}"
            )

    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name → help text."""
        return {f.name: f.metadata["help"] for f in fields(cls)}
