"""Evidential deep learning losses (Sensoy, Kaplan & Kandemir, NeurIPS 2018) as pure tensor functions.

All functions take evidence ``e >= 0`` of shape ``[..., M]`` (one row per chunk), a target of the same
shape and an optional bool ``claim_mask`` ``[..., M]`` for variable claim counts (padded claims contribute
nothing: they are excluded from ``S``, from the sums and from the frame size of the regularizer).

Targets may be one-hot, multi-hot (normalized to a distribution for the data terms) or all-zero: a chunk
that supports nothing has no data term, only the KL regularizer, which pushes all of its evidence to zero.

With ``α = e + 1`` and ``S = Σ_j α_j``:

* MSE (Bayes risk of the squared error, Sensoy Eq 5): ``Σ_j (y_j − p_j)² + p_j(1 − p_j)/(S + 1)``, ``p = α/S``;
* log (type-II maximum likelihood, Eq 3): ``Σ_j y_j (log S − log α_j)``;
* digamma (Bayes risk of the cross-entropy, Eq 4): ``Σ_j y_j (ψ(S) − ψ(α_j))``;
* regularizer ``KL(Dir(α̃) ‖ Dir(1))`` with ``α̃ = y + (1 − y) ⊙ α`` (the target's evidence removed),
  weighted by the annealing coefficient ``min(1, step / annealing_steps)``.
"""

from __future__ import annotations

import torch

from evidential.errors import ShapeError
from evidential.fusion import fuse
from evidential.opinions import opinions_from_evidence

__all__ = [
    "DISTILLATION_KINDS",
    "EDL_DATA_TERMS",
    "annealing_coefficient",
    "edl_data_term",
    "edl_loss",
    "evidence_distillation_loss",
    "fused_mass_loss",
    "kl_dirichlet",
    "kl_dirichlet_uniform",
]


def _claim_masks(
    a: torch.Tensor, b: torch.Tensor, claim_mask, names: tuple[str, str] = ("evidence", "target")
) -> tuple[torch.Tensor, torch.Tensor]:
    """Check that ``a`` and ``b`` share a shape; the bool claim mask broadcast to it and its float copy."""
    if a.shape != b.shape:
        raise ShapeError(
            f"{names[0]} {tuple(a.shape)} and {names[1]} {tuple(b.shape)} must have the same shape"
        )
    if claim_mask is None:
        mask = torch.ones_like(a, dtype=torch.bool)
    else:
        mask = torch.as_tensor(claim_mask, device=a.device).bool().expand(a.shape)
    return mask, mask.to(a.dtype)


def _prepare(evidence: torch.Tensor, target: torch.Tensor, claim_mask: torch.Tensor | None):
    mask, fmask = _claim_masks(evidence, target, claim_mask)
    y = target.to(evidence.dtype) * fmask
    alpha = (evidence + 1) * fmask  # padded claims: α = 0, excluded from every sum
    return mask, fmask, y, alpha


