"""The rows of an evaluation folder: reading ``instances.jsonl`` and ``<system>.jsonl``, scoring one answer.

The runner writes these files, the report and the sweep read them; this module sits below all three.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inference.evaluation import metrics as M
from inference.evaluation.datasets import EvalInstance
from inference.io import write_jsonl
from inference.types import DataError

__all__ = ["instance_scores", "load_instances", "load_rows"]


def load_rows(path: Path) -> list[dict]:
    """Rows of a ``<system>.jsonl`` written by the runner; a torn last line (a crash mid-write) is dropped
    and the file rewritten without it. Any other malformed line is an error naming the line."""
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    rows: list[dict] = []
    good = 0
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
            good = n
        except json.JSONDecodeError:
            if n >= len(lines) - 1:  # the last line (the file ends with "\n" when complete)
                break
            raise DataError(f"{path}:{n}: not a JSON row; delete the file to recompute it") from None
    if good < len([x for x in lines if x.strip()]):
        write_jsonl(path, rows)
    return rows


def load_instances(path: Path) -> dict[str, dict]:
    """The rows of an ``instances.jsonl`` (``{"instance": ..., "chunks": ..., ...}``) by instance id."""
    instances = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            p = json.loads(line)
            instances[p["instance"]["id"]] = p
    return instances


def instance_scores(
    inst: EvalInstance, record: Mapping[str, Any], confidence: float | None
) -> dict[str, Any]:
    """The per-instance scores of one answer record (output level, the same for every system): EM, F1,
    containment accuracy and ROUGE-L of the whole ``response``; ``short_em`` / ``short_f1`` (and, on
    RAMDocs, ``short_strict_em``) of the answers it commits to (:func:`~inference.evaluation.metrics.committed_answers`,
    listed as ``committed_answers``); refusal, confidence and the known answers the response states."""
    response = str(record.get("response") or "")
    golds = list(inst.gold_answers)
    refused = M.is_refusal(response)
    known = [*golds, *inst.wrong_answers]
    stated = [a for a in known if M.answer_contained(response, [a])]
    committed = M.committed_answers(record, inst.question)
    out: dict[str, Any] = {
        "em": M.exact_match(response, golds) if golds else None,
        "f1": M.token_f1(response, golds) if golds else None,
        "accuracy": M.answer_contained(response, golds) if golds else None,
        "rouge_l": M.rouge_l(response, golds) if golds else None,
        **M.short_answer_scores(committed, golds, inst.wrong_answers, strict=inst.dataset == "ramdocs"),
        "committed_answers": committed,
        "refused": refused,
        "should_refuse": inst.expected_behaviour == "unanswerable",
        "confidence": confidence,
        "stated_answers": stated,
    }
    if inst.dataset == "ramdocs":
        out["strict_em"] = float(M.strict_exact_match(stated, golds, inst.wrong_answers))
    return out
