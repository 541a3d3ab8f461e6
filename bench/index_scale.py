"""FAISS index types side by side for corpora that outgrow memory (a benchmark, not a test).

N vectors of the embedder's dimension (default 1 M × 384, the packaged MiniLM's; seeded random unit vectors,
or ``--data clustered`` for embedding-like neighbourhoods) are written once to a raw float32 file. Then, for
each ``retrieval.index_type`` in ``--types``, three fresh subprocesses (so that memory peaks do not mix):

* **build** — ``factory_index`` (the string the config would hold), trained like ``build_index`` trains it
  (``--train-size`` vectors sampled with the seed) and filled batch by batch from the file (as from shards);
  build seconds and the peak RSS above the process's baseline (``ru_maxrss``), then the index file's size;
* **read** — ``faiss.read_index``: resident memory it adds, then query latency with ``--nprobe`` (IVF) /
  ``--ef-search`` (HNSW) applied through ``apply_search_params``: p50 ms of single-query calls and per query
  of ``--batch``-query calls, and recall@k against exact search (brute force over the file);
* **mmap** — the same file read with ``retrieval.index_mmap`` (``mmap_flag``): anonymous memory it adds
  (mapped pages are the OS's page cache) and single-query p50.

Queries are stored vectors with noise (each has a true nearest passage). Prints one markdown table with the
ratios to Flat, and last one JSON line with every measurement.

Usage: ``python bench/index_scale.py [--vectors 1000000] [--dim 384] [--data uniform|clustered]
[--types "Flat;HNSW32;IVF4096,Flat;IVF4096,PQ32np"] [--queries 200] [--nprobe 32]
[--ef-search 64] [--train-size 100000] [--in-process]`` (types are separated by ``;`` since factory strings
hold commas; ``--in-process`` is for smoke runs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# OPQ (e.g. OPQ32,IVF4096,PQ32np) is left out: on 2 cores it trained 426 s on 10 000 vectors
DEFAULT_TYPES = "Flat;HNSW32;IVF4096,Flat;IVF4096,PQ32np"
BATCH_ROWS = 65536  # rows read from the vector file at a time (a build_index shard is 2048)


def _status_mib(key: str) -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _read_rows(path: Path, dim: int, start: int, count: int) -> np.ndarray:
    """Rows ``start .. start+count`` of the raw float32 file (a plain read: no mapped pages in RSS)."""
    return np.fromfile(path, dtype=np.float32, count=count * dim, offset=start * dim * 4).reshape(count, dim)


def _batches(path: Path, n: int, dim: int):
    for start in range(0, n, BATCH_ROWS):
        yield start, _read_rows(path, dim, start, min(BATCH_ROWS, n - start))


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def write_vectors(path: Path, n: int, dim: int, data: str, seed: int) -> None:
    """``n`` seeded unit vectors, written batch by batch (uniform on the sphere, or around 1000 centres)."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((1000, dim)) if data == "clustered" else None
    with open(path, "wb") as fh:
        for start in range(0, n, BATCH_ROWS):
            m = min(BATCH_ROWS, n - start)
            x = rng.standard_normal((m, dim))
            if centers is not None:
                x = centers[rng.integers(0, len(centers), m)] + 0.9 * x
            _unit(x).tofile(fh)


