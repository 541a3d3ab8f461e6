"""The HTTP server end to end: a real uvicorn server on a loopback port, real HTTP requests (httpx).

The pipeline is the real one — the learned evaluator on the tiny trained checkpoint (``tiny_checkpoint``)
and the template generator — built once (``rag`` in conftest.py) and handed to every app, so no test
rebuilds models.
"""

import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

import httpx
import pytest
from typer.testing import CliRunner

import evidential
from evidential.errors import ConfigError
from inference.cli import app as cli_app
from inference.config import load_config
from inference.ramdocs import SAMPLE_PATH
from inference.server.app import ServerConfig, create_app, is_loopback, public_config
from inference.types import load_chunks

QUESTION = 'Who is the artist of the album "Crazy World"?'
CHUNKS = [asdict(c) for c in load_chunks(SAMPLE_PATH.parent / "example_chunks.jsonl")]
KEY = "test-key-0123456789abcdef"


@pytest.fixture(scope="module")
def main_server(rag, serve):
    app = create_app(
        rag.config, ServerConfig(max_concurrency=2, max_queue=64, max_body_bytes=64_000), pipeline=rag
    )
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client, app


def _ask(client, **body):
    return client.post("/ask", json={"question": QUESTION, "chunks": CHUNKS, **body})


# ----------------------------------------------------------------------------------------------------
def test_health_and_config(main_server):
    client, _ = main_server
    h = client.get("/health")
    assert h.status_code == 200
    h = h.json()
    assert h["status"] == "ok" and h["evaluator"] == "learned"
    assert h["evaluators"]["loaded"] == ["learned"]
    assert set(h["evaluators"]["available"]) == {"learned", "prompt"}
    assert h["models"]["generator"] == {"name": "template", "model": None}
    assert h["models"]["evaluators"]["learned"]["model"]
    assert h["index"] is None and h["models"]["retriever"] is None
    q = h["queue"]
    assert q["max_concurrency"] == 2 and q["max_queue"] == 64 and q["running"] == 0 and q["waiting"] == 0

    c = client.get("/config")
    assert c.status_code == 200
    c = c.json()
    assert c["run"]["evaluator"]["name"] == "learned" and c["run"]["generator"]["name"] == "template"
    assert c["run"]["fusion"] == {
        "lam": 0.6,
        "rule": "lambda",
        "tau1": 0.35,
        "tau2": 0.65,
        "policy": "paper",
        "state_ratio": 0.5,
        "state_ratio_yes_no": None,
        "state_witness_ratio": None,
        "copy_overlap": 0.8,
        "sanitize": False,
    }
    assert c["server"]["api_key_set"] is False and "api_key" not in c["server"]
    assert c["server"]["host"] == "127.0.0.1" and c["server"]["max_body_bytes"] == 64_000


def test_ask_returns_the_pipeline_answer_record(main_server, rag):
    client, _ = main_server
    r = _ask(client)
    assert r.status_code == 200, r.text
    rec = r.json()
    assert rec["question"] == QUESTION
    assert rec["route"] in evidential.ROUTES
    assert 0.0 <= rec["uncertainty"] <= 1.0
    assert abs(rec["ignorance"] + rec["conflict"] - rec["uncertainty"]) < 1e-5
    assert isinstance(rec["claims"], list) and rec["claims"]
    assert abs(sum(c["mass"] for c in rec["claims"]) + rec["uncertainty"] - 1) < 1e-5
    assert [c["chunk_id"] for c in rec["chunks"]] == ["doc1", "doc2", "doc3"]
    assert rec["evaluator"] == "learned" and rec["batched_passes"] >= 1 and rec["logical_decisions"] == 3
    assert {"retrieve", "evaluate", "align", "fuse_route"} <= set(rec["timings"])
    assert rec["retrieval"]["retrieved"] is False
    assert isinstance(rec["response"], str) and rec["response"]
    assert "queue;dur=" in r.headers["server-timing"] and "model;dur=" in r.headers["server-timing"]
    # exactly what EvidentialRAG.ask returns for the same input (timings aside)
    direct = json.loads(
        json.dumps(rag.ask(QUESTION, load_chunks(SAMPLE_PATH.parent / "example_chunks.jsonl")))
    )
    for key in (
        "route",
        "answer",
        "claims",
        "uncertainty",
        "chunks",
        "response",
        "fusion",
        "cited_chunk_ids",
    ):
        assert rec[key] == direct[key], key
    # candidates open the inventory; chunks without rank keep their order
    r = _ask(client, candidates=["Boys Like Girls", "Green Day"])
    assert r.status_code == 200, r.text
    assert [c["text"] for c in r.json()["claims"]][:2] == ["Boys Like Girls", "Green Day"]
    unranked = [{"id": c["id"], "text": c["text"]} for c in reversed(CHUNKS)]
    r = client.post("/ask", json={"question": QUESTION, "chunks": unranked})
    assert [c["chunk_id"] for c in r.json()["chunks"]] == ["doc3", "doc2", "doc1"]


