"""Calibration of evidence, λ and the routing thresholds.

* :mod:`~training.calibration.fit`: fitting on cached evaluator outputs (:class:`CalibrationData`,
  :class:`EvidenceCalibrator` = fit, then apply);
* :mod:`~training.calibration.format`: the calibration file (:class:`Calibration`, :func:`read_calibration`);
* :mod:`~training.calibration.apply`: applying it (evidence transform, isotonic map);
* :mod:`~training.calibration.reliability`: reliability diagrams.
"""

from training.calibration.apply import (
    CalibrationError,
    apply_evidence_transform,
    isotonic_map,
    route_isotonic_map,
)
from training.calibration.data import CalibrationData
from training.calibration.fit import (
    LAM_GRID,
    POWER_GRID,
    ROUTE_MAP_MIN_QUERIES,
    SCALE_GRID,
    STATE_RATIO_GRID,
    TAU_GRID,
    WITNESS_RATIO_GRID,
    EvidenceCalibrator,
    ScaleFit,
    ThresholdFit,
    answer_hits,
    cross_validate,
    evaluate_parameters,
    fit_calibration,
    fit_evidence_scale,
    fit_isotonic,
    fit_route_isotonic,
    fit_state_ratio,
    fit_thresholds,
    fit_witness_ratio,
    fold_of,
    fused_outputs,
    set_hits,
    stated_mass,
    witness_mask,
)
from training.calibration.format import (
    CALIBRATION_FORMAT,
    CALIBRATION_VERSION,
    CONFIDENCE_INPUTS,
    Calibration,
    checkpoint_fingerprint,
    describe_identity,
    read_calibration,
)

__all__ = [
    "CALIBRATION_FORMAT",
    "CALIBRATION_VERSION",
    "CONFIDENCE_INPUTS",
    "LAM_GRID",
    "POWER_GRID",
    "ROUTE_MAP_MIN_QUERIES",
    "SCALE_GRID",
    "STATE_RATIO_GRID",
    "TAU_GRID",
    "WITNESS_RATIO_GRID",
    "Calibration",
    "CalibrationData",
    "CalibrationError",
    "EvidenceCalibrator",
    "ScaleFit",
    "ThresholdFit",
    "apply_evidence_transform",
    "checkpoint_fingerprint",
    "cross_validate",
    "describe_identity",
    "evaluate_parameters",
    "fit_calibration",
    "fit_evidence_scale",
    "fit_isotonic",
    "fit_route_isotonic",
    "fit_state_ratio",
    "fit_thresholds",
    "fit_witness_ratio",
    "fold_of",
    "fused_outputs",
    "isotonic_map",
    "read_calibration",
    "route_isotonic_map",
    "answer_hits",
    "set_hits",
    "stated_mass",
    "witness_mask",
]
