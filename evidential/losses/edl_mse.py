"""The squared-error form of the evidential (EDL) loss."""

from __future__ import annotations

from evidential.losses.base import EDLLoss


class EDLMSELoss(EDLLoss):
    """Bayes risk of the squared error: ``Σ_j (y_j − p_j)² + p_j(1 − p_j)/(S + 1)`` with ``p = α/S``.

    Bounded per row, so it is the most stable of the three forms; the annealed ``KL(Dir(α̃) ‖ Dir(1))``
    term is added as described in :class:`EDLLoss`.

    Args:
        **kwargs: ``annealing_steps``, ``kl_weight``, ``null_kl_weight``, ``reduction`` (see :class:`EDLLoss`).

    References:
        Sensoy, Kaplan, Kandemir. Evidential Deep Learning to Quantify Classification Uncertainty.
        NeurIPS 2018, Eq. 5. https://arxiv.org/abs/1806.01768

    Example:
        >>> import torch
        >>> loss = EDLMSELoss()
        >>> round(loss(torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0]])).item(), 4)  # α = (2, 1): 1/3
        0.3333
    """

    kind = "mse"