def test_fusion_overrides_change_the_routing(main_server):
    client, _ = main_server
    cases = [(0.0, 1e-6, "abstain"), (0.0, 1.0, "conflict"), (0.999999, 1.0, "direct")]
    for tau1, tau2, expected in cases:
        r = _ask(client, tau1=tau1, tau2=tau2)
        assert r.status_code == 200, r.text
        rec = r.json()
        assert rec["fusion"]["tau1"] == tau1 and rec["fusion"]["tau2"] == tau2
        assert rec["route"] == evidential.route(rec["uncertainty"], tau1, tau2).names
        assert rec["route"] == expected, (rec["uncertainty"], tau1, tau2)
    # λ moves conflict to Θ: λ = 1 (Yager) leaves at least as much uncertainty as λ = 0
    u = {lam: _ask(client, lam=lam).json() for lam in (0.0, 1.0)}
    assert u[0.0]["fusion"]["lam"] == 0.0 and u[1.0]["fusion"]["lam"] == 1.0
    assert u[1.0]["uncertainty"] >= u[0.0]["uncertainty"] - 1e-9
    r = _ask(client, rule="yager", policy="decomposed")
    assert r.status_code == 200 and r.json()["fusion"]["rule"] == "yager"
    assert r.json()["fusion"]["policy"] == "decomposed"
    # invalid overrides: 422 naming the field, never 500
    for body, field in [
        ({"tau1": 0.0, "tau2": 0.0}, "fusion.tau1"),
        ({"tau1": 0.9}, "fusion.tau1"),
        ({"lam": 2.0}, "fusion.lam"),
        ({"rule": "nope"}, "fusion.rule"),
        ({"policy": "nope"}, "fusion.policy"),
    ]:
        r = _ask(client, **body)
        assert r.status_code == 422 and field in r.json()["detail"], (body, r.text)
    r = _ask(client, tau1="0.1")
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "tau1"]


