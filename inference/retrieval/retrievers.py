"""Retrievers behind one interface, chosen by name through :data:`RETRIEVERS` (``dense``, ``bm25``, ``hybrid``).

Every retriever answers ``search(query, k)`` and ``search_batch(queries, k)`` with
:class:`~inference.types.Chunk` lists ranked 1..k (best first). :func:`build_retriever` opens an index,
builds the configured first stage and, when ``models.reranker`` names a model, wraps it in a
:class:`RerankingRetriever`; :attr:`Retriever.info` records what ran (``reranked: false`` when no reranker
was configured, the CPU default).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evidential.errors import ConfigError
from inference.retrieval.config import RETRIEVERS, RetrievalSettings
from inference.retrieval.index import IndexHandle, load_index
from inference.retrieval.models import Embedder, Reranker
from inference.retrieval.rank_fusion import reciprocal_rank_fusion
from inference.types import Chunk

__all__ = [
    "RETRIEVERS",
    "BM25Retriever",
    "DenseRetriever",
    "HybridRetriever",
    "RerankingRetriever",
    "Retriever",
    "build_retriever",
]


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1; got {k!r}")


class Retriever(abc.ABC):
    """Ranks indexed chunks for a query. Subclasses implement :meth:`search_batch`."""

    name: str = ""

    def search(self, query: str, k: int) -> list[Chunk]:
        """The ``k`` best chunks for ``query``, ranked 1..k (fewer when fewer match)."""
        return self.search_batch([query], k)[0]

    @abc.abstractmethod
    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Chunk]]:
        """:meth:`search` for many queries at once (one embedder pass for dense retrieval)."""

    @property
    def info(self) -> dict[str, Any]:
        """What this retriever runs (recorded with results): name, index, models, whether it reranks."""
        return {"retriever": self.name, "reranker": None, "reranked": False}


class DenseRetriever(Retriever):
    """Embedder + FAISS inner product over L2-normalized vectors (score = cosine similarity)."""

    name = "dense"

    def __init__(self, index: IndexHandle, embedder: Embedder) -> None:
        if embedder.dim != index.meta.get("dim"):
            raise ConfigError(
                f"models.embedder {embedder.name!r} gives {embedder.dim}-d vectors but the index at {index.path} "
                f"holds {index.meta.get('dim')}-d ones (built with {index.meta.get('embedder')!r})"
            )
        self.index = index
        self.embedder = embedder

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Chunk]]:
        _check_k(k)
        queries = list(queries)
        if not queries:
            return []
        vecs = self.embedder.encode_queries(queries)
        scores, ids = self.index.faiss_index.search(vecs, min(k, len(self.index)))
        return [
            [self.index.chunk(int(i), r, s) for r, (i, s) in enumerate(zip(row_i, row_s), 1) if i >= 0]
            for row_i, row_s in zip(ids, scores)
        ]

    @property
    def info(self) -> dict[str, Any]:
        return {
            **super().info,
            "index": str(self.index.path),
            "embedder": self.embedder.name,
            "query_instruction": self.embedder.query_instruction,
        }


class BM25Retriever(Retriever):
    """bm25s (Lucene BM25, k1=1.5, b=0.75, English stopwords) over the index's chunks.

    Only chunks sharing at least one term with the query are returned (score > 0), so a query of stopwords
    or unknown words gets no chunks.
    """

    name = "bm25"

    def __init__(self, index: IndexHandle) -> None:
        self.index = index

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Chunk]]:
        _check_k(k)
        retriever, tokenizer = self.index.bm25
        empty = tokenizer.word_to_id.get("")
        ids = tokenizer.streaming_tokenize(list(queries), update_vocab=False, allow_empty=False)
        out = []
        # the tokenizer's ids are the index's own (it was built from them); unknown words are dropped
        for qids in ids:
            tokens = [t for t in qids if t != empty]
            if not tokens:
                out.append([])
                continue
            scores = np.asarray(retriever.get_scores(tokens), dtype=np.float64)
            top = np.flatnonzero(scores > 0)
            if len(top) > k:
                top = top[np.argpartition(-scores[top], k - 1)[:k]]
            top = sorted(top.tolist(), key=lambda i: (-scores[i], i))
            out.append([self.index.chunk(i, r, scores[i]) for r, i in enumerate(top, 1)])
        return out

    @property
    def info(self) -> dict[str, Any]:
        return {**super().info, "index": str(self.index.path)}


class HybridRetriever(Retriever):
    """Reciprocal rank fusion of dense and BM25 rankings (each ``candidates`` deep); score = RRF score."""

    name = "hybrid"

    def __init__(
        self, dense: DenseRetriever, bm25: BM25Retriever, rrf_k: int = 60, candidates: int = 50
    ) -> None:
        self.dense = dense
        self.bm25 = bm25
        self.rrf_k = rrf_k
        self.candidates = candidates

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Chunk]]:
        _check_k(k)
        depth = max(self.candidates, k)
        dense = self.dense.search_batch(queries, depth)
        sparse = self.bm25.search_batch(queries, depth)
        index = self.dense.index
        out = []
        for d, s in zip(dense, sparse):
            fused = reciprocal_rank_fusion([[c.id for c in d], [c.id for c in s]], k=self.rrf_k)[:k]
            out.append(
                [index.chunk(index.position(cid), r, score) for r, (cid, score) in enumerate(fused, 1)]
            )
        return out

    @property
    def info(self) -> dict[str, Any]:
        return {**self.dense.info, "retriever": self.name, "rrf_k": self.rrf_k, "candidates": self.candidates}


class RerankingRetriever(Retriever):
    """A first-stage retriever (``candidates`` deep) followed by a cross-encoder :class:`Reranker` to ``k``."""

    def __init__(self, first_stage: Retriever, reranker: Reranker, candidates: int = 50) -> None:
        self.first_stage = first_stage
        self.reranker = reranker
        self.candidates = candidates
        self.name = first_stage.name

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Chunk]]:
        _check_k(k)
        queries = list(queries)
        first = self.first_stage.search_batch(queries, max(self.candidates, k))
        return self.reranker.rerank_batch(queries, first, k)

    @property
    def info(self) -> dict[str, Any]:
        return {
            **self.first_stage.info,
            "reranker": self.reranker.name,
            "reranked": True,
            "candidates": self.candidates,
        }


def _embedder(handle: IndexHandle, rcfg, embedder: Embedder | None) -> Embedder:
    if embedder is not None:
        return embedder
    return Embedder(
        handle.meta["embedder"],
        query_instruction=rcfg.query_instruction,
        backend=rcfg.backend,
        device=rcfg.device,
        batch_size=rcfg.batch_size,
    )


@RETRIEVERS.register("dense")
def _dense(handle: IndexHandle, rcfg, embedder: Embedder | None = None) -> Retriever:
    return DenseRetriever(handle, _embedder(handle, rcfg, embedder))


@RETRIEVERS.register("bm25")
def _bm25(handle: IndexHandle, rcfg, embedder: Embedder | None = None) -> Retriever:
    return BM25Retriever(handle)


@RETRIEVERS.register("hybrid")
def _hybrid(handle: IndexHandle, rcfg, embedder: Embedder | None = None) -> Retriever:
    dense = DenseRetriever(handle, _embedder(handle, rcfg, embedder))
    return HybridRetriever(dense, BM25Retriever(handle), rcfg.rrf_k, rcfg.candidates)


def build_retriever(
    index: str | Path | IndexHandle,
    cfg: Any = None,
    *,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
) -> Retriever:
    """The retriever ``cfg`` asks for over an index folder, reranked when ``models.reranker`` is set.

    Dense retrieval always embeds queries with the embedder that built the index (``meta.json``), and
    searches its FAISS index as the config says (``retrieval.index_search``, ``retrieval.index_mmap``); a
    config naming another embedder or another ``retrieval.index_type`` is an error rather than a silent
    mismatch.

    Args:
        index: An index folder or a loaded :class:`IndexHandle`.
        cfg: A :class:`~inference.config.RunConfig` (``retrieval`` section, ``models.embedder`` /
            ``models.reranker``); ``None`` = defaults with the index's own embedder.
        embedder: An already loaded :class:`Embedder` to reuse.
        reranker: An already loaded :class:`Reranker` to use (overrides ``models.reranker``).

    Raises:
        DataError: No index at the path.
        ConfigError: An unknown retriever, an embedder or index type that differs from the index's, or a
            model that cannot be loaded.
    """
    handle = index if isinstance(index, IndexHandle) else load_index(index)
    explicit = cfg is not None
    cfg = cfg if explicit else RetrievalSettings()
    rcfg = cfg.retrieval
    built_with = handle.meta.get("embedder")
    if rcfg.retriever != "bm25":
        if explicit and cfg.models.embedder != built_with:
            raise ConfigError(
                f"models.embedder is {cfg.models.embedder!r} but the index at {handle.path} was built with "
                f"{built_with!r}; use the config that built it or --set models.embedder={built_with}"
            )
        if embedder is not None and embedder.name != built_with:
            raise ConfigError(
                f"the given embedder is {embedder.name!r} but the index was built with {built_with!r}"
            )
        if explicit:
            handle.configure(rcfg)
    retriever = RETRIEVERS.get(rcfg.retriever)(handle, rcfg, embedder)
    if reranker is None and cfg.models.reranker is not None:
        reranker = Reranker(
            cfg.models.reranker,
            backend=rcfg.backend,
            device=rcfg.device,
            batch_size=rcfg.batch_size,
            max_length=rcfg.rerank_max_length,
        )
    if reranker is not None:
        return RerankingRetriever(retriever, reranker, rcfg.candidates)
    return retriever
