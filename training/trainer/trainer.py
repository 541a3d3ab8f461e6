"""Training of the learned evaluator: chunk-level EDL loss + query-level loss through fusion + span loss.

:class:`EvidentialTrainer` pairs with :class:`~training.trainer.config.TrainConfig` (one config, one trainer). Each
optimizer step takes ``batch_queries`` queries and encodes all their (query, claim, chunk) triples in one
batched pass; the evidence ``[B, k, M]`` feeds

* the EDL loss per chunk (one-hot target on the labelled claim, all-zero when it supports nothing; the KL
  regularizer annealed over ``loss.annealing_epochs``),
* :class:`~evidential.losses.FusedMassLoss` per query: the fused masses are pushed toward the gold claims
  the query's chunks support (uniform over them when several entities share the name), or toward Θ when
  the chunks support no gold claim or the dataset gives no gold reference (a real conflict),
* :class:`~evidential.losses.EvidenceDistillationLoss` per chunk that carries a teacher's evidence
  (``teacher_evidence``, written by ``evidential-rag distill``): the soft target of distillation,
* and, on a second pass over ``[query; chunk]``, the span loss of the claim-extraction head.

Rows without a human label (``labelled`` false: distilled unannotated chunks) skip the label terms — the
EDL loss, the query-level loss of their query, claim and route accuracy — and train on the teacher alone;
their span target is the teacher's top claim.

Output folder: ``best/`` (the best model on validation loss: a loadable checkpoint with its model card),
``last/`` (resumable state, written every ``save_every_steps`` steps and each epoch; removed when
training finishes), ``log.jsonl`` (one line per evaluation) and ``metrics.json``.
"""

from __future__ import annotations

import json
import math
import random
import re
import shutil
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from evidential import (
    copy_contested,
    copy_pairs,
    fuse,
    merge_copies,
    opinions_from_evidence,
    route,
    select_uncontested,
    witnessed_claims,
)
from evidential.errors import ConfigError
from evidential.losses import FusedMassLoss, edl_loss, evidence_distillation_loss
from training.data.annotated import (
    AnnotatedChunk,
    QueryGroup,
    group_by_query,
    load_annotated,
    split_by_question,
)
from training.data.benchmarks import build_dataset
from training.learned.checkpoint import atomic_dir, load_learned_model, save_checkpoint
from training.learned.model import EvidentialEvaluatorModel, is_yes_no_question
from training.learned.span_loss import span_loss
from training.trainer.config import TrainConfig
from training.trainer.distributed import DataParallel, autocast, shard_bounds
from training.utils.io import write_json
from training.utils.metrics import (
    expected_calibration_error,
    mentions,
    span_matches,
    stated_claims,
    strict_exact_match,
)
from training.utils.text import near_copies

__all__ = [
    "EvidentialTrainer",
    "QueryExample",
    "expected_route",
    "load_training_rows",
    "prepare_examples",
    "score_outcomes",
    "span_hits",
    "span_rows",
    "span_stated",
    "span_target_masks",
    "span_targets",
    "training_device",
]


@dataclass
class QueryExample:
    """One training query: its chunks (≤ ``max_chunks``), its frame (≤ ``max_claims``), labels and gold."""

    key: str
    query: str
    chunks: list[str]
    claims: list[str]
    labels: list[int | None]
    gold: list[int] | None
    doc_types: list[str | None]
    source: str | None
    teacher: list[list[float] | None] | None = None  # per chunk: a teacher's evidence over ``claims``
    labelled: list[bool] | None = None  # per chunk: has a human label (None: all of them)
    # every gold answer is a claim of the frame (False for an extracted frame that misses one: no stated set
    # can then be the right one)
    frame_complete: bool = True
    # calibration only: the gold reference is a conflict's supported claims, given because the data has none
    # (inference.workflows.calibrate.conflict_reference); it serves the answer-level fits, not the
    # selected-claim ones
    conflict_gold: bool = False
    # calibration only: the dataset's own gold reference when ``gold`` was widened to a conflict's sides
    # (inference.workflows.calibrate.side_conflict_reference): what a response's accuracy is judged against,
    # and so what the confidence map is fitted to (None: ``gold``)
    truth: list[int] | None = None
    # calibration only: per chunk, the evaluator's reader score (None where it has none; None: no scores),
    # the input of the reader map (training.calibration.fit.fit_reader_map)
    reader: list[float | None] | None = None

    def is_labelled(self, i: int) -> bool:
        return self.labelled is None or self.labelled[i]

    @property
    def fully_labelled(self) -> bool:
        return self.labelled is None or all(self.labelled)

    def span_claim(self, i: int) -> tuple[str | None, bool]:
        """Chunk ``i``'s claim for the span loss and whether the row counts: the labelled claim, else the
        teacher's top claim (``None`` when the teacher gave no evidence)."""
        if self.is_labelled(i):
            lab = self.labels[i]
            return (self.claims[lab] if lab is not None else None), True
        t = self.teacher[i] if self.teacher is not None else None
        if t is None:
            return None, False
        top = max(range(len(t)), key=t.__getitem__) if t else -1
        return (self.claims[top] if top >= 0 and t[top] > 0 else None), True

    def query_target(self) -> torch.Tensor:
        """Target over ``{claims, Θ}``: the supported gold claims (uniform), else Θ."""
        t = torch.zeros(len(self.claims) + 1)
        supported = {lab for lab in self.labels if lab is not None}
        hit = sorted(supported & set(self.gold or []))
        if hit:
            t[hit] = 1.0 / len(hit)
        else:
            t[-1] = 1.0
        return t


def expected_route(ex: QueryExample) -> str:
    """The behaviour the labels call for: ``direct`` when the chunks support exactly one gold claim and no
    other claim (or exactly one claim when there is no gold reference), ``conflict`` when they support
    several gold claims (ambiguity) or several claims with no gold reference, ``abstain`` when they support
    nothing. Supported wrong claims next to one supported gold claim (misinformation) call for ``direct``:
    the evaluator should discount them."""
    supported = {lab for lab in ex.labels if lab is not None}
    if not supported:
        return "abstain"
    if ex.gold is None:
        return "direct" if len(supported) == 1 else "conflict"
    gold_hit = supported & set(ex.gold)
    if len(gold_hit) > 1:
        return "conflict"
    return "direct" if gold_hit else "conflict"