def test_malformed_requests_are_422(main_server):
    client, _ = main_server
    many = [{"id": f"c{i}", "text": "x"} for i in range(51)]
    bad_bodies = [
        ({"chunks": CHUNKS}, "question"),
        ({"question": 123, "chunks": CHUNKS}, "question"),
        ({"question": "   ", "chunks": CHUNKS}, "question"),
        ({"question": "x" * 2001, "chunks": CHUNKS}, "question"),
        ({"question": QUESTION, "chunks": "doc1"}, "chunks"),
        ({"question": QUESTION, "chunks": [{"id": "a"}]}, "text"),
        ({"question": QUESTION, "chunks": [{"id": "a", "text": "t", "rank": "1"}]}, "rank"),
        ({"question": QUESTION, "chunks": [{"id": "a", "text": "t"}, {"id": "a", "text": "u"}]}, "duplicate"),
        ({"question": QUESTION, "chunks": many}, "chunks"),
        ({"question": QUESTION, "chunks": CHUNKS, "candidates": [""]}, "candidates"),
        ({"question": QUESTION, "chunks": CHUNKS, "tau_1": 0.2}, "tau_1"),
        ([QUESTION], "body"),
    ]
    for body, where in bad_bodies:
        r = client.post("/ask", json=body)
        assert r.status_code == 422, (body if len(json.dumps(body)) < 300 else where, r.text)
        assert where in json.dumps(r.json()["detail"]), (where, r.text)
        assert "input" not in r.json()["detail"][0]  # the request is not echoed back
    r = client.post("/ask", content=b'{"question": "x", ', headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "json_invalid"
    r = client.post("/ask", json={"question": QUESTION})
    assert r.status_code == 422 and "--index" in r.json()["detail"] and "chunks" in r.json()["detail"]
    r = _ask(client, evaluator="nope")
    assert r.status_code == 422 and "learned" in r.json()["detail"]
    assert client.get("/health").json()["queue"]["completed"] >= 0  # still serving


def test_oversize_body_is_413(main_server):
    client, _ = main_server
    big = {"question": QUESTION, "chunks": [{"id": "a", "text": "x" * 70_000}]}
    r = client.post("/ask", json=big)  # Content-Length over the limit
    assert r.status_code == 413 and "64000" in r.json()["detail"]

    def stream():  # no Content-Length: the bytes received count
        yield b'{"question": "q", "chunks": [{"id": "a", "text": "'
        for _ in range(10):
            yield b"y" * 10_000
        yield b'"}]}'

    r = client.post("/ask", content=stream(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert client.get("/health").status_code == 200


def test_50_concurrent_requests(main_server):
    client, app = main_server
    serial = []
    for _ in range(5):
        t0 = time.perf_counter()
        baseline = _ask(client).json()
        serial.append(time.perf_counter() - t0)
    before = app.state.admission.stats()["completed"]

    def one(_):
        t0 = time.perf_counter()
        r = _ask(client)
        return r, time.perf_counter() - t0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(one, range(50)))
    wall = time.perf_counter() - t0
    assert [r.status_code for r, _ in results] == [200] * 50
    for r, _ in results:  # concurrent calls on the shared models give the same answer
        rec = r.json()
        assert (rec["route"], rec["uncertainty"], rec["claims"]) == (
            baseline["route"],
            baseline["uncertainty"],
            baseline["claims"],
        )
    stats = app.state.admission.stats()
    assert stats["completed"] - before == 50 and stats["peak_busy_slots"] <= 2 and stats["rejected"] == 0
    assert stats["running"] == 0 and stats["waiting"] == 0 and stats["busy_slots"] == 0
    lat = sorted(s for _, s in results)
    print(
        f"\nserial /ask p50 {statistics.median(serial) * 1000:.0f} ms; "
        f"50 concurrent /ask (max_concurrency 2): {50 / wall:.1f} req/s, wall {wall:.2f} s, "
        f"p50 {statistics.median(lat) * 1000:.0f} ms, p95 {lat[47] * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms"
    )


def test_full_queue_is_503_with_retry_after(rag, serve):
    app = create_app(rag.config, ServerConfig(max_concurrency=1, max_queue=1), pipeline=rag)
    admission = app.state.admission
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        with ThreadPoolExecutor(1) as pool:
            with admission.reserve():  # the only model slot is busy
                queued = pool.submit(_ask, client)
                deadline = time.monotonic() + 20
                while client.get("/health").json()["queue"]["waiting"] < 1:
                    assert time.monotonic() < deadline
                    time.sleep(0.01)
                r = _ask(client)  # 1 running + 1 waiting: full
                assert r.status_code == 503
                assert int(r.headers["retry-after"]) >= 1 and "busy" in r.json()["detail"]
                h = client.get("/health").json()["queue"]
                assert (h["running"], h["waiting"], h["rejected"]) == (1, 1, 1)
                assert not queued.done()
            assert queued.result(timeout=60).status_code == 200
        assert _ask(client).status_code == 200


def test_api_key(rag, serve):
    app = create_app(
        rag.config, ServerConfig(api_key=KEY, lazy_evaluators=False, max_body_bytes=2048), pipeline=rag
    )
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"X-API-Key": "wrong"},
            {"Authorization": KEY},
        ):
            for method, path in (("GET", "/health"), ("GET", "/config"), ("POST", "/ask")):
                r = client.request(
                    method, path, headers=headers, json={"question": QUESTION, "chunks": CHUNKS}
                )
                assert r.status_code == 401, (headers, path)
                assert r.headers["www-authenticate"].startswith("Bearer")
        # the key is checked before the body is read: no 413 / 422 for an unauthenticated client
        assert client.post("/ask", content=b"x" * 10_000).status_code == 401
        assert client.post("/ask", content=b"{").status_code == 401
        bearer = {"Authorization": f"Bearer {KEY}"}
        assert client.get("/health", headers=bearer).status_code == 200
        r = client.post("/ask", headers={"X-API-Key": KEY}, json={"question": QUESTION, "chunks": CHUNKS})
        assert r.status_code == 200 and r.json()["route"] in evidential.ROUTES
        c = client.get("/config", headers={"x-api-key": KEY})
        assert c.status_code == 200 and KEY not in c.text and c.json()["server"]["api_key_set"] is True
        # single-evaluator server: the other evaluator is refused, not loaded
        r = client.post(
            "/ask", headers=bearer, json={"question": QUESTION, "chunks": CHUNKS, "evaluator": "prompt"}
        )
        assert r.status_code == 422 and "--single-evaluator" in r.json()["detail"]
        assert client.get("/health", headers=bearer).json()["evaluators"]["available"] == ["learned"]


