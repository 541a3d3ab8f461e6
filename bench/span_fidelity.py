"""Claim-extraction fidelity of learned-evaluator checkpoints on a training config's validation split (a
measurement, not a test).

The trainer's own validation metric ``span_fidelity`` (:func:`training.trainer.trainer.span_hits`): over
every human-labelled chunk of an open question whose label is a claim, the share whose repaired best span
(null margin 0) matches the labelled answer (:func:`training.utils.metrics.span_matches`); and the same over
the rows whose chunk states its label (:func:`training.trainer.trainer.span_stated`: a MuSiQue first-hop
paragraph is labelled with an answer it never names), overall and per source dataset. The validation
questions are the config's (split by question), so a checkpoint trained on that config never saw them.
Several checkpoints are measured on the same rows, one line each.

Usage: ``python bench/span_fidelity.py [--config configs/learned-minilm.yaml] [--set KEY=VALUE ...]
[--checkpoint checkpoints/learned-minilm ...] [--out outputs/bench_span_fidelity.json]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from evidential.errors import EvidentialError  # noqa: E402
from training.learned.checkpoint import load_learned_model  # noqa: E402
from training.trainer.config import load_train_config  # noqa: E402
from training.trainer.trainer import EvidentialTrainer, span_hits, span_stated  # noqa: E402
from training.utils.io import write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=str(ROOT / "configs/learned-minilm.yaml"))
    ap.add_argument(
        "--set", dest="overrides", action="append", default=[], help="a config override KEY=VALUE"
    )
    ap.add_argument(
        "--checkpoint", action="append", help="a checkpoint folder (repeat; default: the shipped one)"
    )
    ap.add_argument("--batch", type=int, default=8, help="validation queries per span pass")
    ap.add_argument("--out", default="outputs/bench_span_fidelity.json")
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    cfg = load_train_config(args.config, args.overrides)
    # prepare_data only reads and splits the configured data (the trainer writes nothing before train())
    _, val = EvidentialTrainer(cfg, ROOT / "outputs" / "span-fidelity-unused", progress=False).prepare_data()
    results = {
        "config": args.config,
        "overrides": args.overrides,
        "validation_queries": len(val),
        "checkpoints": [],
    }
    print(f"claim-extraction fidelity, {len(val)} validation queries of {args.config}")
    # the source of each row: the query key's prefix (ramdocs:…), one entry per row of span_rows
    sources, stated = [], []
    for ex in val:
        flags = span_stated([ex])
        sources += [ex.key.split(":", 1)[0]] * len(flags)
        stated += flags
    print(
        "| checkpoint | source | labelled chunks | span fidelity | chunks stating the label | fidelity on them | seconds |"
    )
    print("|---|---|---|---|---|---|---|")
    for ckpt in args.checkpoint or [str(ROOT / "checkpoints/learned-minilm")]:
        model = load_learned_model(ckpt).eval()
        t0 = time.perf_counter()
        hits: list[bool] = []
        for s in range(0, len(val), args.batch):
            hits += span_hits(model, val[s : s + args.batch])
        seconds = round(time.perf_counter() - t0, 1)
        by_source = {}
        for src in ["all", *sorted(set(sources))] if hits else []:
            rows = [i for i, s in enumerate(sources) if src in ("all", s)]
            on = [i for i in rows if stated[i]]
            by_source[src] = {
                "rows": len(rows),
                "span_fidelity": sum(hits[i] for i in rows) / len(rows),
                "rows_stated": len(on),
                "span_fidelity_stated": sum(hits[i] for i in on) / len(on) if on else None,
            }
            r = by_source[src]
            fs = "–" if r["span_fidelity_stated"] is None else f"{r['span_fidelity_stated']:.3f}"
            print(
                f"| {ckpt} | {src} | {r['rows']} | {r['span_fidelity']:.3f} | {r['rows_stated']} | {fs} | {seconds} |"
            )
        all_rows = by_source.get("all", {})
        results["checkpoints"].append(
            {
                "checkpoint": ckpt,
                "rows": len(hits),
                "span_fidelity": all_rows.get("span_fidelity"),
                "rows_stated": all_rows.get("rows_stated"),
                "span_fidelity_stated": all_rows.get("span_fidelity_stated"),
                "by_source": by_source,
                "seconds": seconds,
            }
        )
    write_json(args.out, results)


if __name__ == "__main__":
    try:
        main()
    except EvidentialError as exc:  # a bad config, override or checkpoint: one line, exit code 2
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
