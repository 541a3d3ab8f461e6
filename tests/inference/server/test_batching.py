"""Micro-batching: the batcher's queue logic on plain runners, then real servers over the real pipeline where
concurrent requests are answered in batched calls with the records an unbatched server gives."""

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from inference.ramdocs import load_ramdocs
from inference.server.admission import Admission, ServerBusy
from inference.server.app import ServerConfig, create_app
from inference.server.batching import MicroBatcher

# three real RAMDocs sample questions with their own documents as chunks
SAMPLE = load_ramdocs()[:3]
BODIES = [
    {
        "question": r["question"],
        "chunks": [{"id": f"doc{i + 1}", "text": d["text"]} for i, d in enumerate(r["documents"])],
    }
    for r in SAMPLE
]


def _stable(rec: dict) -> dict:
    """The record without what differs between runs (timings) and between batch sizes
    (``evaluator_meta.batch_queries``: how many questions shared the evaluator pass)."""
    out = {k: v for k, v in rec.items() if k != "timings"}
    out["evaluator_meta"] = {k: v for k, v in rec["evaluator_meta"].items() if k != "batch_queries"}
    if out.get("generation"):
        out["generation"] = {k: v for k, v in out["generation"].items() if k != "seconds"}
    return out


# ---------------------------------------------------------------------------------------------- the batcher
def _batcher(runner, max_batch=4, max_concurrency=1, max_queue=32):
    return MicroBatcher(Admission(max_concurrency, max_queue), runner, max_batch)


def test_waiting_requests_are_batched_by_key_in_arrival_order():
    calls = []

    def runner(key, payloads):
        calls.append((key, list(payloads)))
        return [f"{key}:{p}" for p in payloads]

    async def main():
        b = _batcher(runner, max_batch=3)
        hold = threading.Event()
        holder = asyncio.get_running_loop().run_in_executor(None, lambda: _hold(b.admission, hold))
        while b.admission.busy == 0:
            await asyncio.sleep(0.001)
        jobs = [("a", 1), ("a", 2), ("b", 3), ("a", 4), ("a", 5), ("b", 6)]
        tasks = [asyncio.create_task(b.submit(k, p)) for k, p in jobs]
        while b.admission.waiting < len(jobs):
            await asyncio.sleep(0.001)
        hold.set()  # the slot frees: everything that waited is answered in batches
        results = await asyncio.gather(*tasks)
        await holder
        await b.aclose()
        return b, results

    b, results = asyncio.run(main())
    assert [r[0] for r in results] == ["a:1", "a:2", "b:3", "a:4", "a:5", "b:6"]
    assert calls == [("a", [1, 2, 4]), ("b", [3, 6]), ("a", [5])]  # oldest first, same key, ≤ max_batch
    stats = b.admission.stats()
    assert stats["completed"] == 6 and stats["batches"] == 3 and stats["peak_running"] == 3
    assert (stats["running"], stats["waiting"], stats["busy_slots"]) == (0, 0, 0)


def _hold(admission, event):
    with admission.reserve():
        event.wait(30)


def test_an_error_in_one_request_does_not_fail_the_others():
    def runner(key, payloads):
        if "bad" in payloads:
            raise ValueError(f"cannot answer {'bad'!r}")
        return [p.upper() for p in payloads]

    async def main():
        b = _batcher(runner, max_batch=8)
        hold = threading.Event()
        holder = asyncio.get_running_loop().run_in_executor(None, lambda: _hold(b.admission, hold))
        while b.admission.busy == 0:
            await asyncio.sleep(0.001)
        tasks = [asyncio.create_task(b.submit("k", p)) for p in ("x", "bad", "y")]
        while b.admission.waiting < 3:
            await asyncio.sleep(0.001)
        hold.set()
        out = await asyncio.gather(*tasks, return_exceptions=True)
        await holder
        await b.aclose()
        return out

    x, bad, y = asyncio.run(main())
    assert x[0] == "X" and y[0] == "Y"
    assert isinstance(bad, ValueError) and "cannot answer" in str(bad)


