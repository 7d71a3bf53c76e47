"""The service's two workers: one thread fingerprints, one thread talks to the store.

Requests meet here. Texts from concurrent requests are fingerprinted in one
``fingerprint_many`` call on the *prepare* thread; the prepared batches of concurrent
check-and-add (or add, or query) requests go to the store as one call on the *store* thread.
While the store commits one batch, the prepare thread works on the next. Each request gets
back exactly its own part of a batch.

A request that would fail (an id stored with other text, an id another request of the group
also adds, a missing id to remove) is found before the shared call, by one read of the
store, and served alone, so it never makes its neighbours' batch fail and re-run one by one.

No request may hold the store thread for long: matches are capped per document
(``max_matches``), a query runs in chunks of :data:`QUERY_CHUNK` documents, each its own
job, so other requests' jobs run between them and a query whose client left stops at the
next chunk (a job still queued when its request is cancelled is dropped).

How the coalescing works (:class:`Batcher`; batch calls are where neardup is fast: one
fingerprint_many for 64 texts runs ~5x faster than 64 single calls, one check-and-add
transaction commits 64 documents for the price of one). A :class:`Batcher` owns one thread.
Requests submit jobs, each a kind, an option and a payload, and await their futures. The
thread takes every job waiting (up to ``max_items`` items), groups them by (kind, option) and
hands each group to that kind's handler in one call, which returns one result per payload.

A handler answers a payload that fails on its own with :class:`Failed` (the store handlers
find such payloads before their shared call), so one request's error never touches its
neighbours. Only if the shared call itself fails unexpectedly is each payload of the group
retried alone (counted in ``retried``); that is safe because every handler is all or nothing
(one store transaction, or no store at all).

One thread per batcher also means one thread touches the store (and one the fingerprinter),
so no store connection is ever shared between threads; across processes the store's writer
lock serialises check-and-add (:mod:`neardup.dedup.documents`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from ..dedup.documents import Assignment, Index, Prepared, explain_matches
from ..distance import to_array, to_ints
from ..errors import KeyNotFoundError, NeardupError
from ..index.digests import same_document
from ..index.simhash_index import Match
from ..io.record import Record
from ..storage.base import Key, StoredRecord
from .settings import ServiceSettings

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


T = TypeVar("T")
#: Whether a call refuses a batch naming this stored record with this fingerprint and text
#: digest (None: the request gave no text).
Refusal = Callable[[StoredRecord, int, bytes | None], bool]
#: Documents of one query request per store job: between two jobs the store thread serves
#: other requests, and a request whose client left is not continued.
QUERY_CHUNK = 16


@dataclass(frozen=True)
class QueryOption:
    """What a query asks beyond its documents; queries with equal options share a store call."""

    max_distance: int | None
    explain: bool
    #: Whether the documents came with texts: searched as the index searches texts (verified
    #: where it verifies, an empty text matching nothing), else as bare fingerprints.
    texts: bool
    max_matches: int | None = None


@dataclass(frozen=True)
class Found:
    """One query's matches, with their explanations when asked for."""

    matches: list[Match]
    explanations: list[dict[str, Any]] | None
    truncated: bool = False


