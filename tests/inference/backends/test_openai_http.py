"""The OpenAI-compatible HTTP backend against a real local HTTP server speaking the same API."""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import inference.backends.openai_http as openai_http
from inference.backends.base import (
    Backend,
    BackendConfig,
    BackendError,
    GenerationConfig,
    LogprobsUnsupportedError,
    load_backend,
)

SCHEMA = {
    "type": "object",
    "properties": {"relevant": {"type": "boolean"}, "answer": {"type": "string"}},
    "required": ["relevant", "answer"],
    "additionalProperties": False,
}
SCHEMA_REPLY = {"relevant": True, "answer": "Paris"}


class FakeOpenAIServer:
    """A tiny ``/v1/chat/completions`` server in a background thread.

    It echoes the last user message (truncated to ``max_tokens`` words, ``finish_reason="length"`` then),
    answers schema requests with :data:`SCHEMA_REPLY`, and records every request. ``plan`` holds scripted
    actions consumed one per request before normal answers: ``("status", code, headers, body)`` or
    ``("sleep", seconds)`` or ``("drop",)`` (answer, then close the connection). ``delay`` maps a prompt text to seconds to wait before answering.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.plan: deque[tuple[Any, ...]] = deque()
        self.delay: Any = None
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like real servers

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (stdlib name)
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with server.lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    action = server.plan.popleft() if server.plan else None
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._answer(body, action)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _answer(self, body: dict[str, Any], action: tuple[Any, ...] | None) -> None:
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if action and action[0] == "sleep":
                    server.release.wait(action[1])
                    return self._send(200, completion(body))
                if action and action[0] == "drop":  # answer, then close the keep-alive connection silently
                    self.close_connection = True
                    return self._send(200, completion(body))
                if action and action[0] == "status":
                    _, code, headers, payload = action
                    return self._send(code, payload, headers)
                if server.delay is not None:
                    time.sleep(server.delay(body["messages"][-1]["content"]))
                return self._send(200, completion(body))

            def _send(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(raw)
                except OSError:  # the client gave up (timeout test)
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> FakeOpenAIServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def completion(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat.completion for ``body``."""
    if "response_format" in body:
        text, finish = json.dumps(SCHEMA_REPLY), "stop"
    else:
        words = body["messages"][-1]["content"].split()
        finish = "length" if len(words) > body["max_tokens"] else "stop"
        text = " ".join(words[: body["max_tokens"]])
    n = len(text.split())
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": finish,
    }
    if body.get("logprobs"):
        choice["logprobs"] = {
            "content": [
                {"token": w, "logprob": -0.5 * (i + 1), "bytes": None} for i, w in enumerate(text.split())
            ]
        }
        if body.get("top_logprobs") and choice["logprobs"]["content"]:
            # label scoring: the first position's most likely tokens, two spellings of "A" among them
            choice["logprobs"]["content"][0]["top_logprobs"] = [
                {"token": " A", "logprob": math.log(0.5), "bytes": None},
                {"token": "A", "logprob": math.log(0.2), "bytes": None},
                {"token": "B", "logprob": math.log(0.1), "bytes": None},
                {"token": "x", "logprob": math.log(0.05), "bytes": None},
            ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": body["model"],
        "choices": [choice],
        "usage": {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": 7 + n},
    }


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def make(server: FakeOpenAIServer, **overrides: Any) -> openai_http.OpenAIHTTPBackend:
    overrides.setdefault("max_retries", 3)
    backoff = overrides.pop("backoff_s", 0.001)
    config = BackendConfig(name="openai", model="served-model", base_url=server.url, **overrides)
    return openai_http.OpenAIHTTPBackend(config, backoff_s=backoff)


def test_registered_and_satisfies_protocol(server):
    backend = load_backend(BackendConfig(name="openai", model="served-model", base_url=server.url))
    try:
        assert isinstance(backend, openai_http.OpenAIHTTPBackend)
        assert isinstance(backend, Backend)
        assert backend.name == "openai" and backend.supports_json_schema and backend.passes == 0
    finally:
        backend.close()


def test_batch_keeps_order_bounds_concurrency_and_counts_one_pass(server):
    # Earlier prompts answer more slowly, so completion order is the reverse of input order.
    server.delay = lambda text: 0.01 * (10 - int(text.split()[-1]))
    prompts = [user(f"prompt number {i}") for i in range(10)]
    with make(server, concurrency=3) as backend:
        out = backend.generate(prompts, GenerationConfig(max_tokens=16))
        assert [g.text for g in out] == [f"prompt number {i}" for i in range(10)]
        assert all(g.finish_reason == "stop" and g.num_tokens == 3 for g in out)
        assert all(not g.constrained and g.token_logprobs is None for g in out)
        assert backend.passes == 1
        assert len(server.requests) == 10
        assert 2 <= server.max_in_flight <= 3
        backend.generate(prompts[:2], GenerationConfig())
        assert backend.passes == 2
        assert backend.generate([], GenerationConfig()) == [] and backend.passes == 2


def test_request_body_forwards_schema_seed_and_temperature(server):
    with make(server) as backend:
        config = GenerationConfig(max_tokens=64, temperature=0.7, seed=1234, json_schema=SCHEMA)
        (gen,) = backend.generate([user("Is the chunk relevant?")], config)
    assert json.loads(gen.text) == SCHEMA_REPLY and gen.constrained
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Content-Type"] == "application/json"
    body = request["body"]
    assert body["model"] == "served-model"
    assert body["messages"] == user("Is the chunk relevant?")
    assert body["max_tokens"] == 64 and body["temperature"] == 0.7 and body["seed"] == 1234
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "chunk_evidence", "schema": SCHEMA, "strict": True},
    }
    assert "logprobs" not in body


