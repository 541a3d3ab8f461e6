"""Uncertainty-aware routing of generation (paper Eq 15 and the decomposed policy).

Routes, by id: ``0 = "direct"`` (answer with the highest-mass claim, cite its supporting chunks),
``1 = "conflict"`` (a conflict-aware answer: state the disagreement, list the competing claims with their
sources), ``2 = "abstain"`` (decline and say what evidence is missing).

Policies (registry :data:`ROUTING_POLICIES`):

* ``"paper"`` (Eq 15): ``U < τ1`` → direct; ``τ1 ≤ U < τ2`` → conflict; ``U ≥ τ2`` → abstain.
  A value exactly at τ1 routes to conflict, exactly at τ2 to abstain.
* ``"decomposed"``: uses the split of ``U_global`` into ignorance ``I`` (no evidence) and conflict ``C``
  (contradicting evidence), ``I + C = U``. ``U < τ1`` → direct, as in the paper. Otherwise, when the
  conflict part dominates (``C ≥ I``) the sources *do* say things that disagree, so the answer explains
  the conflict (conflict route) at any ``U``; when ignorance dominates (``I > C``) it follows Eq 15
  (conflict below τ2, abstain at or above). So "no evidence" abstains while "contradicting evidence"
  explains the conflict instead of refusing.
* ``"direct"``: no routing — always the direct answer (the "without routing" ablation, Table 12).

What a route *states* (:func:`stated_mask`): a claim is stated when its fused mass is positive and reaches
``ratio`` times the top claim's mass. The direct route states the selected claim and every other claim
that clears that bar (several valid answers, e.g. entities sharing a name); the conflict route states the
claims that clear it (minority claims, e.g. planted ones, drop out); the abstention states none.

Witnesses (:func:`witnessed_claims`): the fused-mass bar measures agreement, and several valid answers
for different entities that share a name each have their own sources. Fusion multiplies the agreeing
evidence of a claim that three documents state, so a valid answer that one document states clearly falls
far below the bar beside it. With a witness bar ``w``, a claim is also stated when some chunk backs it with
evidence of at least ``w`` times the query's strongest chunk evidence: a source of its own that states it
about as clearly as the best-read chunk states anything. Edited copies are still never stated.

Edited copies (:func:`copy_contested`): retrieved chunks are not always independent sources. A planted
answer is often a copy of a real document with the answer swapped (RAMDocs' misinformation documents,
corpus-poisoning attacks), and two chunks that are copies of one text are one source, not two. A claim whose
every backing chunk is a near-copy of a chunk that backs a claim with *more* fused mass contradicts the
text it was copied from and has no source of its own: it is not stated, whatever its mass.

Agreeing copies (:func:`merge_copies`): near-copies that back the *same* claim are one source too. Fusing
them as independent sources (Dempster's rule and the λ rule assume independence) counts one text's evidence
once per copy: a document retrieved twice, or the overlapping windows of one passage, would outvote a
second, independent document. They are fused as one source instead, with the mean of their evidence
(Jøsang's averaging fusion, the operator for dependent sources, in evidence form).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from evidential.errors import ConfigError, InvalidEvidenceError
from evidential.fusion import FusionResult
from evidential.registry import Registry

__all__ = [
    "ROUTES",
    "DIRECT",
    "CONFLICT",
    "ABSTAIN",
    "ROUTING_POLICIES",
    "Routing",
    "route",
    "check_thresholds",
    "backing_claims",
    "copy_contested",
    "copy_pairs",
    "merge_copies",
    "select_uncontested",
    "stated_mask",
    "witnessed_claims",
]

ROUTES: tuple[str, str, str] = ("direct", "conflict", "abstain")
DIRECT, CONFLICT, ABSTAIN = 0, 1, 2

RoutingPolicy = Callable[[torch.Tensor, float, float, "FusionResult | None"], torch.Tensor]
ROUTING_POLICIES: Registry[RoutingPolicy] = Registry("routing policy")


@dataclass(frozen=True)
class Routing:
    """Route decisions: ``ids`` (long tensor, same shape as ``U``) and their names."""

    ids: torch.Tensor
    policy: str

    @property
    def names(self):
        """Route names: a ``str`` for a single query, else nested lists matching ``ids``."""

        def name(x):
            return [name(v) for v in x] if isinstance(x, list) else ROUTES[x]

        return name(self.ids.tolist())


def check_thresholds(tau1: float, tau2: float) -> None:
    """Raise :class:`ConfigError` unless ``0 <= τ1 < τ2 <= 1``."""
    if not (0.0 <= tau1 < tau2 <= 1.0):
        raise ConfigError(f"thresholds must satisfy 0 <= tau1 < tau2 <= 1; got tau1={tau1}, tau2={tau2}")


@ROUTING_POLICIES.register("paper")
def paper_policy(u: torch.Tensor, tau1: float, tau2: float, fusion: FusionResult | None) -> torch.Tensor:
    """Eq 15: thresholds on ``U_global`` alone."""
    ids = torch.full(u.shape, CONFLICT, dtype=torch.long, device=u.device)
    ids = torch.where(u < tau1, torch.full_like(ids, DIRECT), ids)
    return torch.where(u >= tau2, torch.full_like(ids, ABSTAIN), ids)


@ROUTING_POLICIES.register("decomposed")
def decomposed_policy(u: torch.Tensor, tau1: float, tau2: float, fusion: FusionResult | None) -> torch.Tensor:
    """Direct below τ1; above, conflict when the conflict part dominates, else Eq 15."""
    if fusion is None:
        raise ConfigError(
            "the 'decomposed' routing policy needs the ignorance/conflict split: pass fusion=<FusionResult> "
            "(or the FusionResult itself as the first argument)"
        )
    ids = paper_policy(u, tau1, tau2, None)
    dissonant = (fusion.conflict >= fusion.ignorance) & (u >= tau1)
    return torch.where(dissonant, torch.full_like(ids, CONFLICT), ids)


@ROUTING_POLICIES.register("direct")
def direct_policy(u: torch.Tensor, tau1: float, tau2: float, fusion: FusionResult | None) -> torch.Tensor:
    """No routing (the "without routing" ablation): every query gets the direct answer, whatever ``U``."""
    return torch.full(u.shape, DIRECT, dtype=torch.long, device=u.device)


def route(
    uncertainty: torch.Tensor | float | FusionResult,
    tau1: float = 0.35,
    tau2: float = 0.65,
    policy: str = "paper",
    fusion: FusionResult | None = None,
) -> Routing:
    """Route each query to ``direct`` / ``conflict`` / ``abstain`` (Eq 15 or the decomposed policy).

    Args:
        uncertainty: ``U_global`` ``[...]``, a float, or a :class:`FusionResult` (then ``fusion`` defaults to it).
        tau1: Lower threshold (paper 0.35).
        tau2: Upper threshold (paper 0.65); ``0 <= τ1 < τ2 <= 1``.
        policy: ``"paper"``, ``"decomposed"`` or ``"direct"`` (see the module docstring).
        fusion: The fusion result, needed by ``"decomposed"``.

    Returns:
        A :class:`Routing` with ``.ids`` (0 direct, 1 conflict, 2 abstain) and ``.names``.

    Example:
        >>> route(0.52).names
        'conflict'
    """
    check_thresholds(tau1, tau2)
    fn = ROUTING_POLICIES.get(policy)
    if isinstance(uncertainty, FusionResult):
        fusion = fusion if fusion is not None else uncertainty
        uncertainty = uncertainty.uncertainty
    u = torch.as_tensor(uncertainty)
    if not u.is_floating_point():
        u = u.to(torch.get_default_dtype())
    if bool(torch.isnan(u).any()):
        raise InvalidEvidenceError("uncertainty contains NaN; fuse valid opinions before routing")
    return Routing(ids=fn(u, tau1, tau2, fusion), policy=policy)


def backing_claims(evidence: torch.Tensor, chunk_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Which claim each chunk backs: the claim of its largest evidence, where that evidence is positive
    (first claim on ties; a chunk with no evidence, or a padded one, backs none). The argmax is unchanged by
    any increasing evidence map (the calibration's ``s · e^p``), so raw and calibrated evidence agree.

    Args:
        evidence: ``[..., k, M]``, non-negative.
        chunk_mask: Bool ``[..., k]`` of real chunks.

    Returns:
        Bool ``[..., k, M]`` with at most one True per chunk.

    Example:
        >>> backing_claims(torch.tensor([[0.0, 2.0], [1.0, 1.0], [0.0, 0.0]])).tolist()
        [[False, True], [True, False], [False, False]]
    """
    e = torch.as_tensor(evidence)
    if e.shape[-1] == 0:
        return torch.zeros(e.shape, dtype=torch.bool, device=e.device)
    top = e.argmax(-1, keepdim=True)
    out = torch.zeros(e.shape, dtype=torch.bool, device=e.device).scatter_(-1, top, True)
    out &= e.max(-1, keepdim=True).values > 0
    if chunk_mask is not None:
        out &= chunk_mask.to(torch.bool).unsqueeze(-1)
    return out