def training_device(config: TrainConfig) -> torch.device:
    """The device ``config.device`` names (``auto``: CUDA when present, else the CPU)."""
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(config.device)


def load_training_rows(config: TrainConfig) -> list[AnnotatedChunk]:
    """All rows of the configured sources (builders or annotated JSONL)."""
    rows: list[AnnotatedChunk] = []
    for src in config.data:
        path = src.resolved_path()
        if src.name == "annotated":
            got = load_annotated(path)
            if src.limit is not None:
                keys = list(dict.fromkeys(r.key for r in got))[: src.limit]
                got = [r for r in got if r.key in set(keys)]
        else:
            got = build_dataset(src.name, path, limit=src.limit, **src.options)
        rows.extend(got)
    if not rows:
        raise ConfigError("the configured data sources hold no rows")
    return rows


def prepare_examples(groups: list[QueryGroup], max_chunks: int, max_claims: int) -> list[QueryExample]:
    """Cap chunks and claims per query (gold, labelled, then teacher-supported claims kept first; labels and
    teacher evidence remapped)."""
    out = []
    for g in groups:
        rows = g.rows[:max_chunks]
        keep: list[int] = []
        strongest: dict[int, float] = {}  # claims the teacher supports, strongest first
        for r in rows:
            for j, v in enumerate(r.teacher_evidence or []):
                if v > 0:
                    strongest[j] = max(strongest.get(j, 0.0), v)
        by_teacher = sorted(strongest, key=lambda j: -strongest[j])
        for j in [
            *(g.gold or []),
            *(r.label for r in rows if r.label is not None),
            *by_teacher,
            *range(len(g.candidates)),
        ]:
            if j not in keep and len(keep) < max_claims:
                keep.append(j)
        keep.sort()
        remap = {j: n for n, j in enumerate(keep)}
        out.append(
            QueryExample(
                key=g.key,
                query=g.query,
                chunks=[r.chunk for r in rows],
                claims=[g.candidates[j] for j in keep],
                labels=[remap.get(r.label) if r.label is not None else None for r in rows],
                gold=[remap[j] for j in g.gold if j in remap] if g.gold is not None else None,
                doc_types=[r.doc_type for r in rows],
                source=rows[0].source_dataset if rows else None,
                teacher=[
                    [r.teacher_evidence[j] for j in keep] if r.teacher_evidence is not None else None
                    for r in rows
                ]
                if any(r.teacher_evidence is not None for r in rows)
                else None,
                labelled=[r.labelled for r in rows] if not all(r.labelled for r in rows) else None,
            )
        )
    return [e for e in out if e.claims and e.chunks]


def span_picks(
    exs: list[QueryExample], per_query: int | None, epoch_progress: float, position: int = 0
) -> list[tuple[QueryExample, int]]:
    """The (query, chunk index) pairs that train the span head in one step: ``per_query`` chunks of each
    query (all when ``None``), starting at an offset that rotates with training progress and with the
    query's place in the step's batch (``position`` + its index in ``exs``: a process that trains on a part
    of the batch picks what one process would). Yes/no questions are left out: at inference their frame is
    ``{yes, no}`` and nothing is extracted."""
    out = []
    for n, ex in enumerate(exs, start=position):
        if is_yes_no_question(ex.query) or not ex.chunks:
            continue
        k = len(ex.chunks)
        take = k if per_query is None else min(per_query, k)
        first = int(epoch_progress * 997 + n) % k
        out.extend((ex, (first + j) % k) for j in range(take))
    return out


def _token_span(chunk_tokens: torch.Tensor, offsets: torch.Tensor, a: int, b: int) -> tuple[int, int] | None:
    """The first and last chunk token of one row that overlap the characters ``[a, b)`` (``None``: none
    does, e.g. cut by truncation)."""
    toks = (chunk_tokens & (offsets[:, 1] > a) & (offsets[:, 0] < b)).nonzero().flatten()
    return (int(toks[0]), int(toks[-1])) if len(toks) else None


def span_targets(
    chunks: list[str], claims: list[str | None], offsets: torch.Tensor, chunk_tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token start/end of each chunk's labelled claim (first case-insensitive occurrence; 0/0 = no
    answer) and a mask of the rows that count: labelled rows whose claim is not found in the (truncated)
    chunk are left out."""
    starts, ends, use = [], [], []
    chunk_tokens = chunk_tokens.cpu()
    for n, (chunk, claim) in enumerate(zip(chunks, claims)):
        s = e = 0
        ok = claim is None
        if claim is not None and (pos := chunk.lower().find(claim.lower())) >= 0:
            if (got := _token_span(chunk_tokens[n], offsets[n], pos, pos + len(claim))) is not None:
                (s, e), ok = got, True
        starts.append(s)
        ends.append(e)
        use.append(ok)
    return torch.tensor(starts), torch.tensor(ends), torch.tensor(use)


def span_target_masks(
    chunks: list[str], claims: list[str | None], offsets: torch.Tensor, chunk_tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Like :func:`span_targets`, but boolean ``[N, T]`` masks of the start and end tokens of *every*
    occurrence of each chunk's labelled claim (case-insensitive, not inside a longer word; the first raw
    occurrence when none stands alone), for the marginal-likelihood span loss
    (:func:`training.learned.span_loss.span_loss`); ``[CLS]`` (token 0) alone for no answer. Rows whose
    claim is not in the (truncated) chunk are left out of the returned row mask."""
    n, t = offsets.shape[:2]
    starts = torch.zeros(n, t, dtype=torch.bool)
    ends = torch.zeros(n, t, dtype=torch.bool)
    use = torch.zeros(n, dtype=torch.bool)
    chunk_tokens, offsets = chunk_tokens.cpu(), offsets.cpu()
    for r, (chunk, claim) in enumerate(zip(chunks, claims)):
        if claim is None:
            starts[r, 0] = ends[r, 0] = use[r] = True
            continue
        found = [(m.start(), m.end()) for m in re.finditer(rf"(?<!\w){re.escape(claim)}(?!\w)", chunk, re.I)]
        if not found and (pos := chunk.lower().find(claim.lower())) >= 0:
            found = [(pos, pos + len(claim))]
        for a, b in found:
            if (got := _token_span(chunk_tokens[r], offsets[r], a, b)) is not None:
                starts[r, got[0]] = ends[r, got[1]] = use[r] = True
    return starts, ends, use


