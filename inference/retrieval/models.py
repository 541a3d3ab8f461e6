"""Model plumbing of retrieval: the dense embedder and the cross-encoder reranker.

Both run on sentence-transformers by default (``SentenceTransformer`` / ``CrossEncoder``): the same code path
loads the packaged all-MiniLM-L6-v2 (offline), a hub id (``BAAI/bge-large-en-v1.5``,
``BAAI/bge-reranker-v2-m3``, ``BAAI/bge-m3``) or a local folder. sentence-transformers is the only backend:
FlagEmbedding support was removed because its 1.4.2 release does not import with transformers 5 (a config
that still says ``retrieval.backend: flagembedding`` fails at load time saying so).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from evidential.errors import ConfigError
from inference.retrieval.config import BACKEND_NAMES, FLAGEMBEDDING_REMOVED
from inference.types import Chunk

__all__ = [
    "BGE_EN_INSTRUCTION",
    "Embedder",
    "Reranker",
    "default_query_instruction",
    "resolve_model_path",
]

BGE_EN_INSTRUCTION = "Represent this sentence for searching relevant passages: "
BGE_ZH_INSTRUCTION = "为这个句子生成表示以用于检索相关文章："
_BGE_EN = re.compile(r"bge-(small|base|large)-en(-v1\.5)?$")
_BGE_ZH = re.compile(r"bge-(small|base|large)-zh(-v1\.5)?$")


def default_query_instruction(model: str) -> str:
    """The query instruction a model was trained with: BGE English (Chinese) v1/v1.5 models get theirs, others ''.

    >>> default_query_instruction("BAAI/bge-large-en-v1.5")
    'Represent this sentence for searching relevant passages: '
    >>> default_query_instruction("sentence-transformers/all-MiniLM-L6-v2")
    ''
    """
    name = model.rstrip("/").rsplit("/", 1)[-1].lower()
    if _BGE_EN.search(name):
        return BGE_EN_INSTRUCTION
    if _BGE_ZH.search(name):
        return BGE_ZH_INSTRUCTION
    return ""


def resolve_model_path(model: str, field: str) -> str:
    """Resolve a model name for loading: packaged models offline, local folders checked, hub ids unchanged.

    Raises:
        ConfigError: A packaged model that is not installed, or a local path (``/``, ``./``, ``~``) that does
            not exist, naming ``field`` (e.g. ``models.embedder``).
    """
    from pathlib import Path

    from inference.backends.models import BackendError, resolve_sentence_transformer

    try:
        path = resolve_sentence_transformer(model)
    except BackendError as exc:
        raise ConfigError(f"{field}: {exc}") from None
    p = Path(path).expanduser()
    if path.startswith(("/", "./", "../", "~")) and not p.exists():
        raise ConfigError(f"{field}: model folder {path} not found; give an existing folder or a hub id")
    return str(p) if p.exists() else path


def _load_error(field: str, model: str, exc: Exception) -> ConfigError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return ConfigError(
        f"{field}: cannot load {model!r} ({type(exc).__name__}: {first}); give a local folder or make the "
        "model available in the Hugging Face cache (no download happens with HF_HUB_OFFLINE=1)"
    )


def _check_backend(backend: str) -> None:
    """Refuse a backend other than sentence-transformers (``flagembedding`` with the reason it was removed)."""
    if backend == "flagembedding":
        raise ConfigError(FLAGEMBEDDING_REMOVED)
    if backend not in BACKEND_NAMES:
        raise ConfigError(f"retrieval.backend must be one of {', '.join(BACKEND_NAMES)}; got {backend!r}")


@functools.lru_cache(maxsize=4)
def _sentence_transformer(path: str, device: str | None):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device=device)


@functools.lru_cache(maxsize=2)
def _cross_encoder(path: str, device: str | None, max_length: int):
    from sentence_transformers import CrossEncoder

    return CrossEncoder(path, device=device, max_length=max_length)


class Embedder:
    """A dense embedder: documents and queries → L2-normalized float32 vectors (cosine = inner product).

    Args:
        model: Hub id, local folder or ``packaged:<name>`` (``models.embedder``); the hub ids of
            all-MiniLM-L6-v2 load the packaged copy.
        query_instruction: Text put before queries; ``None`` = :func:`default_query_instruction`.
        backend: ``sentence-transformers`` (the only one; kept so that configs name it).
        device: Torch device, ``None`` = automatic.
        batch_size: Texts per forward pass.

    Raises:
        ConfigError: The model cannot be found or loaded, or the backend is unavailable.
    """

    def __init__(
        self,
        model: str,
        *,
        query_instruction: str | None = None,
        backend: str = "sentence-transformers",
        device: str | None = None,
        batch_size: int = 32,
    ) -> None:
        self.name = model
        self.backend = backend
        self.batch_size = batch_size
        self.query_instruction = (
            default_query_instruction(model) if query_instruction is None else query_instruction
        )
        _check_backend(backend)
        self.path = resolve_model_path(model, "models.embedder")
        try:
            self.model = _sentence_transformer(self.path, device)
        except (OSError, ValueError) as exc:
            raise _load_error("models.embedder", model, exc) from None
        self.tokenizer = self.model.tokenizer
        self.max_seq_length = int(self.model.max_seq_length or self.tokenizer.model_max_length)
        self.dim = int(self.model.get_embedding_dimension())

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(out, dtype=np.float32).reshape(len(texts), self.dim)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        """``[n, dim]`` float32 unit vectors of document chunks (no instruction)."""
        return self._encode(list(texts))

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        """``[n, dim]`` float32 unit vectors of queries, each prefixed with :attr:`query_instruction`."""
        return self._encode([self.query_instruction + q for q in queries])

    def describe(self) -> dict[str, Any]:
        return {
            "embedder": self.name,
            "embedder_path": self.path,
            "backend": self.backend,
            "dim": self.dim,
            "max_seq_length": self.max_seq_length,
            "query_instruction": self.query_instruction,
        }


class Reranker:
    """A cross-encoder reranker (paper: BAAI/bge-reranker-v2-m3) through sentence-transformers' ``CrossEncoder``.

    Args:
        model: Hub id, local folder or ``packaged:<name>`` (``models.reranker``).
        backend: ``sentence-transformers`` (the only one).
        device: Torch device, ``None`` = automatic.
        batch_size: Pairs per forward pass.
        max_length: Token limit of a (query, chunk) pair.

    Raises:
        ConfigError: The model cannot be found or loaded, or the backend is unavailable.
    """

    def __init__(
        self,
        model: str,
        *,
        backend: str = "sentence-transformers",
        device: str | None = None,
        batch_size: int = 32,
        max_length: int = 512,
    ) -> None:
        self.name = model
        self.backend = backend
        self.batch_size = batch_size
        _check_backend(backend)
        self.path = resolve_model_path(model, "models.reranker")
        try:
            self.model = _cross_encoder(self.path, device, max_length)
        except (OSError, ValueError) as exc:
            raise _load_error("models.reranker", model, exc) from None

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Relevance scores of ``(query, text)`` pairs, one batched pass (higher = more relevant)."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        out = self.model.predict(list(pairs), batch_size=self.batch_size, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32).reshape(len(pairs), -1)[:, 0]

    def rerank(self, query: str, chunks: Sequence[Chunk], k: int) -> list[Chunk]:
        """The ``k`` best of ``chunks`` for ``query`` by cross-encoder score, ranked 1..k (score = reranker score).

        Ties keep the first-stage order. The input chunks are not modified.
        """
        return self.rerank_batch([query], [chunks], k)[0]

    def rerank_batch(
        self, queries: Sequence[str], chunk_lists: Sequence[Sequence[Chunk]], k: int
    ) -> list[list[Chunk]]:
        """:meth:`rerank` for many queries with all (query, chunk) pairs scored in one call."""
        if len(queries) != len(chunk_lists):
            raise ValueError(f"{len(queries)} queries but {len(chunk_lists)} chunk lists")
        pairs = [(q, c.text) for q, cs in zip(queries, chunk_lists) for c in cs]
        scores = self.score(pairs)
        out, pos = [], 0
        for cs in chunk_lists:
            s = scores[pos : pos + len(cs)]
            pos += len(cs)
            order = sorted(range(len(cs)), key=lambda i: (-float(s[i]), i))[:k]
            out.append(
                [
                    Chunk(cs[i].id, cs[i].text, cs[i].source, rank, float(s[i]))
                    for rank, i in enumerate(order, 1)
                ]
            )
        return out
