"""Loading a calibration file at inference (``--calibration FILE`` on ``ask``, ``batch``, ``serve``; the
``calibration`` field of the run config).

A calibration (:class:`training.calibration.Calibration`, written by ``evidential-rag calibrate``) belongs
to ONE evaluator: the learned evaluator's checkpoint *content* (a sha256 fingerprint of its adapter, heads
and config files — a copied checkpoint still matches, a retrained one does not) or the prompt evaluator's
backend, model and contract version. :func:`load_calibration` refuses a file fitted for another evaluator,
checkpoint or model, or for another fusion rule / routing policy, with a message saying what it was fitted
for and how to refit; a corrupted file or an unknown version is refused too
(:func:`training.calibration.read_calibration`). This is the one place where a calibration meets the run
config; the file format and its application are in :mod:`training.calibration`, the fitting run in
:mod:`inference.workflows.calibrate`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from training.calibration import (
    Calibration,
    CalibrationError,
    checkpoint_fingerprint,
    describe_identity,
    read_calibration,
)

if TYPE_CHECKING:  # inference.config imports the RAG systems, which load calibrations through this module
    from inference.config import RunConfig

__all__ = [
    "AUTO",
    "CalibrationError",
    "FRAME_SETTINGS",
    "calibration_record",
    "evaluator_identity",
    "load_calibration",
    "read_calibration",
    "resolve_calibration",
]

#: The ``calibration`` value that loads the learned checkpoint's own ``calibration.json`` when it applies.
AUTO = "auto"
CHECKPOINT_CALIBRATION = "calibration.json"

#: Learned-evaluator settings that decide its frames (which claims the spans give): a calibration applies only
#: to runs with the values it was fitted with (:func:`load_calibration`).
FRAME_SETTINGS = (
    "span_null_margin",
    "span_fallback_margin",
    "span_candidates",
    "span_candidate_margin",
    "span_repair",
)


def evaluator_identity(config: RunConfig) -> dict[str, Any]:
    """What a calibration of the configured evaluator is tied to (``name`` plus a ``fingerprint``).

    * ``learned``: ``checkpoint`` (the resolved folder) and ``fingerprint`` (its content, see
      :func:`training.calibration.checkpoint_fingerprint`), ``encoder``;
    * ``prompt``: ``backend``, ``model``, ``gguf_file``, ``contract`` (prompt contract version),
      ``constrained`` — and in the ``logprobs`` scoring mode its settings (and, with ``logprob_claims:
      spans``, the claim checkpoint's fingerprint); ``fingerprint`` = sha256 of those.
    """
    ev = config.evaluator
    if ev.name == "learned":
        from training.learned.checkpoint import resolve_checkpoint

        ckpt = resolve_checkpoint(ev.resolved_checkpoint())
        info: dict[str, Any] = {"checkpoint": str(ckpt), "fingerprint": checkpoint_fingerprint(ckpt)}
        cfg_file = ckpt / "learned_config.json"
        try:
            info["encoder"] = json.loads(cfg_file.read_text(encoding="utf-8")).get("encoder")
        except (OSError, json.JSONDecodeError, AttributeError):
            info["encoder"] = None
        return {"name": "learned", **info}
    if ev.name == "prompt":
        from inference.evaluators.contract import CONTRACT_VERSION

        info = {
            "backend": ev.backend.name,
            "model": ev.backend.model,
            "gguf_file": ev.backend.gguf_file,
            "contract": CONTRACT_VERSION,
            "constrained": ev.constrained,
        }
        if ev.scoring != "json":  # JSON-mode fingerprints stay those of files fitted before the mode existed
            from inference.evaluators.logprob import SCORING_VERSION

            info.update(
                contract=SCORING_VERSION,
                scoring=ev.scoring,
                logprob_scale=ev.logprob_scale,
                logprob_floor=ev.logprob_floor,
                logprob_debias=ev.logprob_debias,
                logprob_claims=ev.logprob_claims,
            )
            if ev.logprob_claims == "spans":  # the claims come from a learned checkpoint: its content counts
                from training.learned.checkpoint import resolve_checkpoint

                info["claims_checkpoint"] = checkpoint_fingerprint(
                    resolve_checkpoint(ev.resolved_checkpoint())
                )
        digest = hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()
        return {"name": "prompt", **info, "fingerprint": "sha256:" + digest}
    return {"name": ev.name, "fingerprint": None}


def _setting(value: Any) -> str:
    """A setting as ``--set`` writes it (``true``/``false`` for booleans, ``null`` for None)."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _refit_hint(path: Path, config: RunConfig) -> str:
    ev = config.evaluator
    target = f" --set evaluator.checkpoint={ev.checkpoint}" if ev.name == "learned" else ""
    return (
        f"refit it for this evaluator with `evidential-rag calibrate --evaluator {ev.name}{target} "
        f"--data … --output {path}`, or run without --calibration"
    )


def load_calibration(path: str | Path, run_config: RunConfig) -> Calibration:
    """Read a calibration file and check that it belongs to ``run_config``'s evaluator and fusion.

    Raises:
        CalibrationError: Missing, corrupted or unknown-version file; or fitted for another evaluator,
            another checkpoint (content fingerprint) or prompt model/backend, or another fusion rule or
            routing policy, or with another ``evaluator.grounding`` mode or (learned evaluator) another span
            setting of :data:`FRAME_SETTINGS`. The message says what it was fitted for and how to refit.
    """
    p = Path(path)
    cal = read_calibration(p)
    here = evaluator_identity(run_config)
    fitted = describe_identity(cal.evaluator, cal.evaluator_info)
    using = describe_identity(here["name"], here)
    if cal.evaluator != here["name"]:
        raise CalibrationError(
            f"calibration {p} was fitted for {fitted}, but this run uses the {here['name']} evaluator; "
            f"use --evaluator {cal.evaluator}, or {_refit_hint(p, run_config)}"
        )
    if cal.fingerprint != here["fingerprint"]:
        raise CalibrationError(
            f"calibration {p} was fitted for {fitted}, but this run uses {using}; its evidence scale and "
            f"thresholds do not carry over: {_refit_hint(p, run_config)}"
        )
    fusion = run_config.fusion
    if (cal.rule, cal.policy) != (fusion.rule, fusion.policy):
        raise CalibrationError(
            f"calibration {p} was fitted for fusion.rule={cal.rule}, fusion.policy={cal.policy}, but this run "
            f"uses fusion.rule={fusion.rule}, fusion.policy={fusion.policy}; pass --set fusion.rule={cal.rule} "
            f"--set fusion.policy={cal.policy}, or refit with those settings in the config"
        )
    # the grounding check changes the evidence a calibration was fitted on, and the learned evaluator's span
    # settings change its frames (which claims exist); files written before a setting existed do not record
    # it and are not checked for it
    fitted_config = (cal.extra.get("config") or {}).get("evaluator") or {}
    settings = ("grounding", *FRAME_SETTINGS) if run_config.evaluator.name == "learned" else ("grounding",)
    for key in (k for k in settings if k in fitted_config):
        was, now = fitted_config[key], getattr(run_config.evaluator, key)
        if was != now:
            raise CalibrationError(
                f"calibration {p} was fitted with evaluator.{key}={_setting(was)}, but this run uses "
                f"evaluator.{key}={_setting(now)}; pass --set evaluator.{key}={_setting(was)}, "
                f"or {_refit_hint(p, run_config)}"
            )
    return cal


def calibration_record(cal: Calibration, path: str | Path) -> dict[str, Any]:
    """The ``calibration`` block of an answer record: the ``file``, the evaluator ``fingerprint`` it was fitted
    for, the file's own ``sha256`` and the applied parameters."""
    p = Path(path)
    try:
        sha = "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError:
        sha = None
    return {
        "file": str(p),
        "fingerprint": cal.fingerprint,
        "sha256": sha,
        "evaluator": cal.evaluator,
        "scale": cal.scale,
        "power": cal.power,
        "lam": cal.lam,
        "tau1": cal.tau1,
        "tau2": cal.tau2,
        "isotonic": cal.isotonic is not None,
        "reader_map": cal.reader_map is not None,
    }


def resolve_calibration(run_config: RunConfig) -> tuple[Calibration | None, Path | None, str | None]:
    """The calibration a run uses: ``(calibration, path, note)``.

    * ``calibration: null`` — none.
    * a file path — that file, checked by :func:`load_calibration` (a mismatch is an error).
    * ``auto`` (the shipped default) — the learned evaluator's checkpoint calibration
      (``calibration.json`` in the checkpoint folder, or next to it when the checkpoint names ``best/``)
      when the evaluator is ``learned`` and the file exists and fits this run (checkpoint, rule, policy);
      otherwise none, and ``note`` says why (e.g. the prompt evaluator, an ablation's other fusion rule).
    """
    value = run_config.calibration
    if value is None:
        return None, None, None
    if value != AUTO:
        return load_calibration(value, run_config), Path(value), None
    ev = run_config.evaluator
    if ev.name != "learned":
        return None, None, f"calibration auto: no checkpoint calibration for the {ev.name} evaluator"
    folder = ev.resolved_checkpoint()
    found = [
        p for p in (folder / CHECKPOINT_CALIBRATION, folder.parent / CHECKPOINT_CALIBRATION) if p.is_file()
    ]
    if not found:
        return None, None, f"calibration auto: {folder} has no {CHECKPOINT_CALIBRATION}"
    try:
        return load_calibration(found[0], run_config), found[0], None
    except CalibrationError as exc:
        return None, None, f"calibration auto: {found[0]} does not apply ({exc})"
