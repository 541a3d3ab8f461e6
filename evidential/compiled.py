"""One-call fusion from raw evidence, with an optional ``torch.compile`` fast path.

:func:`fuse_evidence` = :func:`evidential.opinions_from_evidence` + :func:`evidential.fuse`. With
``compiled=True`` the pure tensor part (Eqs 2-14, 27) runs through ``torch.compile`` (inductor). For the
pairwise rules with a column form (:data:`evidential.COLUMN_RULES`) and small frames (``k·M ≤ 256``) it
compiles :func:`evidential.columns.fuse_columns`, the same equations
unrolled over the static ``k`` and ``M``, which inductor fuses into one vectorised loop over the queries
(only the batch size is dynamic: one compilation per (rule, masks, dtype, k, M, K̄ or not), seconds each).
That loop also checks the evidence (non-negative, finite sum), so the separate validation pass runs only
when the check fails, to raise with the first bad position or to sanitize.
Other rules and larger frames compile the tensor form of :func:`evidential.fusion.fusion_tensors`.
Batches of fewer than two queries and empty frames (``k = 0`` or ``M = 0``) run eagerly: compiling them
would only add graphs. The eager path stays the reference the tests compare the compiled one against.
"""

from __future__ import annotations

import functools
import math

import torch

from evidential.columns import COLUMN_RULES, fuse_columns
from evidential.errors import ConfigError, ShapeError
from evidential.fusion import FUSION_RULES, FusionResult, fusion_tensors, lam_tensor
from evidential.opinions import as_float_tensor, broadcast_mask, opinion_tensors, validate_evidence

__all__ = ["COLUMN_MAX_SIZE", "fuse_evidence"]

COLUMN_MAX_SIZE = 256
"""Largest ``k·M`` compiled in column form (unrolling makes compile time grow with ``k·M``)."""


def _kernel(evidence, claim_mask, chunk_mask, lam, rule: str):
    _, belief, vacuity = opinion_tensors(evidence, claim_mask, chunk_mask)
    state, steps, kbar, confidence, selected = fusion_tensors(
        belief, vacuity, chunk_mask, lam, FUSION_RULES.get(rule)
    )
    return (*state, steps, kbar, confidence, selected)


@functools.cache
def _compiled(rule: str):
    return torch.compile(functools.partial(_kernel, rule=rule), dynamic=True)


@functools.cache
def _compiled_columns(rule: str, pairwise: bool):
    # dynamic=True keeps the batch size symbolic; the unrolled loops specialise k and M. The two inductor
    # options keep the graph in ONE vectorised loop: without them inductor stops fusing after 64 nodes
    # (each cut writes and re-reads [N] buffers) and gives up vectorising the k·M strided column loads.
    return torch.compile(
        functools.partial(fuse_columns, rule=rule, pairwise=pairwise),
        dynamic=True,
        options={"cpp.enable_tiling_heuristics": False, "max_fusion_size": 4096},
    )


def _columns(e, cm, km, lam_t, rule: str, pairwise: bool):
    """The compiled column form on the flattened batch, reshaped back to the leading dims; last comes the
    0-dim bool "every evidence value is finite and non-negative"."""
    lead, k, m = tuple(e.shape[:-2]), e.shape[-2], e.shape[-1]
    n = math.prod(lead)
    lam_c = lam_t if lam_t.ndim == 0 else lam_t.broadcast_to(lead).reshape(n)
    out = _compiled_columns(rule, pairwise)(
        e.reshape(n, k, m),
        None if cm is None else cm.reshape(n, m),
        None if km is None else km.reshape(n, k),
        lam_c,
    )
    belief, theta, ignorance, conflict, steps, kbar, confidence, selected, good = out
    return (
        belief.reshape(lead + (m,)),
        *(x.reshape(lead) for x in (theta, ignorance, conflict)),
        steps.reshape(lead + (k - 1,)),
        None if kbar is None else kbar.reshape(lead),
        confidence.reshape(lead),
        selected.reshape(lead),
        good,
    )


def _column_shape(e: torch.Tensor, rule: str) -> bool:
    """Whether ``rule`` and the shape of ``e`` suit the column form (see the module docstring)."""
    lead, k, m = tuple(e.shape[:-2]), e.shape[-2], e.shape[-1]
    return rule in COLUMN_RULES and 1 <= k * m <= COLUMN_MAX_SIZE and math.prod(lead) >= 2


def _lam_fits(lam_t: torch.Tensor, lead: tuple[int, ...]) -> bool:
    try:
        return lam_t.ndim == 0 or torch.broadcast_shapes(lam_t.shape, lead) == lead
    except RuntimeError:
        return False


