"""Prompt vs learned evaluator on the SAME validation questions (a benchmark, not a test).

Both evaluators see the validation split of a training config (the questions the learned checkpoint never
trained on), each query's chunks and its candidate frame (gold + wrong answers, as the dataset lists them),
and feed the same fusion and routing. Reported per evaluator: claim accuracy against the chunk labels, mean
evidence by document type, route accuracy against the label-derived behaviour, ECE (15 bins) of the fused
confidence, RAMDocs strict exact match (MADAM-RAG's protocol) and seconds per query.

Usage::

    python bench/learned_vs_prompt.py [--config configs/learned-minilm.yaml] [--checkpoint checkpoints/learned-minilm]
        [--sources ramdocs] [--limit 40] [--backend llamacpp] [--out outputs/bench_learned_vs_prompt.json]

The last line printed is one JSON object with both evaluators' metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from inference.backends import BackendConfig  # noqa: E402
from inference.evaluators import build_evaluator  # noqa: E402
from inference.evaluators.config import EvaluatorConfig  # noqa: E402
from inference.io import write_json  # noqa: E402
from inference.types import Chunk  # noqa: E402
from training.trainer.config import load_train_config  # noqa: E402
from training.trainer.trainer import EvidentialTrainer, score_outcomes  # noqa: E402


def run(evaluator, examples, batch: int):
    """Evaluate every example (batched), returning (example with the evaluator's frame, evidence) pairs."""
    outcomes, t0 = [], time.perf_counter()
    for s in range(0, len(examples), batch):
        group = examples[s : s + batch]
        results = evaluator.evaluate_batch(
            [ex.query for ex in group],
            [[Chunk(f"c{i}", t, rank=i + 1) for i, t in enumerate(ex.chunks)] for ex in group],
            [list(ex.claims) for ex in group],
        )
        for ex, res in zip(group, results):
            # the frame opens with the candidates in order; claims the evaluator added come after them
            assert res.claim_texts[: len(ex.claims)] == list(ex.claims)
            outcomes.append((replace(ex, claims=res.claim_texts), res.evidence))
    return outcomes, (time.perf_counter() - t0) / max(len(examples), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/learned-minilm.yaml")
    ap.add_argument("--checkpoint", default="checkpoints/learned-minilm")
    ap.add_argument("--sources", default="ramdocs", help="comma-separated source datasets to keep")
    ap.add_argument("--limit", type=int, default=40, help="validation queries (0: all)")
    ap.add_argument("--backend", default="llamacpp", help="prompt evaluator backend (transformers, llamacpp)")
    ap.add_argument("--batch", type=int, default=4, help="queries per batched call")
    ap.add_argument("--evaluators", default="learned,prompt", help="which evaluators to run")
    ap.add_argument("--out", default="outputs/bench_learned_vs_prompt.json")
    args = ap.parse_args()
    cfg = load_train_config(args.config)
    _, val = EvidentialTrainer(cfg, "/nonexistent", progress=False).prepare_data()
    keep = set(args.sources.split(","))
    val = [ex for ex in val if ex.source in keep]
    if args.limit:
        val = val[: args.limit]
    report: dict = {"queries": len(val), "sources": sorted(keep), "config": args.config, "evaluators": {}}
    chosen = set(args.evaluators.split(","))
    for name, ecfg in (
        ("learned", EvaluatorConfig(name="learned", checkpoint=args.checkpoint)),
        ("prompt", EvaluatorConfig(name="prompt", backend=BackendConfig(name=args.backend))),
    ):
        if name not in chosen:
            continue
        evaluator = build_evaluator(ecfg)
        outcomes, per_query = run(evaluator, val, args.batch)
        metrics = score_outcomes(outcomes, support_threshold=1.0, lam=cfg.loss.lam, rule=cfg.loss.rule)
        metrics["seconds_per_query"] = round(per_query, 3)
        report["evaluators"][name] = metrics
        print(
            f"{name}: " + ", ".join(f"{k} {v:.3f}" for k, v in metrics.items() if isinstance(v, float)),
            flush=True,
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, report)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
