"""Atomic output writing and JSONL reading (implemented in :mod:`training.utils.io`, re-exported here)."""

from training.utils.io import atomic_write_text, iter_jsonl, rounded, write_json, write_jsonl

__all__ = ["atomic_write_text", "iter_jsonl", "rounded", "write_json", "write_jsonl"]
