"""Batched fusion throughput, measured side by side in one run (a benchmark, not a timed test).

For B queries with k chunks and M claims (float32) it times, on the same input:

* ``read once``   — one reduction over the evidence tensor: the floor any method must pay to read its input;
* ``eager``       — ``evidential.fuse_evidence`` (opinions + fold + K̄), the reference the tests check;
* ``compiled``    — the same function through ``torch.compile`` (``compiled=True``: the column form of
  ``evidential.columns``, one fused loop over the queries);
* ``compiled -K̄`` — the same with ``pairwise=False`` (no K̄ diagnostic);
* ``torchbelief`` — the peer library torchbelief (PyPI; dense power-set masses, batched, differentiable)
  folding the same opinions with Yager's rule, on a subset (its masses take ``2^M`` values per chunk);
  reported with its max |Δ| against our Yager result and the speed ratio. Optional (not a dependency of
  the project): the row is skipped with a message when torchbelief is not installed;
* ``python loop`` — ``evidential.reference.reference_fuse`` called query by query on Python lists (the
  literal equations in plain Python), timed on a subset and reported per query;
* ``torch loop``  — the eager ``fuse`` called query by query (a small subset).

It prints every rate and ratio, and last one JSON line for the largest B with the fastest batched path:
``{"queries_per_s": ..., "speedup_vs_loop": ..., "ratio_to_read_once": ...}`` (speedup against the python
loop; ratio = fusion time / read-once time).

Usage: ``python bench/fusion.py [--sizes 10000,100000,1000000] [--repeats 5] [--no-compile]``
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


def peer_row(ev_all: torch.Tensor, lam: float, n: int, repeats: int, no_compile: bool) -> None:
    """Time torchbelief's Yager fold of the same opinions on ``n`` queries next to ours (skipped if absent)."""
    try:
        import torchbelief
        from torchbelief.combine import yager
        from torchbelief.frame import Frame
    except ImportError:
        print("torchbelief : not installed (pip install torchbelief), row skipped")
        return
    ev = ev_all[:n]
    b, k, m = ev.shape
    op = opinions_from_evidence(ev)
    frame = Frame(m)
    idx = 1 << torch.arange(m)

    def peer():
        masses = ev.new_zeros(b, k, frame.size)  # dense power-set masses: singletons and Θ are non-zero
        masses[..., idx] = op.belief
        masses[..., frame.theta] = op.vacuity
        fused = masses[:, 0]
        for t in range(1, k):
            fused = yager(fused, masses[:, t], frame)[0]
        return fused

    fused = peer()
    t_peer = best_of(peer, repeats)
    ours = fuse_evidence(ev, lam, "yager", compiled=not no_compile)
    t_ours = best_of(lambda: fuse_evidence(ev, lam, "yager", compiled=not no_compile), repeats)
    diff = max(
        float((fused[:, idx] - ours.belief).abs().max()),
        float((fused[:, frame.theta] - ours.uncertainty).abs().max()),
    )
    rest = fused.clone()
    rest[:, idx] = 0
    rest[:, frame.theta] = 0
    diff = max(diff, float(rest.abs().max()))  # no mass elsewhere (∅ or non-singleton subsets)
    path = "eager" if no_compile else "compiled"
    print(
        f"torchbelief {torchbelief.__version__ if hasattr(torchbelief, '__version__') else ''}: "
        f"{n / t_peer / 1e6:6.3f} M q/s (Yager fold of 2^{m}-mass vectors, B={n:,}); ours (yager, {path}) "
        f"{n / t_ours / 1e6:6.2f} M q/s = x{t_peer / t_ours:,.0f} faster; max|Δ| vs ours {diff:.1e}"
    )


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
    ap.add_argument("--peer-queries", type=int, default=20000, help="queries timed in torchbelief")
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
        fuse_evidence(ev_all[:1000], lam, compiled=True, pairwise=False)
        print(f"torch.compile warm-up: {time.perf_counter() - t0:.1f} s (once per process, both variants)")

    final = None
    print(f"{'B':>9} | {'read once':>9} | {'eager':>17} | {'compiled':>25} | {'compiled -K̄':>25} | max|Δ|")
    for b in sizes:
        ev = ev_all[:b]
        t_read = best_of(lambda ev=ev: ev.sum(), args.repeats)
        t_eager = best_of(lambda ev=ev: fuse_evidence(ev, lam), max(1, args.repeats // 2 + 1))
        cells = [
            f"{b:>9,}",
            f"{t_read * 1e3:6.2f} ms",
            f"{b / t_eager / 1e6:6.2f} M/s {t_eager / t_read:6.1f}x",
        ]
        best_s, best_name, err = t_eager, "eager", float("nan")
        if not args.no_compile:
            t_comp = best_of(lambda ev=ev: fuse_evidence(ev, lam, compiled=True), args.repeats)
            t_lean = best_of(
                lambda ev=ev: fuse_evidence(ev, lam, compiled=True, pairwise=False), args.repeats
            )
            ref = fuse_evidence(ev, lam)
            got = fuse_evidence(ev, lam, compiled=True)
            err = max(
                float((getattr(ref, f) - getattr(got, f)).abs().max())
                for f in ("belief", "uncertainty", "step_conflict", "mean_pairwise_conflict", "confidence")
            )
            if not torch.equal(ref.selected, got.selected):
                err = float("inf")
            for t in (t_comp, t_lean):
                cells.append(f"{b / t / 1e6:6.2f} M/s {t / t_read:5.1f}x {t_eager / t:5.1f}x eager")
            if t_comp < best_s:
                best_s, best_name = t_comp, "compiled"
        print(" | ".join(cells) + f" | {err:.1e}")
        final = {
            "queries_per_s": round(b / best_s),
            "speedup_vs_loop": round((b / best_s) / loop_qps, 1),
            "ratio_to_read_once": round(best_s / t_read, 1),
            "B": b,
            "path": best_name,
            "speedup_vs_torch_loop": round((b / best_s) / tloop_qps, 1),
        }
    print("(rates in M queries/s; Nx = time / read-once time; the -K̄ column skips the pairwise diagnostic)")
    peer_row(ev_all, lam, args.peer_queries, args.repeats, args.no_compile)
    print(json.dumps(final))


if __name__ == "__main__":
    main()
