"""SFT'd vs base prompt evaluator on held-back chunks (a measurement, not a test).

Trains the SFT recipe (``configs/sft-smollm2.yaml`` by default: the packaged SmolLM2-135M-Instruct on CPU)
unless ``OUTPUT/adapter`` already exists, then runs the prompt evaluator — the same prompts, parsing
(``parse_decision``) and claim alignment as at inference — with the base model and with the adapter on
``--chunks`` chunks of the recipe's *validation* split (questions never trained on), stratified over
dataset × (labelled support / no support), each shown with the inventory mix the recipe trains with. Prints,
side by side: JSON validity (valid / repaired / failed), stance agreement with the labels (``supports`` iff
the chunk is labelled as supporting a candidate), claim accuracy, mean evidence, and seconds per chunk.

Usage: ``python bench/sft_prompt_evaluator.py [--config configs/sft-smollm2.yaml] [--set max_steps=30]
[--output runs/sft-smollm2] [--retrain] [--chunks 50] [--k 10] [--constrained] [--out FILE]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from inference.backends import BackendConfig, GenerationConfig, load_backend  # noqa: E402
from inference.evaluators import PromptEvaluator  # noqa: E402
from inference.types import Chunk  # noqa: E402
from inference.workflows.sft import resolve_sft_model, sft_contract  # noqa: E402
from training.sft.recipe import (  # noqa: E402
    ADAPTER_DIR,
    CARD_FILE,
    load_sft_config,
    shows_inventory,
    split_sft_rows,
    train_prompt_evaluator,
)
from training.utils.text import normalize_text  # noqa: E402


def pick(rows, n: int, seed: int = 0):
    """``n`` rows stratified over (dataset, labelled support or none), round robin, seeded order."""
    buckets = defaultdict(list)
    for r in rows:
        buckets[(r.source_dataset or "annotated", r.label is not None)].append(r)
    rng = random.Random(seed)
    for b in buckets.values():
        rng.shuffle(b)
    out, keys = [], sorted(buckets)
    while len(out) < n and any(buckets.values()):
        for k in keys:
            if buckets[k] and len(out) < n:
                out.append(buckets[k].pop())
    return out


def _same_claim(claim: str | None, label: str) -> bool:
    if claim is None:
        return False
    a, b = normalize_text(claim), normalize_text(label)
    return a == b or (len(label) > 120 and b.startswith(a))


def evaluate(cfg, rows, lora_path: str | None, args) -> dict:
    """Prompt-evaluator decisions of one model on ``rows``, and their agreement with the labels."""
    backend = load_backend(
        BackendConfig(
            name="transformers",
            model=cfg.model,
            gguf_file=cfg.gguf_file,
            lora_path=lora_path,
            device="cpu" if cfg.device == "cpu" else "auto",
            dtype="float32" if cfg.device == "cpu" else "auto",
        )
    )
    ev = PromptEvaluator(
        backend,
        GenerationConfig(max_tokens=args.max_tokens),
        constrained=args.constrained,
        max_chunk_chars=cfg.max_chunk_chars,
    )
    invs = [
        list(r.candidates) if shows_inventory(r, cfg.empty_inventory_fraction, cfg.seed) else [] for r in rows
    ]
    decisions, t0 = [], time.perf_counter()
    for i in range(0, len(rows), args.k):
        group = rows[i : i + args.k]
        res = ev.evaluate_batch(
            [r.query for r in group],
            [[Chunk(f"c{i + j}", r.chunk)] for j, r in enumerate(group)],
            invs[i : i + args.k],
        )
        decisions += [x.decisions[0] for x in res]
        print(f"  {'SFT' if lora_path else 'base'}: {len(decisions)}/{len(rows)} chunks", file=sys.stderr)
    elapsed = time.perf_counter() - t0
    backend.close()
    n = len(rows)
    out = {"valid": 0, "repaired": 0, "failed": 0}
    for d in decisions:
        out["valid" if d.valid else "repaired" if d.repaired else "failed"] += 1
    supports = [bool(d.evidence) and d.stance == "supports" for d in decisions]
    labelled = [r.label is not None for r in rows]
    claim_ok = [
        (not s) if r.label is None else (s and _same_claim(d.claim, r.candidates[r.label]))
        for r, d, s in zip(rows, decisions, supports)
    ]
    ev_sum = [sum(d.evidence.values()) for d in decisions]

    def mean(xs):
        return round(sum(xs) / len(xs), 3) if xs else None

    return {
        "outputs": out,
        "json_valid": round(out["valid"] / n, 3),
        "usable": round((out["valid"] + out["repaired"]) / n, 3),
        "stance_agreement": round(
            sum((d.stance == "supports") == lab for d, lab in zip(decisions, labelled)) / n, 3
        ),
        "supports_rate": round(sum(d.stance == "supports" for d in decisions) / n, 3),
        "claim_accuracy": round(sum(claim_ok) / n, 3),
        "mean_evidence_labelled": mean([e for e, lab in zip(ev_sum, labelled) if lab]),
        "mean_evidence_unlabelled": mean([e for e, lab in zip(ev_sum, labelled) if not lab]),
        "s_per_chunk": round(elapsed / n, 2),
        "raw": [d.raw for d in decisions],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/sft-smollm2.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="recipe override key=value")
    ap.add_argument("--output", default="runs/sft-smollm2", help="SFT output folder (trained here if needed)")
    ap.add_argument("--retrain", action="store_true", help="train even when OUTPUT/adapter exists")
    ap.add_argument("--chunks", type=int, default=50)
    ap.add_argument("--k", type=int, default=10, help="chunks per batched evaluator pass")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--constrained", action="store_true", help="schema-constrained decoding (xgrammar)")
    ap.add_argument("--out", default="outputs/bench_sft_prompt_evaluator.json")
    args = ap.parse_args()

    cfg = load_sft_config(args.config, args.overrides)
    out = Path(args.output)
    adapter = out / ADAPTER_DIR
    train_s = None
    if args.retrain or not (adapter / "adapter_config.json").is_file():
        t0 = time.perf_counter()
        train_prompt_evaluator(
            cfg,
            out,
            sft_contract(),
            model_source=resolve_sft_model(cfg.model, cfg.gguf_file),
            command="python " + " ".join(sys.argv),
        )
        train_s = round(time.perf_counter() - t0, 1)
    card = json.loads((out / CARD_FILE).read_text())

    _, _, val = split_sft_rows(cfg)
    # batched passes of similar lengths pad less; the metrics do not depend on the order
    rows = sorted(pick(val, args.chunks, seed=cfg.seed), key=lambda r: len(r.chunk[: cfg.max_chunk_chars]))
    base = evaluate(cfg, rows, None, args)
    sft = evaluate(cfg, rows, str(adapter), args)
    strata = defaultdict(int)
    for r in rows:
        strata[f"{r.source_dataset}/{'support' if r.label is not None else 'none'}"] += 1
    label_rate = round(sum(r.label is not None for r in rows) / len(rows), 3)

    print(
        f"\nSFT: {card['steps']} steps on {card['data']['examples']} train examples "
        f"(loss {card['loss_curve'][0]['loss']:.3f} → {card['final_loss']:.3f}, {card['train_seconds']:.0f}s); "
        f"{len(rows)} validation chunks {dict(strata)}; decoding: {'constrained' if args.constrained else 'free text'}"
    )
    rows_out = [
        ("valid / repaired / failed", lambda m: "{valid} / {repaired} / {failed}".format(**m["outputs"])),
        ("JSON valid (as produced)", lambda m: f"{m['json_valid']:.3f}"),
        ("usable (valid + repaired)", lambda m: f"{m['usable']:.3f}"),
        (f"stance agreement (label base rate {label_rate})", lambda m: f"{m['stance_agreement']:.3f}"),
        ("'supports' rate", lambda m: f"{m['supports_rate']:.3f}"),
        ("claim accuracy", lambda m: f"{m['claim_accuracy']:.3f}"),
        (
            "mean evidence: labelled / unlabelled",
            lambda m: f"{m['mean_evidence_labelled']} / {m['mean_evidence_unlabelled']}",
        ),
        ("s per chunk", lambda m: f"{m['s_per_chunk']:.2f}"),
    ]
    print("| metric | base | SFT |\n|---|---|---|")
    for name, fmt in rows_out:
        print(f"| {name} | {fmt(base)} | {fmt(sft)} |")
    report = {
        "config": args.config,
        "overrides": args.overrides,
        "adapter": str(adapter),
        "train_wall_s": train_s,
        "sft": {
            k: card[k] for k in ("steps", "train_loss", "final_loss", "train_seconds", "contract_version")
        },
        "train_examples": card["data"]["examples"],
        "chunks": len(rows),
        "strata": dict(strata),
        "label_supports_rate": label_rate,
        "constrained": args.constrained,
        "max_tokens": args.max_tokens,
        "base": base,
        "sft_model": sft,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print(json.dumps({k: v for k, v in report.items() if k not in ("base", "sft_model")}))


if __name__ == "__main__":
    main()
