"""Helpers of the trainer tests: tiny training configs (the tiny encoder fixture is in tests/conftest.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import yaml


def tiny_config(encoder: Path, data: Path, out: Path, limit: int = 12, **extra) -> Path:
    """Write a tiny training config over ``data`` (RAMDocs JSONL) and return its path."""
    cfg = {
        "model": {"encoder": str(encoder), "max_length": 64, "head_hidden": 16, "lora_r": 4},
        "data": [{"name": "ramdocs", "path": str(data), "limit": limit}],
        "epochs": 2,
        "batch_queries": 3,
        "max_chunks_per_query": 3,
        "save_every_steps": 1,
        "validation_fraction": 0.25,
        **extra,
    }
    path = out / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def kill_mid_epoch(
    proc: subprocess.Popen,
    out: Path,
    kill: Callable[[subprocess.Popen], None] | None = None,
    timeout_s: float = 240,
) -> int:
    """Wait until the training run writing ``out`` has saved ``last/`` at step >= 2 in the middle of an epoch,
    kill it (``kill``; default SIGKILL to ``proc`` and wait) and return the step it was killed at.

    Fails the test with the process's output when training ends first or ``timeout_s`` passes.
    """
    state_file = out / "last" / "trainer_state.json"
    deadline = time.time() + timeout_s
    while time.time() < deadline and proc.poll() is None:
        try:
            state = json.loads(state_file.read_text())
        except (OSError, json.JSONDecodeError):
            state = {}
        if state.get("global_step", 0) >= 2 and state.get("step_in_epoch", 0) > 0:
            if kill is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            else:
                kill(proc)
            return state["global_step"]
        time.sleep(0.01)
    raise AssertionError(f"training ended before it could be killed: {proc.communicate()[0][-2000:]!r}")
