"""Applying a calibration: the evidence transform ``e' = s · e^p``, the isotonic map of the confidence and
the reader map that corrects it with the reader score of the answer's chunks (no scikit-learn needed at
inference)."""

from __future__ import annotations

import math

import numpy as np
import torch

from evidential.errors import EvidentialError
from evidential.routing import backing_claims

__all__ = [
    "CalibrationError",
    "answer_reader_score",
    "apply_evidence_transform",
    "calibrated_confidence",
    "isotonic_map",
    "reader_map",
    "route_isotonic_map",
]


class CalibrationError(EvidentialError):
    """A calibration that cannot be fitted, read or applied; the message says what to do."""


def apply_evidence_transform(evidence: torch.Tensor, scale: float = 1.0, power: float = 1.0) -> torch.Tensor:
    """``e' = s · e^p`` (identity for ``s = p = 1``); zero evidence stays zero."""
    if not (math.isfinite(scale) and scale > 0 and math.isfinite(power) and power > 0):
        raise CalibrationError(f"evidence scale and power must be finite and > 0; got s={scale}, p={power}")
    e = torch.as_tensor(evidence)
    if not e.is_floating_point():
        e = e.to(torch.float64)
    if power != 1.0:
        e = e.clamp_min(0).pow(power)
    return e * scale if scale != 1.0 else e


def isotonic_map(conf, iso: dict[str, list[float]] | None):
    """The isotonic map (linear interpolation between breakpoints, clipped outside them); a confidence of 0
    (no claim selected, so nothing can be right) stays 0."""
    if iso is None:
        return conf
    if isinstance(conf, torch.Tensor):
        c = conf.detach().cpu().double().numpy()
        out = np.where(c > 0, np.interp(c, iso["x"], iso["y"]), 0.0)
        return torch.as_tensor(out, dtype=conf.dtype, device=conf.device)
    if isinstance(conf, np.ndarray):
        return np.where(conf > 0, np.interp(conf, iso["x"], iso["y"]), 0.0)
    c = float(conf)
    return float(np.interp(c, iso["x"], iso["y"])) if c > 0 else 0.0


def route_isotonic_map(
    conf,
    routes,
    iso: dict[str, list[float]] | None,
    iso_routes: dict[str, dict[str, list[float]]] | None,
):
    """The isotonic map of each answer's route (``iso_routes[route]``), or the pooled map ``iso`` for a route
    without its own (:func:`isotonic_map` for each). ``routes`` is one route name for a single confidence,
    or one name per element of a numpy array or tensor ``conf``."""
    if not iso_routes:
        return isotonic_map(conf, iso)
    if not isinstance(conf, (np.ndarray, torch.Tensor)):
        return isotonic_map(conf, iso_routes.get(routes, iso))
    names = list(routes)
    if len(names) != len(conf):
        raise CalibrationError(f"got {len(names)} routes for {len(conf)} confidences")
    out = isotonic_map(conf, iso)
    for name, m in iso_routes.items():
        idx = [i for i, r in enumerate(names) if r == name]
        if idx:
            out[idx] = isotonic_map(conf[idx], m)
    return out


