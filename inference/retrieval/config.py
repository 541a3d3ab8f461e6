"""Configuration of retrieval and indexing (the ``retrieval`` section of a run config).

The embedder and reranker are named in ``models.embedder`` / ``models.reranker``; this section says how
they are used. Every field documents itself (``metadata["help"]``) and a bad value fails at load time with a
:class:`~evidential.errors.ConfigError` naming the dotted field (e.g. ``retrieval.chunk_overlap``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evidential.errors import ConfigError
from evidential.registry import Registry
from training.utils.configio import check_fields

__all__ = [
    "BACKEND_NAMES",
    "DEFAULT_EMBEDDER",
    "HTML_MODES",
    "RETRIEVERS",
    "RetrievalConfig",
    "RetrievalModels",
    "RetrievalSettings",
]

BACKEND_NAMES = ("sentence-transformers", "flagembedding")
HTML_MODES = ("auto", "always", "never")
DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"

# name -> factory(handle, retrieval_config, embedder) -> Retriever; filled by inference.retrieval.retrievers.
# It lives here so that the config validates ``retrieval.retriever`` without importing the retrievers.
RETRIEVERS: Registry[Callable[..., Any]] = Registry("retriever")


@dataclass
class RetrievalConfig:
    """How chunks are built, indexed, retrieved, fused and reranked."""

    retriever: str = field(
        default="dense",
        metadata={
            "help": "First-stage retriever: 'dense' (embedder + FAISS), 'bm25' (bm25s) or 'hybrid' "
            "(reciprocal rank fusion of both).",
            "choices": RETRIEVERS,
        },
    )
    backend: str = field(
        default="sentence-transformers",
        metadata={
            "help": "Library that runs the embedder and reranker: 'sentence-transformers' or 'flagembedding' "
            "(optional extra; FlagEmbedding 1.4.2 does not import with transformers 5.x).",
            "choices": BACKEND_NAMES,
        },
    )
    chunk_tokens: int = field(
        default=200,
        metadata={
            "help": "Chunk length in tokens of the embedder's tokenizer (without special tokens); must fit "
            "the embedder's max_seq_length.",
            "range": (8, None),
        },
    )
    chunk_overlap: int = field(
        default=40, metadata={"help": "Tokens shared by consecutive chunks of a document (< chunk_tokens)."}
    )
    batch_size: int = field(
        default=32, metadata={"help": "Texts per embedder / reranker forward pass.", "range": (1, None)}
    )
    shard_size: int = field(
        default=2048,
        metadata={
            "help": "Chunks embedded per shard while indexing: each shard is written to disk before the next "
            "starts (a killed build resumes from the last complete shard; memory holds one shard).",
            "range": (1, None),
        },
    )
    rrf_k: int = field(
        default=60,
        metadata={
            "help": "Constant of reciprocal rank fusion, score = sum 1 / (rrf_k + rank) (hybrid).",
            "range": (0, None),
            "note": "Cormack et al. 2009 use 60",
        },
    )
    candidates: int = field(
        default=50,
        metadata={
            "help": "First-stage depth: chunks each retriever returns before hybrid fusion and reranking "
            "cut them to k (at least k is always used).",
            "range": (1, None),
        },
    )
    query_instruction: str | None = field(
        default=None,
        metadata={
            "help": "Text put before every query for the dense embedder; null = automatic (BGE English "
            "v1/v1.5 models get 'Represent this sentence for searching relevant passages: ', others none); "
            "'' = none.",
            "allow_empty": True,
            "must": "be a string or null (automatic)",
        },
    )
    text_field: str | None = field(
        default=None,
        metadata={
            "help": "Corpus field holding the document text; null = the first of text, contents, content, "
            "page_result, html, body.",
            "must": "be a non-empty field name or null (automatic)",
        },
    )
    html: str = field(
        default="auto",
        metadata={
            "help": "Convert document text from HTML (script/style/nav stripped): 'auto' (page_result/html "
            "fields and text that starts like an HTML page), 'always' or 'never'.",
            "choices": HTML_MODES,
        },
    )
    rerank_max_length: int = field(
        default=512,
        metadata={
            "help": "Token limit of a (query, chunk) pair in the cross-encoder reranker.",
            "range": (16, None),
        },
    )
    device: str | None = field(
        default=None,
        metadata={
            "help": "Torch device of the embedder and reranker: cpu, cuda, cuda:N; null = automatic.",
            "must": "be a torch device (cpu, cuda, cuda:N) or null",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self, "retrieval")
        if not 0 <= self.chunk_overlap < self.chunk_tokens:
            raise ConfigError(
                f"retrieval.chunk_overlap must be an integer in [0, chunk_tokens={self.chunk_tokens}); "
                f"got {self.chunk_overlap!r}"
            )


@dataclass
class RetrievalModels:
    """The models indexing and retrieval use (the ``models.embedder`` / ``models.reranker`` of a run config)."""

    embedder: str = field(
        default=DEFAULT_EMBEDDER,
        metadata={"help": "Dense retriever (sentence-transformers), as a hub id or local path."},
    )
    reranker: str | None = field(default=None, metadata={"help": "Cross-encoder reranker, or null for none."})


@dataclass
class RetrievalSettings:
    """What :func:`~inference.retrieval.build_index` and :func:`~inference.retrieval.build_retriever` read.

    They take any object with these two attributes, normally the run config
    (:class:`inference.config.RunConfig`); this is their default when none is given.
    """

    models: RetrievalModels = field(
        default_factory=RetrievalModels, metadata={"help": "Embedder and reranker."}
    )
    retrieval: RetrievalConfig = field(
        default_factory=RetrievalConfig, metadata={"help": "Indexing, retrieval and reranking."}
    )
