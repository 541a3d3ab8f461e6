"""Data-parallel training on real RAMDocs rows: two gloo CPU processes under ``accelerate launch`` train the
weights one process trains with the same global batch, and a killed two-process run resumes to the
uninterrupted run's weights."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from training.learned.model import EvidentialEvaluatorModel
from training.trainer.config import load_train_config
from training.trainer.distributed import DataParallel, shard_bounds
from training.trainer.trainer import EvidentialTrainer

from .conftest import kill_mid_epoch, tiny_config

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def ramdocs(shared_data):
    return shared_data / "ramdocs" / "RAMDocs_test.jsonl"


@pytest.fixture(scope="module")
def still_encoder(tmp_path_factory, tiny_encoder_builder) -> Path:
    """A tiny random BERT without dropout: processes that draw different dropout masks than one process
    would could not give its weights."""
    torch.manual_seed(0)
    return tiny_encoder_builder(
        tmp_path_factory.mktemp("still-encoder"), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )


def _config(encoder: Path, data: Path, out: Path, **extra) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    return tiny_config(
        encoder,
        data,
        out,
        limit=12,
        epochs=2,
        batch_queries=4,
        device="cpu",
        model={
            "encoder": str(encoder),
            "max_length": 64,
            "head_hidden": 16,
            "lora_r": 4,
            "lora_dropout": 0.0,
            "head_dropout": 0.0,
        },
        **extra,
    )


def _launch(config: Path, output: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",  # on a machine without GPUs: torchrun processes; the trainer joins them over gloo
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "-m",
        "inference.cli",
        "train",
        "--config",
        str(config),
        "--output",
        str(output),
        "--no-progress",
        *extra,
    ]


ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}


def _weights(run: Path) -> dict[str, torch.Tensor]:
    best = run / "best"
    out = {f"heads.{k}": v for k, v in load_file(str(best / "heads.safetensors")).items()}
    out.update(
        {f"adapter.{k}": v for k, v in load_file(str(best / "adapter" / "adapter_model.safetensors")).items()}
    )
    return out


def _max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the launcher and every process under it (torchrun starts each trainer in a session of its
    own, so killing the launcher's process group would leave them running)."""
    import psutil

    tree = psutil.Process(proc.pid)
    victims = [*tree.children(recursive=True), tree]
    for p in victims:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(victims, timeout=30)
    proc.wait()


@pytest.fixture(scope="module")
def two_process_run(still_encoder, ramdocs, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dp")
    cfg = _config(still_encoder, ramdocs, tmp / "cfg")
    done = subprocess.run(
        _launch(cfg, tmp / "two"), env=ENV, cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return cfg, tmp / "two"


def test_shard_bounds_cover_the_batch_once():
    for n in range(0, 9):
        for parts in range(1, 5):
            bounds = [shard_bounds(n, parts, i) for i in range(parts)]
            assert [i for a, b in bounds for i in range(a, b)] == list(range(n))
            sizes = [b - a for a, b in bounds]
            assert max(sizes) - min(sizes) <= 1


def test_a_world_of_one_is_the_identity():
    dp = DataParallel(cpu=True)
    assert (dp.world, dp.rank, dp.is_main, dp.distributed) == (1, 0, True, False)
    assert dp.shard([1, 2, 3]) == ([1, 2, 3], 0)
    t = torch.tensor([1.0, 2.0])
    assert dp.sum(t) is t and dp.gather("x") == ["x"]


def test_two_processes_train_the_weights_of_one(two_process_run, tmp_path):
    cfg_path, two = two_process_run
    cfg = load_train_config(cfg_path)
    # one process, the same global batch of 4 queries, in two passes of 2: the shares the processes take
    halves = EvidentialTrainer(
        load_train_config(cfg_path, ["gradient_accumulation_steps=2"]), tmp_path / "halves", progress=False
    ).train()
    one = EvidentialTrainer(cfg, tmp_path / "one", progress=False).train()
    two_metrics = json.loads((two / "metrics.json").read_text())
    card = json.loads((two / "best" / "model_card.json").read_text())
    assert card["processes"] == 2
    # every training query once per epoch, 4 per optimizer step, 2 epochs
    assert two_metrics["global_step"] == one["global_step"] == 2 * -(-one["train_queries"] // 4)
    w_two, w_halves, w_one = _weights(two), _weights(tmp_path / "halves"), _weights(tmp_path / "one")
    # the gradient summed over the processes is the one process's gradient over the same two halves
    assert _max_diff(w_two, w_halves) < 1e-5  # 0 when both use one thread (as under xdist)
    assert two_metrics["loss"] == pytest.approx(halves["loss"], rel=1e-5)
    # and the whole batch's, to float rounding (test_a_split_step_has_the_whole_batch_gradient): the
    # losses agree; AdamW's normalised update turns the rounding of a near-zero gradient into up to lr
    # per step, so the weights agree to a few lr
    assert two_metrics["loss"] == pytest.approx(one["loss"], rel=1e-4)
    assert two_metrics["routes"] == one["routes"]
    assert _max_diff(w_two, w_one) < 2 * cfg.head_learning_rate


def test_a_split_step_has_the_whole_batch_gradient(still_encoder, ramdocs, tmp_path):
    """Parts of a batch, each normalised by the whole batch's row counts, add up to the whole batch's
    loss and gradient (what every process of a data-parallel step and every accumulation pass computes)."""
    cfg = load_train_config(_config(still_encoder, ramdocs, tmp_path, gradient_accumulation_steps=3))
    trainer = EvidentialTrainer(cfg, tmp_path / "run", progress=False)
    train, _ = trainer.prepare_data()
    batch = train[:5]
    torch.manual_seed(0)
    model = EvidentialEvaluatorModel(cfg.model)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]

    whole = trainer.losses(model, batch, epoch_progress=0.3)
    whole["total"].backward()
    want = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]
    model.zero_grad(set_to_none=True)
    split = trainer._split_step(model, batch, epoch_progress=0.3)
    got = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    assert set(split) == {k for k in whole if not k.startswith("_")}
    for key in split:
        assert float(split[key]) == pytest.approx(float(whole[key].detach()), rel=1e-5), key
    scale = max(float(w.abs().max()) for w in want)
    assert max(float((g - w).abs().max()) for g, w in zip(got, want)) < 1e-5 * scale
    counts = trainer.term_counts(model, batch, 0.3)
    assert counts[0] == sum(len(ex.chunks) for ex in batch)  # every RAMDocs chunk is labelled
    assert counts[1] == len(batch)


def test_killed_two_process_run_resumes_to_the_uninterrupted_weights(two_process_run, tmp_path):
    cfg_path, two = two_process_run
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        _launch(cfg_path, out),
        env=ENV,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    kill_mid_epoch(proc, out, kill=_kill_tree)
    saved = torch.load(out / "last" / "optimizer.pt", weights_only=False)
    assert len(saved["rng_by_rank"]) == 2  # each process's RNG state is kept
    done = subprocess.run(
        _launch(cfg_path, out, "--resume"), env=ENV, cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (out / "last").exists()
    resumed = json.loads((out / "metrics.json").read_text())
    full = json.loads((two / "metrics.json").read_text())
    assert resumed["global_step"] == full["global_step"]
    assert resumed["loss"] == pytest.approx(full["loss"], rel=1e-6)
    assert _max_diff(_weights(out), _weights(two)) == 0.0
