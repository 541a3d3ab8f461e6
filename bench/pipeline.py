"""EvidentialRAG vs Naive RAG, side by side in one run (a benchmark, not a test).

Same retriever (an index of the questions' own RAMDocs documents), same generator model and decoding
settings, same k. For each batch of questions the four systems run back to back — Naive RAG, EvidentialRAG
with the learned evaluator, with the prompt evaluator in its JSON mode, and with the prompt evaluator in its
``logprobs`` mode (``evaluator.scoring=logprobs``, claims from the learned span head unless
``--logprob-claims generate``) — so machine noise hits them alike. Prints per-query
latency by stage and the relative cost (wall time per query vs Naive RAG); the last line is one JSON object
``{"relative_cost_learned": …, "relative_cost_prompt": …, "relative_cost_prompt_logprobs": …,
"batched_passes_prompt": …}``.

Usage: ``python bench/pipeline.py [--data FILE] [--limit 12] [--batch 4] [--out outputs/bench_pipeline.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from inference.backends import load_backend  # noqa: E402
from inference.config import load_config  # noqa: E402
from inference.evaluators import PromptEvaluator, build_evaluator, make_aligner  # noqa: E402
from inference.generation import build_generator  # noqa: E402
from inference.io import write_json, write_jsonl  # noqa: E402
from inference.rag import NaiveRAG  # noqa: E402
from inference.rag.evidential import EvidentialRAG  # noqa: E402
from inference.ramdocs import SAMPLE_PATH, load_ramdocs  # noqa: E402
from inference.retrieval import build_index, build_retriever  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(SAMPLE_PATH))
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--config", default="cpu")
    ap.add_argument("--out", default="outputs/bench_pipeline.json")
    ap.add_argument(
        "--logprob-claims",
        choices=("spans", "generate"),
        default="spans",
        help="claim source of the logprobs row (evaluator.logprob_claims; spans = the learned span head)",
    )
    args = ap.parse_args()
    cfg = load_config(args.config)
    records = load_ramdocs(args.data, limit=args.limit)
    work = Path(args.out).with_suffix("")
    corpus = [
        {"id": f"q{n}-d{j}", "text": d["text"], "source": f"record {n}"}
        for n, r in enumerate(records)
        for j, d in enumerate(r["documents"])
    ]
    write_jsonl(work / "corpus.jsonl", corpus)
    build_index(work / "corpus.jsonl", work / "index", cfg, show_progress=False)
    retriever = build_retriever(work / "index", cfg)
    backend = load_backend(cfg.generator.backend)  # ONE generator model shared by all systems
    generator = build_generator(cfg.generator, backend)
    learned = build_evaluator(replace(cfg.evaluator, name="learned"))
    prompt_cfg = cfg.evaluator
    prompt_backend = (
        backend if prompt_cfg.backend == cfg.generator.backend else load_backend(prompt_cfg.backend)
    )
    prompt, prompt_lp = (
        PromptEvaluator(
            prompt_backend,
            prompt_cfg.generation,
            constrained=prompt_cfg.constrained,
            aligner=make_aligner(prompt_cfg),
            max_chunk_chars=prompt_cfg.max_chunk_chars,
            scoring=scoring,
            claim_extractor=learned.extract_claims
            if scoring == "logprobs" and args.logprob_claims == "spans"
            else None,
        )
        for scoring in ("json", "logprobs")
    )
    systems = {
        "naive": NaiveRAG(cfg, backend=backend, retriever=retriever),
        "learned": EvidentialRAG(cfg, evaluator=learned, generator=generator, retriever=retriever),
        "prompt": EvidentialRAG(cfg, evaluator=prompt, generator=generator, retriever=retriever),
        "prompt-lp": EvidentialRAG(cfg, evaluator=prompt_lp, generator=generator, retriever=retriever),
    }
    questions = [r["question"] for r in records]
    wall: dict[str, float] = defaultdict(float)
    stages: dict[str, dict[str, float]] = {s: defaultdict(float) for s in systems}
    passes: dict[str, list[int]] = defaultdict(list)
    decisions: dict[str, list[int]] = defaultdict(list)
    systems["naive"].ask_batch(questions[:1])  # warm-up (lazy loads, first-call allocations)
    systems["learned"].ask_batch(questions[:1])
    for s in range(0, len(questions), args.batch):
        part = questions[s : s + args.batch]
        for name, system in systems.items():
            t0 = time.perf_counter()
            recs = system.ask_batch(part)
            wall[name] += time.perf_counter() - t0
            for r in recs:
                passes[name].append(r["batched_passes"])
                decisions[name].append(r["logical_decisions"])
                for stage, v in r["timings"].items():
                    # batched stages report the batch's time on every record: count it once per batch
                    stages[name][stage] += v / (
                        len(recs) if stage in ("generate", "evaluate", "extract", "claims") else 1
                    )
        print(f"{s + len(part)}/{len(questions)} questions", flush=True)
    n = len(questions)
    report: dict = {
        "questions": n,
        "batch": args.batch,
        "k": cfg.k,
        "generator": cfg.generator.backend.model,
        "systems": {},
    }
    for name in systems:
        report["systems"][name] = {
            "seconds_per_query": round(wall[name] / n, 3),
            "relative_cost": round(wall[name] / wall["naive"], 3),
            "stages_s_per_query": {k: round(v / n, 4) for k, v in stages[name].items()},
            "batched_passes_per_query": sum(passes[name]) / n,
            "logical_decisions_per_query": sum(decisions[name]) / n,
        }
    print(f"{'system':<10}{'s/query':>10}{'× naive':>9}{'passes':>8}{'decisions':>11}  stages (s/query)")
    for name, row in report["systems"].items():
        st = ", ".join(f"{k} {v:.3f}" for k, v in row["stages_s_per_query"].items())
        print(
            f"{name:<10}{row['seconds_per_query']:>10.3f}{row['relative_cost']:>9.2f}"
            f"{row['batched_passes_per_query']:>8.1f}{row['logical_decisions_per_query']:>11.1f}  {st}"
        )
    write_json(args.out, report)
    print(
        json.dumps(
            {
                "relative_cost_learned": report["systems"]["learned"]["relative_cost"],
                "relative_cost_prompt": report["systems"]["prompt"]["relative_cost"],
                "relative_cost_prompt_logprobs": report["systems"]["prompt-lp"]["relative_cost"],
                "batched_passes_prompt": report["systems"]["prompt"]["batched_passes_per_query"],
            }
        )
    )


if __name__ == "__main__":
    main()
