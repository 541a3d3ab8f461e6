"""The cached evaluator outputs a calibration is fitted on (:class:`CalibrationData`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from evidential import copy_pairs, pad_evidence
from evidential.routing import ROUTES
from training.calibration.apply import CalibrationError
from training.trainer.trainer import expected_route
from training.utils.metrics import is_yes_no_frame
from training.utils.text import near_copies

__all__ = ["ROUTE_ID", "CalibrationData"]


def _flags(values: Sequence[bool] | None) -> torch.Tensor | None:
    """A per-query bool tensor from a sequence (``None`` stays ``None``: the field's default applies)."""
    return None if values is None else torch.tensor([bool(x) for x in values], dtype=torch.bool)


#: Route name → the id used in :attr:`CalibrationData.expected`.
ROUTE_ID = {name: i for i, name in enumerate(ROUTES)}


@dataclass
class CalibrationData:
    """Cached evaluator outputs of the calibration queries, padded into one batch.

    Attributes:
        evidence: Raw evaluator evidence ``[B, k, M]`` (float64, zero at padding).
        chunk_mask: Bool ``[B, k]`` of real chunks; ``claim_mask``: bool ``[B, M]`` of real claims.
        gold: Bool ``[B, M]``: claim ``j`` is a gold answer of query ``b``.
        has_gold: Bool ``[B]``: the query has a gold reference (ECE, NLL and isotonic use only these).
        expected: Long ``[B]``: the expected route id (0 direct, 1 conflict, 2 abstain).
        keys: One id per query (fold assignment, reports).
        yes_no: Bool ``[B]``: the query's frame is yes/no (its stated-set bar is fitted apart); default all
            False.
        complete: Bool ``[B]``: every gold answer is a claim of the frame (an extracted frame may miss one;
            then no stated set is right, and the query does not count for the stated-set bar); default all
            True.
        copies: Bool ``[B, k, k]``: chunk ``i`` and chunk ``i'`` of a query are near-copies of one text
            (:func:`training.utils.text.near_copies`; the stated set leaves out claims only edited copies
            back, :func:`evidential.copy_contested`); default all False.
        conflict_gold: Bool ``[B]``: the gold reference is a conflict's supported claims, given for
            calibration (:func:`inference.workflows.calibrate.conflict_reference`); such queries enter the
            fits of the answer as stated but not those of the selected claim (:attr:`selected_gold`);
            default all False.
        truth: Bool ``[B, M]``: the claims a response is judged right for stating — the dataset's own gold
            where ``gold`` was widened to a conflict's sides
            (:func:`inference.workflows.calibrate.side_conflict_reference`), else ``gold`` (the default);
            the answer-accuracy target (:func:`training.calibration.fit.answer_hits`) of the confidence map.
        reader: Float64 ``[B, k]``: each chunk's reader score (the learned evaluator's span head,
            :attr:`inference.types.ChunkEvidence.reader_score`), NaN where it has none; the input of the
            reader map (:func:`training.calibration.fit.fit_reader_map`); default all NaN.
    """

    evidence: torch.Tensor
    chunk_mask: torch.Tensor
    claim_mask: torch.Tensor
    gold: torch.Tensor
    has_gold: torch.Tensor
    expected: torch.Tensor
    keys: list[str] = field(default_factory=list)
    yes_no: torch.Tensor | None = None
    complete: torch.Tensor | None = None
    copies: torch.Tensor | None = None
    conflict_gold: torch.Tensor | None = None
    truth: torch.Tensor | None = None
    reader: torch.Tensor | None = None

    def __post_init__(self) -> None:
        b = self.evidence.shape[0] if self.evidence.ndim == 3 else -1
        if self.yes_no is None:
            self.yes_no = torch.zeros(max(b, 0), dtype=torch.bool)
        if self.conflict_gold is None:
            self.conflict_gold = torch.zeros(max(b, 0), dtype=torch.bool)
        if self.truth is None:
            self.truth = self.gold.clone()
        if self.complete is None:
            self.complete = torch.ones(max(b, 0), dtype=torch.bool)
        if self.evidence.ndim != 3:
            raise CalibrationError(f"evidence must be [B, k, M]; got shape {tuple(self.evidence.shape)}")
        k, m = self.evidence.shape[1:]
        if self.copies is None:
            self.copies = torch.zeros(b, k, k, dtype=torch.bool)
        if self.reader is None:
            self.reader = torch.full((b, k), math.nan, dtype=torch.float64)
        for name, t, shape in (
            ("chunk_mask", self.chunk_mask, (b, k)),
            ("claim_mask", self.claim_mask, (b, m)),
            ("gold", self.gold, (b, m)),
            ("has_gold", self.has_gold, (b,)),
            ("expected", self.expected, (b,)),
            ("yes_no", self.yes_no, (b,)),
            ("complete", self.complete, (b,)),
            ("copies", self.copies, (b, k, k)),
            ("conflict_gold", self.conflict_gold, (b,)),
            ("truth", self.truth, (b, m)),
            ("reader", self.reader, (b, k)),
        ):
            if tuple(t.shape) != shape:
                raise CalibrationError(f"{name} must have shape {shape}; got {tuple(t.shape)}")
        if not self.keys:
            self.keys = [str(i) for i in range(b)]
        if len(self.keys) != b:
            raise CalibrationError(f"got {len(self.keys)} keys for {b} queries")
        if b and bool(((self.evidence < 0) | ~torch.isfinite(self.evidence)).any()):
            raise CalibrationError("evidence must be finite and non-negative")

    def __len__(self) -> int:
        return int(self.evidence.shape[0])

    @property
    def selected_gold(self) -> torch.Tensor:
        """Bool ``[B]``: the queries whose gold reference judges the selected claim — every query with one,
        but those given a conflict's sides (:attr:`conflict_gold`), where any selected side is gold."""
        return self.has_gold & ~self.conflict_gold

    @classmethod
    def from_queries(
        cls,
        evidence: Sequence[torch.Tensor],
        gold: Sequence[Sequence[int] | None],
        expected: Sequence[str],
        keys: Sequence[str] | None = None,
        yes_no: Sequence[bool] | None = None,
        complete: Sequence[bool] | None = None,
        copies: Sequence[Sequence[Sequence[int]]] | None = None,
        conflict_gold: Sequence[bool] | None = None,
        truth: Sequence[Sequence[int] | None] | None = None,
        reader: Sequence[Sequence[float | None] | None] | None = None,
    ) -> CalibrationData:
        """From per-query evidence ``[k_b, M_b]``, gold claim indices (``None``: no gold reference) and
        expected route names; ``copies``: per query, per chunk, the indices of its near-copies;
        ``conflict_gold``: per query, whether its gold reference is a conflict's sides; ``truth``: per query,
        the claim indices a response is judged right for stating (``None`` or absent: its gold); ``reader``:
        per query, its chunks' reader scores (``None`` for a query or a chunk without one)."""
        if not (len(evidence) == len(gold) == len(expected)):
            raise CalibrationError("evidence, gold and expected routes must have one entry per query")
        widths = [int(e.shape[1]) if e.ndim == 2 else 0 for e in evidence]
        ev, claim_mask, chunk_mask = pad_evidence(
            [torch.as_tensor(e, dtype=torch.float64) for e in evidence],
            num_claims=widths,
            dtype=torch.float64,
        )

        def mask(name: str, per_query: Sequence[Sequence[int] | None]) -> torch.Tensor:
            out = torch.zeros(claim_mask.shape, dtype=torch.bool)
            for b, idx in enumerate(per_query):
                for j in idx or []:
                    if not 0 <= j < widths[b]:
                        raise CalibrationError(f"query {b}: {name} index {j} outside its {widths[b]} claims")
                    out[b, j] = True
            return out

        g = mask("gold", gold)
        if truth is not None and len(truth) != len(gold):
            raise CalibrationError(f"truth must have one entry per query: {len(truth)} vs {len(gold)}")
        t = None if truth is None else mask("truth", [g_ if x is None else x for x, g_ in zip(truth, gold)])
        k = ev.shape[1]
        cp = torch.zeros(ev.shape[0], k, k, dtype=torch.bool)
        for b, per_chunk in enumerate(copies or []):
            bad = [(i, j) for i, js in enumerate(per_chunk) for j in js if not (i < k and 0 <= j < k)]
            if bad:
                raise CalibrationError(f"query {b}: copy pair {bad[0]} outside its chunks")
            pairs = copy_pairs([list(js) for js in per_chunk])
            cp[b, : pairs.shape[0], : pairs.shape[1]] = pairs
        rd = torch.full((ev.shape[0], k), math.nan, dtype=torch.float64)
        if reader is not None and len(reader) != len(gold):
            raise CalibrationError(f"reader must have one entry per query: {len(reader)} vs {len(gold)}")
        for b, scores in enumerate(reader or []):
            if scores is None:
                continue
            if len(scores) != int(chunk_mask[b].sum()):
                raise CalibrationError(
                    f"query {b}: {len(scores)} reader scores for {int(chunk_mask[b].sum())} chunks"
                )
            for i, x in enumerate(scores):
                if x is not None:
                    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                        raise CalibrationError(f"query {b}: reader score {x!r} of chunk {i} is not finite")
                    rd[b, i] = float(x)
        unknown = sorted(set(expected) - set(ROUTE_ID))
        if unknown:
            raise CalibrationError(f"unknown expected route {unknown[0]!r}; routes are {', '.join(ROUTES)}")
        return cls(
            evidence=ev,
            chunk_mask=chunk_mask,
            claim_mask=claim_mask,
            gold=g,
            has_gold=torch.tensor([x is not None for x in gold], dtype=torch.bool),
            expected=torch.tensor([ROUTE_ID[r] for r in expected], dtype=torch.long),
            keys=list(keys) if keys is not None else [],
            yes_no=_flags(yes_no),
            complete=_flags(complete),
            copies=cp,
            conflict_gold=_flags(conflict_gold),
            truth=t,
            reader=rd,
        )

    @classmethod
    def from_examples(
        cls, outcomes: Sequence[tuple[Any, torch.Tensor]], copy_overlap: float | None = None
    ) -> CalibrationData:
        """From ``(QueryExample, evidence [k, M])`` pairs, the input of :func:`training.trainer.trainer.score_outcomes`
        (expected routes from :func:`training.trainer.trainer.expected_route`; near-copies among each query's
        chunk texts at ``copy_overlap``, none when it is ``None``)."""

        return cls.from_queries(
            [ev for _, ev in outcomes],
            [ex.gold for ex, _ in outcomes],
            [expected_route(ex) for ex, _ in outcomes],
            [ex.key for ex, _ in outcomes],
            [is_yes_no_frame(ex.claims) for ex, _ in outcomes],
            [getattr(ex, "frame_complete", True) for ex, _ in outcomes],
            [near_copies(list(ex.chunks), copy_overlap) for ex, _ in outcomes],
            [getattr(ex, "conflict_gold", False) for ex, _ in outcomes],
            [getattr(ex, "truth", None) for ex, _ in outcomes],
            [getattr(ex, "reader", None) for ex, _ in outcomes],
        )

    def subset(self, index: Sequence[int] | torch.Tensor) -> CalibrationData:
        idx = torch.as_tensor(index, dtype=torch.long)
        return CalibrationData(
            evidence=self.evidence[idx],
            chunk_mask=self.chunk_mask[idx],
            claim_mask=self.claim_mask[idx],
            gold=self.gold[idx],
            has_gold=self.has_gold[idx],
            expected=self.expected[idx],
            keys=[self.keys[i] for i in idx.tolist()],
            yes_no=self.yes_no[idx],
            complete=self.complete[idx],
            copies=self.copies[idx],
            conflict_gold=self.conflict_gold[idx],
            truth=self.truth[idx],
            reader=self.reader[idx],
        )
