"""Applying a calibration: the evidence transform ``e' = s · e^p`` and the isotonic map of the confidence
(no scikit-learn needed at inference)."""

from __future__ import annotations

import math

import numpy as np
import torch

from evidential.errors import EvidentialError

__all__ = ["CalibrationError", "apply_evidence_transform", "isotonic_map", "route_isotonic_map"]


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
