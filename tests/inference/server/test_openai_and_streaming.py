"""The OpenAI-compatible endpoints (driven by the official ``openai`` client), the SSE variant of ``/ask``
and ``/fuse``, on real uvicorn servers over real pipelines.

Two pipelines: ``rag`` (conftest: the learned evaluator on the tiny checkpoint, template generator) and
``llm_rag`` (the same evaluator with the packaged SmolLM2 writing the answer on the transformers backend,
template fallback off so that the response is always the model's streamed text).
"""

import json
import threading
import time
from dataclasses import asdict

import httpx
import openai
import pytest
import torch

import evidential
from inference.answer import record_evidence
from inference.config import load_config
from inference.generation import LLMGenerator
from inference.rag.evidential import EvidentialRAG
from inference.ramdocs import SAMPLE_PATH
from inference.server.app import ServerConfig, create_app
from inference.types import load_chunks

QUESTION = 'Who is the artist of the album "Crazy World"?'
CHUNKS = [asdict(c) for c in load_chunks(SAMPLE_PATH.parent / "example_chunks.jsonl")]
KEY = "test-key-0123456789abcdef"
# parts of a record that legitimately differ between two runs of the same request
VOLATILE = ("timings",)


def _stable(rec: dict) -> dict:
    out = {k: v for k, v in rec.items() if k not in VOLATILE}
    if out.get("generation"):
        out["generation"] = {k: v for k, v in out["generation"].items() if k != "seconds"}
    return out


def _events(text: str) -> list[tuple[str | None, str]]:
    """Server-sent events of a response body: (event name, data)."""
    out = []
    for block in text.strip().split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        out.append((name, "\n".join(data)))
    return out


@pytest.fixture(scope="module")
def template_server(rag, serve):
    app = create_app(rag.config, ServerConfig(max_concurrency=1, max_queue=8), pipeline=rag)
    with serve(app) as url:
        yield url


@pytest.fixture(scope="module")
def llm_rag(rag, smollm2):
    cfg = load_config(
        None,
        [
            f"evaluator.checkpoint={rag.config.evaluator.checkpoint}",
            "evaluator.name=learned",
            "evaluator.span_null_margin=-1000",
            "generator.name=llm",
            "generator.fallback_to_template=false",
            "generator.generation.max_tokens=48",
        ],
    )
    gen = LLMGenerator(smollm2, cfg.generator.generation, fallback_to_template=False)
    return EvidentialRAG(cfg, evaluator=rag.evaluator, generator=gen)


@pytest.fixture(scope="module")
def llm_server(llm_rag, serve):
    app = create_app(llm_rag.config, ServerConfig(max_concurrency=1, max_queue=8), pipeline=llm_rag)
    with serve(app) as url:
        yield url, app


def _client(url: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=120)


# ---------------------------------------------------------------------------------------------- OpenAI
def test_openai_client_lists_the_models_and_gets_the_routed_answer(template_server, rag):
    client = _client(template_server)
    ids = [m.id for m in client.models.list()]
    assert ids[0] == "evidential-rag" and sorted(ids[1:]) == [
        "evidential-rag/learned",
        "evidential-rag/prompt",
    ]
    completion = client.chat.completions.create(
        model="evidential-rag",
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": QUESTION}],
        extra_body={"chunks": CHUNKS},
    )
    (choice,) = completion.choices
    record = completion.model_extra["evidential"]
    assert choice.message.role == "assistant" and choice.finish_reason == "stop"
    assert choice.message.content == record["response"]
    assert record["question"] == QUESTION and record["route"] in evidential.ROUTES
    assert abs(sum(c["mass"] for c in record["claims"]) + record["uncertainty"] - 1) < 1e-5
    assert abs(record["ignorance"] + record["conflict"] - record["uncertainty"]) < 1e-5
    # the record /ask returns for the same question and chunks
    direct = httpx.post(
        f"{template_server}/ask", json={"question": QUESTION, "chunks": CHUNKS}, timeout=60
    ).json()
    assert _stable(record) == _stable(direct)
    # fusion overrides travel as extra fields; the model name picks the evaluator
    c2 = client.chat.completions.create(
        model="evidential-rag/learned",
        messages=[{"role": "user", "content": [{"type": "text", "text": QUESTION}]}],
        extra_body={"chunks": CHUNKS, "tau1": 0.0, "tau2": 1e-6},
    )
    assert c2.model_extra["evidential"]["route"] == "abstain"
    assert c2.model_extra["evidential"]["fusion"]["tau2"] == 1e-6


