"""The cross-entropy (digamma) form of the evidential (EDL) loss."""

from __future__ import annotations

from evidential.losses.base import EDLLoss


class EDLDigammaLoss(EDLLoss):
    """Bayes risk of the cross-entropy under the Dirichlet: ``Σ_j y_j (ψ(S) − ψ(α_j))``.

    Close to the log form but with the digamma function ψ; the usual choice when the head is trained like
    a classifier.

    Args:
        **kwargs: Forwarded to :class:`EDLLoss` (KL annealing schedule and weights, reduction).

    References:
        Sensoy et al. 2018, "Evidential Deep Learning to Quantify Classification Uncertainty", Eq. 4.

    Example:
        >>> import torch
        >>> loss = EDLDigammaLoss(annealing_steps=10)
        >>> loss.set_step(0)  # no KL yet on labelled rows
        >>> round(loss(torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0]])).item(), 4)  # ψ(3) − ψ(2)
        0.5
    """

    kind = "digamma"
