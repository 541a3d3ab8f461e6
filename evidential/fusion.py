"""Conflict-preserving fusion of chunk opinions (paper Eqs 7-14), batched and differentiable.

Two mass functions ``a`` and ``b`` over the frame ``Θ = {a_1..a_M}`` (singleton masses ``m(j)``
plus ``m(Θ)``) combine through:

* conflict ``K = Σ_{r≠s} m_a(r) m_b(s) = Σm_a · Σm_b − Σ_j m_a(j) m_b(j)`` (Eq 7, O(M), no outer product;
  evaluated as ``Σ_r m_a(r) · Σ_{s≠r} m_b(s)`` with exclusive prefix/suffix sums, which is the same O(M)
  sum without the cancellation of the difference when ``K`` is tiny next to ``Σm_a · Σm_b``);
* support ``n_j = m_a(j)m_b(j) + m_a(j)m_b(Θ) + m_a(Θ)m_b(j)`` (Eq 8);
* joint ignorance ``h = m_a(Θ) m_b(Θ)`` (Eq 9); identity ``h + K + Σ_j n_j = 1``;
* the λ-transfer rule ``m_ab(Θ) = h + λK`` and ``m_ab(j) = (1 − h − λK) n_j / Σ_l n_l`` (Eqs 10-11).

``1 − h − λK`` is evaluated as ``Σ_l n_l + (1 − λ)K`` (the same number by the identity), which has no
cancellation when the evidence is huge. λ = 1 is Yager's rule; classic normalized Dempster
(``m(j) = n_j / (1 − K)``, ``m(Θ) = h / (1 − K)``, with ``1 − K`` evaluated as ``h + Σn``) is a separate
rule for ablations. The ``k`` chunk opinions fold left in retrieval-rank order (Eq 12):
``m⁽¹⁾ = m_1``, ``m⁽ᵗ⁾ = m⁽ᵗ⁻¹⁾ ⊗ m_t``; the operator is commutative but not associative, so the order
is part of the result. ``U_global = m⁽ᵏ⁾(Θ)`` (Eq 13). The mean pairwise conflict ``K̄`` over the
unfused chunk pairs (Eq 14) is a diagnostic only and is never added to ``U_global``.

Ablation without conflict-preserving fusion: the ``"average"`` rule (:data:`AGGREGATION_RULES`, not a
pairwise rule) averages the chunks' evidence vectors and forms ONE opinion from the mean (the Dirichlet of
the mean evidence): disagreeing chunks split the belief between their claims and no conflict ever reaches
``m(Θ)``, whose only source is the vacuity ``M / (Σ ē + M)``.

Decomposed uncertainty (beyond the paper): ``m(Θ)`` is split into an *ignorance* part (products of
vacuities, ``h``) and a *conflict* part (transferred ``λK``) and both are carried through the fold:
with ``m_a(Θ) = I_a + C_a``, the combination has ``I = I_a I_b`` and
``C = C_a m_b(Θ) + I_a C_b + λK``, so ``I + C = h + λK = m_ab(Θ)`` at every step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch

from evidential.errors import ConfigError, ShapeError, UnknownNameError
from evidential.opinions import Opinion
from evidential.registry import Registry

__all__ = [
    "AGGREGATION_RULES",
    "FUSION_RULES",
    "FusionResult",
    "MassState",
    "combine",
    "fuse",
    "fusion_rule_names",
    "fusion_tensors",
    "evidence_average",
    "mean_pairwise_conflict",
    "pairwise_conflict",
    "sum_of_others",
]


class MassState(NamedTuple):
    """A mass function with its decomposed frame mass: singletons ``[..., M]``; ``theta``, ``ignorance``,
    ``conflict`` ``[...]`` with ``theta = ignorance + conflict``."""

    singletons: torch.Tensor
    theta: torch.Tensor
    ignorance: torch.Tensor
    conflict: torch.Tensor


class CombinationRule(Protocol):
    def __call__(self, a: MassState, b: MassState, lam: torch.Tensor) -> tuple[MassState, torch.Tensor]: ...


FUSION_RULES: Registry[CombinationRule] = Registry("fusion rule")


def sum_of_others(x: torch.Tensor) -> torch.Tensor:
    """``o_r = Σ_{s≠r} x_s`` over the last dim in O(M) without subtraction (exclusive prefix + suffix sums).

    Small frames are unrolled into elementwise adds (which ``torch.compile`` fuses into one kernel); large
    ones use ``cumsum``.
    """
    m = x.shape[-1]
    if m == 0:
        return x
    if m <= _UNROLL_MAX_CLAIMS:
        cols = x.unbind(-1)
        zero = torch.zeros_like(cols[0])
        prefix, suffix = [zero], [zero]
        for j in range(m - 1):
            prefix.append(prefix[-1] + cols[j])
            suffix.append(suffix[-1] + cols[m - 1 - j])
        return torch.stack([p + q for p, q in zip(prefix, reversed(suffix))], -1)
    zero = torch.zeros_like(x[..., :1])
    prefix = torch.cat([zero, x[..., :-1].cumsum(-1)], -1)
    suffix = torch.cat([x[..., 1:].flip(-1).cumsum(-1).flip(-1), zero], -1)
    return prefix + suffix


_UNROLL_MAX_CLAIMS = 32


def _terms(a: MassState, b: MassState):
    """Conflict K (Eq 7), supports n (Eq 8), joint ignorance h (Eq 9) and the carried conflict."""
    conflict = (a.singletons * sum_of_others(b.singletons)).sum(-1).clamp(max=1.0)  # clamp absorbs rounding
    support = a.singletons * (b.singletons + b.theta.unsqueeze(-1)) + a.theta.unsqueeze(-1) * b.singletons
    h = a.theta * b.theta
    ignorance = a.ignorance * b.ignorance
    carried = a.conflict * b.theta + a.ignorance * b.conflict  # = h - ignorance
    return conflict, support, support.sum(-1), h, ignorance, carried


def _safe(x: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    return torch.where(ok, x, torch.ones_like(x))


@FUSION_RULES.register("lambda")
def lambda_rule(a: MassState, b: MassState, lam: torch.Tensor) -> tuple[MassState, torch.Tensor]:
    """The paper's conflict-preserving λ-transfer rule (Eqs 10-11).

    ``m(Θ) = h + λK``; ``m(j) = (Σn + (1 − λ)K) · n_j / Σn``. Degenerate case the paper leaves open:
    when ``Σn = 0`` the formula would lose the mass ``(1 − λ)K`` (e.g. λ < 1 and total conflict ``K = 1``);
    here all mass goes to ``Θ`` (as conflict) so masses always sum to 1.
    """
    k, n, sum_n, h, ign, carried = _terms(a, b)
    pos = sum_n > 0
    lam_eff = torch.where(pos, lam, torch.ones_like(lam))
    extra = (1 - lam_eff) * k  # the (1 - λ)K redistributed to singletons
    singletons = n + (extra / _safe(sum_n, pos)).unsqueeze(-1) * n
    transferred = lam_eff * k
    return MassState(singletons, h + transferred, ign, carried + transferred), k


@FUSION_RULES.register("yager")
def yager_rule(a: MassState, b: MassState, lam: torch.Tensor) -> tuple[MassState, torch.Tensor]:
    """Yager's rule: all conflict to ignorance, ``m(j) = n_j``, ``m(Θ) = h + K`` (the λ = 1 case). ``lam`` is ignored."""
    k, n, _, h, ign, carried = _terms(a, b)
    return MassState(n, h + k, ign, carried + k), k


