"""Build and load a persisted retrieval index (FAISS + BM25 + chunks), resumable and atomically replaced.

An index folder holds:

* ``index.faiss`` — a FAISS inner-product index over L2-normalized chunk embeddings (inner product = cosine)
  of the type ``retrieval.index_type`` names (a ``faiss.index_factory`` string: ``Flat`` — exact, the
  default —, ``HNSW32``, ``IVF1024,PQ32``, ...);
* ``chunks.jsonl`` — one line per chunk, in index order: ``id`` (``<doc_id>#<n>``), ``text``, ``source``, ``doc_id``;
* ``bm25/`` — a bm25s index over the same chunks (``bm25s.BM25.save``) plus its tokenizer vocabulary;
* ``meta.json`` — counts, embedder name / path / dim / query instruction, the index type (``index_type``; an
  index written before it was recorded is a ``Flat`` one) and its training sample, timings, library versions
  and the full run config that built it.

**Build** (:func:`build_index`): everything is written into a work folder next to the output
(``.<name>.building``). Stage 1 streams the corpus, chunks each document by tokens of the embedder's tokenizer
and appends the chunks to ``chunks.jsonl``; stage 2 embeds the chunks in shards of ``retrieval.shard_size``:
each shard is saved atomically (``shard_00012.npy``) and recorded in ``progress.json`` before the next one
starts, and added to the FAISS index as it is produced (memory holds the FAISS index and one shard, never all
embeddings twice). An index type that needs training (IVF, PQ, OPQ, SQ) is instead trained once every shard is
on disk, on ``retrieval.index_train_size`` vectors sampled with the run config's seed, and then filled shard by
shard from disk. Stage 3 builds BM25. A killed build resumes (``resume=True``) from the last complete shard
when the corpus and the settings are unchanged. Only a finished index is moved to the output path: a failed
build leaves a previous good index there untouched. ``index_type`` is checked (FAISS builds an empty index of
it for the embedder's dimension) before anything is embedded, and a type whose training needs more vectors
than the corpus has is refused right after chunking.

**Load** (:func:`load_index`): given the run config, the recorded ``index_type`` must equal
``retrieval.index_type`` (or the load is refused, saying how to rebuild or what to set);
``retrieval.index_search`` (``nprobe``, ``efSearch``) is applied through ``faiss.ParameterSpace`` and
``retrieval.index_mmap`` memory-maps ``index.faiss`` where FAISS can (see :meth:`IndexHandle.faiss_index`).
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
from inference.retrieval.config import RetrievalSettings, faiss_reason
from inference.retrieval.corpus import CorpusSource, dumps_chunk, iter_documents, open_corpus
from inference.retrieval.models import Embedder
from inference.retrieval.text import chunk_text
from inference.types import Chunk, DataError
from training.utils.configio import to_dict
from training.utils.run_metadata import package_versions

__all__ = [
    "FLAT",
    "INDEX_FORMAT",
    "IndexHandle",
    "apply_search_params",
    "build_index",
    "factory_index",
    "load_index",
    "mmap_flag",
    "training_needs",
    "work_dir",
]

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
FLAT = "Flat"  # the index type of an index whose meta.json records none (written before index_type existed)
INDEX_EXAMPLES = "Flat, HNSW32, IVF1024,PQ32, IVF256,Flat or OPQ16,IVF1024,PQ16"


def factory_index(spec: str, dim: int):
    """An empty FAISS inner-product index of factory string ``spec`` for ``dim``-d vectors.

    Raises:
        ConfigError: FAISS refuses ``spec`` for this dimension (a string it cannot parse, or e.g. ``PQ<M>``
            with an M that does not divide ``dim``), naming ``retrieval.index_type`` and what to use.
    """
    import faiss

    try:
        return faiss.index_factory(dim, spec, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        raise ConfigError(
            f"retrieval.index_type={spec!r} does not give a FAISS index for the embedder's {dim}-d vectors "
            f"({faiss_reason(exc)}); use a factory string such as {INDEX_EXAMPLES}, with a PQ/OPQ M that "
            f"divides {dim}"
        ) from None


def training_needs(index) -> list[tuple[str, int]]:
    """``(part, n)`` for each trained part of a FAISS index: the fewest training vectors it accepts.

    IVF<nlist> clusters into nlist lists, a product quantizer into ``2**nbits`` centroids per sub-vector
    (OPQ trains one with 256); k-means needs at least as many points as centroids.
    """
    import faiss

    needs: list[tuple[str, int]] = []
    todo = [index]
    while todo:
        ix = todo.pop()
        if isinstance(ix, faiss.IndexPreTransform):
            for j in range(ix.chain.size()):
                vt = faiss.downcast_VectorTransform(ix.chain.at(j))
                if isinstance(vt, faiss.OPQMatrix):
                    needs.append((f"OPQ{vt.M}", 256))
            todo.append(faiss.downcast_index(ix.index))
            continue
        if isinstance(ix, faiss.IndexIVF):
            needs.append((f"IVF{ix.nlist}", int(ix.nlist)))
        pq = getattr(ix, "pq", None)
        if isinstance(pq, faiss.ProductQuantizer):
            needs.append((f"PQ{pq.M}x{pq.nbits}", int(pq.ksub)))
        storage = getattr(ix, "storage", None)  # HNSW over PQ / SQ codes
        if storage is not None:
            todo.append(faiss.downcast_index(storage))
    return needs


def apply_search_params(index, params: dict[str, float], index_type: str) -> None:
    """Set ``retrieval.index_search`` (``{"nprobe": 32}``, ``{"efSearch": 64}``) through faiss.ParameterSpace.

    Raises:
        ConfigError: A parameter this index type does not have, naming ``retrieval.index_search.<name>``.
    """
    if not params:
        return
    import faiss

    space = faiss.ParameterSpace()
    for name, value in params.items():
        try:
            space.set_index_parameter(index, name, float(value))
        except RuntimeError:
            raise ConfigError(
                f"retrieval.index_search.{name}: index type {index_type!r} has no search parameter {name!r} "
                "(nprobe applies to IVF types, efSearch to HNSW, quantizer_efSearch to IVF over an HNSW "
                "quantizer); remove it or change retrieval.index_type"
            ) from None


def mmap_flag(index_type: str, dim: int) -> tuple[int, str]:
    """The ``faiss.read_index`` flag that memory-maps an index of this type, and what it maps.

    IVF types: ``IO_FLAG_MMAP`` (their inverted lists, the bulk of the index); anything else:
    ``IO_FLAG_MMAP_IFC`` (the codes of Flat / PQ / SQ, HNSW's vectors and graph; parts it cannot map are
    read into memory); ``0`` (a normal read) with a FAISS that has neither.
    """
    import faiss

    if faiss.try_extract_index_ivf(factory_index(index_type, dim)) is not None:
        return faiss.IO_FLAG_MMAP, "inverted lists (IO_FLAG_MMAP)"
    if hasattr(faiss, "IO_FLAG_MMAP_IFC"):
        return faiss.IO_FLAG_MMAP_IFC, "codes (IO_FLAG_MMAP_IFC)"
    return 0, "nothing (this FAISS cannot map it: read into memory)"


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
        ConfigError: The embedder cannot be loaded, ``retrieval.chunk_tokens`` exceeds what it accepts,
            ``retrieval.index_type`` gives no FAISS index for its dimension, ``retrieval.index_search`` names
            a parameter that index lacks, or the type needs more training vectors than the corpus has
            chunks (or than ``retrieval.index_train_size``).
    """
    import faiss

    cfg = cfg if cfg is not None else RetrievalSettings()
    rcfg = cfg.retrieval
    out = Path(output)
    _check_output(out)
    source = open_corpus(corpus)
    t0 = time.perf_counter()
    embedder = _checked_embedder(cfg, embedder)
    index = factory_index(rcfg.index_type, embedder.dim)  # a bad type fails before anything is embedded
    apply_search_params(index, rcfg.index_search, rcfg.index_type)
    seed = int(getattr(cfg, "seed", 0) or 0)
    work = work_dir(out)
    fingerprint = _fingerprint(source, embedder, rcfg)
    progress = _open_progress(work, fingerprint, resume)
    if progress.get("complete"):  # finished, but stopped before it was moved into place
        meta = json.loads((work / META_FILE).read_text(encoding="utf-8"))
        if meta.get("index_type", FLAT) == rcfg.index_type:
            _finish(work, out)
            return meta
        progress = _open_progress(work, fingerprint, resume=False)  # its shards are gone: start over
    resumed_from = progress.get("shards_done", 0) if "n_chunks" in progress else None

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
    n_train = _training_size(index, rcfg, n_chunks)  # too few vectors fails before anything is embedded
    # stage 2: embeddings, shard by shard, added to FAISS as they come (after training for IVF / PQ / ...)
    t_embed = time.perf_counter()
    embedded = _embed_shards(work, progress, embedder, rcfg, show_progress, on_shard, index)
    embed_s = time.perf_counter() - t_embed
    training = None
    if not index.is_trained:
        t_train = time.perf_counter()
        _train_and_fill(index, work, n_chunks, rcfg, n_train, seed, show_progress)
        training = {"vectors": n_train, "seed": seed, "seconds": round(time.perf_counter() - t_train, 3)}
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
        "index_type": rcfg.index_type,
        "index_search": dict(rcfg.index_search),
        "faiss_index": type(index).__name__,
        "faiss_bytes": (work / FAISS_FILE).stat().st_size,
        "index_training": training,
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


