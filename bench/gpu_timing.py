"""Learned-evaluator and fusion timings on CUDA against the CPU, side by side in one run (a benchmark, not a
timed test; ``bench/gpu.sh`` runs it after the ``gpu``-marked tests).

* **learned evaluator, per query**: the shipped checkpoint (``checkpoints/learned-minilm/best``; or
  ``--checkpoint``) answers real RAMDocs questions (k = 5 of each record's documents, claims extracted by its
  span head, then scored: the evaluator's two batched encoder passes), one question per call and
  ``--batch`` questions per call, on the CPU and on CUDA in float32 and under bf16 autocast. Median seconds
  per query over ``--repeats`` rounds after a warm-up round.
* **fusion**: ``evidential.fuse_evidence`` on evaluator-like evidence ``[B, 5, 8]`` (as ``bench/fusion.py``),
  CPU vs CUDA, float32, queries per second (CUDA timed with synchronisation).

The last line is one JSON object with the numbers. Usage::

    python bench/gpu_timing.py [--questions 20] [--batch 16] [--fusion-sizes 100000,1000000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fusion import make_evidence  # noqa: E402
from evidential import fuse_evidence  # noqa: E402
from inference.evaluators.learned import LearnedEvaluator  # noqa: E402
from inference.types import Chunk  # noqa: E402
from training.learned.checkpoint import load_learned_model  # noqa: E402


def ramdocs_questions(path: Path, n: int, k: int = 5) -> list[tuple[str, list[Chunk]]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            docs = rec["documents"][:k]
            out.append(
                (rec["question"], [Chunk(f"d{i}", d["text"], "RAMDocs", i + 1) for i, d in enumerate(docs)])
            )
            if len(out) == n:
                break
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_evaluator(ev: LearnedEvaluator, qs, batch: int, repeats: int, device, amp: bool) -> float:
    """Median seconds per query of ``ev.evaluate_batch`` over ``qs`` in calls of ``batch`` questions."""

    def one_round() -> float:
        t0 = time.perf_counter()
        for s in range(0, len(qs), batch):
            part = qs[s : s + batch]
            ctx = (
                torch.autocast("cuda", dtype=torch.bfloat16) if amp else torch.autocast("cpu", enabled=False)
            )
            with ctx:
                ev.evaluate_batch([q for q, _ in part], [c for _, c in part])
        sync(device)
        return (time.perf_counter() - t0) / len(qs)

    one_round()  # warm-up: kernels, allocator, tokenizer caches
    return statistics.median(one_round() for _ in range(repeats))


def time_fusion(b: int, device: torch.device, repeats: int) -> float:
    ev = make_evidence(b, 5, 8).to(device)
    fuse_evidence(ev, lam=0.6)
    sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fuse_evidence(ev, lam=0.6)
        sync(device)
        times.append(time.perf_counter() - t0)
    return b / min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "learned-minilm" / "best"))
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "ramdocs" / "RAMDocs_test.jsonl"))
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--batch", type=int, default=16, help="questions per evaluate_batch call (batched rows)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--fusion-sizes", default="100000,1000000")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/gpu_timing.py: no CUDA device here; it compares the GPU with the CPU")
    cuda = torch.device("cuda")
    qs = ramdocs_questions(Path(args.data), args.questions)
    result: dict[str, object] = {"gpu": torch.cuda.get_device_name(0), "questions": len(qs)}
    print(f"learned evaluator ({args.checkpoint}), {len(qs)} RAMDocs questions, k = 5, s per query:")
    print("| device | 1 question per call | " + f"{args.batch} per call |")
    print("|---|---|---|")
    for name, device, amp in (
        ("cpu", torch.device("cpu"), False),
        ("cuda", cuda, False),
        ("cuda bf16", cuda, True),
    ):
        ev = LearnedEvaluator(load_learned_model(args.checkpoint, device=device), checkpoint=args.checkpoint)
        single = time_evaluator(ev, qs, 1, args.repeats, device, amp)
        batched = time_evaluator(ev, qs, args.batch, args.repeats, device, amp)
        result[f"learned_s_per_query_{name.replace(' ', '_')}"] = [round(single, 5), round(batched, 5)]
        print(f"| {name} | {single:.4f} | {batched:.4f} |")
    cpu1, cpub = result["learned_s_per_query_cpu"]
    gpu1, gpub = result["learned_s_per_query_cuda"]
    print(
        f"CUDA speed-up over the CPU: {cpu1 / gpu1:.1f}x (1 per call), {cpub / gpub:.1f}x ({args.batch} per call)"
    )
    print("fusion (fuse_evidence, k = 5, M = 8, float32), queries/s:")
    for b in (int(x) for x in args.fusion_sizes.split(",")):
        c, g = time_fusion(b, torch.device("cpu"), args.repeats), time_fusion(b, cuda, args.repeats)
        result[f"fusion_qps_{b}"] = {"cpu": round(c), "cuda": round(g)}
        print(f"  B = {b}: cpu {c / 1e6:.2f} M/s, cuda {g / 1e6:.2f} M/s ({g / c:.1f}x)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
