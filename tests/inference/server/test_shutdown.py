"""Graceful shutdown of the real ``evidential-rag serve`` process: SIGTERM stops admitting, every request
already admitted gets its full answer, then the process exits (uvicorn re-raises the signal after its
graceful shutdown, so the status is SIGTERM's)."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from inference.ramdocs import load_ramdocs

REPO = Path(__file__).resolve().parents[3]
RECORDS = load_ramdocs()[:4]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(os.name == "nt", reason="SIGTERM semantics are POSIX")
def test_sigterm_finishes_the_admitted_requests_then_exits():
    port = _free_port()
    # the shipped learned evaluator (a few hundred ms per request on CPU), the template writing
    cmd = [
        sys.executable, "-m", "inference.cli", "serve", "--port", str(port), "--max-concurrency", "1",
        "--log-level", "warning", "--set", "generator.name=template",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.2)
        bodies = [
            {
                "question": r["question"],
                "chunks": [{"id": f"d{j}", "text": d["text"]} for j, d in enumerate(r["documents"])],
            }
            for r in RECORDS
        ] * 2
        results: list = [None] * len(bodies)

        def send(i):
            try:
                results[i] = httpx.post(f"{url}/ask", json=bodies[i], timeout=120)
            except httpx.TransportError as exc:
                results[i] = exc

        threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
        for t in threads:
            t.start()
        # signal once every request is admitted and some still wait behind the single model slot
        deadline = time.monotonic() + 60
        while True:
            q = httpx.get(f"{url}/health", timeout=5).json()["queue"]
            if q["completed"] + q["running"] + q["waiting"] == len(bodies):
                break
            assert time.monotonic() < deadline, f"the requests were not admitted: {q}"
            time.sleep(0.01)
        assert q["waiting"] >= 1, f"everything was answered before the signal: {q}"
        proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(120)
        code = proc.wait(60)
        # uvicorn re-raises the captured SIGTERM once it has shut down, so the exit status is SIGTERM's
        assert code in (0, -signal.SIGTERM), proc.stdout.read()
        # every request that was admitted before the signal got its whole answer record
        assert all(isinstance(r, httpx.Response) for r in results), results
        assert [r.status_code for r in results] == [200] * len(bodies)
        for r, body in zip(results, bodies):
            rec = r.json()
            assert rec["question"] == body["question"] and rec["route"] in ("direct", "conflict", "abstain")
            assert rec["response"] and json.dumps(rec)
        # and nothing is admitted any more
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/health", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
