"""HTTP server of the EvidentialRAG pipeline (FastAPI): ``POST /ask``, ``GET /health``, ``GET /config``.

:func:`create_app` builds the app around one loaded :class:`~inference.rag.evidential.EvidentialRAG`;
``evidential-rag serve`` (:mod:`inference.cli.serve`) runs it with uvicorn.

Endpoints:

* ``POST /ask`` — JSON body ``{"question": str, "chunks": [{"id", "text", "source"?, "rank"?, "score"?}]?,
  "evaluator": "prompt" | "learned"?, "candidates": [str]?, "lam"?, "tau1"?, "tau2"?, "rule"?, "policy"?}``.
  Returns the answer record of :meth:`EvidentialRAG.ask` unchanged; a ``Server-Timing``
  header gives the queue wait and the model time. Without ``chunks`` the server's index (``--index``) is
  searched; chunks without ``rank`` keep their order (as ``ask --chunks``). The fusion overrides replace
  the run config's ``fusion`` fields for this request only and are validated like the config
  (``tau1 > tau2`` → 422 naming ``fusion.tau1``).
* ``POST /ask/stream`` — the same body; a ``text/event-stream`` of server-sent events: ``record`` (the fused,
  routed evidence record, ``response`` still empty), then ``delta`` events ``{"text": ...}`` as the
  generator writes (the LLM generator over the transformers or llama.cpp backend streams tokens; the
  template sends its text in one event), then ``done`` with the answer record ``/ask`` returns; a failure
  after the first event is an ``error`` event ``{"detail", "status"}``. A client that disconnects stops
  the generation and frees its slot.
* ``POST /fuse`` — ``{"record": <answer record>, "lam"?, "tau1"?, "tau2"?, "rule"?, "policy"?}``: the
  record's cached per-chunk evidence fused and routed again (:func:`inference.answer.refuse_record`; the
  record's own fusion settings, then the overrides), answered by the route's template. No model call and
  no queue.
* ``POST /v1/chat/completions``, ``GET /v1/models`` — the OpenAI-compatible endpoints
  (:mod:`inference.server.openai_api`).
* ``GET /`` — the evidence inspector page (static files shipped in ``inference/server/inspector``); it
  only calls the documented JSON endpoints.
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
* **Bounded concurrency** (:class:`~inference.server.admission.Admission`): model work runs in worker threads
  (``anyio.to_thread.run_sync``) holding one of ``max_concurrency`` slots; at most ``max_queue`` admitted
  requests wait for a slot, and any further request is refused at once with 503 and ``Retry-After``
  (estimated from the recent service time). ``/health`` and ``/config`` never queue. The default
  ``max_concurrency`` is 1 because the models are shared objects and not generally thread-safe: torch
  encoders (learned evaluator), the transformers backend and the template generator tolerate concurrent
  calls (the tests run 2), the llama.cpp backend does not, so ``max_concurrency > 1`` is refused when a
  llama.cpp model is in use. Each evaluator already batches the ``k`` chunks of a request into one pass.
* **Micro-batching** (:class:`~inference.server.batching.MicroBatcher`, ``max_batch_size``; off by default):
  ``/ask`` and non-streamed chat requests that wait while the model is busy are answered together in one
  pipeline call; streams run one at a time.
* **Safe by default**: the server binds to loopback (``127.0.0.1``); any other host is refused unless an
  API key is set or ``allow_remote`` says the network in front is trusted. With a key, every endpoint
  requires ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` (compared with :func:`hmac.compare_digest`),
  except the inspector page and its static files, which hold no data and call no model.
"""

import logging
import time
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

import evidential
from evidential.errors import EvidentialError
from evidential.fusion import fusion_rule_names
from inference.answer import refuse_record
from inference.config import RunConfig, to_dict
from inference.rag.evidential import EvidentialRAG
from inference.server.admission import Admission, ServerBusy, check_concurrency
from inference.server.batching import MicroBatcher
from inference.server.config import API_KEY_ENV, ServerConfig, is_loopback
from inference.server.middleware import ApiKeyMiddleware, BodyLimitMiddleware, is_openai_path, openai_error
from inference.server.openai_api import install_openai_routes
from inference.server.pipelines import (
    FUSION_OVERRIDES,
    AskJob,
    Pipelines,
    RequestError,
    answer_jobs,
    check_request,
    describe,
    request_error,
)
from inference.server.schemas import FuseRequest, request_models, to_chunks
from inference.server.streaming import EventStream, sse
from inference.types import DataError

__all__ = [
    "API_KEY_ENV",
    "INSPECTOR",
    "Admission",
    "ServerBusy",
    "ServerConfig",
    "check_concurrency",
    "create_app",
    "is_loopback",
    "public_config",
]