def test_plain_request_has_no_response_format_and_reports_length_finish(server):
    with make(server) as backend:
        (gen,) = backend.generate([user("one two three four five")], GenerationConfig(max_tokens=2))
    assert "response_format" not in server.requests[0]["body"]
    assert gen.text == "one two" and gen.finish_reason == "length" and gen.num_tokens == 2
    assert not gen.constrained


def test_logprobs_are_requested_and_parsed(server):
    with make(server) as backend:
        (gen,) = backend.generate([user("alpha beta gamma")], GenerationConfig(logprobs=True))
    assert server.requests[0]["body"]["logprobs"] is True
    assert gen.token_logprobs == pytest.approx([-0.5, -1.0, -1.5])


def test_retries_on_503_and_429_then_succeeds(server):
    server.plan.extend(
        [
            ("status", 503, {}, {"error": {"message": "overloaded"}}),
            ("status", 429, {}, {"error": {"message": "slow down"}}),
            ("status", 502, {}, b"bad gateway"),
        ]
    )
    with make(server, max_retries=3) as backend:
        (gen,) = backend.generate([user("hello there")], GenerationConfig())
    assert gen.text == "hello there"
    assert len(server.requests) == 4


def test_retry_after_header_is_honoured(server):
    server.plan.append(("status", 429, {"Retry-After": "0.3"}, {"error": {"message": "rate limited"}}))
    with make(server, max_retries=1, backoff_s=0.0) as backend:
        start = time.monotonic()
        backend.generate([user("hi")], GenerationConfig())
        elapsed = time.monotonic() - start
    assert elapsed >= 0.3
    assert len(server.requests) == 2


def test_retry_exhaustion_names_attempts_status_and_url(server):
    server.plan.extend([("status", 503, {}, {"error": {"message": "engine overloaded"}})] * 5)
    with make(server, max_retries=2) as backend:
        with pytest.raises(BackendError) as info:
            backend.generate([user("hi")], GenerationConfig())
        assert backend.passes == 0
    message = str(info.value)
    assert "3 attempts" in message and "HTTP 503" in message and "engine overloaded" in message
    assert f"{server.url}/chat/completions" in message
    assert len(server.requests) == 3


def test_400_fails_fast_with_server_message(server):
    server.plan.append(
        (
            "status",
            400,
            {},
            {"error": {"message": "max_tokens is too large", "type": "BadRequestError", "code": 400}},
        )
    )
    with make(server, max_retries=3) as backend:
        with pytest.raises(BackendError, match=r"HTTP 400: max_tokens is too large"):
            backend.generate([user("hi")], GenerationConfig())
    assert len(server.requests) == 1


def test_vllm_style_error_body_and_404_hint(server):
    server.plan.append(("status", 404, {}, {"object": "error", "message": "The model `x` does not exist."}))
    with make(server) as backend:
        with pytest.raises(BackendError, match=r"HTTP 404: The model `x` does not exist\..*backend\.model"):
            backend.generate([user("hi")], GenerationConfig())


def test_one_failing_prompt_fails_the_batch(server):
    server.plan.append(("status", 400, {}, {"error": {"message": "bad message"}}))
    with make(server, concurrency=1) as backend:
        with pytest.raises(BackendError, match="bad message"):
            backend.generate([user(f"p {i}") for i in range(4)], GenerationConfig())
        assert backend.passes == 0


