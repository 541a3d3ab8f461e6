"""Batch answering: reading a questions JSONL into questions, chunks and candidates, and answering them
with a pipeline in batches (``evidential-rag batch``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from inference.io import iter_jsonl
from inference.types import Chunk, DataError

__all__ = ["BatchQuestion", "answer_questions", "read_questions"]


@dataclass(frozen=True)
class BatchQuestion:
    """One row of a questions file: its ``id``, the ``question``, its ``chunks`` (None: retrieve them) and
    its ``candidates``."""

    id: str
    question: str
    chunks: list[Chunk] | None
    candidates: list[str]


def _row_chunks(raw: Any, field: str, where: str) -> list[Chunk]:
    if not isinstance(raw, list):
        raise DataError(f"{where}: field {field!r} must be a list of chunks")
    chunks = []
    for i, c in enumerate(raw, 1):
        text = c if isinstance(c, str) else c.get("text") if isinstance(c, dict) else None
        if not isinstance(text, str):
            raise DataError(f"{where}: {field}[{i - 1}] must be a string or an object with 'text'")
        cid = str(c.get("id", f"d{i}")) if isinstance(c, dict) else f"d{i}"
        src = c.get("source") if isinstance(c, dict) and isinstance(c.get("source"), str) else None
        chunks.append(Chunk(cid, text, src, rank=i))
    return chunks


def read_questions(
    path: Path,
    chunks_field: str | None = None,
    candidates_field: str | None = None,
    limit: int | None = None,
) -> list[BatchQuestion]:
    """The questions of a JSONL file: ``question`` (or ``query``) per row, ``id`` kept (default: the line
    number); the chunks from ``chunks_field`` (strings, or objects with ``text`` and optional ``id``,
    ``source``; ranks in list order) and candidate claims from ``candidates_field`` when given.

    Raises:
        DataError: A row that is not an object, lacks a question, or has a malformed field (file and line
            named).
    """
    rows: list[BatchQuestion] = []
    for n, row in iter_jsonl(path, "questions", DataError):
        where = f"{path}:{n}"
        if not isinstance(row, dict):
            raise DataError(f"{where}: expected a JSON object with a 'question'")
        q = row.get("question", row.get("query"))
        if not isinstance(q, str) or not q.strip():
            raise DataError(f"{where}: field 'question' must be a non-empty string")
        chunks = _row_chunks(row.get(chunks_field), chunks_field, where) if chunks_field is not None else None
        cands = row.get(candidates_field, []) if candidates_field else []
        if not isinstance(cands, list) or not all(isinstance(x, str) for x in cands):
            raise DataError(f"{where}: field {candidates_field!r} must be a list of strings")
        rows.append(BatchQuestion(str(row.get("id", n)), q, chunks, cands))
        if limit is not None and len(rows) >= limit:
            break
    return rows


def answer_questions(rag: Any, questions: list[BatchQuestion], batch_size: int = 8) -> list[dict[str, Any]]:
    """Answer ``questions`` with ``rag.ask_batch``, ``batch_size`` at a time (with a progress bar); one answer
    record per question, ``{"id": ..., **record}``, in input order."""
    records = []
    with tqdm(total=len(questions), desc="batch", unit="q") as bar:
        for s in range(0, len(questions), batch_size):
            part = questions[s : s + batch_size]
            got = rag.ask_batch(
                [q.question for q in part], [q.chunks for q in part], [q.candidates for q in part]
            )
            for q, rec in zip(part, got):
                records.append({"id": q.id, **rec})
            bar.update(len(part))
    return records
