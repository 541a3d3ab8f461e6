"""What every model-calling endpoint of the server shares: the loaded pipelines by evaluator name
(:class:`Pipelines`), the checks a request passes before it queues (:func:`check_request`), and the mapping
of what can go wrong to an HTTP status (:class:`RequestError`, :func:`request_error`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from evidential import FusionConfig
from evidential.errors import EvidentialError
from inference.alignment import AlignmentError
from inference.answer import AnswerRecord
from inference.backends.base import BackendError
from inference.evaluators import EVALUATORS
from inference.rag.evidential import EvidentialRAG
from inference.server.admission import ServerBusy
from inference.server.batching import QueueTimeout
from inference.types import Chunk

__all__ = [
    "FUSION_OVERRIDES",
    "AskJob",
    "EvaluatorUnavailable",
    "Pipelines",
    "RequestError",
    "answer_jobs",
    "check_request",
    "describe",
    "request_error",
]

LOG = logging.getLogger("inference.server")
#: Request fields that replace the run config's ``fusion`` fields for one request.
FUSION_OVERRIDES = ("lam", "tau1", "tau2", "rule", "policy")


class EvaluatorUnavailable(Exception):
    """A lazily loaded evaluator failed to load (HTTP 503)."""


class RequestError(Exception):
    """A request the server answers with an error: the HTTP ``status``, the ``message`` (never a
    traceback), extra ``headers`` (``Retry-After``) and an OpenAI-style error ``code``."""

    def __init__(
        self, status: int, message: str, headers: dict[str, str] | None = None, code: str | None = None
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.code = code


def request_error(exc: BaseException, where: str) -> RequestError:
    """The :class:`RequestError` of an exception raised while answering (``where``: the endpoint, for the
    log): 503 busy or evaluator unavailable, 422 invalid input, 502 backend failure, 500 anything else
    (logged with its traceback; the message is generic)."""
    if isinstance(exc, RequestError):
        return exc
    if isinstance(exc, ServerBusy):
        return RequestError(503, str(exc), {"Retry-After": str(exc.retry_after)}, "server_busy")
    if isinstance(exc, QueueTimeout):
        return RequestError(503, str(exc), {"Retry-After": str(exc.retry_after)}, "queue_timeout")
    if isinstance(exc, EvaluatorUnavailable):
        return RequestError(503, str(exc), code="evaluator_unavailable")
    if isinstance(exc, (EvidentialError, AlignmentError)):
        return RequestError(422, str(exc), code="invalid_request")
    if isinstance(exc, BackendError):
        LOG.error("backend error on %s: %s", where, exc)
        return RequestError(502, f"model backend failed: {exc}", code="backend_error")
    LOG.error("unexpected error on %s", where, exc_info=exc)
    return RequestError(
        500, "internal server error (the traceback is in the server log)", code="internal_error"
    )


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


def describe(pipe: EvidentialRAG) -> dict[str, Any]:
    """The model an evaluator pipeline loaded and how long it took."""
    ev = pipe.config.evaluator
    model = ev.backend.model if ev.name == "prompt" else getattr(pipe.evaluator, "checkpoint", ev.checkpoint)
    return {"model": model, "load_s": round(pipe.timings.get("load_evaluator", 0.0), 3)}


def check_request(
    pipelines: Pipelines, evaluator: str | None, overrides: dict[str, Any], chunks: list[Chunk] | None
) -> tuple[str, FusionConfig | None]:
    """Check a request before it queues: the evaluator name it gets and its fusion override (``None``: the
    run config's).

    Raises:
        RequestError: 422 for an evaluator this server does not serve, an invalid fusion override, or no
            chunks on a server without an index.
    """
    name = evaluator or pipelines.default
    if name not in pipelines.available:
        why = "" if pipelines.lazy else " (the server runs with --single-evaluator)"
        raise RequestError(
            422,
            f"evaluator must be one of {', '.join(pipelines.available)}{why}; got {name!r}",
            code="invalid_evaluator",
        )
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        fusion = pipelines.main.with_fusion(**given) if given else None
    except EvidentialError as exc:
        raise RequestError(422, str(exc), code="invalid_fusion") from None
    if chunks is None and pipelines.main.retriever is None:
        raise RequestError(
            422,
            "no chunks given and the server has no index: pass 'chunks' in the request, or start the "
            "server with --index DIR (built by `evidential-rag index`)",
            code="no_chunks",
        )
    return name, fusion


@dataclass(eq=False)
class AskJob:
    """One checked question waiting to be answered (``/ask``, non-streamed chat): the micro-batcher
    answers jobs with the same :attr:`key` in one pipeline call (:func:`answer_jobs`)."""

    evaluator: str
    question: str
    chunks: list[Chunk] | None
    candidates: list[str]
    fusion: FusionConfig | None
    include_text: bool = False

    @property
    def key(self) -> tuple:
        """Jobs that can share one call: the same evaluator, fusion settings and ``include_text``."""
        fusion = None if self.fusion is None else tuple(sorted(asdict(self.fusion).items()))
        return self.evaluator, fusion, self.include_text


def answer_jobs(pipelines: Pipelines, jobs: Sequence[AskJob]) -> list[AnswerRecord]:
    """Answer jobs that share one :attr:`AskJob.key` with ONE ``answer_records`` call (one batched evaluator
    pass, one batched generator pass); one record per job, in order."""
    first = jobs[0]
    return pipelines.get(first.evaluator).answer_records(
        [j.question for j in jobs],
        [j.chunks for j in jobs],
        [j.candidates for j in jobs],
        first.fusion,
        first.include_text,
    )
