"""Serve many concurrent requests with few calls: one thread that coalesces waiting jobs.

Batch calls are where neardup is fast (one fingerprint_many for 64 texts runs ~5x faster than
64 single calls; one check-and-add transaction commits 64 documents for the price of one).
A :class:`Batcher` owns one thread. Requests submit jobs, each a kind, an option and a
payload, and await their futures. The thread takes every job waiting (up to ``max_items``
items), groups them by (kind, option) and hands each group to that kind's handler in one
call, which returns one result per payload.

A handler answers a payload that fails on its own with :class:`Failed` (the store handlers
find such payloads before their shared call, :mod:`.engine`), so one request's error never
touches its neighbours. Only if the shared call itself fails unexpectedly is each payload of
the group retried alone (counted in ``retried``); that is safe because every handler is all
or nothing (one store transaction, or no store at all).

One thread per batcher also means one thread touches the store (and one the fingerprinter),
so no store connection is ever shared between threads; across processes the store's writer
lock serialises check-and-add (:mod:`neardup.dedup.incremental`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Handler = Callable[[Any, list[Any]], Sequence[Any]]


@dataclass(frozen=True)
class Failed:
    """A handler's answer for one payload that failed alone: its future gets ``error``."""

    error: BaseException


@dataclass
class _Job:
    kind: str
    option: Hashable
    payload: Any
    size: int
    future: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)


class Batcher:
    """One worker thread running ``handlers[kind](option, payloads)`` over coalesced jobs."""

    def __init__(self, name: str, handlers: Mapping[str, Handler], max_items: int) -> None:
        self.name = name
        self.handlers = dict(handlers)
        self.max_items = max_items
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        #: (calls, payloads) served, for the stats route: payloads / calls is the batching gain.
        self.calls = 0
        self.payloads = 0
        #: Payloads a handler served alone because they would fail (set by the handlers), and
        #: payloads re-run alone after their group's shared call failed.
        self.isolated = 0
        self.retried = 0

    def submit(
        self, kind: str, payload: Any, *, option: Hashable = None, size: int = 1
    ) -> concurrent.futures.Future[Any]:
        """Queue a job; its future gets the handler's result for this payload, or its error."""
        if kind not in self.handlers:
            raise ValueError(f"{self.name} has no handler for {kind!r}")
        job = _Job(kind, option, payload, max(size, 1))
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the {self.name} worker is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"neardup-{self.name}", daemon=True)
                self._thread.start()
            self._queue.put(job)
        return job.future

    async def run(self, kind: str, payload: Any, *, option: Hashable = None, size: int = 1) -> Any:
        """:meth:`submit` and await the result."""
        return await asyncio.wrap_future(self.submit(kind, payload, option=option, size=size))

    def close(self) -> None:
        """Finish the jobs queued so far, then stop the thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._queue.put(None)
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            job = self._queue.get()
            if job is None:
                return
            jobs, total = [job], job.size
            while total < self.max_items:
                try:
                    waiting = self._queue.get_nowait()
                except queue.Empty:
                    break
                if waiting is None:
                    stopping = True
                    break
                jobs.append(waiting)
                total += waiting.size
            groups: dict[tuple[str, Hashable], list[_Job]] = {}
            for each in jobs:
                groups.setdefault((each.kind, each.option), []).append(each)
            for (kind, option), group in groups.items():
                self._serve(kind, option, group)

    def _serve(self, kind: str, option: Hashable, group: list[_Job]) -> None:
        live = [job for job in group if job.future.set_running_or_notify_cancel()]
        if not live:
            return
        handler = self.handlers[kind]
        self.calls += 1
        self.payloads += len(live)
        try:
            results = handler(option, [job.payload for job in live])
        except Exception as exc:
            if len(live) == 1:
                live[0].future.set_exception(exc)
                return
            self.retried += len(live)
            for job in live:
                try:
                    _settle(job, handler(option, [job.payload])[0])
                except Exception as alone:
                    job.future.set_exception(alone)
            return
        for job, result in zip(live, results, strict=True):
            _settle(job, result)


def _settle(job: _Job, result: Any) -> None:
    if isinstance(result, Failed):
        job.future.set_exception(result.error)
    else:
        job.future.set_result(result)
