"""Shared module plumbing of the EDL losses; the math lives in :mod:`evidential.losses.functional`."""

from __future__ import annotations

import torch
from torch import nn

from evidential.losses.functional import edl_loss


class EDLLoss(nn.Module):
    """Base class: holds the annealing state and delegates ``forward`` to :func:`edl_loss`.

    Each row (chunk) gets the data term of the subclass's ``kind`` plus the regularizer
    ``KL(Dir(α̃) ‖ Dir(1))`` weighted by ``kl_weight · min(1, step / annealing_steps)``; rows with an
    all-zero target (the chunk supports nothing) get only ``null_kl_weight · KL``, which drives their
    evidence to zero. Call :meth:`set_step` (e.g. once per epoch or optimizer step) to advance the annealing.

    Args:
        annealing_steps: Steps (or epochs) until the KL coefficient reaches 1 (0: full weight at once).
        kl_weight: Weight of the regularizer on labelled rows.
        null_kl_weight: Weight of the (unannealed) regularizer on rows with an all-zero target.
        reduction: ``"mean"`` over real rows, ``"sum"`` or ``"none"``.

    ``forward(evidence [..., M], target [..., M], claim_mask=None [..., M], row_mask=None [...])``.
    """

    kind: str = "mse"

    def __init__(
        self,
        annealing_steps: int = 10,
        kl_weight: float = 1.0,
        null_kl_weight: float = 1.0,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        if annealing_steps < 0:
            raise ValueError(f"annealing_steps must be >= 0; got {annealing_steps}")
        if kl_weight < 0 or null_kl_weight < 0:
            raise ValueError(
                f"KL weights must be >= 0; got kl_weight={kl_weight}, null_kl_weight={null_kl_weight}"
            )
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none'; got {reduction!r}")
        self.annealing_steps = annealing_steps
        self.kl_weight = kl_weight
        self.null_kl_weight = null_kl_weight
        self.reduction = reduction
        self.step = 0

    def set_step(self, step: int) -> None:
        self.step = step

    def forward(
        self,
        evidence: torch.Tensor,
        target: torch.Tensor,
        claim_mask: torch.Tensor | None = None,
        row_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return edl_loss(
            evidence,
            target,
            self.kind,
            claim_mask,
            step=self.step,
            annealing_steps=self.annealing_steps,
            kl_weight=self.kl_weight,
            null_kl_weight=self.null_kl_weight,
            row_mask=row_mask,
            reduction=self.reduction,
        )

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, annealing_steps={self.annealing_steps}, kl_weight={self.kl_weight}"