@FUSION_RULES.register("dempster")
def dempster_rule(a: MassState, b: MassState, lam: torch.Tensor) -> tuple[MassState, torch.Tensor]:
    """Classic normalized Dempster: ``m(j) = n_j / (1 − K)``, ``m(Θ) = h / (1 − K)``. ``lam`` is ignored.

    ``1 − K`` is computed as ``h + Σn``. Total conflict (``K = 1``) leaves Dempster's rule undefined; here it
    returns all mass on ``Θ``, attributed to conflict.
    """
    k, n, sum_n, h, ign, carried = _terms(a, b)
    denom = h + sum_n
    pos = denom > 0
    inv = 1 / _safe(denom, pos)
    zero = torch.zeros_like(h)
    singletons = n * torch.where(pos, inv, zero).unsqueeze(-1)
    theta = torch.where(pos, h * inv, torch.ones_like(h))
    ignorance = torch.where(pos, ign * inv, zero)
    conflict = torch.where(pos, carried * inv, torch.ones_like(h))
    return MassState(singletons, theta, ignorance, conflict), k


def lam_tensor(lam, like: torch.Tensor) -> torch.Tensor:
    """``lam`` as a tensor of ``like``'s dtype and device; :class:`ConfigError` unless every value is in [0, 1]."""
    t = torch.as_tensor(lam, dtype=like.dtype, device=like.device)
    if not bool(torch.isfinite(t).all()) or bool((t < 0).any()) or bool((t > 1).any()):
        raise ConfigError(f"lam must lie in [0, 1]; got {lam!r}")
    return t


