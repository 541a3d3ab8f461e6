"""``--data`` values of ``evidential-rag distill`` as training data sources (a builder name and path, or a file
whose format is recognised from its first record)."""

from __future__ import annotations

import json
from pathlib import Path

from evidential.errors import EvidentialError
from training.data.benchmarks import BUILDERS

__all__ = ["DATA_FORMS", "data_source"]

DATA_FORMS = "an annotated-chunk JSONL, RAMDocs JSONL, unannotated chunks ({query, chunk} / {query, chunks})"


def data_source(spec: str, limit: int | None = None) -> dict:
    """A ``--data`` value as a data source: ``NAME:PATH`` (a builder, ``annotated`` or ``chunks``) or a
    path whose format is recognised from its first record."""
    name, sep, rest = spec.partition(":")
    if sep and (name == "annotated" or name in BUILDERS) and not Path(spec).exists():
        return {"name": name, "path": rest, "limit": limit}
    path = Path(spec)
    if not path.is_file():
        raise EvidentialError(f"--data {spec}: no such file; give {DATA_FORMS}, or NAME:PATH")
    first = None
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                try:
                    first = json.loads(line)
                except json.JSONDecodeError:
                    raise EvidentialError(f"--data {spec}: the first record is not JSON") from None
                break
    if not isinstance(first, dict):
        raise EvidentialError(f"--data {spec}: expected JSON objects per line ({DATA_FORMS})")
    if "candidates" in first and ("label" in first or "teacher_evidence" in first):
        name = "annotated"
    elif {"question", "documents", "gold_answers"} <= set(first):
        name = "ramdocs"
    elif "query" in first and ("chunk" in first or "chunks" in first):
        name = "chunks"
    else:
        raise EvidentialError(
            f"--data {spec}: unrecognised records (fields {', '.join(sorted(first)[:8])}); give {DATA_FORMS}, "
            f"or NAME:PATH with NAME one of annotated, {', '.join(BUILDERS.names())}"
        )
    return {"name": name, "path": str(path), "limit": limit}
