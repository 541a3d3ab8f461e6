"""Subjective-logic opinions from non-negative evidence (paper Eqs 2-6).

For chunk ``i`` and the aligned frame ``Θ_q = {a_1..a_M}``:

* ``α_i = e_i + 1`` (Eq 2), ``S_i = Σ_j α_ij`` (Eq 3), ``p̂_ij = α_ij / S_i`` (Eq 4),
* belief ``b_ij = e_ij / S_i`` and vacuity ``u_i = M / S_i`` (Eq 5),
* mass ``m_i({a_j}) = b_ij``, ``m_i(Θ) = u_i`` with ``Σ_j b_ij + u_i = 1`` (Eq 6).

Ignorance is mass on the whole frame ``Θ``; there is never an "unknown" singleton.
Everything is batched over any leading dimensions ``[..., k, M]`` with optional masks for padded
chunks and padded claims; padding never changes a result.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from evidential.errors import InvalidEvidenceError, ShapeError

__all__ = ["Opinion", "opinion_tensors", "opinions_from_evidence", "validate_evidence"]


@dataclass(frozen=True)
class Opinion:
    """Per-chunk subjective-logic opinions over an aligned claim frame (Eqs 2-6).

    Attributes:
        evidence: Non-negative evidence ``e`` ``[..., k, M]`` (zero at padded positions).
        belief: Singleton masses ``b = e / S`` ``[..., k, M]`` (zero at padded positions).
        vacuity: Mass on the frame ``u = M / S`` ``[..., k]`` (one for padded chunks and empty frames).
        claim_mask: Bool ``[..., M]``, true for real claims of the query's frame.
        chunk_mask: Bool ``[..., k]``, true for real (non-padded) chunks.
    """

    evidence: torch.Tensor
    belief: torch.Tensor
    vacuity: torch.Tensor
    claim_mask: torch.Tensor
    chunk_mask: torch.Tensor

    @property
    def num_claims(self) -> torch.Tensor:
        """Frame size ``M`` per query ``[...]`` (padded claims excluded)."""
        return self.claim_mask.sum(-1)

    @property
    def alpha(self) -> torch.Tensor:
        """Dirichlet parameters ``α = e + 1`` (Eq 2); zero at padded claims."""
        return torch.where(self.claim_mask.unsqueeze(-2), self.evidence + 1, torch.zeros_like(self.evidence))

    @property
    def strength(self) -> torch.Tensor:
        """Dirichlet strength ``S = Σ_j α_j`` (Eq 3) ``[..., k]``."""
        return self.alpha.sum(-1)

    @property
    def expected_probability(self) -> torch.Tensor:
        """Expected probabilities ``p̂ = α / S`` (Eq 4); zero rows for empty frames."""
        s = self.strength
        return self.alpha / torch.where(s > 0, s, torch.ones_like(s)).unsqueeze(-1)

    @property
    def shape(self) -> torch.Size:
        return self.belief.shape


def _first_position(bad: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in bad.nonzero()[0].tolist())


def validate_evidence(
    evidence: torch.Tensor,
    valid: torch.Tensor | None = None,
    *,
    sanitize: bool = False,
    name: str = "evidence",
) -> torch.Tensor:
    """Check that evidence is finite and non-negative where ``valid`` is true.

    Bad evidence is never silently treated as support.

    Args:
        evidence: Evidence tensor.
        valid: Bool mask broadcastable to ``evidence``; positions where it is false are not checked.
        sanitize: When true, NaN, infinite and negative values become ``0`` (ignorance) and a
            :class:`RuntimeWarning` reports how many and where the first one was. When false they raise.
        name: Name used in messages.

    Returns:
        The evidence with bad values replaced (``sanitize=True``) or unchanged.

    Raises:
        InvalidEvidenceError: A NaN, infinite or negative value at a checked position, naming it.
    """
    if evidence.numel() == 0:
        return evidence
    lo, hi = torch.aminmax(evidence)
    if bool((lo >= 0) & (hi < float("inf"))):  # one pass; NaN makes both comparisons false
        return evidence
    bad = ~torch.isfinite(evidence) | (evidence < 0)
    if valid is not None:
        bad = bad & valid
    if not bool(bad.any()):
        return evidence
    pos = _first_position(bad)
    value = float(evidence[pos])
    count = int(bad.sum())
    where = f"{name}[{', '.join(map(str, pos))}] = {value}"
    if not sanitize:
        raise InvalidEvidenceError(
            f"{where}: evidence must be finite and >= 0 ({count} bad value(s) in all). Fix the evaluator "
            "output, or pass sanitize=True to map bad values to zero evidence (ignorance)."
        )
    warnings.warn(
        f"sanitized {count} NaN/infinite/negative evidence value(s) to 0 (ignorance); first at {where}",
        RuntimeWarning,
        stacklevel=3,
    )
    return torch.where(bad, torch.zeros_like(evidence), evidence)


def as_float_tensor(evidence: torch.Tensor | list | tuple | float) -> torch.Tensor:
    """``evidence`` as a tensor, integer and boolean inputs cast to the default float dtype."""
    t = torch.as_tensor(evidence)
    if not t.is_floating_point():
        t = t.to(torch.get_default_dtype())
    return t


def broadcast_mask(mask, shape: tuple[int, ...], device, what: str, expected: str) -> torch.Tensor:
    """A boolean mask of ``shape`` (all true when ``mask`` is ``None``; non-zero is true), broadcast if it
    can be; :class:`ShapeError` naming ``what`` and its ``expected`` shape otherwise."""
    if mask is None:
        return torch.ones(shape, dtype=torch.bool, device=device)
    m = torch.as_tensor(mask, device=device)
    if m.dtype != torch.bool:
        m = m != 0
    if tuple(m.shape) != shape:
        try:
            m = m.expand(shape)
        except RuntimeError:
            raise ShapeError(
                f"{what} has shape {tuple(m.shape)} but evidence needs {expected} = {shape}"
            ) from None
    return m


def opinions_from_evidence(
    evidence: torch.Tensor,
    claim_mask: torch.Tensor | None = None,
    chunk_mask: torch.Tensor | None = None,
    *,
    sanitize: bool = False,
) -> Opinion:
    """Turn evidence ``[..., k, M]`` into per-chunk opinions (Eqs 2-6).

    ``M`` in ``u = M / S`` counts the real claims of each query's frame. Edge cases: a query with an
    empty frame (``M = 0``) or a padded chunk gets the vacuous opinion (``b = 0``, ``u = 1``).

    Args:
        evidence: Non-negative evidence ``[..., k, M]`` (any real dtype; integers become the default float).
        claim_mask: Bool ``[..., M]`` (broadcastable), true for real claims of the query's frame.
        chunk_mask: Bool ``[..., k]`` (broadcastable), true for real chunks.
        sanitize: Map NaN/infinite/negative evidence to zero (ignorance) with a warning instead of raising.

    Returns:
        An :class:`Opinion`.

    Raises:
        ShapeError: Evidence with fewer than 2 dimensions or masks of the wrong shape.
        InvalidEvidenceError: NaN, infinite or negative evidence at an unmasked position.

    Example:
        >>> op = opinions_from_evidence(torch.tensor([[3.0, 0.0], [0.0, 3.0]], dtype=torch.float64))
        >>> op.belief.tolist(), op.vacuity.tolist()
        ([[0.6, 0.0], [0.0, 0.6]], [0.4, 0.4])
    """
    e = as_float_tensor(evidence)
    if e.ndim < 2:
        raise ShapeError(
            f"evidence must have shape [..., k, M] (chunks x claims); got shape {tuple(e.shape)}. "
            "Wrap a single chunk's evidence as [[e_1, ..., e_M]]."
        )
    *lead, k, m = e.shape
    lead = tuple(lead)
    cm = broadcast_mask(claim_mask, lead + (m,), e.device, "claim_mask", "[..., M]")
    km = broadcast_mask(chunk_mask, lead + (k,), e.device, "chunk_mask", "[..., k]")
    e = validate_evidence(e, cm.unsqueeze(-2) & km.unsqueeze(-1), sanitize=sanitize)
    e, belief, vacuity = opinion_tensors(e, cm, km)
    return Opinion(evidence=e, belief=belief, vacuity=vacuity, claim_mask=cm, chunk_mask=km)


def opinion_tensors(
    e: torch.Tensor, claim_mask: torch.Tensor | None, chunk_mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eqs 2-6 as a pure tensor function (no validation; masks may be ``None`` for dense input).

    Returns the masked evidence, the beliefs ``[..., k, M]`` and the vacuities ``[..., k]``.
    """
    m = e.shape[-1]
    if claim_mask is None and chunk_mask is None:
        strength = e.sum(-1) + m
        live = strength > 0  # false only for an empty frame
        safe = torch.where(live, strength, torch.ones_like(strength))
        return e, e / safe.unsqueeze(-1), torch.where(live, m / safe, torch.ones_like(strength))
    cm = (
        claim_mask
        if claim_mask is not None
        else torch.ones(e.shape[:-2] + (m,), dtype=torch.bool, device=e.device)
    )
    km = chunk_mask if chunk_mask is not None else torch.ones(e.shape[:-1], dtype=torch.bool, device=e.device)
    valid = cm.unsqueeze(-2) & km.unsqueeze(-1)
    e = torch.where(valid, e, torch.zeros_like(e))
    n_claims = cm.sum(-1, keepdim=True).to(e.dtype)  # [..., 1]
    strength = e.sum(-1) + n_claims  # Eq 3 (only real claims contribute α_j = e_j + 1)
    live = (strength > 0) & km
    safe = torch.where(live, strength, torch.ones_like(strength))
    belief = e / safe.unsqueeze(-1)
    vacuity = torch.where(live, n_claims.expand_as(strength) / safe, torch.ones_like(strength))
    return e, belief, vacuity
