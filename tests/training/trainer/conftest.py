"""Helpers of the trainer tests: tiny training configs (the tiny encoder fixture is in tests/conftest.py)."""

from __future__ import annotations

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
