"""Hand-made evaluation rows (the runner's row format) whose report numbers can be worked out by hand."""

from __future__ import annotations

import pytest


def make_row(
    seed: int,
    iid: str,
    *,
    behaviour: str = "answerable",
    accuracy: float | None = 1.0,
    refused: bool = False,
    confidence: float | None = None,
    route: str | None = None,
    latency: float = 1.0,
    labels: dict | None = None,
    reused: int | None = None,
    record: dict | None = None,
) -> dict:
    """One ``<system>.jsonl`` row: EM = F1 = ROUGE-L = accuracy, strict EM absent unless set by the caller."""
    rec = {"response": "x", "logical_decisions": 2, "batched_passes": 4}
    if route is not None:
        rec["route"] = route
    rec.update(record or {})
    row = {
        "id": iid,
        "seed": seed,
        "expected_behaviour": behaviour,
        "gold_answers": ["x"],
        "record": rec,
        "scores": {
            "em": accuracy,
            "f1": accuracy,
            "accuracy": accuracy,
            "rouge_l": accuracy,
            "refused": refused,
            "should_refuse": behaviour == "unanswerable",
            "confidence": confidence,
        },
        "judge": {"judge": "label/1.3", "labels": labels or {}},
        "latency_s": latency,
        "batch_size": 2,
    }
    if reused is not None:
        row["reused_from_seed"] = reused
    return row


@pytest.fixture
def rows_factory():
    return make_row
