"""Streaming answers over server-sent events: a pipeline's staged answer
(:meth:`~inference.rag.evidential.EvidentialRAG.answer_stream`) runs in a worker thread holding a model slot
and hands its events to the event loop as they come (:class:`EventStream`).

The first event (the fused, routed evidence record) is awaited *before* the HTTP response starts, so a
request that fails there still gets its proper status code (422, 502, 503). Later failures arrive as an
``error`` event. When the client disconnects, the response's iterator is closed: that sets the ``cancel``
event the generation checks after every token, the worker thread returns and its slot is free again.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import anyio.from_thread
from anyio.streams.memory import MemoryObjectReceiveStream

from inference.server.admission import Admission

__all__ = ["EventStream", "sse"]


def sse(data: Any, event: str | None = None) -> str:
    """One server-sent event: an optional ``event:`` line and the JSON of ``data`` (a string as is)."""
    body = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return head + "".join(f"data: {line}\n" for line in body.split("\n")) + "\n"


class EventStream:
    """The events of ``produce(cancel)`` (an iterator run in a worker thread under ``admission``), read from
    the event loop.

    Use: ``stream = await EventStream.start(admission, produce)`` (raises what ``admission.admit`` or the
    first event raises), then ``stream.first`` and ``async for item in stream.rest()``. An exception the
    producer raises after the first event is yielded as ``("error", exc)``.
    """

    def __init__(self, recv: MemoryObjectReceiveStream, cancel: threading.Event, task: asyncio.Task):
        self._recv = recv
        self.cancel = cancel
        self._task = task
        self.first: Any = None

    @classmethod
    async def start(
        cls, admission: Admission, produce: Callable[[threading.Event], Iterator[Any]]
    ) -> EventStream:
        """Admit the request, start ``produce`` once a slot is free and wait for its first event.

        Raises:
            ServerBusy: The queue is full (nothing was started).
            Exception: Whatever ``produce`` raised before its first event.
        """
        admission.admit()
        send, recv = anyio.create_memory_object_stream(math.inf)
        cancel = threading.Event()

        def work() -> None:
            def put(item: Any) -> None:
                try:
                    anyio.from_thread.run_sync(send.send_nowait, item)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    cancel.set()  # nobody reads any more

            try:
                if cancel.is_set():  # the client left while the request waited for a slot
                    return
                events = produce(cancel)
                try:
                    for item in events:
                        put(("event", item))
                        if cancel.is_set():
                            break
                finally:
                    close = getattr(events, "close", None)
                    if close is not None:  # stop a generator (and its backend stream) now, not at collection
                        close()
            except BaseException as exc:  # handed to the event loop, which maps it to a status
                put(("error", exc))
            finally:
                anyio.from_thread.run_sync(send.close)

        task = asyncio.ensure_future(admission.run_admitted(work))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: no "never retrieved"
        stream = cls(recv, cancel, task)
        try:
            kind, item = await recv.receive()
        except anyio.EndOfStream:
            raise RuntimeError("the answer stream ended before its first event") from None
        except BaseException:
            cancel.set()
            raise
        if kind == "error":
            await stream.aclose()
            raise item
        stream.first = item
        return stream

    async def rest(self) -> AsyncIterator[Any]:
        """The events after the first; ``("error", exc)`` for an exception raised on the way. Closing the
        iterator early (a disconnected client) cancels the producer."""
        try:
            async for kind, item in self._recv:
                yield ("error", item) if kind == "error" else item
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Cancel the producer (if it still runs) and release the stream; the slot frees when it returns."""
        self.cancel.set()
        self._recv.close()
