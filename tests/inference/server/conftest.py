"""Fixtures of the server tests: the real pipeline (built once) and a real uvicorn server on a free
loopback port."""

import socket
import threading
import time
from contextlib import contextmanager

import pytest
import uvicorn

from inference.config import load_config
from inference.rag.evidential import EvidentialRAG


@pytest.fixture(scope="session")
def rag(tiny_checkpoint) -> EvidentialRAG:
    cfg = load_config(
        None,
        [
            "evaluator.name=learned",
            f"evaluator.checkpoint={tiny_checkpoint}",
            # the tiny random checkpoint's span head sits near its null score: always extract, so that
            # every question has a frame (what these plumbing tests assume), whatever the thread count
            "evaluator.span_null_margin=-1000",
            "generator.name=template",
            "evaluator.generation.max_tokens=32",  # only used if a test loads the prompt evaluator
        ],
    )
    return EvidentialRAG(cfg)


@contextmanager
def _serving(app):
    """Run ``app`` with uvicorn in a background thread on a free loopback port; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@pytest.fixture(scope="session")
def serve():
    """``with serve(app) as url:`` runs ``app`` on a free loopback port for the block."""
    return _serving
