"""The span loss of the claim-extraction head."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["SpanLoss", "span_loss"]


def span_loss(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    start_positions: torch.Tensor,
    end_positions: torch.Tensor,
    reduction: str = "mean",
) -> torch.Tensor:
    """SQuAD-2 style extractive loss: ``(CE(start) + CE(end)) / 2``; position 0 (``[CLS]``) = no answer.

    Args:
        start_logits: ``[N, T]`` (masked positions at a very negative value).
        end_logits: ``[N, T]``.
        start_positions: ``[N]`` token index of the answer start (0 for no answer).
        end_positions: ``[N]`` token index of the answer end (0 for no answer).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """
    ce = nn.functional.cross_entropy
    loss = 0.5 * (
        ce(start_logits.float(), start_positions, reduction="none")
        + ce(end_logits.float(), end_positions, reduction="none")
    )
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


class SpanLoss(nn.Module):
    """Cross-entropy of the answer start and end positions (Devlin et al. 2019, SQuAD 2.0 head).

    Args:
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    References:
        Devlin, Chang, Lee, Toutanova. BERT: Pre-training of Deep Bidirectional Transformers for Language
        Understanding. NAACL 2019, §4.3 (SQuAD v2.0: the no-answer span at [CLS]).

    Example:
        >>> import torch
        >>> logits = torch.tensor([[0.0, 5.0, 0.0]])
        >>> round(SpanLoss()(logits, logits, torch.tensor([1]), torch.tensor([1])).item(), 3)
        0.013
    """

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none'; got {reduction!r}")
        self.reduction = reduction

    def forward(self, start_logits, end_logits, start_positions, end_positions) -> torch.Tensor:
        return span_loss(start_logits, end_logits, start_positions, end_positions, self.reduction)
