"""Retrieval: corpus → token chunks → FAISS + BM25 index; dense / BM25 / hybrid retrievers; cross-encoder reranking.

Paper setting (``configs/paper.yaml``): dense retrieval with BAAI/bge-large-en-v1.5 (with its query instruction), reranked
by BAAI/bge-reranker-v2-m3 to the top k = 5. CPU default: the packaged all-MiniLM-L6-v2, no reranker (none
ships offline; :attr:`Retriever.info` records ``reranked: false``).

>>> from inference.retrieval import build_index, build_retriever          # doctest: +SKIP
>>> build_index("corpus.jsonl", "runs/index")                               # doctest: +SKIP
>>> build_retriever("runs/index").search("Who wrote Hamlet?", k=5)          # doctest: +SKIP

Heavy libraries (faiss, bm25s, sentence-transformers, datasets) are imported when used, so importing this
package (as :mod:`inference.config` does for :class:`RetrievalConfig`) stays cheap.
"""

from inference.retrieval.config import RetrievalConfig
from inference.retrieval.corpus import Document, documents_from_row, iter_documents, open_corpus
from inference.retrieval.index import IndexHandle, build_index, load_index
from inference.retrieval.models import (
    BGE_EN_INSTRUCTION,
    Embedder,
    Reranker,
    default_query_instruction,
)
from inference.retrieval.rank_fusion import reciprocal_rank_fusion
from inference.retrieval.retrievers import (
    RETRIEVERS,
    BM25Retriever,
    DenseRetriever,
    HybridRetriever,
    RerankingRetriever,
    Retriever,
    build_retriever,
)
from inference.retrieval.text import TextSpan, chunk_text, html_to_text, looks_like_html, token_windows

__all__ = [
    "BGE_EN_INSTRUCTION",
    "RETRIEVERS",
    "BM25Retriever",
    "DenseRetriever",
    "Document",
    "Embedder",
    "HybridRetriever",
    "IndexHandle",
    "Reranker",
    "RerankingRetriever",
    "RetrievalConfig",
    "Retriever",
    "TextSpan",
    "build_index",
    "build_retriever",
    "chunk_text",
    "default_query_instruction",
    "documents_from_row",
    "html_to_text",
    "iter_documents",
    "load_index",
    "looks_like_html",
    "open_corpus",
    "reciprocal_rank_fusion",
    "token_windows",
]