def copy_pairs(copies: list[list[int]]) -> torch.Tensor:
    """The bool ``[k, k]`` copy matrix of per-chunk lists of copy indices (``copies[i]``: the chunks that
    chunk ``i`` is a copy of), the input of :func:`copy_contested`.

    Example:
        >>> copy_pairs([[1], [0], []]).tolist()
        [[False, True, False], [True, False, False], [False, False, False]]
    """
    k = len(copies)
    out = torch.zeros(k, k, dtype=torch.bool)
    for i, js in enumerate(copies):
        out[i, list(js)] = True
    return out


def merge_copies(
    evidence: torch.Tensor, copies: torch.Tensor, chunk_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Fuse agreeing copies as one source: the chunks linked by near-copy pairs (``copies``, taken
    transitively) that back the same claim (:func:`backing_claims`) form a group; the group's first chunk
    gets the mean of the group's evidence vectors and the others get zero evidence (a vacuous opinion,
    which no fusion rule counts). Chunks that back no claim, or that copy only chunks backing another claim,
    are unchanged. Differentiable in ``evidence``.

    Args:
        evidence: ``[..., k, M]``, non-negative (after any calibration transform: this is what is fused).
        copies: Bool ``[..., k, k]``: chunk ``i`` and chunk ``i'`` are copies of one text (symmetric; the
            diagonal is ignored).
        chunk_mask: Bool ``[..., k]`` of real chunks (padded chunks are in no group).

    Returns:
        The evidence ``[..., k, M]`` to fuse, same dtype.

    Example:
        >>> ev = torch.tensor([[4.0, 0.0], [2.0, 1.0], [0.0, 3.0]])  # chunks 0 and 1: one text, one claim
        >>> copies = torch.tensor([[False, True, False], [True, False, False], [False, False, False]])
        >>> merge_copies(ev, copies).tolist()
        [[3.0, 0.5], [0.0, 0.0], [0.0, 3.0]]
    """
    e = torch.as_tensor(evidence)
    k = e.shape[-2]
    if k == 0 or e.shape[-1] == 0:
        return e
    backs = backing_claims(e, chunk_mask)  # [..., k, M]
    eye = torch.eye(k, dtype=torch.bool, device=e.device)
    cp = torch.as_tensor(copies, device=e.device).to(torch.bool) & ~eye
    same = (backs.unsqueeze(-2) & backs.unsqueeze(-3)).any(-1)  # [..., k, k]: back one claim
    link = (cp & same).to(e.dtype)
    # transitive closure by repeated squaring: reach[i, j] = i and j are in one group (i == j included)
    reach = (link + eye.to(e.dtype)).clamp_max(1.0)
    for _ in range(max(1, (k - 1).bit_length())):
        reach = (reach @ reach).clamp_max(1.0)
    group = reach > 0
    # a chunk keeps the group's evidence when no earlier chunk is in its group
    earlier = torch.tril(torch.ones(k, k, dtype=torch.bool, device=e.device), diagonal=-1)  # [i, j]: j < i
    keeps = ~(group & earlier).any(-1)  # [..., k]
    mean = (group.to(e.dtype) @ e) / group.to(e.dtype).sum(-1, keepdim=True)
    return torch.where(keeps.unsqueeze(-1), mean, torch.zeros_like(e))


def copy_contested(
    belief: torch.Tensor,
    evidence: torch.Tensor,
    copies: torch.Tensor,
    chunk_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Claims backed only by edited copies: every chunk that backs claim ``j`` (:func:`backing_claims`) is a
    near-copy (``copies[i, i']``) of a chunk ``i'`` that backs a better-supported claim — one that more
    chunks back (corroboration by other sources), or as many chunks and more fused mass than ``b_j``.

    Such a claim contradicts the text its chunk was copied from and has no source of its own (a planted
    edit), so :func:`stated_mask` drops it when given this mask. Of two copies that disagree, the one whose
    claim other chunks corroborate is the original: corroboration is counted first because the fused masses
    of two single-chunk claims differ only by the evaluator's reading of two near-identical texts. The
    best-supported claim is never contested, nor is a claim no chunk backs, nor one with a backing chunk that copies nothing better supported;
    with no copies nothing is. Agreeing copies count once when ``evidence`` comes from
    :func:`merge_copies`.

    Args:
        belief: Fused singleton masses ``[..., M]``.
        evidence: The fused evidence ``[..., k, M]`` (which claim each chunk backs).
        copies: Bool ``[..., k, k]``: chunk ``i`` and chunk ``i'`` are copies of one text (symmetric; the
            diagonal is ignored).
        chunk_mask: Bool ``[..., k]`` of real chunks.

    Returns:
        Bool ``[..., M]``.

    Example:
        >>> ev = torch.tensor([[4.0, 0.0], [0.0, 3.0], [2.0, 0.0]])  # chunk 1 copies chunk 0
        >>> copies = torch.tensor([[False, True, False], [True, False, False], [False, False, False]])
        >>> copy_contested(torch.tensor([0.6, 0.2]), ev, copies).tolist()
        [False, True]
    """
    b = torch.as_tensor(belief)
    backs = backing_claims(evidence, chunk_mask)  # [..., k, M]
    if backs.shape[-1] == 0 or backs.shape[-2] == 0:  # no claim or no chunk: nothing to contest
        return torch.zeros(b.shape, dtype=torch.bool, device=backs.device)
    k = backs.shape[-2]
    cp = torch.as_tensor(copies).to(torch.bool) & ~torch.eye(k, dtype=torch.bool, device=backs.device)
    if chunk_mask is not None:
        m = chunk_mask.to(torch.bool)
        cp = cp & m.unsqueeze(-1) & m.unsqueeze(-2)
    # support of each claim: backing chunks first, fused mass (in [0, 1], halved) to break ties
    support = backs.sum(-2).to(torch.float64) + 0.5 * b.to(torch.float64).clamp(0.0, 1.0)  # [..., M]
    bf = support.unsqueeze(-2)  # [..., 1, M]
    # support of the claim each chunk backs (-1: none), and the best support backed by one of its copies
    own = torch.where(backs, bf, torch.full_like(bf, -1.0)).max(-1).values  # [..., k]
    partner = torch.where(cp, own.unsqueeze(-2), torch.full_like(own.unsqueeze(-2), -1.0)).max(-1).values
    outvoted = (own >= 0) & (partner > own)  # [..., k]
    backed = backs.any(-2)
    return backed & ~(backs & ~outvoted.unsqueeze(-1)).any(-2)


