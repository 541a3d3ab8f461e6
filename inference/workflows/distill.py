"""Distillation: train the learned evaluator on a teacher evaluator's outputs instead of human labels.

The paper's stated future work. ``evidential-rag distill`` runs four
stages into one output folder ``DIR``:

1. **Teacher** (:func:`run_teacher`): the teacher evaluator (by default the ``prompt`` evaluator on the
   configured backend) scores the chunks of every query — annotated chunks (the candidates open the
   frame) or unannotated ones (the teacher's own claims, aligned, are the frame). All chunks of a batch of
   ``teacher.batch_queries`` queries go to ONE ``evaluate_batch`` call; each batch's outputs are appended
   to ``DIR/teacher.jsonl`` (one :class:`~inference.types.ChunkEvidence`-derived row per chunk) and
   fsynced, so an interrupted run loses at most the batch in flight: a restart drops a torn last line and
   any query whose rows are incomplete, and asks the teacher only for the queries not yet done
   (:class:`TeacherCache`). ``DIR/teacher_meta.json`` records the teacher; a cache written by another
   teacher is refused.
2. **Targets** (:func:`distilled_rows`): each chunk becomes an annotated-chunk row (``training.data.annotated``)
   whose ``teacher_evidence`` is the teacher's non-negative evidence over the frame — the soft target.
   With candidates, the teacher's frame is mapped onto them by claim alignment
   (:mod:`inference.alignment`); teacher support for a claim outside the candidates is counted
   (``off_frame_rows``) and gives no evidence to any candidate. Human labels are dropped unless
   ``teacher.use_labels`` (so the student learns from the teacher alone) but kept aside to score both
   models on validation. Written to ``DIR/distill_rows.jsonl`` with an explicit split by question.
3. **Student** (:class:`~training.trainer.trainer.EvidentialTrainer`): the learned head is trained on those rows
   with the config's loss weights (``configs/distill-minilm.yaml``: the distillation term only, plus the
   span head on the teacher's claims); ``DIR/best``, ``DIR/last``, ``log.jsonl`` and ``metrics.json`` as
   ``evidential-rag train`` writes them, ``--resume`` continuing from ``DIR/last``.
4. **Report** (``DIR/distill_report.json``, :func:`agreement`, :func:`time_side_by_side`): teacher–student
   agreement on the validation split (same decision — top claim or "supports nothing" —, same "supports
   nothing" decision, Spearman correlation of the evidence over all (chunk, claim) pairs; the same on the
   training split as ``agreement_train``, i.e. how well the student fits its teacher at all) and the
   teacher's and student's seconds per chunk measured side by side in this process, with the speed-up.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from evidential.errors import ConfigError, EvidentialError
from inference.alignment import ClaimAligner
from inference.evaluation.metrics import spearman
from inference.evaluators import build_evaluator, make_aligner
from inference.evaluators.config import EvaluatorConfig
from inference.evaluators.contract import CONTRACT_VERSION
from inference.types import Chunk
from training.data.annotated import (
    AnnotatedChunk,
    QueryGroup,
    group_by_query,
    split_by_question,
    write_annotated,
)
from training.learned.checkpoint import load_learned_model
from training.trainer.config import DataSourceConfig, TrainConfig
from training.trainer.distributed import DataParallel
from training.trainer.trainer import EvidentialTrainer, load_training_rows, training_device
from training.utils.configio import apply_overrides, build_dataclass, check_fields, read_yaml_mapping
from training.utils.io import atomic_write_text, write_json
from training.utils.run_metadata import package_versions

__all__ = [
    "CACHE_FORMAT",
    "DistillConfig",
    "DistillError",
    "ReportItem",
    "TeacherCache",
    "TeacherConfig",
    "TeacherQuery",
    "agreement",
    "distilled_rows",
    "load_distill_config",
    "map_to_candidates",
    "run_distillation",
    "run_teacher",
    "spearman",
    "teacher_identity",
    "teacher_queries",
    "time_side_by_side",
]

CACHE_FORMAT = "evidential-rag/teacher-cache/1"


class DistillError(EvidentialError):
    """A distillation input or output folder that cannot be used; the message says what to do."""


# ---- configuration ---------------------------------------------------------------------------------------
@dataclass
class TeacherConfig:
    """The teacher of ``evidential-rag distill`` and how it is run (the ``teacher:`` section)."""

    evaluator: EvaluatorConfig = field(
        default_factory=lambda: EvaluatorConfig(name="prompt"),
        metadata={
            "help": "The teacher evaluator: name prompt (instruction LLM, default) or learned (a checkpoint), "
            "with its backend, decoding and alignment settings as in a run config's evaluator section."
        },
    )
    batch_queries: int = field(
        default=4,
        metadata={
            "help": "Queries per teacher call: all their chunks go to one evaluate_batch (one batched pass); "
            "teacher.jsonl is appended after each call.",
            "range": (1, None),
        },
    )
    use_labels: bool = field(
        default=False,
        metadata={
            "help": "Keep the human labels of annotated data in the training rows (the label losses then "
            "train too, as weighted in loss:); false: the student learns from the teacher alone."
        },
    )
    timing_queries: int = field(
        default=8,
        metadata={
            "help": "Validation queries on which teacher and student are timed side by side for the report "
            "(0: no timing, and the teacher is not loaded when its outputs are all cached).",
            "range": (0, None),
        },
    )

    def __post_init__(self) -> None:
        check_fields(self, "teacher")


@dataclass
class DistillConfig:
    """Everything ``evidential-rag distill`` needs: the teacher section and a training config for the
    student, whose ``data`` are the chunks the teacher reads (annotated JSONL, a dataset builder, or
    unannotated ``chunks``)."""

    train: TrainConfig = field(
        metadata={
            "help": "The student's training config (the YAML's top-level fields).",
            "check": lambda x: isinstance(x, TrainConfig),
            "must": "be a training config (the fields model, data, loss, ...)",
        }
    )
    teacher: TeacherConfig = field(
        default_factory=TeacherConfig,
        metadata={
            "help": "The teacher.",
            "check": lambda x: isinstance(x, TeacherConfig),
            "must": "be a teacher section",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)

    def to_dict(self) -> dict[str, Any]:
        return {"teacher": dataclasses.asdict(self.teacher), **self.train.to_dict()}


def load_distill_config(path: str | Path, overrides: Sequence[str] = ()) -> DistillConfig:
    """Read a distillation config (a path or a name in ``configs/``, e.g. ``distill-minilm``).

    The YAML is a training config (``configs/learned-minilm.yaml``) plus a ``teacher:`` section;
    ``key=value`` overrides address both (``teacher.evaluator.backend.name=llamacpp``, ``epochs=1``).
    A teacher evaluator without a ``name`` is the prompt evaluator.
    """
    data = apply_overrides(read_yaml_mapping(path), list(overrides))
    teacher = data.pop("teacher", None) or {}
    if not isinstance(teacher, dict):
        raise ConfigError(f"teacher must be a mapping of fields; got {teacher!r}")
    evaluator = teacher.get("evaluator") or {}
    if not isinstance(evaluator, dict):
        raise ConfigError(f"teacher.evaluator must be a mapping of fields; got {evaluator!r}")
    teacher = {**teacher, "evaluator": {"name": "prompt", **evaluator}}
    return DistillConfig(
        teacher=build_dataclass(TeacherConfig, teacher, "teacher."), train=build_dataclass(TrainConfig, data)
    )


# identity of a teacher: what changes its outputs (not threads, devices or timeouts)
_SPEED_ONLY = {"device"}
_BACKEND_SPEED_ONLY = {
    "device",
    "n_threads",
    "concurrency",
    "timeout_s",
    "max_retries",
    "api_key",
    "gpu_memory_utilization",
    "tensor_parallel_size",
}


def teacher_identity(cfg: EvaluatorConfig) -> dict[str, Any]:
    """The teacher settings a cached output depends on (the cache is refused when they change)."""
    d = dataclasses.asdict(cfg)
    for k in _SPEED_ONLY:
        d.pop(k, None)
    for k in _BACKEND_SPEED_ONLY:
        d["backend"].pop(k, None)
    if d["name"] != "learned":
        d.pop("checkpoint", None)
        d.pop("support_threshold", None)
    else:
        d.pop("backend", None)
        d.pop("generation", None)
        d.pop("constrained", None)
    return d


# ---- stage 1: the teacher, cached and resumable ---------------------------------------------------------
@dataclass
class TeacherQuery:
    """One query the teacher scores: its (capped) chunks, candidates and the source rows behind them."""

    key: str
    query: str
    chunks: list[str]
    candidates: list[str]
    rows: list[AnnotatedChunk]
    split: str

    @property
    def cache_key(self) -> str:
        """Hash of the teacher's input: a changed chunk or candidate list is a different query."""
        blob = json.dumps([self.query, self.chunks, self.candidates], ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:24]


