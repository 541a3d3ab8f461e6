"""The calibration file (``calibration.json``, written by ``evidential-rag calibrate``): the
:class:`Calibration` it holds, reading and validating it (:func:`read_calibration`), and what it is tied to
(:func:`checkpoint_fingerprint`, :func:`describe_identity`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from evidential.fusion import FUSION_RULES
from evidential.routing import ROUTES, ROUTING_POLICIES
from training.calibration.apply import CalibrationError, apply_evidence_transform, calibrated_confidence
from training.utils.io import loads_strict

__all__ = [
    "CALIBRATION_FORMAT",
    "CALIBRATION_VERSION",
    "CONFIDENCE_INPUTS",
    "Calibration",
    "checkpoint_fingerprint",
    "describe_identity",
    "read_calibration",
]

CALIBRATION_FORMAT = "evidential-rag-calibration"
CALIBRATION_VERSION = 1


def checkpoint_fingerprint(path: str | Path) -> str:
    """``sha256:<hex>`` over the weight and config files of a learned-evaluator checkpoint folder:
    ``learned_config.json``, ``heads.safetensors`` and every file under ``adapter/`` except peft's generated
    ``README.md`` (relative path and content of each, in sorted order). A copied checkpoint keeps its
    fingerprint; retraining changes it."""
    root = Path(path)
    files = [root / "learned_config.json", root / "heads.safetensors"]
    adapter = root / "adapter"
    if adapter.is_dir():
        files += [p for p in adapter.rglob("*") if p.is_file() and p.name != "README.md"]
    missing = [str(p) for p in files[:2] if not p.is_file()]
    if missing:
        raise CalibrationError(f"{root} is not a learned-evaluator checkpoint: missing {', '.join(missing)}")
    h = hashlib.sha256()
    for p in sorted(files, key=lambda q: q.relative_to(root).as_posix()):
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).hexdigest().encode() + b"\n")
    return "sha256:" + h.hexdigest()


def _num(d: dict, key: str, where: str, low: float, high: float, open_low: bool = False) -> float:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise CalibrationError(f"{where}.{key} must be a finite number; got {v!r}")
    if v < low or v > high or (open_low and v == low):
        bound = f"({low}, {high}]" if open_low else f"[{low}, {high}]"
        raise CalibrationError(f"{where}.{key} must lie in {bound}; got {v!r}")
    return float(v)


def _breakpoints(iso: Any, where: str) -> dict[str, list[float]]:
    """An isotonic map's breakpoints ``{x, y}``, checked: equal-length non-decreasing lists in [0, 1]."""
    xs, ys = (iso.get("x"), iso.get("y")) if isinstance(iso, dict) else (None, None)
    ok = (
        isinstance(xs, list)
        and isinstance(ys, list)
        and len(xs) == len(ys) >= 1
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (*xs, *ys))
    )
    if not ok or not all(0 <= v <= 1 and math.isfinite(v) for v in (*xs, *ys)):
        raise CalibrationError(
            f"{where} must be null or {{x: [...], y: [...]}} of equal-length lists in [0, 1]"
        )
    if any(b < a for a, b in zip(xs, xs[1:])) or any(b < a for a, b in zip(ys, ys[1:])):
        raise CalibrationError(f"{where}: x and y must be non-decreasing")
    return {"x": [float(v) for v in xs], "y": [float(v) for v in ys]}


#: What a calibration's isotonic map reads: the top claim's mass (Eq 27) or the stated set's fused mass.
CONFIDENCE_INPUTS = ("top", "stated")