def answer_reader_score(evidence: torch.Tensor, reader: torch.Tensor, selected: torch.Tensor) -> torch.Tensor:
    """The reader score of an answer: the largest reader score among the chunks that back the answer's
    claim (:func:`evidential.backing_claims`: the claim is the chunk's largest evidence), else among all
    chunks with a score; NaN where no chunk has one (a frame the span head did not read) or no claim is
    selected.

    Args:
        evidence: ``[..., k, M]`` evidence (any monotone transform of it backs the same claims).
        reader: ``[..., k]`` reader scores, NaN where a chunk has none.
        selected: ``[...]`` long, the answer's claim index (``-1``: none).

    Returns:
        ``[...]`` float64.

    Example:
        >>> ev = torch.tensor([[3.0, 0.0], [0.0, 2.0], [1.0, 0.0]])
        >>> answer_reader_score(ev, torch.tensor([2.5, 9.0, 4.0]), torch.tensor(0)).item()
        4.0
        >>> answer_reader_score(ev, torch.tensor([2.5, float("nan"), 4.0]), torch.tensor(1)).item()
        4.0
    """
    e = torch.as_tensor(evidence)
    r = torch.as_tensor(reader, dtype=torch.float64)
    sel = torch.as_tensor(selected, dtype=torch.long)
    neg = torch.full_like(r, -math.inf)
    scored = torch.where(torch.isnan(r), neg, r)
    best_any = scored.max(-1).values if r.shape[-1] else torch.full(sel.shape, -math.inf, dtype=r.dtype)
    if e.shape[-1] and r.shape[-1]:
        backs = backing_claims(e)  # [..., k, M]
        idx = sel.clamp_min(0).view(*sel.shape, 1, 1).expand(*backs.shape[:-1], 1)
        backed = backs.gather(-1, idx).squeeze(-1)  # [..., k]
        best_backed = torch.where(backed, scored, neg).max(-1).values
    else:
        best_backed = torch.full_like(best_any, -math.inf)
    out = torch.where(torch.isfinite(best_backed), best_backed, best_any)
    return torch.where(torch.isfinite(out) & (sel >= 0), out, torch.full_like(out, math.nan))


def reader_map(confidence, reader_score, params: dict | None):
    """The reader map: ``σ(a · logit(c) + b · clip(r) + c0)`` of a calibrated confidence ``c`` and the
    answer's reader score ``r`` (:func:`answer_reader_score`), with ``params = {coef: [a, b], intercept:
    c0, clip: [lo, hi], eps}`` (``c`` is clipped to ``[eps, 1 - eps]`` for the logit). A confidence of 0
    (nothing stated) stays 0, and so does every confidence without a finite reader score; ``params`` None:
    the identity. ``confidence`` and ``reader_score`` are floats, or tensors of one shape.

    Example:
        >>> p = {"coef": [1.0, 0.5], "intercept": -1.0, "clip": [-5.0, 15.0], "eps": 0.001}
        >>> round(reader_map(0.5, 2.0, p), 6), reader_map(0.5, None, p), reader_map(0.0, 2.0, p)
        (0.5, 0.5, 0.0)
    """
    if params is None:
        return confidence
    if not isinstance(confidence, torch.Tensor):
        if reader_score is None:
            return confidence
        out = reader_map(torch.tensor(float(confidence), dtype=torch.float64), float(reader_score), params)
        return float(out)
    a, b = (float(x) for x in params["coef"])
    c0, (lo, hi), eps = float(params["intercept"]), params["clip"], float(params["eps"])
    conf = confidence.double()
    r = torch.as_tensor(reader_score, dtype=torch.float64, device=conf.device)
    c = conf.clamp(eps, 1.0 - eps)
    z = (
        a * torch.log(c / (1.0 - c))
        + b * torch.nan_to_num(r, nan=0.0, posinf=hi, neginf=lo).clamp(lo, hi)
        + c0
    )
    keep = ~torch.isfinite(r) | ~(conf > 0)
    return torch.where(keep, conf, torch.sigmoid(z)).to(confidence.dtype)


def calibrated_confidence(
    conf, routes, isotonic, isotonic_routes=None, reader_params=None, reader_score=None
):
    """The calibrated confidence of answers: the isotonic map of their route (:func:`route_isotonic_map`),
    then the reader map (:func:`reader_map`) of their reader score — never of an abstention's. ``routes``:
    one route name, one per element of an array or tensor ``conf``, or None (the pooled map; no route is an
    abstention); ``reader_score`` alike (None or NaN: none)."""
    out = route_isotonic_map(conf, routes, isotonic, isotonic_routes if routes is not None else None)
    if reader_params is None or reader_score is None:
        return out
    if isinstance(routes, str):
        return out if routes == "abstain" else reader_map(out, reader_score, reader_params)
    r = torch.as_tensor(reader_score, dtype=torch.float64)
    if routes is not None:
        abstain = torch.tensor([name == "abstain" for name in routes], dtype=torch.bool)
        r = r.masked_fill(abstain, math.nan)
    return reader_map(out, r, reader_params)