def combine(a: MassState, b: MassState, lam: float | torch.Tensor = 0.6, rule: str = "lambda"):
    """Combine two mass functions with a named rule (Eqs 7-11). Returns ``(MassState, K)``."""
    return FUSION_RULES.get(rule)(a, b, lam_tensor(lam, a.theta))


def pairwise_conflict(belief: torch.Tensor) -> torch.Tensor:
    """Conflict ``K_ij = Σ_{r≠s} b_ir b_js`` between every pair of chunk opinions ``[..., k, k]`` (Eq 7)."""
    others = sum_of_others(belief)
    if torch.compiler.is_compiling():  # elementwise form: inductor fuses it into the surrounding loops
        return (belief.unsqueeze(-2) * others.unsqueeze(-3)).sum(-1).clamp(max=1.0)
    return (belief @ others.transpose(-1, -2)).clamp(max=1.0)


def mean_pairwise_conflict(belief: torch.Tensor, chunk_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean conflict ``K̄`` over the unfused pairs ``i < j`` of real chunks ``[...]`` (Eq 14).

    A diagnostic only: it is never added to ``U_global``. Zero when fewer than two chunks are real.
    """
    k = belief.shape[-2]
    pk = pairwise_conflict(belief)
    pair = torch.ones(k, k, dtype=torch.bool, device=belief.device).triu(1)
    if chunk_mask is not None:
        pair = pair & chunk_mask.unsqueeze(-1) & chunk_mask.unsqueeze(-2)
    else:
        pair = pair.expand(pk.shape)
    count = pair.sum((-1, -2))
    total = torch.where(pair, pk, torch.zeros_like(pk)).sum((-1, -2))
    return total / count.clamp_min(1).to(total.dtype)


@dataclass(frozen=True)
class FusionResult:
    """Fused opinion of a query (Eqs 12-14, 27).

    Attributes:
        belief: Fused singleton masses ``m⁽ᵏ⁾({a_j})`` ``[..., M]``.
        uncertainty: ``U_global = m⁽ᵏ⁾(Θ)`` ``[...]`` (Eq 13).
        ignorance: Part of ``U_global`` from joint ignorance (vacuity) ``[...]``.
        conflict: Part of ``U_global`` from transferred conflict ``[...]``; ``ignorance + conflict = U_global``.
        step_conflict: ``K`` of each fold step ``t = 2..k`` ``[..., k-1]`` (zero for padded chunks).
        mean_pairwise_conflict: ``K̄`` over unfused pairs ``[...]`` (Eq 14; diagnostic only).
        confidence: ``max_j m⁽ᵏ⁾({a_j})`` ``[...]`` (Eq 27; not multiplied again by ``1 − U``).
        selected: Index of the highest-mass claim ``[...]``; ``-1`` when every singleton mass is zero.
        claim_mask: Bool ``[..., M]`` of real claims.
        rule: Name of the combination rule used.
        lam: The λ used (meaningful for the ``lambda`` rule only).
    """

    belief: torch.Tensor
    uncertainty: torch.Tensor
    ignorance: torch.Tensor
    conflict: torch.Tensor
    step_conflict: torch.Tensor
    mean_pairwise_conflict: torch.Tensor
    confidence: torch.Tensor
    selected: torch.Tensor
    claim_mask: torch.Tensor
    rule: str = "lambda"
    lam: float | torch.Tensor = 0.6

    @property
    def masses(self) -> torch.Tensor:
        """Singleton masses followed by ``m(Θ)``: ``[..., M + 1]``, summing to 1."""
        return torch.cat([self.belief, self.uncertainty.unsqueeze(-1)], -1)


def _fold(
    belief: torch.Tensor,
    vacuity: torch.Tensor,
    chunk_mask: torch.Tensor | None,
    rule_fn: CombinationRule,
    lam: torch.Tensor,
) -> tuple[MassState, torch.Tensor]:
    """Left fold in rank order (Eq 12); padded chunks are skipped exactly (``torch.where``)."""
    *lead, k, m = belief.shape
    zeros = vacuity.new_zeros(lead)
    if k == 0:
        ones = vacuity.new_ones(lead)
        return MassState(belief.new_zeros(*lead, m), ones, ones, zeros), vacuity.new_zeros(*lead, 0)

    def chunk(t: int) -> MassState:
        return MassState(belief[..., t, :], vacuity[..., t], vacuity[..., t], zeros)

    steps = []
    state = chunk(0)
    if chunk_mask is None:
        for t in range(1, k):
            state, kt = rule_fn(state, chunk(t), lam)
            steps.append(kt)
    else:
        # A padded first chunk has the vacuous opinion, so `state` starts vacuous; `seen` marks whether a
        # real chunk has been folded in, so that the first real chunk is taken as is (k = 1 exactness).
        seen = chunk_mask[..., 0]
        for t in range(1, k):
            nxt = chunk(t)
            comb, kt = rule_fn(state, nxt, lam)
            valid = chunk_mask[..., t]
            take_comb = valid & seen
            take_chunk = valid & ~seen
            state = MassState(
                *(
                    torch.where(
                        take_comb.unsqueeze(-1) if c.ndim > valid.ndim else take_comb,
                        c,
                        torch.where(take_chunk.unsqueeze(-1) if c.ndim > valid.ndim else take_chunk, x, s),
                    )
                    for c, x, s in zip(comb, nxt, state)
                )
            )
            steps.append(torch.where(take_comb, kt, torch.zeros_like(kt)))
            seen = seen | valid
    step_conflict = torch.stack(steps, -1) if steps else vacuity.new_zeros(*lead, 0)
    return state, step_conflict


def fusion_tensors(
    belief: torch.Tensor,
    vacuity: torch.Tensor,
    chunk_mask: torch.Tensor | None,
    lam: torch.Tensor,
    rule_fn: CombinationRule,
) -> tuple[MassState, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eqs 7-14 and 27 as a pure tensor function: the fold, ``K̄``, confidence and the selected claim.

    Padded chunks (``chunk_mask`` false) must already carry the vacuous opinion. No validation, no host
    synchronisation: this is the function :func:`evidential.compiled.fuse_evidence` compiles.
    """
    state, steps = _fold(belief, vacuity, chunk_mask, rule_fn, lam)
    kbar = mean_pairwise_conflict(belief, chunk_mask)
    if belief.shape[-1] > 0:
        confidence, selected = state.singletons.max(-1)
        selected = torch.where(confidence > 0, selected, torch.full_like(selected, -1))
    else:
        confidence = state.theta.new_zeros(state.theta.shape)
        selected = torch.full(state.theta.shape, -1, dtype=torch.long, device=belief.device)
    return state, steps, kbar, confidence, selected


def fuse(
    opinions: Opinion,
    lam: float | torch.Tensor = 0.6,
    rule: str = "lambda",
    chunk_mask: torch.Tensor | None = None,
) -> FusionResult:
    """Fuse the ``k`` chunk opinions of each query in rank order (Eqs 7-14, 27).

    Args:
        opinions: Output of :func:`evidential.opinions_from_evidence` (``belief [..., k, M]``).
        lam: Conflict-transfer weight λ ∈ [0, 1] of the ``lambda`` rule (paper default 0.6). A tensor
            broadcastable to the batch shape ``[...]`` fuses several λ in one call (sweeps, calibration).
        rule: ``"lambda"`` (paper), ``"yager"`` (= λ 1) or ``"dempster"`` (classic normalized); see
            :data:`FUSION_RULES`. ``"average"`` (:data:`AGGREGATION_RULES`) is the evidence-averaging
            ablation: no fold, no conflict transfer (``lam`` is ignored).
        chunk_mask: Bool ``[..., k]`` of real chunks; combined (logical and) with ``opinions.chunk_mask``.
            Padded chunks are skipped, so padding never changes the result.

    Returns:
        A :class:`FusionResult`. Edge cases: no real chunks or ``M = 0`` → ``U = 1`` (vacuous);
        one real chunk → that chunk's own opinion.

    Example:
        >>> from evidential import opinions_from_evidence
        >>> r = fuse(opinions_from_evidence(torch.tensor([[3.0, 0.0], [0.0, 3.0]])), rule="yager")
        >>> [round(x, 4) for x in r.belief.tolist()], round(r.uncertainty.item(), 4)
        ([0.24, 0.24], 0.52)
    """
    if not isinstance(opinions, Opinion):
        raise TypeError(
            f"fuse() takes an Opinion, got {type(opinions).__name__}; build one with "
            "evidential.opinions_from_evidence(evidence)"
        )
    aggregate = AGGREGATION_RULES.get(rule) if rule in AGGREGATION_RULES else None
    if aggregate is None and rule not in FUSION_RULES:
        raise UnknownNameError(
            f"unknown fusion rule {rule!r}; choose one of: {', '.join(fusion_rule_names())}"
        )
    belief, vacuity = opinions.belief, opinions.vacuity
    lam_t = lam_tensor(lam, vacuity)
    mask = opinions.chunk_mask
    if chunk_mask is not None:
        cm = torch.as_tensor(chunk_mask, device=belief.device)
        if cm.dtype != torch.bool:
            cm = cm != 0
        try:
            mask = mask & cm.expand(mask.shape)
        except RuntimeError:
            raise ShapeError(
                f"chunk_mask has shape {tuple(cm.shape)} but the opinions need [..., k] = {tuple(mask.shape)}"
            ) from None
        # padded chunks must look vacuous, also for the pairwise diagnostic
        belief = torch.where(mask.unsqueeze(-1), belief, torch.zeros_like(belief))
        vacuity = torch.where(mask, vacuity, torch.ones_like(vacuity))
    if aggregate is not None:
        return aggregate(opinions, mask, rule, lam)
    rule_fn = FUSION_RULES.get(rule)
    all_real = bool(mask.all())
    state, steps, kbar, confidence, selected = fusion_tensors(
        belief, vacuity, None if all_real else mask, lam_t, rule_fn
    )
    return FusionResult(
        belief=state.singletons,
        uncertainty=state.theta,
        ignorance=state.ignorance,
        conflict=state.conflict,
        step_conflict=steps,
        mean_pairwise_conflict=kbar,
        confidence=confidence,
        selected=selected,
        claim_mask=opinions.claim_mask,
        rule=rule,
        lam=lam,
    )


# ------------------------------------------------------------------------------------------------ ablation
Aggregation = Callable[[Opinion, torch.Tensor, str, "float | torch.Tensor"], FusionResult]
AGGREGATION_RULES: Registry[Aggregation] = Registry("aggregation rule")


def fusion_rule_names() -> list[str]:
    """Every rule :func:`fuse` accepts: the pairwise :data:`FUSION_RULES` and the :data:`AGGREGATION_RULES`."""
    return [*FUSION_RULES.names(), *AGGREGATION_RULES.names()]


def evidence_average(evidence: torch.Tensor, chunk_mask: torch.Tensor) -> torch.Tensor:
    """Mean evidence over the real chunks: ``ē_j = Σ_i mask_i e_ij / max(1, Σ_i mask_i)`` ``[..., M]``.

    Example:
        >>> evidence_average(torch.tensor([[4.0, 0.0], [0.0, 2.0], [9.0, 9.0]]), torch.tensor([True, True, False]))
        tensor([2., 1.])
    """
    w = chunk_mask.to(evidence.dtype).unsqueeze(-1)
    return (evidence * w).sum(-2) / chunk_mask.sum(-1, keepdim=True).clamp_min(1).to(evidence.dtype)


@AGGREGATION_RULES.register("average")
def average_rule(
    opinions: Opinion, chunk_mask: torch.Tensor, rule: str = "average", lam: float | torch.Tensor = 0.0
) -> FusionResult:
    """Evidence averaging (the "without conflict-preserving fusion" ablation): one opinion (Eqs 2-6) from
    the mean evidence ``ē`` of the real chunks, ``b_j = ē_j / (Σ ē + M)``, ``U = M / (Σ ē + M)``.

    ``U`` is all ignorance (``conflict = 0``: averaging never moves conflict to ``Θ``); ``step_conflict`` is
    zero (there is no fold); ``K̄`` is the same diagnostic as for the other rules; no real chunk or ``M = 0``
    → ``U = 1``.

    Example:
        >>> from evidential import opinions_from_evidence
        >>> r = fuse(opinions_from_evidence(torch.tensor([[3.0, 0.0], [0.0, 3.0]])), rule="average")
        >>> [round(x, 4) for x in r.belief.tolist()], round(r.uncertainty.item(), 4), r.conflict.item()
        ([0.3, 0.3], 0.4, 0.0)
    """
    cm = opinions.claim_mask
    mean = evidence_average(opinions.evidence, chunk_mask)
    mean = torch.where(cm, mean, torch.zeros_like(mean))
    m = cm.sum(-1).to(mean.dtype)
    strength = mean.sum(-1) + m
    ok = strength > 0
    belief = mean / _safe(strength, ok).unsqueeze(-1)
    u = torch.where(ok, m / _safe(strength, ok), torch.ones_like(strength))
    kbar = mean_pairwise_conflict(opinions.belief, chunk_mask)
    if belief.shape[-1] > 0:
        confidence, selected = belief.max(-1)
        selected = torch.where(confidence > 0, selected, torch.full_like(selected, -1))
    else:
        confidence = u.new_zeros(u.shape)
        selected = torch.full(u.shape, -1, dtype=torch.long, device=u.device)
    k = chunk_mask.shape[-1]
    return FusionResult(
        belief=belief,
        uncertainty=u,
        ignorance=u,
        conflict=torch.zeros_like(u),
        step_conflict=u.new_zeros(*u.shape, max(k - 1, 0)),
        mean_pairwise_conflict=kbar,
        confidence=confidence,
        selected=selected,
        claim_mask=cm,
        rule=rule,
        lam=lam,
    )
