"""FAISS index types (``retrieval.index_type``): Flat, HNSW, IVF-Flat and IVF-PQ built through ``build_index``,
their recall@5 against exact search, the recorded type and the refusal of another, training-size limits,
memory-mapped loading and bad factory strings.

The corpus is 2000 one-chunk passages; their 384-d vectors (the packaged MiniLM's dimension) come from a
table of clustered unit vectors (like real embeddings: neighbourhoods, not uniform noise) and chunking uses a
whitespace tokenizer, so building four indexes takes a few seconds and loads no model.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from evidential.errors import ConfigError
from inference.retrieval import build_index, build_retriever, load_index
from inference.retrieval.config import DEFAULT_EMBEDDER

N, DIM, N_QUERIES, K = 2000, 384, 100, 5
TYPES = {  # index_type -> the search settings it is tested with
    "Flat": [],
    "HNSW32": [],
    "IVF16,Flat": ["retrieval.index_search.nprobe=16"],  # every list: exact
    "IVF16,PQ96x4np": ["retrieval.index_search.nprobe=4"],
}
SETTINGS = ["retrieval.shard_size=500", "retrieval.index_train_size=1000"]


def clustered_unit_vectors(n: int, dim: int, seed: int, centers: int = 40) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centers, dim))
    x = c[rng.integers(0, centers, n)] + 0.9 * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


class WordTokenizer:
    """Whitespace tokens with character offsets: what chunk_text needs of a Hugging Face fast tokenizer."""

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=True, verbose=False):
        offsets = [m.span() for m in re.finditer(r"\S+", text)]
        return {"input_ids": list(range(len(offsets))), "offset_mapping": offsets}

    def num_special_tokens_to_add(self, pair=False):
        return 2


class TableEmbedder:
    """An embedder of table vectors: ``passage i`` → vectors[i], ``query j`` → queries[j] (the config's
    embedder name, so that the index checks pass); counts the documents it embeds."""

    name, max_seq_length, query_instruction = DEFAULT_EMBEDDER, 256, ""

    def __init__(self, vectors: np.ndarray, queries: np.ndarray) -> None:
        self.tokenizer, self.dim = WordTokenizer(), vectors.shape[1]
        self.vectors, self.queries, self.embedded = vectors, queries, 0

    def encode_documents(self, texts):
        self.embedded += len(texts)
        return self.vectors[[int(t.split()[1]) for t in texts]]

    def encode_queries(self, texts):
        return self.queries[[int(t.split()[1]) for t in texts]]

    def describe(self):
        return {"embedder": self.name, "embedder_path": "table", "backend": "sentence-transformers",
                "dim": self.dim, "max_seq_length": self.max_seq_length, "query_instruction": ""}  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def one_faiss_thread():
    """FAISS's OpenMP k-means slows down by orders of magnitude when its threads compete with other processes
    for the cores (training IVF16,PQ96x4np: 0.4 s with one thread, 52 s with two on a loaded 2-core machine)."""
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(threads)


@pytest.fixture(scope="module")
def table():
    vecs = clustered_unit_vectors(N, DIM, seed=0)
    rng = np.random.default_rng(1)
    q = vecs[rng.choice(N, N_QUERIES, replace=False)] + 0.05 * rng.standard_normal((N_QUERIES, DIM))
    q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    exact = np.argsort(-(q @ vecs.T), axis=1)[:, :K]
    return TableEmbedder(vecs, q), exact


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "passages.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"p{i}", "text": f"passage {i}"}) + "\n" for i in range(N)),
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def indexes(corpus, table, make_cfg, tmp_path_factory):
    """``index_type -> (path, meta)``, each built once through build_index."""
    emb, _ = table
    root = tmp_path_factory.mktemp("types")
    out = {}
    for spec in TYPES:
        path = root / spec.replace(",", "_")
        cfg = make_cfg(*SETTINGS, f"retrieval.index_type={spec}", *TYPES[spec])
        out[spec] = (path, build_index(corpus, path, cfg, embedder=emb, show_progress=False))
    return out


def _search(path, spec, cfg, emb):
    retriever = build_retriever(path, cfg, embedder=emb)
    results = retriever.search_batch([f"query {j}" for j in range(N_QUERIES)], K)
    return np.array([[int(c.id[1:].split("#")[0]) for c in r] + [-1] * (K - len(r)) for r in results])


def _recall(ids: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / K for a, b in zip(ids, exact)]))


@pytest.mark.parametrize("spec", list(TYPES))
def test_each_type_searches_with_recall_against_exact(spec, indexes, table, make_cfg):
    emb, exact = table
    path, meta = indexes[spec]
    cfg = make_cfg(*SETTINGS, f"retrieval.index_type={spec}", *TYPES[spec])
    ids = _search(path, spec, cfg, emb)
    assert ((ids >= 0) & (ids < N)).all() and all(len(set(row)) == K for row in ids)  # valid, distinct
    recall = _recall(ids, exact)
    print(f"\n{spec}: recall@5 vs exact {recall:.3f}, {meta['faiss_bytes']} bytes")
    if spec == "Flat":
        assert np.array_equal(ids, exact)
    elif spec == "IVF16,Flat":  # nprobe = nlist: every vector is scored exactly
        assert recall == 1.0
    elif spec == "HNSW32":
        assert recall >= 0.9  # measured 1.00 (efSearch 16)
    else:
        assert recall >= 0.4  # measured 0.50 (48-byte codes, nprobe 4)


def test_meta_records_the_type_and_its_training(indexes):
    for spec, (path, meta) in indexes.items():
        assert meta["index_type"] == spec == load_index(path).index_type
        assert json.loads((path / "meta.json").read_text())["index_type"] == spec
        assert meta["faiss_bytes"] == (path / "index.faiss").stat().st_size
        trained = spec.startswith("IVF")
        assert (meta["index_training"] is not None) == trained
        if trained:
            assert meta["index_training"]["vectors"] == 1000 and meta["index_training"]["seed"] == 0
    assert (
        indexes["IVF16,Flat"][1]["index_search"] == {"nprobe": 16}
        and indexes["Flat"][1]["index_search"] == {}
    )
    assert indexes["Flat"][1]["faiss_index"] == "IndexFlat"
    assert indexes["HNSW32"][1]["faiss_index"] == "IndexHNSWFlat"
    assert indexes["IVF16,PQ96x4np"][1]["faiss_index"] == "IndexIVFPQ"
    # PQ codes: 48 bytes a vector against Flat's 4 × 384
    assert indexes["IVF16,PQ96x4np"][1]["faiss_bytes"] < indexes["Flat"][1]["faiss_bytes"] / 10


def test_search_parameters_are_saved_with_the_index_and_overridden_by_the_config(indexes, make_cfg):
    import faiss

    path, _ = indexes["IVF16,Flat"]
    nprobe = lambda handle: faiss.extract_index_ivf(handle.faiss_index).nprobe  # noqa: E731
    assert nprobe(load_index(path)) == 16  # built with index_search.nprobe=16
    cfg = make_cfg("retrieval.index_type=IVF16,Flat", "retrieval.index_search.nprobe=2")
    handle = load_index(path, cfg)
    assert nprobe(handle) == 2
    handle.configure(make_cfg("retrieval.index_type=IVF16,Flat", "retrieval.index_search.nprobe=5").retrieval)
    assert nprobe(handle) == 5  # read again with the new setting
    with pytest.raises(
        ConfigError, match=r"retrieval\.index_search\.efSearch: index type 'IVF16,Flat' has no"
    ):
        load_index(path, make_cfg("retrieval.index_type=IVF16,Flat", "retrieval.index_search.efSearch=64"))


def test_another_configured_type_is_refused_naming_both(indexes, make_cfg, table):
    path, _ = indexes["HNSW32"]
    with pytest.raises(ConfigError) as info:
        load_index(path, make_cfg("retrieval.index_type=IVF16,Flat"))
    msg = str(info.value)
    assert "retrieval.index_type is 'IVF16,Flat' but the index at" in msg and "was built as 'HNSW32'" in msg
    assert "evidential-rag index" in msg and "retrieval.index_type=HNSW32" in msg
    with pytest.raises(ConfigError, match="was built as 'HNSW32'"):
        build_retriever(path, make_cfg(), embedder=table[0])  # the default Flat
    # no config: the index's own type; bm25 does not touch FAISS
    assert load_index(path).index_type == "HNSW32"
    assert build_retriever(path, make_cfg("retrieval.retriever=bm25")).name == "bm25"


def test_an_index_written_before_index_type_loads_as_flat(indexes, make_cfg, table, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(indexes["Flat"][0], old)
    meta = json.loads((old / "meta.json").read_text())
    for key in ("index_type", "index_training", "faiss_bytes"):
        del meta[key]
    meta["faiss_index"] = "IndexFlatIP"
    (old / "meta.json").write_text(json.dumps(meta))
    handle = load_index(old, make_cfg())
    assert handle.index_type == "Flat"
    assert np.array_equal(_search(old, "Flat", make_cfg(), table[0]), table[1])
    with pytest.raises(ConfigError, match="was built as 'Flat'"):
        load_index(old, make_cfg("retrieval.index_type=HNSW32"))


def test_mmap_loading_gives_the_same_results(indexes, make_cfg, table):
    emb, _ = table
    for spec, (path, _) in indexes.items():
        extra = [f"retrieval.index_type={spec}", *TYPES[spec]]
        plain = load_index(path, make_cfg(*extra))
        mapped = load_index(path, make_cfg(*extra, "retrieval.index_mmap=true"))
        d0, i0 = plain.faiss_index.search(emb.queries, K)
        d1, i1 = mapped.faiss_index.search(emb.queries, K)
        assert plain.read_mode == "read" and mapped.read_mode.startswith("mmap: ")
        assert np.array_equal(i0, i1) and np.allclose(d0, d1)
        assert ("IO_FLAG_MMAP)" in mapped.read_mode) == spec.startswith("IVF")


def test_too_few_training_vectors_is_refused_before_embedding(corpus, table, make_cfg, write_jsonl, tmp_path):
    emb, _ = table
    small = write_jsonl(
        tmp_path / "small.jsonl", [{"id": f"p{i}", "text": f"passage {i}"} for i in range(20)]
    )
    before = emb.embedded
    with pytest.raises(ConfigError) as info:
        build_index(
            small,
            tmp_path / "a",
            make_cfg("retrieval.index_type=IVF64,Flat"),
            embedder=emb,
            show_progress=False,
        )
    assert str(info.value).startswith(
        "retrieval.index_type='IVF64,Flat': IVF64 needs at least 64 training vectors but the corpus has only "
        "20 chunks; use Flat"
    )
    with pytest.raises(ConfigError, match=r"PQ48x8 needs at least 256 training vectors .* only 20 chunks"):
        build_index(
            small,
            tmp_path / "b",
            make_cfg("retrieval.index_type=IVF4,PQ48"),
            embedder=emb,
            show_progress=False,
        )
    cfg = make_cfg("retrieval.index_type=IVF16,Flat", "retrieval.index_train_size=10")
    with pytest.raises(
        ConfigError, match=r"retrieval\.index_train_size=10 is too few .* IVF16 needs at least 16"
    ):
        build_index(corpus, tmp_path / "c", cfg, embedder=emb, show_progress=False)
    assert emb.embedded == before  # refused before anything was embedded
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


def test_bad_factory_strings_and_search_parameters_are_config_errors(corpus, table, make_cfg, tmp_path):
    from inference.config import load_config

    with pytest.raises(ConfigError) as info:
        load_config(None, ["retrieval.index_type=IVF1024,PQ32x"])
    msg = str(info.value)
    assert msg.startswith(
        "retrieval.index_type='IVF1024,PQ32x' is not a FAISS index factory string (could not"
    )
    assert "HNSW32" in msg and "IVF1024,PQ32" in msg
    with pytest.raises(ConfigError, match=r"retrieval\.index_search must be a mapping"):
        load_config(None, ["retrieval.index_search.nprobe=0"])
    emb = table[0]
    before = emb.embedded
    # FAISS parses it, but PQ7 cannot split 384 dimensions: refused when the dimension is known
    with pytest.raises(
        ConfigError, match=r"retrieval\.index_type='IVF16,PQ7' does not give .* 384-d .* divides"
    ):
        build_index(corpus, tmp_path / "i", make_cfg("retrieval.index_type=IVF16,PQ7"), embedder=emb)
    with pytest.raises(
        ConfigError, match=r"retrieval\.index_search\.nprobe: index type 'Flat' has no search"
    ):
        build_index(corpus, tmp_path / "i", make_cfg("retrieval.index_search.nprobe=8"), embedder=emb)
    assert emb.embedded == before and not (tmp_path / "i").exists()


def test_a_finished_build_of_another_type_is_not_swapped_in(corpus, table, make_cfg, monkeypatch, tmp_path):
    """A build that finished but stopped before the swap is moved into place only if its type is the one
    configured now; otherwise the index is built again (its shards are gone)."""
    import inference.retrieval.index as index_mod

    emb, _ = table
    out, real_swap = tmp_path / "idx", index_mod._swap_in

    def crash(work, dest):
        raise OSError("killed during the swap")

    monkeypatch.setattr(index_mod, "_swap_in", crash)
    with pytest.raises(OSError, match="killed during the swap"):
        build_index(corpus, out, make_cfg(*SETTINGS), embedder=emb, show_progress=False)
    monkeypatch.setattr(index_mod, "_swap_in", real_swap)
    before = emb.embedded
    meta = build_index(
        corpus, out, make_cfg(*SETTINGS, "retrieval.index_type=HNSW32"), embedder=emb, show_progress=False
    )
    assert meta["index_type"] == "HNSW32" == load_index(out).index_type and emb.embedded == before + N
