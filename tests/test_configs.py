"""Every shipped config in configs/ loads with the loader of its command (no model is loaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.config import load_config
from inference.workflows.distill import load_distill_config
from training.sft.recipe import load_sft_config
from training.trainer.config import load_train_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

# config file → the loader of the command that reads it; a new config must be added here
LOADERS = {
    "cpu.yaml": load_config,
    "paper.yaml": load_config,
    "serve-llama3-70b-vllm.yaml": load_config,
    "learned-minilm.yaml": load_train_config,
    "learned-minilm-credibility.yaml": load_train_config,
    "learned-bge-large-gpu.yaml": load_train_config,
    "distill-minilm.yaml": load_distill_config,
    "sft-llama3-8b.yaml": load_sft_config,
    "sft-smollm2.yaml": load_sft_config,
}


def test_every_config_has_a_loader():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(LOADERS)


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_config_loads(name):
    assert LOADERS[name](CONFIGS / name) is not None


def test_scale_configs_say_what_they_scale():
    serve = load_config(CONFIGS / "serve-llama3-70b-vllm.yaml")
    for backend in (serve.evaluator.backend, serve.generator.backend):
        assert (backend.name, backend.model) == ("vllm", "meta-llama/Meta-Llama-3-70B-Instruct")
        assert backend.tensor_parallel_size == 4
    train = load_train_config(CONFIGS / "learned-bge-large-gpu.yaml")
    assert (train.model.encoder, train.model.max_length, train.mixed_precision) == (
        "BAAI/bge-large-en-v1.5",
        512,
        "bf16",
    )
    # the same data and losses as the CPU default
    cpu = load_train_config(CONFIGS / "learned-minilm.yaml")
    assert train.data == cpu.data and train.loss == cpu.loss
