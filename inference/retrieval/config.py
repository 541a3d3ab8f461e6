"""Configuration of retrieval and indexing (the ``retrieval`` section of a run config).

The embedder and reranker are named in ``models.embedder`` / ``models.reranker``; this section says how
they are used. Every field documents itself (``metadata["help"]``) and a bad value fails at load time with a
:class:`~evidential.errors.ConfigError` naming the dotted field (e.g. ``retrieval.chunk_overlap``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evidential.errors import ConfigError

__all__ = ["BACKEND_NAMES", "HTML_MODES", "RetrievalConfig"]

BACKEND_NAMES = ("sentence-transformers", "flagembedding")
HTML_MODES = ("auto", "always", "never")


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass
class RetrievalConfig:
    """How chunks are built, indexed, retrieved, fused and reranked."""

    retriever: str = field(
        default="dense",
        metadata={
            "help": "First-stage retriever: 'dense' (embedder + FAISS), 'bm25' (bm25s) or 'hybrid' "
            "(reciprocal rank fusion of both)."
        },
    )
    backend: str = field(
        default="sentence-transformers",
        metadata={
            "help": "Library that runs the embedder and reranker: 'sentence-transformers' or 'flagembedding' "
            "(optional extra; FlagEmbedding 1.4.2 does not import with transformers 5.x)."
        },
    )
    chunk_tokens: int = field(
        default=200,
        metadata={
            "help": "Chunk length in tokens of the embedder's tokenizer (without special tokens); must fit "
            "the embedder's max_seq_length."
        },
    )
    chunk_overlap: int = field(
        default=40, metadata={"help": "Tokens shared by consecutive chunks of a document (< chunk_tokens)."}
    )
    batch_size: int = field(default=32, metadata={"help": "Texts per embedder / reranker forward pass."})
    shard_size: int = field(
        default=2048,
        metadata={
            "help": "Chunks embedded per shard while indexing: each shard is written to disk before the next "
            "starts (a killed build resumes from the last complete shard; memory holds one shard)."
        },
    )
    rrf_k: int = field(
        default=60,
        metadata={"help": "Constant of reciprocal rank fusion, score = sum 1 / (rrf_k + rank) (hybrid)."},
    )
    candidates: int = field(
        default=50,
        metadata={
            "help": "First-stage depth: chunks each retriever returns before hybrid fusion and reranking "
            "cut them to k (at least k is always used)."
        },
    )
    query_instruction: str | None = field(
        default=None,
        metadata={
            "help": "Text put before every query for the dense embedder; null = automatic (BGE English "
            "v1/v1.5 models get 'Represent this sentence for searching relevant passages: ', others none); "
            "'' = none."
        },
    )
    text_field: str | None = field(
        default=None,
        metadata={
            "help": "Corpus field holding the document text; null = the first of text, contents, content, "
            "page_result, html, body."
        },
    )
    html: str = field(
        default="auto",
        metadata={
            "help": "Convert document text from HTML (script/style/nav stripped): 'auto' (page_result/html "
            "fields and text that starts like an HTML page), 'always' or 'never'."
        },
    )
    rerank_max_length: int = field(
        default=512, metadata={"help": "Token limit of a (query, chunk) pair in the cross-encoder reranker."}
    )
    device: str | None = field(
        default=None,
        metadata={"help": "Torch device of the embedder and reranker: cpu, cuda, cuda:N; null = automatic."},
    )

    def __post_init__(self) -> None:
        from inference.retrieval.retrievers import RETRIEVERS

        if self.retriever not in RETRIEVERS:
            raise ConfigError(
                f"retrieval.retriever must be one of {', '.join(RETRIEVERS.names())}; got {self.retriever!r}"
            )
        if self.backend not in BACKEND_NAMES:
            raise ConfigError(
                f"retrieval.backend must be one of {', '.join(BACKEND_NAMES)}; got {self.backend!r}"
            )
        if not _is_int(self.chunk_tokens) or self.chunk_tokens < 8:
            raise ConfigError(f"retrieval.chunk_tokens must be an integer >= 8; got {self.chunk_tokens!r}")
        if not _is_int(self.chunk_overlap) or not 0 <= self.chunk_overlap < self.chunk_tokens:
            raise ConfigError(
                f"retrieval.chunk_overlap must be an integer in [0, chunk_tokens={self.chunk_tokens}); "
                f"got {self.chunk_overlap!r}"
            )
        for name in ("batch_size", "shard_size", "candidates"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ConfigError(f"retrieval.{name} must be an integer >= 1; got {value!r}")
        if not _is_int(self.rrf_k) or self.rrf_k < 0:
            raise ConfigError(
                f"retrieval.rrf_k must be an integer >= 0 (Cormack et al. 2009 use 60); got {self.rrf_k!r}"
            )
        if not _is_int(self.rerank_max_length) or self.rerank_max_length < 16:
            raise ConfigError(
                f"retrieval.rerank_max_length must be an integer >= 16; got {self.rerank_max_length!r}"
            )
        if self.query_instruction is not None and not isinstance(self.query_instruction, str):
            raise ConfigError(
                f"retrieval.query_instruction must be a string or null (automatic); got {self.query_instruction!r}"
            )
        if self.text_field is not None and (not isinstance(self.text_field, str) or not self.text_field):
            raise ConfigError(
                f"retrieval.text_field must be a non-empty field name or null (automatic); got {self.text_field!r}"
            )
        if self.html not in HTML_MODES:
            raise ConfigError(f"retrieval.html must be one of {', '.join(HTML_MODES)}; got {self.html!r}")
        if self.device is not None and (not isinstance(self.device, str) or not self.device.strip()):
            raise ConfigError(
                f"retrieval.device must be a torch device (cpu, cuda, cuda:N) or null; got {self.device!r}"
            )