def _training_size(index: Any, rcfg: Any, n_chunks: int) -> int:
    """How many vectors train ``index`` (0 when it needs no training), refusing too few with the numbers."""
    if index.is_trained:
        return 0
    n = min(rcfg.index_train_size, n_chunks)
    needs = training_needs(index)
    part, need = max(needs, key=lambda p: p[1]) if needs else ("it", 1)
    if n_chunks < need:
        raise ConfigError(
            f"retrieval.index_type={rcfg.index_type!r}: {part} needs at least {need} training vectors but the "
            f"corpus has only {n_chunks} chunk{'s' if n_chunks != 1 else ''}; use Flat (exact; the right choice below about a million "
            f"chunks) or a smaller type (IVF<nlist> with nlist <= {max(1, n_chunks // 39)}, FAISS's 39 "
            "vectors per list)"
        )
    if n < need:
        raise ConfigError(
            f"retrieval.index_train_size={rcfg.index_train_size} is too few for retrieval.index_type="
            f"{rcfg.index_type!r}: {part} needs at least {need} training vectors; set it to {need} or more "
            f"(the corpus has {n_chunks} chunks)"
        )
    return n


def _training_sample(work: Path, n_chunks: int, shard_size: int, n: int, seed: int) -> np.ndarray:
    """``n`` embeddings drawn without replacement (seeded) from the shards on disk, in index order."""
    picks = np.sort(np.random.default_rng(seed).choice(n_chunks, size=n, replace=False))
    shard_of = picks // shard_size
    parts = []
    for i in np.unique(shard_of):
        rows = picks[shard_of == i] - i * shard_size
        parts.append(np.asarray(np.load(_shard_path(work, int(i)), mmap_mode="r")[rows], dtype=np.float32))
    return np.ascontiguousarray(np.concatenate(parts))