def fuse_evidence(
    evidence: torch.Tensor,
    lam: float | torch.Tensor = 0.6,
    rule: str = "lambda",
    claim_mask: torch.Tensor | None = None,
    chunk_mask: torch.Tensor | None = None,
    *,
    sanitize: bool = False,
    compiled: bool = False,
    pairwise: bool = True,
) -> FusionResult:
    """Opinions (Eqs 2-6) and fusion (Eqs 7-14, 27) of evidence ``[..., k, M]`` in one call.

    Args:
        evidence: Non-negative evidence ``[..., k, M]``.
        lam: λ ∈ [0, 1] (float or a tensor broadcastable to the batch shape).
        rule: A name from :data:`evidential.FUSION_RULES`.
        claim_mask: Bool ``[..., M]`` of real claims (``None``: all real).
        chunk_mask: Bool ``[..., k]`` of real chunks (``None``: all real).
        sanitize: Map bad evidence to ignorance with a warning instead of raising.
        compiled: Run the tensor math through ``torch.compile`` (needs a C++ compiler on CPU). In column
            form the evidence check runs inside the compiled loop; the full check (naming the first bad
            position) runs only when that one finds a bad value.
        pairwise: Compute the diagnostic ``K̄`` (Eq 14). When false, ``mean_pairwise_conflict`` is NaN and
            the compiled path skips its cost; every other field is unchanged.

    Returns:
        The same :class:`FusionResult` as ``fuse(opinions_from_evidence(...))`` (its ``claim_mask`` is a
        broadcast all-true view when ``claim_mask`` is ``None``).

    Raises:
        ShapeError: Evidence with fewer than 2 dimensions or masks of the wrong shape.
        InvalidEvidenceError: NaN, infinite or negative evidence at an unmasked position (``sanitize=False``).
        UnknownNameError: ``rule`` is not in :data:`evidential.FUSION_RULES`.
        ConfigError: ``lam`` outside [0, 1].
    """
    e = as_float_tensor(evidence)
    if e.ndim < 2:
        raise ShapeError(f"evidence must have shape [..., k, M]; got shape {tuple(e.shape)}")
    FUSION_RULES.get(rule)  # fail early on unknown names
    lead, k, m = tuple(e.shape[:-2]), e.shape[-2], e.shape[-1]
    cm = (
        None
        if claim_mask is None
        else broadcast_mask(claim_mask, lead + (m,), e.device, "claim_mask", "[..., M]")
    )
    km = (
        None
        if chunk_mask is None
        else broadcast_mask(chunk_mask, lead + (k,), e.device, "chunk_mask", "[..., k]")
    )
    valid = None
    if cm is not None or km is not None:
        valid = (cm.unsqueeze(-2) if cm is not None else True) & (
            km.unsqueeze(-1) if km is not None else True
        )
    try:
        lam_t = lam_tensor(lam, e)
    except ConfigError:
        validate_evidence(e, valid, sanitize=sanitize)  # bad evidence is reported first
        raise
    columns = compiled and _column_shape(e, rule) and _lam_fits(lam_t, lead)
    if not columns:
        e = validate_evidence(e, valid, sanitize=sanitize)
    cm_out = torch.ones((), dtype=torch.bool, device=e.device).expand(lead + (m,)) if cm is None else cm
    # all-true masks give the same numbers as no mask: drop them (fewer compiled variants, less work)
    if km is not None and bool(km.all()):
        km = None
    if cm is not None and bool(cm.all()):
        cm = None
    if columns:
        *out, good = _columns(e, cm, km, lam_t, rule, pairwise)
        if not bool(good):  # a NaN, infinite or negative value somewhere: check (raise) or sanitize
            checked = validate_evidence(e, valid, sanitize=sanitize)
            if checked is not e:
                *out, _ = _columns(checked, cm, km, lam_t, rule, pairwise)
    elif compiled and math.prod(lead) >= 2 and k * m > 0:
        out = _compiled(rule)(e, cm, km, lam_t)
    else:
        out = _kernel(e, cm, km, lam_t, rule)
    singletons, theta, ignorance, conflict, steps, kbar, confidence, selected = out
    if not pairwise:
        kbar = torch.full_like(theta, math.nan)
    return FusionResult(
        belief=singletons,
        uncertainty=theta,
        ignorance=ignorance,
        conflict=conflict,
        step_conflict=steps,
        mean_pairwise_conflict=kbar,
        confidence=confidence,
        selected=selected,
        claim_mask=cm_out,
        rule=rule,
        lam=lam,
    )
