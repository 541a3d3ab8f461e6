"""The soft-target loss that distils a teacher evaluator's evidence into a student (learned) evaluator."""

from __future__ import annotations

import torch
from torch import nn

from evidential.losses.functional import DISTILLATION_KINDS, evidence_distillation_loss


class EvidenceDistillationLoss(nn.Module):
    """Distance between a student's evidence and a teacher's evidence over the same claim frame.

    The teacher (e.g. the prompt evaluator) gives each chunk a non-negative evidence vector over the query's
    aligned claims; the student is trained to reproduce it, so a small encoder learns what an instruction
    LLM concluded without a human label. Two forms (:func:`~evidential.losses.functional.evidence_distillation_loss`):

    * ``"log_mse"``: ``Σ_j (log(1 + e^s_j) − log(1 + e^t_j))²`` — matches the evidence magnitude, hence the
      opinion's vacuity ``u = M / S`` (Eq 5), on a scale where small evidence differences count;
    * ``"kl"``: ``KL(Dir(e^s + 1) ‖ Dir(e^t + 1))`` in closed form; an all-zero teacher row reduces it to the
      EDL regularizer ``KL(Dir(α) ‖ Dir(1))``.

    Args:
        kind: ``"log_mse"`` (default) or ``"kl"``.
        reduction: ``"mean"`` over counted rows, ``"sum"`` or ``"none"``.

    ``forward(student [..., M], teacher [..., M], claim_mask=None [..., M], row_mask=None [...])``.

    References:
        Hinton, Vinyals, Dean. Distilling the Knowledge in a Neural Network. 2015.
        https://arxiv.org/abs/1503.02531 (soft targets from a teacher).
        Malinin, Mlodozeniec, Gales. Ensemble Distribution Distillation. ICLR 2020.
        https://arxiv.org/abs/1905.00076 (distilling into a Dirichlet).
        Sensoy, Kaplan, Kandemir. Evidential Deep Learning to Quantify Classification Uncertainty.
        NeurIPS 2018 (evidence, Dirichlet opinions and the KL regularizer).

    Example:
        >>> import torch
        >>> loss = EvidenceDistillationLoss()
        >>> teacher = torch.tensor([[7.0, 0.0]])
        >>> float(loss(teacher.clone(), teacher))  # student == teacher
        0.0
        >>> round(float(loss(torch.tensor([[0.0, 0.0]]), teacher)), 4)  # (log 8)²
        4.3241
    """

    def __init__(self, kind: str = "log_mse", reduction: str = "mean") -> None:
        super().__init__()
        if kind not in DISTILLATION_KINDS:
            raise ValueError(f"kind must be one of {sorted(DISTILLATION_KINDS)}; got {kind!r}")
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none'; got {reduction!r}")
        self.kind, self.reduction = kind, reduction

    def forward(
        self,
        student: torch.Tensor,
        teacher: torch.Tensor,
        claim_mask: torch.Tensor | None = None,
        row_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return evidence_distillation_loss(
            student, teacher, self.kind, claim_mask, row_mask=row_mask, reduction=self.reduction
        )

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, reduction={self.reduction!r}"
