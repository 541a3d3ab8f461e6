"""Pad ragged per-query evidence into one ``[B, k, M]`` batch with chunk and claim masks."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from evidential.errors import ShapeError

__all__ = ["pad_evidence"]


def pad_evidence(
    items: Sequence[torch.Tensor | Sequence[Sequence[float]]],
    *,
    num_claims: Sequence[int] | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stack per-query evidence matrices ``[k_b, M_b]`` into ``(evidence, claim_mask, chunk_mask)``.

    Args:
        items: One ``[k_b, M_b]`` matrix per query (tensors or nested lists); ``k_b`` or ``M_b`` may be 0.
        num_claims: Frame size per query when a query has no chunks (its ``M_b`` cannot be read off a
            ``[0, M]`` list). Defaults to the matrices' widths.
        dtype: Output dtype (default: the first tensor's float dtype, else ``torch.get_default_dtype()``).
        device: Output device.

    Returns:
        ``evidence [B, K, M]`` (zeros at padding), ``claim_mask [B, M]`` and ``chunk_mask [B, K]`` with
        ``K = max k_b`` and ``M = max M_b``.
    """
    mats = []
    for i, item in enumerate(items):
        t = torch.as_tensor(item, dtype=dtype) if not isinstance(item, torch.Tensor) else item
        if t.numel() == 0 and t.ndim < 2:
            t = t.reshape(0, 0)
        if t.ndim != 2:
            raise ShapeError(f"items[{i}] must be a [k, M] matrix; got shape {tuple(t.shape)}")
        mats.append(t)
    if num_claims is not None and len(num_claims) != len(mats):
        raise ShapeError(f"num_claims has {len(num_claims)} entries for {len(mats)} queries")
    widths = [int(num_claims[i]) if num_claims is not None else t.shape[1] for i, t in enumerate(mats)]
    for i, (t, w) in enumerate(zip(mats, widths)):
        if t.shape[0] > 0 and t.shape[1] != w:
            raise ShapeError(f"items[{i}] has {t.shape[1]} claims but num_claims[{i}] = {w}")
    if dtype is None:
        dtype = next((t.dtype for t in mats if t.is_floating_point()), torch.get_default_dtype())
    k = max((t.shape[0] for t in mats), default=0)
    m = max(widths, default=0)
    b = len(mats)
    evidence = torch.zeros(b, k, m, dtype=dtype, device=device)
    claim_mask = torch.zeros(b, m, dtype=torch.bool, device=device)
    chunk_mask = torch.zeros(b, k, dtype=torch.bool, device=device)
    for i, (t, w) in enumerate(zip(mats, widths)):
        evidence[i, : t.shape[0], : t.shape[1]] = t.to(dtype=dtype, device=device)
        claim_mask[i, :w] = True
        chunk_mask[i, : t.shape[0]] = True
    return evidence, claim_mask, chunk_mask
