"""Builders of annotated-chunk training data from the real benchmarks in ``../shared/data`` (DESIGN.md §4).

Each builder reads one benchmark file (any path of the same format) and returns
:class:`~training.data.annotated.AnnotatedChunk` rows; they are chosen by name through :data:`BUILDERS`:

* ``ramdocs`` — correct documents support their labelled answer; noise supports nothing; misinformation
  documents state a planted wrong answer. Two labelings: ``stance`` (misinformation supports the answer it
  states, so fusion sees the conflict) and ``credibility`` (misinformation gets no credible support, so the
  head must learn to discount it from cues in the text). The frame is the gold + wrong answers; ``gold``
  marks the gold answers (several when entities share a name).
* ``wikicontradict`` — the two passages of a QA row support ``answer1`` / ``answer2``; no gold reference
  (the right behaviour is to explain the conflict), so the query-level target is Θ.
* ``conflictqa`` — StrategyQA yes/no questions: the parametric-memory passages support the memory answer,
  the counter-memory passages the counter answer; ``gold`` from ``ground_truth``. A passage's yes/no side
  is read from its answer sentence (the negated one is "no"); rows where both or neither sentence is
  negated are skipped and counted.
* ``musique`` — supporting paragraphs support the answer; other paragraphs support nothing.
* ``chunks`` — *unannotated* chunks (``{query, chunk}`` or ``{query, chunks: [...]}`` per line): rows with
  no label and, unless the line lists ``candidates``, no frame. They are the input of distillation
  (``evidential-rag distill``), where a teacher evaluator supplies the frame and the evidence targets.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evidential.registry import Registry
from training.data.annotated import AnnotatedChunk, TrainingDataError
from training.utils.io import iter_jsonl
from training.utils.text import normalize_text

__all__ = [
    "BUILDERS",
    "DOC_TYPES",
    "LABELINGS",
    "build_chunks",
    "build_conflictqa",
    "build_dataset",
    "build_musique",
    "build_ramdocs",
    "build_wikicontradict",
    "read_ramdocs",
]

DOC_TYPES = ("correct", "misinfo", "noise")
# the fields every ConflictQA-StrategyQA row must carry (training and evaluation loaders)
CONFLICTQA_REQUIRED: dict[str, type] = {
    "question": str,
    "ground_truth": list,
    "memory_answer": str,
    "counter_answer": str,
    "parametric_memory": str,
    "counter_memory": str,
}
LABELINGS = ("stance", "credibility")

# name -> builder(path, *, limit, **options) -> list[AnnotatedChunk]
BUILDERS: Registry[Callable[..., list[AnnotatedChunk]]] = Registry("dataset builder")


def _fail(path: Path, line: int, msg: str):
    raise TrainingDataError(f"{path}:{line}: {msg}")


def _records(path: str | Path, what: str, required: dict[str, type], limit: int | None):
    p = Path(path)
    n_out = 0
    for line, rec in iter_jsonl(p, what, TrainingDataError):
        if not isinstance(rec, dict):
            _fail(p, line, f"expected a JSON object, got {type(rec).__name__}")
        for key, kind in required.items():
            if key not in rec:
                _fail(p, line, f"missing field {key!r} ({what} records have {', '.join(required)})")
            if not isinstance(rec[key], kind):
                _fail(p, line, f"field {key!r} must be a {kind.__name__}, got {type(rec[key]).__name__}")
        yield p, line, rec
        n_out += 1
        if limit is not None and n_out >= limit:
            return


def _check_ramdocs(rec: dict, path: Path, line: int) -> dict:
    for i, doc in enumerate(rec["documents"]):
        if not isinstance(doc, dict):
            _fail(path, line, f"documents[{i}] must be an object with text, type and answer")
        for key in ("text", "type", "answer"):
            if not isinstance(doc.get(key), str):
                _fail(path, line, f"documents[{i}].{key} must be a string")
        if doc["type"] not in DOC_TYPES:
            _fail(
                path, line, f"documents[{i}].type is {doc['type']!r}; expected one of {', '.join(DOC_TYPES)}"
            )
    return rec


def read_ramdocs(path: str | Path, limit: int | None = None) -> list[dict]:
    """Read and validate RAMDocs JSONL; errors name the file, line and field. Each record gets ``_line``."""
    required = {"question": str, "documents": list, "gold_answers": list, "wrong_answers": list}
    out = []
    for p, line, rec in _records(path, "RAMDocs", required, limit):
        out.append({**_check_ramdocs(rec, p, line), "_line": line})
    if not out:
        raise TrainingDataError(f"{path}: the file holds no records")
    return out


def _frame(answers: list[str]) -> tuple[list[str], dict[str, int]]:
    """Distinct claims (first surface form kept) and their normalized-text index."""
    claims: list[str] = []
    index: dict[str, int] = {}
    for a in answers:
        key = normalize_text(a)
        if key and key not in index:
            index[key] = len(claims)
            claims.append(a.strip())
    return claims, index


def _qid(dataset: str, text: str) -> str:
    return f"{dataset}:{hashlib.sha1(text.encode()).hexdigest()[:12]}"


@BUILDERS.register("ramdocs")
def build_ramdocs(
    path: str | Path, *, limit: int | None = None, labeling: str = "stance"
) -> list[AnnotatedChunk]:
    """RAMDocs records → annotated chunks under the ``stance`` or ``credibility`` labeling (see module doc)."""
    if labeling not in LABELINGS:
        raise TrainingDataError(f"labeling must be one of {', '.join(LABELINGS)}; got {labeling!r}")
    rows: list[AnnotatedChunk] = []
    for rec in read_ramdocs(path, limit):
        docs = rec["documents"]
        answers = [*rec["gold_answers"], *rec["wrong_answers"]]
        answers += [d["answer"] for d in docs if d["type"] != "noise"]
        claims, index = _frame([a for a in answers if isinstance(a, str)])
        gold = sorted({index[k] for a in rec["gold_answers"] if (k := normalize_text(a)) in index})
        qid = _qid("ramdocs", f"{rec['_line']}\x00{rec['question']}")
        for d in docs:
            label = None
            if d["type"] == "correct" or (d["type"] == "misinfo" and labeling == "stance"):
                label = index.get(normalize_text(d["answer"]))
            rows.append(
                AnnotatedChunk(
                    query=rec["question"],
                    chunk=d["text"],
                    candidates=claims,
                    label=label,
                    gold=gold or None,
                    source_dataset="ramdocs",
                    doc_type=d["type"],
                    query_id=qid,
                )
            )
    return rows


@BUILDERS.register("wikicontradict")
def build_wikicontradict(path: str | Path, *, limit: int | None = None) -> list[AnnotatedChunk]:
    """WikiContradict QA rows → two passages supporting two answers; no gold (target Θ: a real conflict)."""
    required = {"question": str, "context1": str, "context2": str, "answer1": str, "answer2": str}
    rows: list[AnnotatedChunk] = []
    for _p, line, rec in _records(path, "WikiContradict QA", required, limit):
        claims, index = _frame([rec["answer1"], rec["answer2"]])
        if len(claims) < 2:
            continue  # the two answers normalize to the same claim: no conflict to learn from
        qid = _qid("wikicontradict", f"{line}\x00{rec['question']}")
        for ctx, ans in (("context1", "answer1"), ("context2", "answer2")):
            rows.append(
                AnnotatedChunk(
                    query=rec["question"],
                    chunk=rec[ctx],
                    candidates=claims,
                    label=index[normalize_text(rec[ans])],
                    gold=None,
                    source_dataset="wikicontradict",
                    doc_type="conflict",
                    query_id=qid,
                )
            )
    return rows


_NEGATION = re.compile(r"\b(?:not|no|never|cannot|none|neither|nor)\b|n't\b", re.IGNORECASE)
_TRUTH = {"true": "yes", "false": "no", "yes": "yes", "no": "no"}


@BUILDERS.register("conflictqa")
def build_conflictqa(
    path: str | Path, *, limit: int | None = None, aligned_evidence: bool = True
) -> list[AnnotatedChunk]:
    """ConflictQA-StrategyQA rows → yes/no frames; memory vs counter-memory passages (see module doc).

    A question repeated in the file is used once. Rows whose yes/no sides cannot be read are skipped.
    """
    required = CONFLICTQA_REQUIRED
    rows: list[AnnotatedChunk] = []
    seen: set[str] = set()
    candidates = ["yes", "no"]
    for p, line, rec in _records(path, "ConflictQA", required, None):
        if rec["question"] in seen:
            continue
        mem_neg = bool(_NEGATION.search(rec["memory_answer"]))
        if mem_neg == bool(_NEGATION.search(rec["counter_answer"])):
            continue
        truth = {_TRUTH.get(str(t).strip().lower()) for t in rec["ground_truth"]} - {None}
        if len(truth) != 1:
            _fail(p, line, f"field 'ground_truth' must hold one of True/False; got {rec['ground_truth']!r}")
        seen.add(rec["question"])
        mem, ctr = (1, 0) if mem_neg else (0, 1)
        passages = [("parametric_memory", mem, "memory"), ("counter_memory", ctr, "counter")]
        if aligned_evidence:
            passages += [
                ("parametric_memory_aligned_evidence", mem, "memory"),
                ("counter_memory_aligned_evidence", ctr, "counter"),
            ]
        qid = _qid("conflictqa", rec["question"])
        for field_name, label, kind in passages:
            text = rec.get(field_name)
            if not isinstance(text, str) or not text.strip():
                continue
            rows.append(
                AnnotatedChunk(
                    query=rec["question"],
                    chunk=text,
                    candidates=candidates,
                    label=label,
                    gold=[candidates.index(next(iter(truth)))],
                    source_dataset="conflictqa",
                    doc_type=kind,
                    query_id=qid,
                )
            )
        if limit is not None and len(seen) >= limit:
            break
    return rows


@BUILDERS.register("musique")
def build_musique(
    path: str | Path, *, limit: int | None = None, max_negatives: int | None = 4
) -> list[AnnotatedChunk]:
    """MuSiQue-Ans records → supporting paragraphs support the answer, the first ``max_negatives`` others
    support nothing (``None`` keeps all 20 paragraphs)."""
    required = {"question": str, "paragraphs": list, "answer": str}
    rows: list[AnnotatedChunk] = []
    for p, line, rec in _records(path, "MuSiQue", required, limit):
        qid = _qid("musique", str(rec.get("id") or f"{line}\x00{rec['question']}"))
        negatives = 0
        for i, para in enumerate(rec["paragraphs"]):
            if not isinstance(para, dict) or not isinstance(para.get("paragraph_text"), str):
                _fail(p, line, f"paragraphs[{i}] must be an object with paragraph_text and is_supporting")
            supporting = bool(para.get("is_supporting"))
            if not supporting:
                if max_negatives is not None and negatives >= max_negatives:
                    continue
                negatives += 1
            title = para.get("title")
            text = (
                f"{title}: {para['paragraph_text']}"
                if isinstance(title, str) and title
                else para["paragraph_text"]
            )
            rows.append(
                AnnotatedChunk(
                    query=rec["question"],
                    chunk=text,
                    candidates=[rec["answer"]],
                    label=0 if supporting else None,
                    gold=[0],
                    source_dataset="musique",
                    doc_type="supporting" if supporting else "distractor",
                    query_id=qid,
                )
            )
    return rows


@BUILDERS.register("chunks")
def build_chunks(path: str | Path, *, limit: int | None = None) -> list[AnnotatedChunk]:
    """Unannotated chunks → rows without a label (``labelled=False``), for a teacher to annotate.

    Each line is ``{"query": str, "chunk": str}`` or ``{"query": str, "chunks": [str | {"text": str}, ...]}``,
    optionally with ``candidates`` (claim strings that open the query's frame), ``query_id`` and ``split``.
    Lines of the same query (same ``query_id``, else the same text) are one query; ``limit`` counts queries.
    """
    p = Path(path)
    rows: list[AnnotatedChunk] = []
    queries: dict[str, list[str]] = {}
    for line, rec in iter_jsonl(p, "unannotated-chunk", TrainingDataError):
        if not isinstance(rec, dict):
            _fail(p, line, f"expected a JSON object with query and chunk(s), got {type(rec).__name__}")
        if not isinstance(rec.get("query"), str) or not rec["query"].strip():
            _fail(p, line, "field 'query' must be a non-empty string")
        if ("chunk" in rec) == ("chunks" in rec):
            _fail(p, line, "give exactly one of 'chunk' (a string) and 'chunks' (a list)")
        items = [rec["chunk"]] if "chunk" in rec else rec["chunks"]
        if not isinstance(items, list):
            _fail(p, line, "field 'chunks' must be a list of strings or {text: ...} objects")
        texts = []
        for i, item in enumerate(items):
            text = item.get("text") if isinstance(item, dict) else item
            if not isinstance(text, str) or not text.strip():
                where = "chunk" if "chunk" in rec else f"chunks[{i}]"
                _fail(p, line, f"field {where!r} must be a non-empty string (or an object with 'text')")
            texts.append(text)
        cands = rec.get("candidates", [])
        if not isinstance(cands, list) or not all(isinstance(c, str) and c.strip() for c in cands):
            _fail(p, line, "field 'candidates' must be a list of non-empty strings")
        if len(set(cands)) != len(cands):
            _fail(p, line, "field 'candidates' has a repeated claim; list each claim once")
        qid = rec.get("query_id")
        if qid is not None and not isinstance(qid, str):
            _fail(p, line, "field 'query_id' must be a string")
        split = rec.get("split")
        if split is not None and split not in ("train", "validation"):
            _fail(p, line, f"field 'split' must be train or validation; got {split!r}")
        key = qid or rec["query"]
        if key not in queries:
            if limit is not None and len(queries) >= limit:
                continue
            queries[key] = list(cands)
        elif queries[key] != list(cands):
            _fail(p, line, "field 'candidates' differs from an earlier line of the same query")
        for text in texts:
            rows.append(
                AnnotatedChunk(
                    query=rec["query"],
                    chunk=text,
                    candidates=list(cands),
                    label=None,
                    split=split,
                    query_id=qid,
                    labelled=False,
                )
            )
    if not rows:
        raise TrainingDataError(f"{p}: the file holds no chunks")
    return rows


def build_dataset(name: str, path: str | Path, **options: Any) -> list[AnnotatedChunk]:
    """Run the builder registered as ``name`` on ``path``."""
    return BUILDERS.get(name)(path, **options)
