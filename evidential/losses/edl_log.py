"""The log-likelihood form of the evidential (EDL) loss."""

from __future__ import annotations

from evidential.losses.base import EDLLoss


class EDLLogLoss(EDLLoss):
    """Type-II maximum likelihood of the Dirichlet: ``Σ_j y_j (log S − log α_j)``.

    The negative log of the expected probability of the labelled claims; unbounded when the model puts
    no evidence on the target.

    Args:
        **kwargs: As for every EDL loss: annealing, the two KL weights and the reduction (:class:`EDLLoss`).

    References:
        Sensoy et al., NeurIPS 2018, Eq. 3 (https://arxiv.org/abs/1806.01768).

    Example:
        >>> import torch
        >>> evidence = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
        >>> target = torch.tensor([[1.0, 0.0], [0.0, 0.0]])  # the 2nd chunk supports nothing
        >>> EDLLogLoss(annealing_steps=0, reduction="none")(evidence, target).shape
        torch.Size([2])
    """

    kind = "log"