def _train_and_fill(
    index: Any, work: Path, n_chunks: int, rcfg: Any, n_train: int, seed: int, show_progress: bool
) -> None:
    """Train ``index`` on a seeded sample of the saved shards, then add every shard (one in memory at a time)."""
    from tqdm.auto import tqdm

    sample = _training_sample(work, n_chunks, rcfg.shard_size, n_train, seed)
    try:
        index.train(sample)
    except RuntimeError as exc:
        raise ConfigError(
            f"retrieval.index_type={rcfg.index_type!r}: FAISS could not train it on {n_train} vectors "
            f"({faiss_reason(exc)}); raise retrieval.index_train_size or choose a smaller type"
        ) from None
    del sample
    n_shards = -(-n_chunks // rcfg.shard_size)
    with tqdm(total=n_chunks, desc="filling the index", unit="chunk", disable=not show_progress) as bar:
        for i in range(n_shards):
            vecs = np.load(_shard_path(work, i))
            index.add(vecs)
            bar.update(len(vecs))
            del vecs


def _embed_shards(
    work: Path,
    progress: dict[str, Any],
    embedder: Embedder,
    rcfg: Any,
    show_progress: bool,
    on_shard: Callable[[int, int], None] | None,
    index: Any,
) -> int:
    """Embed the chunks shard by shard (shards saved by an earlier run are reused), adding each to ``index``
    when it needs no training (a trained type is filled from the shards after training); returns the
    number of chunks embedded now."""
    from tqdm.auto import tqdm

    n_chunks = progress["n_chunks"]
    n_shards = -(-n_chunks // rcfg.shard_size)
    add_now = index.is_trained
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
            if add_now:
                index.add(vecs)
            del vecs
    return embedded


@dataclass
class IndexHandle:
    """A loaded index folder: chunk records in memory, FAISS and BM25 loaded on first use.

    Attributes:
        path: The index folder.
        meta: ``meta.json``.
        ids, texts, sources, doc_ids: Per-chunk columns in index order.
        mmap: Memory-map ``index.faiss`` when it is read (``retrieval.index_mmap``; see :meth:`configure`).
        search_params: FAISS search parameters applied after reading (``retrieval.index_search``).
        read_mode: How ``index.faiss`` was read (``None`` until it is): ``"read"`` or ``"mmap: <what>"``.
    """

    path: Path
    meta: dict[str, Any]
    ids: list[str]
    texts: list[str]
    sources: list[str]
    doc_ids: list[str]
    mmap: bool = False
    search_params: dict[str, float] = field(default_factory=dict)
    read_mode: str | None = None
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
    def index_type(self) -> str:
        """The FAISS factory string the index was built with (``Flat`` when ``meta.json`` records none)."""
        return self.meta.get("index_type") or FLAT

    def configure(self, rcfg: Any) -> IndexHandle:
        """Check a ``retrieval`` config section against this index and take its search-time settings.

        ``rcfg.index_type`` must be the recorded type; ``rcfg.index_search`` is checked against that type
        and applied when the FAISS index is read (now, if it already was); ``rcfg.index_mmap`` chooses how
        it is read. Returns ``self``.

        Raises:
            ConfigError: A different ``index_type`` (naming both, how to rebuild and what to set), or a
                search parameter the type does not have.
        """
        recorded = self.index_type
        if rcfg.index_type != recorded:
            raise ConfigError(
                f"retrieval.index_type is {rcfg.index_type!r} but the index at {self.path} was built as "
                f"{recorded!r} ({META_FILE} index_type); rebuild it with `evidential-rag index --corpus FILE "
                f"--output {self.path} --set retrieval.index_type={rcfg.index_type}` or set "
                f"retrieval.index_type={recorded} in the config (or --set retrieval.index_type={recorded})"
            )
        params = dict(rcfg.index_search)
        if params:
            apply_search_params(factory_index(recorded, int(self.meta["dim"])), params, recorded)
        if self._faiss is not None and (bool(rcfg.index_mmap) != self.mmap or params != self.search_params):
            self._faiss = None  # read again with the new settings (FAISS has no "unset a parameter")
        self.mmap = bool(rcfg.index_mmap)
        self.search_params = params
        return self

    @property
    def faiss_index(self):
        """The FAISS index (read on first use; its size is checked against the chunks).

        With :attr:`mmap`, ``index.faiss`` is memory-mapped where FAISS supports it: an IVF type's inverted
        lists (``faiss.IO_FLAG_MMAP``, the bulk of an IVF index), the codes of Flat / PQ / SQ and HNSW's
        vectors and graph (``faiss.IO_FLAG_MMAP_IFC``; FAISS 1.15 opens a 345 MiB HNSW32 index with 2 MiB of
        anonymous memory). What FAISS cannot map (quantizer centroids, OPQ matrices, other types) falls back
        to a normal read into memory. A mapped file must
        stay in place while it is used; rebuilding the index renames a new folder over it, which leaves
        the mapped (unlinked) file intact until the process lets go of it.
        """
        if self._faiss is None:
            import faiss

            flag, what = (0, "")
            if self.mmap:
                flag, what = mmap_flag(self.index_type, int(self.meta["dim"]))
            index = faiss.read_index(str(self.path / FAISS_FILE), flag)
            if index.ntotal != len(self):
                raise DataError(
                    f"{self.path}: {FAISS_FILE} holds {index.ntotal} vectors but {CHUNKS_FILE} has {len(self)} "
                    "chunks; rebuild the index"
                )
            apply_search_params(index, self.search_params, self.index_type)
            self.read_mode = f"mmap: {what}" if flag else "read"
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


def load_index(path: str | Path, cfg: Any = None) -> IndexHandle:
    """Open an index folder written by :func:`build_index` (chunks are read now, FAISS / BM25 on first use).

    Args:
        path: The index folder.
        cfg: A run config (its ``retrieval`` section): its ``index_type`` must be the recorded one, and its
            ``index_search`` / ``index_mmap`` apply (:meth:`IndexHandle.configure`); ``None`` = the index's
            own type with FAISS's default search parameters, read into memory.

    Raises:
        DataError: No index at ``path`` (saying how to build one, or that a build is unfinished), a missing
            file, an unknown format or chunks that do not match ``meta.json``.
        ConfigError: ``cfg`` names another index type than the one recorded, or a search parameter it lacks.
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
    handle = IndexHandle(p, meta, ids, texts, sources, doc_ids)
    return handle.configure(cfg.retrieval) if cfg is not None else handle