def test_timeout_is_retried_then_succeeds(server):
    server.plan.append(("sleep", 2.0))
    with make(server, timeout_s=0.2, max_retries=1) as backend:
        start = time.monotonic()
        (gen,) = backend.generate([user("after a timeout")], GenerationConfig())
        assert time.monotonic() - start < 1.5
    assert gen.text == "after a timeout"
    assert len(server.requests) == 2


def test_timeout_exhaustion_says_timed_out(server):
    server.plan.extend([("sleep", 2.0)] * 2)
    with make(server, timeout_s=0.2, max_retries=1) as backend:
        with pytest.raises(BackendError, match=r"failed after 2 attempts.*timed out after 0\.2 s"):
            backend.generate([user("hi")], GenerationConfig())


def test_connection_refused_is_retried_and_reported():
    with socket.socket() as sock:  # a port with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    config = BackendConfig(name="openai", model="m", base_url=url, max_retries=2)
    with openai_http.OpenAIHTTPBackend(config, backoff_s=0.001) as backend:
        with pytest.raises(BackendError, match=r"failed after 3 attempts.*connection refused") as info:
            backend.generate([user("hi")], GenerationConfig())
    assert f"{url}/chat/completions" in str(info.value)


def test_non_json_success_body_is_an_error(server):
    server.plan.append(("status", 200, {}, b"<html>not an API</html>"))
    with make(server) as backend:
        with pytest.raises(BackendError, match="not JSON"):
            backend.generate([user("hi")], GenerationConfig())
    assert len(server.requests) == 1


def test_bearer_header_from_config(server):
    with make(server, api_key="sk-config") as backend:
        backend.generate([user("hi")], GenerationConfig())
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-config"


def test_bearer_header_from_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    with make(server) as backend:
        backend.generate([user("hi")], GenerationConfig())
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-env"


def test_no_authorization_header_without_a_key(server):
    with make(server) as backend:
        backend.generate([user("hi")], GenerationConfig())
    assert "Authorization" not in server.requests[0]["headers"]


def test_keep_alive_connection_survives_many_calls(server):
    with make(server, concurrency=2) as backend:
        for i in range(5):
            out = backend.generate([user(f"a {i}"), user(f"b {i}")], GenerationConfig())
            assert [g.text for g in out] == [f"a {i}", f"b {i}"]
        assert backend.passes == 5


def test_idle_connection_closed_by_server_is_resent_without_a_retry(server):
    server.plan.append(("drop",))
    with make(server, concurrency=1, max_retries=0) as backend:
        backend.generate([user("first")], GenerationConfig())
        time.sleep(0.05)  # let the server close the socket
        (gen,) = backend.generate([user("second")], GenerationConfig())
    assert gen.text == "second"
    assert [r["body"]["messages"][-1]["content"] for r in server.requests] == ["first", "second"]


def test_closed_backend_refuses_to_generate(server):
    backend = make(server)
    backend.close()
    backend.close()  # idempotent
    with pytest.raises(BackendError, match="closed"):
        backend.generate([user("hi")], GenerationConfig())


def test_packaged_model_name_and_bad_url_are_rejected():
    with pytest.raises(BackendError, match="backend.model"):
        load_backend(BackendConfig(name="openai"))
    with pytest.raises(BackendError, match="http"):
        load_backend(BackendConfig(name="openai", model="m", base_url="127.0.0.1:8000/v1"))


def test_score_labels_reads_top_logprobs_of_the_first_token(server):
    backend = make(server)
    try:
        scores = backend.score_labels([user("one two"), user("three")], ["A", "B", "C"])
    finally:
        backend.close()
    assert backend.passes == 1 and len(server.requests) == 2
    body = server.requests[0]["body"]
    assert body["max_tokens"] == 1 and body["temperature"] == 0.0
    assert body["logprobs"] is True and body["top_logprobs"] == openai_http.TOP_LOGPROBS
    for s in scores:
        # " A" and "A" are both the label A: log(0.5 + 0.2); C was not listed: -inf
        assert s.logprobs[0] == pytest.approx(math.log(0.7))
        assert s.logprobs[1] == pytest.approx(math.log(0.1))
        assert s.logprobs[2] == float("-inf")


def test_score_labels_on_a_server_without_logprobs_says_so(server):
    plain = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "length"}]
    }
    server.plan.append(("status", 200, {}, plain))
    backend = make(server)
    try:
        with pytest.raises(LogprobsUnsupportedError, match="does not report log-probabilities.*scoring=json"):
            backend.score_labels([user("q")], ["A", "B"])
    finally:
        backend.close()