class Engine:
    """An :class:`~neardup.Index` served by a prepare worker and a store worker."""

    def __init__(self, documents: Index, settings: ServiceSettings) -> None:
        self.documents = documents
        self.settings = settings
        documents.fingerprinter  # noqa: B018 - an index of bare fingerprints is refused now
        self.prepare_worker = Batcher("prepare", {"prepare": self._prepare}, settings.max_batch)
        self.store_worker = Batcher(
            "store",
            {
                "check": self._check,
                "add": self._add,
                "query": self._query,
                "remove": self._remove,
                "call": self._call,
            },
            settings.max_batch,
        )

    @property
    def bits(self) -> int:
        return self.documents.index.bits

    def close(self) -> None:
        self.prepare_worker.close()
        self.store_worker.close()

    # -- what the routes await -------------------------------------------------------------
    async def prepare(self, records: list[Record]) -> Prepared:
        result: Prepared = await self.prepare_worker.run("prepare", records, size=len(records))
        return result

    async def check_and_add(self, batch: Prepared, max_matches: int | None = None) -> list[Assignment]:
        """Check-and-add of one request: one store transaction, so not chunked; its work is
        bounded by ``max_matches`` and the request's document limit."""
        result: list[Assignment] = await self.store_worker.run(
            "check", batch, option=max_matches, size=len(batch)
        )
        return result

    async def add(self, batch: Prepared, existing: str) -> list[bool]:
        result: list[bool] = await self.store_worker.run("add", batch, option=existing, size=len(batch))
        return result

    async def query(self, batch: Prepared, option: QueryOption) -> list[Found]:
        """The matches of each document, :data:`QUERY_CHUNK` documents per store job, so the
        store thread serves other requests between chunks and a cancelled request (its
        client left) starts no further chunk."""
        distinct, of_row = _distinct(batch)  # copies in a request are searched once
        results: list[Found] = []
        for start in range(0, len(distinct), QUERY_CHUNK):
            chunk = _part(distinct, start, start + QUERY_CHUNK)
            found: list[Found] = await self.store_worker.run("query", chunk, option=option, size=len(chunk))
            results.extend(found)
        return [results[row] for row in of_row.tolist()]

    def fingerprints(self, values: list[int], keys: list[Key]) -> Prepared:
        """A batch of given fingerprints (no text, so no signatures)."""
        return Prepared(keys, to_array(values, self.bits))

    async def remove(self, key: Key) -> Key:
        result: Key = await self.store_worker.run("remove", key)
        return result

    async def call(self, function: Callable[[], T]) -> T:
        """Run ``function`` on the store thread (the only thread that touches the store)."""
        result: T = await self.store_worker.run("call", function)
        return result

    # -- handlers: run on the workers' threads, one call per coalesced group -------------------
    def _prepare(self, _: object, groups: list[list[Record]]) -> list[Prepared]:
        records = [record for group in groups for record in group]
        whole = self.documents.prepare(records)
        return _split_prepared(whole, [len(group) for group in groups])

    def _check(self, max_matches: int | None, batches: list[Prepared]) -> list[Any]:
        def refused(record: StoredRecord, fingerprint: int, digest: bytes | None) -> bool:
            return not same_document(record, digest, fingerprint)  # the same text is a retry

        def check(batch: Prepared) -> list[Assignment]:
            # /v1/check has no "existing" option: a changed text is replaced through /v1/documents.
            hint = 'POST /v1/documents with "existing": "replace"'
            return self.documents.check_and_add(batch, max_matches=max_matches, hint=hint)

        return self._partitioned(batches, check, refused)

    def _add(self, existing: str, batches: list[Prepared]) -> list[Any]:
        def add(batch: Prepared) -> list[bool]:
            hints = {"hint": '"existing": "replace"', "skip_hint": '"existing": "skip"'}
            return self.documents.add(batch, existing=existing, **hints)

        def refused(record: StoredRecord, fingerprint: int, digest: bytes | None) -> bool:
            if existing == "skip":  # a retry passes; another text is refused
                return not same_document(record, digest, fingerprint)
            return existing == "fail"

        return self._partitioned(batches, add, refused)

    def _partitioned(
        self, batches: list[Prepared], call: Callable[[Prepared], list[T]], refused: Refusal
    ) -> list[Any]:
        """``call`` once for the batches that can succeed together, and alone for each that
        would fail (or would change what an earlier one of the group gets), in group order."""
        if len(batches) == 1:
            return [call(batches[0])]
        alone = self._conflicting(batches, refused)
        shared = [row for row in range(len(batches)) if row not in alone]
        results: list[Any] = [None] * len(batches)
        if shared:
            together = call(Prepared.concat([batches[row] for row in shared]))
            sizes = [len(batches[row]) for row in shared]
            for row, part in zip(shared, _split(together, sizes), strict=True):
                results[row] = part
        for row in sorted(alone):
            self.store_worker.isolated += 1
            try:
                results[row] = call(batches[row])
            except Exception as exc:  # its own error; the shared part is stored already
                results[row] = Failed(exc)
        return results

    def _conflicting(self, batches: list[Prepared], refused: Refusal) -> set[int]:
        """The batches to serve alone: an id repeated in the batch, an id an earlier batch
        of the group names too, or a stored id the call would refuse. One read of the store."""
        keys = [key for batch in batches for key in batch.keys]
        try:
            stored = dict(zip(keys, self.documents.index.get_many(keys), strict=True))
        except (NeardupError, TypeError, ValueError):
            return set(range(len(batches)))  # unusable keys: each batch learns its own error
        owner: dict[Key, int] = {}
        conflicting = set()
        for row, batch in enumerate(batches):
            values = _fingerprint_ints(batch)
            digests = batch.digests or [None] * len(batch)
            for key, value, digest in zip(batch.keys, values, digests, strict=True):
                record = stored.get(key)
                refuses = record is not None and refused(record, value, digest)
                if owner.setdefault(key, row) != row or refuses:
                    conflicting.add(row)
            if len(set(batch.keys)) < len(batch.keys):
                conflicting.add(row)
        return conflicting

    def _query(self, option: QueryOption, batches: list[Prepared]) -> list[list[Found]]:
        """Each distinct (fingerprint, signature) of the group searched once: a query's answer
        depends on nothing else, and a batch of 1,000 copies of one text is one search."""
        whole, of_row = _distinct(Prepared.concat(batches))
        distance, cap = option.max_distance, option.max_matches
        if option.texts:
            found = self.documents.query(whole, max_distance=distance, max_matches=cap)
        else:
            found = self.documents.query_fingerprints(
                whole.fingerprints, max_distance=distance, max_matches=cap
            )
        results = []
        for row, matches in enumerate(found):
            explanations = None
            if option.explain:
                signature = None if whole.signatures is None else whole.signatures[row]
                text = None if whole.texts is None else whole.texts[row]
                explanations = explain_matches(
                    self.documents, whole.fingerprints[row], signature, matches, text
                )
            results.append(Found(matches, explanations, matches.truncated))
        return _split([results[row] for row in of_row.tolist()], [len(batch) for batch in batches])

    def _remove(self, _: object, keys: list[Key]) -> list[Any]:
        """Remove the stored ids of the group in one call; a missing id (or one removed by an
        earlier request of the group) fails alone."""
        stored = self.documents.index.get_many(keys)
        results: list[Any] = []
        removing: dict[Key, None] = {}
        for key, record in zip(keys, stored, strict=True):
            if record is None or key in removing:
                missing = KeyNotFoundError(f"id {key!r} is not in the index; nothing was removed")
                results.append(Failed(missing))
            else:
                removing[key] = None
                results.append(key)
        if removing:
            self.documents.index.remove_many(list(removing))
        return results

    def _call(self, _: object, functions: list[Callable[[], Any]]) -> list[Any]:
        """Each function's result, or its error for its own request alone."""
        results: list[Any] = []
        for function in functions:
            try:
                results.append(function())
            except Exception as exc:
                results.append(Failed(exc))
        return results