def span_rows(exs: list[QueryExample]) -> list[tuple[str, str, str]]:
    """Claim-extraction fidelity's rows of some queries, ``(query, chunk, labelled claim)``: every
    human-labelled chunk of an open (not yes/no) question whose label is a claim."""
    return [
        (ex.query, ex.chunks[i], ex.claims[ex.labels[i]])
        for ex in exs
        if not is_yes_no_question(ex.query)
        for i in range(len(ex.chunks))
        if ex.is_labelled(i) and ex.labels[i] is not None
    ]


def span_hits(model: EvidentialEvaluatorModel, exs: list[QueryExample]) -> list[bool]:
    """Per row of :func:`span_rows`: whether the span head's repaired best span (null margin 0) matches the
    labelled claim (:func:`training.utils.metrics.span_matches`), in one batched span pass. Empty without a
    span head."""
    rows = span_rows(exs)
    if not model.config.span_head or not rows:
        return []
    got = model.extract_spans([q for q, _, _ in rows], [c for _, c, _ in rows])
    return [span_matches(p.text, label) for p, (_, _, label) in zip(got, rows)]


def span_stated(exs: list[QueryExample]) -> list[bool]:
    """Per row of :func:`span_rows`: whether the chunk states its labelled claim at all
    (:func:`training.utils.metrics.mentions`). A MuSiQue first-hop paragraph is labelled with the second
    hop's answer, which it never names: no reader of that chunk alone can extract it, so fidelity is also
    reported over the rows whose chunk states the label."""
    return [mentions(chunk, label) for _, chunk, label in span_rows(exs)]


#: The loss terms whose batch mean is a mean over rows (their counts normalise a split batch; see ``losses``).
TERMS = ("edl", "query", "distill", "span")


