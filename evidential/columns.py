"""Opinions and fusion (Eqs 2-14, 27) written over columns of the batch, for ``torch.compile``.

The tensor code in :mod:`evidential.opinions` and :mod:`evidential.fusion` works on ``[..., k, M]`` blocks
with reductions over the claim dimension; inductor turns those into several loops over the batch, each
reading its inputs again. Here the same equations are written over *columns*: ``e[:, i, j]`` is a ``[N]``
tensor (one value per query) and every sum over claims or chunks is unrolled over the small, static ``k``
and ``M``. Everything is then elementwise in the query index, and inductor fuses opinions, the k-step fold,
``K̄``, the confidence and the selected claim into ONE vectorised loop over the queries that reads each
query's evidence once.

The arithmetic follows the eager reference term by term (same sums of others, same guarded divisions,
same masking), so results agree with it to rounding. One difference in form: ``K̄`` (Eq 14) is computed in
O(kM) as ``Σ_{j≥2} Σ_r (Σ_{i<j} b_ir) · Σ_{s≠r} b_js`` (prefix sums over chunks; every term non-negative,
so no cancellation) instead of summing the ``k(k-1)/2`` pairwise conflicts one by one; the per-pair clamp
at 1 of :func:`evidential.pairwise_conflict`, which only absorbs rounding, is not applied.

Unrolling costs compile time proportional to ``k·M``: this form is meant for small frames (the RAG case,
a handful of chunks and claims). :func:`evidential.fuse_evidence` picks it for ``compiled=True``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from evidential.registry import Registry

__all__ = ["COLUMN_RULES", "ColumnState", "fuse_columns", "others_columns"]


class ColumnState(NamedTuple):
    """A mass function over a batch, by column: ``singletons`` is a list of ``M`` tensors ``[N]``; ``theta``,
    ``ignorance`` and ``conflict`` are ``[N]`` with ``theta = ignorance + conflict``."""

    singletons: list[torch.Tensor]
    theta: torch.Tensor
    ignorance: torch.Tensor
    conflict: torch.Tensor


ColumnRule = Callable[
    [ColumnState, Sequence[torch.Tensor], torch.Tensor, Sequence[torch.Tensor], torch.Tensor],
    tuple[ColumnState, torch.Tensor],
]
"""``rule(a, b, u_b, others_b, lam) -> (a ⊗ b, K)``: combine a state with a chunk opinion (singleton
columns ``b``, vacuity ``u_b``, whose ignorance is ``u_b`` and conflict 0) given ``others_b``
(:func:`others_columns` of ``b``)."""

COLUMN_RULES: Registry[ColumnRule] = Registry("column fusion rule")
"""Column forms of the pairwise rules of :data:`evidential.FUSION_RULES`, under the same names."""


def others_columns(cols: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """``o_r = Σ_{s≠r} x_s`` for columns ``x_1..x_M`` from exclusive prefix and suffix sums, no subtraction.

    The additions happen in the order of :func:`evidential.fusion.sum_of_others`, so the values are the same.
    """
    m = len(cols)
    if m == 0:
        return []
    prefix: list[torch.Tensor | None] = [None]
    suffix: list[torch.Tensor | None] = [None]
    for j in range(m - 1):
        prefix.append(cols[j] if prefix[-1] is None else prefix[-1] + cols[j])
        nxt = cols[m - 1 - j]
        suffix.append(nxt if suffix[-1] is None else suffix[-1] + nxt)
    out = []
    for p, q in zip(prefix, reversed(suffix)):
        if p is None and q is None:
            out.append(torch.zeros_like(cols[0]))
        else:
            out.append(q if p is None else p if q is None else p + q)
    return out


def _total(cols: Sequence[torch.Tensor]) -> torch.Tensor:
    acc = cols[0]
    for c in cols[1:]:
        acc = acc + c
    return acc


def _safe(x: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    return torch.where(ok, x, torch.ones_like(x))


def _terms(a: ColumnState, b: Sequence[torch.Tensor], u: torch.Tensor, others: Sequence[torch.Tensor]):
    """K (Eq 7), the supports n (Eq 8), Σn, h (Eq 9), the joint ignorance and the carried conflict."""
    conflict = _total([x * o for x, o in zip(a.singletons, others)]).clamp(max=1.0)
    support = [x * (y + u) + a.theta * y for x, y in zip(a.singletons, b)]
    h = a.theta * u
    # the chunk's conflict part is zero, so `a.ignorance * 0` drops out of the carried conflict exactly
    return conflict, support, _total(support), h, a.ignorance * u, a.conflict * u


@COLUMN_RULES.register("lambda")
def lambda_columns(a, b, u, others, lam):
    """Column form of :func:`evidential.fusion.lambda_rule` (Eqs 10-11; ``Σn = 0`` → all mass to ``Θ``)."""
    k, n, sum_n, h, ign, carried = _terms(a, b, u, others)
    pos = sum_n > 0
    lam_eff = torch.where(pos, lam, torch.ones_like(lam))
    scale = ((1 - lam_eff) * k) / _safe(sum_n, pos)
    transferred = lam_eff * k
    return ColumnState([x + scale * x for x in n], h + transferred, ign, carried + transferred), k


@COLUMN_RULES.register("yager")
def yager_columns(a, b, u, others, lam):
    """Column form of :func:`evidential.fusion.yager_rule` (``m(j) = n_j``, ``m(Θ) = h + K``)."""
    k, n, _, h, ign, carried = _terms(a, b, u, others)
    return ColumnState(n, h + k, ign, carried + k), k


@COLUMN_RULES.register("dempster")
def dempster_columns(a, b, u, others, lam):
    """Column form of :func:`evidential.fusion.dempster_rule` (``1 − K`` as ``h + Σn``; ``K = 1`` → all ``Θ``)."""
    k, n, sum_n, h, ign, carried = _terms(a, b, u, others)
    denom = h + sum_n
    pos = denom > 0
    inv = 1 / _safe(denom, pos)
    zero = torch.zeros_like(h)
    one = torch.ones_like(h)
    scale = torch.where(pos, inv, zero)
    state = ColumnState(
        [x * scale for x in n],
        torch.where(pos, h * inv, one),
        torch.where(pos, ign * inv, zero),
        torch.where(pos, carried * inv, one),
    )
    return state, k


def _opinions(evidence, claim_mask, chunk_mask):
    """Eqs 2-6 by column: beliefs ``[k][M]`` and vacuities ``[k]`` of ``[N]`` tensors, and a 0-dim bool that
    is true when every evidence value is non-negative and the sum of the real ones is finite (so no value is
    NaN, infinite or negative; it may be false for huge finite evidence, whose sum overflows)."""
    k, m = evidence.shape[-2], evidence.shape[-1]
    low, total = None, None
    if claim_mask is None and chunk_mask is None:
        n_claims, real = m, None
    else:
        cm = [None] * m if claim_mask is None else [claim_mask[:, j] for j in range(m)]
        n_claims = m if claim_mask is None else _total([c.to(evidence.dtype) for c in cm])
    beliefs, vacuities = [], []
    for i in range(k):
        row = [evidence[:, i, j] for j in range(m)]
        for x in row:  # ``minimum`` propagates NaN
            low = x if low is None else torch.minimum(low, x)
        if claim_mask is not None or chunk_mask is not None:
            real = None if chunk_mask is None else chunk_mask[:, i]
            valid = [real if c is None else c if real is None else c & real for c in cm]
            row = [torch.where(v, x, torch.zeros_like(x)) for v, x in zip(valid, row)]
        row_sum = _total(row)
        total = row_sum if total is None else total + row_sum
        strength = row_sum + n_claims  # Eq 3
        live = strength > 0
        if real is not None:
            live = live & real
        safe = _safe(strength, live)
        beliefs.append([x / safe for x in row])
        vacuities.append(torch.where(live, n_claims / safe, torch.ones_like(strength)))
    return beliefs, vacuities, ((low >= 0) & (total < math.inf)).all()


def fuse_columns(
    evidence: torch.Tensor,
    claim_mask: torch.Tensor | None,
    chunk_mask: torch.Tensor | None,
    lam: torch.Tensor,
    rule: str = "lambda",
    pairwise: bool = True,
) -> tuple[torch.Tensor, ...]:
    """Eqs 2-14 and 27 for a flat batch, by column (the function :func:`evidential.fuse_evidence` compiles).

    No host synchronisation and no raising: the evidence is checked in the same loop and the result of the
    check comes last, for the caller to act on. Needs ``k ≥ 1`` and ``M ≥ 1``.

    Args:
        evidence: Evidence ``[N, k, M]``, expected non-negative and finite.
        claim_mask: Bool ``[N, M]`` of real claims, or ``None`` when all are real.
        chunk_mask: Bool ``[N, k]`` of real chunks, or ``None`` when all are real.
        lam: λ as a 0-dim tensor or one value per query ``[N]``.
        rule: A name from :data:`COLUMN_RULES`.
        pairwise: Compute ``K̄`` (Eq 14); when false its slot is ``None``.

    Returns:
        ``(belief [N, M], theta [N], ignorance [N], conflict [N], step_conflict [N, k-1], K̄ [N] or None,
        confidence [N], selected [N])`` as in :func:`evidential.fusion.fusion_tensors`, then ``ok``, a 0-dim
        bool: false when some value is NaN, infinite or negative (or the real evidence sums to infinity),
        in which case the other outputs are not meaningful.

    Raises:
        UnknownNameError: ``rule`` has no column form.
    """
    rule_fn = COLUMN_RULES.get(rule)
    k, m = evidence.shape[-2], evidence.shape[-1]
    beliefs, vacuities, good = _opinions(evidence, claim_mask, chunk_mask)
    zero = torch.zeros_like(vacuities[0])
    state = ColumnState(beliefs[0], vacuities[0], vacuities[0], zero)
    seen = None if chunk_mask is None else chunk_mask[:, 0]
    steps = []
    prefix = beliefs[0]  # Σ_{i<t} b_i by claim, for K̄
    pair_total = None
    for t in range(1, k):
        b, u = beliefs[t], vacuities[t]
        others = others_columns(b)
        comb, kt = rule_fn(state, b, u, others, lam)
        if chunk_mask is None:
            state = comb
        else:
            valid = chunk_mask[:, t]
            take_comb = valid & seen
            take_chunk = valid & ~seen
            chunk = ColumnState(b, u, u, zero)

            def pick(c, x, s, take_comb=take_comb, take_chunk=take_chunk):
                return torch.where(take_comb, c, torch.where(take_chunk, x, s))

            state = ColumnState(
                [pick(c, x, s) for c, x, s in zip(comb.singletons, chunk.singletons, state.singletons)],
                *(pick(c, x, s) for c, x, s in zip(comb[1:], chunk[1:], state[1:])),
            )
            kt = torch.where(take_comb, kt, torch.zeros_like(kt))
            seen = seen | valid
        steps.append(kt)
        if pairwise:
            cross = _total([p * o for p, o in zip(prefix, others)])
            pair_total = cross if pair_total is None else pair_total + cross
            if t < k - 1:
                prefix = [p + x for p, x in zip(prefix, b)]
    kbar = None
    if pairwise:
        if pair_total is None:
            kbar = zero
        elif chunk_mask is None:
            kbar = pair_total / float(k * (k - 1) // 2)
        else:
            real = _total([chunk_mask[:, i].to(zero.dtype) for i in range(k)])
            kbar = pair_total / (real * (real - 1) / 2).clamp_min(1)
    # Eq 27: the first highest singleton mass (ties keep the lower index, as ``max`` does)
    confidence = state.singletons[0]
    selected = torch.zeros_like(confidence, dtype=torch.long)
    for j in range(1, m):
        better = state.singletons[j] > confidence
        confidence = torch.where(better, state.singletons[j], confidence)
        selected = torch.where(better, torch.full_like(selected, j), selected)
    selected = torch.where(confidence > 0, selected, torch.full_like(selected, -1))
    step_conflict = torch.stack(steps, -1) if steps else evidence.new_zeros(evidence.shape[0], 0)
    belief = torch.stack(state.singletons, -1)
    return (
        belief,
        state.theta,
        state.ignorance,
        state.conflict,
        step_conflict,
        kbar,
        confidence,
        selected,
        good,
    )