def _split(items: Sequence[T], sizes: list[int]) -> list[list[T]]:
    out, start = [], 0
    for size in sizes:
        out.append(list(items[start : start + size]))
        start += size
    return out


def _fingerprint_ints(batch: Prepared) -> list[int]:
    """The batch's fingerprints as Python ints (64 or 128 bits), comparable to stored ones."""
    return [int(value) for value in to_ints(np.asarray(batch.fingerprints))]


def _split_prepared(whole: Prepared, sizes: list[int]) -> list[Prepared]:
    out, start = [], 0
    for size in sizes:
        out.append(_part(whole, start, start + size))
        start += size
    return out


def _distinct(batch: Prepared) -> tuple[Prepared, npt.NDArray[np.intp]]:
    """The batch's distinct (fingerprint, signature, emptiness) rows in order of first
    appearance, and for each row of the batch the position of its own among them."""
    prints = np.ascontiguousarray(np.asarray(batch.fingerprints, dtype=np.uint64).reshape(len(batch), -1))
    signatures = None if batch.signatures is None else np.ascontiguousarray(batch.signatures)
    empty = batch.empty_rows()
    position: dict[bytes, int] = {}
    first: list[int] = []
    of_row = np.empty(len(batch), dtype=np.intp)
    for row in range(len(batch)):
        content = prints[row].tobytes() + (b"" if signatures is None else signatures[row].tobytes())
        seen = position.setdefault(content + (b"\1" if empty[row] else b"\0"), len(first))
        if seen == len(first):
            first.append(row)
        of_row[row] = seen
    if len(first) == len(batch):
        return batch, of_row
    distinct = batch.part(np.asarray(first, dtype=np.intp))
    without_digests = Prepared(
        distinct.keys, distinct.fingerprints, distinct.signatures, None, distinct.empty
    )
    return without_digests, of_row


def _part(whole: Prepared, start: int, stop: int) -> Prepared:
    """Documents ``start:stop`` of a batch."""
    return whole.part(slice(start, stop))
