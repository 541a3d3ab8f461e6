import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from evidential import (
    ABSTAIN,
    CONFLICT,
    DIRECT,
    ROUTES,
    ConfigError,
    InvalidEvidenceError,
    UnknownNameError,
    fuse,
    opinions_from_evidence,
    route,
)


def test_paper_policy_boundaries():
    u = torch.tensor([0.0, 0.3499, 0.35, 0.5, 0.6499, 0.65, 1.0], dtype=torch.float64)
    r = route(u, 0.35, 0.65)
    assert r.ids.tolist() == [DIRECT, DIRECT, CONFLICT, CONFLICT, CONFLICT, ABSTAIN, ABSTAIN]
    assert r.names == ["direct", "direct", "conflict", "conflict", "conflict", "abstain", "abstain"]


def test_scalar_input_gives_a_name():
    assert route(0.52).names == "conflict"
    assert route(0.1).names == "direct" and route(0.9).names == "abstain"


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def test_route_matches_eq15_and_is_monotone(u, t1, t2):
    t1, t2 = sorted((t1, t2))
    if t1 == t2:
        return
    got = route(torch.tensor(u, dtype=torch.float64), t1, t2).names
    assert got == ("direct" if u < t1 else "conflict" if u < t2 else "abstain")


def test_bad_thresholds_and_policy():
    with pytest.raises(ConfigError, match="tau1"):
        route(0.5, 0.7, 0.6)
    with pytest.raises(ConfigError):
        route(0.5, -0.1, 0.6)
    with pytest.raises(UnknownNameError, match="decomposed, direct, paper"):
        route(0.5, policy="bogus")
    with pytest.raises(ConfigError, match="fusion="):
        route(0.5, policy="decomposed")
    with pytest.raises(InvalidEvidenceError, match="NaN"):
        route(float("nan"))


def test_decomposed_policy_separates_no_evidence_from_contradicting_evidence():
    # batch: (1) agreeing strong evidence, (2) only noise, (3) two strong contradicting chunks
    ev = torch.tensor(
        [[[20.0, 0.0], [20.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]], [[20.0, 0.0], [0.0, 20.0]]],
        dtype=torch.float64,
    )
    res = fuse(opinions_from_evidence(ev), rule="yager")
    assert res.uncertainty[2] > 0.65 and res.conflict[2] > res.ignorance[2]
    assert route(res, policy="paper").names == ["direct", "abstain", "abstain"]
    assert route(res, policy="decomposed").names == ["direct", "abstain", "conflict"]
    # a FusionResult as the first argument is the same as passing it as `fusion`
    assert torch.equal(
        route(res.uncertainty, policy="decomposed", fusion=res).ids, route(res, policy="decomposed").ids
    )


def test_decomposed_policy_keeps_eq15_when_ignorance_dominates():
    # one weak chunk: U in [τ1, τ2), all ignorance -> conflict (hedged), like the paper
    res = fuse(opinions_from_evidence(torch.tensor([[1.5, 0.0]], dtype=torch.float64)))
    assert 0.35 <= float(res.uncertainty) < 0.65 and float(res.conflict) == 0.0
    assert route(res, policy="decomposed").names == route(res, policy="paper").names == "conflict"


def test_route_names_are_the_contract():
    assert ROUTES == ("direct", "conflict", "abstain")


@given(st.floats(0.0, 1.0, allow_nan=False), st.floats(0.0, 0.49), st.floats(0.5, 1.0))
def test_direct_policy_never_routes_away(u, t1, t2):
    """The "without routing" ablation answers directly at any U (with or without a fusion result)."""
    assert route(u, t1, t2, policy="direct").names == "direct"
    r = route(torch.tensor([0.0, 0.5, 1.0]), policy="direct")
    assert r.ids.tolist() == [0, 0, 0] and r.policy == "direct"


def test_stated_mask_hand_values():
    from evidential import stated_mask

    b = torch.tensor([[0.50, 0.30, 0.10, 0.0], [0.2, 0.2, 0.0, 0.0]], dtype=torch.float64)
    assert stated_mask(b, 0.5).tolist() == [[True, True, False, False], [True, True, False, False]]
    assert stated_mask(b, 0.0).tolist() == [[True, True, True, False], [True, True, False, False]]
    assert stated_mask(b, 1.0).tolist() == [[True, False, False, False], [True, True, False, False]]
    mask = torch.tensor([[True, False, True, True], [True, True, True, True]])
    assert stated_mask(b, 0.1, claim_mask=mask)[0].tolist() == [True, False, True, False]
    routes = torch.tensor([DIRECT, ABSTAIN])
    assert stated_mask(b, 0.5, routes=routes)[1].tolist() == [False] * 4  # an abstention states nothing
    for bad in (-0.1, 1.5, True, "0.5"):
        with pytest.raises(ConfigError, match="ratio"):
            stated_mask(b, bad)


