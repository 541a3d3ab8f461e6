"""Reciprocal rank fusion (Cormack, Clarke & Büttcher 2009), the hybrid retriever's fusion of rankings."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

__all__ = ["reciprocal_rank_fusion"]

K = TypeVar("K", bound=Hashable)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[K]], k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[K, float]]:
    """Fuse rankings: ``score(d) = Σ_r w_r / (k + rank_r(d))`` over the rankings ``r`` that contain ``d``.

    Ranks are 1-based; a document missing from a ranking gets nothing from it. The result is sorted by
    fused score (descending); ties go to the document with the better best rank, then to the earlier
    ranking, then to its position there, so the order is deterministic.

    Args:
        rankings: Each a list of document keys, best first (keys repeated within a ranking count once, at
            their best rank).
        k: The RRF constant (60 in the original paper); larger values flatten the rank weights.
        weights: One non-negative weight per ranking (default 1 each).

    >>> reciprocal_rank_fusion([["a", "b", "c"], ["b", "c", "d"]], k=0)
    [('b', 1.5), ('a', 1.0), ('c', 0.8333333333333333), ('d', 0.3333333333333333)]
    """
    if k < 0:
        raise ValueError(f"the RRF constant k must be >= 0; got {k}")
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    scores: dict[K, float] = {}
    tiebreak: dict[K, tuple[int, int, int]] = {}
    for r, (ranking, w) in enumerate(zip(rankings, weights)):
        seen: set[K] = set()
        for pos, key in enumerate(ranking):
            if key in seen:
                continue
            seen.add(key)
            rank = pos + 1
            scores[key] = scores.get(key, 0.0) + w / (k + rank)
            best = (rank, r, pos)
            if key not in tiebreak or best < tiebreak[key]:
                tiebreak[key] = best
    return sorted(scores.items(), key=lambda kv: (-kv[1], tiebreak[kv[0]]))
