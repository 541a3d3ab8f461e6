"""Build and load a persisted retrieval index (FAISS + BM25 + chunks), resumable and atomically replaced.

An index folder holds:

* ``index.faiss`` — FAISS ``IndexFlatIP`` over L2-normalized chunk embeddings (inner product = cosine);
* ``chunks.jsonl`` — one line per chunk, in index order: ``id`` (``<doc_id>#<n>``), ``text``, ``source``, ``doc_id``;
* ``bm25/`` — a bm25s index over the same chunks (``bm25s.BM25.save``) plus its tokenizer vocabulary;
* ``meta.json`` — counts, embedder name / path / dim / query instruction, timings, library versions and the full
  run config that built it.

**Build** (:func:`build_index`): everything is written into a work folder next to the output
(``.<name>.building``). Stage 1 streams the corpus, chunks each document by tokens of the embedder's tokenizer
and appends the chunks to ``chunks.jsonl``; stage 2 embeds the chunks in shards of ``retrieval.shard_size``:
each shard is saved atomically (``shard_00012.npy``) and recorded in ``progress.json`` before the next one
starts, and added to the FAISS index as it is produced (memory holds the FAISS index and one shard, never all
embeddings twice); stage 3 builds BM25. A killed build resumes (``resume=True``) from the last complete shard
when the corpus and the settings are unchanged. Only a finished index is moved to the output path: a failed
build leaves a previous good index there untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evidential.errors import ConfigError
from inference.io import write_json
from inference.retrieval.config import RetrievalSettings
from inference.retrieval.corpus import CorpusSource, dumps_chunk, iter_documents, open_corpus
from inference.retrieval.models import Embedder
from inference.retrieval.text import chunk_text
from inference.types import Chunk, DataError
from training.utils.configio import to_dict
from training.utils.run_metadata import package_versions

__all__ = ["INDEX_FORMAT", "IndexHandle", "build_index", "load_index", "work_dir"]

# the packages whose versions an index's meta.json records
INDEX_PACKAGES = (
    "evidential-rag",
    "python",
    "numpy",
    "torch",
    "faiss",
    "bm25s",
    "sentence-transformers",
    "transformers",
)

INDEX_FORMAT = "evidential-rag-index/1"
FAISS_FILE = "index.faiss"
CHUNKS_FILE = "chunks.jsonl"
BM25_DIR = "bm25"
META_FILE = "meta.json"
PROGRESS_FILE = "progress.json"
BM25_STOPWORDS = "en"


def work_dir(output: str | Path) -> Path:
    """The folder an unfinished build of ``output`` lives in (``.<name>.building`` next to it)."""
    out = Path(output)
    return out.parent / f".{out.name}.building"


def _shard_path(work: Path, i: int) -> Path:
    return work / f"shard_{i:05d}.npy"


def _save_npy_atomic(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        np.save(fh, array)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _is_index(path: Path) -> bool:
    return (path / META_FILE).is_file()


def _check_output(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not _is_index(out))):
        raise DataError(
            f"--output {out} exists and is not an index folder (no {META_FILE}); give a new or empty folder or "
            "an existing index to replace"
        )


def _iter_chunk_rows(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _write_chunks(
    source: CorpusSource, work: Path, embedder: Embedder, rcfg, show_progress: bool
) -> dict[str, int]:
    """Stage 1: stream documents → token chunks → ``chunks.jsonl`` (written to a temp file, then renamed)."""
    from tqdm.auto import tqdm

    tmp = work / f".{CHUNKS_FILE}.tmp"
    counts = {"n_documents": 0, "n_empty_documents": 0, "n_chunks": 0}
    with (
        tmp.open("w", encoding="utf-8") as fh,
        tqdm(desc="chunking documents", unit="doc", disable=not show_progress) as bar,
    ):
        for doc in iter_documents(source, rcfg):
            counts["n_documents"] += 1
            bar.update()
            spans = chunk_text(doc.text, embedder.tokenizer, rcfg.chunk_tokens, rcfg.chunk_overlap)
            if not spans:
                counts["n_empty_documents"] += 1
                continue
            for n, span in enumerate(spans):
                fh.write(dumps_chunk(f"{doc.doc_id}#{n}", span.text, doc.source, doc.doc_id) + "\n")
            counts["n_chunks"] += len(spans)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, work / CHUNKS_FILE)
    return counts


def _embed_shard(embedder: Embedder, texts: list[str], batch_size: int, bar) -> np.ndarray:
    """Embed one shard, longest texts first (less padding), updating ``bar`` per batch; input order returned."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    out = np.empty((len(texts), embedder.dim), dtype=np.float32)
    for b in range(0, len(order), batch_size):
        idx = order[b : b + batch_size]
        out[idx] = embedder.encode_documents([texts[i] for i in idx])
        bar.update(len(idx))
    return out


