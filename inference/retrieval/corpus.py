"""Corpus readers: JSONL, Parquet and Hugging Face datasets, streamed row by row into :class:`Document` s.

A corpus row is either one document or a record holding a list of documents:

* **document**: the text in ``retrieval.text_field`` or the first of ``text``, ``contents``, ``content``,
  ``page_result``, ``html``, ``body``; an optional ``title`` is put before the text; the id in ``id``,
  ``doc_id``, ``docid`` or ``_id`` (default: the row number); the source in ``source``, ``url``,
  ``page_url``, ``title`` or ``page_name`` (default: the id).
* **record with documents**: a list in ``documents`` (RAMDocs) or ``search_results`` (CRAG, whose
  ``page_result`` is a full HTML page); document ``j`` of the record with key ``K`` (its ``id``,
  ``interaction_id`` or ``_id``, else the row number) gets the id ``K/j``.

HTML (``retrieval.html``: ``auto`` = ``page_result``/``html`` fields and text that starts like an HTML page) is
converted by :func:`~.text.html_to_text`. Errors name the file, the line (JSONL) or row, and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.io import iter_jsonl
from inference.retrieval.config import RetrievalConfig
from inference.retrieval.text import html_to_text, looks_like_html
from inference.types import DataError

__all__ = [
    "CorpusSource",
    "Document",
    "TEXT_FIELDS",
    "documents_from_row",
    "iter_documents",
    "open_corpus",
]

TEXT_FIELDS = ("text", "contents", "content", "page_result", "html", "body")
HTML_FIELDS = ("page_result", "html")
ID_FIELDS = ("id", "doc_id", "docid", "_id")
RECORD_ID_FIELDS = ("id", "interaction_id", "_id")
SOURCE_FIELDS = ("source", "url", "page_url", "title", "page_name")
NESTED_FIELDS = ("documents", "search_results")


@dataclass(frozen=True)
class Document:
    """One corpus document after HTML conversion: ``doc_id``, ``text`` and ``source`` (url / title / id)."""

    doc_id: str
    text: str
    source: str


def _key(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    return None


def _first(row: dict, names: tuple[str, ...]) -> str | None:
    for name in names:
        if name in row and (key := _key(row[name])) is not None:
            return key
    return None


def _document(row: Any, doc_id: str, where: str, cfg: RetrievalConfig) -> Document:
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object (a document), got {type(row).__name__}")
    names = (cfg.text_field,) if cfg.text_field else TEXT_FIELDS
    field = next((n for n in names if n in row), None)
    if field is None:
        want = f"'{cfg.text_field}' (retrieval.text_field)" if cfg.text_field else ", ".join(map(repr, names))
        raise DataError(
            f"{where}: no text field; a document needs {want} (or a row holds a 'documents' / "
            "'search_results' list); set retrieval.text_field to name another field"
        )
    value = row[field]
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise DataError(f"{where}: field {field!r} must be a string; got {type(value).__name__}")
    if cfg.html == "always" or (cfg.html == "auto" and (field in HTML_FIELDS or looks_like_html(value))):
        value = html_to_text(value) if value.strip() else ""
    title = row.get("title")
    if isinstance(title, str) and title.strip() and not value.startswith(title.strip()):
        value = f"{title.strip()}\n{value}" if value else ""
    return Document(doc_id, value, _first(row, SOURCE_FIELDS) or doc_id)


def documents_from_row(row: Any, number: int, where: str, cfg: RetrievalConfig) -> list[Document]:
    """The documents of one corpus row (one, or the elements of its ``documents``/``search_results`` list).

    Args:
        row: The parsed row.
        number: Its 1-based row number (the default id).
        where: Its location for error messages (``file:line`` or ``file: row n``).
        cfg: The retrieval config (text field and HTML mode).

    Raises:
        DataError: A row that is not an object, has no text field, or a non-string text, naming ``where``.
    """
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    nested = next(
        (n for n in NESTED_FIELDS if n in row and not (cfg.text_field and cfg.text_field in row)), None
    )
    if nested is not None:
        items = row[nested]
        if not isinstance(items, list):
            raise DataError(
                f"{where}: field {nested!r} must be a list of documents; got {type(items).__name__}"
            )
        key = _first(row, RECORD_ID_FIELDS) or str(number)
        return [_document(item, f"{key}/{j}", f"{where}: {nested}[{j}]", cfg) for j, item in enumerate(items)]
    return [_document(row, _first(row, ID_FIELDS) or str(number), where, cfg)]


@dataclass(frozen=True)
class CorpusSource:
    """A corpus location: ``kind`` (jsonl / parquet / hf-disk / hf-hub), the path or id, and the split."""

    spec: str
    kind: str
    path: Path | None = None
    name: str | None = None
    split: str | None = None

    def fingerprint(self) -> str:
        """Identity of the corpus content for resuming (path, sizes and modification times, or the hub id)."""
        if self.path is None:
            return f"{self.kind}:{self.name}:{self.split}"
        files = [self.path] if self.path.is_file() else sorted(p for p in self.path.rglob("*") if p.is_file())
        h = hashlib.sha256(str(self.path.resolve()).encode())
        for f in files:
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
        return f"{self.kind}:{h.hexdigest()[:32]}"


def open_corpus(spec: str | Path) -> CorpusSource:
    """Resolve ``--corpus``: a ``.jsonl`` / ``.parquet`` file, a ``save_to_disk`` dataset folder or ``hf:name[:split]``.

    Raises:
        DataError: A missing path or an unknown file type, saying which forms are accepted.
    """
    text = str(spec)
    if text.startswith("hf:"):
        parts = text[3:].split(":")
        if not parts[0] or len(parts) > 2:
            raise DataError(f"corpus {text!r}: write a Hugging Face dataset as hf:NAME or hf:NAME:SPLIT")
        return CorpusSource(text, "hf-hub", name=parts[0], split=parts[1] if len(parts) == 2 else "train")
    path = Path(spec)
    if path.is_dir():
        if not any((path / f).is_file() for f in ("state.json", "dataset_dict.json", "dataset_info.json")):
            raise DataError(
                f"corpus {path}: a folder must be a Hugging Face dataset saved with save_to_disk "
                "(state.json or dataset_dict.json); give a .jsonl or .parquet file otherwise"
            )
        return CorpusSource(text, "hf-disk", path=path)
    if not path.is_file():
        raise DataError(
            f"corpus {path}: no such file or folder; give a .jsonl or .parquet file, a save_to_disk dataset "
            "folder or hf:NAME[:SPLIT]"
        )
    suffixes = "".join(path.suffixes[-1:]).lower()
    if suffixes in (".jsonl", ".ndjson"):
        return CorpusSource(text, "jsonl", path=path)
    if suffixes in (".parquet", ".pq"):
        return CorpusSource(text, "parquet", path=path)
    raise DataError(
        f"corpus {path}: unknown file type {path.suffix!r}; accepted: .jsonl, .parquet, a save_to_disk dataset "
        "folder or hf:NAME[:SPLIT]"
    )


def _iter_rows(src: CorpusSource) -> Iterator[tuple[int, str, Any]]:
    """``(row number, location, row)`` streamed from the corpus (JSONL line by line, Parquet by batches)."""
    if src.kind == "jsonl":
        for number, (line, row) in enumerate(iter_jsonl(src.path, "corpus", DataError), 1):
            yield number, f"{src.path}:{line}", row
        return
    if src.kind == "parquet":
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(src.path)
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for a bad file
            raise DataError(
                f"{src.path}: not a readable Parquet file ({type(exc).__name__}: {exc})"
            ) from None
        number = 0
        for batch in pf.iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                number += 1
                yield number, f"{src.path}: row {number}", row
        return
    dataset = _load_dataset(src)
    for number, row in enumerate(dataset, 1):
        yield number, f"{src.spec}: row {number}", row


def _load_dataset(src: CorpusSource):
    import datasets

    try:
        if src.kind == "hf-disk":
            ds = datasets.load_from_disk(str(src.path))
        else:
            ds = datasets.load_dataset(src.name, split=src.split)
    except Exception as exc:  # datasets raises many types (FileNotFoundError, ConnectionError, ValueError)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise DataError(
            f"corpus {src.spec}: cannot load the Hugging Face dataset ({type(exc).__name__}: {first}); offline, "
            "it must be in the local cache or saved with save_to_disk"
        ) from None
    if isinstance(ds, datasets.DatasetDict):
        splits = list(ds)
        if len(splits) != 1:
            raise DataError(
                f"corpus {src.spec}: the dataset has the splits {', '.join(splits)}; give one split's folder "
                f"(e.g. {src.path / splits[0]})"
            )
        ds = ds[splits[0]]
    return ds


def iter_documents(source: str | Path | CorpusSource, cfg: RetrievalConfig) -> Iterator[Document]:
    """Stream the documents of a corpus (see the module docstring for the row formats).

    Documents whose text is empty after HTML conversion are yielded too (the indexer counts and skips them).

    Raises:
        DataError: A missing or unreadable corpus, a bad row (naming file, line or row, and field) or a
            duplicate document id.
    """
    src = source if isinstance(source, CorpusSource) else open_corpus(source)
    seen: set[str] = set()
    for number, where, row in _iter_rows(src):
        for doc in documents_from_row(row, number, where, cfg):
            if doc.doc_id in seen:
                raise DataError(f"{where}: duplicate document id {doc.doc_id!r}; document ids must be unique")
            seen.add(doc.doc_id)
            yield doc


def dumps_chunk(chunk_id: str, text: str, source: str, doc_id: str) -> str:
    """One line of ``chunks.jsonl``."""
    return json.dumps({"id": chunk_id, "text": text, "source": source, "doc_id": doc_id}, ensure_ascii=False)
