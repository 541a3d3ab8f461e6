"""Admission control of the HTTP server: bounded concurrency with a bounded queue (:class:`Admission`),
refusal when the queue is full (:class:`ServerBusy`, HTTP 503 with ``Retry-After``), and the check that
refuses concurrent model work on a model that is not thread-safe (:func:`check_concurrency`)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread

from evidential.errors import ConfigError
from inference.evaluators import EVALUATORS

if TYPE_CHECKING:
    from inference.config import RunConfig
    from inference.server.config import ServerConfig

__all__ = ["Admission", "ServerBusy", "check_concurrency"]

T = TypeVar("T")
B = TypeVar("B")


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


class ServerBusy(Exception):
    """The queue is full: the request was refused without running (HTTP 503)."""

    def __init__(self, detail: str, retry_after: int):
        super().__init__(detail)
        self.retry_after = retry_after


class Admission:
    """Bounded concurrency with a bounded queue, shared by the event loop and the worker threads.

    At most ``max_concurrency`` slots are busy at once, each held by a worker thread that serves one call
    (:meth:`run`) or a batch of admitted calls (:meth:`run_batch`); at most ``max_queue`` admitted calls
    wait beyond the free slots; :meth:`admit` refuses any further call at once with :class:`ServerBusy`.
    ``running`` counts calls being served (a batch counts each of its calls), ``busy`` the slots held.
    Counters are guarded by a lock, so :meth:`stats` is consistent from any thread.
    """

    def __init__(self, max_concurrency: int, max_queue: int):
        self.max_concurrency = max_concurrency
        self.max_queue = max_queue
        self._slots = threading.Semaphore(max_concurrency)
        self._lock = threading.Lock()
        self._limiter: anyio.CapacityLimiter | None = None
        self.running = 0
        self.waiting = 0
        self.busy = 0
        self.peak_running = 0
        self.peak_busy = 0
        self.completed = 0
        self.rejected = 0
        self.batches = 0
        self._service_s = 1.0  # moving average of the model time per call, for Retry-After

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
                "busy_slots": self.busy,
                "max_concurrency": self.max_concurrency,
                "max_queue": self.max_queue,
                "peak_running": self.peak_running,
                "peak_busy_slots": self.peak_busy,
                "completed": self.completed,
                "rejected": self.rejected,
                "batches": self.batches,
            }

    async def run(self, fn: Callable[[], T]) -> tuple[T, float, float]:
        """Run ``fn()`` in a worker thread once a slot is free; returns ``(result, wait_s, run_s)``.

        Raises:
            ServerBusy: ``max_concurrency`` calls run and ``max_queue`` wait already.
        """
        self.admit()
        return await self.run_admitted(fn)

    def admit(self) -> None:
        """Admit one call to the queue (it counts as waiting until :meth:`run_admitted` starts it).

        Raises:
            ServerBusy: ``max_concurrency`` calls run and ``max_queue`` wait already.
        """
        with self._lock:
            if self.waiting >= self.max_queue + self.max_concurrency - self.busy:
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

    async def run_admitted(self, fn: Callable[[], T]) -> tuple[T, float, float]:
        """Run ``fn()`` for a call :meth:`admit` let in, in a worker thread once a slot is free."""
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

    def withdraw(self) -> None:
        """Give up an admitted call that never ran (its client left while it waited for a batch)."""
        with self._lock:
            self.waiting -= 1

    def _started(self, n: int) -> None:
        with self._lock:
            self.waiting -= n
            self.running += n
            self.busy += 1
            self.batches += n > 0
            self.peak_running = max(self.peak_running, self.running)
            self.peak_busy = max(self.peak_busy, self.busy)

    def _finished(self, n: int, seconds: float) -> None:
        with self._lock:
            self.running -= n
            self.busy -= 1
            self.completed += n
            if n:
                self._service_s = 0.8 * self._service_s + 0.2 * seconds / n

    def _call(self, fn: Callable[[], T], t0: float, started: list[bool]) -> tuple[T, float, float]:
        self._slots.acquire()
        started[0] = True
        self._started(1)
        t1 = time.perf_counter()
        try:
            return fn(), t1 - t0, time.perf_counter() - t1
        finally:
            self._finished(1, time.perf_counter() - t1)
            self._slots.release()

    async def run_batch(
        self, take: Callable[[], list[B]], fn: Callable[[list[B]], T]
    ) -> tuple[list[B], T | None, float, float]:
        """Serve a batch of admitted calls in one worker thread holding one slot.

        Once a slot is free, ``take()`` runs in the event loop and returns the calls to serve together
        (those that were admitted and waited meanwhile: every one of them was counted by :meth:`admit`);
        then ``fn(batch)`` runs in the thread. Returns ``(batch, fn's result, start time, run seconds)``;
        an empty batch runs nothing (result ``None``).
        """
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.max_concurrency + self.max_queue)
        return await anyio.to_thread.run_sync(self._call_batch, take, fn, limiter=self._limiter)

    def _call_batch(
        self, take: Callable[[], list[B]], fn: Callable[[list[B]], T]
    ) -> tuple[list[B], T | None, float, float]:
        self._slots.acquire()
        try:
            batch = anyio.from_thread.run_sync(take)
            self._started(len(batch))
            t1 = time.perf_counter()
            try:
                return batch, (fn(batch) if batch else None), t1, time.perf_counter() - t1
            finally:
                self._finished(len(batch), time.perf_counter() - t1)
        finally:
            self._slots.release()

    @contextmanager
    def reserve(self) -> Iterator[None]:
        """Hold one model slot from outside a request (maintenance, tests); requests queue behind it.

        Blocks until a slot is free, so call it from a thread, never from the server's event loop.
        """
        self._slots.acquire()
        with self._lock:
            self.running += 1
            self.busy += 1
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1
                self.busy -= 1
            self._slots.release()
