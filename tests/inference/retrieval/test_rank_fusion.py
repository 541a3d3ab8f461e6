"""Reciprocal rank fusion on hand-computed examples."""

from __future__ import annotations

import pytest

from inference.retrieval import reciprocal_rank_fusion


def test_rrf_hand_computed_k60():
    dense = ["c1", "c2", "c3"]
    bm25 = ["c3", "c1", "c4"]
    fused = dict(reciprocal_rank_fusion([dense, bm25], k=60))
    # c1: 1/61 + 1/62; c3: 1/63 + 1/61; c2: 1/62; c4: 1/63
    assert fused["c1"] == pytest.approx(1 / 61 + 1 / 62) == pytest.approx(0.032522474881015)
    assert fused["c3"] == pytest.approx(1 / 63 + 1 / 61) == pytest.approx(0.032266458495966)
    assert fused["c2"] == pytest.approx(1 / 62) and fused["c4"] == pytest.approx(1 / 63)
    assert [key for key, _ in reciprocal_rank_fusion([dense, bm25], k=60)] == ["c1", "c3", "c2", "c4"]


def test_rrf_k0_weights_ties_and_duplicates():
    assert reciprocal_rank_fusion([["a", "b", "c"], ["b", "c", "d"]], k=0) == [
        ("b", 1.5),
        ("a", 1.0),
        ("c", 1 / 3 + 1 / 2),
        ("d", 1 / 3),
    ]
    # a tie (x at rank 1 of the first ranking, y at rank 1 of the second) goes to the earlier ranking
    assert reciprocal_rank_fusion([["x"], ["y"]]) == [("x", 1 / 61), ("y", 1 / 61)]
    assert reciprocal_rank_fusion([["y"], ["x"]]) == [("y", 1 / 61), ("x", 1 / 61)]
    # weights scale a ranking's contribution; a repeated key counts once, at its best rank
    assert reciprocal_rank_fusion([["a", "b"], ["b", "a"]], k=0, weights=[1.0, 3.0]) == [
        ("b", 3.5),
        ("a", 2.5),
    ]
    assert reciprocal_rank_fusion([["a", "a", "b"]], k=0) == [("a", 1.0), ("b", 1 / 3)]
    assert reciprocal_rank_fusion([]) == [] and reciprocal_rank_fusion([[], []]) == []
    with pytest.raises(ValueError, match="k must be >= 0"):
        reciprocal_rank_fusion([["a"]], k=-1)
    with pytest.raises(ValueError, match="1 weights for 2 rankings"):
        reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0])