def test_openai_errors_use_the_openai_shape(template_server, rag, serve):
    client = _client(template_server)
    with pytest.raises(openai.NotFoundError) as exc:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])
    assert exc.value.code == "model_not_found" and "evidential-rag" in exc.value.message
    bad = [
        ({"messages": [{"role": "system", "content": "no question"}]}, "user message"),
        ({"messages": [{"role": "user", "content": "  "}]}, "empty"),
        (
            {
                "messages": [{"role": "user", "content": QUESTION}],
                "extra_body": {"chunks": CHUNKS, "lam": 3.0},
            },
            "fusion.lam",
        ),
        ({"messages": [{"role": "user", "content": QUESTION}], "extra_body": {"chunks": "doc1"}}, "chunks"),
        (
            {"messages": [{"role": "user", "content": QUESTION}], "n": 2, "extra_body": {"chunks": CHUNKS}},
            "n",
        ),
        ({"messages": [{"role": "user", "content": QUESTION}]}, "no chunks given"),
    ]
    for kwargs, needle in bad:
        with pytest.raises(openai.UnprocessableEntityError) as exc:
            client.chat.completions.create(model="evidential-rag", **kwargs)
        body = exc.value.body
        assert exc.value.status_code == 422 and needle in body["message"], (kwargs, body)
        assert body["type"] == "invalid_request_error" and "traceback" not in body["message"].lower()
    # a keyed server: the client's api_key is the server's key
    app = create_app(rag.config, ServerConfig(api_key=KEY), pipeline=rag)
    with serve(app) as url:
        with pytest.raises(openai.AuthenticationError) as exc:
            _client(url, "wrong-key-0123456789").models.list()
        assert exc.value.code == "invalid_api_key" and KEY not in str(exc.value.body)
        assert [m.id for m in _client(url, KEY).models.list()][0] == "evidential-rag"
    # a full queue: 503 in the OpenAI shape, with Retry-After
    app = create_app(rag.config, ServerConfig(max_concurrency=1, max_queue=0), pipeline=rag)
    with serve(app) as url:
        held = threading.Event()
        release = threading.Event()

        def hold():
            with app.state.admission.reserve():
                held.set()
                release.wait(30)

        t = threading.Thread(target=hold)
        t.start()
        held.wait(10)
        try:
            with pytest.raises(openai.InternalServerError) as exc:
                _client(url).chat.completions.create(
                    model="evidential-rag",
                    messages=[{"role": "user", "content": QUESTION}],
                    extra_body={"chunks": CHUNKS},
                )
            assert exc.value.status_code == 503 and exc.value.code == "server_busy"
            assert int(exc.value.response.headers["retry-after"]) >= 1
        finally:
            release.set()
            t.join()


def test_openai_streaming_equals_the_plain_answer(llm_server):
    url, _ = llm_server
    client = _client(url)
    kwargs = {
        "model": "evidential-rag",
        "messages": [{"role": "user", "content": QUESTION}],
        "extra_body": {"chunks": CHUNKS},
    }
    plain = client.chat.completions.create(**kwargs)
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    first, last = chunks[0], chunks[-1]
    # the evidence comes first: the fused, routed record before any text
    assert first.choices[0].delta.role == "assistant" and not first.choices[0].delta.content
    evidence = first.model_extra["evidential"]
    assert evidence["response"] == "" and evidence["route"] == plain.model_extra["evidential"]["route"]
    assert evidence["claims"] == plain.model_extra["evidential"]["claims"]
    deltas = [c.choices[0].delta.content for c in chunks[1:-1]]
    assert len(deltas) > 1 and all(deltas)  # streamed in pieces
    text = "".join(deltas)
    assert text == plain.choices[0].message.content  # greedy: the same answer, token for token
    assert last.choices[0].finish_reason == plain.choices[0].finish_reason
    final = last.model_extra["evidential"]
    assert final["response"] == text and final["generation"]["generator"] == "llm"
    assert _stable(final) == _stable(plain.model_extra["evidential"])
    assert len({c.id for c in chunks}) == 1