def select_uncontested(belief: torch.Tensor, contested: torch.Tensor | None = None) -> torch.Tensor:
    """The answer's claim: the highest-mass claim that is not ``contested`` (:func:`copy_contested`), so a
    planted edit never becomes the committed answer even when its mass tops the frame. Without
    ``contested`` this is the fusion's ``selected`` claim (Eq 27: first claim on ties).

    Args:
        belief: Fused singleton masses ``[..., M]``.
        contested: Bool ``[..., M]`` of claims never stated.

    Returns:
        Long ``[...]``: the claim index, ``-1`` where no uncontested claim has positive mass.

    Example:
        >>> select_uncontested(torch.tensor([0.5, 0.3, 0.1]), torch.tensor([True, False, False])).tolist()
        1
    """
    b = torch.as_tensor(belief)
    if contested is not None:
        b = b.masked_fill(torch.as_tensor(contested, device=b.device).to(torch.bool), 0.0)
    if b.shape[-1] == 0:
        return torch.full(b.shape[:-1], -1, dtype=torch.long, device=b.device)
    top, idx = b.max(-1)
    return torch.where(top > 0, idx, torch.full_like(idx, -1))


def check_ratio(value: float, what: str) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a number in ``[0, 1]``."""
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0):
        raise ConfigError(f"the {what} must be a number in [0, 1]; got {value!r}")


def witnessed_claims(
    evidence: torch.Tensor,
    ratio: float,
    chunk_mask: torch.Tensor | None = None,
    claim_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Claims a chunk of their own states clearly: some chunk backs claim ``j`` (:func:`backing_claims`)
    with evidence ``e_ij >= ratio · max_{i', j'} e_i'j'``, the query's strongest chunk evidence. Scale-free
    (multiplying every evidence by ``s`` changes nothing), so raw and scaled evidence agree; a query without
    positive evidence has no witness. :func:`stated_mask` states these claims beside those above the
    fused-mass bar.

    Args:
        evidence: ``[..., k, M]``, non-negative: the evidence that is fused (after the calibration transform
            and :func:`merge_copies`, so agreeing copies are one witness).
        ratio: The witness bar in ``[0, 1]``: 1 keeps only the chunks tied with the strongest one, 0 every
            chunk that backs a claim.
        chunk_mask: Bool ``[..., k]`` of real chunks.
        claim_mask: Bool ``[..., M]`` of real claims.

    Returns:
        Bool ``[..., M]``.

    Example:
        >>> ev = torch.tensor([[6.0, 1.0, 0.0], [5.0, 0.0, 0.0], [0.0, 3.5, 0.0], [0.0, 0.0, 1.0]])
        >>> witnessed_claims(ev, 0.5).tolist()  # chunk 2 backs claim 1 at 3.5 >= 0.5 · 6
        [True, True, False]
    """
    check_ratio(ratio, "witness ratio")
    e = torch.as_tensor(evidence)
    if claim_mask is not None:
        e = e.masked_fill(~claim_mask.to(torch.bool).unsqueeze(-2), 0.0)
    if chunk_mask is not None:
        e = e.masked_fill(~chunk_mask.to(torch.bool).unsqueeze(-1), 0.0)
    if e.shape[-1] == 0 or e.shape[-2] == 0:
        return torch.zeros((*e.shape[:-2], e.shape[-1]), dtype=torch.bool, device=e.device)
    best = e.amax(dim=(-2, -1), keepdim=True)  # [..., 1, 1]
    backs = backing_claims(e, chunk_mask)
    clear = (e.max(-1, keepdim=True).values >= ratio * best) & (best > 0)  # [..., k, 1]
    return (backs & clear).any(-2)


