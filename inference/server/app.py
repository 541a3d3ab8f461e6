"""HTTP server of the EvidentialRAG pipeline (FastAPI): ``POST /ask``, ``GET /health``, ``GET /config``.

:func:`create_app` builds the app around one loaded :class:`~inference.rag.evidential.EvidentialRAG`;
``evidential-rag serve`` (:mod:`inference.cli.serve`) runs it with uvicorn.

Endpoints:

* ``POST /ask`` — JSON body ``{"question": str, "chunks": [{"id", "text", "source"?, "rank"?, "score"?}]?,
  "evaluator": "prompt" | "learned"?, "candidates": [str]?, "lam"?, "tau1"?, "tau2"?, "rule"?, "policy"?}``.
  Returns the answer record of :meth:`EvidentialRAG.ask` (DESIGN.md §3) unchanged; a ``Server-Timing``
  header gives the queue wait and the model time. Without ``chunks`` the server's index (``--index``) is
  searched; chunks without ``rank`` keep their order (as ``ask --chunks``). The fusion overrides replace
  the run config's ``fusion`` fields for this request only and are validated like the config
  (``tau1 > tau2`` → 422 naming ``fusion.tau1``).
* ``GET /health`` — ``status``, the loaded models, the evaluator names a request may ask for, and the queue
  (running, waiting, limits, counters).
* ``GET /config`` — the run config and the server settings as plain data; API keys (the server's, and any
  ``backend.api_key``) are never included.

Status codes: 200; 401 missing/wrong API key (when one is configured; checked before the body is read);
413 body over ``max_body_bytes`` (the ``Content-Length`` header and the bytes actually received);
422 invalid request (malformed JSON, wrong types, unknown fields, empty question, too many chunks, a
question or chunk that is too long, bad fusion override, no chunks and no index) and every
:class:`~evidential.errors.EvidentialError` the pipeline raises (its message is the ``detail``);
502 a model backend failed (:class:`~inference.backends.base.BackendError`); 503 the queue is full
(``Retry-After`` header) or a lazily loaded evaluator failed to load; 500 anything else (generic message,
traceback in the server log). Pydantic validation errors carry ``detail`` as a list of
``{loc, msg, type}`` (FastAPI's shape, without echoing the input); every other error a string.

Design choices:

* **Models load once**, before the server binds: the configured evaluator, the generator and the retriever.
  A request may name the *other* evaluator: it is loaded once, on first use, under a lock, sharing the
  loaded generator and retriever, and kept (``lazy_evaluators``; ``--single-evaluator`` turns it off, and
  such requests get 422). One server process serves one run config; scale out with processes.
* **Bounded concurrency** (:class:`Admission`): model work runs in worker threads
  (``anyio.to_thread.run_sync``) holding one of ``max_concurrency`` slots; at most ``max_queue`` admitted
  requests wait for a slot, and any further request is refused at once with 503 and ``Retry-After``
  (estimated from the recent service time). ``/health`` and ``/config`` never queue. The default
  ``max_concurrency`` is 1 because the models are shared objects and not generally thread-safe: torch
  encoders (learned evaluator), the transformers backend and the template generator tolerate concurrent
  calls (the tests run 2), the llama.cpp backend does not, so ``max_concurrency > 1`` is refused when a
  llama.cpp model is in use. Each evaluator already batches the ``k`` chunks of a request into one pass.
* **Safe by default**: the server binds to loopback (``127.0.0.1``); any other host is refused unless an
  API key is set or ``allow_remote`` says the network in front is trusted. With a key, every endpoint
  requires ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` (compared with :func:`hmac.compare_digest`).
"""

import hmac
import ipaddress
import logging
import math
import string
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

import evidential
from evidential.errors import ConfigError, EvidentialError
from inference.alignment import AlignmentError
from inference.backends.base import BackendError
from inference.config import RunConfig, to_dict
from inference.evaluators import EVALUATORS
from inference.rag.evidential import EvidentialRAG
from inference.types import Chunk, rank_order

__all__ = [
    "API_KEY_ENV",
    "Admission",
    "ServerBusy",
    "ServerConfig",
    "check_concurrency",
    "create_app",
    "is_loopback",
    "public_config",
]

