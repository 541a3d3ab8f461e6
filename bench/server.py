"""Micro-batched serving, side by side in one run (a benchmark, not a test): the same N ``/ask`` requests
sent one after another, then all at once, to one loopback server (uvicorn in this process).

The requests are the packaged RAMDocs sample questions (MIT) with their own documents as chunks, cycled to
N. Sequential requests each get a call of their own; concurrent ones wait while the model is busy and are
answered in batched calls (``max_batch_size``). Prints both wall times, their ratio, the batches the server
made, and whether every concurrent record equals the sequential record of the same request (timings and
``evaluator_meta.batch_queries`` aside); the last line is one JSON object.

Usage: ``python bench/server.py [--requests 50] [--max-batch-size 16] [--set generator.name=template]
[--out outputs/bench_server.json]`` (default: the CPU defaults, learned evaluator and SmolLM2 writing).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx  # noqa: E402
import uvicorn  # noqa: E402

from inference.config import load_config  # noqa: E402
from inference.io import write_json  # noqa: E402
from inference.rag.evidential import EvidentialRAG  # noqa: E402
from inference.ramdocs import load_ramdocs  # noqa: E402
from inference.server.app import ServerConfig, create_app  # noqa: E402


def _stable(rec: dict) -> dict:
    out = {k: v for k, v in rec.items() if k != "timings"}
    out["evaluator_meta"] = {k: v for k, v in rec["evaluator_meta"].items() if k != "batch_queries"}
    if out.get("generation"):
        out["generation"] = {k: v for k, v in out["generation"].items() if k != "seconds"}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--max-batch-size", type=int, default=16)
    ap.add_argument("--config", default=None)
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    ap.add_argument("--out", default="outputs/bench_server.json")
    args = ap.parse_args()
    if args.requests < 1:
        raise SystemExit("--requests must be >= 1")

    cfg = load_config(args.config, args.overrides)
    rag = EvidentialRAG(cfg)
    sample = load_ramdocs()
    bodies = []
    for i in range(args.requests):
        r = sample[i % len(sample)]
        chunks = [{"id": f"doc{j + 1}", "text": d["text"]} for j, d in enumerate(r["documents"])]
        bodies.append({"question": r["question"], "chunks": chunks})
    queue = max(64, args.requests)
    app = create_app(cfg, ServerConfig(max_batch_size=args.max_batch_size, max_queue=queue), pipeline=rag)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/ask"
    try:
        with httpx.Client(timeout=3600) as client:
            client.post(url, json=bodies[0]).raise_for_status()  # warm-up (first-call costs)
            t0 = time.perf_counter()
            sequential = [client.post(url, json=b) for b in bodies]
            t_seq = time.perf_counter() - t0
            before = app.state.admission.stats()["batches"]
            t0 = time.perf_counter()
            with ThreadPoolExecutor(len(bodies)) as pool:
                concurrent = list(pool.map(lambda b: client.post(url, json=b), bodies))
            t_con = time.perf_counter() - t0
            batches = app.state.admission.stats()["batches"] - before
    finally:
        server.should_exit = True
        thread.join(30)
    codes = sorted({r.status_code for r in sequential + concurrent})
    same = [_stable(a.json()) == _stable(b.json()) for a, b in zip(sequential, concurrent)]
    out = {
        "requests": len(bodies),
        "generator": cfg.generator.name,
        "evaluator": cfg.evaluator.name,
        "max_batch_size": args.max_batch_size,
        "sequential_s": round(t_seq, 2),
        "concurrent_s": round(t_con, 2),
        "speedup": round(t_seq / t_con, 2),
        "concurrent_batches": batches,
        "status_codes": codes,
        "identical_records": sum(same),
    }
    print(
        f"{len(bodies)} /ask ({cfg.evaluator.name} evaluator, {cfg.generator.name} generator): one after "
        f"another {t_seq:.1f} s, all at once {t_con:.1f} s in {batches} batched calls -> "
        f"{t_seq / t_con:.2f}x faster; identical records {sum(same)}/{len(same)}; status codes {codes}"
    )
    write_json(Path(args.out), out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