def stated_mask(
    belief: torch.Tensor,
    ratio: float,
    claim_mask: torch.Tensor | None = None,
    routes: torch.Tensor | None = None,
    contested: torch.Tensor | None = None,
    witnessed: torch.Tensor | None = None,
) -> torch.Tensor:
    """Which claims an answer states: fused mass ``b_j > 0`` and either ``b_j >= ratio · max_j b_j`` or
    ``witnessed`` (:func:`witnessed_claims`) where that is given, and not ``contested``
    (:func:`copy_contested`) where that is given.

    Args:
        belief: Fused singleton masses ``[..., M]``.
        ratio: The bar relative to the top claim's mass, in ``[0, 1]``: 0 states every claim with positive
            mass, 1 only the claims tied with the top one.
        claim_mask: Bool ``[..., M]`` of real claims (padding is never stated).
        routes: Route ids ``[...]``; where given, abstaining queries state nothing (the direct and
            conflict routes state the claims above the bar; the top claim always clears it).
        contested: Bool ``[..., M]`` of claims never stated (claims backed only by edited copies).
        witnessed: Bool ``[..., M]`` of claims stated below the bar (a chunk of their own states them
            clearly).

    Returns:
        Bool ``[..., M]``.

    Example:
        >>> stated_mask(torch.tensor([0.5, 0.3, 0.1]), 0.5).tolist()
        [True, True, False]
        >>> stated_mask(torch.tensor([0.5, 0.3, 0.1]), 0.5, witnessed=torch.tensor([False, False, True])).tolist()
        [True, True, True]
    """
    check_ratio(ratio, "stated-claim ratio")
    b = torch.as_tensor(belief)
    if claim_mask is not None:
        b = b.masked_fill(~claim_mask.to(torch.bool), 0.0)
    top = b.max(-1, keepdim=True).values if b.shape[-1] else b.sum(-1, keepdim=True)
    above = b >= ratio * top
    if witnessed is not None:
        above |= torch.as_tensor(witnessed, device=b.device).to(torch.bool)
    out = (b > 0) & above
    if routes is not None:
        out &= (torch.as_tensor(routes) != ABSTAIN).unsqueeze(-1)
    if contested is not None:
        out &= ~torch.as_tensor(contested).to(torch.bool)
    return out