class EvidentialTrainer:
    """Trains an :class:`~training.learned.model.EvidentialEvaluatorModel` from a :class:`TrainConfig`.

    Run as one process (``evidential-rag train``) or data-parallel
    (``accelerate launch --multi_gpu --num_processes N -m inference.cli train …``): every process reads the
    same data and walks the same seeded batch order; each trains on its contiguous share of every optimizer
    step's ``batch_queries`` queries (cut again into ``gradient_accumulation_steps`` encoder passes), each
    loss term is normalised by the step's row counts over all processes, and one all-reduce sums the
    gradients (:class:`~training.trainer.distributed.DataParallel`). The step's gradient is therefore the
    gradient of the whole batch's loss, whatever the number of processes and passes. Validation batches are
    dealt out round-robin and the results gathered, so every process computes the same metrics; only the
    main process writes files.

    Args:
        config: The training config.
        output_dir: Output folder (``best/``, ``last/``, ``log.jsonl``, ``metrics.json``).
        command: The command line to record in the model card.
        progress: Show progress bars (main process only).
    """

    def __init__(
        self, config: TrainConfig, output_dir: str | Path, command: str | None = None, progress: bool = True
    ):
        self.config = config
        self.output_dir = Path(output_dir)
        self.command = command or " ".join(sys.argv)
        device = training_device(config)
        self.dp = DataParallel(cpu=device.type == "cpu")
        # several processes: each takes the device accelerate assigned it (cuda:<local rank>, or the CPU)
        self.device = self.dp.device if self.dp.distributed and device.type != "cpu" else device
        self.progress = progress and self.dp.is_main
        if config.mixed_precision == "fp16" and self.device.type != "cuda":
            raise ConfigError(
                f"mixed_precision: 'fp16' needs a CUDA device (training runs on {self.device}); use 'bf16' or 'no'"
            )
        self.scaler = torch.amp.GradScaler("cuda") if config.mixed_precision == "fp16" else None
        self.edl_annealing = config.loss.annealing_epochs
        self.fused_loss = FusedMassLoss(lam=config.loss.lam, rule=config.loss.rule)
        self.fused_loss_sum = FusedMassLoss(lam=config.loss.lam, rule=config.loss.rule, reduction="sum")
        self.trackers: list[Any] = []

    # ---- data --------------------------------------------------------------------------------------
    def prepare_data(self) -> tuple[list[QueryExample], list[QueryExample]]:
        rows = load_training_rows(self.config)
        if not any(r.labelled or r.teacher_evidence is not None for r in rows):
            raise ConfigError(
                "the data holds no labels and no teacher_evidence (unannotated chunks?); have a teacher "
                "annotate them with `evidential-rag distill`"
            )
        train_rows, val_rows = split_by_question(
            rows, self.config.validation_fraction, self.config.split_seed
        )
        cfg = self.config
        train = prepare_examples(
            group_by_query(train_rows), cfg.max_chunks_per_query, cfg.max_claims_per_query
        )
        val = prepare_examples(group_by_query(val_rows), cfg.max_chunks_per_query, cfg.max_claims_per_query)
        if not train or not val:
            raise ConfigError(
                f"the split left {len(train)} training and {len(val)} validation queries; give more data "
                "or change validation_fraction"
            )
        if cfg.max_validation_queries is not None:
            val = val[: cfg.max_validation_queries]
        return train, val

    # ---- forward -----------------------------------------------------------------------------------
    def forward(self, model: EvidentialEvaluatorModel, exs: list[QueryExample]):
        """Evidence ``[B, k, M]`` (float32) with chunk and claim masks from one encoder pass over all chunks."""
        queries = [ex.query for ex in exs for _ in ex.chunks]
        chunks = [c for ex in exs for c in ex.chunks]
        claims = [list(ex.claims) for ex in exs for _ in ex.chunks]
        with autocast(self.device, self.config.mixed_precision):
            flat = model(queries, chunks, claims)["evidence"]  # [rows, M_max]
        flat = flat.float()
        kmax = max(len(e.chunks) for e in exs)
        mmax = max(len(e.claims) for e in exs)
        ev = flat.new_zeros(len(exs), kmax, mmax)
        chunk_mask = torch.zeros(len(exs), kmax, dtype=torch.bool, device=flat.device)
        claim_mask = torch.zeros(len(exs), mmax, dtype=torch.bool, device=flat.device)
        r = 0
        for b, ex in enumerate(exs):
            k, m = len(ex.chunks), len(ex.claims)
            ev[b, :k, :m] = flat[r : r + k, :m]
            chunk_mask[b, :k] = True
            claim_mask[b, :m] = True
            r += k
        return ev, chunk_mask, claim_mask

    def _span_rows(
        self, model: EvidentialEvaluatorModel, exs: list[QueryExample], epoch_progress: float, position: int
    ) -> tuple[list[tuple[QueryExample, int]], list[str], list[str | None], torch.Tensor]:
        """The span head's rows of a batch: picks, their chunks and claims, and which rows may count."""
        if not (self.config.loss.span_weight > 0 and model.config.span_head):
            return [], [], [], torch.zeros(0, dtype=torch.bool)
        picks = span_picks(exs, self.config.span_chunks_per_query, epoch_progress, position)
        chunks = [ex.chunks[i] for ex, i in picks]
        claims, counts = zip(*(ex.span_claim(i) for ex, i in picks)) if picks else ((), ())
        return picks, chunks, list(claims), torch.tensor(counts, dtype=torch.bool)

    def _span_targets(self, *args) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The span targets ``loss.span_occurrences`` asks for: the first occurrence (token indices) or
        every occurrence (token masks)."""
        if self.config.loss.span_occurrences == "all":
            return span_target_masks(*args)
        return span_targets(*args)

    def term_counts(
        self,
        model: EvidentialEvaluatorModel,
        exs: list[QueryExample],
        epoch_progress: float,
        position: int = 0,
    ) -> torch.Tensor:
        """Rows each loss term of :data:`TERMS` averages over in ``exs``: labelled chunks (EDL), fully
        labelled queries (query-level), chunks with a teacher (distillation), span rows whose claim is
        found in the truncated chunk (span: a tokenizer pass, no encoder pass). ``float64 [4]``."""
        cfg = self.config.loss
        edl = sum(ex.is_labelled(i) for ex in exs for i in range(len(ex.chunks))) if cfg.edl_weight > 0 else 0
        query = sum(ex.fully_labelled for ex in exs) if cfg.query_weight > 0 else 0
        distill = 0
        if cfg.distill_weight > 0:
            distill = sum(
                ex.teacher is not None and ex.teacher[i] is not None
                for ex in exs
                for i in range(len(ex.chunks))
            )
        span = 0
        picks, chunks, claims, counts = self._span_rows(model, exs, epoch_progress, position)
        if picks:
            batch = model.tokenize([ex.query for ex, _ in picks], chunks, None)
            chunk_tok = (batch["sequence"] == 1) & (batch["attention_mask"] == 1)
            use = self._span_targets(chunks, claims, batch["offset_mapping"], chunk_tok)[2] & counts
            span = int(use.sum())
        return torch.tensor([edl, query, distill, span], dtype=torch.float64)

    def losses(
        self,
        model: EvidentialEvaluatorModel,
        exs: list[QueryExample],
        epoch_progress: float,
        norms: dict[str, float] | None = None,
        position: int = 0,
    ) -> dict[str, torch.Tensor]:
        """The loss terms of one batch (each weighted; ``total`` is their sum).

        Each term is a mean over its rows (:meth:`term_counts`). With ``norms`` (a part of a larger batch:
        another process's or another pass's rows make up the rest) each term is instead the sum over this
        part's rows divided by ``norms[term]``, the whole batch's count, so that the parts' losses add up to
        the whole batch's loss; ``position`` is the part's first query's place in the whole batch.
        """
        cfg = self.config.loss

        def reduce(term: str, fn, *args, **kwargs) -> torch.Tensor:
            if norms is None:
                return fn(*args, **kwargs)
            return fn(*args, **kwargs, reduction="sum") / norms[term]

        def counts(term: str) -> bool:
            return norms is None or norms[term] > 0

        ev, chunk_mask, claim_mask = self.forward(model, exs)
        b, k, m = ev.shape
        target = torch.zeros(b, k, m, device=ev.device)
        qtarget = torch.zeros(b, m + 1, device=ev.device)
        labelled = torch.zeros(b, k, dtype=torch.bool, device=ev.device)  # rows with a human label
        query_labelled = torch.zeros(b, dtype=torch.bool, device=ev.device)
        teacher = torch.zeros(b, k, m, device=ev.device)
        has_teacher = torch.zeros(b, k, dtype=torch.bool, device=ev.device)
        for n, ex in enumerate(exs):
            for i, lab in enumerate(ex.labels):
                labelled[n, i] = ex.is_labelled(i)
                if lab is not None and ex.is_labelled(i):
                    target[n, i, lab] = 1.0
                if ex.teacher is not None and ex.teacher[i] is not None:
                    teacher[n, i, : len(ex.claims)] = torch.tensor(ex.teacher[i], device=ev.device)
                    has_teacher[n, i] = True
            query_labelled[n] = ex.fully_labelled
            t = ex.query_target()
            qtarget[n, : len(ex.claims)] = t[:-1]
            qtarget[n, -1] = t[-1]
        labelled &= chunk_mask
        has_teacher &= chunk_mask
        out: dict[str, torch.Tensor] = {}
        if cfg.edl_weight > 0 and labelled.any() and counts("edl"):
            out["edl"] = cfg.edl_weight * reduce(
                "edl",
                edl_loss,
                ev,
                target,
                kind=cfg.edl_kind,
                claim_mask=claim_mask.unsqueeze(1).expand(b, k, m),
                step=epoch_progress,
                annealing_steps=self.edl_annealing,
                kl_weight=cfg.kl_weight,
                null_kl_weight=cfg.null_kl_weight,
                row_mask=labelled,
            )
        if cfg.query_weight > 0 and query_labelled.any() and counts("query"):
            args = (ev.double(), qtarget.double())
            if norms is None:
                query = self.fused_loss(
                    *args,
                    claim_mask=claim_mask,
                    chunk_mask=chunk_mask,
                    row_mask=None if bool(query_labelled.all()) else query_labelled,
                )
            else:
                query = (
                    self.fused_loss_sum(
                        *args, claim_mask=claim_mask, chunk_mask=chunk_mask, row_mask=query_labelled
                    )
                    / norms["query"]
                )
            out["query"] = cfg.query_weight * query.float()
        if cfg.distill_weight > 0 and has_teacher.any() and counts("distill"):
            out["distill"] = cfg.distill_weight * reduce(
                "distill",
                evidence_distillation_loss,
                ev,
                teacher,
                kind=cfg.distill_kind,
                claim_mask=claim_mask.unsqueeze(1).expand(b, k, m),
                row_mask=has_teacher,
            )
        # the span head reads [query; chunk] rows without candidates (as at inference):
        # span_chunks_per_query chunks per query per step, rotating through the query's chunks
        picks, chunks, claims, usable = self._span_rows(model, exs, epoch_progress, position)
        if picks and counts("span"):
            with autocast(self.device, self.config.mixed_precision):
                fwd = model([ex.query for ex, _ in picks], chunks, None, spans=True)
            s, e, use = self._span_targets(chunks, claims, fwd["offsets"], fwd["chunk_tokens"])
            use &= usable
            if use.any():
                dev = fwd["start"].device
                use = use.to(dev)
                out["span"] = cfg.span_weight * reduce(
                    "span",
                    span_loss,
                    fwd["start"][use].float(),
                    fwd["end"][use].float(),
                    s.to(dev)[use],
                    e.to(dev)[use],
                )
        # a batch no term applies to (no label, no teacher) still gives a differentiable zero
        out["total"] = sum(out.values()) if out else ev.sum() * 0.0
        out["_evidence"] = ev.detach()
        return out

    # ---- evaluation --------------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(
        self,
        model: EvidentialEvaluatorModel,
        exs: list[QueryExample],
        tau: tuple[float, float] = (0.35, 0.65),
    ) -> dict[str, Any]:
        """Validation metrics: loss terms, claim accuracy, mean evidence by document type, ECE, route
        accuracy, RAMDocs strict exact match and claim-extraction fidelity (`span_fidelity` over `span_rows`
        labelled chunks, :func:`span_hits`; `span_fidelity_stated` over the `span_rows_stated` of them whose
        chunk states its label, :func:`span_stated`).

        The batches are those of a single process; with several processes each evaluates every
        ``world``-th batch and the results are gathered in batch order, so all processes compute the
        metrics one process would.
        """
        model.eval()
        bs = self.config.batch_queries
        starts = list(range(0, len(exs), bs))
        mine = []
        for n in range(self.dp.rank, len(starts), self.dp.world):
            batch = exs[starts[n] : starts[n] + bs]
            terms = self.losses(model, batch, epoch_progress=self.config.loss.annealing_epochs)
            values = {key: v.item() for key, v in terms.items() if not key.startswith("_")}
            ev = terms["_evidence"]
            evidence = [
                ev[i, : len(ex.chunks), : len(ex.claims)].double().cpu() for i, ex in enumerate(batch)
            ]
            with autocast(self.device, self.config.mixed_precision):
                hits_here = span_hits(model, batch)
            mine.append((n, values, evidence, hits_here))
        done = sorted((r for part in self.dp.gather(mine) for r in part), key=lambda r: r[0])
        sums: dict[str, float] = defaultdict(float)
        outcomes = []
        hits: list[bool] = []
        for n, values, evidence, batch_hits in done:
            for key, v in values.items():
                sums[key] += v
            outcomes.extend(zip(exs[starts[n] : starts[n] + bs], evidence))
            hits.extend(batch_hits)
        n_batches = len(done)
        metrics = {f"loss_{k}" if k != "total" else "loss": v / max(n_batches, 1) for k, v in sums.items()}
        metrics.update(
            score_outcomes(
                outcomes, self.config.support_threshold, self.config.loss.lam, self.config.loss.rule, tau
            )
        )
        if hits:
            metrics.update(span_fidelity=sum(hits) / len(hits), span_rows=len(hits))
            stated = span_stated(exs)
            if any(stated):
                metrics.update(
                    span_fidelity_stated=sum(h for h, s in zip(hits, stated) if s) / sum(stated),
                    span_rows_stated=sum(stated),
                )
        return metrics

    # ---- optimisation ------------------------------------------------------------------------------
    def _optimizer(self, model: EvidentialEvaluatorModel, total_steps: int):
        cfg = self.config
        # every trainable parameter outside the encoder belongs to a head (proj, attn_query, evidence, span)
        head = [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith("encoder.")]
        enc = [p for n, p in model.named_parameters() if p.requires_grad and n.startswith("encoder.")]
        groups = [{"params": head, "lr": cfg.head_learning_rate}]
        if enc:
            groups.append({"params": enc, "lr": cfg.learning_rate})
        opt = torch.optim.AdamW(groups, weight_decay=cfg.weight_decay)
        warm = max(1, int(cfg.warmup_ratio * total_steps))

        def schedule(step: int) -> float:
            if step < warm:
                return (step + 1) / warm
            return max(0.0, (total_steps - step) / max(1, total_steps - warm))

        return opt, torch.optim.lr_scheduler.LambdaLR(opt, schedule)

    def _card(self, metrics: dict[str, Any], n_train: int, n_val: int, elapsed: float) -> dict[str, Any]:
        return {
            "model": "EvidentialRAG learned evaluator (encoder + LoRA + evidential head + span head)",
            "encoder": self.config.model.encoder,
            "data": [
                {"name": s.name, "path": s.path, "limit": s.limit, "options": s.options}
                for s in self.config.data
            ],
            "train_queries": n_train,
            "validation_queries": n_val,
            "validation_metrics": metrics,
            "command": self.command,
            "train_seconds": round(elapsed, 1),
            "device": str(self.device),
            "processes": self.dp.world,
            "config": self.config.to_dict(),
        }

    # ---- trackers ----------------------------------------------------------------------------------
    def _start_trackers(self) -> None:
        """Start the configured accelerate trackers (main process only)."""
        if not self.config.trackers or not self.dp.is_main:
            return
        from accelerate.tracking import LOGGER_TYPE_TO_CLASS

        folder = Path(self.config.tracking_dir or self.output_dir / "tracking")
        for name in self.config.trackers:
            cls = LOGGER_TYPE_TO_CLASS[name]
            try:
                tracker = (
                    cls(self.output_dir.name, folder)
                    if cls.requires_logging_directory
                    else cls(self.output_dir.name)
                )
                tracker.start()
            except (ImportError, ModuleNotFoundError) as exc:
                raise ConfigError(
                    f"trackers: {name!r} cannot start ({exc}); install its package (tensorboard: "
                    "pip install tensorboard) or remove it from trackers"
                ) from None
            tracker.store_init_configuration(_scalars(self.config.to_dict()))
            self.trackers.append(tracker)

    def _track(self, values: dict[str, Any], step: int, prefix: str) -> None:
        if self.trackers:
            flat = {f"{prefix}/{k}": v for k, v in _scalars(values).items()}
            for tracker in self.trackers:
                tracker.log(flat, step=step)

    # ---- training loop: one method per step ------------------------------------------------------------
    def train(self, resume: bool = False) -> dict[str, Any]:
        """Run training; returns the best validation metrics. ``resume`` continues from ``last/``."""
        cfg = self.config
        train, val = self.prepare_data()
        steps_per_epoch = math.ceil(len(train) / cfg.batch_queries)
        total_steps = steps_per_epoch * cfg.epochs
        model, state = self._start(resume)
        opt, sched = self._optimizer(model, total_steps)
        if resume:
            self._restore_optimizer(opt, sched)
        if self.dp.is_main:
            self.output_dir.mkdir(parents=True, exist_ok=True)
        self._start_trackers()
        run = _Run(model, opt, sched, state, t0=time.perf_counter() - state["elapsed"])
        try:
            with tqdm(
                total=total_steps,
                initial=state["global_step"],
                disable=not self.progress,
                desc="train",
                unit="step",
            ) as bar:
                while state["epoch"] < cfg.epochs and not state["finished"]:
                    self._train_epoch(run, train, steps_per_epoch, bar)
                    self._end_epoch(run, val, len(train))
            return self._finish(run, len(train), len(val))
        finally:
            for tracker in self.trackers:
                tracker.finish()
            self.trackers = []

    def _start(self, resume: bool) -> tuple[EvidentialEvaluatorModel, dict[str, Any]]:
        """The model and the trainer state: fresh (seeded), or as ``last/`` left them when resuming."""
        out, last = self.output_dir, self.output_dir / "last"
        if self.dp.is_main:
            atomic_dir.recover(last)  # a run killed while it swapped last/ in leaves the previous one aside
        self.dp.wait()
        if resume:
            if not (last / "trainer_state.json").is_file():
                if (out / "best" / "learned_config.json").is_file():
                    raise ConfigError(f"{out}: training already finished (best/ exists, no last/ to resume)")
                raise ConfigError(
                    f"{out}: nothing to resume (no last/trainer_state.json); run without --resume"
                )
            state = json.loads((last / "trainer_state.json").read_text(encoding="utf-8"))
            model = load_learned_model(last, device=self.device, trainable=True)
            model.train()
            return model, state
        if (last / "trainer_state.json").is_file():
            raise ConfigError(
                f"{out} holds an unfinished run (last/); pass --resume to continue it or choose another --output"
            )
        torch.manual_seed(self.config.seed)
        model = EvidentialEvaluatorModel(self.config.model).to(self.device)
        if self.dp.rank > 0:
            # the same initial weights on every process, but each its own dropout
            torch.manual_seed(self.config.seed + 7919 * self.dp.rank)
        state: dict[str, Any] = {
            "epoch": 0,
            "step_in_epoch": 0,
            "global_step": 0,
            "best_loss": None,
            "bad_epochs": 0,
            "history": [],
            "elapsed": 0.0,
            "finished": False,
        }
        return model, state

    def _restore_optimizer(self, opt, sched) -> None:
        """Load the optimizer, scheduler, loss-scaler and RNG states saved in ``last/`` (a resumed run replays
        exactly; with several processes each takes its own RNG state back)."""
        path = self.output_dir / "last" / "optimizer.pt"
        if not path.is_file():
            return
        saved = torch.load(path, map_location=self.device, weights_only=False)
        opt.load_state_dict(saved["optimizer"])
        sched.load_state_dict(saved["scheduler"])
        if self.scaler is not None and saved.get("scaler"):
            self.scaler.load_state_dict(saved["scaler"])
        rng = saved.get("rng_by_rank") or [{"torch": saved["torch_rng"], "cuda": None}]
        if len(rng) != self.dp.world and self.dp.is_main:
            print(
                f"note: last/ was written by {len(rng)} process(es), this run has {self.dp.world}: the data "
                "order and the weights continue exactly, the dropout draws do not",
                file=sys.stderr,
            )
        mine = rng[self.dp.rank] if self.dp.rank < len(rng) else rng[0]
        torch.set_rng_state(mine["torch"].cpu())
        if mine.get("cuda") is not None and self.device.type == "cuda":
            torch.cuda.set_rng_state(mine["cuda"].cpu(), self.device)
        random.setstate(
            tuple(saved["py_rng"][:1]) + (tuple(saved["py_rng"][1]),) + tuple(saved["py_rng"][2:])
        )

    def _save_last(self, run: _Run) -> None:
        """Write the resumable state to ``last/`` (main process) without moving any process's RNG."""
        run.state["elapsed"] = time.perf_counter() - run.t0
        rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None
        by_rank = self.dp.gather({"torch": rng, "cuda": cuda_rng})
        if self.dp.is_main:
            save_checkpoint(
                self.output_dir / "last",
                run.model,
                card={"note": "resumable state; the trained model is best/"},
                trainer_state=run.state,
                optimizer_state={
                    "optimizer": run.opt.state_dict(),
                    "scheduler": run.sched.state_dict(),
                    "scaler": self.scaler.state_dict() if self.scaler is not None else None,
                    "torch_rng": rng,
                    "rng_by_rank": by_rank,
                    "py_rng": random.getstate(),
                },
            )
        torch.set_rng_state(rng)  # saving must not move the RNG: a resumed run replays the same dropout
        self.dp.wait()

    def _train_epoch(self, run: _Run, train: list[QueryExample], steps_per_epoch: int, bar: Any) -> None:
        """The optimizer steps of the current epoch, from ``state["step_in_epoch"]`` on (seeded order)."""
        cfg, state = self.config, run.state
        epoch = state["epoch"]
        order = list(range(len(train)))
        random.Random(cfg.seed * 1000 + epoch).shuffle(order)
        run.model.train()
        for step in range(state["step_in_epoch"], steps_per_epoch):
            batch = [train[i] for i in order[step * cfg.batch_queries : (step + 1) * cfg.batch_queries]]
            terms = self._optimizer_step(run, batch, epoch_progress=epoch + step / steps_per_epoch)
            state["global_step"] += 1
            state["step_in_epoch"] = step + 1
            bar.update(1)
            shown = {k: float(v.detach()) for k, v in terms.items() if not k.startswith("_")}
            bar.set_postfix({k: f"{v:.3f}" for k, v in shown.items()})
            self._track({**shown, "lr": run.sched.get_last_lr()[-1]}, state["global_step"], "train")
            if state["global_step"] % cfg.save_every_steps == 0 and step + 1 < steps_per_epoch:
                self._save_last(run)

    def _optimizer_step(
        self, run: _Run, batch: list[QueryExample], epoch_progress: float
    ) -> dict[str, torch.Tensor]:
        """Losses of one batch, backward pass(es), gradient sum over processes, gradient clipping and one
        optimizer + scheduler step. Returns the batch's loss terms (summed over processes and passes)."""
        params = [p for p in run.model.parameters() if p.requires_grad]
        run.opt.zero_grad(set_to_none=True)
        if not self.dp.distributed and self.config.gradient_accumulation_steps == 1:
            terms = self.losses(run.model, batch, epoch_progress=epoch_progress)
            self._backward(terms["total"])
        else:
            terms = self._split_step(run.model, batch, epoch_progress)
            self.dp.sum_gradients(params)
        if self.scaler is not None:
            self.scaler.unscale_(run.opt)
        if self.config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, self.config.grad_clip)
        if self.scaler is not None:
            self.scaler.step(run.opt)
            self.scaler.update()
        else:
            run.opt.step()
        run.sched.step()
        return terms

    def _backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def _split_step(
        self, model: EvidentialEvaluatorModel, batch: list[QueryExample], epoch_progress: float
    ) -> dict[str, torch.Tensor]:
        """This process's share of ``batch`` in ``gradient_accumulation_steps`` passes, each term normalised
        by the whole batch's row counts (summed over processes); gradients accumulate in ``.grad``."""
        share, position = self.dp.shard(batch)
        accum = self.config.gradient_accumulation_steps
        parts = [shard_bounds(len(share), accum, i) for i in range(accum)]
        parts = [(a, b) for a, b in parts if b > a]
        counts = sum(
            (self.term_counts(model, share[a:b], epoch_progress, position + a) for a, b in parts),
            torch.zeros(len(TERMS), dtype=torch.float64),
        )
        norms = dict(zip(TERMS, self.dp.sum(counts).tolist()))
        logged = torch.zeros(len(TERMS) + 1, dtype=torch.float64)
        for a, b in parts:
            terms = self.losses(model, share[a:b], epoch_progress, norms=norms, position=position + a)
            self._backward(terms["total"])
            for j, key in enumerate((*TERMS, "total")):
                if key in terms:
                    logged[j] += float(terms[key].detach())
        logged = self.dp.sum(logged)
        present = [key for key in TERMS if norms[key] > 0 and self._term_on(key)]
        out = {key: torch.tensor(float(logged[TERMS.index(key)])) for key in present}
        out["total"] = torch.tensor(float(logged[-1]))
        return out

    def _term_on(self, key: str) -> bool:
        cfg = self.config.loss
        return {
            "edl": cfg.edl_weight,
            "query": cfg.query_weight,
            "distill": cfg.distill_weight,
            "span": cfg.span_weight,
        }[key] > 0

    def _end_epoch(self, run: _Run, val: list[QueryExample], n_train: int) -> None:
        """Validate, log, keep the best model in ``best/``, apply early stopping and save ``last/``."""
        cfg, state = self.config, run.state
        epoch = state["epoch"]
        metrics = self.evaluate(run.model, val)
        metrics.update(epoch=epoch + 1, global_step=state["global_step"])
        state["history"].append(metrics)
        self._track(metrics, state["global_step"], "validation")
        if self.dp.is_main:
            with (self.output_dir / "log.jsonl").open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(metrics) + "\n")
        if state["best_loss"] is None or metrics["loss"] < state["best_loss"]:
            state["best_loss"] = metrics["loss"]
            state["bad_epochs"] = 0
            state["best_metrics"] = metrics
            state["elapsed"] = time.perf_counter() - run.t0
            if self.dp.is_main:
                save_checkpoint(
                    self.output_dir / "best",
                    run.model,
                    card=self._card(metrics, n_train, len(val), state["elapsed"]),
                    extra_files={"metrics.json": json.dumps(metrics, indent=2) + "\n"},
                )
        else:
            state["bad_epochs"] += 1
        state["epoch"] = epoch + 1
        state["step_in_epoch"] = 0
        if cfg.early_stopping_patience and state["bad_epochs"] >= cfg.early_stopping_patience:
            state["finished"] = True
        self._save_last(run)

    def _finish(self, run: _Run, n_train: int, n_val: int) -> dict[str, Any]:
        """Write ``metrics.json`` (the best validation metrics and run totals) and remove ``last/``."""
        state = run.state
        state["elapsed"] = time.perf_counter() - run.t0
        result = {
            **state["best_metrics"],
            "train_seconds": round(state["elapsed"], 1),
            "epochs_run": state["epoch"],
            "train_queries": n_train,
            "validation_queries": n_val,
        }
        if self.dp.is_main:
            write_json(self.output_dir / "metrics.json", result)
            shutil.rmtree(self.output_dir / "last", ignore_errors=True)
        self.dp.wait()
        return result


