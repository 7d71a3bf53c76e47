"""``GET /healthz``: is the service up and can its store be reached, answered in bounded time.

A load balancer asks this every few seconds and takes the server out of rotation on a 503, so
the answer must be quick and true whatever the store thread is doing. It used to count the
documents on the store thread: behind a long store call every health check waited (62 s
behind one large query), and after a database restart it answered 503 as long as the store
did. Now:

- the store's server is asked directly, on a connection of its own
  (:meth:`~neardup.storage.base.Storage.reachable`), off the store thread, within
  :data:`PROBE_TIMEOUT_S`; concurrent checks share one probe, so a hung server holds one
  thread, not one per check;
- the document count still comes from the store thread, but is waited for only
  :data:`COUNT_WAIT_S` and left out of the answer when the store is busy (one count at a
  time, shared too).

``200 {"status": "ok", "documents": N}`` or ``503 {"status": "unavailable", "reason": "…"}``
(with the service's error object beside them, code ``storage_unavailable``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from fastapi.responses import JSONResponse

from ..errors import StorageError
from ..storage.base import Storage
from .engine import Engine

T = TypeVar("T")
#: How long the store's server has to answer a health check (seconds).
PROBE_TIMEOUT_S = 1.0
#: How long a health check waits for the document count from the store thread (seconds).
COUNT_WAIT_S = 0.5


class Health:
    """The health checks of one app: at most one probe and one count in flight."""

    def __init__(self, engine: Engine, storage: Storage) -> None:
        self.engine = engine
        self.storage = storage
        self._probe: asyncio.Future[str | None] | None = None
        self._count: asyncio.Future[int] | None = None

    async def answer(self) -> JSONResponse:
        reason = await self._reachable()
        documents = None
        if reason is None:
            try:
                documents = await self._documents()
            except StorageError as exc:
                reason = str(exc)
        if reason is not None:
            reason = (reason.strip().splitlines() or ["unknown"])[0]
            error = {"status": 503, "code": "storage_unavailable", "message": reason, "details": []}
            return JSONResponse(
                {"status": "unavailable", "reason": reason, "error": error},
                status_code=503,
                headers={"Retry-After": "1"},
            )
        body: dict[str, Any] = {"status": "ok"}
        if documents is not None:
            body["documents"] = documents
        return JSONResponse(body)

    async def _reachable(self) -> str | None:
        if _spent(self._probe):
            self._probe = _shared(asyncio.to_thread(self.storage.reachable, PROBE_TIMEOUT_S))
        assert self._probe is not None
        try:
            return await asyncio.wait_for(asyncio.shield(self._probe), PROBE_TIMEOUT_S + 0.25)
        except TimeoutError:
            return f"the store did not answer within {PROBE_TIMEOUT_S:g} s"

    async def _documents(self) -> int | None:
        if _spent(self._count):
            self._count = _shared(self.engine.call(self._size))
        assert self._count is not None
        try:
            return await asyncio.wait_for(asyncio.shield(self._count), COUNT_WAIT_S)
        except TimeoutError:
            return None  # the store thread is busy: the server answered, so it is up

    def _size(self) -> int:
        return self.storage.size()


def _spent(future: asyncio.Future[Any] | None) -> bool:
    """Whether a new probe or count must start: none yet, the last one done, or one of another
    event loop (an app served again, as tests do)."""
    return future is None or future.done() or future.get_loop() is not asyncio.get_running_loop()


def _shared(work: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """A task that several checks await; its error is read even if no check waits for it any
    more, so asyncio does not log it as never retrieved."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    return task
