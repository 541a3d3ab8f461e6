"""The span loss of the claim-extraction head."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["SpanLoss", "span_loss"]


def _position_nll(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``-log p(target)`` per row: ``target`` an index ``[N]`` (cross-entropy) or a boolean mask ``[N, T]`` of
    the allowed positions (``-log Σ_{t allowed} softmax(logits)_t``)."""
    logits = logits.float()
    if target.dim() == 1:
        return nn.functional.cross_entropy(logits, target, reduction="none")
    if target.shape != logits.shape or target.dtype != torch.bool:
        raise ValueError(
            f"a position mask must be boolean with the logits' shape {tuple(logits.shape)}; "
            f"got {target.dtype} {tuple(target.shape)}"
        )
    if not bool(target.any(dim=1).all()):
        raise ValueError("every row of a position mask needs at least one allowed position")
    allowed = logits.masked_fill(~target, torch.finfo(logits.dtype).min)
    return torch.logsumexp(logits, dim=1) - torch.logsumexp(allowed, dim=1)


def span_loss(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    start_positions: torch.Tensor,
    end_positions: torch.Tensor,
    reduction: str = "mean",
) -> torch.Tensor:
    """SQuAD-2 style extractive loss ``(NLL(start) + NLL(end)) / 2``; position 0 (``[CLS]``) = no answer.

    With index targets the NLL is the cross-entropy of the one labelled position. With mask targets it is
    the negative log of the probability summed over every allowed position (the marginal likelihood over all
    occurrences of the answer in the chunk): a model that points at any occurrence is not penalised. A
    one-hot mask gives exactly the cross-entropy.

    Args:
        start_logits: ``[N, T]`` (masked positions at a very negative value).
        end_logits: ``[N, T]``.
        start_positions: ``[N]`` token index of the answer start (0 for no answer), or a boolean ``[N, T]``
            mask of the allowed start tokens.
        end_positions: ``[N]`` token index of the answer end, or a boolean ``[N, T]`` mask.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Raises:
        ValueError: A mask of another shape or dtype than the logits, or a mask row with no allowed position.
    """
    loss = 0.5 * (_position_nll(start_logits, start_positions) + _position_nll(end_logits, end_positions))
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


class SpanLoss(nn.Module):
    """Cross-entropy of the answer start and end positions (Devlin et al. 2019, SQuAD 2.0 head), or their
    marginal likelihood over every occurrence of the answer (Clark and Gardner 2018) when the targets are
    position masks (:func:`span_loss`).

    Args:
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    References:
        Devlin, Chang, Lee, Toutanova. BERT: Pre-training of Deep Bidirectional Transformers for Language
        Understanding. NAACL 2019, §4.3 (SQuAD v2.0: the no-answer span at [CLS]).
        Clark, Gardner. Simple and Effective Multi-Paragraph Reading Comprehension. ACL 2018, §2.3 (the
        summed objective over all answer occurrences under distant supervision).

    Example:
        >>> import torch
        >>> logits = torch.tensor([[0.0, 5.0, 0.0]])
        >>> round(SpanLoss()(logits, logits, torch.tensor([1]), torch.tensor([1])).item(), 3)
        0.013
        >>> twice = torch.tensor([[0.0, 2.0, 2.0]])  # the answer occurs at tokens 1 and 2
        >>> round(SpanLoss()(twice, twice, torch.tensor([1]), torch.tensor([1])).item(), 3)  # the first only
        0.759
        >>> both = torch.tensor([[False, True, True]])
        >>> round(SpanLoss()(twice, twice, both, both).item(), 3)
        0.065
    """

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none'; got {reduction!r}")
        self.reduction = reduction

    def forward(self, start_logits, end_logits, start_positions, end_positions) -> torch.Tensor:
        return span_loss(start_logits, end_logits, start_positions, end_positions, self.reduction)
