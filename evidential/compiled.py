"""One-call fusion from raw evidence, with an optional ``torch.compile`` fast path.

:func:`fuse_evidence` = :func:`evidential.opinions_from_evidence` + :func:`evidential.fuse`. With
``compiled=True`` the pure tensor part (Eqs 2-14, 27; no validation, no host sync) runs through
``torch.compile`` (inductor), which fuses the fold over ``[B, k, M]`` into a few loops over the batch: the
fast path of ``bench/fusion.py``. The eager path stays the reference the tests compare it against.
Compilation happens once per (rule, masked) combination and takes seconds; shapes are dynamic.
"""

from __future__ import annotations

import functools

import torch

from evidential.errors import ShapeError
from evidential.fusion import FUSION_RULES, FusionResult, fusion_tensors, lam_tensor
from evidential.opinions import as_float_tensor, broadcast_mask, opinion_tensors, validate_evidence

__all__ = ["fuse_evidence"]


def _kernel(evidence, claim_mask, chunk_mask, lam, rule: str):
    _, belief, vacuity = opinion_tensors(evidence, claim_mask, chunk_mask)
    state, steps, kbar, confidence, selected = fusion_tensors(
        belief, vacuity, chunk_mask, lam, FUSION_RULES.get(rule)
    )
    return (*state, steps, kbar, confidence, selected)


@functools.cache
def _compiled(rule: str):
    return torch.compile(functools.partial(_kernel, rule=rule), dynamic=True)


def fuse_evidence(
    evidence: torch.Tensor,
    lam: float | torch.Tensor = 0.6,
    rule: str = "lambda",
    claim_mask: torch.Tensor | None = None,
    chunk_mask: torch.Tensor | None = None,
    *,
    sanitize: bool = False,
    compiled: bool = False,
) -> FusionResult:
    """Opinions (Eqs 2-6) and fusion (Eqs 7-14, 27) of evidence ``[..., k, M]`` in one call.

    Args:
        evidence: Non-negative evidence ``[..., k, M]``.
        lam: λ ∈ [0, 1] (float or a tensor broadcastable to the batch shape).
        rule: A name from :data:`evidential.FUSION_RULES`.
        claim_mask: Bool ``[..., M]`` of real claims (``None``: all real).
        chunk_mask: Bool ``[..., k]`` of real chunks (``None``: all real).
        sanitize: Map bad evidence to ignorance with a warning instead of raising.
        compiled: Run the tensor math through ``torch.compile`` (needs a C++ compiler on CPU).

    Returns:
        The same :class:`FusionResult` as ``fuse(opinions_from_evidence(...))``.
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
    e = validate_evidence(e, valid, sanitize=sanitize)
    lam_t = lam_tensor(lam, e)
    if km is not None and bool(km.all()):
        km = None
    fn = _compiled(rule) if compiled else functools.partial(_kernel, rule=rule)
    if cm is None:
        cm_out = torch.ones(lead + (m,), dtype=torch.bool, device=e.device)
    else:
        cm_out = cm
    singletons, theta, ignorance, conflict, steps, kbar, confidence, selected = fn(e, cm, km, lam_t)
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
