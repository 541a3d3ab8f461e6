"""Applying a calibration: the evidence transform ``e' = s · e^p`` and the isotonic map of the confidence
(no scikit-learn needed at inference)."""

from __future__ import annotations

import math

import numpy as np
import torch

from evidential.errors import EvidentialError

__all__ = ["CalibrationError", "apply_evidence_transform", "isotonic_map"]


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
