"""The evidence-averaging ablation rule (``fuse(..., rule="average")``): hand-computed cases and properties."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from evidential import AGGREGATION_RULES, FusionConfig, fuse, opinions_from_evidence
from evidential.errors import ConfigError, UnknownNameError
from evidential.fusion import evidence_average, fusion_rule_names


def test_two_disagreeing_chunks_split_belief_and_keep_no_conflict():
    # e1 = (3, 0), e2 = (0, 3): ē = (1.5, 1.5), S = 3 + 2 = 5 → b = (0.3, 0.3), U = 0.4, all ignorance
    r = fuse(opinions_from_evidence(torch.tensor([[3.0, 0.0], [0.0, 3.0]])), rule="average")
    assert r.belief.tolist() == pytest.approx([0.3, 0.3])
    assert r.uncertainty.item() == pytest.approx(0.4)
    assert r.ignorance.item() == pytest.approx(0.4) and r.conflict.item() == 0.0
    assert r.step_conflict.tolist() == [0.0] and r.rule == "average"
    # the λ rule on the same input keeps the conflict: U = h + λK = 0.16 + 0.6 · 0.36, 0.216 of it conflict
    lam = fuse(opinions_from_evidence(torch.tensor([[3.0, 0.0], [0.0, 3.0]])), lam=0.6)
    assert lam.uncertainty.item() == pytest.approx(0.376) and lam.conflict.item() == pytest.approx(0.216)


def test_agreeing_chunks_average_not_accumulate():
    # e = (4, 0) and (2, 0): ē = (3, 0), M = 2 → b = (3/5, 0), U = 2/5 (the λ rule would accumulate)
    r = fuse(opinions_from_evidence(torch.tensor([[4.0, 0.0], [2.0, 0.0]])), rule="average")
    assert r.belief.tolist() == pytest.approx([0.6, 0.0])
    assert r.uncertainty.item() == pytest.approx(0.4)
    assert r.selected.item() == 0 and r.confidence.item() == pytest.approx(0.6)


def test_padding_and_edge_cases():
    ev = torch.tensor([[[4.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [3.0, 1.0]]])
    mask = torch.tensor([[True, False], [True, True]])
    r = fuse(opinions_from_evidence(ev, chunk_mask=mask), rule="average")
    # query 0: only chunk 0 is real → its own opinion (4, 0)/(4 + 2)
    assert r.belief[0].tolist() == pytest.approx([4 / 6, 0.0])
    # query 1: ē = (2, 1) → S = 5
    assert r.belief[1].tolist() == pytest.approx([0.4, 0.2]) and r.uncertainty[1].item() == pytest.approx(0.4)
    # no evidence at all → vacuous, nothing selected
    z = fuse(opinions_from_evidence(torch.zeros(3, 2)), rule="average")
    assert z.uncertainty.item() == pytest.approx(1.0) and z.selected.item() == -1
    assert evidence_average(torch.ones(2, 3), torch.tensor([False, False])).tolist() == [0.0, 0.0, 0.0]


@given(
    st.lists(st.lists(st.floats(0.0, 50.0), min_size=3, max_size=3), min_size=1, max_size=6),
)
def test_masses_sum_to_one_and_order_does_not_matter(rows):
    ev = torch.tensor(rows, dtype=torch.float64)
    r = fuse(opinions_from_evidence(ev), rule="average")
    assert (r.belief.sum() + r.uncertainty).item() == pytest.approx(1.0)
    assert bool((r.belief >= 0).all()) and r.conflict.item() == 0.0
    flipped = fuse(opinions_from_evidence(ev.flip(0)), rule="average")
    assert torch.allclose(flipped.belief, r.belief) and torch.allclose(flipped.uncertainty, r.uncertainty)


def test_registry_and_config_accept_the_rule():
    assert "average" in AGGREGATION_RULES and "average" in fusion_rule_names()
    assert FusionConfig(rule="average").rule == "average"
    with pytest.raises(ConfigError, match="average"):
        FusionConfig(rule="averaging")
    with pytest.raises(
        UnknownNameError, match="unknown fusion rule 'nope'; choose one of: lambda, yager, dempster, average"
    ):
        fuse(opinions_from_evidence(torch.ones(2, 2)), rule="nope")