def teacher_queries(rows: Sequence[AnnotatedChunk], train: TrainConfig) -> list[TeacherQuery]:
    """Group rows by query, keep the first ``max_chunks_per_query`` chunks (as the trainer does) and split
    by question (``validation_fraction``, ``split_seed``; rows' own ``split`` wins), with at least one query
    on each side when there are two or more."""
    train_rows, val_rows = split_by_question(rows, train.validation_fraction, train.split_seed)
    val_keys = {r.key for r in val_rows}
    groups: list[QueryGroup] = group_by_query(rows)
    if len(groups) >= 2 and not val_keys:
        val_keys = {groups[-1].key}
    elif len(groups) >= 2 and len(val_keys) == len(groups):
        val_keys.discard(groups[0].key)
    out = []
    for g in groups:
        kept = g.rows[: train.max_chunks_per_query]
        out.append(
            TeacherQuery(
                key=g.key,
                query=g.query,
                chunks=[r.chunk for r in kept],
                candidates=list(g.candidates),
                rows=kept,
                split="validation" if g.key in val_keys else "train",
            )
        )
    return out


class TeacherCache:
    """``teacher.jsonl``: one row per (query, chunk) of the teacher's output, appended one batch at a time.

    Each append is a single ``write`` + ``fsync`` of whole lines. :meth:`load` drops a torn last line (no
    trailing newline) and the rows of any query that is incomplete (fewer rows than its ``n_chunks``),
    rewriting the file atomically without them, so re-running those queries never duplicates a row. A line
    that is not JSON *before* the last one is damage this class did not cause: it raises
    :class:`DistillError`. ``meta`` (the teacher's identity) is written to ``teacher_meta.json`` next to
    the file; a cache written with another ``meta`` is refused.
    """

    def __init__(self, path: str | Path, meta: dict[str, Any]):
        self.path = Path(path)
        self.meta_path = self.path.with_name("teacher_meta.json")
        self.meta = {"format": CACHE_FORMAT, **meta}
        self.dropped_rows = 0
        self.torn_bytes = 0

    def _check_meta(self) -> None:
        if self.meta_path.is_file():
            try:
                old = json.loads(self.meta_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                old = None
            if old != self.meta:
                diff = []
                if isinstance(old, dict):
                    diff = sorted(k for k in set(old) | set(self.meta) if old.get(k) != self.meta.get(k))
                raise DistillError(
                    f"{self.path} holds the outputs of another teacher ({', '.join(diff) or 'unreadable meta'}"
                    f" differ, see {self.meta_path}); use another --output or delete both files"
                )
        elif self.path.exists() and self.path.stat().st_size:
            raise DistillError(
                f"{self.path} exists without {self.meta_path.name}: its teacher is unknown; use another "
                "--output or delete it"
            )

    def load(self) -> dict[str, list[dict[str, Any]]]:
        """The complete queries of the cache: ``cache_key -> rows`` (chunk order). Repairs a torn tail."""
        self._check_meta()
        if not self.path.exists():
            atomic_write_text(self.meta_path, json.dumps(self.meta, indent=2) + "\n")
            return {}
        raw = self.path.read_bytes()
        end = raw.rfind(b"\n") + 1
        self.torn_bytes = len(raw) - end
        by_key: dict[str, list[dict[str, Any]]] = {}
        order: list[str] = []
        for n, line in enumerate(raw[:end].decode("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key, idx, total = row["key"], row["chunk_index"], row["n_chunks"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise DistillError(
                    f"{self.path}:{n}: not a teacher-cache row (damaged before its last line); delete the "
                    "file to recompute, or choose another --output"
                ) from None
            if key not in by_key:
                by_key[key] = []
                order.append(key)
            by_key[key].append(row)
        done: dict[str, list[dict[str, Any]]] = {}
        for key in order:
            rows = by_key[key]
            total = rows[0]["n_chunks"]
            idx = sorted(r["chunk_index"] for r in rows)
            if idx == list(range(total)) and all(r["n_chunks"] == total for r in rows):
                done[key] = sorted(rows, key=lambda r: r["chunk_index"])
            else:
                self.dropped_rows += len(rows)
        if self.torn_bytes or self.dropped_rows:
            atomic_write_text(
                self.path,
                "".join(json.dumps(r, ensure_ascii=False) + "\n" for rows in done.values() for r in rows),
            )
        return done

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append whole lines in one write and fsync them."""
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())


def _chunks(q: TeacherQuery) -> list[Chunk]:
    return [Chunk(id=f"c{i + 1}", text=t, rank=i + 1) for i, t in enumerate(q.chunks)]


def _teacher_rows(q: TeacherQuery, result, seconds_per_chunk: float) -> list[dict[str, Any]]:
    frame = [c.text for c in result.claims]
    ev = result.evidence.to(torch.float64)
    rows = []
    for i, (text, dec) in enumerate(zip(q.chunks, result.decisions)):
        rows.append(
            {
                "key": q.cache_key,
                "query_key": q.key,
                "query": q.query,
                "chunk_index": i,
                "n_chunks": len(q.chunks),
                "chunk": text,
                "candidates": q.candidates,
                "frame": frame,
                "evidence": [round(float(x), 6) for x in ev[i]] if frame else [],
                "claim": dec.claim,
                "answer": dec.answer,
                "stance": dec.stance,
                "rationale": dec.rationale,
                "valid": dec.valid,
                "repaired": dec.repaired,
                "errors": list(dec.errors),
                "teacher_seconds": round(seconds_per_chunk, 6),
            }
        )
    return rows


def run_teacher(
    teacher: Any,
    queries: Sequence[TeacherQuery],
    cache: TeacherCache,
    batch_queries: int = 4,
    progress: bool = True,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Teacher outputs for every query: cached ones from ``cache``, the rest from ``teacher`` in batches
    of ``batch_queries`` queries (one ``evaluate_batch`` call each), appended to the cache per batch.

    ``teacher`` may be a zero-argument callable returning the evaluator, so that a fully cached run never
    loads the model. Returns ``cache_key -> rows`` and counters (``cached_queries``,
    ``computed_queries``, ``teacher_calls``, ``dropped_rows``, ``torn_bytes``).
    """
    done = cache.load()
    pending = [q for q in queries if q.cache_key not in done and q.chunks]
    # a query listed twice (same input) is asked once
    pending = list({q.cache_key: q for q in pending}.values())
    stats = {
        "cached_queries": sum(q.cache_key in done for q in queries),
        "computed_queries": 0,
        "teacher_calls": 0,
        "dropped_rows": cache.dropped_rows,
        "torn_bytes": cache.torn_bytes,
    }
    if pending:
        evaluator = teacher() if callable(teacher) and not hasattr(teacher, "evaluate_batch") else teacher
        with tqdm(total=len(pending), disable=not progress, desc="teacher", unit="query") as bar:
            for start in range(0, len(pending), batch_queries):
                batch = pending[start : start + batch_queries]
                t0 = time.perf_counter()
                results = evaluator.evaluate_batch(
                    [q.query for q in batch], [_chunks(q) for q in batch], [q.candidates for q in batch]
                )
                per_chunk = (time.perf_counter() - t0) / max(1, sum(len(q.chunks) for q in batch))
                rows = [r for q, res in zip(batch, results) for r in _teacher_rows(q, res, per_chunk)]
                cache.append(rows)
                for q in batch:
                    done[q.cache_key] = [r for r in rows if r["key"] == q.cache_key]
                stats["computed_queries"] += len(batch)
                stats["teacher_calls"] += 1
                bar.update(len(batch))
    return done, stats


# ---- stage 2: soft targets ------------------------------------------------------------------------------
def map_to_candidates(
    frame: Sequence[str], evidence: Sequence[float], candidates: Sequence[str], aligner: ClaimAligner
) -> tuple[list[float], bool]:
    """The teacher's evidence over its ``frame`` mapped onto ``candidates`` by claim alignment.

    A candidate gets the largest evidence of the frame claims that align with it (equivalent candidates
    get the same value). Returns the evidence per candidate and whether the teacher supported a frame
    claim that aligns with no candidate (off-frame support: it gives no evidence to any candidate).
    """
    if not candidates:
        return [], any(v > 0 for v in evidence)
    al = aligner.align([*candidates, *frame])
    cand_idx = al.index[: len(candidates)]
    frame_idx = al.index[len(candidates) :]
    out = [0.0] * len(candidates)
    off_frame = False
    for j, v in enumerate(evidence):
        if not v > 0:
            continue
        hit = False
        for c, ci in enumerate(cand_idx):
            if ci is not None and ci == frame_idx[j]:
                out[c] = max(out[c], float(v))
                hit = True
        off_frame |= not hit
    return out, off_frame


@dataclass
class ReportItem:
    """A distilled query for the report: its split, frame, chunks, teacher evidence and human labels."""

    split: str
    query: str
    chunks: list[str]
    frame: list[str]
    teacher: list[list[float]]
    labels: list[int | None]
    labelled: list[bool]
    candidates: list[str]


def distilled_rows(
    queries: Sequence[TeacherQuery],
    outputs: dict[str, list[dict[str, Any]]],
    aligner: ClaimAligner,
    use_labels: bool = False,
) -> tuple[list[AnnotatedChunk], list[ReportItem], dict[str, int]]:
    """Training rows with soft teacher targets (see the module docstring), one :class:`ReportItem` per
    distilled query, and counters (``rows``, ``off_frame_rows``, ``queries_without_frame``)."""
    rows: list[AnnotatedChunk] = []
    items: list[ReportItem] = []
    stats = Counter(rows=0, off_frame_rows=0, queries_without_frame=0)
    for q in queries:
        out = outputs.get(q.cache_key)
        if not out:
            continue
        frame = list(out[0]["frame"])
        if q.candidates:
            cands = list(q.candidates)
            targets = []
            for r in out:
                t, off = map_to_candidates(frame, r["evidence"], cands, aligner)
                targets.append(t)
                stats["off_frame_rows"] += off
        else:
            cands, targets = frame, [list(r["evidence"]) for r in out]
        if not cands:
            stats["queries_without_frame"] += 1
            continue
        for src, t in zip(q.rows, targets):
            keep = use_labels and src.labelled and bool(q.candidates)
            rows.append(
                AnnotatedChunk(
                    query=q.query,
                    chunk=src.chunk,
                    candidates=cands,
                    label=src.label if keep else None,
                    gold=src.gold if q.candidates else None,
                    source_dataset=src.source_dataset,
                    split=q.split,
                    doc_type=src.doc_type,
                    query_id=q.key,
                    teacher_evidence=[round(float(v), 6) for v in t],
                    labelled=keep,
                )
            )
            stats["rows"] += 1
        items.append(
            ReportItem(
                split=q.split,
                query=q.query,
                chunks=list(q.chunks),
                frame=cands,
                teacher=targets,
                labels=[r.label if q.candidates else None for r in q.rows],
                labelled=[r.labelled and bool(q.candidates) for r in q.rows],
                candidates=list(q.candidates),
            )
        )
    return rows, items, dict(stats)


# ---- stage 4: the report --------------------------------------------------------------------------------
def _decision(row: Sequence[float], threshold: float) -> int | None:
    if not row:
        return None
    top = max(range(len(row)), key=row.__getitem__)
    return top if row[top] >= threshold and row[top] > 0 else None


def agreement(
    teacher: Sequence[Sequence[Sequence[float]]],
    student: Sequence[Sequence[Sequence[float]]],
    threshold: float = 1.0,
    labels: Sequence[Sequence[int | None]] | None = None,
    labelled: Sequence[Sequence[bool]] | None = None,
) -> dict[str, Any]:
    """Teacher–student agreement over queries of ``[k, M]`` evidence on the same frames.

    A chunk's *decision* is its top claim when that evidence reaches ``threshold``, else "supports
    nothing". ``decision_agreement``: same decision; ``support_agreement``: same "supports nothing" or not;
    ``top_claim_agreement``: same top claim among chunks both say support something;
    ``argmax_agreement``: the student's largest evidence is on the teacher's top claim, whatever its size,
    among chunks where the teacher gives evidence and the frame has two or more claims; ``spearman``: rank
    correlation of all (chunk, claim) evidence pairs; with human ``labels``, each model's claim accuracy.
    """
    same = same_support = both = both_same = 0
    n_argmax = argmax_same = 0
    n = 0
    tx: list[float] = []
    sx: list[float] = []
    t_ok = s_ok = n_lab = 0
    t_support = s_support = 0
    for qi, (tq, sq) in enumerate(zip(teacher, student)):
        for i, (tr, sr) in enumerate(zip(tq, sq)):
            td, sd = _decision(list(tr), threshold), _decision(list(sr), threshold)
            n += 1
            same += td == sd
            same_support += (td is None) == (sd is None)
            t_support += td is not None
            s_support += sd is not None
            if td is not None and sd is not None:
                both += 1
                both_same += td == sd
            if len(tr) >= 2 and max(tr) > 0:
                n_argmax += 1
                argmax_same += _decision(list(tr), 0.0) == max(range(len(sr)), key=list(sr).__getitem__)
            tx.extend(float(v) for v in tr)
            sx.extend(float(v) for v in sr)
            if labels is not None and (labelled is None or labelled[qi][i]):
                lab = labels[qi][i]
                t_ok += td == lab
                s_ok += sd == lab
                n_lab += 1
    out: dict[str, Any] = {
        "chunks": n,
        "decision_agreement": same / n if n else None,
        "support_agreement": same_support / n if n else None,
        "top_claim_agreement": both_same / both if both else None,
        "both_support_chunks": both,
        "argmax_agreement": argmax_same / n_argmax if n_argmax else None,
        "argmax_chunks": n_argmax,
        "spearman": spearman(tx, sx),
        "evidence_pairs": len(tx),
        "teacher_support_rate": t_support / n if n else None,
        "student_support_rate": s_support / n if n else None,
        "mean_teacher_evidence": sum(tx) / len(tx) if tx else None,
        "mean_student_evidence": sum(sx) / len(sx) if sx else None,
        "support_threshold": threshold,
    }
    if n_lab:
        out.update(
            labelled_chunks=n_lab,
            teacher_claim_accuracy=t_ok / n_lab,
            student_claim_accuracy=s_ok / n_lab,
        )
    return out


def time_side_by_side(
    teacher: Any, student: Any, items: Sequence[Any], batch_queries: int = 4
) -> dict[str, Any]:
    """Seconds per chunk of ``teacher`` and ``student`` on the same inputs, in this process.

    ``items`` carry ``query``, ``chunks`` (texts) and ``candidates``. Each model first evaluates one chunk
    as a warm-up (not timed); then every batch of ``batch_queries`` queries goes to the teacher and right
    after to the student, so both see the same machine load.
    """
    items = [it for it in items if it.chunks]
    if not items:
        return {"queries": 0, "chunks": 0}
    first = items[0]
    warm = [Chunk(id="c1", text=first.chunks[0], rank=1)]
    teacher.evaluate_batch([first.query], [warm], [first.candidates])
    student.evaluate_batch([first.query], [warm], [first.candidates])
    t_teacher = t_student = 0.0
    n_chunks = 0
    for start in range(0, len(items), batch_queries):
        batch = items[start : start + batch_queries]
        qs = [it.query for it in batch]
        cs = [[Chunk(id=f"c{i + 1}", text=t, rank=i + 1) for i, t in enumerate(it.chunks)] for it in batch]
        cands = [it.candidates for it in batch]
        t0 = time.perf_counter()
        teacher.evaluate_batch(qs, cs, cands)
        t1 = time.perf_counter()
        student.evaluate_batch(qs, cs, cands)
        t2 = time.perf_counter()
        t_teacher += t1 - t0
        t_student += t2 - t1
        n_chunks += sum(len(c) for c in cs)
    tpc, spc = t_teacher / n_chunks, t_student / n_chunks
    return {
        "queries": len(items),
        "chunks": n_chunks,
        "batch_queries": batch_queries,
        "teacher_seconds": round(t_teacher, 4),
        "student_seconds": round(t_student, 4),
        "teacher_seconds_per_chunk": tpc,
        "student_seconds_per_chunk": spc,
        "speedup": tpc / spc if spc > 0 else None,
    }


# ---- the whole run --------------------------------------------------------------------------------------
def _student_evidence(model, items: Sequence[ReportItem], batch_queries: int) -> list[list[list[float]]]:
    out: list[list[list[float]]] = []
    with torch.no_grad():
        for start in range(0, len(items), batch_queries):
            batch = items[start : start + batch_queries]
            mats = model.evidence_matrices(
                [it.query for it in batch], [it.chunks for it in batch], [it.frame for it in batch]
            )
            out.extend(m.detach().to("cpu", torch.float64).tolist() for m in mats)
    return out


def run_distillation(
    config: DistillConfig,
    output: str | Path,
    *,
    resume: bool = False,
    command: str | None = None,
    progress: bool = True,
    teacher: Any = None,
) -> dict[str, Any]:
    """Run the four stages (module docstring) into ``output``; returns the report (also written to
    ``output/distill_report.json``).

    Args:
        config: The distillation config.
        output: Output folder ``DIR``.
        resume: Continue an interrupted training from ``DIR/last`` (the teacher cache is always reused);
            when the student already finished, only the report is written again.
        command: The command line to record.
        progress: Show progress bars.
        teacher: An evaluator to use as the teacher instead of building ``config.teacher.evaluator``
            (tests, notebooks).
    """

    out = Path(output)
    tcfg, train_cfg = config.teacher, config.train
    command = command or " ".join(sys.argv)
    t_start = time.perf_counter()
    # under `accelerate launch` the main process asks the teacher and writes the rows, every process
    # trains the student (data parallel), and the main process writes the report
    dp = DataParallel(cpu=training_device(train_cfg).type == "cpu")
    rows_path = out / "distill_rows.jsonl"
    if not dp.is_main:
        dp.wait()  # the main process's teacher and rows
        _train_student(train_cfg, rows_path, out, command, progress, resume)
        return {}
    out.mkdir(parents=True, exist_ok=True)

    # 1. teacher
    source = load_training_rows(train_cfg)
    queries = teacher_queries(source, train_cfg)
    meta = {"teacher": teacher_identity(tcfg.evaluator)}
    if tcfg.evaluator.name == "prompt":
        meta["contract_version"] = CONTRACT_VERSION
    cache = TeacherCache(out / "teacher.jsonl", meta)
    loaded: dict[str, Any] = {}

    def get_teacher():
        if "teacher" not in loaded:
            loaded["teacher"] = teacher if teacher is not None else build_evaluator(tcfg.evaluator)
        return loaded["teacher"]

    t0 = time.perf_counter()
    outputs, tstats = run_teacher(get_teacher, queries, cache, tcfg.batch_queries, progress)
    tstats["seconds"] = round(time.perf_counter() - t0, 2)

    # 2. soft targets
    aligner = make_aligner(tcfg.evaluator)
    rows, items, rstats = distilled_rows(queries, outputs, aligner, tcfg.use_labels)
    if not rows:
        raise DistillError("the teacher found no claim in any query: nothing to distil")
    write_annotated(rows_path, rows)
    dp.wait()

    # 3. student
    device, training = _train_student(train_cfg, rows_path, out, command, progress, resume)

    # 4. report: agreement on validation (and on the training split: how well the student fits the
    # teacher at all), speed side by side
    agree, agree_train = _student_agreement(out / "best", device, items, train_cfg)
    speed: dict[str, Any] = {"queries": 0, "chunks": 0}
    if tcfg.timing_queries:
        speed = _speed(get_teacher(), out / "best", device, queries, tcfg, train_cfg)
    report = {
        "teacher": _teacher_summary(tcfg, meta, outputs, tstats),
        "data": {
            "train_queries": sum(q.split == "train" for q in queries),
            "validation_queries": sum(q.split == "validation" for q in queries),
            "use_labels": tcfg.use_labels,
            **rstats,
        },
        "agreement": agree,
        "agreement_train": agree_train,
        "speed": speed,
        "training": training,
        "command": command,
        "seed": train_cfg.seed,
        "config": config.to_dict(),
        "versions": package_versions("evidential-rag", "python", "torch", "transformers", "peft"),
        "seconds": round(time.perf_counter() - t_start, 1),
    }
    write_json(out / "distill_report.json", report)
    return report


def _train_student(
    train_cfg: TrainConfig, rows_path: Path, out: Path, command: str, progress: bool, resume: bool
) -> tuple[Any, dict[str, Any]]:
    """Train the student on the distilled rows into ``out`` (or reuse a finished run when resuming);
    returns ``(its device, the training metrics)``."""

    student_cfg = copy.deepcopy(train_cfg)
    student_cfg.data = [DataSourceConfig(name="annotated", path=str(rows_path.resolve()))]
    trainer = EvidentialTrainer(student_cfg, out, command=command, progress=progress)
    finished = (out / "best" / "learned_config.json").is_file() and not (
        out / "last" / "trainer_state.json"
    ).is_file()
    if resume and finished and (out / "metrics.json").is_file():
        training = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    else:
        training = trainer.train(resume=resume and (out / "last" / "trainer_state.json").is_file())
    return trainer.device, training


def _student_agreement(
    checkpoint: Path, device: Any, items: Sequence[ReportItem], train_cfg: TrainConfig
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Teacher–student :func:`agreement` on the validation and the training split (the student loaded from
    ``checkpoint`` and released afterwards)."""

    model = load_learned_model(checkpoint, device=device)

    def agree_on(split: str) -> dict[str, Any]:
        part = [it for it in items if it.split == split]
        has_labels = any(any(it.labelled) for it in part)
        res = agreement(
            [it.teacher for it in part],
            _student_evidence(model, part, train_cfg.batch_queries),
            train_cfg.support_threshold,
            labels=[it.labels for it in part] if has_labels else None,
            labelled=[it.labelled for it in part] if has_labels else None,
        )
        res["queries"] = len(part)
        return res

    return agree_on("validation"), agree_on("train")


def _speed(
    teacher: Any,
    checkpoint: Path,
    device: Any,
    queries: Sequence[TeacherQuery],
    tcfg: TeacherConfig,
    train_cfg: TrainConfig,
) -> dict[str, Any]:
    """Teacher and student timed side by side on the first ``tcfg.timing_queries`` queries with chunks
    (validation first)."""

    timing = [q for q in queries if q.split == "validation" and q.chunks]
    timing += [q for q in queries if q.split == "train" and q.chunks]
    student = build_evaluator(
        EvaluatorConfig(
            name="learned",
            checkpoint=str(checkpoint.resolve()),
            support_threshold=train_cfg.support_threshold,
            device=str(device),
            similarity=tcfg.evaluator.similarity,
            similarity_threshold=tcfg.evaluator.similarity_threshold,
            number_tolerance=tcfg.evaluator.number_tolerance,
            max_chunk_chars=tcfg.evaluator.max_chunk_chars,
        )
    )
    speed = time_side_by_side(teacher, student, timing[: tcfg.timing_queries], tcfg.batch_queries)
    speed["student_device"] = str(device)
    speed["note"] = (
        "teacher and student on the same queries and chunks (candidates as in the data), alternating "
        "batch by batch in one process, after one untimed warm-up chunk each"
    )
    return speed


def _teacher_summary(
    tcfg: TeacherConfig, meta: dict[str, Any], outputs: dict[str, list[dict]], tstats: dict[str, Any]
) -> dict[str, Any]:
    """The report's ``teacher`` section: identity, counts of outputs and stances, time per chunk."""
    all_rows = [r for rs in outputs.values() for r in rs]
    counts = Counter("valid" if r["valid"] else "repaired" if r["repaired"] else "failed" for r in all_rows)
    return {
        "evaluator": tcfg.evaluator.name,
        "identity": meta,
        "queries": len(outputs),
        "chunks": len(all_rows),
        **tstats,
        "outputs": dict(counts),
        "stances": dict(Counter(r["stance"] for r in all_rows)),
        "annotation_seconds_per_chunk": (
            sum(r["teacher_seconds"] for r in all_rows) / len(all_rows) if all_rows else None
        ),
    }
