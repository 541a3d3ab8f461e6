"""Fuzzed request bodies for every endpoint that reads one (``/ask``, ``/ask/stream``, ``/fuse``,
``/v1/chat/completions``), on the real app over the real pipeline: valid bodies mutated (fields deleted,
replaced with random JSON, added, blown up), random JSON, random bytes (invalid UTF-8), deep nesting,
NaN and 1e999. Every answer is a 2xx or a 4xx whose body says what is wrong — never a 5xx, never a hang."""

import json
from dataclasses import asdict

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.ramdocs import SAMPLE_PATH
from inference.server.app import ServerConfig, create_app
from inference.types import load_chunks

QUESTION = 'Who is the artist of the album "Crazy World"?'
CHUNKS = [asdict(c) for c in load_chunks(SAMPLE_PATH.parent / "example_chunks.jsonl")]
TRAPS = [b"[" * 100_000 + b"]" * 100_000, b'{"question": NaN}', b'{"question": "q", "lam": 1e999}', b"\xff\xfe", b""]


@pytest.fixture(scope="module")
def client(rag):
    app = create_app(rag.config, ServerConfig(max_body_bytes=400_000, max_queue=64), pipeline=rag)
    with TestClient(app, raise_server_exceptions=False) as c:
        record = c.post("/ask", json={"question": QUESTION, "chunks": CHUNKS}).json()
        yield c, record


def _bodies(record):
    return {
        "/ask": {"question": QUESTION, "chunks": CHUNKS, "candidates": ["Boys Like Girls"], "lam": 0.5},
        "/ask/stream": {"question": QUESTION, "chunks": CHUNKS[:1]},
        "/fuse": {"record": record, "lam": 0.3, "tau1": 0.2, "tau2": 0.8},
        "/v1/chat/completions": {
            "model": "evidential-rag",
            "messages": [{"role": "user", "content": QUESTION}],
            "chunks": CHUNKS[:2],
        },
    }


@settings(max_examples=120)
@given(data=st.data())
def test_fuzzed_bodies_get_a_2xx_or_a_clear_4xx(data, client, fuzzed_value):
    c, record = client
    path, valid = data.draw(st.sampled_from(sorted(_bodies(record).items())))
    kind = data.draw(st.sampled_from(["mutated", "mutated", "mutated", "bytes", "trap"]))
    if kind == "mutated":
        body = json.dumps(fuzzed_value(data, valid)).encode()
    elif kind == "bytes":
        body = data.draw(st.binary(max_size=80))
    else:
        body = data.draw(st.sampled_from(TRAPS))
    r = c.post(path, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code < 500, (path, body[:300], r.status_code, r.text[:500])
    if r.status_code >= 400:
        err = r.json()
        if path.startswith("/v1/"):  # the OpenAI error shape
            assert err["error"]["message"] and err["error"]["type"] == "invalid_request_error", err
        else:
            assert err["detail"], err
        assert "Traceback" not in r.text
