"""The service's two workers: one thread fingerprints, one thread talks to the store.

Requests meet here. Texts from concurrent requests are fingerprinted in one
``fingerprint_many`` call on the *prepare* thread; the prepared batches of concurrent
check-and-add (or add, or query) requests go to the store as one call on the *store* thread.
While the store commits one batch, the prepare thread works on the next. Each request gets
back exactly its own part of a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ..dedup.incremental import Assignment
from ..distance import to_array
from ..documents import DocumentIndex, Prepared, explain_matches, resolve_keys
from ..errors import KeyNotFoundError
from ..index import Match
from ..io import Record
from ..storage.base import Key
from .batcher import Batcher
from .settings import ServiceSettings

T = TypeVar("T")


@dataclass(frozen=True)
class QueryOption:
    """What a query asks beyond its documents; queries with equal options share a store call."""

    max_distance: int | None
    explain: bool
    verified: bool


@dataclass(frozen=True)
class Found:
    """One query's matches, with their explanations when asked for."""

    matches: list[Match]
    explanations: list[dict[str, Any]] | None


class Engine:
    """A :class:`DocumentIndex` served by a prepare worker and a store worker."""

    def __init__(self, documents: DocumentIndex, settings: ServiceSettings) -> None:
        self.documents = documents
        self.settings = settings
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

    async def check_and_add(self, batch: Prepared) -> list[Assignment]:
        result: list[Assignment] = await self.store_worker.run("check", batch, size=len(batch))
        return result

    async def add(self, batch: Prepared, existing: str) -> list[bool]:
        result: list[bool] = await self.store_worker.run("add", batch, option=existing, size=len(batch))
        return result

    async def query(self, batch: Prepared, option: QueryOption) -> list[Found]:
        result: list[Found] = await self.store_worker.run("query", batch, option=option, size=len(batch))
        return result

    def fingerprints(self, values: list[int], keys: list[Key]) -> Prepared:
        """A batch of given fingerprints (no text, so no signatures)."""
        return Prepared(keys, to_array(values, self.bits))

    async def remove(self, key_text: str) -> Key:
        result: Key = await self.store_worker.run("remove", key_text)
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

    def _check(self, _: object, batches: list[Prepared]) -> list[list[Assignment]]:
        results = self.documents.check_and_add(Prepared.concat(batches))
        return _split(results, [len(batch) for batch in batches])

    def _add(self, existing: str, batches: list[Prepared]) -> list[list[bool]]:
        results = self.documents.add(Prepared.concat(batches), existing)
        return _split(results, [len(batch) for batch in batches])

    def _query(self, option: QueryOption, batches: list[Prepared]) -> list[list[Found]]:
        whole = Prepared.concat(batches)
        if option.verified:
            found = self.documents.query(whole, option.max_distance)
        else:
            found = self.documents.query_fingerprints(whole.fingerprints, option.max_distance)
        results = []
        for row, matches in enumerate(found):
            explanations = None
            if option.explain:
                signature = None if whole.signatures is None else whole.signatures[row]
                explanations = explain_matches(self.documents, whole.fingerprints[row], signature, matches)
            results.append(Found(matches, explanations))
        return _split(results, [len(batch) for batch in batches])

    def _remove(self, _: object, key_texts: list[str]) -> list[Key]:
        resolved = resolve_keys(self.documents.index, key_texts)
        missing = [text for text, key in zip(key_texts, resolved, strict=True) if key is None]
        if missing:
            raise KeyNotFoundError(f"id {missing[0]!r} is not in the index; nothing was removed")
        keys = [key for key in resolved if key is not None]
        if len(set(keys)) < len(keys):
            raise KeyNotFoundError("the same id was removed twice at once; it is removed once")
        self.documents.index.remove_many(keys)
        return keys

    def _call(self, _: object, functions: list[Callable[[], Any]]) -> list[Any]:
        return [function() for function in functions]


def _split(items: Sequence[T], sizes: list[int]) -> list[list[T]]:
    out, start = [], 0
    for size in sizes:
        out.append(list(items[start : start + size]))
        start += size
    return out


def _split_prepared(whole: Prepared, sizes: list[int]) -> list[Prepared]:
    out, start = [], 0
    for size in sizes:
        stop = start + size
        signatures = None if whole.signatures is None else whole.signatures[start:stop]
        out.append(Prepared(whole.keys[start:stop], np.asarray(whole.fingerprints[start:stop]), signatures))
        start = stop
    return out