LOG = logging.getLogger("inference.server.app")
INSPECTOR = resources.files("inference.server") / "inspector"


def _redact(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: (("<redacted>" if v else v) if k == "api_key" else _redact(v)) for k, v in data.items()}
    if isinstance(data, list):
        return [_redact(v) for v in data]
    return data


def public_config(config: RunConfig) -> dict[str, Any]:
    """The run config as plain data with every ``api_key`` value replaced by ``"<redacted>"``."""
    return _redact(to_dict(config))


# ----------------------------------------------------------------------------------------------------
def _error(status: int, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _problem(err: RequestError) -> JSONResponse:
    return _error(err.status, err.message, err.headers or None)


def _install_error_handlers(app: FastAPI) -> None:
    """Pydantic validation errors → 422 with ``detail`` as a list of ``{loc, msg, type}`` (the OpenAI error
    shape on ``/v1/`` paths, its message naming each field)."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        if is_openai_path(request.url.path):
            text = "; ".join(
                ".".join(str(x) for x in e["loc"][1:] or e["loc"]) + ": " + e["msg"] for e in errors
            )
            param = ".".join(str(x) for x in errors[0]["loc"][1:]) if errors else None
            return openai_error(422, f"invalid request: {text}", "invalid_request", param=param or None)
        return _error(422, errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # e.g. 400 for a body that cannot be parsed, 404, 405: the OpenAI shape on /v1/ paths
        if is_openai_path(request.url.path):
            return openai_error(exc.status_code, str(exc.detail), "invalid_request", headers=exc.headers)
        return _error(exc.status_code, exc.detail, exc.headers)


def _health(app: FastAPI) -> dict[str, Any]:
    """The ``GET /health`` body: status, loaded models, evaluator names a request may ask for, the queue."""
    pipelines: Pipelines = app.state.pipelines
    main = pipelines.main
    loaded = pipelines.loaded
    gen = app.state.config.generator
    return {
        "status": "ok",
        "version": evidential.__version__,
        "uptime_s": round(time.time() - app.state.started, 3),
        "evaluator": pipelines.default,
        "evaluators": {"loaded": sorted(loaded), "available": pipelines.available},
        "models": {
            "evaluators": {name: describe(p) for name, p in loaded.items()},
            "generator": {"name": gen.name, "model": gen.backend.model if gen.name == "llm" else None},
            "retriever": dict(getattr(main.retriever, "info", {}) or {})
            if main.retriever is not None
            else None,
        },
        "index": str(main.index) if main.index is not None else None,
        "queue": app.state.admission.stats(),
    }


def _install_info_routes(app: FastAPI) -> None:
    """``GET /health`` and ``GET /config`` (they never queue)."""

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Status, loaded models, evaluator names a request may ask for, and the queue."""
        return _health(app)

    @app.get("/config")
    async def get_config() -> dict[str, Any]:
        """The run config, the server settings (API keys never included) and the allowed fusion rules and
        routing policies."""
        main = app.state.pipelines.main
        return {
            "run": public_config(app.state.config),
            "server": app.state.server.public_dict(),
            "index": str(main.index) if main.index is not None else None,
            "choices": {"rule": fusion_rule_names(), "policy": list(evidential.ROUTING_POLICIES.names())},
        }


async def _answer(batcher: MicroBatcher, request: AskJob) -> JSONResponse:
    """Answer ``request`` in a micro-batch; the record with a ``Server-Timing`` header (queue wait, model
    time of its batch), or the error response of what went wrong."""
    try:
        record, wait_s, run_s = await batcher.submit(request.key, request)
    except Exception as exc:
        return _problem(request_error(exc, "/ask"))
    timing = f"queue;dur={wait_s * 1000:.1f}, model;dur={run_s * 1000:.1f}"
    return JSONResponse(record.to_dict(), headers={"Server-Timing": timing})


def _install_ask_routes(app: FastAPI, AskRequest: type) -> None:
    """``POST /ask`` and ``POST /ask/stream``: validate, queue for a model slot, answer with the pipeline of
    the named evaluator."""
    pipelines: Pipelines = app.state.pipelines
    admission: Admission = app.state.admission

    def checked(body):
        chunks = to_chunks(body.chunks) if body.chunks is not None else None
        overrides = {k: getattr(body, k) for k in FUSION_OVERRIDES}
        name, fusion = check_request(pipelines, body.evaluator, overrides, chunks)
        return name, fusion, chunks

    @app.post("/ask")
    async def ask(body: AskRequest) -> JSONResponse:  # type: ignore[valid-type]
        """Answer one question; returns the answer record of :meth:`EvidentialRAG.ask`."""
        try:
            name, fusion, chunks = checked(body)
        except RequestError as err:
            return _problem(err)
        job = AskJob(name, body.question, chunks, list(body.candidates), fusion, body.include_chunk_text)
        return await _answer(app.state.batcher, job)

    @app.post("/ask/stream")
    async def ask_stream(body: AskRequest):  # type: ignore[valid-type]
        """Answer one question as server-sent events: ``record``, ``delta``..., ``done`` (or ``error``)."""
        try:
            name, fusion, chunks = checked(body)

            def produce(cancel):
                pipe = pipelines.get(name)
                return pipe.answer_stream(
                    body.question, chunks, list(body.candidates), fusion, cancel, body.include_chunk_text
                )

            stream = await EventStream.start(admission, produce)
        except Exception as exc:
            return _problem(request_error(exc, "/ask/stream"))

        async def events():
            kind, record = stream.first
            yield sse(record.to_dict(), kind)
            async for item in stream.rest():
                if item[0] == "error":
                    err = request_error(item[1], "/ask/stream")
                    yield sse({"detail": err.message, "status": err.status}, "error")
                    return
                kind, value = item
                yield sse({"text": value} if kind == "delta" else value.to_dict(), kind)

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )


def _install_fuse_route(app: FastAPI) -> None:
    """``POST /fuse``: re-fuse an answer record's cached evidence under other settings (no model call)."""
    pipelines: Pipelines = app.state.pipelines

    @app.post("/fuse")
    async def refuse(body: FuseRequest) -> JSONResponse:
        """Fuse and route a record's per-chunk evidence again (its fusion settings, then the overrides)."""
        record = body.record
        base = record.get("fusion") if isinstance(record.get("fusion"), dict) else {}
        own = (*FUSION_OVERRIDES, "state_ratio", "state_ratio_yes_no", "state_witness_ratio", "copy_overlap")
        settings = {k: base[k] for k in own if k in base}
        settings.update({k: getattr(body, k) for k in FUSION_OVERRIDES if getattr(body, k) is not None})
        try:
            fusion = pipelines.main.with_fusion(**settings)
        except (EvidentialError, TypeError) as exc:
            return _error(422, f"invalid fusion settings: {exc}")
        pipe = pipelines.loaded.get(record.get("evaluator") or "") or pipelines.main
        cal = pipe.calibration if record.get("calibration") else None
        try:
            out = refuse_record(record, fusion, cal)
        except DataError as exc:
            return _error(422, str(exc))
        return JSONResponse(out.to_dict())


def _install_inspector(app: FastAPI) -> None:
    """``GET /``: the inspector page; ``/inspector/*``: its script and style sheet (no CDN, works offline)."""

    @app.get("/", include_in_schema=False)
    async def inspector() -> FileResponse:
        """The evidence inspector page."""
        return FileResponse(str(INSPECTOR / "index.html"), media_type="text/html")

    app.mount("/inspector", StaticFiles(directory=str(INSPECTOR)), name="inspector")


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

    The app exposes ``app.state.admission`` (:class:`~inference.server.admission.Admission`),
    ``app.state.pipelines`` (:class:`Pipelines`), ``app.state.config`` and ``app.state.server``.
    """
    server = server if server is not None else ServerConfig()
    check_concurrency(config, server)
    main = pipeline if pipeline is not None else EvidentialRAG(config, index)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await app.state.batcher.aclose()

    app = FastAPI(
        lifespan=lifespan,
        title="EvidentialRAG",
        version=evidential.__version__,
        description="Conflict-aware RAG: evidential opinions, conflict-preserving fusion, uncertainty routing.",
    )
    app.state.config = config
    app.state.server = server
    app.state.admission = Admission(server.max_concurrency, server.max_queue)
    app.state.pipelines = Pipelines(main, server.lazy_evaluators)
    app.state.batcher = MicroBatcher(
        app.state.admission,
        lambda key, jobs: answer_jobs(app.state.pipelines, jobs),
        server.max_batch_size,
        server.batch_wait_ms / 1000,
        server.queue_timeout_s,
    )
    app.state.started = time.time()
    # outermost first at request time: API key (before reading the body), then the body limit
    app.add_middleware(BodyLimitMiddleware, max_bytes=server.max_body_bytes)
    if server.api_key is not None:
        app.add_middleware(ApiKeyMiddleware, api_key=server.api_key)
    _install_error_handlers(app)
    _install_info_routes(app)
    ChunkIn, AskRequest = request_models(server)
    _install_ask_routes(app, AskRequest)
    _install_fuse_route(app)
    install_openai_routes(app, ChunkIn, server)
    _install_inspector(app)
    return app