@given(
    st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=6),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
)
def test_stated_mask_properties(masses, r1, r2):
    from evidential import stated_mask

    b = torch.tensor(masses, dtype=torch.float64)
    lo, hi = sorted((r1, r2))
    a, c = stated_mask(b, lo), stated_mask(b, hi)
    assert bool((c <= a).all())  # a higher bar states a subset
    assert a.tolist() == (b > 0).tolist() if lo == 0 else True
    if float(b.max()) > 0:
        assert bool(c[int(b.argmax())])  # the top claim always clears the bar
    else:
        assert not bool(a.any())  # no mass: nothing is stated


# ------------------------------------------------------------------------------------------ edited copies
from evidential import backing_claims, copy_contested, select_uncontested, stated_mask  # noqa: E402


def _pairs(k, *pairs):
    cp = torch.zeros(k, k, dtype=torch.bool)
    for i, j in pairs:
        cp[i, j] = cp[j, i] = True
    return cp


def test_backing_claims_is_the_argmax_with_positive_evidence():
    ev = torch.tensor([[0.0, 2.0, 1.0], [3.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
    assert backing_claims(ev).tolist() == [[False, True, False], [True, False, False], [False, False, False]]
    assert backing_claims(ev, torch.tensor([True, False, True])).tolist()[1] == [False, False, False]
    assert backing_claims(torch.zeros(2, 0)).shape == (2, 0)


def test_a_planted_copy_is_contested_and_an_independent_minority_is_not():
    # chunk 0 backs A, chunk 1 is chunk 0 with the answer swapped (backs B), chunk 2 backs C on its own
    ev = torch.tensor([[5.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 3.0]], dtype=torch.float64)
    belief = torch.tensor([0.4, 0.3, 0.2], dtype=torch.float64)
    contested = copy_contested(belief, ev, _pairs(3, (0, 1)))
    assert contested.tolist() == [False, True, False]
    assert stated_mask(belief, 0.0, contested=contested).tolist() == [True, False, True]
    # the copy backs the better-supported claim: then the original's claim is the one contested
    assert copy_contested(torch.tensor([0.3, 0.4, 0.2]), ev, _pairs(3, (0, 1))).tolist() == [
        True,
        False,
        False,
    ]
    # a claim with one backing chunk that copies nothing better stays: B (chunks 1 and 3) ties A (chunks 0
    # and 4) on backing chunks and has less mass, but chunk 3 is its own source
    ev3 = torch.cat([ev, torch.tensor([[0.0, 2.0, 0.0], [2.0, 0.0, 0.0]], dtype=torch.float64)])
    assert copy_contested(belief, ev3, _pairs(5, (0, 1))).tolist() == [False, False, False]
    ev2 = torch.cat([ev, torch.tensor([[0.0, 2.0, 0.0]], dtype=torch.float64)])
    # corroboration outranks mass: an independent chunk 3 backs the copy's claim B, so the less massive B is
    # the original and A, backed only by chunk 0 (the copy of chunk 1), is contested and never the answer
    contested = copy_contested(belief, ev2, _pairs(4, (0, 1)))
    assert contested.tolist() == [True, False, False]
    assert select_uncontested(belief, contested).tolist() == 1
    assert select_uncontested(belief).tolist() == 0
    # equal masses: nobody is outvoted; no copies: nothing is contested
    assert copy_contested(torch.tensor([0.3, 0.3, 0.2]), ev, _pairs(3, (0, 1))).tolist() == [False] * 3
    assert copy_contested(belief, ev, _pairs(3)).tolist() == [False] * 3


def test_an_empty_frame_or_no_chunk_contests_nothing():
    assert copy_contested(torch.zeros(0), torch.zeros(2, 0), _pairs(2, (0, 1))).shape == (0,)
    assert copy_contested(
        torch.tensor([0.5]), torch.zeros(0, 1), torch.zeros(0, 0, dtype=torch.bool)
    ).tolist() == [False]


def test_copies_of_padded_chunks_are_ignored():
    ev = torch.tensor([[[5.0, 0.0], [0.0, 4.0]]], dtype=torch.float64)
    belief = torch.tensor([[0.5, 0.3]], dtype=torch.float64)
    cp = _pairs(2, (0, 1)).unsqueeze(0)
    assert copy_contested(belief, ev, cp).tolist() == [[False, True]]
    assert copy_contested(belief, ev, cp, torch.tensor([[True, False]])).tolist() == [[False, False]]


# evidence [k ≤ 6, M ≤ 4] on a few levels, and copy pairs among its chunks
_EVIDENCE_AND_COPIES = st.integers(1, 4).flatmap(
    lambda m: st.tuples(
        st.lists(
            st.lists(st.sampled_from([0.0, 0.5, 2.0, 6.0]), min_size=m, max_size=m),
            min_size=1,
            max_size=6,
        ),
        st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=8),
    )
)


def _case(case):
    rows, pairs = case
    ev = torch.tensor(rows, dtype=torch.float64)
    k = ev.shape[0]
    return ev, k, _pairs(k, *[(i, j) for i, j in pairs if i < k and j < k])


@given(_EVIDENCE_AND_COPIES)
def test_copy_contested_properties(case):
    ev, k, cp = _case(case)
    res = fuse(opinions_from_evidence(ev), lam=0.6)
    contested = copy_contested(res.belief, ev, cp)
    backed = backing_claims(ev).any(0)
    assert not bool((contested & ~backed).any())  # only claims some chunk backs
    # the best-supported claim (most backing chunks, then most mass) never
    support = backing_claims(ev).sum(0).to(torch.float64) + 0.5 * res.belief
    assert not bool((contested & (support >= support.max())).any())
    # the answer is the most massive uncontested claim; with nothing contested, the fusion's selection
    sel = int(select_uncontested(res.belief, contested))
    if sel >= 0:
        assert not bool(contested[sel]) and float(res.belief[sel]) == float(res.belief[~contested].max())
    assert int(select_uncontested(res.belief, torch.zeros_like(contested))) == int(res.selected)
    assert not bool(copy_contested(res.belief, ev, torch.zeros(k, k, dtype=torch.bool)).any())
    # batched equals one query at a time
    batched = copy_contested(res.belief.unsqueeze(0).repeat(2, 1), ev.repeat(2, 1, 1), cp.repeat(2, 1, 1))
    assert batched.tolist() == [contested.tolist()] * 2


# ------------------------------------------------------------------------------------------ agreeing copies
from evidential import merge_copies  # noqa: E402


def test_agreeing_copies_are_fused_as_one_source_with_their_mean_evidence():
    # chunks 0, 1 and 3 are copies of one text backing claim A (0-1 and 1-3: transitive); chunk 2 backs B
    ev = torch.tensor([[4.0, 0.0], [2.0, 1.0], [0.0, 3.0], [3.0, 0.0]], dtype=torch.float64)
    merged = merge_copies(ev, _pairs(4, (0, 1), (1, 3)))
    assert torch.allclose(
        merged, torch.tensor([[3.0, 1 / 3], [0.0, 0.0], [0.0, 3.0], [0.0, 0.0]], dtype=torch.float64)
    )
    # a copy that backs another claim (an edited copy) is not merged: copy_contested decides about it
    assert torch.equal(merge_copies(ev, _pairs(4, (0, 2))), ev)
    # no copies, or copies of chunks that back nothing: unchanged
    assert torch.equal(merge_copies(ev, _pairs(4)), ev)
    blank = torch.tensor([[0.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    assert torch.equal(merge_copies(blank, _pairs(2, (0, 1))), blank)


def test_a_text_retrieved_twice_counts_once_in_the_fusion():
    a, b = [5.0, 0.0], [0.0, 3.0]
    twice = torch.tensor([a, a, b], dtype=torch.float64)
    once = torch.tensor([a, b], dtype=torch.float64)
    fused_twice = fuse(opinions_from_evidence(merge_copies(twice, _pairs(3, (0, 1)))), lam=0.6)
    fused_once = fuse(opinions_from_evidence(once), lam=0.6)
    assert torch.allclose(fused_twice.belief, fused_once.belief)
    assert torch.allclose(fused_twice.uncertainty, fused_once.uncertainty)
    # without the merge the duplicate outweighs the independent source
    naive = fuse(opinions_from_evidence(twice), lam=0.6)
    assert float(naive.belief[0] - naive.belief[1]) > float(fused_once.belief[0] - fused_once.belief[1])


def test_merge_copies_ignores_padded_chunks_and_passes_gradients():
    ev = torch.tensor([[[5.0, 0.0], [4.0, 0.0]]], dtype=torch.float64, requires_grad=True)
    cp = _pairs(2, (0, 1)).unsqueeze(0)
    assert merge_copies(ev, cp, torch.tensor([[True, False]])).tolist() == ev.tolist()
    merge_copies(ev, cp).sum().backward()
    assert ev.grad.tolist() == [[[0.5, 0.5], [0.5, 0.5]]]  # the kept row is the mean of both


@given(_EVIDENCE_AND_COPIES)
def test_merge_copies_properties(case):
    ev, k, cp = _case(case)
    merged = merge_copies(ev, cp)
    assert merged.shape == ev.shape and bool((merged >= 0).all())
    # each chunk's row is either kept, zeroed (a later member of a group) or its group's mean
    kept = merged.abs().sum(-1) > 0
    assert int(kept.sum()) <= int((ev.abs().sum(-1) > 0).sum())
    # every claim some chunk backs is still backed: merging removes duplicates, not claims
    assert backing_claims(merged).any(0).tolist() == backing_claims(ev).any(0).tolist()
    # merging is idempotent and batched equals one query at a time
    assert torch.allclose(merge_copies(merged, cp), merged)
    assert torch.allclose(merge_copies(ev.repeat(2, 1, 1), cp.repeat(2, 1, 1)), merged.repeat(2, 1, 1))
    assert torch.equal(merge_copies(ev, torch.zeros(k, k, dtype=torch.bool)), ev)


# ------------------------------------------------------------------------------------------------ witnesses
from evidential import witnessed_claims  # noqa: E402


def test_witnessed_claims_hand_values():
    # chunks 0, 1 back claim 0 (6, 5); chunk 2 backs claim 1 at 3.5; chunk 3 backs claim 2 at 1; strongest 6
    ev = torch.tensor([[6.0, 1.0, 0.0], [5.0, 0.0, 0.0], [0.0, 3.5, 0.0], [0.0, 0.0, 1.0]])
    assert witnessed_claims(ev, 0.5).tolist() == [True, True, False]  # 3.5 >= 3, 1 < 3
    assert witnessed_claims(ev, 0.6).tolist() == [True, False, False]  # 3.5 < 3.6
    assert witnessed_claims(ev, 0.0).tolist() == [True, True, True]  # every backed claim
    assert witnessed_claims(ev, 1.0).tolist() == [True, False, False]  # only the strongest chunk's claim
    # chunk 0's second-best evidence (1.0 for claim 1) is not a witness: only the claim a chunk backs
    assert witnessed_claims(ev[[0]], 0.0).tolist() == [True, False, False]
    # masks: a padded chunk or claim never witnesses, and does not set the query's strongest evidence
    assert witnessed_claims(ev, 0.5, chunk_mask=torch.tensor([False, True, True, True])).tolist() == [
        True,
        True,
        False,
    ]  # strongest 5: 3.5 >= 2.5
    assert witnessed_claims(ev, 0.5, claim_mask=torch.tensor([True, True, False])).tolist() == [
        True,
        True,
        False,
    ]
    # no positive evidence, no chunk, no claim: no witness
    assert witnessed_claims(torch.zeros(2, 2), 0.0).tolist() == [False, False]
    assert witnessed_claims(torch.zeros(0, 3), 0.5).tolist() == [False, False, False]
    assert witnessed_claims(torch.zeros(2, 0), 0.5).tolist() == []
    # batched
    batch = torch.stack([ev, ev.flip(-1)])
    assert witnessed_claims(batch, 0.5).tolist() == [[True, True, False], [False, True, True]]
    for bad in (-0.1, 1.5, True, None):
        with pytest.raises(ConfigError, match="witness ratio"):
            witnessed_claims(ev, bad)


@given(
    st.lists(st.lists(st.floats(0.0, 50.0, allow_nan=False), min_size=3, max_size=3), min_size=1, max_size=6),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.integers(-6, 6),
)
def test_witnessed_claims_properties(rows, r1, r2, log2_scale):
    e = torch.tensor(rows, dtype=torch.float64)
    lo, hi = sorted((r1, r2))
    a, c = witnessed_claims(e, lo), witnessed_claims(e, hi)
    assert bool((c <= a).all())  # a higher bar witnesses a subset
    assert bool((a <= backing_claims(e).any(-2)).all())  # only claims some chunk backs
    # scale-free: a power-of-two scale multiplies every evidence exactly
    assert witnessed_claims(e * 2.0**log2_scale, hi).tolist() == c.tolist()
    if float(e.max()) > 0:  # the strongest chunk's claim is always witnessed
        i = int(e.max(-1).values.argmax())
        assert bool(c[int(e[i].argmax())])
    else:
        assert not bool(a.any())


def test_stated_mask_states_witnessed_claims_but_never_a_contested_or_massless_one():
    b = torch.tensor([0.5, 0.05, 0.04, 0.0])
    wit = torch.tensor([False, True, True, True])
    assert stated_mask(b, 0.5).tolist() == [True, False, False, False]
    assert stated_mask(b, 0.5, witnessed=wit).tolist() == [True, True, True, False]  # no mass: not stated
    cont = torch.tensor([False, False, True, False])
    assert stated_mask(b, 0.5, contested=cont, witnessed=wit).tolist() == [True, True, False, False]
    routes = torch.tensor(ABSTAIN)
    assert not bool(stated_mask(b, 0.5, routes=routes, witnessed=wit).any())  # an abstention states nothing
