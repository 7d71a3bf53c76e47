"""MongoDB store (pymongo): ``mongodb://[user:password@]host[:port]/db[?collection=P&layout=L]``.

Two layouts (``P`` is the collection name, ``neardup`` by default):

- ``layout=records`` (the default): one document per record in ``P``,
  ``{"_id": "i:42", "fingerprint": <8 or 16 bytes, little-endian>, "cluster": "s:a",
  "signature": <bytes>, "digest": <16 bytes>, "batch": <token>, "b0": Int64, …,
  "b{T-1}": Int64}``, with an index per block field (seed 002's MySQL table, as documents).
  A query batch is one find, ``{"$or": [{"b0": {"$in": [...]}}, …]}``. ``_id`` is the typed
  key (see :func:`~.base.encode_key`; a native ``key`` field is left out because BSON cannot
  hold ints beyond 64 bits); ``cluster``, ``signature`` and ``digest`` (the text's hash,
  absent in records written before it) are absent when unset; ``batch`` names the add that
  wrote the document, so a failed add deletes exactly its own documents.
- ``layout=buckets``: seed 002's documents in ``P_buckets``, one per (table, block value),
  ``{"_id": "t{table}:{hex}", "table": t, "blockName": Int64,
  "info": [{"hashcode": <fingerprint bytes>, "textname": "i:42"}, …]}``, plus the records
  (without block fields) in ``P`` for reads by key. Kept for the seed's comparison. The
  seed's ``$push``/``$pull`` become a read-modify-write of each touched bucket under the
  writer lock (jongodb has neither operator, and rewrites its collection on every update).

Records is the better layout: an add is one ``insert_many`` of small documents (the bucket
layout rewrites T growing documents per record, and MongoDB rewrites a whole document on
every update), a record is never split across documents, and a query is one indexed find
(docs/storage.md compares the two).

``P_meta`` holds the configuration (``{"_id": "config", "value": <JSON>, "layout": L}``;
a store opened without ``layout=`` uses its stored layout), ``P_lock`` the writer lock and, in
both layouts, ``P_values`` the value maps (:meth:`~.base.Storage.put_values`):
``{"_id": {"n": <map name>, "k": "i:42"}, "v": <bytes>}``.

Atomicity: where the server runs transactions (a replica set, mongos, jongodb), an add or a
removal is one transaction: all or nothing, also across a crash. A standalone mongod has no
multi-document transactions: then an add checks the keys, inserts in order and, when the
write fails part-way (another writer's key, a lost connection), deletes the documents of
its own ``batch`` token and restores the buckets it rewrote; a removal re-inserts what it
read. Every document is written whole, but without transactions a client killed in the
middle of a batch can leave part of it stored: in the records layout each part is a
complete, findable record; in the buckets layout records may lack some postings (queries
miss them until they are removed and added again). Writes are acknowledged once journaled
(``journal=true`` unless the URL sets ``w`` or ``journal``).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult

import numpy as np

from ..errors import (
    ConfigError,
    KeyExistsError,
    StorageBackendError,
    StorageConflictError,
    StorageUnavailableError,
)
from .base import (
    Candidates,
    IntArray,
    Key,
    PostingCounts,
    RecordBatch,
    Screen,
    Storage,
    StoredRecord,
    UInt64Array,
    bytes_to_words,
    check_keys,
    check_value_map,
    decode_key,
    dump_meta,
    encode_key,
    key_exists_error,
    key_not_found_error,
    load_meta,
    lookable,
    match_postings,
    no_candidates,
    plain_key,
    raced_key_error,
    to_signed,
    words_to_bytes,
    words_to_int,
)
from .lease import Lease
from .mongo_buckets import KEY_CHUNK, bucket_entries, bucket_id, rewrite_buckets
from .mongo_client import (
    DEFAULT_COLLECTION,
    check_collection,
    connect,
    duplicate_key,
    first_line,
    no_transactions,
    ping,
)

if TYPE_CHECKING:
    from pymongo import MongoClient
    from pymongo.client_session import ClientSession
    from pymongo.collection import Collection

LAYOUTS = ("records", "buckets")
_LOCK_ID = "writer"


class MongoStorage(Storage):
    """Records (and, in the buckets layout, bucket documents), meta and lock collections."""

    name = "mongodb"

    def __init__(
        self,
        client: MongoClient[dict[str, Any]],
        database: str,
        collection: str = DEFAULT_COLLECTION,
        layout: str | None = None,
        where: str = "mongodb",
    ) -> None:
        import pymongo
        from bson.int64 import Int64

        super().__init__()
        self._pymongo = pymongo
        self._int64 = Int64
        self.client = client
        self.where = where
        self.collection = check_collection(collection)
        if layout is not None and layout not in LAYOUTS:
            raise ConfigError(
                f"unknown MongoDB layout {layout!r} in {where}; use layout=records or layout=buckets"
            )
        self.requested_layout = layout
        self.layout = layout or "records"
        db = client[database]
        self.records: Collection[dict[str, Any]] = db[collection]
        self.buckets: Collection[dict[str, Any]] = db[f"{collection}_buckets"]
        self.meta: Collection[dict[str, Any]] = db[f"{collection}_meta"]
        self.locks: Collection[dict[str, Any]] = db[f"{collection}_lock"]
        self.values: Collection[dict[str, Any]] = db[f"{collection}_values"]
        self._transactions: bool | None = None  # unknown until the first write tries one
        self.lease = Lease(
            f"{where} (collection {self.locks.name})",
            take=self._take_lease,
            renew=self._renew_lease,
            give_back=self._give_back_lease,
        )

    # -- errors --------------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        errors = self._pymongo.errors
        try:
            yield
        except errors.DocumentTooLarge as exc:  # a bson error, not a PyMongoError
            raise StorageBackendError(
                f"MongoDB at {self.where} keeps a value in one document of at most 16 MB, and a value "
                f"of the index is larger ({first_line(exc)}) while {doing}: use another store for an "
                "index this large (SQLite, PostgreSQL, Redis)"
            ) from exc
        except errors.ConnectionFailure as exc:
            raise StorageUnavailableError(
                f"lost the connection to MongoDB at {self.where} while {doing} ({first_line(exc)}); "
                "is the server running?"
            ) from exc
        except errors.PyMongoError as exc:
            raise StorageBackendError(
                f"MongoDB at {self.where} failed while {doing}: {first_line(exc)}"
            ) from exc

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()

    def reachable(self, timeout_s: float) -> str | None:
        return ping(self.client, self.where, timeout_s)

    # -- meta ----------------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any] | None:
        with self._errors("reading the index meta"):
            document = self.meta.find_one({"_id": "config"})
        if document is None:
            return None
        stored = str(document.get("layout", "records"))
        if self.requested_layout not in (None, stored):
            raise ConfigError(
                f"the MongoDB store {self.where} (collection {self.collection}) has layout={stored}; "
                f"it cannot be opened with layout={self.requested_layout}: drop the option or use "
                "another collection"
            )
        self.layout = stored
        return load_meta(str(document.get("value")), f"{self.where} collection {self.meta.name}")

    def write_meta(self, meta: dict[str, Any]) -> None:
        tables = self.shape.columns
        with self._errors("creating the store"):
            if self.layout == "records":
                for table in range(tables):
                    self.records.create_index(f"b{table}")
            try:
                self.meta.insert_one({"_id": "config", "value": dump_meta(meta), "layout": self.layout})
            except self._pymongo.errors.DuplicateKeyError as exc:
                raise StorageConflictError(
                    f"another process created an index at {self.where} (collection {self.collection}) "
                    "meanwhile; open it again"
                ) from exc

    # -- the writer lock -----------------------------------------------------------------
    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """The local lock plus a lease document in ``P_lock`` (unique ``_id``, an expiry a
        thread renews while it is held; see :mod:`neardup.storage.lease`)."""
        with self._local_lock, self._errors("holding the writer lock"), self.lease.held():
            yield

    def _take_lease(self, token: str) -> bool:
        try:
            self.locks.insert_one(
                {"_id": _LOCK_ID, "token": token, "expires": self._expiry(self.lease.ttl_ms)}
            )
            return True
        except self._pymongo.errors.DuplicateKeyError:
            # A lease past its expiry belongs to a writer that stopped renewing it.
            self.locks.delete_one({"_id": _LOCK_ID, "expires": {"$lt": self._expiry(0)}})
            return False

    def _renew_lease(self, token: str) -> bool:
        renewed = self.locks.update_one(
            {"_id": _LOCK_ID, "token": token}, {"$set": {"expires": self._expiry(self.lease.ttl_ms)}}
        )
        return bool(renewed.matched_count)

    def _give_back_lease(self, token: str) -> None:
        self.locks.delete_one({"_id": _LOCK_ID, "token": token})

    def _expiry(self, after_ms: int) -> Any:
        return self._int64(int(time.time() * 1000) + after_ms)

    # -- transactions --------------------------------------------------------------------
    def _atomically(self, write: Callable[[ClientSession | None], None], undo: Callable[[], None]) -> None:
        """Run ``write`` in a transaction where the server has them; elsewhere run it
        plainly and call ``undo`` (compensation) when it fails."""
        if self._transactions is not False:
            try:
                with self.client.start_session() as session, session.start_transaction():
                    write(session)
                self._transactions = True
                return
            except self._pymongo.errors.OperationFailure as exc:
                if self._transactions or not no_transactions(exc):
                    raise
                self._transactions = False
        try:
            write(None)
        except BaseException:
            with contextlib.suppress(Exception):
                undo()
            raise

    # -- records -------------------------------------------------------------------------
    def add_many(self, batch: RecordBatch) -> None:
        if not len(batch):
            return
        ids = [encode_key(key) for key in batch.keys]
        if len(set(ids)) != len(ids):
            first: dict[str, int] = {}
            twice = next(
                key
                for row, (key, text) in enumerate(zip(batch.keys, ids, strict=True))
                if first.setdefault(text, row) != row
            )
            raise KeyExistsError(f"key {twice!r} appears twice in the batch; nothing was added")
        token = secrets.token_hex(8)
        fingerprints = words_to_bytes(np.ascontiguousarray(batch.words, dtype=np.uint64))
        postings = batch.posting_keys()
        blocks = to_signed(postings).tolist() if self.layout == "records" else None
        documents: list[dict[str, Any]] = []
        for row, text in enumerate(ids):
            document: dict[str, Any] = {"_id": text, "fingerprint": fingerprints[row], "batch": token}
            cluster, signature = batch.cluster(row), batch.signature(row)
            if cluster is not None:
                document["cluster"] = encode_key(cluster)
            if signature is not None:
                document["signature"] = bytes(signature)
            digest = batch.digest(row)
            if digest is not None:
                document["digest"] = bytes(digest)
            if blocks is not None:
                for table, block in enumerate(blocks[row]):
                    document[f"b{table}"] = self._int64(block)
            documents.append(document)
        buckets = bucket_entries(postings, ids, fingerprints) if self.layout == "buckets" else {}
        # The buckets layout updates documents shared between records, so its writes take
        # the writer lock (seed 002's read-modify-write of a bucket must not interleave).
        guard = self.exclusive() if self.layout == "buckets" else contextlib.nullcontext()
        with self._local_lock, guard, self._errors("adding records"):
            stored = self._stored_ids(ids)
            if stored:
                raise key_exists_error(decode_key(stored[0]), len(stored), self.where)

            undo_buckets: list[Callable[[], None]] = []

            def write(session: ClientSession | None) -> None:
                self.records.insert_many(documents, ordered=True, session=session)
                if buckets:
                    undo_buckets.append(self._rewrite_buckets(buckets, {}, session))

            def undo() -> None:
                for step in undo_buckets:
                    step()
                self.records.delete_many({"_id": {"$in": ids}, "batch": token})

            try:
                self._atomically(write, undo)
            except (self._pymongo.errors.DuplicateKeyError, self._pymongo.errors.BulkWriteError) as exc:
                if not duplicate_key(exc):
                    raise
                raise raced_key_error(self.where, first_line(exc)) from exc

    def remove_many(self, keys: Sequence[Key]) -> None:
        if not keys:
            return
        unique = list(dict.fromkeys(keys))
        ids = [encode_key(key) for key in unique]
        guard = self.exclusive() if self.layout == "buckets" else contextlib.nullcontext()
        with self._local_lock, guard, self._errors("removing records"):
            documents = self._find_ids(ids)
            found = {document["_id"] for document in documents}
            missing = [key for key, text in zip(unique, ids, strict=True) if text not in found]
            if missing:
                raise key_not_found_error(missing[0], len(missing), self.where)
            removed: dict[str, set[str]] = {}
            if self.layout == "buckets":
                # The buckets to rewrite, found from the records' stored words.
                stored = [bytes(document["fingerprint"]) for document in documents]
                postings = self.shape.postings_of(bytes_to_words(stored, self.shape.words))
                texts = [str(document["_id"]) for document in documents]
                for name, entries in bucket_entries(postings, texts, stored).items():
                    removed[name] = {entry["textname"] for entry in entries}

            undo_buckets: list[Callable[[], None]] = []

            def write(session: ClientSession | None) -> None:
                self.records.delete_many({"_id": {"$in": ids}}, session=session)
                if removed:
                    undo_buckets.append(self._rewrite_buckets({}, removed, session))

            def undo() -> None:
                for step in undo_buckets:
                    step()
                with contextlib.suppress(self._pymongo.errors.BulkWriteError):
                    self.records.insert_many(documents, ordered=False)

            self._atomically(write, undo)

    def get_many(self, keys: Sequence[Key]) -> list[StoredRecord | None]:
        if not keys:
            return []
        with self._errors("reading records"):
            documents = self._find_ids(list({encode_key(key) for key in keys}))
        found = {record.key: record for record in self._records(documents)}
        return [found.get(key) for key in keys]

    # -- values --------------------------------------------------------------------------
    def put_values(self, name: str, keys: Sequence[Key], values: Sequence[bytes]) -> None:
        """In a transaction the old documents are deleted and the new ones inserted (as
        :func:`~.mongo_buckets.rewrite_buckets` does, since jongodb rewrites a collection on
        every update); without one, each is replaced in place. Without transactions a put
        that fails part-way may leave some of its values written, each whole."""
        check_value_map(name, keys, values)
        check_keys(keys)
        latest = {encode_key(plain_key(key)): value for key, value in zip(keys, values, strict=True)}
        if not latest:
            return
        documents = [{"_id": _value_id(name, text), "v": value} for text, value in latest.items()]
        pymongo = self._pymongo

        def write(session: ClientSession | None) -> None:
            for start in range(0, len(documents), KEY_CHUNK):
                chunk = documents[start : start + KEY_CHUNK]
                if session is None:
                    requests = [
                        pymongo.ReplaceOne({"_id": document["_id"]}, document, upsert=True)
                        for document in chunk
                    ]
                    self.values.bulk_write(requests, ordered=False)
                else:
                    ids = [document["_id"] for document in chunk]
                    self.values.delete_many({"_id": {"$in": ids}}, session=session)
                    self.values.insert_many(chunk, ordered=False, session=session)

        with self._local_lock, self._errors("storing values"):
            self._atomically(write, lambda: None)

    def get_values(self, name: str, keys: Sequence[Key]) -> list[bytes | None]:
        check_value_map(name, keys)
        texts = [encode_key(key) if lookable(key) else None for key in map(plain_key, keys)]
        wanted = list(dict.fromkeys(text for text in texts if text is not None))
        found: dict[str, bytes] = {}
        with self._errors("reading values"):
            for start in range(0, len(wanted), KEY_CHUNK):
                ids = [_value_id(name, text) for text in wanted[start : start + KEY_CHUNK]]
                for document in self.values.find({"_id": {"$in": ids}}):
                    found[document["_id"]["k"]] = bytes(document["v"])
        return [None if text is None else found.get(text) for text in texts]

    def scan_values(self, name: str, batch_size: int = 10_000) -> Iterator[list[tuple[Key, bytes]]]:
        check_value_map(name, [])
        batch: list[tuple[Key, bytes]] = []
        with self._errors("reading values"):
            for document in self.values.find({"_id.n": name}, batch_size=batch_size):
                batch.append((decode_key(document["_id"]["k"]), bytes(document["v"])))
                if len(batch) == batch_size:
                    yield batch
                    batch = []
        if batch:
            yield batch

    def remove_values(self, name: str, keys: Sequence[Key]) -> None:
        check_value_map(name, keys)
        texts = list(dict.fromkeys(encode_key(key) for key in map(plain_key, keys) if lookable(key)))
        if not texts:
            return

        def write(session: ClientSession | None) -> None:
            for start in range(0, len(texts), KEY_CHUNK):
                ids = [_value_id(name, text) for text in texts[start : start + KEY_CHUNK]]
                self.values.delete_many({"_id": {"$in": ids}}, session=session)

        with self._local_lock, self._errors("removing values"):
            self._atomically(write, lambda: None)

    def candidates(
        self, postings: UInt64Array, *, records: bool = False, screen: Screen | None = None
    ) -> Candidates:
        """One find per batch: by posting fields (records) or bucket ``_id`` (buckets); the
        members' posting keys (their fields, or the buckets they were found in) pair them
        with the queries."""
        width = self.shape.words
        with self._errors("querying"):
            if self.layout == "records":
                documents = self._find_postings(postings)
                found_words = [bytes(document["fingerprint"]) for document in documents]
                keys = [decode_key(document["_id"]) for document in documents]
                found = np.array(
                    [
                        [document[f"b{column}"] for column in range(postings.shape[1])]
                        for document in documents
                    ],
                    dtype=np.int64,
                ).reshape(len(documents), postings.shape[1])
                query_rows, found_rows = match_postings(postings, found.view(np.uint64))
            else:
                query_rows, found_rows, keys, found_words = self._find_buckets(postings)
        if not keys:
            return no_candidates(width)
        words = bytes_to_words(found_words, width)
        keys_found = [keys[i] for i in found_rows.tolist()]
        return Candidates(query_rows, keys_found, words[found_rows]).screened(screen)

    def _find_postings(self, postings: UInt64Array) -> list[dict[str, Any]]:
        """The record documents with one of the batch's keys in a posting field."""
        signed = to_signed(postings)
        conditions = [
            {f"b{column}": {"$in": [self._int64(v) for v in np.unique(signed[:, column]).tolist()]}}
            for column in range(signed.shape[1])
        ]
        fields = {"fingerprint": 1, **{f"b{column}": 1 for column in range(signed.shape[1])}}
        return list(self.records.find({"$or": conditions}, fields))

    def _find_buckets(self, postings: UInt64Array) -> tuple[IntArray, IntArray, list[Key], list[bytes]]:
        """(query rows, member positions, member keys, member fingerprints) of the members of
        the batch's bucket documents: a member of bucket (t, b) pairs with every query whose
        key in column t is b."""
        asking: dict[str, list[int]] = {}
        for row, keys in enumerate(postings.tolist()):
            for column, key in enumerate(keys):
                asking.setdefault(bucket_id(column, key), []).append(row)
        members: dict[str, int] = {}
        prints: list[bytes] = []
        query_rows: list[int] = []
        found_rows: list[int] = []
        listed = list(asking)
        for start in range(0, len(listed), KEY_CHUNK):
            names = listed[start : start + KEY_CHUNK]
            for document in self.buckets.find({"_id": {"$in": names}}, {"info": 1}):
                for entry in document.get("info", ()):
                    position = members.setdefault(entry["textname"], len(members))
                    if position == len(prints):
                        prints.append(bytes(entry["hashcode"]))
                    rows = asking[document["_id"]]
                    query_rows += rows
                    found_rows += [position] * len(rows)
        keys = [decode_key(text) for text in members]
        return np.asarray(query_rows, dtype=np.int64), np.asarray(found_rows, dtype=np.int64), keys, prints

    def size(self) -> int:
        with self._errors("counting records"):
            return int(self.records.count_documents({}))

    def scan(self, batch_size: int = 10_000) -> Iterator[list[StoredRecord]]:
        """Pages in ``_id`` order (no server cursor is held between pages)."""
        condition: dict[str, Any] = {}
        while True:
            with self._errors("scanning records"):
                documents = list(
                    self.records.find(condition, _RECORD_FIELDS).sort("_id", 1).limit(int(batch_size))
                )
            if not documents:
                return
            condition = {"_id": {"$gt": documents[-1]["_id"]}}
            yield self._records(documents)

    def posting_counts(self) -> list[PostingCounts]:
        sizes: list[list[int]] = [[] for _ in range(self.shape.columns)]
        with self._errors("collecting bucket statistics"):
            if self.layout == "records":
                for column, lengths in enumerate(sizes):
                    pipeline = [{"$group": {"_id": f"$b{column}", "n": {"$sum": 1}}}]
                    lengths.extend(int(group["n"]) for group in self.records.aggregate(pipeline))
            else:
                for document in self.buckets.find({}, {"table": 1, "info": 1}):
                    if document.get("info") and int(document["table"]) < len(sizes):
                        sizes[int(document["table"])].append(len(document["info"]))
        return [PostingCounts.of_sizes(lengths) for lengths in sizes]

    def drop(self) -> None:
        with self._errors("dropping the store"):
            for collection in (self.records, self.buckets, self.values, self.meta, self.locks):
                try:
                    collection.drop()
                except self._pymongo.errors.OperationFailure:
                    collection.delete_many({})  # servers without the drop command (jongodb)

    # -- helpers -------------------------------------------------------------------------
    def _stored_ids(self, ids: list[str]) -> list[str]:
        stored: list[str] = []
        for start in range(0, len(ids), KEY_CHUNK):
            chunk = ids[start : start + KEY_CHUNK]
            stored += [document["_id"] for document in self.records.find({"_id": {"$in": chunk}}, {"_id": 1})]
        order = {text: position for position, text in enumerate(ids)}
        return sorted(stored, key=order.__getitem__)

    def _find_ids(self, ids: list[str]) -> list[dict[str, Any]]:
        documents: list[dict[str, Any]] = []
        for start in range(0, len(ids), KEY_CHUNK):
            documents += self.records.find({"_id": {"$in": ids[start : start + KEY_CHUNK]}})
        return documents

    def _records(self, documents: Sequence[dict[str, Any]]) -> list[StoredRecord]:
        if not documents:
            return []
        width = self.shape.words
        words = bytes_to_words([bytes(document["fingerprint"]) for document in documents], width)
        return [
            StoredRecord(
                decode_key(document["_id"]),
                words_to_int(words[position], self.shape.fingerprint_words),
                None if document.get("cluster") is None else decode_key(document["cluster"]),
                None if document.get("signature") is None else bytes(document["signature"]),
                None if document.get("digest") is None else bytes(document["digest"]),
            )
            for position, document in enumerate(documents)
        ]

    def _rewrite_buckets(
        self,
        added: dict[str, list[dict[str, Any]]],
        removed: dict[str, set[str]],
        session: ClientSession | None,
    ) -> Callable[[], None]:
        return rewrite_buckets(self.buckets, self._pymongo, self._int64, added, removed, session)


_RECORD_FIELDS = {"fingerprint": 1, "cluster": 1, "signature": 1, "digest": 1}


def _value_id(name: str, text: str) -> dict[str, str]:
    """The ``_id`` of a value in ``P_values``: its map and typed key (field order matters)."""
    return {"n": name, "k": text}


def from_url(url: str, parts: SplitResult, options: dict[str, str]) -> MongoStorage:
    client, database, collection, layout, where = connect(url, parts, options)
    return MongoStorage(client, database, collection, layout, where)