def make_queries(path: Path, n: int, dim: int, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    rows = np.sort(rng.choice(n, count, replace=False))
    base = np.stack([_read_rows(path, dim, int(r), 1)[0] for r in rows])
    return _unit(base + 0.05 * rng.standard_normal(base.shape))


def exact_top_k(path: Path, n: int, dim: int, queries: np.ndarray, k: int) -> np.ndarray:
    """Exact inner-product top-k ids, streaming over the file."""
    best_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), k), dtype=np.int64)
    for start, x in _batches(path, n, dim):
        s = queries @ x.T
        top = np.argpartition(-s, k - 1, axis=1)[:, :k]
        cand_s = np.concatenate([best_s, np.take_along_axis(s, top, 1)], axis=1)
        cand_i = np.concatenate([best_i, top + start], axis=1)
        order = np.argsort(-cand_s, axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(cand_s, order, 1), np.take_along_axis(cand_i, order, 1)
    return best_i


# ----------------------------------------------------------------------------------------------- children


def child_build(a) -> dict:
    import faiss

    from inference.retrieval.index import factory_index, training_needs

    base = _status_mib("VmRSS")
    t0 = time.perf_counter()
    index = factory_index(a.type, a.dim)
    n_train = 0
    if not index.is_trained:
        n_train = min(a.train_size, a.vectors)
        need = max((n for _, n in training_needs(index)), default=1)
        if n_train < need:
            raise SystemExit(f"{a.type}: needs {need} training vectors, have {n_train}")
        picks = np.sort(np.random.default_rng(a.seed).choice(a.vectors, n_train, replace=False))
        parts = []
        for start, x in _batches(a.file, a.vectors, a.dim):
            sel = picks[(picks >= start) & (picks < start + len(x))] - start
            parts.append(x[sel].copy())
            del x
        sample = np.concatenate(parts)
        del parts
        index.train(sample)
        del sample
    t_train = time.perf_counter() - t0
    for _, x in _batches(a.file, a.vectors, a.dim):
        index.add(x)
        del x
    build_s = time.perf_counter() - t0
    peak = _peak_mib() - base
    faiss.write_index(index, str(a.index))
    return {
        "build_s": build_s,
        "train_s": t_train,
        "train_vectors": n_train,
        "build_peak_mib": peak,
        "disk_mib": a.index.stat().st_size / 2**20,
        "faiss_class": type(index).__name__,
    }


def _latency(index, queries: np.ndarray, k: int, batch: int) -> tuple[float, float]:
    for q in queries[:5]:  # warm up (first touches of mapped pages, thread pool)
        index.search(q[None], k)
    single = []
    for q in queries:
        t = time.perf_counter()
        index.search(q[None], k)
        single.append(time.perf_counter() - t)
    batched = []
    for _ in range(3):
        for b in range(0, len(queries), batch):
            qb = queries[b : b + batch]
            t = time.perf_counter()
            index.search(qb, k)
            batched.append((time.perf_counter() - t) / len(qb))
    return float(np.median(single)) * 1e3, float(np.median(batched)) * 1e3


def _search_params(a) -> dict:
    from evidential.errors import ConfigError
    from inference.retrieval.index import apply_search_params, factory_index

    params = {}
    for name, value in (("nprobe", a.nprobe), ("efSearch", a.ef_search)):
        try:
            apply_search_params(factory_index(a.type, a.dim), {name: value}, a.type)
            params[name] = value
        except ConfigError:
            pass
    return params


def child_search(a, mmap: bool) -> dict:
    import faiss

    from inference.retrieval.index import apply_search_params, mmap_flag

    queries = np.load(a.queries)
    params = _search_params(a)
    flag, what = mmap_flag(a.type, a.dim) if mmap else (0, "read")
    before_rss, before_anon = _status_mib("VmRSS"), _status_mib("RssAnon")
    index = faiss.read_index(str(a.index), flag)
    loaded_rss, loaded_anon = _status_mib("VmRSS") - before_rss, _status_mib("RssAnon") - before_anon
    apply_search_params(index, params, a.type)
    single, batched = _latency(index, queries, a.k, a.batch)
    out = {
        "load_rss_mib": loaded_rss,
        "load_anon_mib": loaded_anon,
        "search_anon_mib": _status_mib("RssAnon") - before_anon,
        "p50_single_ms": single,
        "p50_batched_ms": batched,
        "params": params,
        "read": what,
    }
    if not mmap:
        exact = np.load(a.exact)
        ids = index.search(queries, a.k)[1]
        out["recall"] = float(np.mean([len(set(r) & set(e)) / a.k for r, e in zip(ids, exact)]))
        out["invalid_ids"] = int(((ids < 0) | (ids >= a.vectors)).sum())
    return out


# ------------------------------------------------------------------------------------------------- parent


def _run_child(stage: str, spec: str, args, work: Path, files: dict) -> dict:
    index_file = work / (spec.replace(",", "_") + ".faiss")
    if args.in_process:  # smoke runs: one process, so memory peaks mix
        a = argparse.Namespace(**{**vars(args), "type": spec, "file": files["vectors"], "index": index_file})
        a.queries, a.exact = files["queries"], files["exact"]
        return child_build(a) if stage == "build" else child_search(a, stage == "mmap")
    cmd = [
        sys.executable, __file__, "--child", stage, "--type", spec, "--vectors", str(args.vectors),
        "--dim", str(args.dim), "--train-size", str(args.train_size), "--seed", str(args.seed),
        "--nprobe", str(args.nprobe), "--ef-search", str(args.ef_search), "--k", str(args.k),
        "--batch", str(args.batch), "--file", str(files["vectors"]), "--queries-file", str(files["queries"]),
        "--exact-file", str(files["exact"]), "--index-file", str(index_file),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{stage} {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _ratio(x: float, flat: float) -> str:
    return f"{x / flat:.3g}×" if flat > 0 else "–"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vectors", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--data", choices=("uniform", "clustered"), default="uniform")
    ap.add_argument("--types", default=DEFAULT_TYPES, help="';'-separated retrieval.index_type strings")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32, help="queries per batched search call")
    ap.add_argument("--nprobe", type=int, default=32, help="IVF lists visited per query")
    ap.add_argument("--ef-search", type=int, default=64, help="HNSW search depth")
    ap.add_argument("--train-size", type=int, default=100_000, help="retrieval.index_train_size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a temporary one, removed)")
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="measure in this process instead of fresh subprocesses (smoke runs; memory peaks then mix)",
    )
    # internal: one measurement in a fresh process
    ap.add_argument("--child", choices=("build", "read", "mmap"), help=argparse.SUPPRESS)
    ap.add_argument("--type", help=argparse.SUPPRESS)
    ap.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--queries-file", dest="queries_path", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--exact-file", dest="exact", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--index-file", dest="index", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.queries = args.queries_path
        out = child_build(args) if args.child == "build" else child_search(args, args.child == "mmap")
        print(json.dumps(out))
        return
    types = [t.strip() for t in args.types.split(";") if t.strip()]
    if args.vectors < 1 or args.queries < 1 or not types:
        raise SystemExit("--vectors and --queries must be >= 1 and --types must name at least one type")
    import faiss

    t_start = time.perf_counter()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="index_scale_"))
    work.mkdir(parents=True, exist_ok=True)
    files = {"vectors": work / "vectors.f32", "queries": work / "queries.npy", "exact": work / "exact.npy"}
    try:
        write_vectors(files["vectors"], args.vectors, args.dim, args.data, args.seed)
        queries = make_queries(files["vectors"], args.vectors, args.dim, args.queries, args.seed)
        np.save(files["queries"], queries)
        np.save(files["exact"], exact_top_k(files["vectors"], args.vectors, args.dim, queries, args.k))
        print(
            f"# index types: {args.vectors:,} × {args.dim}-d {args.data} unit vectors (raw "
            f"{args.vectors * args.dim * 4 / 2**20:,.0f} MiB), {args.queries} queries, recall@{args.k} vs exact; "
            f"nprobe {args.nprobe}, efSearch {args.ef_search}, train {min(args.train_size, args.vectors):,}; "
            f"faiss {faiss.__version__}, {faiss.omp_get_max_threads()} threads, {os.cpu_count()} CPUs, "
            f"{platform.processor() or platform.machine()}",
            flush=True,
        )
        rows = {}
        for spec in types:
            row = {"type": spec, **_run_child("build", spec, args, work, files)}
            row.update(_run_child("read", spec, args, work, files))
            mapped = _run_child("mmap", spec, args, work, files)
            row.update({f"mmap_{key}": v for key, v in mapped.items()})
            (work / (spec.replace(",", "_") + ".faiss")).unlink()
            rows[spec] = row
            print(f"#   {spec}: built in {row['build_s']:.1f}s, recall {row['recall']:.3f}", flush=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    flat = rows.get("Flat") or rows[types[0]]
    print()
    print(
        f"| index_type | build s | build peak MiB | on disk MiB (vs {flat['type']}) | read RSS MiB | mmap anon MiB "
        f"| p50 ms single (vs {flat['type']}) | p50 ms/query batched{args.batch} | mmap p50 ms single "
        f"| recall@{args.k} |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for spec, r in rows.items():
        print(
            f"| `{spec}` | {r['build_s']:.1f} | {r['build_peak_mib']:,.0f} | {r['disk_mib']:,.1f} "
            f"({_ratio(r['disk_mib'], flat['disk_mib'])}) | {r['load_rss_mib']:,.0f} | {r['mmap_load_anon_mib']:,.1f} "
            f"| {r['p50_single_ms']:.3f} ({_ratio(r['p50_single_ms'], flat['p50_single_ms'])}) "
            f"| {r['p50_batched_ms']:.3f} | {r['mmap_p50_single_ms']:.3f} | {r['recall']:.3f} |"
        )
    print()
    print(f"wall time {time.perf_counter() - t_start:.0f} s")
    print(
        json.dumps({"vectors": args.vectors, "dim": args.dim, "data": args.data, "rows": list(rows.values())})
    )


if __name__ == "__main__":
    main()