@dataclass
class Calibration:
    """A fitted calibration (the calibration JSON file, version :data:`CALIBRATION_VERSION`).

    Parameters: ``scale``/``power`` (``e' = s · e^p``), ``lam``, ``tau1``, ``tau2`` (for ``rule`` and
    ``policy``), ``isotonic`` (breakpoints, or None), ``state_ratio`` (the stated-set bar,
    :func:`evidential.stated_mask`; optional — None keeps the run config's), ``state_ratio_yes_no`` (the bar
    for yes/no frames; optional likewise), ``state_witness_ratio`` (the witness bar of open frames,
    :func:`evidential.witnessed_claims`; optional likewise, and a file that records ``"off"`` turns it off), ``confidence_input`` (what the isotonic map reads, one of
    :data:`CONFIDENCE_INPUTS`: ``"top"`` the Eq 27 confidence, the top claim's mass — files fitted before the
    field; ``"stated"`` the fused mass of the stated set, the belief that the answer as stated holds the
    truth), ``isotonic_routes`` (optional: a map per route, ``{route: breakpoints}``, for the routes with
    enough validation answers of their own; the others use ``isotonic``), ``reader_map`` (optional: the
    logistic correction of the mapped confidence by the answer's reader score,
    :func:`~training.calibration.apply.reader_map`, ``{coef: [a, b], intercept, clip: [lo, hi], eps}``;
    answers without a reader score keep the isotonic value). Provenance: ``evaluator`` (name), ``evaluator_info``
    (learned: ``checkpoint`` and its content ``fingerprint``; prompt: ``backend``, ``model``, ``contract``,
    ``fingerprint``), ``data`` (sources, split, queries), ``metrics`` (``before`` / ``after`` /
    ``after_cv``), ``search`` (objectives and grids) and ``extra`` (command, versions, plot, ...).
    """

    evaluator: str
    scale: float = 1.0
    power: float = 1.0
    lam: float = 0.6
    tau1: float = 0.35
    tau2: float = 0.65
    rule: str = "lambda"
    policy: str = "paper"
    isotonic: dict[str, list[float]] | None = None
    state_ratio: float | None = None
    state_ratio_yes_no: float | None = None
    state_witness_ratio: float | str | None = None
    confidence_input: str = "top"
    isotonic_routes: dict[str, dict[str, list[float]]] | None = None
    reader_map: dict[str, Any] | None = None
    evaluator_info: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    search: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # validate through from_dict's checks so that a hand-built object obeys the same rules
        self._check()

    def _check(self) -> None:
        p = {k: getattr(self, k) for k in ("scale", "power", "lam", "tau1", "tau2")}
        w = "parameters"
        self.scale = _num(p, "scale", w, 0.0, math.inf, open_low=True)
        self.power = _num(p, "power", w, 0.0, math.inf, open_low=True)
        self.lam = _num(p, "lam", w, 0.0, 1.0)
        self.tau1 = _num(p, "tau1", w, 0.0, 1.0)
        self.tau2 = _num(p, "tau2", w, 0.0, 1.0)
        if not self.tau1 < self.tau2:
            raise CalibrationError(f"parameters: tau1 < tau2 is required; got {self.tau1}, {self.tau2}")
        for key in ("state_ratio", "state_ratio_yes_no"):
            if getattr(self, key) is not None:
                setattr(self, key, _num({key: getattr(self, key)}, key, w, 0.0, 1.0))
        if self.state_witness_ratio not in (None, "off"):
            self.state_witness_ratio = _num(
                {"state_witness_ratio": self.state_witness_ratio}, "state_witness_ratio", w, 0.0, 1.0
            )
        if not isinstance(self.evaluator, str) or not self.evaluator:
            raise CalibrationError(f"evaluator.name must be a non-empty string; got {self.evaluator!r}")
        if self.confidence_input not in CONFIDENCE_INPUTS:
            raise CalibrationError(
                f"parameters.confidence_input must be one of {', '.join(CONFIDENCE_INPUTS)}; "
                f"got {self.confidence_input!r}"
            )
        if self.rule not in FUSION_RULES:
            raise CalibrationError(f"parameters.rule: unknown fusion rule {self.rule!r}")
        if self.policy not in ROUTING_POLICIES:
            raise CalibrationError(f"parameters.policy: unknown routing policy {self.policy!r}")
        if self.isotonic is not None:
            self.isotonic = _breakpoints(self.isotonic, "parameters.isotonic")
        if self.isotonic_routes is not None:
            maps = self.isotonic_routes
            if not isinstance(maps, dict) or not maps:
                raise CalibrationError(
                    "parameters.isotonic_routes must be null or a non-empty {route: {x: [...], y: [...]}} object"
                )
            bad = sorted(set(maps) - set(ROUTES))
            if bad:
                raise CalibrationError(
                    f"parameters.isotonic_routes: unknown route {bad[0]!r}; routes are {', '.join(ROUTES)}"
                )
            if self.isotonic is None:
                raise CalibrationError(
                    "parameters.isotonic_routes needs parameters.isotonic, the map of the routes without their own"
                )
            self.isotonic_routes = {
                r: _breakpoints(m, f"parameters.isotonic_routes.{r}") for r, m in maps.items()
            }

        if self.reader_map is not None:
            self.reader_map = _reader_params(self.reader_map)

    @property
    def fingerprint(self) -> str | None:
        """The evaluator fingerprint it was fitted for (checkpoint content, or prompt backend/model)."""
        return self.evaluator_info.get("fingerprint")

    def apply_to_evidence(self, evidence: torch.Tensor) -> torch.Tensor:
        """``e' = s · e^p`` (before Eqs 2–6)."""
        return apply_evidence_transform(evidence, self.scale, self.power)

    def calibrated_confidence(self, confidence, stated_mass=None, route=None, reader_score=None):
        """The isotonic map of the answer's confidence (float, numpy array or tensor); identity without one.
        Its input is ``confidence`` (the Eq 27 top-claim mass) or, with ``confidence_input == "stated"``,
        ``stated_mass`` (the fused mass of the stated set; required then). 0 (no claim) maps to 0. With
        ``isotonic_routes`` the answer's ``route`` (a name, or one per element of an array) picks its map;
        without a route, or for a route without its own map, the pooled ``isotonic`` applies. With a
        ``reader_map`` and the answer's ``reader_score`` (a float, or a tensor like ``confidence``; None or
        NaN: none) the mapped value is then corrected by it; an abstention is never corrected."""
        if self.confidence_input == "stated":
            if stated_mass is None:
                raise CalibrationError(
                    "this calibration maps the stated set's mass (confidence_input 'stated'); the record has no "
                    "stated_mass: re-fuse it (`POST /fuse`, `sweep`) to compute one"
                )
            confidence = stated_mass
        return calibrated_confidence(
            confidence, route, self.isotonic, self.isotonic_routes, self.reader_map, reader_score
        )

    def fusion_overrides(self) -> dict[str, float | None]:
        """``{lam, tau1, tau2}`` (and ``state_ratio`` / ``state_ratio_yes_no`` / ``state_witness_ratio`` when
        fitted; a witness bar fitted as ``"off"`` gives ``None``) for :class:`evidential.FusionConfig`."""
        out: dict[str, float | None] = {"lam": self.lam, "tau1": self.tau1, "tau2": self.tau2}
        for key in ("state_ratio", "state_ratio_yes_no"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.state_witness_ratio is not None:
            out["state_witness_ratio"] = (
                None if self.state_witness_ratio == "off" else self.state_witness_ratio
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": CALIBRATION_FORMAT,
            "version": CALIBRATION_VERSION,
            "evaluator": {"name": self.evaluator, **self.evaluator_info},
            "parameters": {
                "scale": self.scale,
                "power": self.power,
                "lam": self.lam,
                "tau1": self.tau1,
                "tau2": self.tau2,
                "rule": self.rule,
                "policy": self.policy,
                "isotonic": self.isotonic,
                **({"state_ratio": self.state_ratio} if self.state_ratio is not None else {}),
                **(
                    {"state_ratio_yes_no": self.state_ratio_yes_no}
                    if self.state_ratio_yes_no is not None
                    else {}
                ),
                **(
                    {"state_witness_ratio": self.state_witness_ratio}
                    if self.state_witness_ratio is not None
                    else {}
                ),
                # written when it is not the default of files fitted before the field, which round-trip unchanged
                **({"confidence_input": self.confidence_input} if self.confidence_input != "top" else {}),
                **({"isotonic_routes": self.isotonic_routes} if self.isotonic_routes is not None else {}),
                **({"reader_map": self.reader_map} if self.reader_map is not None else {}),
            },
            "data": self.data,
            "metrics": self.metrics,
            "search": self.search,
            **self.extra,
        }

    @classmethod
    def from_dict(cls, d: Any) -> Calibration:
        """Parse a calibration file's content; a wrong format, an unknown version or a bad field raises
        :class:`CalibrationError` naming it."""
        if not isinstance(d, dict) or d.get("format") != CALIBRATION_FORMAT:
            raise CalibrationError(
                f'not a calibration file (expected "format": "{CALIBRATION_FORMAT}"); write one with '
                "`evidential-rag calibrate`"
            )
        version = d.get("version")
        if version != CALIBRATION_VERSION:
            raise CalibrationError(
                f"calibration version {version!r} is not supported (this evidential-rag reads version "
                f"{CALIBRATION_VERSION}); refit with `evidential-rag calibrate`"
            )
        ev, params = d.get("evaluator"), d.get("parameters")
        if not isinstance(ev, dict) or not isinstance(ev.get("name"), str):
            raise CalibrationError("field 'evaluator' must be an object with a 'name'")
        if not isinstance(params, dict):
            raise CalibrationError("field 'parameters' must be an object")
        known = {"scale", "power", "lam", "tau1", "tau2", "rule", "policy", "isotonic"}
        missing = sorted(known - set(params))
        if missing:
            raise CalibrationError(f"field 'parameters.{missing[0]}' is missing")
        for key in ("data", "metrics", "search"):
            if not isinstance(d.get(key, {}), dict):
                raise CalibrationError(f"field {key!r} must be an object")
        top = {"format", "version", "evaluator", "parameters", "data", "metrics", "search"}
        return cls(
            evaluator=ev["name"],
            **{k: params[k] for k in known},
            state_ratio=params.get("state_ratio"),  # optional: files fitted before the stated-set bar
            state_ratio_yes_no=params.get("state_ratio_yes_no"),  # optional: files fitted before it
            state_witness_ratio=params.get("state_witness_ratio"),  # optional: files fitted before it
            confidence_input=params.get("confidence_input", "top"),  # files fitted before it map the top mass
            isotonic_routes=params.get("isotonic_routes"),  # optional: files fitted before per-route maps
            reader_map=params.get("reader_map"),  # optional: files fitted before the reader map
            evaluator_info={k: v for k, v in ev.items() if k != "name"},
            data=d.get("data", {}),
            metrics=d.get("metrics", {}),
            search=d.get("search", {}),
            extra={k: v for k, v in d.items() if k not in top},
        )


def _reader_params(p: Any) -> dict[str, Any]:
    """The checked ``parameters.reader_map`` object (see :class:`Calibration`)."""
    w = "parameters.reader_map"
    if not isinstance(p, dict):
        raise CalibrationError(
            f"{w} must be null or an object {{coef: [a, b], intercept, clip: [lo, hi], eps}}"
        )
    missing = sorted({"coef", "intercept", "clip", "eps"} - set(p))
    if missing:
        raise CalibrationError(f"field '{w}.{missing[0]}' is missing")
    pairs = {}
    for key in ("coef", "clip"):
        v = p[key]
        if (
            not isinstance(v, list)
            or len(v) != 2
            or any(isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) for x in v)
        ):
            raise CalibrationError(f"{w}.{key} must be a list of two finite numbers; got {v!r}")
        pairs[key] = [float(x) for x in v]
    if not pairs["clip"][0] < pairs["clip"][1]:
        raise CalibrationError(f"{w}.clip must be [lo, hi] with lo < hi; got {pairs['clip']}")
    intercept = _num(p, "intercept", w, -math.inf, math.inf)
    eps = _num(p, "eps", w, 0.0, 0.5, open_low=True)
    return {**p, **pairs, "intercept": intercept, "eps": eps}


def describe_identity(name: str, info: dict[str, Any]) -> str:
    """Human-readable evaluator identity for messages (``learned evaluator with checkpoint X (sha256:…)``)."""
    fp = str(info.get("fingerprint") or "?")
    short = fp[:19] + "…" if len(fp) > 20 else fp
    if name == "learned":
        return f"the learned evaluator with checkpoint {info.get('checkpoint')} (fingerprint {short})"
    if name == "prompt":
        return f"the prompt evaluator with model {info.get('model')!r} on backend {info.get('backend')!r}"
    return f"the {name} evaluator"


def read_calibration(path: str | Path) -> Calibration:
    """Read and validate a calibration file (no compatibility check)."""
    p = Path(path)
    if not p.is_file():
        raise CalibrationError(
            f"calibration file {p} not found; write one with `evidential-rag calibrate ... --output {p}`"
        )
    try:
        raw = loads_strict(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise CalibrationError(
            f"{p}: corrupted calibration file (not valid JSON: {why}); refit it with `evidential-rag calibrate`"
        ) from None
    try:
        return Calibration.from_dict(raw)
    except CalibrationError as exc:
        raise CalibrationError(f"{p}: {exc}") from None