LOG = logging.getLogger("inference.server.app")
API_KEY_ENV = "EVIDENTIAL_RAG_API_KEY"
FUSION_OVERRIDES = ("lam", "tau1", "tau2", "rule", "policy")
_KEY_CHARS = set(string.ascii_letters + string.digits + string.punctuation)
T = TypeVar("T")


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP address (``127.0.0.0/8``, ``::1``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class ServerConfig:
    """Settings of ``evidential-rag serve`` (network, access, limits); the models come from the RunConfig."""

    host: str = field(
        default="127.0.0.1",
        metadata={
            "help": "Interface to bind. Loopback by default; any other host (e.g. 0.0.0.0) needs an API key or --allow-remote."
        },
    )
    port: int = field(default=8000, metadata={"help": "TCP port (0 = any free port)."})
    api_key: str | None = field(
        default=None,
        repr=False,
        metadata={
            "help": "Require 'Authorization: Bearer KEY' or 'X-API-Key: KEY' on every endpoint (>= 16 printable "
            "characters, no spaces). Prefer the environment variable EVIDENTIAL_RAG_API_KEY to the flag, which "
            "other users can see in the process list."
        },
    )
    allow_remote: bool = field(
        default=False,
        metadata={
            "help": "Allow a non-loopback host without an API key (only behind a trusted proxy or network)."
        },
    )
    max_concurrency: int = field(
        default=1,
        metadata={
            "help": "Requests running model work at once (worker threads sharing the loaded models; llama.cpp: 1)."
        },
    )
    max_queue: int = field(
        default=32,
        metadata={
            "help": "Admitted requests waiting for a model slot; beyond it requests get 503 with Retry-After."
        },
    )
    max_body_bytes: int = field(
        default=1_048_576, metadata={"help": "Largest request body in bytes (413 beyond)."}
    )
    max_chunks: int = field(default=50, metadata={"help": "Most chunks one request may pass (422 beyond)."})
    max_question_chars: int = field(
        default=2_000, metadata={"help": "Longest question in characters (422 beyond)."}
    )
    max_chunk_chars: int = field(
        default=20_000, metadata={"help": "Longest chunk text in characters (422 beyond)."}
    )
    max_candidates: int = field(
        default=50, metadata={"help": "Most candidate claims one request may pass (422 beyond)."}
    )
    lazy_evaluators: bool = field(
        default=True,
        metadata={
            "help": "A request may name another evaluator: it is loaded once on first use and kept. "
            "Off: only the configured evaluator (422 for the other)."
        },
    )

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host.strip():
            raise ConfigError(f"server.host must be a host name or IP address; got {self.host!r}")
        self.host = self.host.strip()
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ConfigError(f"server.port must be an integer in [0, 65535]; got {self.port!r}")
        for name, low in (
            ("max_concurrency", 1),
            ("max_queue", 0),
            ("max_body_bytes", 1024),
            ("max_chunks", 1),
            ("max_question_chars", 1),
            ("max_chunk_chars", 1),
            ("max_candidates", 0),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"server.{name} must be an integer >= {low}; got {value!r}")
        if self.max_queue > 10_000:
            raise ConfigError(
                f"server.max_queue must be <= 10000 (each waiting request holds a thread); got {self.max_queue}"
            )
        for name in ("allow_remote", "lazy_evaluators"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"server.{name} must be true or false; got {getattr(self, name)!r}")
        if self.api_key is not None:
            if not isinstance(self.api_key, str) or len(self.api_key) < 16:
                raise ConfigError(
                    "server.api_key must be at least 16 characters (e.g. python -c "
                    "'import secrets; print(secrets.token_urlsafe(32))')"
                )
            if not set(self.api_key) <= _KEY_CHARS:
                raise ConfigError(
                    "server.api_key must consist of printable ASCII characters without spaces (it travels in a header)"
                )
        if not is_loopback(self.host) and self.api_key is None and not self.allow_remote:
            raise ConfigError(
                f"server.host {self.host!r} is not a loopback address: anyone who can reach it could use the "
                f"models. Set an API key (--api-key or ${API_KEY_ENV}), or pass --allow-remote when a trusted "
                "proxy or network guards the server"
            )

    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name → help text."""
        return {f.name: f.metadata["help"] for f in fields(cls)}

    def public_dict(self) -> dict[str, Any]:
        """The settings as plain data without the API key (``api_key_set`` says whether there is one)."""
        out = asdict(self)
        out.pop("api_key")
        out["api_key_set"] = self.api_key is not None
        return out


def _redact(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: (("<redacted>" if v else v) if k == "api_key" else _redact(v)) for k, v in data.items()}
    if isinstance(data, list):
        return [_redact(v) for v in data]
    return data


def public_config(config: RunConfig) -> dict[str, Any]:
    """The run config as plain data with every ``api_key`` value replaced by ``"<redacted>"``."""
    return _redact(to_dict(config))


def _uses_llamacpp(config: RunConfig, other_evaluators: bool) -> bool:
    ev = config.evaluator
    prompt = ev.name == "prompt" or (other_evaluators and "prompt" in EVALUATORS)
    return (prompt and ev.backend.name == "llamacpp") or (
        config.generator.name == "llm" and config.generator.backend.name == "llamacpp"
    )


def check_concurrency(config: RunConfig, server: ServerConfig) -> None:
    """Refuse ``max_concurrency > 1`` when a llama.cpp model (not thread-safe) may serve requests."""
    if server.max_concurrency > 1 and _uses_llamacpp(config, server.lazy_evaluators):
        raise ConfigError(
            f"server.max_concurrency must be 1 with the llamacpp backend (a llama.cpp model is not thread-safe); "
            f"got {server.max_concurrency}"
        )


# ----------------------------------------------------------------------------------------------------
class ServerBusy(Exception):
    """The queue is full: the request was refused without running (HTTP 503)."""

    def __init__(self, detail: str, retry_after: int):
        super().__init__(detail)
        self.retry_after = retry_after


class Admission:
    """Bounded concurrency with a bounded queue, shared by the event loop and the worker threads.

    At most ``max_concurrency`` calls run at once, each in a worker thread holding a slot; at most
    ``max_queue`` admitted calls wait for a slot; :meth:`run` refuses any further call at once with
    :class:`ServerBusy`. Counters are guarded by a lock, so :meth:`stats` is consistent from any thread.
    """

    def __init__(self, max_concurrency: int, max_queue: int):
        self.max_concurrency = max_concurrency
        self.max_queue = max_queue
        self._slots = threading.Semaphore(max_concurrency)
        self._lock = threading.Lock()
        self._limiter: anyio.CapacityLimiter | None = None
        self.running = 0
        self.waiting = 0
        self.peak_running = 0
        self.completed = 0
        self.rejected = 0
        self._service_s = 1.0  # moving average of the model time, for Retry-After

    def retry_after(self) -> int:
        """Seconds after which a slot is likely free: the queue ahead times the recent service time."""
        with self._lock:
            ahead = self.waiting + 1
            est = self._service_s * ahead / self.max_concurrency
        return int(min(60, max(1, math.ceil(est))))

    def stats(self) -> dict[str, Any]:
        """Running and waiting calls, the limits and the counters."""
        with self._lock:
            return {
                "running": self.running,
                "waiting": self.waiting,
                "max_concurrency": self.max_concurrency,
                "max_queue": self.max_queue,
                "peak_running": self.peak_running,
                "completed": self.completed,
                "rejected": self.rejected,
            }

    async def run(self, fn: Callable[[], T]) -> tuple[T, float, float]:
        """Run ``fn()`` in a worker thread once a slot is free; returns ``(result, wait_s, run_s)``.

        Raises:
            ServerBusy: ``max_concurrency`` calls run and ``max_queue`` wait already.
        """
        with self._lock:
            if self.running + self.waiting >= self.max_concurrency + self.max_queue:
                self.rejected += 1
                busy = (self.running, self.waiting)
            else:
                busy = None
                self.waiting += 1
        if busy is not None:
            retry = self.retry_after()
            raise ServerBusy(
                f"server busy: {busy[0]} request(s) running and {busy[1]} waiting (max_queue "
                f"{self.max_queue}); retry after {retry} s",
                retry,
            )
        if self._limiter is None:  # created in the event loop that serves the requests
            self._limiter = anyio.CapacityLimiter(self.max_concurrency + self.max_queue)
        started = [False]
        t0 = time.perf_counter()
        try:
            return await anyio.to_thread.run_sync(self._call, fn, t0, started, limiter=self._limiter)
        finally:
            if not started[0]:  # cancelled before the thread took over the accounting
                with self._lock:
                    self.waiting -= 1

    def _call(self, fn: Callable[[], T], t0: float, started: list[bool]) -> tuple[T, float, float]:
        self._slots.acquire()
        with self._lock:
            started[0] = True
            self.waiting -= 1
            self.running += 1
            self.peak_running = max(self.peak_running, self.running)
        t1 = time.perf_counter()
        try:
            return fn(), t1 - t0, time.perf_counter() - t1
        finally:
            with self._lock:
                self.running -= 1
                self.completed += 1
                self._service_s = 0.8 * self._service_s + 0.2 * (time.perf_counter() - t1)
            self._slots.release()

    @contextmanager
    def reserve(self) -> Iterator[None]:
        """Hold one model slot from outside a request (maintenance, tests); requests queue behind it.

        Blocks until a slot is free, so call it from a thread, never from the server's event loop.
        """
        self._slots.acquire()
        with self._lock:
            self.running += 1
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1
            self._slots.release()


class EvaluatorUnavailable(Exception):
    """A lazily loaded evaluator failed to load (HTTP 503)."""


class Pipelines:
    """The loaded pipelines by evaluator name: the configured one, plus others loaded on first use."""

    def __init__(self, main: EvidentialRAG, lazy: bool):
        self.main = main
        self.default = main.config.evaluator.name
        self.lazy = lazy
        self._loaded: dict[str, EvidentialRAG] = {self.default: main}
        self._lock = threading.Lock()

    @property
    def available(self) -> list[str]:
        """Evaluator names a request may ask for."""
        return list(EVALUATORS.names()) if self.lazy else [self.default]

    @property
    def loaded(self) -> dict[str, EvidentialRAG]:
        return dict(self._loaded)

    def get(self, name: str) -> EvidentialRAG:
        """The pipeline of evaluator ``name``, loading it (once, under a lock) when it is not loaded yet."""
        pipe = self._loaded.get(name)
        if pipe is not None:
            return pipe
        with self._lock:
            pipe = self._loaded.get(name)
            if pipe is not None:
                return pipe
            cfg = replace(self.main.config, evaluator=replace(self.main.config.evaluator, name=name))
            t0 = time.perf_counter()
            try:
                pipe = EvidentialRAG(
                    cfg, self.main.index, generator=self.main.generator, retriever=self.main.retriever
                )
            except (EvidentialError, BackendError, OSError) as exc:
                LOG.error("evaluator %r failed to load: %s", name, exc)
                raise EvaluatorUnavailable(f"evaluator {name!r} could not be loaded: {exc}") from exc
            LOG.info("loaded evaluator %r in %.1f s", name, time.perf_counter() - t0)
            self._loaded[name] = pipe
            return pipe


def _describe(pipe: EvidentialRAG) -> dict[str, Any]:
    ev = pipe.config.evaluator
    model = ev.backend.model if ev.name == "prompt" else getattr(pipe.evaluator, "checkpoint", ev.checkpoint)
    return {"model": model, "load_s": round(pipe.timings.get("load_evaluator", 0.0), 3)}


# ----------------------------------------------------------------------------------------------------
def _header(scope: dict, name: bytes) -> list[bytes]:
    return [v for k, v in scope.get("headers", ()) if k.lower() == name]


class _ApiKeyMiddleware:
    """401 unless ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` matches (before the body is read)."""

    def __init__(self, app, api_key: str):
        self.app = app
        self._key = api_key.encode()

    def _authorized(self, scope: dict) -> bool:
        given = list(_header(scope, b"x-api-key"))
        for value in _header(scope, b"authorization"):
            scheme, _, token = value.partition(b" ")
            if scheme.lower() == b"bearer":
                given.append(token.strip())
        ok = False
        for g in given:
            ok |= hmac.compare_digest(g, self._key)
        return ok

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        response = JSONResponse(
            {"detail": "missing or wrong API key: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'"},
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="evidential-rag"'},
        )
        await response(scope, receive, send)


class _BodyLimitMiddleware:
    """413 when the body is over ``max_bytes``: by its ``Content-Length`` or by the bytes received.

    The body is read (at most ``max_bytes``) before the app runs and replayed to it; a refused body is
    drained (up to a cap) so that the client reads the 413 instead of a reset connection.
    """

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes
        self.drain_cap = max(4 * max_bytes, 1 << 20)

    async def _reject(self, scope, receive, send, more: bool, received: int) -> None:
        while more and received <= self.drain_cap:
            msg = await receive()
            if msg["type"] != "http.request":
                return
            received += len(msg.get("body", b""))
            more = msg.get("more_body", False)
        response = JSONResponse(
            {"detail": f"request body too large: the limit is {self.max_bytes} bytes (max_body_bytes)"},
            status_code=413,
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for value in _header(scope, b"content-length"):
            try:
                declared = int(value)
            except ValueError:
                await JSONResponse({"detail": "invalid Content-Length header"}, status_code=400)(
                    scope, receive, send
                )
                return
            if declared > self.max_bytes:
                await self._reject(scope, receive, send, declared <= self.drain_cap, 0)
                return
        body = bytearray()
        while True:
            msg = await receive()
            if msg["type"] != "http.request":  # client went away
                return
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
            if len(body) > self.max_bytes:
                await self._reject(scope, receive, send, more, len(body))
                return
            if not more:
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


# ----------------------------------------------------------------------------------------------------
def _request_models(s: ServerConfig) -> tuple[type[BaseModel], type[BaseModel]]:
    """The request models, with the limits of ``s`` as field constraints."""

    class ChunkIn(BaseModel):
        """A retrieved chunk (DESIGN.md §3)."""

        model_config = ConfigDict(extra="forbid", strict=True)

        id: str = Field(min_length=1, max_length=256, description="Chunk id (unique within the request).")
        text: str = Field(max_length=s.max_chunk_chars, description="Chunk text.")
        source: str | None = Field(default=None, max_length=2048, description="Doc id, url or title.")
        rank: int | None = Field(default=None, ge=1, description="Rank (1 = best); none: list order.")
        score: float | None = Field(default=None, allow_inf_nan=False, description="Retrieval score.")

    class AskRequest(BaseModel):
        """One question, with chunks (or the server's index), an evaluator and fusion overrides."""

        model_config = ConfigDict(extra="forbid", strict=True)

        question: str = Field(min_length=1, max_length=s.max_question_chars, description="The question.")
        chunks: list[ChunkIn] | None = Field(
            default=None,
            max_length=s.max_chunks,
            description="Retrieved chunks; omitted: search the server's index (--index).",
        )
        evaluator: str | None = Field(
            default=None, min_length=1, max_length=64, description="Evaluator name (default: the server's)."
        )
        candidates: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
            default_factory=list,
            max_length=s.max_candidates,
            description="Candidate claims that open the inventory (e.g. yes, no).",
        )
        lam: float | None = Field(default=None, allow_inf_nan=False, description="fusion.lam override.")
        tau1: float | None = Field(default=None, allow_inf_nan=False, description="fusion.tau1 override.")
        tau2: float | None = Field(default=None, allow_inf_nan=False, description="fusion.tau2 override.")
        rule: str | None = Field(default=None, max_length=32, description="fusion.rule override.")
        policy: str | None = Field(default=None, max_length=32, description="fusion.policy override.")

        @field_validator("question")
        @classmethod
        def _not_blank(cls, v: str) -> str:
            if not v.strip():
                raise ValueError("question must not be empty or blank")
            return v

        @field_validator("candidates")
        @classmethod
        def _no_blank_candidates(cls, v: list[str]) -> list[str]:
            if any(not c.strip() for c in v):
                raise ValueError("candidates must be non-blank strings")
            return v

        @model_validator(mode="after")
        def _unique_ids(self):
            if self.chunks:
                seen: set[str] = set()
                for c in self.chunks:
                    if c.id in seen:
                        raise ValueError(f"duplicate chunk id {c.id!r}")
                    seen.add(c.id)
            return self

    return ChunkIn, AskRequest


def _to_chunks(items: list) -> list[Chunk]:
    """Request chunks → :class:`Chunk` in rank order; chunks without rank keep list order (as ``load_chunks``)."""
    return rank_order([Chunk(c.id, c.text, c.source, c.rank, c.score) for c in items])


def _error(status: int, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def create_app(
    config: RunConfig,
    server: ServerConfig | None = None,
    *,
    pipeline: EvidentialRAG | None = None,
    index: str | None = None,
) -> FastAPI:
    """Build the FastAPI app serving ``config``'s pipeline.

    Args:
        config: The run config (its evaluator is loaded now; see :class:`ServerConfig` ``lazy_evaluators``).
        server: Network, access and limits (default: loopback, no key, 1 running, 32 waiting).
        pipeline: An already-built pipeline over ``config`` (tests, embedding); ``None`` builds one.
        index: The index folder for requests without chunks (ignored when ``pipeline`` is given).

    Raises:
        ConfigError: Invalid settings (e.g. ``max_concurrency > 1`` with llama.cpp).
        EvidentialError, BackendError: The models could not be loaded (when ``pipeline`` is None).

    The app exposes ``app.state.admission`` (:class:`Admission`), ``app.state.pipelines``
    (:class:`Pipelines`), ``app.state.config`` and ``app.state.server``.
    """
    server = server if server is not None else ServerConfig()
    check_concurrency(config, server)
    main = pipeline if pipeline is not None else EvidentialRAG(config, index)
    pipelines = Pipelines(main, server.lazy_evaluators)
    admission = Admission(server.max_concurrency, server.max_queue)
    _, AskRequest = _request_models(server)
    started = time.time()

    app = FastAPI(
        title="EvidentialRAG",
        version=evidential.__version__,
        description="Conflict-aware RAG: evidential opinions, conflict-preserving fusion, uncertainty routing.",
    )
    app.state.config = config
    app.state.server = server
    app.state.admission = admission
    app.state.pipelines = pipelines
    # outermost first at request time: API key (before reading the body), then the body limit
    app.add_middleware(_BodyLimitMiddleware, max_bytes=server.max_body_bytes)
    if server.api_key is not None:
        app.add_middleware(_ApiKeyMiddleware, api_key=server.api_key)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        return _error(422, errors)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Status, loaded models, evaluator names a request may ask for, and the queue."""
        loaded = pipelines.loaded
        gen = config.generator
        return {
            "status": "ok",
            "version": evidential.__version__,
            "uptime_s": round(time.time() - started, 3),
            "evaluator": pipelines.default,
            "evaluators": {"loaded": sorted(loaded), "available": pipelines.available},
            "models": {
                "evaluators": {name: _describe(p) for name, p in loaded.items()},
                "generator": {"name": gen.name, "model": gen.backend.model if gen.name == "llm" else None},
                "retriever": dict(getattr(main.retriever, "info", {}) or {})
                if main.retriever is not None
                else None,
            },
            "index": str(main.index) if main.index is not None else None,
            "queue": admission.stats(),
        }

    @app.get("/config")
    async def get_config() -> dict[str, Any]:
        """The run config and the server settings as plain data (API keys never included)."""
        return {
            "run": public_config(config),
            "server": server.public_dict(),
            "index": str(main.index) if main.index is not None else None,
        }

    @app.post("/ask")
    async def ask(body: AskRequest) -> JSONResponse:  # type: ignore[valid-type]
        """Answer one question; returns the answer record of :meth:`EvidentialRAG.ask`."""
        name = body.evaluator or pipelines.default
        if name not in pipelines.available:
            why = "" if pipelines.lazy else " (the server runs with --single-evaluator)"
            return _error(
                422, f"evaluator must be one of {', '.join(pipelines.available)}{why}; got {name!r}"
            )
        overrides = {k: getattr(body, k) for k in FUSION_OVERRIDES if getattr(body, k) is not None}
        try:
            fusion = main.with_fusion(**overrides) if overrides else None
        except EvidentialError as exc:
            return _error(422, str(exc))
        if body.chunks is None and main.retriever is None:
            return _error(
                422,
                "no chunks given and the server has no index: pass 'chunks' in the request, or start the "
                "server with --index DIR (built by `evidential-rag index`)",
            )
        chunks = _to_chunks(body.chunks) if body.chunks is not None else None
        question, candidates = body.question, list(body.candidates)

        def work() -> dict[str, Any]:
            return pipelines.get(name).ask(question, chunks, candidates, fusion)

        try:
            record, wait_s, run_s = await admission.run(work)
        except ServerBusy as exc:
            return _error(503, str(exc), {"Retry-After": str(exc.retry_after)})
        except EvaluatorUnavailable as exc:
            return _error(503, str(exc))
        except (EvidentialError, AlignmentError) as exc:
            return _error(422, str(exc))
        except BackendError as exc:
            LOG.error("backend error on /ask: %s", exc)
            return _error(502, f"model backend failed: {exc}")
        except Exception:
            LOG.exception("unexpected error on /ask")
            return _error(500, "internal server error (the traceback is in the server log)")
        timing = f"queue;dur={wait_s * 1000:.1f}, model;dur={run_s * 1000:.1f}"
        return JSONResponse(record, headers={"Server-Timing": timing})

    return app
