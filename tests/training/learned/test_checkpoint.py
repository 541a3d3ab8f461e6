"""Checkpoints: atomic writes (a failed save keeps the last good one), recovery, loading errors."""

from __future__ import annotations

import json
import os

import pytest
import torch

from evidential.errors import ConfigError
from training.learned import checkpoint as ck
from training.learned.model import EvidentialEvaluatorModel, LearnedModelConfig


@pytest.fixture(scope="module")
def model(tiny_encoder):
    torch.manual_seed(0)
    return EvidentialEvaluatorModel(
        LearnedModelConfig(encoder=str(tiny_encoder), max_length=32, head_hidden=8)
    )


def test_save_load_round_trip_is_exact(model, tmp_path):
    ck.save_checkpoint(tmp_path / "c", model, card={"note": "x"})
    loaded = ck.load_learned_model(tmp_path / "c", trainable=True)
    a, b = dict(model.named_parameters()), dict(loaded.named_parameters())
    assert set(a) == set(b) and all(torch.equal(a[n], b[n]) for n in a)
    card = json.loads((tmp_path / "c" / "model_card.json").read_text())
    assert card["note"] == "x" and "peft" in card["versions"]
    merged = ck.load_learned_model(tmp_path / "c", merge=True)  # LoRA merged for inference: same evidence
    with torch.no_grad():
        model.eval()
        e1 = model.evidence_matrices(["q"], [["some chunk text"]], [["a", "b"]])[0]
        e2 = merged.evidence_matrices(["q"], [["some chunk text"]], [["a", "b"]])[0]
    assert torch.allclose(e1, e2, atol=1e-5)


def test_a_crash_mid_save_keeps_the_last_good_checkpoint(model, tmp_path, monkeypatch):
    path = tmp_path / "c"
    ck.save_checkpoint(path, model, card={"version": 1})
    before = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("safetensors.torch.save_file", boom)
    with pytest.raises(OSError, match="disk full"):
        ck.save_checkpoint(path, model, card={"version": 2})
    after = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
    assert after == before  # untouched
    assert [p.name for p in tmp_path.iterdir()] == ["c"]  # no temporary folder left behind
    ck.load_learned_model(path)


def test_recovery_between_the_two_renames(model, tmp_path):
    path = tmp_path / "c"
    ck.save_checkpoint(path, model)
    os.replace(path, tmp_path / ".c.old")  # the state a crash between the two renames leaves
    assert ck.resolve_checkpoint(path) == tmp_path / ".c.old"
    ck.load_learned_model(path)


def test_loading_errors_say_what_is_missing(tmp_path):
    with pytest.raises(ConfigError, match="not found; train one with `evidential-rag train`"):
        ck.resolve_checkpoint(tmp_path / "none")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "heads.safetensors").write_bytes(b"")
    with pytest.raises(ConfigError, match="missing learned_config.json"):
        ck.resolve_checkpoint(tmp_path / "half")
    (tmp_path / "half" / "learned_config.json").write_text('{"encoder": 3}')
    with pytest.raises(ConfigError, match="model.encoder must be a model id or folder"):
        ck.load_learned_model(tmp_path / "half")


def test_atomic_dir_recovers_a_swap_cut_short(tmp_path):
    from training.learned.checkpoint import atomic_dir

    target = tmp_path / "last"
    with atomic_dir(target) as tmp:
        (tmp / "state.json").write_text("1")
    with atomic_dir(target) as tmp:
        (tmp / "state.json").write_text("2")
    assert (target / "state.json").read_text() == "2" and not (tmp_path / ".last.old").exists()
    assert atomic_dir.recover(target) is False  # nothing to do
    # killed between moving the previous folder aside and renaming the new one into place
    os.replace(target, tmp_path / ".last.old")
    assert atomic_dir.recover(target) is True
    assert (target / "state.json").read_text() == "2" and not (tmp_path / ".last.old").exists()
