"""Soak test of the HTTP server (a benchmark, not a test; loopback only, bounded in time and count).

Starts ``evidential-rag serve`` as its own process and sends it, at a steady rate for ``--seconds``
(default 10 minutes), a mix of valid ``/ask`` requests (packaged RAMDocs sample questions with their
documents), ``/fuse`` re-fusions, OpenAI chat requests, malformed bodies (broken JSON, wrong types,
invalid UTF-8) and oversized bodies (over ``max_body_bytes``). Reports the requests served, p50/p99
latency, every status code, and the server's resident memory every ``--sample-s`` seconds with its slope
over the run (MiB per minute, least squares after the first sample, which includes warm-up allocations).
The last line is one JSON object.

Usage: ``python bench/soak.py [--seconds 600] [--rate 4] [--sample-s 30] [--max-requests 100000]
[--set generator.name=template] [--out outputs/bench_soak.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from inference.io import write_json  # noqa: E402
from inference.ramdocs import load_ramdocs  # noqa: E402

MAX_BODY = 262_144


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(overrides: list[str], max_queue: int = 64) -> tuple[subprocess.Popen, str]:
    """``evidential-rag serve`` in its own process on a free loopback port; returns it once /health is up."""
    port = _free_port()
    cmd = [sys.executable, "-m", "inference.cli", "serve", "--port", str(port), "--log-level", "warning",
           "--max-body-bytes", str(MAX_BODY), "--max-queue", str(max_queue)]  # fmt: skip
    for o in overrides:
        cmd += ["--set", o]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("the server did not come up within 300 s")
        time.sleep(0.2)


def _requests(seed: int):
    """An endless, seeded mix of ``(kind, path, body bytes)``; ``/fuse`` bodies (``None`` here) are built by
    the sender from a record it got."""
    rng = random.Random(seed)
    asks = [
        {
            "question": r["question"],
            "chunks": [{"id": f"d{j}", "text": d["text"]} for j, d in enumerate(r["documents"])],
        }
        for r in load_ramdocs()
    ]
    kinds = ["ask", "fuse", "chat", "broken", "types", "utf8", "oversized"]
    while True:
        kind = rng.choices(kinds, [5, 2, 1, 1, 1, 1, 1])[0]
        body = rng.choice(asks)
        if kind == "ask":
            yield kind, "/ask", json.dumps(body).encode()
        elif kind == "fuse":
            yield kind, "/fuse", None
        elif kind == "chat":
            msgs = [{"role": "user", "content": body["question"]}]
            yield (
                kind,
                "/v1/chat/completions",
                json.dumps({"model": "evidential-rag", "messages": msgs, "chunks": body["chunks"]}).encode(),
            )
        elif kind == "broken":
            yield kind, "/ask", json.dumps(body).encode()[: rng.randint(1, 40)]
        elif kind == "types":
            yield kind, "/ask", json.dumps({**body, "question": rng.choice([1, None, [], {"x": 1}])}).encode()
        elif kind == "utf8":
            yield kind, "/ask", b'{"question": "\xff\xfe"}'
        else:
            yield kind, "/ask", json.dumps({**body, "question": "x" * (MAX_BODY + 1000)}).encode()


class _Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.codes: Counter = Counter()
        self.by_kind: dict[str, Counter] = {}
        self.latency: list[float] = []
        self.errors: Counter = Counter()


def soak(
    url: str, pid: int, seconds: float, rate: float, sample_s: float, max_requests: int, seed: int = 0
) -> dict:
    """Send the mixed requests to ``url`` at ``rate`` per second for ``seconds`` (at most ``max_requests``),
    sampling process ``pid``'s resident memory every ``sample_s`` seconds; returns the report."""
    proc = psutil.Process(pid)
    rec = _Recorder()
    stream = _requests(seed)
    samples: list[tuple[float, float]] = []
    client = httpx.Client(timeout=120)
    first = next(body for kind, _, body in stream if kind == "ask")
    record = client.post(url + "/ask", content=first, headers={"Content-Type": "application/json"}).json()
    lams = random.Random(seed + 1)

    def send(kind: str, path: str, body: bytes | None) -> None:
        if kind == "fuse":
            body = json.dumps({"record": record, "lam": lams.random()}).encode()
        t0 = time.perf_counter()
        try:
            r = client.post(url + path, content=body, headers={"Content-Type": "application/json"})
            code = r.status_code
        except httpx.TransportError as exc:
            code = None
            with rec.lock:
                rec.errors[type(exc).__name__] += 1
        dt = time.perf_counter() - t0
        with rec.lock:
            rec.codes[str(code)] += 1
            rec.by_kind.setdefault(kind, Counter())[str(code)] += 1
            if code is not None and code < 500:
                rec.latency.append(dt)

    t_start = time.monotonic()
    next_sample = t_start
    sent = 0
    with ThreadPoolExecutor(16) as pool:
        while time.monotonic() - t_start < seconds and sent < max_requests:
            now = time.monotonic()
            if now >= next_sample:
                samples.append((now - t_start, proc.memory_info().rss / 2**20))
                next_sample += sample_s
            kind, path, body = next(stream)
            pool.submit(send, kind, path, body)
            sent += 1
            time.sleep(max(0.0, t_start + sent / rate - time.monotonic()))
    samples.append((time.monotonic() - t_start, proc.memory_info().rss / 2**20))
    client.close()
    lat = sorted(rec.latency)
    pts = samples[1:] if len(samples) > 2 else samples
    slope = 0.0
    if len(pts) >= 2:
        xs, ys = [t / 60 for t, _ in pts], [m for _, m in pts]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        var = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0
    return {
        "seconds": round(time.monotonic() - t_start, 1),
        "requests": sent,
        "served": sum(v for k, v in rec.codes.items() if k != "None"),
        "status_codes": dict(sorted(rec.codes.items())),
        "by_kind": {k: dict(sorted(v.items())) for k, v in sorted(rec.by_kind.items())},
        "transport_errors": dict(rec.errors),
        "p50_ms": round(1000 * lat[len(lat) // 2], 1) if lat else None,
        "p99_ms": round(1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 1) if lat else None,
        "rss_mib": [[round(t, 1), round(m, 1)] for t, m in samples],
        "rss_slope_mib_per_min": round(slope, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--rate", type=float, default=4.0, help="requests per second")
    ap.add_argument("--sample-s", type=float, default=30.0)
    ap.add_argument("--max-requests", type=int, default=100_000)
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    ap.add_argument("--out", default="outputs/bench_soak.json")
    args = ap.parse_args()
    proc, url = start_server(args.overrides)
    try:
        out = soak(url, proc.pid, args.seconds, args.rate, args.sample_s, args.max_requests)
    finally:
        proc.terminate()
        proc.wait(60)
    print(
        f"{out['requests']} requests in {out['seconds']} s: served {out['served']}, status codes "
        f"{out['status_codes']}, p50 {out['p50_ms']} ms, p99 {out['p99_ms']} ms; server RSS "
        f"{out['rss_mib'][0][1]} -> {out['rss_mib'][-1][1]} MiB, slope {out['rss_slope_mib_per_min']} MiB/min"
    )
    write_json(Path(args.out), out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