# ---------------------------------------------------------------------------------------------- SSE /ask
def test_ask_stream_sends_record_deltas_done(llm_server, template_server):
    url, _ = llm_server
    body = {"question": QUESTION, "chunks": CHUNKS}
    plain = httpx.post(f"{url}/ask", json=body, timeout=120).json()
    r = httpx.post(f"{url}/ask/stream", json=body, timeout=120)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = _events(r.text)
    names = [n for n, _ in events]
    assert names[0] == "record" and names[-1] == "done" and set(names[1:-1]) == {"delta"}
    first = json.loads(events[0][1])
    assert first["response"] == "" and "generation" not in first and first["route"] == plain["route"]
    text = "".join(json.loads(d)["text"] for n, d in events if n == "delta")
    done = json.loads(events[-1][1])
    assert text == done["response"] == plain["response"]
    assert _stable(done) == _stable(plain)
    # the template writes its text in one event
    r = httpx.post(f"{template_server}/ask/stream", json=body, timeout=60)
    names = [n for n, _ in _events(r.text)]
    assert names == ["record", "delta", "done"]
    # a request refused before the first event keeps its status code
    r = httpx.post(f"{template_server}/ask/stream", json={**body, "lam": 5.0}, timeout=60)
    assert r.status_code == 422 and "fusion.lam" in r.json()["detail"]
    r = httpx.post(f"{template_server}/ask/stream", json={"question": QUESTION}, timeout=60)
    assert r.status_code == 422 and "no chunks" in r.json()["detail"]


