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
* **Safe by default**: the server binds to loopback (``127.0.0.1``); any other host is refused unless an
  API key is set or ``allow_remote`` says the network in front is trusted. With a key, every endpoint
  requires ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` (compared with :func:`hmac.compare_digest`).
"""

import logging
import threading
import time
from dataclasses import replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

import evidential
from evidential.errors import EvidentialError
from inference.alignment import AlignmentError
from inference.answer import AnswerRecord
from inference.backends.base import BackendError
from inference.config import RunConfig, to_dict
from inference.evaluators import EVALUATORS
from inference.rag.evidential import EvidentialRAG
from inference.server.admission import Admission, ServerBusy, check_concurrency
from inference.server.config import API_KEY_ENV, ServerConfig, is_loopback
from inference.server.middleware import ApiKeyMiddleware, BodyLimitMiddleware
from inference.server.schemas import request_models, to_chunks
from inference.types import Chunk

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
FUSION_OVERRIDES = ("lam", "tau1", "tau2", "rule", "policy")


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
def _error(status: int, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _install_error_handlers(app: FastAPI) -> None:
    """Pydantic validation errors → 422 with ``detail`` as a list of ``{loc, msg, type}``."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        return _error(422, errors)


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
            "evaluators": {name: _describe(p) for name, p in loaded.items()},
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
        """The run config and the server settings as plain data (API keys never included)."""
        main = app.state.pipelines.main
        return {
            "run": public_config(app.state.config),
            "server": app.state.server.public_dict(),
            "index": str(main.index) if main.index is not None else None,
        }


def _ask_problem(pipelines: Pipelines, body: Any) -> tuple[str, Any, list[Chunk] | None] | JSONResponse:
    """Check an ``/ask`` request before it queues: ``(evaluator name, fusion override, chunks)``, or the
    422 response that refuses it."""
    name = body.evaluator or pipelines.default
    if name not in pipelines.available:
        why = "" if pipelines.lazy else " (the server runs with --single-evaluator)"
        return _error(422, f"evaluator must be one of {', '.join(pipelines.available)}{why}; got {name!r}")
    overrides = {k: getattr(body, k) for k in FUSION_OVERRIDES if getattr(body, k) is not None}
    try:
        fusion = pipelines.main.with_fusion(**overrides) if overrides else None
    except EvidentialError as exc:
        return _error(422, str(exc))
    if body.chunks is None and pipelines.main.retriever is None:
        return _error(
            422,
            "no chunks given and the server has no index: pass 'chunks' in the request, or start the "
            "server with --index DIR (built by `evidential-rag index`)",
        )
    return name, fusion, to_chunks(body.chunks) if body.chunks is not None else None


async def _answer(admission: Admission, work) -> JSONResponse:
    """Run ``work`` (→ :class:`~inference.answer.AnswerRecord`) under admission control; the record with a
    ``Server-Timing`` header, or the error response of what went wrong."""
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
    return JSONResponse(record.to_dict(), headers={"Server-Timing": timing})


def _install_ask_route(app: FastAPI, AskRequest: type) -> None:
    """``POST /ask``: validate, queue for a model slot, answer with the pipeline of the named evaluator."""
    pipelines: Pipelines = app.state.pipelines
    admission: Admission = app.state.admission

    @app.post("/ask")
    async def ask(body: AskRequest) -> JSONResponse:  # type: ignore[valid-type]
        """Answer one question; returns the answer record of :meth:`EvidentialRAG.ask`."""
        checked = _ask_problem(pipelines, body)
        if isinstance(checked, JSONResponse):
            return checked
        name, fusion, chunks = checked
        question, candidates = body.question, list(body.candidates)

        def work() -> AnswerRecord:
            given = [chunks] if chunks is not None else None
            return pipelines.get(name).answer_records([question], given, [candidates], fusion)[0]

        return await _answer(admission, work)


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
    app = FastAPI(
        title="EvidentialRAG",
        version=evidential.__version__,
        description="Conflict-aware RAG: evidential opinions, conflict-preserving fusion, uncertainty routing.",
    )
    app.state.config = config
    app.state.server = server
    app.state.admission = Admission(server.max_concurrency, server.max_queue)
    app.state.pipelines = Pipelines(main, server.lazy_evaluators)
    app.state.started = time.time()
    # outermost first at request time: API key (before reading the body), then the body limit
    app.add_middleware(BodyLimitMiddleware, max_bytes=server.max_body_bytes)
    if server.api_key is not None:
        app.add_middleware(ApiKeyMiddleware, api_key=server.api_key)
    _install_error_handlers(app)
    _install_info_routes(app)
    _, AskRequest = request_models(server)
    _install_ask_route(app, AskRequest)
    return app
