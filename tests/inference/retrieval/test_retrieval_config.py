"""The ``retrieval`` config section: documented fields, validation naming the dotted field, cpu / paper YAML."""

from __future__ import annotations

from dataclasses import fields

import pytest

from evidential.errors import ConfigError
from inference.config import RunConfig, load_config
from inference.retrieval import RETRIEVERS, RetrievalConfig
from inference.retrieval.config import DEFAULT_EMBEDDER, RetrievalSettings


def test_every_field_is_documented_and_defaults_are_the_cpu_yaml():
    assert all(f.metadata.get("help") for f in fields(RetrievalConfig))
    assert load_config("cpu").retrieval == RetrievalConfig() == RunConfig().retrieval
    c = RetrievalConfig()
    assert (c.retriever, c.chunk_tokens, c.chunk_overlap, c.rrf_k, c.query_instruction) == (
        "dense",
        200,
        40,
        60,
        None,
    )
    assert set(RETRIEVERS.names()) == {"dense", "bm25", "hybrid"}


def test_paper_yaml_is_dense_bge_large_reranked_by_bge_reranker_to_k5():
    cfg = load_config("paper")
    assert cfg.retrieval.retriever == "dense" and cfg.k == 5
    assert (
        cfg.models.embedder == "BAAI/bge-large-en-v1.5" and cfg.models.reranker == "BAAI/bge-reranker-v2-m3"
    )
    assert cfg.retrieval.query_instruction is None  # automatic: the BGE instruction for bge-large-en-v1.5


@pytest.mark.parametrize(
    "override, field",
    [
        ("retrieval.retriever=splade", "retrieval.retriever"),
        ("retrieval.backend=faiss", "retrieval.backend"),
        ("retrieval.chunk_tokens=4", "retrieval.chunk_tokens"),
        ("retrieval.chunk_tokens=12.5", "retrieval.chunk_tokens"),
        ("retrieval.chunk_overlap=200", "retrieval.chunk_overlap"),
        ("retrieval.chunk_overlap=-1", "retrieval.chunk_overlap"),
        ("retrieval.batch_size=0", "retrieval.batch_size"),
        ("retrieval.shard_size=true", "retrieval.shard_size"),
        ("retrieval.candidates=0", "retrieval.candidates"),
        ("retrieval.rrf_k=-5", "retrieval.rrf_k"),
        ("retrieval.query_instruction=3", "retrieval.query_instruction"),
        ("retrieval.text_field=", "retrieval.text_field"),
        ("retrieval.html=yes", "retrieval.html"),
        ("retrieval.rerank_max_length=8", "retrieval.rerank_max_length"),
        ("retrieval.device=' '", "retrieval.device"),
        ("retrieval.nope=1", "retrieval.nope"),
    ],
)
def test_bad_values_fail_at_load_naming_the_field(override, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_config(None, [override])


def test_overrides_are_typed():
    cfg = load_config(
        None, ["retrieval.retriever=hybrid", "retrieval.query_instruction=''", "retrieval.rrf_k=0"]
    )
    assert (
        cfg.retrieval.retriever == "hybrid"
        and cfg.retrieval.query_instruction == ""
        and cfg.retrieval.rrf_k == 0
    )


def test_retrieval_settings_default_matches_the_run_config_defaults():
    default, run = RetrievalSettings(), RunConfig()
    assert default.models.embedder == run.models.embedder == DEFAULT_EMBEDDER
    assert default.models.reranker is run.models.reranker is None
    assert default.retrieval == run.retrieval


def test_chunk_overlap_message_names_the_chunk_length():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["retrieval.chunk_overlap=200"])
    assert str(err.value) == "retrieval.chunk_overlap must be an integer in [0, chunk_tokens=200); got 200"
    with pytest.raises(ConfigError) as err:
        load_config(None, ["retrieval.rrf_k=-5"])
    assert str(err.value) == "retrieval.rrf_k must be an integer >= 0 (Cormack et al. 2009 use 60); got -5"
