"""Every shipped config in configs/ loads with the loader of its command (no model is loaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.config import load_config
from inference.workflows.calibrate import parse_data_spec
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
    "calibrate-minilm.yaml": lambda path: parse_data_spec(str(path)),
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


def test_the_calibration_data_is_the_checkpoints_split_presented_as_evaluate_reads_it():
    sources, split = parse_data_spec(str(CONFIGS / "calibrate-minilm.yaml"))
    train = load_train_config(CONFIGS / "learned-minilm.yaml")
    for key in ("validation_fraction", "split_seed", "max_claims_per_query"):
        assert split[key] == getattr(train, key), key
    assert [s.name for s in sources] == [s.name for s in train.data]
    by_name = {s.name: s for s in sources}
    assert by_name["conflictqa"].path.endswith("conflictqa") and by_name["conflictqa"].options == {
        "aligned_evidence": True
    }
    # the other datasets exactly as training reads them
    for s in train.data:
        if s.name != "conflictqa":
            assert by_name[s.name] == s