def _build_bm25(work: Path, show_progress: bool) -> None:
    """Stage 3: a bm25s index over ``chunks.jsonl`` (token ids streamed; texts never all in memory)."""
    import bm25s
    from bm25s.tokenization import Tokenizer

    tokenizer = Tokenizer(stopwords=BM25_STOPWORDS)
    ids = list(tokenizer.streaming_tokenize(row["text"] for row in _iter_chunk_rows(work / CHUNKS_FILE)))
    retriever = bm25s.BM25()
    retriever.index((ids, tokenizer.get_vocab_dict()), show_progress=show_progress)
    tmp = work / f".{BM25_DIR}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    retriever.save(str(tmp), show_progress=False)
    tokenizer.save_vocab(str(tmp))
    tokenizer.save_stopwords(str(tmp))
    shutil.rmtree(work / BM25_DIR, ignore_errors=True)
    os.replace(tmp, work / BM25_DIR)


def _swap_in(work: Path, out: Path) -> None:
    """Move the finished ``work`` folder to ``out``, replacing a previous index only now."""
    _check_output(out)
    if out.exists():
        old = out.parent / f".{out.name}.old"
        shutil.rmtree(old, ignore_errors=True)
        os.replace(out, old)
        os.replace(work, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(work, out)


def _finish(work: Path, out: Path) -> None:
    """Drop the shards (FAISS holds the vectors), move the index into place, then drop ``progress.json``."""
    for shard in work.glob("shard_*.npy"):
        shard.unlink()
    _swap_in(work, out)
    (out / PROGRESS_FILE).unlink(missing_ok=True)


def build_index(
    corpus: str | Path,
    output: str | Path,
    cfg: Any = None,
    *,
    resume: bool = True,
    embedder: Embedder | None = None,
    show_progress: bool = True,
    on_shard: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Build a retrieval index of ``corpus`` at ``output`` (see the module docstring for stages and layout).

    Args:
        corpus: A ``.jsonl`` / ``.parquet`` file, a ``save_to_disk`` dataset folder or ``hf:NAME[:SPLIT]``.
        output: The index folder to create (or replace, once the new index is complete).
        cfg: The :class:`~inference.config.RunConfig` (``models.embedder`` and the ``retrieval`` section);
            ``None`` = the defaults.
        resume: Continue an unfinished build of the same corpus and settings from its last complete shard;
            ``False`` starts over.
        embedder: An already loaded :class:`Embedder` (must be ``models.embedder``); loaded when ``None``.
        show_progress: Show tqdm progress bars.
        on_shard: Called as ``on_shard(i, n_shards)`` after shard ``i`` is saved (progress reporting, tests).

    Returns:
        The index metadata (also written to ``meta.json``).

    Raises:
        DataError: A missing or bad corpus (naming file, line and field), an empty corpus, or an ``output``
            that exists and is not an index.
        ConfigError: The embedder cannot be loaded, or ``retrieval.chunk_tokens`` exceeds what it accepts.
    """
    import faiss

    cfg = cfg if cfg is not None else RetrievalSettings()
    rcfg = cfg.retrieval
    out = Path(output)
    _check_output(out)
    source = open_corpus(corpus)
    t0 = time.perf_counter()
    embedder = _checked_embedder(cfg, embedder)
    work = work_dir(out)
    progress = _open_progress(work, _fingerprint(source, embedder, rcfg), resume)
    resumed_from = progress.get("shards_done", 0) if "n_chunks" in progress else None
    if progress.get("complete"):  # finished, but stopped before it was moved into place
        meta = json.loads((work / META_FILE).read_text(encoding="utf-8"))
        _finish(work, out)
        return meta

    # stage 1: chunks
    if "n_chunks" not in progress:
        progress.update(_write_chunks(source, work, embedder, rcfg, show_progress))
        progress["shards_done"] = 0
        write_json(work / PROGRESS_FILE, progress)
    n_chunks = progress["n_chunks"]
    if n_chunks == 0:
        shutil.rmtree(work, ignore_errors=True)
        raise DataError(
            f"corpus {source.spec}: no text to index ({progress['n_documents']} documents, all empty)"
        )
    # stage 2: embeddings, shard by shard, added to FAISS as they come
    t_embed = time.perf_counter()
    index, embedded = _embed_shards(work, progress, embedder, rcfg, show_progress, on_shard)
    embed_s = time.perf_counter() - t_embed
    # stage 3: BM25
    _build_bm25(work, show_progress)
    faiss.write_index(index, str(work / f".{FAISS_FILE}.tmp"))
    os.replace(work / f".{FAISS_FILE}.tmp", work / FAISS_FILE)
    total_s = time.perf_counter() - t0
    meta = {
        "format": INDEX_FORMAT,
        "corpus": source.spec,
        "n_documents": progress["n_documents"],
        "n_empty_documents": progress["n_empty_documents"],
        "n_chunks": n_chunks,
        "n_shards": -(-n_chunks // rcfg.shard_size),
        "resumed_from_shard": resumed_from,
        **embedder.describe(),
        "metric": "inner_product (cosine of L2-normalized vectors)",
        "faiss_index": type(index).__name__,
        "bm25": {"library": "bm25s", "method": "lucene", "k1": 1.5, "b": 0.75, "stopwords": BM25_STOPWORDS},
        "timings_s": {"total": round(total_s, 3), "embedding": round(embed_s, 3)},
        "chunks_embedded": embedded,
        "chunks_per_s": round(embedded / embed_s, 2) if embedded and embed_s > 0 else None,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": package_versions(*INDEX_PACKAGES),
        "config": to_dict(cfg),
    }
    write_json(work / META_FILE, meta)
    progress["complete"] = True
    write_json(work / PROGRESS_FILE, progress)
    _finish(work, out)
    return meta


def _checked_embedder(cfg: Any, embedder: Embedder | None) -> Embedder:
    """``embedder``, or ``models.embedder`` loaded; checked to match the config and fit its chunks."""
    rcfg = cfg.retrieval
    if embedder is None:
        embedder = Embedder(
            cfg.models.embedder,
            query_instruction=rcfg.query_instruction,
            backend=rcfg.backend,
            device=rcfg.device,
            batch_size=rcfg.batch_size,
        )
    elif embedder.name != cfg.models.embedder:
        raise ConfigError(
            f"models.embedder is {cfg.models.embedder!r} but the given embedder is {embedder.name!r}"
        )
    specials = embedder.tokenizer.num_special_tokens_to_add(pair=False)
    if rcfg.chunk_tokens + specials > embedder.max_seq_length:
        raise ConfigError(
            f"retrieval.chunk_tokens={rcfg.chunk_tokens} does not fit {embedder.name!r}: max_seq_length "
            f"{embedder.max_seq_length} minus {specials} special tokens allows at most "
            f"{embedder.max_seq_length - specials}"
        )
    return embedder


def _fingerprint(source: CorpusSource, embedder: Embedder, rcfg: Any) -> dict[str, Any]:
    """What an unfinished build must share with this one to be resumed."""
    return {
        "format": INDEX_FORMAT,
        "corpus": source.fingerprint(),
        "embedder": embedder.name,
        "backend": rcfg.backend,
        "chunk_tokens": rcfg.chunk_tokens,
        "chunk_overlap": rcfg.chunk_overlap,
        "shard_size": rcfg.shard_size,
        "text_field": rcfg.text_field,
        "html": rcfg.html,
    }


def _open_progress(work: Path, fingerprint: dict[str, Any], resume: bool) -> dict[str, Any]:
    """The progress record of the build in ``work``: the unfinished one with the same fingerprint when
    ``resume``, else a new one (``work`` emptied)."""
    progress: dict[str, Any] = {}
    if work.exists() and resume:
        try:
            progress = json.loads((work / PROGRESS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            progress = {}
        if progress.get("fingerprint") != fingerprint:
            progress = {}
    if not progress:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        progress = {"fingerprint": fingerprint, "shards_done": 0}
        write_json(work / PROGRESS_FILE, progress)
    return progress


def _embed_shards(
    work: Path,
    progress: dict[str, Any],
    embedder: Embedder,
    rcfg: Any,
    show_progress: bool,
    on_shard: Callable[[int, int], None] | None,
) -> tuple[Any, int]:
    """Embed the chunks shard by shard (shards saved by an earlier run are reused) into a FAISS inner-product
    index; returns ``(index, chunks embedded now)``."""
    import faiss
    from tqdm.auto import tqdm

    n_chunks = progress["n_chunks"]
    n_shards = -(-n_chunks // rcfg.shard_size)
    index = faiss.IndexFlatIP(embedder.dim)
    embedded = 0
    rows = _iter_chunk_rows(work / CHUNKS_FILE)
    with tqdm(total=n_chunks, desc="embedding chunks", unit="chunk", disable=not show_progress) as bar:
        for i in range(n_shards):
            texts = [next(rows)["text"] for _ in range(min(rcfg.shard_size, n_chunks - i * rcfg.shard_size))]
            path = _shard_path(work, i)
            vecs = None
            if i < progress["shards_done"] and path.is_file():
                vecs = np.load(path)
                if vecs.shape != (len(texts), embedder.dim):
                    vecs = None
                else:
                    bar.update(len(texts))
            if vecs is None:
                vecs = _embed_shard(embedder, texts, rcfg.batch_size, bar)
                embedded += len(texts)
                _save_npy_atomic(path, vecs)
                progress["shards_done"] = i + 1
                write_json(work / PROGRESS_FILE, progress)
                if on_shard is not None:
                    on_shard(i, n_shards)
            index.add(vecs)
            del vecs
    return index, embedded


@dataclass
class IndexHandle:
    """A loaded index folder: chunk records in memory, FAISS and BM25 loaded on first use.

    Attributes:
        path: The index folder.
        meta: ``meta.json``.
        ids, texts, sources, doc_ids: Per-chunk columns in index order.
    """

    path: Path
    meta: dict[str, Any]
    ids: list[str]
    texts: list[str]
    sources: list[str]
    doc_ids: list[str]
    _faiss: Any = field(default=None, repr=False)
    _bm25: Any = field(default=None, repr=False)
    _positions: dict[str, int] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def position(self, chunk_id: str) -> int:
        """Index position of a chunk id (the id → position map is built on first use)."""
        if self._positions is None:
            self._positions = {cid: i for i, cid in enumerate(self.ids)}
        return self._positions[chunk_id]

    def chunk(self, i: int, rank: int, score: float) -> Chunk:
        """Chunk ``i`` (index order) as a retrieval result."""
        return Chunk(self.ids[i], self.texts[i], self.sources[i], rank, float(score))

    @property
    def faiss_index(self):
        """The FAISS index (read on first use; its size is checked against the chunks)."""
        if self._faiss is None:
            import faiss

            index = faiss.read_index(str(self.path / FAISS_FILE))
            if index.ntotal != len(self):
                raise DataError(
                    f"{self.path}: {FAISS_FILE} holds {index.ntotal} vectors but {CHUNKS_FILE} has {len(self)} "
                    "chunks; rebuild the index"
                )
            self._faiss = index
        return self._faiss

    @property
    def bm25(self):
        """``(bm25s.BM25, tokenizer)`` (read on first use)."""
        if self._bm25 is None:
            import bm25s
            from bm25s.tokenization import Tokenizer

            folder = str(self.path / BM25_DIR)
            retriever = bm25s.BM25.load(folder, show_progress=False)
            tokenizer = Tokenizer(stopwords=BM25_STOPWORDS)
            tokenizer.load_vocab(folder)
            tokenizer.load_stopwords(folder)
            self._bm25 = (retriever, tokenizer)
        return self._bm25


def load_index(path: str | Path) -> IndexHandle:
    """Open an index folder written by :func:`build_index` (chunks are read now, FAISS / BM25 on first use).

    Raises:
        DataError: No index at ``path`` (saying how to build one, or that a build is unfinished), a missing
            file, an unknown format or chunks that do not match ``meta.json``.
    """
    p = Path(path)
    if not (p / META_FILE).is_file():
        hint = (
            f"; an unfinished build is in {work_dir(p)} — rerun `evidential-rag index` with --resume to finish it"
            if work_dir(p).is_dir()
            else ""
        )
        raise DataError(
            f"no index at {p} ({META_FILE} missing); build one with "
            f"`evidential-rag index --corpus FILE --output {p}`{hint}"
        )
    try:
        meta = json.loads((p / META_FILE).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DataError(f"{p / META_FILE}: not valid JSON ({exc}); rebuild the index") from None
    if not isinstance(meta, dict) or meta.get("format") != INDEX_FORMAT:
        raise DataError(
            f"{p}: unknown index format {meta.get('format') if isinstance(meta, dict) else meta!r}; "
            f"expected {INDEX_FORMAT}; rebuild the index"
        )
    for name in (FAISS_FILE, CHUNKS_FILE, BM25_DIR):
        if not (p / name).exists():
            raise DataError(f"{p}: {name} is missing; rebuild the index")
    ids, texts, sources, doc_ids = [], [], [], []
    try:
        for row in _iter_chunk_rows(p / CHUNKS_FILE):
            ids.append(row["id"])
            texts.append(row["text"])
            sources.append(row["source"])
            doc_ids.append(row["doc_id"])
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(
            f"{p / CHUNKS_FILE}: chunk {len(ids) + 1} is not a valid chunk record ({type(exc).__name__}: {exc}); "
            "rebuild the index"
        ) from None
    if len(ids) != meta.get("n_chunks"):
        raise DataError(
            f"{p}: {CHUNKS_FILE} has {len(ids)} chunks but {META_FILE} says {meta.get('n_chunks')}; rebuild the index"
        )
    return IndexHandle(p, meta, ids, texts, sources, doc_ids)
