"""The query-level loss: cross-entropy of the fused masses, differentiated through the fusion fold."""

from __future__ import annotations

import torch
from torch import nn

from evidential.losses.functional import fused_mass_loss


class FusedMassLoss(nn.Module):
    """Cross-entropy of the fused masses ``(b_1, …, b_M, U_global)`` against a target over ``{singletons, Θ}``.

    The chunk evidence of a query is turned into opinions and fused (λ-rule, Yager or Dempster), so the
    gradient of a query-level outcome reaches every chunk's evidence through the fold: a target on the gold
    claim pushes misinformation and noise down, a target on Θ teaches that conflicting or empty evidence
    must leave the query uncertain. The math is :func:`~evidential.losses.functional.fused_mass_loss`.

    Args:
        lam: λ of the λ-rule: the share of each step's conflict ``K`` transferred to ``Θ`` (``m(Θ) = h + λK``);
            the remaining ``(1 − λ)K`` is redistributed to the singletons. A larger λ leaves more of a
            conflict as uncertainty. Ignored by ``"yager"`` (λ = 1) and ``"dempster"``.
        rule: ``"lambda"``, ``"yager"`` or ``"dempster"``.
        eps: Floor inside the log.
        reduction: ``"mean"`` over counted queries, ``"sum"`` or ``"none"``.

    ``forward(evidence [..., k, M], target [..., M + 1], claim_mask=None, chunk_mask=None, row_mask=None)``.

    References:
        Sensoy, Kaplan, Kandemir. Evidential Deep Learning to Quantify Classification Uncertainty. NeurIPS 2018.
        Jøsang. Subjective Logic. Springer 2016 (opinions from Dirichlet evidence).

    Example:
        >>> import torch
        >>> loss = FusedMassLoss(lam=0.6)
        >>> ev = torch.tensor([[[4.0, 0.0], [4.0, 0.0]]])  # two chunks agree on claim 0
        >>> on_gold = loss(ev, torch.tensor([[1.0, 0.0, 0.0]]))
        >>> on_theta = loss(ev, torch.tensor([[0.0, 0.0, 1.0]]))
        >>> bool(on_gold < on_theta)
        True
    """

    def __init__(self, lam: float = 0.6, rule: str = "lambda", eps: float = 1e-6, reduction: str = "mean"):
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none'; got {reduction!r}")
        self.lam, self.rule, self.eps, self.reduction = lam, rule, eps, reduction

    def forward(
        self,
        evidence: torch.Tensor,
        target: torch.Tensor,
        claim_mask: torch.Tensor | None = None,
        chunk_mask: torch.Tensor | None = None,
        row_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return fused_mass_loss(
            evidence,
            target,
            claim_mask=claim_mask,
            chunk_mask=chunk_mask,
            lam=self.lam,
            rule=self.rule,
            row_mask=row_mask,
            eps=self.eps,
            reduction=self.reduction,
        )
