"""Batched fusion throughput, measured side by side in one run (a benchmark, not a timed test).

For B queries with k chunks and M claims (float32) it times, on the same input:

* ``read once``   — one reduction over the evidence tensor: the floor any method must pay to read its input;
* ``eager``       — ``evidential.fuse_evidence`` (opinions + fold + K̄), the reference the tests check;
* ``compiled``    — the same function through ``torch.compile`` (``compiled=True``);
* ``python loop`` — ``evidential.reference.reference_fuse`` called query by query on Python lists (the
  literal equations in plain Python), timed on a subset and reported per query;
* ``torch loop``  — the eager ``fuse`` called query by query (a small subset).

It prints every rate and ratio, and last one JSON line for the largest B with the fastest batched path:
``{"queries_per_s": ..., "speedup_vs_loop": ..., "ratio_to_read_once": ...}`` (speedup against the python
loop; ratio = fusion time / read-once time).

Usage: ``python bench/fusion.py [--sizes 10000,100000,1000000] [--no-compile]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch

from evidential import fuse, fuse_evidence, opinions_from_evidence
from evidential.reference import reference_fuse


def make_evidence(b: int, k: int, m: int, seed: int = 0) -> torch.Tensor:
    """Evaluator-like evidence: each chunk backs one claim (0-10) with a little spill-over; 20 % are noise."""
    g = torch.Generator().manual_seed(seed)
    ev = torch.rand(b, k, m, generator=g) * 0.3
    claim = torch.randint(0, m, (b, k, 1), generator=g)
    ev.scatter_(-1, claim, torch.rand(b, k, 1, generator=g) * 10)
    noise = torch.rand(b, k, 1, generator=g) < 0.2
    return torch.where(noise, torch.zeros_like(ev), ev).contiguous()


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated batch sizes B")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--m", type=int, default=8)
    ap.add_argument("--lam", type=float, default=0.6)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--loop-queries", type=int, default=20000, help="queries timed in the python loop")
    ap.add_argument(
        "--torch-loop-queries", type=int, default=500, help="queries timed in the per-query torch loop"
    )
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile path")
    args = ap.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    k, m, lam = args.k, args.m, args.lam
    print(
        f"# fusion benchmark: k={k}, M={m}, float32, λ={lam}; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}"
    )
    ev_all = make_evidence(max(sizes), k, m)

    # per-query baselines (rates do not depend on B)
    nq = min(args.loop_queries, ev_all.shape[0])
    lists = ev_all[:nq].tolist()
    t_loop = best_of(lambda: [reference_fuse(q, lam) for q in lists], 1)
    loop_qps = nq / t_loop
    nt = min(args.torch_loop_queries, ev_all.shape[0])
    t_tloop = best_of(lambda: [fuse(opinions_from_evidence(ev_all[i]), lam=lam) for i in range(nt)], 1)
    tloop_qps = nt / t_tloop
    print(f"python loop : {loop_qps:12,.0f} queries/s  (reference_fuse on {nq:,} queries)")
    print(f"torch loop  : {tloop_qps:12,.0f} queries/s  (eager fuse per query on {nt:,} queries)")

    if not args.no_compile:
        t0 = time.perf_counter()
        fuse_evidence(ev_all[:1000], lam, compiled=True)
        print(f"torch.compile warm-up: {time.perf_counter() - t0:.1f} s (once per process)")

    final = None
    for b in sizes:
        ev = ev_all[:b]
        t_read = best_of(lambda ev=ev: ev.sum(), args.repeats)
        t_eager = best_of(lambda ev=ev: fuse_evidence(ev, lam), max(1, args.repeats // 2 + 1))
        row = {"B": b, "read_once_s": t_read, "eager_s": t_eager}
        line = (
            f"B={b:>9,}  read once {t_read * 1e3:8.2f} ms | eager {b / t_eager:12,.0f} q/s "
            f"(x{(b / t_eager) / loop_qps:7.1f} vs loop, {t_eager / t_read:6.1f}x read)"
        )
        best_s, best_name = t_eager, "eager"
        if not args.no_compile:
            fuse_evidence(ev, lam, compiled=True)  # guard check / specialisation for this size
            t_comp = best_of(lambda ev=ev: fuse_evidence(ev, lam, compiled=True), args.repeats)
            ref = fuse_evidence(ev, lam)
            got = fuse_evidence(ev, lam, compiled=True)
            err = max(
                float((ref.belief - got.belief).abs().max()),
                float((ref.uncertainty - got.uncertainty).abs().max()),
            )
            row.update(compiled_s=t_comp, compiled_max_abs_diff=err)
            line += (
                f" | compiled {b / t_comp:12,.0f} q/s (x{(b / t_comp) / loop_qps:7.1f} vs loop, "
                f"{t_comp / t_read:6.1f}x read, x{t_eager / t_comp:4.1f} vs eager, max|Δ| {err:.1e})"
            )
            if t_comp < best_s:
                best_s, best_name = t_comp, "compiled"
        print(line)
        final = {
            "queries_per_s": round(b / best_s),
            "speedup_vs_loop": round((b / best_s) / loop_qps, 1),
            "ratio_to_read_once": round(best_s / t_read, 1),
            "B": b,
            "path": best_name,
            "speedup_vs_torch_loop": round((b / best_s) / tloop_qps, 1),
        }
    print(json.dumps(final))


if __name__ == "__main__":
    main()
