"""Micro-batching of the server's answers: requests that arrive while the model is busy are gathered into
one pipeline call (:class:`MicroBatcher`).

Each admitted request (:meth:`~inference.server.admission.Admission.admit`: the queue bound and 503 stay
as they were) joins a FIFO queue. ``max_concurrency`` dispatchers each wait for a model slot; once one is
free, the dispatcher takes the oldest request and every other waiting request that can share its call —
the same batch key (evaluator, fusion settings, ``include_chunk_text``) — up to ``max_batch_size``, and
answers them with ONE :meth:`~inference.rag.evidential.EvidentialRAG.answer_records` call (one batched
evaluator pass and one batched generator pass for all of them). With ``batch_wait_ms`` an idle dispatcher
waits that long before taking a batch, to gather requests that arrive together.

Each caller gets its own record. When the batched call fails, its requests are answered one by one, so an
error in one request (e.g. a backend refusing one prompt) fails only that request. A caller that leaves
before its batch is taken (client disconnect, request timeout) is removed from the queue and its admission
given back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from inference.server.admission import Admission

__all__ = ["MicroBatcher", "QueueTimeout"]

LOG = logging.getLogger("inference.server.batching")


class QueueTimeout(Exception):
    """A request waited longer than ``queue_timeout_s`` for a model slot and left the queue (HTTP 503)."""

    def __init__(self, detail: str, retry_after: int):
        super().__init__(detail)
        self.retry_after = retry_after


@dataclass(eq=False)
class _Job:
    key: Hashable
    payload: Any
    future: asyncio.Future
    t0: float = field(default_factory=time.perf_counter)


class MicroBatcher:
    """Gather admitted requests into batched calls of ``runner``.

    Args:
        admission: The server's admission control (queue bound, slots, counters).
        runner: ``runner(key, payloads) -> results``, one result per payload in order; runs in a worker
            thread holding a model slot.
        max_batch_size: Most requests one call answers (1: no batching).
        wait_s: How long an idle dispatcher waits for more requests before taking a batch.
        queue_timeout_s: How long a request may wait in the queue (``None``: no limit); a request that is
            still queued then leaves it (:class:`QueueTimeout`). One whose batch was taken runs to the end.
    """

    def __init__(
        self,
        admission: Admission,
        runner: Callable[[Hashable, Sequence[Any]], Sequence[Any]],
        max_batch_size: int,
        wait_s: float = 0.0,
        queue_timeout_s: float | None = None,
    ):
        self.admission = admission
        self.runner = runner
        self.max_batch_size = max_batch_size
        self.wait_s = wait_s
        self.queue_timeout_s = queue_timeout_s
        self._queue: deque[_Job] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Event | None = None
        self._tasks: list[asyncio.Task] = []

    async def submit(self, key: Hashable, payload: Any) -> tuple[Any, float, float]:
        """Answer ``payload`` in a batch of requests with the same ``key``; returns ``(result, queue
        seconds, model seconds of its batch)``.

        Raises:
            ServerBusy: The queue is full (from :meth:`Admission.admit`).
            QueueTimeout: It waited ``queue_timeout_s`` without its batch being taken.
            Exception: What answering this request raised.
        """
        self.admission.admit()
        self._start()
        job = _Job(key, payload, asyncio.get_running_loop().create_future())
        self._queue.append(job)
        self._ready.set()
        try:
            if self.queue_timeout_s is not None:
                await asyncio.wait({job.future}, timeout=self.queue_timeout_s)
                if not job.future.done() and self._leave(job):
                    retry = self.admission.retry_after()
                    raise QueueTimeout(
                        f"timed out after {self.queue_timeout_s:g} s waiting for a model slot "
                        f"(queue_timeout_s); retry after {retry} s",
                        retry,
                    )
            return await job.future
        except asyncio.CancelledError:
            self._leave(job)  # e.g. the client disconnected
            raise

    def _leave(self, job: _Job) -> bool:
        """Take a job that was never taken out of the queue and give its admission back."""
        if job not in self._queue:
            return False
        self._queue.remove(job)
        if not self._queue:
            self._ready.clear()
        self.admission.withdraw()
        return True

    async def aclose(self) -> None:
        """Stop the dispatchers (server shutdown); queued requests fail with ``CancelledError``."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        while self._queue:
            job = self._queue.popleft()
            self.admission.withdraw()
            job.future.cancel()

    # ------------------------------------------------------------------------------------------------
    def _start(self) -> None:
        """Start the dispatchers in the running loop (again, if an earlier loop has gone: test clients)."""
        loop = asyncio.get_running_loop()
        if self._loop is loop and self._tasks:
            return
        self._loop, self._ready = loop, asyncio.Event()
        self._tasks = [
            loop.create_task(self._dispatch(), name=f"batcher-{i}")
            for i in range(self.admission.max_concurrency)
        ]

    def _take(self) -> list[_Job]:
        """The oldest waiting request and the others that share its key, up to ``max_batch_size`` (runs in
        the event loop)."""
        if not self._queue:
            return []
        key = self._queue[0].key
        batch = [j for j in self._queue if j.key == key][: self.max_batch_size]
        for job in batch:
            self._queue.remove(job)
        if not self._queue:
            self._ready.clear()
        return batch

    def _run(self, batch: list[_Job]) -> list[tuple[Any, BaseException | None]]:
        """Answer a batch in one call; on failure each request alone (runs in the worker thread)."""
        key, payloads = batch[0].key, [j.payload for j in batch]
        try:
            results = list(self.runner(key, payloads))
            if len(results) != len(payloads):
                raise RuntimeError(
                    f"batched call returned {len(results)} results for {len(payloads)} requests"
                )
            return [(r, None) for r in results]
        except Exception as exc:
            if len(batch) == 1:
                return [(None, exc)]
            LOG.warning("a batch of %d requests failed (%s); answering them one by one", len(batch), exc)
        out: list[tuple[Any, BaseException | None]] = []
        for p in payloads:
            try:
                out.append((self.runner(key, [p])[0], None))
            except Exception as exc:
                out.append((None, exc))
        return out

    async def _dispatch(self) -> None:
        while True:
            await self._ready.wait()
            if self.wait_s > 0 and len(self._queue) < self.max_batch_size:
                await asyncio.sleep(self.wait_s)
            try:
                batch, outcomes, started, run_s = await self.admission.run_batch(self._take, self._run)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug of the batcher itself: keep serving
                LOG.exception("micro-batch dispatcher failed")
                continue
            for job, (result, exc) in zip(batch, outcomes or []):
                if job.future.done():
                    continue
                if exc is not None:
                    job.future.set_exception(exc)
                else:
                    job.future.set_result((result, max(0.0, started - job.t0), run_s))