def test_server_config_validation_and_redaction():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("example.org")
    with pytest.raises(ConfigError, match="--allow-remote"):
        ServerConfig(host="0.0.0.0")
    assert ServerConfig(host="0.0.0.0", api_key=KEY).host == "0.0.0.0"
    assert ServerConfig(host="0.0.0.0", allow_remote=True).api_key is None
    for kwargs, field in [
        ({"api_key": "short"}, "api_key"),
        ({"api_key": "has a space in the key 123"}, "api_key"),
        ({"max_queue": -1}, "max_queue"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"max_body_bytes": 10}, "max_body_bytes"),
        ({"port": 70000}, "port"),
        ({"lazy_evaluators": "yes"}, "lazy_evaluators"),
    ]:
        with pytest.raises(ConfigError, match=f"server.{field}"):
            ServerConfig(**kwargs)
    assert (
        KEY not in repr(ServerConfig(api_key=KEY))
        and "api_key" not in ServerConfig(api_key=KEY).public_dict()
    )
    cfg = load_config(None, [f"generator.backend.api_key={KEY}"])
    assert KEY not in json.dumps(public_config(cfg))
    assert public_config(cfg)["generator"]["backend"]["api_key"] == "<redacted>"
    assert public_config(cfg)["evaluator"]["backend"]["api_key"] is None


def test_cli_refuses_unsafe_settings_before_loading_models(monkeypatch, tmp_path):
    monkeypatch.delenv("EVIDENTIAL_RAG_API_KEY", raising=False)
    runner = CliRunner()
    for args, msg in [
        (["--host", "0.0.0.0"], "--allow-remote"),
        (["--host", "10.1.2.3"], "not a loopback address"),
        (["--host", "0.0.0.0", "--api-key", "short"], "server.api_key"),
        (["--max-queue", "-1"], "server.max_queue"),
        (["--max-concurrency", "2", "--set", "evaluator.backend.name=llamacpp"], "max_concurrency must be 1"),
        (["--set", "fusion.tau1=0.9"], "fusion.tau1"),
        (["--index", str(tmp_path / "missing")], "no such folder"),
    ]:
        r = runner.invoke(cli_app, ["serve", *args])
        assert r.exit_code == 2, (args, r.output)
        assert msg in r.stderr.replace("\n", ""), (args, r.stderr)
    monkeypatch.setenv("EVIDENTIAL_RAG_API_KEY", "short")  # the environment variable is read too
    r = runner.invoke(cli_app, ["serve", "--host", "0.0.0.0"])
    assert r.exit_code == 2 and "server.api_key" in r.stderr


