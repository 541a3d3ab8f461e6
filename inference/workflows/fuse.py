"""Fusing given per-chunk evidence (``evidential-rag fuse``): opinions, fused masses, U_global and its
ignorance/conflict parts, K̄ and the route, as one JSON-ready report."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch

from evidential import fuse, opinions_from_evidence, route
from evidential.config import FusionConfig
from inference.config import to_dict

__all__ = ["fuse_evidence"]


def _num(x) -> float:
    return round(float(x), 10)


def fuse_evidence(
    evidence: Sequence[Sequence[float]], claims: Sequence[str], fusion: FusionConfig
) -> tuple[dict[str, Any], list[str]]:
    """Fuse ``evidence`` (chunks in rank order × one value per claim in ``claims``) with ``fusion`` and route
    the result.

    Returns the report (``claims``, ``config``, per-chunk ``opinions``, ``fused`` masses, ``U_global``,
    ``ignorance``, ``conflict``, ``step_conflict``, ``mean_pairwise_conflict``, ``confidence``,
    ``selected_claim``, ``route``; numbers rounded to 10 digits) and the warnings raised while reading the
    evidence (sanitized values).

    Raises:
        EvidentialError: Invalid evidence or settings.
    """
    names = list(claims)
    ev = (
        torch.tensor(evidence, dtype=torch.float64)
        if len(evidence)
        else torch.zeros(0, len(names), dtype=torch.float64)
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        ops = opinions_from_evidence(ev, sanitize=fusion.sanitize)
    res = fuse(ops, lam=fusion.lam, rule=fusion.rule)
    decision = route(res, fusion.tau1, fusion.tau2, fusion.policy)
    sel = int(res.selected)
    report = {
        "claims": names,
        "config": to_dict(fusion),
        "opinions": [
            {
                "chunk": i,
                "belief": {c: _num(ops.belief[i, j]) for j, c in enumerate(names)},
                "vacuity": _num(ops.vacuity[i]),
            }
            for i in range(ev.shape[0])
        ],
        "fused": {
            "belief": {c: _num(res.belief[j]) for j, c in enumerate(names)},
            "theta": _num(res.uncertainty),
        },
        "U_global": _num(res.uncertainty),
        "ignorance": _num(res.ignorance),
        "conflict": _num(res.conflict),
        "step_conflict": [_num(x) for x in res.step_conflict],
        "mean_pairwise_conflict": _num(res.mean_pairwise_conflict),
        "confidence": _num(res.confidence),
        "selected_claim": names[sel] if sel >= 0 else None,
        "route": decision.names,
    }
    return report, [str(w.message) for w in caught]
