"""Calibration of an evaluator's evidence, of λ and of the routing thresholds (pure fitting logic).

Tensors in, parameters out; no model calls. ``evidential-rag calibrate`` (:mod:`inference.workflows.calibrate`)
runs an evaluator ONCE over validation queries, caches the evidence ``[B, k, M]`` in a
:class:`CalibrationData` and fits, on those cached tensors only (every candidate setting is one batched
:func:`evidential.fuse` call over all queries):

1. **Evidence scale and power** (:func:`fit_evidence_scale`): ``e' = s · e^p`` (Eqs 2–6 then see ``e'``).
   In log-evidence space this is the affine map ``log e' = p · log e + log s``: ``s`` shifts every chunk's
   evidence (more or less vacuity ``u = M / S``), ``p`` is a temperature on log-evidence (``p > 1``
   sharpens a chunk's evidence toward its top claim, ``p < 1`` flattens it; ``e = 0`` stays 0, so
   ignorance stays ignorance and no evidence is created). ``p`` is worth fitting because an evidential
   head (softplus) gives every listed claim some evidence, and that spread is what fusion sees as conflict;
   a single scale cannot change it. Objective for the scale at each power: the log loss (NLL) of the Eq 27
   confidence ``max_j m⁽ᵏ⁾({a_j})`` against "the selected claim is a gold claim", over queries with a gold
   reference, at the configured λ, each source dataset weighted equally — a proper scoring rule
   (temperature scaling, Guo et al. 2017), smooth in the parameters and free of the binning that makes ECE
   a noisy objective on small validation sets. The power is chosen after step 3: steps 2–3 are fitted at
   each power (with its scale), and the power whose answers state exactly the gold set most often, each
   source weighted equally, is kept — how a chunk's evidence spreads over claims decides which claims clear
   the stated-set bar, and the top claim's log loss is nearly flat in it.
2. **λ and (τ1, τ2)** (:func:`fit_thresholds`), with the scale fixed: a grid search maximizing route
   accuracy against :func:`training.trainer.trainer.expected_route` (the behaviour the labels call for),
   each source dataset weighted equally (a large yes/no dataset must not decide the routes of the others), ties
   broken by the ECE (15 equal-width bins) of the fused confidence, then by closeness to the configured
   (λ, τ1, τ2) — with no evidence to prefer one setting the prior (paper defaults) stays. λ is searched
   only for the ``lambda`` rule (``yager`` fixes λ = 1, ``dempster`` has none).
3. **The stated-set bar** (:func:`fit_state_ratio`), with λ and τ fixed: the ``state_ratio`` of
   :func:`evidential.stated_mask` whose routed answers state exactly the gold claims on the largest share
   of gold queries, each source dataset weighted equally (every valid answer kept, minority claims such as
   planted ones dropped), ties broken by closeness to the configured bar. Fitted twice: ``state_ratio`` on
   the open frames, ``state_ratio_yes_no`` on the yes/no frames (``{yes, no}``: answers that exclude each
   other, where one verdict is the right set), so neither kind of question decides the other's bar; the
   yes/no bar on the yes/no questions with one gold answer (a conflict whose gold is both answers would
   pull it to stating both everywhere).
   Then the **witness bar** of open frames (:func:`fit_witness_ratio`, :func:`evidential.witnessed_claims`),
   with that bar fixed, by the same objective over :data:`WITNESS_RATIO_GRID` and "off", ties broken
   toward "off" and then the higher bar (the fewer claims stated).
4. **Isotonic regression** (:func:`fit_isotonic`, optional): a monotone map of the fused confidence to
   P(the answer as stated is right) — its stated set, at the fitted bar, holds a gold claim, and for a side
   conflict the dataset's own answer (``truth``, not both sides) (:func:`answer_hits`; an abstention never
   does), which is what a response's accuracy measures. Its input
   is the stated set's fused mass (:func:`stated_mass`, ``confidence_input: stated``): the belief that the
   answer as stated holds the truth, the top claim's mass when one claim is stated (scikit-learn ``IsotonicRegression``), stored as its breakpoints and applied
   by linear interpolation (:meth:`Calibration.calibrated_confidence`), so inference needs no scikit-learn.

:func:`evaluate_parameters` scores any setting (route accuracy, ECE, NLL, Brier, selected-claim accuracy)
and :func:`cross_validate` gives an honest estimate: every query is scored by parameters fitted on the
other folds. Every search is exhaustive over fixed grids with deterministic tie-breaking, so fitting is
deterministic.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from evidential import (
    copy_contested,
    fuse,
    merge_copies,
    opinions_from_evidence,
    select_uncontested,
    stated_mask,
    witnessed_claims,
)
from evidential.fusion import FUSION_RULES
from evidential.routing import ROUTES, ROUTING_POLICIES
from training.calibration.apply import (
    CalibrationError,
    answer_reader_score,
    apply_evidence_transform,
    calibrated_confidence,
    isotonic_map,
    route_isotonic_map,
)
from training.calibration.data import CalibrationData
from training.utils.metrics import expected_calibration_error

__all__ = [
    "LAM_GRID",
    "STATE_RATIO_GRID",
    "WITNESS_RATIO_GRID",
    "POWER_GRID",
    "SCALE_GRID",
    "TAU_GRID",
    "ScaleFit",
    "EvidenceCalibrator",
    "ThresholdFit",
    "cross_validate",
    "evaluate_parameters",
    "fit_calibration",
    "fit_evidence_scale",
    "fit_isotonic",
    "fit_reader_map",
    "fit_route_isotonic",
    "fit_state_ratio",
    "fit_thresholds",
    "fit_witness_ratio",
    "fold_of",
    "fused_outputs",
    "answer_hits",
    "READER_MAP_MIN_QUERIES",
    "ROUTE_MAP_MIN_QUERIES",
    "answer_reader",
    "set_hits",
    "witness_mask",
]

#: Evidence scales searched: 2^(i/4), i = -24..24 (1/64 … 64, geometric).
SCALE_GRID: tuple[float, ...] = tuple(2.0 ** (i / 4) for i in range(-24, 25))
#: Evidence powers searched when the power is fitted (1.0 = scale only).
POWER_GRID: tuple[float, ...] = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
#: λ searched for the ``lambda`` rule: 0, 0.05, …, 1.
LAM_GRID: tuple[float, ...] = tuple(round(i * 0.05, 4) for i in range(21))
#: Thresholds searched: 0, 0.025, …, 1 (pairs with τ1 < τ2).
TAU_GRID: tuple[float, ...] = tuple(round(i * 0.025, 4) for i in range(41))

#: Stated-set bars searched (:func:`evidential.stated_mask`): 0, 0.05, …, 1.
STATE_RATIO_GRID: tuple[float, ...] = tuple(round(i * 0.05, 4) for i in range(21))
#: Witness bars searched (:func:`evidential.witnessed_claims`), besides "off": 0.1, 0.15, …, 1.
WITNESS_RATIO_GRID: tuple[float, ...] = tuple(round(i * 0.05, 4) for i in range(2, 21))

#: Gold queries a route needs for an isotonic map of its own (:func:`fit_route_isotonic`); fewer share the
#: pooled map.
ROUTE_MAP_MIN_QUERIES = 30

#: Gold answers with a reader score the reader map needs (:func:`fit_reader_map`); with fewer it is not fitted.
READER_MAP_MIN_QUERIES = 20
#: The reader scores' range in the reader map (a score beyond it says nothing more).
READER_CLIP = (-5.0, 15.0)
#: How close to 0 or 1 a confidence is taken for its logit in the reader map.
READER_EPS = 1e-3

_NLL_EPS = 1e-6


def fused_outputs(
    data: CalibrationData,
    scale: float | torch.Tensor = 1.0,
    power: float = 1.0,
    lam: float = 0.6,
    rule: str = "lambda",
):
    """Fuse every query (Eqs 2–14) after ``e' = s · e^p`` and :func:`evidential.merge_copies` on
    ``data.copies``; ``scale`` may be a 1-d tensor of ``S`` scales, which fuses all of them in one call
    (results get a leading ``[S]`` dimension).

    Returns ``(fusion, confidence, correct)``: the :class:`evidential.FusionResult`, the Eq 27 confidence
    and whether the selected claim is a gold claim (False when nothing is selected).
    """
    e = apply_evidence_transform(data.evidence, 1.0, power)
    cm, km = data.claim_mask, data.chunk_mask
    gold = data.gold
    if isinstance(scale, torch.Tensor) and scale.ndim == 1:
        s = scale.to(e.dtype).view(-1, 1, 1, 1)
        e = e.unsqueeze(0) * s
        n = scale.shape[0]
        cm, km, gold = (t.unsqueeze(0).expand(n, *t.shape) for t in (cm, km, gold))
    else:
        e = e * float(scale)
    copies = bool(data.copies.any())
    if copies:  # agreeing copies are one source, as in the pipeline
        e = merge_copies(e, data.copies, km)
    res = fuse(opinions_from_evidence(e, claim_mask=cm, chunk_mask=km), lam=lam, rule=rule)
    # the answer is never a claim only edited copies back, as in the pipeline
    sel = select_uncontested(res.belief, copy_contested(res.belief, e, data.copies, km) if copies else None)
    picked = torch.gather(gold, -1, sel.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    correct = picked & (sel >= 0)
    return res, res.confidence, correct


def witness_mask(
    data: CalibrationData, scale: float, power: float, ratio: float | str | None
) -> torch.Tensor | None:
    """The witnessed claims ``[B, M]`` (:func:`evidential.witnessed_claims` at ``ratio``) of the evidence
    as the pipeline fuses it (``e' = s · e^p``, then :func:`evidential.merge_copies`); ``None`` when
    ``ratio`` is ``None`` or ``"off"``."""
    if ratio is None or ratio == "off":
        return None
    e = apply_evidence_transform(data.evidence, float(scale), power)
    if bool(data.copies.any()):
        e = merge_copies(e, data.copies, data.chunk_mask)
    return witnessed_claims(e, float(ratio), data.chunk_mask, data.claim_mask)


def _nll(conf: torch.Tensor, correct: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """The log loss over the last dim: its mean, or its ``weight``-weighted sum (weights summing to 1)."""
    c = conf.clamp(_NLL_EPS, 1 - _NLL_EPS)
    y = correct.to(c.dtype)
    loss = -(y * c.log() + (1 - y) * (1 - c).log())
    return loss.mean(-1) if weight is None else (loss * weight.to(c.dtype)).sum(-1)


def _route_names(ids: torch.Tensor) -> list[str]:
    """The route names of route ids (:data:`evidential.routing.ROUTES`)."""
    return [ROUTES[i] for i in ids.tolist()]


def _route_ids(policy: str, u: torch.Tensor, tau1, tau2, fusion) -> torch.Tensor:
    """The routing policy's decisions; ``tau1``/``tau2`` may be tensors ``[P, 1]`` (all pairs at once)."""
    return ROUTING_POLICIES.get(policy)(u, tau1, tau2, fusion)


# ---- fitting -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScaleFit:
    """Result of :func:`fit_evidence_scale`: the chosen ``scale`` and ``power``, their NLL and the NLL of
    the identity transform; ``fitted`` is False when there was nothing to fit on (no gold queries)."""

    scale: float
    power: float
    nll: float
    nll_identity: float
    fitted: bool = True


def fit_evidence_scale(
    data: CalibrationData,
    *,
    lam: float = 0.6,
    rule: str = "lambda",
    scales: Sequence[float] = SCALE_GRID,
    powers: Sequence[float] = POWER_GRID,
) -> ScaleFit:
    """Fit ``e' = s · e^p`` by minimizing the log loss of the Eq 27 confidence against "the selected claim
    is gold" over the queries with a gold reference that judges the selected claim
    (:attr:`CalibrationData.selected_gold`; see the module docstring).

    Exhaustive over ``scales × powers`` (the scale 1 is always among the candidates; a power only when
    listed); ties (within 1e-12) go to the setting closest to the identity (``|log s| + |log p|``). The log
    loss weighs each source dataset (the key's prefix before ``:``) the same, so a large dataset does not
    decide the evidence scale for the others. Without gold queries nothing can be fitted: the identity is
    returned with
    ``fitted=False``.
    """
    scales = sorted({float(s) for s in scales} | {1.0})
    powers = sorted({float(p) for p in powers})
    if any(not (math.isfinite(v) and v > 0) for v in (*scales, *powers)):
        raise CalibrationError("evidence scales and powers must be finite and > 0")
    sub = data.subset(torch.nonzero(data.selected_gold).flatten())
    if len(sub) == 0:
        return ScaleFit(1.0, 1.0, float("nan"), float("nan"), fitted=False)
    weight = _source_weights(sub, torch.ones(len(sub), dtype=torch.bool))
    s_t = torch.tensor(scales, dtype=torch.float64)
    best: tuple | None = None
    ident = float("nan")
    if 1.0 not in powers:  # the identity's loss is reported all the same
        _, conf, correct = fused_outputs(sub, 1.0, 1.0, lam, rule)
        ident = float(_nll(conf, correct, weight))
    for p in powers:
        _, conf, correct = fused_outputs(sub, s_t, p, lam, rule)
        nll = _nll(conf, correct, weight)  # [S]
        for i, s in enumerate(scales):
            v = float(nll[i])
            if s == 1.0 and p == 1.0:
                ident = v
            key = (round(v, 12), abs(math.log(s)) + abs(math.log(p)), s, p)
            if best is None or key < best:
                best = key
    assert best is not None
    return ScaleFit(scale=best[2], power=best[3], nll=best[0], nll_identity=ident)


@dataclass(frozen=True)
class ThresholdFit:
    """Result of :func:`fit_thresholds`: ``lam``, ``tau1``, ``tau2``, their route accuracy (each source
    weighted equally) and the ECE of the fused confidence at that λ."""

    lam: float
    tau1: float
    tau2: float
    route_accuracy: float
    ece: float


def _ece(conf: torch.Tensor, correct: torch.Tensor) -> float:
    return expected_calibration_error(conf.tolist(), correct.tolist())


def fit_thresholds(
    data: CalibrationData,
    *,
    scale: float = 1.0,
    power: float = 1.0,
    rule: str = "lambda",
    policy: str = "paper",
    prior: tuple[float, float, float] = (0.6, 0.35, 0.65),
    lams: Sequence[float] = LAM_GRID,
    taus: Sequence[float] = TAU_GRID,
    data_thresholds: bool = True,
) -> ThresholdFit:
    """Grid search of λ and ``(τ1, τ2)`` (``τ1 < τ2``) on the evidence transformed by ``(scale, power)``.

    Route accuracy only changes where a threshold crosses an observed ``U``, so with ``data_thresholds``
    the candidates are ``taus`` plus the midpoints between consecutive distinct ``U`` values at each λ
    (the exact optimum also when a large evidence scale squeezes ``U`` below the grid's step).

    Objective, lexicographic: route accuracy against the expected routes (higher; each source dataset, the
    key's prefix before ``:``, weighted equally), the ECE of the fused
    confidence over the gold queries that judge the selected claim (:attr:`CalibrationData.selected_gold`;
    lower), then the L1 distance of ``(λ, τ1, τ2)`` to ``prior`` (the
    configured values). One batched fusion per λ; all threshold pairs are routed in one policy call.
    λ is searched for the ``lambda`` rule only (the other rules keep ``prior[0]``, which they ignore).
    """
    if len(data) == 0:
        raise CalibrationError("no calibration queries: nothing to fit the thresholds on")
    if rule not in FUSION_RULES:
        raise CalibrationError(f"unknown fusion rule {rule!r}; rules are {', '.join(FUSION_RULES.names())}")
    if policy not in ROUTING_POLICIES:
        raise CalibrationError(
            f"unknown routing policy {policy!r}; policies are {', '.join(ROUTING_POLICIES.names())}"
        )
    lam0, t10, t20 = (float(x) for x in prior)
    lam_grid = sorted({float(x) for x in lams} | {lam0}) if rule == "lambda" else [lam0]
    if any(not 0 <= x <= 1 for x in lam_grid):
        raise CalibrationError("λ values must lie in [0, 1]")
    base = {float(t) for t in taus} | {t10, t20}
    gold_q = data.selected_gold
    weight = _source_weights(data, torch.ones(len(data), dtype=torch.bool))
    best: tuple | None = None
    for lam in lam_grid:
        res, conf, correct = fused_outputs(data, scale, power, lam, rule)
        tau_grid = set(base)
        if data_thresholds:
            u = sorted(set(res.uncertainty.tolist()))
            tau_grid |= {round((a + b) / 2, 12) for a, b in zip(u, u[1:])}
        tau_grid = sorted(tau_grid)
        pairs = [(a, b) for a in tau_grid for b in tau_grid if 0 <= a < b <= 1]
        if not pairs:
            raise CalibrationError("the threshold grid holds no pair with 0 <= tau1 < tau2 <= 1")
        t1 = torch.tensor([a for a, _ in pairs], dtype=torch.float64).view(-1, 1)
        t2 = torch.tensor([b for _, b in pairs], dtype=torch.float64).view(-1, 1)
        ece = round(_ece(conf[gold_q], correct[gold_q]), 12)
        ids = _route_ids(policy, res.uncertainty.unsqueeze(0), t1, t2, res)  # [P, B]
        hits = ((ids == data.expected.unsqueeze(0)).double() * weight).sum(-1).round(decimals=12)  # [P]
        top = float(hits.max())
        for i in torch.nonzero(hits == top).flatten().tolist():
            a, b = pairs[i]
            key = (-top, ece, round(abs(lam - lam0) + abs(a - t10) + abs(b - t20), 12), lam, a, b)
            if best is None or key < best:
                best = key
    assert best is not None
    return ThresholdFit(lam=best[3], tau1=best[4], tau2=best[5], route_accuracy=-best[0], ece=best[1])


def _contested(data: CalibrationData, belief: torch.Tensor) -> torch.Tensor | None:
    """The claims only edited copies back (:func:`evidential.copy_contested`), None without copies."""
    if not bool(data.copies.any()):
        return None
    merged = merge_copies(data.evidence, data.copies, data.chunk_mask)
    return copy_contested(belief, merged, data.copies, data.chunk_mask)


def _stated(
    data: CalibrationData,
    belief,
    routes,
    ratio: float,
    ratio_yes_no: float | None,
    witnessed: torch.Tensor | None = None,
) -> torch.Tensor:
    """The stated sets of routed answers (:func:`evidential.stated_mask` at ``ratio``, at ``ratio_yes_no``
    for yes/no frames when given; ``witnessed`` claims (:func:`witness_mask`) stated below the bar in open
    frames; claims only edited copies back left out, :func:`evidential.copy_contested` on ``data.copies``)."""
    contested = _contested(data, belief)
    wit = None if witnessed is None else witnessed & ~data.yes_no.unsqueeze(-1)
    stated = stated_mask(belief, ratio, data.claim_mask, routes, contested, wit)
    if ratio_yes_no is not None and bool(data.yes_no.any()):
        stated_yn = stated_mask(belief, ratio_yes_no, data.claim_mask, routes, contested)
        stated = torch.where(data.yes_no.unsqueeze(-1), stated_yn, stated)
    return stated


def answer_reader(data: CalibrationData, belief: torch.Tensor) -> torch.Tensor:
    """Per query: the reader score of its answer (:func:`~training.calibration.apply.answer_reader_score`
    of the answer's claim: the highest-mass claim that edited copies do not contest, as the pipeline
    commits to); NaN where its chunks have no reader score."""
    selected = select_uncontested(belief.masked_fill(~data.claim_mask, 0.0), _contested(data, belief))
    evidence = data.evidence * data.chunk_mask.unsqueeze(-1)
    return answer_reader_score(evidence, data.reader, selected)


def set_hits(
    data: CalibrationData,
    belief: torch.Tensor,
    routes: torch.Tensor,
    ratio: float,
    ratio_yes_no: float | None = None,
    witnessed: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per gold query: the stated set (:func:`_stated`: :func:`evidential.stated_mask` at ``ratio`` on the
    routed answer, at ``ratio_yes_no`` for yes/no frames when given, claims only edited copies back left
    out) is exactly the query's gold claims — every gold claim of the frame stated, no other claim — and
    the frame holds every gold answer (``data.complete``)."""
    stated = _stated(data, belief, routes, ratio, ratio_yes_no, witnessed)
    gold = data.gold & data.claim_mask
    return ((stated == gold) | ~data.claim_mask).all(-1) & gold.any(-1) & data.complete


def answer_hits(
    data: CalibrationData,
    belief: torch.Tensor,
    routes: torch.Tensor,
    ratio: float,
    ratio_yes_no: float | None = None,
    witnessed: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per query: the routed answer states a right claim — the stated set of :func:`set_hits` (same bars,
    same copy rule) holds at least one claim of ``data.truth`` (the gold claims, but the dataset's own
    answer where the gold reference is a conflict's sides); an abstention never does. This is what a
    response's accuracy measures (a gold answer is in it), so the isotonic map is fitted to it: the
    calibrated confidence is the probability that the answer as stated is right."""
    stated = _stated(data, belief, routes, ratio, ratio_yes_no, witnessed)
    return (stated & data.truth & data.claim_mask).any(-1)


def stated_mass(
    data: CalibrationData,
    belief: torch.Tensor,
    routes: torch.Tensor,
    ratio: float,
    ratio_yes_no: float | None = None,
    witnessed: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per query: the fused mass of the stated set (the stated sets of :func:`set_hits`), ``Σ_{j stated}
    b_j`` — the belief that the answer as stated holds the truth (singleton masses add up over a set of
    claims); the top claim's mass when one claim is stated, 0 on an abstention."""
    stated = _stated(data, belief, routes, ratio, ratio_yes_no, witnessed)
    return (belief * stated.to(belief.dtype)).sum(-1)


def _sources(data: CalibrationData) -> list[str]:
    """Per query: its source dataset, the key's prefix before ``:`` (``""`` for a key without one)."""
    return [k.split(":", 1)[0] if ":" in k else "" for k in data.keys]


def _source_weights(data: CalibrationData, among: torch.Tensor | None = None) -> torch.Tensor:
    """Per query: ``1 / (sources · queries of its source)`` for the queries of ``among`` (bool ``[B]``;
    default: the gold queries), 0 for the others, so that each source dataset (the key's prefix before
    ``:``) weighs the same and the weights sum to 1 (0 when ``among`` is empty)."""
    use = (data.has_gold if among is None else among).tolist()
    sources = _sources(data)
    picked = [s for s, ok in zip(sources, use) if ok]
    counts = {s: picked.count(s) for s in set(picked)}
    return torch.tensor(
        [1.0 / (len(counts) * counts[s]) if ok else 0.0 for s, ok in zip(sources, use)],
        dtype=torch.float64,
    )


def fit_state_ratio(
    data: CalibrationData,
    belief: torch.Tensor,
    routes: torch.Tensor,
    prior: float = 0.5,
    ratios: Sequence[float] = STATE_RATIO_GRID,
) -> tuple[float, float]:
    """Grid search of the stated-set bar on routed fused masses: the ratio whose stated sets equal the gold
    sets (:func:`set_hits`) on the largest share of gold queries, each source weighted equally (the source
    of a query is its key's prefix before ``:``, e.g. ``ramdocs:…``; a large yes/no dataset must not decide
    the bar for the others), ties broken by closeness to ``prior``. Returns ``(ratio, that macro-averaged
    set accuracy)``; ``(prior, 0.0)`` without a gold query."""
    g = data.has_gold
    if not bool(g.any()):
        return float(prior), 0.0
    weight = _source_weights(data)
    best: tuple[float, float, float] | None = None
    for r in sorted({float(x) for x in ratios} | {float(prior)}):
        if not 0.0 <= r <= 1.0:
            raise CalibrationError(f"stated-set ratios must lie in [0, 1]; got {r}")
        acc = round(float((set_hits(data, belief, routes, r).double() * weight).sum()), 12)
        key = (-acc, round(abs(r - prior), 12), r)
        if best is None or key < best:
            best = key
    assert best is not None
    return best[2], -best[0]


def fit_witness_ratio(
    data: CalibrationData,
    belief: torch.Tensor,
    routes: torch.Tensor,
    ratio: float,
    scale: float = 1.0,
    power: float = 1.0,
    ratios: Sequence[float] = WITNESS_RATIO_GRID,
) -> tuple[float | str, float]:
    """Grid search of the witness bar (:func:`evidential.witnessed_claims`) at the stated-set bar
    ``ratio``: the bar in ``ratios``, or ``"off"``, whose stated sets equal the gold sets
    (:func:`set_hits`) on the largest share of gold queries, each source weighted equally as in
    :func:`fit_state_ratio`; ties go to ``"off"``, then to the higher bar (fewer claims stated). The
    witnesses are read from the evidence as fused at ``(scale, power)``. Returns ``(bar or "off", that
    macro-averaged set accuracy)``; ``("off", 0.0)`` without a gold query."""
    if not bool(data.has_gold.any()):
        return "off", 0.0
    weight = _source_weights(data)
    best: tuple[float, float | str] | None = None
    for w in ("off", *sorted({float(x) for x in ratios}, reverse=True)):
        if w != "off" and not 0.0 <= w <= 1.0:
            raise CalibrationError(f"witness ratios must lie in [0, 1]; got {w}")
        wit = witness_mask(data, scale, power, w)
        acc = round(float((set_hits(data, belief, routes, ratio, None, wit).double() * weight).sum()), 12)
        if best is None or acc > best[0]:  # strictly better only: "off", then higher bars, win ties
            best = (acc, w)
    assert best is not None
    return best[1], best[0]


def fit_isotonic(confidence: Sequence[float], correct: Sequence[bool]) -> dict[str, list[float]]:
    """Isotonic regression (scikit-learn, increasing, outputs in [0, 1], clipped outside the fitted range)
    of correctness on confidence; returns its breakpoints ``{"x": [...], "y": [...]}``, which
    :meth:`Calibration.calibrated_confidence` interpolates linearly (as ``IsotonicRegression.predict``).

    Raises:
        CalibrationError: Fewer than 2 samples or fewer than 2 distinct confidences.
    """
    from sklearn.isotonic import IsotonicRegression

    x = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(correct, dtype=np.float64)
    if x.shape != y.shape:
        raise CalibrationError(f"confidence and correct differ in length: {x.shape} vs {y.shape}")
    if x.size < 2 or np.unique(x).size < 2:
        raise CalibrationError(
            f"isotonic regression needs at least 2 queries with a gold answer and 2 distinct confidences; "
            f"got {x.size} ({np.unique(x).size} distinct): give more calibration data or pass --no-isotonic"
        )
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(x, y)
    return {"x": [float(v) for v in iso.X_thresholds_], "y": [float(v) for v in iso.y_thresholds_]}


def fit_route_isotonic(
    confidence: torch.Tensor,
    correct: torch.Tensor,
    routes: torch.Tensor,
    min_queries: int = ROUTE_MAP_MIN_QUERIES,
) -> dict[str, dict[str, list[float]]] | None:
    """One isotonic map per route (:func:`fit_isotonic` on that route's answers) for the answering routes
    (direct, conflict) with at least ``min_queries`` queries and 2 distinct confidences; ``None`` when no
    route qualifies. A direct answer's fused mass and a conflict-aware answer's mean different things (a
    conflict moves mass into U, so a conflict answer that states the right sides can hold little mass), and
    one pooled monotone map cannot serve both; a route with too few answers keeps the pooled map."""
    maps: dict[str, dict[str, list[float]]] = {}
    for name in ROUTES[:2]:
        q = routes == ROUTES.index(name)
        if int(q.sum()) < min_queries or len(set(confidence[q].tolist())) < 2:
            continue
        maps[name] = fit_isotonic(confidence[q].tolist(), correct[q].tolist())
    return maps or None


def fit_reader_map(
    confidence: torch.Tensor,
    reader: torch.Tensor,
    correct: torch.Tensor,
    min_queries: int = READER_MAP_MIN_QUERIES,
) -> dict[str, Any] | None:
    """The reader map (:func:`~training.calibration.apply.reader_map`): a logistic regression
    (scikit-learn, L2, C = 1) of correctness on the logit of the mapped confidence and the answer's reader
    score, over the answers that have both (confidence > 0, a finite reader score). The fused mass says how
    much the chunks agree on a claim; the reader score says whether the chunk that states it answers this
    question at all — a multi-hop question's first-hop entity is read with a low score, a direct answer
    with a high one — which the mass cannot tell. ``None`` with fewer than ``min_queries`` such answers or
    only one outcome among them.

    Args:
        confidence: ``[N]`` mapped confidences (after the isotonic map).
        reader: ``[N]`` the answers' reader scores (NaN: none).
        correct: ``[N]`` bool, the answer as stated is right.
    """
    from sklearn.linear_model import LogisticRegression

    c = torch.as_tensor(confidence, dtype=torch.float64)
    r = torch.as_tensor(reader, dtype=torch.float64)
    y = torch.as_tensor(correct, dtype=torch.bool)
    use = (c > 0) & torch.isfinite(r)
    if int(use.sum()) < min_queries or len(set(y[use].tolist())) < 2:
        return None
    cc = c[use].clamp(READER_EPS, 1.0 - READER_EPS)
    x = torch.stack([torch.log(cc / (1.0 - cc)), r[use].clamp(*READER_CLIP)], -1).numpy()
    lr = LogisticRegression(C=1.0).fit(x, y[use].numpy())
    return {
        "coef": [float(v) for v in lr.coef_[0]],
        "intercept": float(lr.intercept_[0]),
        "clip": list(READER_CLIP),
        "eps": READER_EPS,
        "queries": int(use.sum()),
    }


# ---- evaluation ----------------------------------------------------------------------------------------
def evaluate_parameters(
    data: CalibrationData,
    *,
    scale: float = 1.0,
    power: float = 1.0,
    lam: float = 0.6,
    tau1: float = 0.35,
    tau2: float = 0.65,
    rule: str = "lambda",
    policy: str = "paper",
    isotonic: dict[str, list[float]] | None = None,
    state_ratio: float | None = None,
    state_ratio_yes_no: float | None = None,
    state_witness_ratio: float | str | None = None,
    confidence_input: str = "top",
    isotonic_routes: dict[str, dict[str, list[float]]] | None = None,
    reader_map: dict[str, Any] | None = None,
    details: bool = False,
) -> dict[str, Any]:
    """Metrics of one setting: ``route_accuracy`` (all queries), ``routes`` (counts), and over the queries with
    a gold reference ``set_accuracy`` (with ``state_ratio``: :func:`set_hits`), ``selected_accuracy`` (the
    selected claim is gold), ``answer_accuracy`` (with ``state_ratio``: the answer as stated is right,
    :func:`answer_hits`; else the selected claim; with ``state_witness_ratio`` the witnessed claims are
    stated too), ``ece`` / ``nll`` / ``brier`` of the final confidence
    (isotonic-mapped when ``isotonic`` is given; by each answer's route's map in ``isotonic_routes``; then
    by ``reader_map`` where the answer has a reader score) against ``answer_accuracy``'s outcome, and ``ece_fused`` of
    the Eq 27 confidence itself against the selected claim (the trainer's ECE). ``details=True`` adds the
    per-query arrays ``_confidence``, ``_correct`` (gold queries) and ``_routes`` (all queries)."""
    res, conf, correct = fused_outputs(data, scale, power, lam, rule)
    ids = _route_ids(policy, res.uncertainty, tau1, tau2, res)
    g = data.has_gold
    selected_ok = correct[g]
    c_input = conf
    wit = witness_mask(data, scale, power, state_witness_ratio)
    if state_ratio is not None:  # the answer as stated is right (what the isotonic map is fitted to)
        correct = answer_hits(data, res.belief, ids, state_ratio, state_ratio_yes_no, wit)
        if confidence_input == "stated":
            c_input = stated_mass(data, res.belief, ids, state_ratio, state_ratio_yes_no, wit)
    c_fused, ok = conf[g], correct[g]
    reader = answer_reader(data, res.belief)[g] if reader_map is not None else None
    c_final = calibrated_confidence(
        c_input[g], _route_names(ids[g]), isotonic, isotonic_routes, reader_map, reader
    )
    n_gold = int(g.sum())
    out: dict[str, Any] = {
        "queries": len(data),
        "queries_with_gold": n_gold,
        "route_accuracy": float((ids == data.expected).double().mean()) if len(data) else 0.0,
        "routes": {name: int((ids == i).sum()) for i, name in enumerate(ROUTES)},
        "selected_accuracy": float(selected_ok.double().mean()) if n_gold else 0.0,
        "answer_accuracy": float(ok.double().mean()) if n_gold else 0.0,
        "mean_confidence": float(c_final.mean()) if n_gold else 0.0,
        "ece": _ece(c_final, ok),
        "ece_fused": _ece(c_fused, selected_ok),
        "nll": float(_nll(c_final, ok)) if n_gold else 0.0,
        "brier": float(((c_final - ok.double()) ** 2).mean()) if n_gold else 0.0,
    }
    if state_ratio is not None:
        hits = set_hits(data, res.belief, ids, state_ratio, state_ratio_yes_no, wit)[g]
        out["set_accuracy"] = float(hits.double().mean()) if n_gold else 0.0
    if details:
        out["_confidence"] = c_final.tolist()
        out["_correct"] = ok.tolist()
        out["_routes"] = ids.tolist()
    return out


@dataclass
class _Structure:
    """The fusion setting fitted at one evidence transform (:func:`fit_calibration`'s steps 2–3) and its
    outputs on the calibration data."""

    scale: ScaleFit
    thresholds: ThresholdFit
    res: Any
    conf: torch.Tensor
    correct: torch.Tensor
    routes: torch.Tensor
    ratio: float
    set_acc: float
    witness: float | str | None
    set_acc_witness: float | None
    ratio_yn: float | None
    set_acc_yn: float | None
    macro_set_accuracy: float


def _fit_structure(
    data: CalibrationData,
    sf: ScaleFit,
    thresholds: dict[str, Any],
    *,
    state_prior: float,
    ratios: Sequence[float],
    fixed_state_ratio: float | None,
    witness_ratios: Sequence[float] | None,
) -> _Structure:
    """λ, τ1, τ2 (:func:`fit_thresholds` with the settings ``thresholds``), the stated-set bars
    (:func:`fit_state_ratio`) and the witness bar (:func:`fit_witness_ratio`) on the evidence transformed by
    ``sf``, and the share of gold queries whose routed answer states exactly their gold set at those bars
    (:func:`set_hits`), each source weighted equally."""
    tf = fit_thresholds(data, scale=sf.scale, power=sf.power, **thresholds)
    res, conf, correct = fused_outputs(data, sf.scale, sf.power, tf.lam, thresholds["rule"])
    routes = _route_ids(thresholds["policy"], res.uncertainty, tf.tau1, tf.tau2, res)
    # one bar for open frames, one for yes/no frames (answers that exclude each other), each on its queries;
    # the yes/no bar on the questions with one right answer: a yes/no conflict whose gold is both answers
    # (e.g. a WikiContradict question given its two sides) would pull it to stating "yes" and "no" everywhere
    yn = data.yes_no
    open_q, yn_q = torch.nonzero(~yn).flatten(), torch.nonzero(yn).flatten()
    yn_fit = torch.nonzero(yn & ((data.gold & data.claim_mask).sum(-1) <= 1)).flatten()
    if fixed_state_ratio is not None:
        open_prior, open_ratios = float(fixed_state_ratio), (float(fixed_state_ratio),)
    else:
        open_prior, open_ratios = state_prior, ratios
    ratio, set_acc = (
        fit_state_ratio(data.subset(open_q), res.belief[open_q], routes[open_q], open_prior, open_ratios)
        if len(open_q)
        else (float(open_prior), 0.0)
    )
    witness, set_acc_witness = None, None
    if witness_ratios is not None and len(open_q):
        witness, set_acc_witness = fit_witness_ratio(
            data.subset(open_q), res.belief[open_q], routes[open_q], ratio, sf.scale, sf.power, witness_ratios
        )
    if not len(yn_q):
        ratio_yn, set_acc_yn = None, None
    elif len(yn_fit):
        ratio_yn, set_acc_yn = fit_state_ratio(
            data.subset(yn_fit), res.belief[yn_fit], routes[yn_fit], state_prior, ratios
        )
    else:  # every yes/no question is a conflict: nothing to fit the bar on, the prior stays
        ratio_yn, set_acc_yn = float(state_prior), 0.0
    wit = witness_mask(data, sf.scale, sf.power, witness)
    hits = set_hits(data, res.belief, routes, ratio, ratio_yn, wit)
    macro = round(float((hits.double() * _source_weights(data)).sum()), 12)
    return _Structure(
        sf,
        tf,
        res,
        conf,
        correct,
        routes,
        ratio,
        set_acc,
        witness,
        set_acc_witness,
        ratio_yn,
        set_acc_yn,
        macro,
    )


def fit_calibration(
    data: CalibrationData,
    *,
    rule: str = "lambda",
    policy: str = "paper",
    prior: tuple[float, float, float] = (0.6, 0.35, 0.65),
    fit_power: bool = True,
    isotonic: bool = True,
    scales: Sequence[float] = SCALE_GRID,
    powers: Sequence[float] = POWER_GRID,
    lams: Sequence[float] = LAM_GRID,
    taus: Sequence[float] = TAU_GRID,
    data_thresholds: bool = True,
    state_prior: float = 0.5,
    ratios: Sequence[float] = STATE_RATIO_GRID,
    fixed_state_ratio: float | None = None,
    witness_ratios: Sequence[float] | None = WITNESS_RATIO_GRID,
    route_maps: bool = True,
    reader_maps: bool = True,
) -> dict[str, Any]:
    """The steps in order (scale/power at the prior λ → λ, τ1, τ2 → the stated-set bar → the witness bar
    → isotonic) on ``data``. With ``fixed_state_ratio`` the open frames' bar is that value, not fitted (the
    yes/no frames' bar still is); its set accuracy is reported all the same. With ``witness_ratios`` None
    the witness bar is not fitted (``state_witness_ratio`` None: the run config's stays). With ``route_maps``
    (and ``isotonic``) each answering route with enough gold queries gets a map of its own
    (:func:`fit_route_isotonic`, ``isotonic_routes``). With ``reader_maps`` (and a fitted isotonic map) the
    mapped confidence is corrected by the answer's reader score where the evaluator gave one
    (:func:`fit_reader_map`, ``reader_map``; None without enough such answers).
    The evidence scale is fitted by log loss at each power of ``powers`` (only 1 without ``fit_power``), the
    rest of the setting at that transform, and the power whose answers state exactly the gold set most often,
    each source weighted equally (ties: the lower log loss, then the power closest to 1), is kept: the power
    decides how a chunk's evidence spreads over claims, which the top claim's log loss cannot see.

    Returns the fitted parameters ``{scale, power, lam, tau1, tau2, rule, policy, isotonic, state_ratio,
    state_ratio_yes_no, state_witness_ratio, confidence_input, isotonic_routes, reader_map}``
    (``isotonic_routes`` None without a route map; ``state_ratio_yes_no`` None without a yes/no query;
    ``state_witness_ratio`` a bar or ``"off"``)
    and, under ``"fit"``, the objectives reached (NLL, route accuracy, ECE, set accuracy) and notes on
    steps that were skipped.
    """
    notes: list[str] = []
    thresholds = dict(
        rule=rule, policy=policy, prior=prior, lams=lams, taus=taus, data_thresholds=data_thresholds
    )
    fits = [
        _fit_structure(
            data,
            fit_evidence_scale(data, lam=prior[0], rule=rule, scales=scales, powers=(p,)),
            thresholds,
            state_prior=state_prior,
            ratios=ratios,
            fixed_state_ratio=fixed_state_ratio,
            witness_ratios=witness_ratios,
        )
        for p in sorted({float(p) for p in (powers if fit_power else (1.0,))})
    ]
    # the power whose answers state the right sets most often, each source weighted equally; ties: the lower
    # log loss, then the power closest to 1
    st = min(
        fits, key=lambda f: (-f.macro_set_accuracy, round(f.scale.nll, 12), abs(math.log(f.scale.power)))
    )
    sf, tf, res, conf, correct, routes = st.scale, st.thresholds, st.res, st.conf, st.correct, st.routes
    if not sf.fitted:
        notes.append("no query has a gold reference: evidence scale left at 1 (identity)")
    open_q, yn_q = torch.nonzero(~data.yes_no).flatten(), torch.nonzero(data.yes_no).flatten()
    ratio, set_acc, witness, set_acc_witness = st.ratio, st.set_acc, st.witness, st.set_acc_witness
    ratio_yn, set_acc_yn = st.ratio_yn, st.set_acc_yn
    iso = iso_routes = reader_params = None
    if isotonic:
        g = data.has_gold
        # the answer as stated: is it right, and the fused mass of what it states (each kind of frame at its
        # own bar)
        answered, mass = correct.clone(), conf.clone()
        for q, r, w in ((open_q, ratio, witness), (yn_q, ratio_yn, None)):
            if len(q):
                sub = data.subset(q)
                wit = witness_mask(sub, sf.scale, sf.power, w)
                answered[q] = answer_hits(sub, res.belief[q], routes[q], r, None, wit)
                mass[q] = stated_mass(sub, res.belief[q], routes[q], r, None, wit)
        try:
            iso = fit_isotonic(mass[g].tolist(), answered[g].tolist())
            if route_maps:
                iso_routes = fit_route_isotonic(mass[g], answered[g], routes[g])
        except CalibrationError as exc:
            notes.append(f"isotonic regression skipped: {exc}")
        if iso is not None and reader_maps:
            mapped = route_isotonic_map(mass[g], _route_names(routes[g]), iso, iso_routes)
            answering = routes[g] != ROUTES.index("abstain")
            reader = answer_reader(data, res.belief)[g]
            reader = torch.where(answering, reader, torch.full_like(reader, math.nan))
            reader_params = fit_reader_map(mapped, reader, answered[g])
            if reader_params is None:
                notes.append(
                    f"reader map skipped: fewer than {READER_MAP_MIN_QUERIES} gold answers with a reader score "
                    "(or one outcome among them)"
                )
    return {
        "scale": sf.scale,
        "power": sf.power,
        "lam": tf.lam,
        "tau1": tf.tau1,
        "tau2": tf.tau2,
        "rule": rule,
        "policy": policy,
        "isotonic": iso,
        "state_ratio": ratio,
        "state_ratio_yes_no": ratio_yn,
        "state_witness_ratio": witness,
        "confidence_input": "stated",
        "isotonic_routes": iso_routes,
        "reader_map": reader_params,
        "fit": {
            "nll_identity": sf.nll_identity,
            "nll_scaled": sf.nll,
            "route_accuracy": tf.route_accuracy,
            "ece_fused": tf.ece,
            "set_accuracy": set_acc,
            "set_accuracy_witness": set_acc_witness,
            "set_accuracy_yes_no": set_acc_yn,
            "notes": notes,
        },
    }


def fold_of(keys: Sequence[str], folds: int) -> list[int]:
    """Deterministic, balanced fold ids: queries sorted by the sha256 of their key, dealt round-robin."""
    order = sorted(range(len(keys)), key=lambda i: hashlib.sha256(keys[i].encode()).hexdigest())
    out = [0] * len(keys)
    for pos, i in enumerate(order):
        out[i] = pos % folds
    return out


_PARAM_KEYS = (
    "scale",
    "power",
    "lam",
    "tau1",
    "tau2",
    "rule",
    "policy",
    "isotonic",
    "state_ratio",
    "state_ratio_yes_no",
    "state_witness_ratio",
    "confidence_input",
    "isotonic_routes",
    "reader_map",
)


def _ece_by_source(data: CalibrationData, conf: torch.Tensor, correct: torch.Tensor) -> dict[str, dict]:
    """Per source dataset (the key's prefix before ``:``): its gold queries, their answer accuracy, mean
    confidence and ECE — a pooled ECE can be small while each source's is large."""
    sources = _sources(data)
    out: dict[str, dict] = {}
    for src in sorted(set(sources)):
        q = torch.tensor([s == src for s in sources], dtype=torch.bool) & data.has_gold
        if bool(q.any()):
            out[src] = {
                "queries": int(q.sum()),
                "answer_accuracy": float(correct[q].double().mean()),
                "mean_confidence": float(conf[q].mean()),
                "ece": _ece(conf[q], correct[q]),
            }
    return out


def cross_validate(data: CalibrationData, folds: int = 5, **fit_kwargs: Any) -> dict[str, Any]:
    """``folds``-fold cross-fitting: each query is routed and its confidence calibrated by parameters fitted
    on the other folds (:func:`fit_calibration` with ``fit_kwargs``); metrics pooled over all queries
    (``ece_by_source``: per source dataset too), plus the per-fold parameters. ``_confidence`` / ``_correct`` (gold queries, in data order) feed plots."""
    if folds < 2 or folds > len(data):
        raise CalibrationError(f"cross-validation needs 2 <= folds <= queries ({len(data)}); got {folds}")
    fold = torch.tensor(fold_of(data.keys, folds))
    routes = torch.zeros(len(data), dtype=torch.long)
    conf = torch.zeros(len(data), dtype=torch.float64)
    correct = torch.zeros(len(data), dtype=torch.bool)
    set_ok = torch.zeros(len(data), dtype=torch.bool)
    per_fold = []
    for f in range(folds):
        test = torch.nonzero(fold == f).flatten()
        train = torch.nonzero(fold != f).flatten()
        params = fit_calibration(data.subset(train), **fit_kwargs)
        held = data.subset(test)
        p = {k: params[k] for k in _PARAM_KEYS}
        res, c, _ = fused_outputs(held, p["scale"], p["power"], p["lam"], p["rule"])
        routes[test] = _route_ids(p["policy"], res.uncertainty, p["tau1"], p["tau2"], res)
        bars = (
            p["state_ratio"],
            p["state_ratio_yes_no"],
            witness_mask(held, p["scale"], p["power"], p["state_witness_ratio"]),
        )
        if p["confidence_input"] == "stated":
            c = stated_mass(held, res.belief, routes[test], *bars)
        reader = answer_reader(held, res.belief) if p["reader_map"] is not None else None
        conf[test] = calibrated_confidence(
            c, _route_names(routes[test]), p["isotonic"], p["isotonic_routes"], p["reader_map"], reader
        )
        correct[test] = answer_hits(held, res.belief, routes[test], *bars)
        set_ok[test] = set_hits(held, res.belief, routes[test], *bars)
        per_fold.append(
            {k: v for k, v in p.items() if k not in ("isotonic", "isotonic_routes", "reader_map")}
            | {"queries": len(test)}
        )
    g = data.has_gold
    n_gold = int(g.sum())
    return {
        "folds": folds,
        "queries": len(data),
        "queries_with_gold": n_gold,
        "route_accuracy": float((routes == data.expected).double().mean()),
        "routes": {name: int((routes == i).sum()) for i, name in enumerate(ROUTES)},
        "ece": _ece(conf[g], correct[g]),
        "nll": float(_nll(conf[g], correct[g])) if n_gold else 0.0,
        "brier": float(((conf[g] - correct[g].double()) ** 2).mean()) if n_gold else 0.0,
        "set_accuracy": float(set_ok[g].double().mean()) if n_gold else 0.0,
        "ece_by_source": _ece_by_source(data, conf, correct),
        "per_fold": per_fold,
        "_confidence": conf[g].tolist(),
        "_correct": correct[g].tolist(),
    }


class EvidenceCalibrator:
    """Fit-then-apply wrapper around :func:`fit_calibration` (in the style of torch-uncertainty's
    ``Scaler.fit()`` / ``forward()``).

    ``EvidenceCalibrator(rule=..., policy=..., prior=...).fit(data)`` fits the evidence scale/power, λ, (τ1,
    τ2) and the isotonic map on a :class:`CalibrationData`; then ``calibrator(evidence)`` applies
    ``e' = s · e^p`` and :meth:`confidence` the isotonic map. :attr:`params` holds what a
    :class:`training.calibration.Calibration` stores, :attr:`report` the objectives reached and notes.
    """

    def __init__(
        self,
        *,
        rule: str = "lambda",
        policy: str = "paper",
        prior: tuple[float, float, float] = (0.6, 0.35, 0.65),
        fit_power: bool = True,
        isotonic: bool = True,
        **grids: Any,
    ) -> None:
        self.settings: dict[str, Any] = dict(
            rule=rule, policy=policy, prior=prior, fit_power=fit_power, isotonic=isotonic, **grids
        )
        self.params: dict[str, Any] | None = None
        self.report: dict[str, Any] | None = None

    def fit(self, data: CalibrationData) -> EvidenceCalibrator:
        """Fit on ``data`` (:func:`fit_calibration` with this calibrator's settings); returns ``self``."""
        fitted = fit_calibration(data, **self.settings)
        self.params = {k: fitted[k] for k in _PARAM_KEYS}
        self.report = fitted["fit"]
        return self

    def _fitted(self) -> dict[str, Any]:
        if self.params is None:
            raise CalibrationError("the calibrator is not fitted: call fit(data) first")
        return self.params

    def __call__(self, evidence: torch.Tensor) -> torch.Tensor:
        """``e' = s · e^p`` with the fitted scale and power."""
        p = self._fitted()
        return apply_evidence_transform(evidence, p["scale"], p["power"])

    def confidence(self, confidence):
        """The fitted isotonic map (identity without one) of its input: the stated set's fused mass
        (``params["confidence_input"]``, :func:`stated_mass`)."""
        return isotonic_map(confidence, self._fitted()["isotonic"])

    def evaluate(self, data: CalibrationData, details: bool = False) -> dict[str, Any]:
        """:func:`evaluate_parameters` of the fitted setting on ``data``."""
        return evaluate_parameters(data, **self._fitted(), details=details)

    def cross_validate(self, data: CalibrationData, folds: int = 5) -> dict[str, Any]:
        """:func:`cross_validate` with this calibrator's settings (refits on each fold; ``self`` unchanged)."""
        return cross_validate(data, folds, **self.settings)