def test_a_caller_that_leaves_gives_its_place_back_and_the_queue_bound_holds():
    def runner(key, payloads):
        return list(payloads)

    async def main():
        b = _batcher(runner, max_batch=8, max_queue=2)
        hold = threading.Event()
        holder = asyncio.get_running_loop().run_in_executor(None, lambda: _hold(b.admission, hold))
        while b.admission.busy == 0:
            await asyncio.sleep(0.001)
        first = asyncio.create_task(b.submit("k", 1))
        leaving = asyncio.create_task(b.submit("k", 2))
        while b.admission.waiting < 2:
            await asyncio.sleep(0.001)
        with pytest.raises(ServerBusy):  # 1 slot busy + 2 waiting: full
            await b.submit("k", 3)
        leaving.cancel()  # e.g. its request timed out
        await asyncio.gather(leaving, return_exceptions=True)
        assert b.admission.waiting == 1
        third = asyncio.create_task(b.submit("k", 4))  # its place is free again
        await asyncio.sleep(0.01)
        hold.set()
        got = [(await first)[0], (await third)[0]]
        await holder
        await b.aclose()
        return got, b.admission.stats()

    got, stats = asyncio.run(main())
    assert got == [1, 4] and stats["completed"] == 2 and stats["rejected"] == 1
    assert (stats["running"], stats["waiting"]) == (0, 0)


# ---------------------------------------------------------------------------------------------- real servers
@pytest.fixture(scope="module")
def servers(rag, serve):
    batched = create_app(rag.config, ServerConfig(max_batch_size=16, max_queue=64), pipeline=rag)
    single = create_app(rag.config, ServerConfig(max_batch_size=1, max_queue=64), pipeline=rag)
    with serve(batched) as b_url, serve(single) as s_url:
        yield (b_url, batched), (s_url, single)


def test_concurrent_requests_are_batched_and_answered_as_one_by_one(servers):
    (b_url, batched), (s_url, _) = servers
    bodies = [BODIES[i % 3] for i in range(12)] + [{**BODIES[0], "lam": 0.0}, {**BODIES[1], "tau1": 0.0}]
    with httpx.Client(timeout=120) as client:
        expected = [client.post(f"{s_url}/ask", json=b).json() for b in bodies]  # one request per call
        admission = batched.state.admission
        before = admission.stats()
        hold = threading.Event()
        holder = threading.Thread(target=_hold, args=(admission, hold))
        holder.start()
        try:
            with ThreadPoolExecutor(len(bodies)) as pool:
                futures = [pool.submit(client.post, f"{b_url}/ask", json=b) for b in bodies]
                deadline = time.monotonic() + 30
                while admission.stats()["waiting"] < len(bodies):
                    assert time.monotonic() < deadline, admission.stats()
                    time.sleep(0.01)
                hold.set()
                responses = [f.result() for f in futures]
        finally:
            hold.set()
            holder.join()
    assert [r.status_code for r in responses] == [200] * len(bodies)
    for got, want in zip(responses, expected):
        assert _stable(got.json()) == _stable(want)
    stats = admission.stats()
    # 12 requests with the run config's fusion share one call; each override is its own key
    assert stats["batches"] - before["batches"] == 3
    assert stats["completed"] - before["completed"] == len(bodies) and stats["peak_running"] >= 12


def test_health_reports_the_batching_counters(servers):
    (b_url, _), _ = servers
    q = httpx.get(f"{b_url}/health").json()["queue"]
    assert {"busy_slots", "peak_busy_slots", "batches"} <= set(q)
    c = httpx.get(f"{b_url}/config").json()["server"]
    assert c["max_batch_size"] == 16 and c["batch_wait_ms"] == 0.0


def test_a_queue_timeout_takes_a_waiting_request_out_but_never_cuts_model_work():
    from inference.server.batching import QueueTimeout

    def slow(key, payloads):
        time.sleep(0.3)
        return list(payloads)

    async def main():
        b = MicroBatcher(Admission(1, 8), slow, 4, queue_timeout_s=0.05)
        hold = threading.Event()
        holder = asyncio.get_running_loop().run_in_executor(None, lambda: _hold(b.admission, hold))
        while b.admission.busy == 0:
            await asyncio.sleep(0.001)
        with pytest.raises(QueueTimeout, match="queue_timeout_s"):
            await b.submit("k", "late")  # the only slot stays busy past the timeout
        assert b.admission.stats()["waiting"] == 0
        hold.set()
        await holder
        t0 = time.perf_counter()
        got = await b.submit("k", "runs")  # taken at once; its 0.3 s of work outlast the timeout
        took = time.perf_counter() - t0
        await b.aclose()
        return got, took, b.admission.stats()

    got, took, stats = asyncio.run(main())
    assert got[0] == "runs" and took >= 0.3 and stats["completed"] == 1


def test_the_server_answers_a_queue_timeout_with_503(rag, serve):
    app = create_app(rag.config, ServerConfig(queue_timeout_s=0.2), pipeline=rag)
    with serve(app) as url, app.state.admission.reserve():
        r = httpx.post(f"{url}/ask", json=BODIES[0], timeout=60)
        assert r.status_code == 503 and "queue_timeout_s" in r.json()["detail"]
        assert int(r.headers["retry-after"]) >= 1
        assert app.state.admission.stats()["waiting"] == 0
