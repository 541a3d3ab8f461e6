import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from evidential import InvalidEvidenceError, ShapeError, opinions_from_evidence


def test_hand_computed_opinion():
    op = opinions_from_evidence(torch.tensor([[3.0, 0.0], [1.0, 1.0]], dtype=torch.float64))
    # S = 3 + 2 = 5 -> b = (0.6, 0), u = 0.4 ; S = 2 + 2 = 4 -> b = (0.25, 0.25), u = 0.5
    assert op.belief.tolist() == [[0.6, 0.0], [0.25, 0.25]]
    assert op.vacuity.tolist() == [0.4, 0.5]
    assert op.alpha.tolist() == [[4.0, 1.0], [2.0, 2.0]]
    assert op.strength.tolist() == [5.0, 4.0]
    assert torch.allclose(
        op.expected_probability, torch.tensor([[0.8, 0.2], [0.5, 0.5]], dtype=torch.float64)
    )


def test_zero_evidence_is_vacuous_and_empty_frame_is_vacuous():
    op = opinions_from_evidence(torch.zeros(2, 3))
    assert op.belief.abs().sum() == 0 and op.vacuity.tolist() == [1.0, 1.0]
    empty = opinions_from_evidence(torch.zeros(2, 0))
    assert empty.vacuity.tolist() == [1.0, 1.0]


def test_integer_evidence_becomes_float():
    op = opinions_from_evidence([[3, 0], [0, 3]])
    assert op.belief.dtype == torch.get_default_dtype()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_bad_evidence_names_the_position(bad):
    ev = torch.ones(2, 3, 4)
    ev[1, 2, 3] = bad
    with pytest.raises(InvalidEvidenceError, match=r"evidence\[1, 2, 3\]"):
        opinions_from_evidence(ev)


def test_sanitize_maps_bad_values_to_ignorance_and_warns():
    ev = torch.tensor([[float("nan"), 2.0], [-3.0, float("inf")]])
    with pytest.warns(RuntimeWarning, match="sanitized 3"):
        op = opinions_from_evidence(ev, sanitize=True)
    # chunk 0: e = (0, 2) -> S = 4 ; chunk 1: e = (0, 0) -> vacuous
    assert op.belief.tolist() == [[0.0, 0.5], [0.0, 0.0]]
    assert op.vacuity.tolist() == [0.5, 1.0]


def test_bad_values_at_masked_positions_are_ignored():
    ev = torch.tensor([[[2.0, float("nan")], [float("nan"), float("nan")]]], dtype=torch.float64)
    op = opinions_from_evidence(
        ev, claim_mask=torch.tensor([[True, False]]), chunk_mask=torch.tensor([[True, False]])
    )
    assert op.belief.tolist() == [[[2 / 3, 0.0], [0.0, 0.0]]]
    assert op.vacuity.tolist() == [[1 / 3, 1.0]]


def test_shape_errors_are_clear():
    with pytest.raises(ShapeError, match=r"\[\.\.\., k, M\]"):
        opinions_from_evidence(torch.ones(3))
    with pytest.raises(ShapeError, match="claim_mask"):
        opinions_from_evidence(torch.ones(2, 5, 3), claim_mask=torch.ones(2, 4, dtype=torch.bool))


@given(
    st.lists(
        st.lists(st.one_of(st.just(0.0), st.floats(0, 10), st.floats(0, 1e12)), min_size=3, max_size=3),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from([torch.float32, torch.float64]),
)
def test_masses_sum_to_one(rows, dtype):
    op = opinions_from_evidence(torch.tensor(rows, dtype=dtype))
    total = op.belief.sum(-1) + op.vacuity
    assert torch.allclose(total, torch.ones_like(total), atol=1e-6)
    assert (op.belief >= 0).all() and (op.vacuity >= 0).all()
    for i, row in enumerate(rows):  # u = M / S (Eq 5)
        assert math.isclose(float(op.vacuity[i]), 3 / (sum(row) + 3), rel_tol=1e-5, abs_tol=1e-12)