def _normalized(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    total = y.sum(-1, keepdim=True)
    has = total.squeeze(-1) > 0
    return y / torch.where(total > 0, total, torch.ones_like(total)), has


def _mse(alpha, fmask, y):
    s = alpha.sum(-1, keepdim=True)
    p = alpha / s.clamp_min(torch.finfo(alpha.dtype).tiny)
    return (((y - p) ** 2 + p * (1 - p) / (s + 1)) * fmask).sum(-1)


def _log(alpha, fmask, y):
    s = alpha.sum(-1, keepdim=True)
    safe = torch.where(fmask > 0, alpha, torch.ones_like(alpha))
    return (y * (torch.log(s.clamp_min(1)) - torch.log(safe))).sum(-1)


def _digamma(alpha, fmask, y):
    s = alpha.sum(-1, keepdim=True)
    safe = torch.where(fmask > 0, alpha, torch.ones_like(alpha))
    return (y * (torch.digamma(s.clamp_min(1)) - torch.digamma(safe))).sum(-1)


EDL_DATA_TERMS = {"mse": _mse, "log": _log, "digamma": _digamma}


def edl_data_term(
    evidence: torch.Tensor, target: torch.Tensor, kind: str = "mse", claim_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Data term of the EDL loss per row ``[...]``; zero for rows with an all-zero target.

    Args:
        evidence: Evidence ``[..., M]``, ``>= 0``.
        target: One-hot, multi-hot (normalized to sum 1) or all-zero targets ``[..., M]``.
        kind: ``"mse"``, ``"log"`` or ``"digamma"``.
        claim_mask: Bool ``[..., M]`` of real claims.
    """
    try:
        fn = EDL_DATA_TERMS[kind]
    except KeyError:
        raise ValueError(f"unknown EDL loss kind {kind!r}; choose one of {sorted(EDL_DATA_TERMS)}") from None
    _, fmask, y, alpha = _prepare(evidence, target, claim_mask)
    y, has = _normalized(y)
    value = fn(alpha, fmask, y)
    return torch.where(has, value, torch.zeros_like(value))


def kl_dirichlet_uniform(
    evidence: torch.Tensor, target: torch.Tensor | None = None, claim_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """``KL(Dir(α̃) ‖ Dir(1))`` per row ``[...]`` with ``α̃ = y + (1 − y) ⊙ (e + 1)`` (Sensoy Eq 7).

    ``y`` is the binarized target (positions with ``target > 0``); ``None`` or an all-zero row keeps every
    claim's evidence in ``α̃``, so the term pulls all evidence to zero. Zero when ``e = 0``. Rows with no
    real claim give zero.
    """
    if target is None:
        target = torch.zeros_like(evidence)
    mask, fmask, y, alpha = _prepare(evidence, target, claim_mask)
    yb = (y > 0).to(alpha.dtype)
    at = torch.where(mask, yb + (1 - yb) * alpha, torch.ones_like(alpha))  # padded: α̃ = 1 contributes 0 below
    m = fmask.sum(-1)
    s = (at * fmask).sum(-1)
    live = m > 0
    s_safe = torch.where(live, s, torch.ones_like(s))
    m_safe = torch.where(live, m, torch.ones_like(m))
    kl = (
        torch.lgamma(s_safe)
        - torch.lgamma(m_safe)
        - (torch.lgamma(at) * fmask).sum(-1)
        + ((at - 1) * (torch.digamma(at) - torch.digamma(s_safe).unsqueeze(-1)) * fmask).sum(-1)
    )
    return torch.where(live, kl, torch.zeros_like(kl))


def annealing_coefficient(step: int | float, annealing_steps: int | float = 10) -> float:
    """KL annealing ``min(1, step / annealing_steps)`` (Sensoy et al. use epochs with 10)."""
    if annealing_steps <= 0:
        return 1.0
    return float(min(1.0, max(0.0, step / annealing_steps)))


def edl_loss(
    evidence: torch.Tensor,
    target: torch.Tensor,
    kind: str = "mse",
    claim_mask: torch.Tensor | None = None,
    *,
    step: int | float | None = None,
    annealing_steps: int | float = 10,
    kl_weight: float = 1.0,
    null_kl_weight: float = 1.0,
    row_mask: torch.Tensor | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """Full EDL loss: data term + annealed KL regularizer, masked over claims and rows.

    Rows with a (multi-)hot target get ``data + kl_weight · anneal · KL``; rows with an all-zero target
    (the chunk supports nothing) have no data term and get ``null_kl_weight · KL`` without annealing,
    so their evidence is pushed to zero from the first step.

    Args:
        evidence: Evidence ``[..., M]``, ``>= 0``.
        target: Targets ``[..., M]`` (one-hot, multi-hot or all-zero).
        kind: Data term: ``"mse"``, ``"log"`` or ``"digamma"``.
        claim_mask: Bool ``[..., M]`` of real claims.
        step: Current step/epoch for annealing; ``None`` means fully annealed (coefficient 1).
        annealing_steps: Steps until the KL coefficient reaches 1.
        kl_weight: Weight of the regularizer on labelled rows.
        null_kl_weight: Weight of the regularizer on all-zero-target rows.
        row_mask: Bool ``[...]`` of real rows (padded chunks excluded from the loss and the mean).
        reduction: ``"mean"`` over real rows, ``"sum"`` or ``"none"``.
    """
    data = edl_data_term(evidence, target, kind, claim_mask)
    kl = kl_dirichlet_uniform(evidence, target, claim_mask)
    coef = 1.0 if step is None else annealing_coefficient(step, annealing_steps)
    labelled = _prepare(evidence, target, claim_mask)[2].sum(-1) > 0
    per_row = torch.where(labelled, data + kl_weight * coef * kl, null_kl_weight * kl)
    return _reduce_rows(per_row, row_mask, reduction)


def fused_mass_loss(
    evidence: torch.Tensor,
    target: torch.Tensor,
    claim_mask: torch.Tensor | None = None,
    chunk_mask: torch.Tensor | None = None,
    lam: float | torch.Tensor = 0.6,
    rule: str = "lambda",
    row_mask: torch.Tensor | None = None,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> torch.Tensor:
    """Query-level loss through fusion: cross-entropy of the fused masses against a target over
    ``{singletons, Θ}``.

    The chunk evidence ``[..., k, M]`` becomes opinions (Eqs 2–6), which are fused with ``rule``
    (Eqs 7–14); the fused masses ``(b_1, …, b_M, U_global)`` sum to 1 and the loss is
    ``−Σ_j t_j log(m_j + eps)`` with ``t [..., M + 1]`` (last entry: Θ). A target on the gold claim(s)
    teaches the evaluator to discount misinformation and noise; a target on Θ teaches it that conflicting
    or empty evidence should leave the query uncertain. Differentiable through the whole fold.

    Args:
        evidence: Evidence ``[..., k, M]``, ``>= 0``.
        target: Target distribution ``[..., M + 1]`` (rows sum to 1; padded claims must get 0).
        claim_mask: Bool ``[..., M]`` of real claims.
        chunk_mask: Bool ``[..., k]`` of real chunks.
        lam: λ of the λ-rule (float or tensor).
        rule: Fusion rule name (``lambda``, ``yager``, ``dempster``).
        row_mask: Bool ``[...]`` of queries that count (e.g. those with a target).
        eps: Floor inside the log.
        reduction: ``"mean"`` over counted queries, ``"sum"`` or ``"none"``.
    """

    if target.shape[-1] != evidence.shape[-1] + 1:
        raise ShapeError(
            f"target must have M + 1 = {evidence.shape[-1] + 1} entries (claims + Θ); got shape {tuple(target.shape)}"
        )
    res = fuse(opinions_from_evidence(evidence, claim_mask, chunk_mask), lam=lam, rule=rule)
    masses = torch.cat([res.belief, res.uncertainty.unsqueeze(-1)], dim=-1)
    loss = -torch.xlogy(target.to(masses.dtype), masses.clamp_min(0) + eps).sum(-1)  # 0·log 0 = 0
    if reduction == "none":
        return loss
    if row_mask is not None:
        w = row_mask.to(loss.dtype)
        loss = loss * w
        if reduction == "mean":
            return loss.sum() / w.sum().clamp_min(1.0)
    return loss.sum() if reduction == "sum" else loss.mean()


def kl_dirichlet(
    alpha: torch.Tensor, beta: torch.Tensor, claim_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """``KL(Dir(α) ‖ Dir(β))`` per row ``[...]`` in closed form, over the real claims of ``claim_mask``.

    ``lnΓ(Σα) − Σ lnΓ(α_j) − lnΓ(Σβ) + Σ lnΓ(β_j) + Σ (α_j − β_j)(ψ(α_j) − ψ(Σα))``. Padded claims are left
    out of every sum (the divergence of the Dirichlets over the real claims); rows with no real claim give
    0, and so do rows with one real claim (a Dirichlet over one category is a point mass).

    Args:
        alpha: Concentrations ``[..., M]``, ``> 0`` at real claims.
        beta: Concentrations ``[..., M]``, ``> 0`` at real claims.
        claim_mask: Bool ``[..., M]`` of real claims.
    """
    if alpha.shape != beta.shape:
        raise ShapeError(f"alpha {tuple(alpha.shape)} and beta {tuple(beta.shape)} must have the same shape")
    if claim_mask is None:
        mask = torch.ones_like(alpha, dtype=torch.bool)
    else:
        mask = torch.as_tensor(claim_mask, device=alpha.device).bool().expand(alpha.shape)
    fmask = mask.to(alpha.dtype)
    one = torch.ones_like(alpha)
    a = torch.where(mask, alpha, one)  # padded: α = β = 1, masked out of the sums below
    b = torch.where(mask, beta.to(alpha.dtype), one)
    sa = (a * fmask).sum(-1)
    sb = (b * fmask).sum(-1)
    live = fmask.sum(-1) > 0
    sa = torch.where(live, sa, torch.ones_like(sa))
    sb = torch.where(live, sb, torch.ones_like(sb))
    kl = (
        torch.lgamma(sa)
        - (torch.lgamma(a) * fmask).sum(-1)
        - torch.lgamma(sb)
        + (torch.lgamma(b) * fmask).sum(-1)
        + ((a - b) * (torch.digamma(a) - torch.digamma(sa).unsqueeze(-1)) * fmask).sum(-1)
    )
    return torch.where(live, kl, torch.zeros_like(kl))


def _log_mse(student, teacher, fmask):
    return (((torch.log1p(student) - torch.log1p(teacher)) ** 2) * fmask).sum(-1)


def _kl(student, teacher, fmask):
    return kl_dirichlet(student + 1, teacher + 1, fmask > 0)


#: Per-row forms of the evidence distillation loss (see :func:`evidence_distillation_loss`).
DISTILLATION_KINDS = {"log_mse": _log_mse, "kl": _kl}


def evidence_distillation_loss(
    student: torch.Tensor,
    teacher: torch.Tensor,
    kind: str = "log_mse",
    claim_mask: torch.Tensor | None = None,
    row_mask: torch.Tensor | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """Soft-target loss between a student's evidence and a teacher's evidence over the same frame.

    * ``log_mse``: ``Σ_j (log(1 + e^s_j) − log(1 + e^t_j))²`` — squared error on a log1p scale, so that a
      teacher's 0 vs 1 matters as much as 10 vs 20 and the evidence *magnitude* (hence the vacuity
      ``u = M / S``, Eq 5) is matched even for a frame of one claim;
    * ``kl``: ``KL(Dir(e^s + 1) ‖ Dir(e^t + 1))`` in closed form (:func:`kl_dirichlet`). With an all-zero
      teacher row it equals the EDL regularizer ``KL(Dir(e^s + 1) ‖ Dir(1))`` that pushes a chunk that
      supports nothing to zero evidence; with one real claim it is 0 (a one-category Dirichlet is a point
      mass), so prefer ``log_mse`` when frames are often a single claim.

    Both are ``>= 0`` and 0 exactly when the student's evidence equals the teacher's.

    Args:
        student: Student evidence ``[..., M]``, ``>= 0`` (differentiable).
        teacher: Teacher evidence ``[..., M]``, ``>= 0`` (a target: not differentiated).
        kind: ``"log_mse"`` or ``"kl"``.
        claim_mask: Bool ``[..., M]`` of real claims (padded claims contribute nothing).
        row_mask: Bool ``[...]`` of rows that count (e.g. chunks that have a teacher output).
        reduction: ``"mean"`` over counted rows, ``"sum"`` or ``"none"`` (per row, uncounted rows 0).
    """
    try:
        fn = DISTILLATION_KINDS[kind]
    except KeyError:
        raise ValueError(
            f"unknown distillation loss kind {kind!r}; choose one of {sorted(DISTILLATION_KINDS)}"
        ) from None
    mask, fmask = _claim_masks(student, teacher, claim_mask, ("student evidence", "teacher evidence"))
    zero = torch.zeros_like(student)
    s = torch.where(mask, student, zero)  # padded positions may hold garbage: never read
    t = torch.where(mask, teacher.detach().to(student.dtype), zero)
    per_row = fn(s, t, fmask)
    return _reduce_rows(per_row, row_mask, reduction)


def _reduce_rows(per_row: torch.Tensor, row_mask, reduction: str) -> torch.Tensor:
    """Zero the rows outside ``row_mask`` and reduce: ``"mean"`` over the real rows, ``"sum"`` or ``"none"``."""
    if row_mask is not None:
        rm = torch.as_tensor(row_mask, device=per_row.device).bool().expand(per_row.shape)
        per_row = torch.where(rm, per_row, torch.zeros_like(per_row))
        count = rm.sum()
    else:
        count = torch.tensor(per_row.numel(), device=per_row.device)
    if reduction == "none":
        return per_row
    if reduction == "sum":
        return per_row.sum()
    if reduction == "mean":
        return per_row.sum() / count.clamp_min(1).to(per_row.dtype)
    raise ValueError(f"unknown reduction {reduction!r}; choose 'mean', 'sum' or 'none'")
