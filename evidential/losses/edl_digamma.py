"""The Digamma form of the evidential (EDL) loss."""

from __future__ import annotations

from .base import EDLLoss


class EDLDigammaLoss(EDLLoss):
    """EDL loss with the Bayes risk of the cross-entropy, Σ_j y_j (ψ(S) − ψ(α_j)) (Sensoy et al. Eq 4).

    Plus the annealed regularizer ``KL(Dir(α̃) ‖ Dir(1))``. Chunks with an all-zero target (they support
    nothing) get only the regularizer, which drives their evidence to zero.

    Args:
        annealing_steps: Steps (or epochs) until the KL coefficient ``min(1, step / annealing_steps)`` reaches 1.
        kl_weight: Weight of the regularizer on labelled chunks.
        null_kl_weight: Weight of the (unannealed) regularizer on chunks with an all-zero target.
        reduction: ``"mean"`` over real rows, ``"sum"`` or ``"none"``.

    Inputs to ``forward``: ``evidence`` ``[..., M]`` (``>= 0``), ``target`` ``[..., M]`` (one-/multi-hot or
    all-zero), optional ``claim_mask`` ``[..., M]`` and ``row_mask`` ``[...]``.

    References:
        Sensoy, Kaplan, Kandemir. *Evidential Deep Learning to Quantify Classification Uncertainty*.
        NeurIPS 2018. https://arxiv.org/abs/1806.01768

    Example:
        >>> import torch
        >>> loss = EDLDigammaLoss(annealing_steps=10)
        >>> evidence = torch.tensor([[4.0, 0.5, 0.0], [0.2, 0.1, 0.0]], requires_grad=True)
        >>> target = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # 2nd chunk supports nothing
        >>> value = loss(evidence, target, claim_mask=torch.tensor([True, True, False]))
        >>> value.backward()
    """

    kind = "digamma"
