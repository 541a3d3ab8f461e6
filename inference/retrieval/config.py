"""Configuration of retrieval and indexing (the ``retrieval`` section of a run config).

The embedder and reranker are named in ``models.embedder`` / ``models.reranker``; this section says how
they are used. Every field documents itself (``metadata["help"]``) and a bad value fails at load time with a
:class:`~evidential.errors.ConfigError` naming the dotted field (e.g. ``retrieval.chunk_overlap``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evidential.errors import ConfigError
from evidential.registry import Registry
from training.utils.configio import check_fields

__all__ = [
    "BACKEND_NAMES",
    "DEFAULT_EMBEDDER",
    "FLAGEMBEDDING_REMOVED",
    "HTML_MODES",
    "RETRIEVERS",
    "RetrievalConfig",
    "RetrievalModels",
    "RetrievalSettings",
    "check_factory_syntax",
    "faiss_reason",
]

BACKEND_NAMES = ("sentence-transformers",)
HTML_MODES = ("auto", "always", "never")
DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"
FLAGEMBEDDING_REMOVED = (
    "retrieval.backend=flagembedding: FlagEmbedding support was removed because FlagEmbedding 1.4.2 does not "
    "import with transformers 5; BGE embedders and rerankers (e.g. BAAI/bge-m3, BAAI/bge-reranker-v2-m3) load "
    "through sentence-transformers, which is what runs: set retrieval.backend=sentence-transformers (the "
    "default) or delete the line"
)

# name -> factory(handle, retrieval_config, embedder) -> Retriever; filled by inference.retrieval.retrievers.
# It lives here so that the config validates ``retrieval.retriever`` without importing the retrievers.
RETRIEVERS: Registry[Callable[..., Any]] = Registry("retriever")


def _positive_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _is_search_params(v: Any) -> bool:
    return isinstance(v, dict) and all(
        isinstance(k, str) and k.strip() and _positive_number(x) for k, x in v.items()
    )


def faiss_reason(exc: Exception) -> str:
    """The useful part of a FAISS C++ error (``... at index_factory.cpp:1228: could not parse ...``)."""
    text = " ".join(str(exc).split())
    match = re.search(r"\.(?:cpp|h):\d+: (?:Error: '.*?' failed: )?(.*)$", text)
    return (match.group(1) if match else text).strip()


def check_factory_syntax(spec: str) -> None:
    """Refuse a ``retrieval.index_type`` FAISS cannot parse (checked at config load, without a corpus).

    Whether a string fits the embedder's dimension (``PQ<M>`` needs M to divide it) is checked when the
    index is built and the dimension is known.

    Raises:
        ConfigError: FAISS's factory cannot parse ``spec``, naming the field and valid examples.
    """
    import faiss

    try:
        faiss.index_factory(384, spec, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        reason = faiss_reason(exc)
        if "could not parse" in reason or "not recognized" in reason:
            raise ConfigError(
                f"retrieval.index_type={spec!r} is not a FAISS index factory string ({reason}); use one such as "
                "Flat, HNSW32, IVF1024,PQ32, IVF256,Flat or OPQ16,IVF1024,PQ16 "
                "(https://github.com/facebookresearch/faiss/wiki/The-index-factory)"
            ) from None
        # anything else depends on the dimension (e.g. PQ's M must divide it): checked at build time


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
            "help": "Library that runs the embedder and reranker: 'sentence-transformers' (SentenceTransformer / "
            "CrossEncoder, which also load the BGE models, e.g. BAAI/bge-m3 and BAAI/bge-reranker-v2-m3). "
            "FlagEmbedding support was removed: its 1.4.2 release does not import with transformers 5.",
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
    index_type: str = field(
        default="Flat",
        metadata={
            "help": "FAISS index over the chunk embeddings, as a faiss.index_factory string (inner product): "
            "'Flat' (exact, 4·dim bytes a vector), 'HNSW32' (graph: fast, a little more memory than Flat), "
            "'IVF256,Flat' (inverted lists, exact vectors), 'IVF1024,PQ32' (inverted lists + 32-byte product "
            "codes), 'OPQ16,IVF1024,PQ16' (rotated, 16-byte codes), 'PQ32', 'SQ8'. Types that need training "
            "are trained on index_train_size sampled vectors; append np to a PQ part (IVF1024,PQ32np) to skip "
            "FAISS's slow polysemous training (it only helps the ht search parameter). An index is searched "
            "with the type it was built with (a different value here is refused when it is loaded).",
            "must": "be a FAISS index factory string such as Flat, HNSW32, IVF1024,PQ32, IVF256,Flat or "
            "OPQ16,IVF1024,PQ16",
        },
    )
    index_train_size: int = field(
        default=100_000,
        metadata={
            "help": "Vectors that train an index_type that needs training (IVF, PQ, OPQ, SQ): a random "
            "sample of the corpus's embeddings (seeded by the run config's seed), or all of them when the "
            "corpus is smaller. IVF<nlist> needs at least nlist (FAISS advises 30-256 × nlist) and 8-bit PQ "
            "at least 256 (advised 9984); memory: index_train_size × dim × 4 bytes while training.",
            "range": (1, None),
        },
    )
    index_search: dict[str, float] = field(
        default_factory=dict,
        metadata={
            "help": "Search-time parameters of the FAISS index, set through faiss.ParameterSpace: nprobe "
            "(IVF: inverted lists visited per query, up to nlist; FAISS's default 1 has low recall), "
            "efSearch (HNSW: candidate list depth; default 16), quantizer_efSearch, max_codes, ht; e.g. "
            "{nprobe: 32}. The values of the config that built an index are saved in it; at search time these "
            "override them ({} = as saved, else FAISS's defaults). A parameter the type lacks is an error.",
            "check": _is_search_params,
            "must": "be a mapping of FAISS search parameter names to positive numbers, e.g. {nprobe: 32} "
            "or {efSearch: 64}",
        },
    )
    index_mmap: bool = field(
        default=False,
        metadata={
            "help": "Memory-map index.faiss instead of reading it into memory: the OS pages it in from disk "
            "as searches touch it. IVF types map their inverted lists (faiss.IO_FLAG_MMAP); Flat, PQ, SQ "
            "and HNSW map their codes and graph (faiss.IO_FLAG_MMAP_IFC); what FAISS cannot map (e.g. "
            "quantizer centroids, OPQ matrices) is read into memory as usual.",
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
        if self.backend == "flagembedding":
            raise ConfigError(FLAGEMBEDDING_REMOVED)
        check_fields(self, "retrieval")
        self.index_type = self.index_type.strip()
        if self.index_type != "Flat":
            check_factory_syntax(self.index_type)
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