@dataclass
class _Run:
    """What the steps of one :meth:`EvidentialTrainer.train` call share."""

    model: EvidentialEvaluatorModel
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LRScheduler
    state: dict[str, Any]
    t0: float


def _scalars(values: dict[str, Any], prefix: str = "") -> dict[str, float | int | str | bool]:
    """The scalar leaves of a nested mapping under dotted keys (what trackers accept)."""
    out: dict[str, float | int | str | bool] = {}
    for key, v in values.items():
        name = f"{prefix}{key}"
        if isinstance(v, dict):
            out.update(_scalars(v, f"{name}."))
        elif isinstance(v, (bool, int, float, str)):
            out[name] = v
    return out


def score_outcomes(
    outcomes: list[tuple[QueryExample, torch.Tensor]],
    support_threshold: float = 1.0,
    lam: float = 0.6,
    rule: str = "lambda",
    tau: tuple[float, float] = (0.35, 0.65),
    policy: str = "paper",
    state_ratio: float = 0.5,
    copy_overlap: float | None = None,
    witness_ratio: float | str | None = None,
) -> dict[str, Any]:
    """Metrics of evidence ``[k, M]`` per query against its labels (evaluator-agnostic: used for the learned
    and the prompt evaluator alike).

    * ``claim_accuracy``: per chunk, the predicted claim is the argmax when its evidence reaches
      ``support_threshold`` (else "none"), compared with the label (chunks without a human label are left
      out; the key is absent when no chunk has one);
    * ``mean_evidence_<type>``: mean of the chunk's largest evidence, by document type;
    * ``ece``: fused confidence (Eq 27) vs "the selected claim is gold", 15 bins, over queries with gold
      (every query is fused with its agreeing near-copies at ``copy_overlap`` as one source,
      :func:`evidential.merge_copies`);
    * ``route_accuracy``: route vs :func:`expected_route` (queries whose chunks all have human labels;
      absent when there are none);
    * ``strict_em_ramdocs``: MADAM-RAG strict exact match of the stated claims
      (:func:`training.utils.metrics.stated_claims` at ``state_ratio``, leaving out the claims only edited
      copies back when ``copy_overlap`` is given, :func:`evidential.copy_contested`, and stating the
      claims witnessed at ``witness_ratio`` when it is a bar, :func:`evidential.witnessed_claims`; RAMDocs
      queries).
    """
    correct = total = 0
    ev_by_type: dict[str, list[float]] = defaultdict(list)
    conf, hit = [], []
    routes_ok = 0
    strict, n_strict = 0, 0
    route_counts: Counter = Counter()
    n_routed = 0
    for ex, ev in outcomes:
        for i, lab in enumerate(ex.labels):
            row = ev[i]
            top = float(row.max()) if row.numel() else 0.0
            pred = int(row.argmax()) if top >= support_threshold else None
            if ex.is_labelled(i):
                correct += pred == lab
                total += 1
            ev_by_type[ex.doc_types[i] or "unknown"].append(top)
        copies = near_copies(
            list(ex.chunks), copy_overlap
        )  # agreeing copies are one source, as in the pipeline
        pairs = copy_pairs(copies) if any(copies) and ev.shape[-1] else None
        fused_ev = ev if pairs is None else merge_copies(ev, pairs)
        res = fuse(opinions_from_evidence(fused_ev), lam=lam, rule=rule)
        r = route(res, tau[0], tau[1], policy).names
        route_counts[r] += 1
        if ex.fully_labelled:
            routes_ok += r == expected_route(ex)
            n_routed += 1
        contested_t = copy_contested(res.belief, fused_ev, pairs) if pairs is not None else None
        sel = int(select_uncontested(res.belief, contested_t))
        if ex.gold is not None:  # a gold reference ([]: none of the frame's claims is gold: a miss)
            conf.append(float(res.confidence))
            hit.append(sel in ex.gold)
        if ex.source == "ramdocs" and ex.gold is not None:
            contested = contested_t.tolist() if contested_t is not None else None
            witnessed = (
                witnessed_claims(fused_ev, float(witness_ratio)).tolist()
                if witness_ratio not in (None, "off") and fused_ev.shape[-1]
                else None
            )
            said = stated_claims(
                ex.claims,
                [float(x) for x in res.belief],
                r,
                sel,
                state_ratio,
                contested=contested,
                witnessed=witnessed,
            )
            gold = [ex.claims[g] for g in ex.gold]
            wrong = [c for j, c in enumerate(ex.claims) if j not in ex.gold]
            strict += ex.frame_complete and strict_exact_match(said, gold, wrong)
            n_strict += 1
    out: dict[str, Any] = {
        "claim_accuracy": correct / total if total else None,
        "ece": expected_calibration_error(conf, hit),
        "selected_accuracy": sum(hit) / max(len(hit), 1),
        "route_accuracy": routes_ok / n_routed if n_routed else None,
        "routes": dict(route_counts),
        "queries": len(outcomes),
    }
    for key in ("claim_accuracy", "route_accuracy"):
        if out[key] is None:
            del out[key]
    for t, vals in sorted(ev_by_type.items()):
        out[f"mean_evidence_{t}"] = sum(vals) / len(vals)
    if n_strict:
        out["strict_em_ramdocs"] = strict / n_strict
        out["ramdocs_queries"] = n_strict
    return out
