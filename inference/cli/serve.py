"""``evidential-rag serve``: the HTTP server (see :mod:`inference.server.app`).

Flag help and defaults come from :class:`inference.server.app.ServerConfig`, which also validates them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evidential.errors import EvidentialError
from inference.cli.options import (
    CalibrationOpt,
    ConfigOpt,
    NoCalibrationOpt,
    SetOpt,
    err,
    fail,
    load,
    with_calibration,
)
from inference.server.app import API_KEY_ENV, ServerConfig, check_concurrency, create_app

_H = ServerConfig.help()
_D = ServerConfig()
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def serve_cmd(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    calibration: CalibrationOpt = None,
    no_calibration: NoCalibrationOpt = False,
    index: Annotated[
        Path | None,
        typer.Option(
            "--index",
            help="Index folder (built by `evidential-rag index`) searched when a request has no chunks.",
        ),
    ] = None,
    host: Annotated[str, typer.Option(help=_H["host"])] = _D.host,
    port: Annotated[int, typer.Option(help=_H["port"])] = _D.port,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar=API_KEY_ENV,
            show_envvar=True,
            show_default=False,
            help=_H["api_key"],
        ),
    ] = None,
    allow_remote: Annotated[bool, typer.Option("--allow-remote", help=_H["allow_remote"])] = False,
    max_concurrency: Annotated[int, typer.Option(help=_H["max_concurrency"])] = _D.max_concurrency,
    max_queue: Annotated[int, typer.Option(help=_H["max_queue"])] = _D.max_queue,
    max_batch_size: Annotated[int, typer.Option(help=_H["max_batch_size"])] = _D.max_batch_size,
    batch_wait_ms: Annotated[float, typer.Option(help=_H["batch_wait_ms"])] = _D.batch_wait_ms,
    queue_timeout_s: Annotated[
        float | None, typer.Option(help=_H["queue_timeout_s"], show_default=False)
    ] = _D.queue_timeout_s,
    max_body_bytes: Annotated[int, typer.Option(help=_H["max_body_bytes"])] = _D.max_body_bytes,
    max_chunks: Annotated[int, typer.Option(help=_H["max_chunks"])] = _D.max_chunks,
    max_question_chars: Annotated[int, typer.Option(help=_H["max_question_chars"])] = _D.max_question_chars,
    max_chunk_chars: Annotated[int, typer.Option(help=_H["max_chunk_chars"])] = _D.max_chunk_chars,
    max_candidates: Annotated[int, typer.Option(help=_H["max_candidates"])] = _D.max_candidates,
    lazy_evaluators: Annotated[
        bool, typer.Option("--lazy-evaluators/--single-evaluator", help=_H["lazy_evaluators"])
    ] = _D.lazy_evaluators,
    log_level: Annotated[str, typer.Option(help=f"uvicorn log level: {', '.join(LOG_LEVELS)}.")] = "info",
) -> None:
    """Serve the pipeline over HTTP (FastAPI + uvicorn): the inspector page at /, POST /ask, /ask/stream,
        /fuse, the OpenAI-compatible /v1/chat/completions and /v1/models, GET /health, GET /config.

        The models load once, before the server binds. Loopback only unless an API key is set (or
        --allow-remote). SIGTERM or Ctrl-C stops admitting, lets the admitted requests finish, then exits (with
    the signal's status, which uvicorn re-raises). Exit codes: 0 stopped, 2 bad config or settings, or
    models that cannot load.
    """
    import uvicorn

    from inference.backends.base import BackendError

    cfg = with_calibration(load(config, overrides, []), calibration, no_calibration)
    if log_level not in LOG_LEVELS:
        fail(f"--log-level must be one of {', '.join(LOG_LEVELS)}; got {log_level!r}")
    try:
        settings = ServerConfig(
            host=host,
            port=port,
            api_key=api_key or None,
            allow_remote=allow_remote,
            max_concurrency=max_concurrency,
            max_queue=max_queue,
            max_batch_size=max_batch_size,
            batch_wait_ms=batch_wait_ms,
            queue_timeout_s=queue_timeout_s,
            max_body_bytes=max_body_bytes,
            max_chunks=max_chunks,
            max_question_chars=max_question_chars,
            max_chunk_chars=max_chunk_chars,
            max_candidates=max_candidates,
            lazy_evaluators=lazy_evaluators,
        )
        check_concurrency(cfg, settings)
    except EvidentialError as exc:
        fail(str(exc))
        return
    if index is not None and not index.is_dir():
        fail(f"--index {index}: no such folder (build one with `evidential-rag index`)")
    try:
        server_app = create_app(cfg, settings, index=str(index) if index is not None else None)
    except (EvidentialError, BackendError, OSError) as exc:
        fail(f"cannot load the models: {exc}")
        return
    err.print(
        f"serving evidential-rag on http://{host}:{port} (evaluator {cfg.evaluator.name}, generator "
        f"{cfg.generator.name}, index {index or 'none'}, API key {'on' if settings.api_key else 'off'}); "
        f"inspector page http://{host}:{port}/, OpenAI-compatible base URL http://{host}:{port}/v1",
        highlight=False,
    )
    uvicorn.run(server_app, host=host, port=port, log_level=log_level, server_header=False, workers=1)