def test_a_client_that_disconnects_frees_its_slot(llm_server):
    url, app = llm_server
    long = {
        "question": "Count from one to one hundred in words, please, slowly.",
        "chunks": CHUNKS,
        "tau1": 0.0,
        "tau2": 1.0,  # conflict route: the model writes at length
    }
    with httpx.Client(base_url=url, timeout=120) as client:
        with client.stream("POST", "/ask/stream", json=long) as r:
            lines = r.iter_lines()
            assert next(lines) == "event: record"
        # the connection is closed here, long before 48 tokens are written
    deadline = time.monotonic() + 30
    while app.state.admission.stats()["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = app.state.admission.stats()
    assert stats["running"] == 0 and stats["waiting"] == 0
    r = httpx.post(f"{url}/ask", json={"question": QUESTION, "chunks": CHUNKS}, timeout=120)
    assert r.status_code == 200


# ---------------------------------------------------------------------------------------------- /fuse
def test_fuse_refuses_the_cached_evidence_like_evidential_fuse(template_server):
    rec = httpx.post(
        f"{template_server}/ask", json={"question": QUESTION, "chunks": CHUNKS}, timeout=60
    ).json()
    same = httpx.post(f"{template_server}/fuse", json={"record": rec}, timeout=60).json()
    # the same settings give the same record (the cached evidence is rounded to 6 digits: numbers to 1e-5)
    for key in ("route", "answer", "stated_claims", "cited_chunk_ids"):
        assert same[key] == rec[key], key
    for key in ("uncertainty", "ignorance", "conflict"):
        assert same[key] == pytest.approx(rec[key], abs=1e-5), key
    assert same["step_conflict"] == pytest.approx(rec["step_conflict"], abs=1e-5)
    assert [(c["id"], c["text"], c["chunk_ids"]) for c in same["claims"]] == [
        (c["id"], c["text"], c["chunk_ids"]) for c in rec["claims"]
    ]
    assert [c["mass"] for c in same["claims"]] == pytest.approx([c["mass"] for c in rec["claims"]], abs=1e-5)
    assert same["retrieval"] == rec["retrieval"] and same["evaluator"] == rec["evaluator"]
    # the record's own copy rule setting is kept: a record answered without it is re-fused without it
    assert same["fusion"]["copy_overlap"] == rec["fusion"]["copy_overlap"] == 0.8
    off = {**rec, "fusion": {**rec["fusion"], "copy_overlap": None}}
    got = httpx.post(f"{template_server}/fuse", json={"record": off}, timeout=60).json()
    assert got["fusion"]["copy_overlap"] is None and got["copy_contested"] == []
    ev = record_evidence(rec)
    for lam, rule in [(0.0, "lambda"), (1.0, "lambda"), (0.3, "yager"), (0.5, "dempster")]:
        out = httpx.post(
            f"{template_server}/fuse",
            json={"record": rec, "lam": lam, "rule": rule, "tau1": 0.2, "tau2": 0.8},
        ).json()
        res = evidential.fuse(evidential.opinions_from_evidence(ev), lam=lam, rule=rule)
        assert out["fusion"]["lam"] == lam and out["fusion"]["rule"] == rule
        assert out["uncertainty"] == pytest.approx(float(res.uncertainty), abs=1e-6)
        masses = {c["id"]: c["mass"] for c in out["claims"]}
        assert torch.allclose(
            torch.tensor([masses[c["id"]] for c in rec["claims"]], dtype=torch.float64), res.belief, atol=1e-6
        )
        assert out["route"] == evidential.route(res, 0.2, 0.8).names
        assert "generation" not in out  # the template writes the re-fused answer
    for body, needle in [
        ({"record": {"question": "q"}}, "'claims' and 'chunks'"),
        ({"record": {**rec, "chunks": [{**rec["chunks"][0], "evidence": {"a1": -1}}]}}, "finite number >= 0"),
        ({"record": {**rec, "chunks": [{**rec["chunks"][0], "evidence": {"zz": 1.0}}]}}, "'zz'"),
        ({"record": rec, "lam": 1.5}, "fusion.lam"),
        ({"record": rec, "rule": "nope"}, "fusion.rule"),
    ]:
        r = httpx.post(f"{template_server}/fuse", json=body, timeout=60)
        assert r.status_code == 422 and needle in r.text, (body, r.text)
    r = httpx.post(f"{template_server}/fuse", json={"record": []}, timeout=60)
    assert r.status_code == 422
    # Python reads Infinity and NaN, JSON has neither: refused before they reach a record (found by the
    # request fuzzer: an infinite count made the re-fused record's JSON response fail with a 500)
    bad = json.dumps({"record": {**rec, "output_counts": {"valid": 3, "failed": float("inf")}}})
    for path in ("/fuse", "/v1/chat/completions"):
        r = httpx.post(f"{template_server}{path}", content=bad, headers={"content-type": "application/json"})
        assert r.status_code == 422 and "Infinity is not a JSON number" in r.text, (path, r.text)
    assert "error" in r.json()  # the OpenAI path answers in its error shape


def test_include_chunk_text_adds_the_texts_and_nothing_else(template_server):
    body = {"question": QUESTION, "chunks": CHUNKS}
    plain = httpx.post(f"{template_server}/ask", json=body, timeout=60).json()
    rich = httpx.post(f"{template_server}/ask", json={**body, "include_chunk_text": True}, timeout=60).json()
    assert [c["text"] for c in rich["retrieval"]["chunks"]] == [c["text"] for c in CHUNKS]
    assert all("text" not in c for c in plain["retrieval"]["chunks"])
    for c in rich["retrieval"]["chunks"]:
        del c["text"]
    assert _stable(rich) == _stable(plain)
