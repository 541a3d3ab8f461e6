"""Typed, validated configuration of the evidential core (stdlib dataclasses, peft ``LoraConfig`` style).

Every field carries its help text in ``metadata["help"]``; ``__post_init__`` validates with a message
naming the field. YAML loading and ``--set key=value`` overrides live in :mod:`inference.config`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from evidential.errors import ConfigError
from evidential.fusion import fusion_rule_names
from evidential.routing import ROUTING_POLICIES

__all__ = ["FusionConfig"]


@dataclass
class FusionConfig:
    """How chunk opinions are fused and routed (paper §3.4-3.5, Table 14 defaults)."""

    lam: float = field(
        default=0.6,
        metadata={
            "help": "Conflict-transfer weight λ ∈ [0, 1] of the 'lambda' rule: the share of the conflict K moved to Θ (paper 0.6)."
        },
    )
    rule: str = field(
        default="lambda",
        metadata={
            "help": "Combination rule: 'lambda' (paper, Eqs 10-11), 'yager' (λ = 1), 'dempster' (classic normalized) or 'average' (evidence averaging, no conflict transfer); the last two are ablations."
        },
    )
    tau1: float = field(
        default=0.35,
        metadata={"help": "Routing threshold τ1: U_global below it answers directly (paper 0.35)."},
    )
    tau2: float = field(
        default=0.65,
        metadata={
            "help": "Routing threshold τ2: U_global at or above it abstains (paper 0.65); 0 <= τ1 < τ2 <= 1."
        },
    )
    policy: str = field(
        default="paper",
        metadata={
            "help": "Routing policy: 'paper' (Eq 15 on U_global), 'decomposed' (uses the ignorance/conflict split) or 'direct' (no routing: always answer; the ablation)."
        },
    )
    sanitize: bool = field(
        default=False,
        metadata={
            "help": "Map NaN/infinite/negative evidence to zero (ignorance) with a warning instead of raising."
        },
    )

    def __post_init__(self) -> None:
        for name in ("lam", "tau1", "tau2"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"fusion.{name} must be a number; got {value!r}")
            if not math.isfinite(value):
                raise ConfigError(f"fusion.{name} must be finite; got {value!r}")
            setattr(self, name, float(value))
        if not 0.0 <= self.lam <= 1.0:
            raise ConfigError(f"fusion.lam must lie in [0, 1]; got {self.lam}")
        if not 0.0 <= self.tau1 < self.tau2 <= 1.0:
            raise ConfigError(
                f"fusion.tau1 and fusion.tau2 must satisfy 0 <= tau1 < tau2 <= 1; got tau1={self.tau1}, tau2={self.tau2}"
            )
        if self.rule not in fusion_rule_names():
            raise ConfigError(
                f"fusion.rule must be one of {', '.join(fusion_rule_names())}; got {self.rule!r}"
            )
        if self.policy not in ROUTING_POLICIES:
            raise ConfigError(
                f"fusion.policy must be one of {', '.join(ROUTING_POLICIES.names())}; got {self.policy!r}"
            )
        if not isinstance(self.sanitize, bool):
            raise ConfigError(f"fusion.sanitize must be true or false; got {self.sanitize!r}")

    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name → help text."""
        return {f.name: f.metadata["help"] for f in fields(cls)}