@pytest.mark.slow
def test_other_evaluator_loads_once_on_first_use(main_server):
    """The prompt evaluator (packaged SmolLM2) loads once, under the lock, on first use, and is kept."""
    client, app = main_server
    pipelines = app.state.pipelines
    with ThreadPoolExecutor(2) as pool:  # two first uses at once: one load
        a, b = pool.map(lambda _: pipelines.get("prompt"), range(2))
    assert a is b and a.generator is pipelines.main.generator and a.retriever is pipelines.main.retriever
    assert client.get("/health").json()["evaluators"]["loaded"] == ["learned", "prompt"]
    r = client.post("/ask", json={"question": QUESTION, "chunks": CHUNKS[:1], "evaluator": "prompt"})
    assert r.status_code == 200, r.text
    assert r.json()["evaluator"] == "prompt" and r.json()["logical_decisions"] == 1
    assert pipelines.loaded["prompt"] is a


def test_configured_limits_are_enforced(rag, serve):
    s = ServerConfig(
        max_chunks=2, max_chunk_chars=50, max_question_chars=20, max_candidates=1, max_body_bytes=4096
    )
    app = create_app(rag.config, s, pipeline=rag)
    short = [{"id": "a", "text": "Boys Like Girls made it."}, {"id": "b", "text": "Green Day made it."}]
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert client.post("/ask", json={"question": "Who made it?", "chunks": short}).status_code == 200
        for body, where in [
            ({"question": "Who made it?", "chunks": [*short, {"id": "c", "text": "x"}]}, "chunks"),
            ({"question": "Who made it?", "chunks": [{"id": "a", "text": "x" * 51}]}, "text"),
            ({"question": "x" * 21, "chunks": short}, "question"),
            ({"question": "Who made it?", "chunks": short, "candidates": ["a", "b"]}, "candidates"),
        ]:
            r = client.post("/ask", json=body)
            assert r.status_code == 422 and where in json.dumps(r.json()["detail"]), (where, r.text)
        r = client.post("/ask", json={"question": "q", "chunks": [{"id": "a", "text": "x" * 5000}]})
        assert r.status_code == 413 and "4096" in r.json()["detail"]
        # the chat endpoint has the same limits
        chat = {
            "model": "evidential-rag",
            "messages": [{"role": "user", "content": "x" * 21}],
            "chunks": short,
        }
        r = client.post("/v1/chat/completions", json=chat)
        assert r.status_code == 422 and "max_question_chars" in r.json()["error"]["message"]


def test_the_api_key_never_reaches_logs_or_errors(rag, serve, caplog):
    import logging

    app = create_app(rag.config, ServerConfig(api_key=KEY), pipeline=rag)
    caplog.set_level(logging.DEBUG)
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        texts = []
        for headers in ({"X-API-Key": KEY[:-1]}, {"Authorization": f"Bearer {KEY}x"}, {"X-API-Key": KEY}):
            for path in ("/health", "/config", "/v1/models"):
                r = client.get(path, headers=headers)
                texts.append(r.text)
            r = client.post("/ask", json={"question": QUESTION, "chunks": CHUNKS, "lam": 9}, headers=headers)
            texts.append(r.text)
        assert [t for t in texts if KEY in t or KEY[:-1] in t] == []
    assert KEY[:-1] not in caplog.text
