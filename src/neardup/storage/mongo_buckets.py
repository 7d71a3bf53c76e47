"""Seed 002's bucket layout of the MongoDB store (``layout=buckets``): one document per (table,
block value) listing its records, updated as a read-modify-write of each touched bucket."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .base import UInt64Array

#: Keys per ``$in`` list (far below the 16 MB command limit even for long keys).
KEY_CHUNK = 10_000

if TYPE_CHECKING:
    from pymongo.client_session import ClientSession
    from pymongo.collection import Collection


def bucket_id(table: int, block: int) -> str:
    return f"t{table}:{block:x}"


def _bucket_parts(name: str) -> tuple[int, int]:
    table, block = name[1:].split(":")
    return int(table), int(block, 16)


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def bucket_entries(
    postings: UInt64Array, ids: Sequence[str], fingerprints: Sequence[bytes]
) -> dict[str, list[dict[str, Any]]]:
    """Bucket ``_id`` → the ``info`` entries of these records (their (n, T) posting keys,
    typed keys and stored words), seed 002's shape."""
    entries: dict[str, list[dict[str, Any]]] = {}
    for row, blocks in enumerate(postings.tolist()):
        entry = {"hashcode": fingerprints[row], "textname": ids[row]}
        for table, block in enumerate(blocks):
            entries.setdefault(bucket_id(table, block), []).append(entry)
    return entries


def rewrite_buckets(
    buckets: Collection[dict[str, Any]],
    pymongo: Any,
    int64: Callable[[int], Any],
    added: dict[str, list[dict[str, Any]]],
    removed: dict[str, set[str]],
    session: ClientSession | None,
) -> Callable[[], None]:
    """Seed 002's bucket update (append entries to ``info``, or take them out) as a
    read-modify-write of each touched bucket, under the writer lock; returns the undo.

    In a transaction the old buckets are deleted and the new ones inserted (jongodb
    rewrites a collection on every update, but inserts and deletes are fast); without one,
    each bucket is replaced in place (``ReplaceOne`` upsert: never missing to a reader)."""
    names = sorted({*added, *removed})
    current: dict[str, dict[str, Any]] = {}
    for start in range(0, len(names), KEY_CHUNK):
        chunk = names[start : start + KEY_CHUNK]
        for document in buckets.find({"_id": {"$in": chunk}}, session=session):
            current[document["_id"]] = document
    rewritten: dict[str, dict[str, Any] | None] = {}
    for name in names:
        gone = removed.get(name, set())
        info = [entry for entry in current.get(name, {}).get("info", ()) if entry["textname"] not in gone]
        info += added.get(name, [])
        table, block = _bucket_parts(name)
        rewritten[name] = (
            {"_id": name, "table": table, "blockName": int64(_signed(block)), "info": info} if info else None
        )
    if session is not None:
        if current:
            buckets.delete_many({"_id": {"$in": list(current)}}, session=session)
        fresh = [document for document in rewritten.values() if document is not None]
        if fresh:
            buckets.insert_many(fresh, ordered=False, session=session)
    else:
        replace_buckets(buckets, pymongo, rewritten)
    return lambda: replace_buckets(buckets, pymongo, {name: current.get(name) for name in names})


def replace_buckets(
    buckets: Collection[dict[str, Any]], pymongo: Any, documents: dict[str, dict[str, Any] | None]
) -> None:
    requests: list[Any] = [
        pymongo.DeleteOne({"_id": name})
        if document is None
        else pymongo.ReplaceOne({"_id": name}, document, upsert=True)
        for name, document in documents.items()
    ]
    if requests:
        buckets.bulk_write(requests, ordered=False)
