"""Unannotated chunks: the input of distillation (``evidential-rag distill``).

Each line is ``{"query": str, "chunk": str}`` or ``{"query": str, "chunks": [str | {"text": str}, ...]}``,
optionally with ``candidates`` (claim strings that open the query's frame), ``query_id`` and ``split``. The
rows have no label and, unless the line lists ``candidates``, no frame: a teacher evaluator supplies the
frame and the evidence targets.
"""

from __future__ import annotations

from pathlib import Path

from training.data.annotated import AnnotatedChunk, TrainingDataError
from training.data.benchmarks.common import fail
from training.utils.io import iter_jsonl

__all__ = ["build_chunks"]


def _fail(path: Path, line: int, msg: str):
    fail(f"{path}:{line}", msg)


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
