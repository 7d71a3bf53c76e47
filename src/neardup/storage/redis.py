"""Redis store (redis-py): ``redis://[:password@]host[:port]/db[?prefix=P][&layout=2]``,
``rediss://`` for TLS.

Seed 000 §1 keeps each table's block values under Redis keys whose values are the
fingerprints that carry them. Keys (``P`` is the prefix, ``neardup`` by default):

- ``P:meta``: the index configuration, a JSON string; ``P:layout``: ``3`` (new stores; ``2``
  with ``?layout=2`` or made before), written with it. Each store is read and written in the
  layout it names.
- ``P:records``: a hash, typed key (``i:42`` / ``s:doc``, see :func:`~.base.encode_key`) →
  packed record: the stored words (the fingerprint's 8 or 16 little-endian bytes, then a band
  index's band keys), one flag byte (bit 0: a cluster follows, bit 1: a signature follows,
  bit 2: a text digest follows), the cluster as a 4-byte little-endian length and its typed
  key in UTF-8, the 16-byte digest, then the signature bytes to the end. No pickle. Records
  written before digests have no bit 2 and read as records without one.
- layout 3: ``P:h{table}``, one hash per table (posting column), whose fields are the table's
  posting keys (the key's low bytes, little-endian, as many as the widest key needs: 3 in
  a band index) and whose values are the bucket's entries (as below). An add reads the
  batch's fields of each table with HMGET and writes them back, old entries and new, with
  HSET, a thousand fields a call; a query reads them with one script that takes each
  table's fields as one string and answers only the buckets found; a removal rewrites or
  deletes the fields it touches. A store keeps as many keys as it has tables, whatever its
  size: a key per bucket (layout 2) cost the server a key's lookup, allocation and
  bookkeeping per posting, so that at 40 postings a record the add script took most of a
  batch (docs/candidates.md).
- layout 2: ``P:b{table}:{block key}``, one string per (table, block value) bucket, the table number
  and the block key (lower-case hex) zero-padded so that every name of a store is as long
  (``P:b03:00a1f2`` in the default band index: 16 tables of 24-bit keys). It holds
  one entry per record: the fingerprint (8 or 16 little-endian bytes), the typed key's length
  (2 bytes, little-endian) and the typed key. An add APPENDs (one MSET for the new buckets),
  a query reads a batch's buckets with one native MGET, and a removal rewrites the buckets it
  touches (its cost grows with their size) or deletes those it empties.
- ``P:lock``: the writer lock of check-and-add (a random token with an expiry).
- ``P:values:{name}``: a hash per value map (:meth:`~.base.Storage.put_values`), typed key
  (as in ``P:records``) → the value's bytes; written and read in MULTI/EXEC pipelines.

Layout 1 (neardup before ``P:layout``) kept a hash per bucket, ``P:t{table}:{hex}``, read by
one Lua call per bucket: at 10^6 records a check-and-add batch spent about half its time in
those calls. A store without ``P:layout`` still opens and its records can be read (``neardup
index rebuild`` reads them), but adding, removing, querying and bucket statistics refuse it
with the rebuild command.

Writes are Lua scripts (EVALSHA, text in :mod:`.redis_scripts`): Redis runs a script to
completion before any other command, so the existence check and every record and posting of
a batch happen at once, and with ``appendfsync always`` the script's writes reach the AOF as
one MULTI/EXEC block, fsynced before the reply; Redis drops an incomplete trailing MULTI
block when it loads the AOF, so a killed server keeps a batch whole or not at all. A killed
client never leaves half a batch either: the script runs entirely inside the server. Removals
read the records, compute their buckets in numpy and delete in one script that first checks
the records are unchanged (retried if another writer replaced one meanwhile). Redis Cluster
is not supported (a batch's keys span slots).
"""

from __future__ import annotations

import contextlib
import re
import struct
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import SplitResult, urlencode, urlunsplit

import numpy as np
import numpy.typing as npt

from ..errors import (
    ConfigError,
    IndexConfigMismatchError,
    KeyExistsError,
    KeyNotFoundError,
    MissingDependencyError,
    StorageBackendError,
    StorageConflictError,
    StorageDamagedError,
    StorageUnavailableError,
)
from . import check_options, redis_scripts
from .base import (
    DIGEST_BYTES,
    Candidates,
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
    key_kind,
    key_not_found_error,
    load_meta,
    no_candidates,
    plain_keys,
    words_to_bytes,
)
from .lease import Lease
from .redis_scripts import (
    Buckets,
    bucket_args,
    bucket_entries,
    bucket_fields,
    bucket_names,
    entry,
    field_width,
    name_widths,
)
from .urls import redacted

if TYPE_CHECKING:
    import redis as redis_module

DEFAULT_PREFIX = "neardup"
_PREFIX_PATTERN = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
CONNECT_TIMEOUT_S = 5.0
#: A reply slower than this means the server hangs; a large batch script takes well under it.
SOCKET_TIMEOUT_S = 120.0
#: Retries of a removal whose records another writer replaced between read and delete.
REMOVE_RETRIES = 5
#: The bucket layout of new stores (``P:layout``; see the module docstring).
LAYOUT = "3"
#: The layouts this module reads and writes, each store in its own; ``?layout=2`` makes a new
#: store of the earlier one.
LAYOUTS = ("2", "3")
#: Fields per HSET, HMGET or HDEL of a value map.
VALUE_FIELDS = 1000
#: Value bytes per HSET at most (at least one field): a command stays far below Redis's
#: 1 GiB query buffer.
VALUE_BYTES = 1 << 24
_HAS_CLUSTER, _HAS_SIGNATURE, _HAS_DIGEST = 1, 2, 4


def check_prefix(prefix: str) -> str:
    """No ``:`` (one store's keys must not match another's ``P:*``) and no glob characters."""
    if not _PREFIX_PATTERN.fullmatch(prefix):
        raise ConfigError(
            f"Redis key prefix {prefix!r} must be 1-64 letters, digits, '_', '.' or '-' "
            "(no ':' or glob characters)"
        )
    return prefix


def pack_record(
    stored: bytes, cluster: Key | None, signature: bytes | None, digest: bytes | None = None
) -> bytes:
    """The ``P:records`` value: stored words, flags, optional cluster, digest and signature."""
    flags = (0 if cluster is None else _HAS_CLUSTER) | (0 if signature is None else _HAS_SIGNATURE)
    flags |= 0 if digest is None else _HAS_DIGEST
    parts = [stored, bytes((flags,))]
    if cluster is not None:
        text = encode_key(cluster).encode("utf-8", "surrogatepass")
        parts += [struct.pack("<I", len(text)), text]
    if digest is not None:
        parts.append(bytes(digest))
    if signature is not None:
        parts.append(bytes(signature))
    return b"".join(parts)


def unpack_record(
    key: Key, packed: bytes, width: int
) -> tuple[bytes, Key | None, bytes | None, bytes | None]:
    """(stored words as bytes, cluster, signature, digest) of a packed record; a short value
    is damage."""
    size = width * 8
    if len(packed) < size + 1:
        raise StorageDamagedError(
            f"the stored record of key {key!r} is truncated: the Redis store is damaged"
        )
    flags = packed[size]
    position = size + 1
    cluster: Key | None = None
    if flags & _HAS_CLUSTER:
        (length,) = struct.unpack_from("<I", packed, position)
        position += 4
        cluster = decode_key(packed[position : position + length])
        position += length
    digest: bytes | None = None
    if flags & _HAS_DIGEST:
        digest = packed[position : position + DIGEST_BYTES]
        position += DIGEST_BYTES
    signature = packed[position:] if flags & _HAS_SIGNATURE else None
    return packed[:size], cluster, signature, digest


class RedisStorage(Storage):
    """Records, postings and meta in one Redis database under a key prefix."""

    name = "redis"

    def __init__(
        self,
        client: redis_module.Redis,
        prefix: str = DEFAULT_PREFIX,
        where: str = "redis",
        new_layout: str = LAYOUT,
    ) -> None:
        import redis

        super().__init__()
        self._redis = redis
        self.client = client
        self.prefix = check_prefix(prefix)
        self.where = where
        self.meta_key = f"{self.prefix}:meta"
        self.layout_key = f"{self.prefix}:layout"
        self.records_key = f"{self.prefix}:records"
        self.lock_key = f"{self.prefix}:lock"
        #: The stored layout once read or written (None: not known yet).
        self.layout: str | None = None
        if new_layout not in LAYOUTS:
            raise ConfigError(f"Redis layout {new_layout!r} must be one of {', '.join(LAYOUTS)}")
        #: The layout a new store is made in.
        self.new_layout = new_layout
        self._probe: redis_module.Redis | None = None  # reachable()'s own client
        self._probe_lock = threading.Lock()
        #: The add and remove scripts of each layout.
        self._scripts = {
            layout: (client.register_script(add), client.register_script(remove))
            for layout, add, remove in (
                ("2", redis_scripts.ADD, redis_scripts.REMOVE),
                ("3", redis_scripts.ADD_3, redis_scripts.REMOVE_3),
            )
        }
        self._query = client.register_script(redis_scripts.QUERY_3)
        self._create = client.register_script(redis_scripts.CREATE)
        self._release = client.register_script(redis_scripts.RELEASE)
        self._renew = client.register_script(redis_scripts.RENEW)
        self.lease = Lease(
            f"{where} (key {self.lock_key})",
            take=lambda token: bool(self.client.set(self.lock_key, token, nx=True, px=self.lease.ttl_ms)),
            renew=lambda token: bool(self._renew(keys=[self.lock_key], args=[token, self.lease.ttl_ms])),
            give_back=lambda token: self._release(keys=[self.lock_key], args=[token]),
        )

    # -- errors --------------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Driver errors as neardup errors: a lost server is StorageUnavailableError."""
        errors = self._redis.exceptions
        try:
            yield
        except (errors.ConnectionError, errors.TimeoutError) as exc:
            raise StorageUnavailableError(
                f"lost the connection to Redis at {self.where} while {doing} ({exc}); is the server running?"
            ) from exc
        except errors.RedisError as exc:
            raise StorageBackendError(f"Redis at {self.where} failed while {doing}: {exc}") from exc

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        with contextlib.suppress(Exception):
            if self._probe is not None:
                self._probe.close()

    def reachable(self, timeout_s: float) -> str | None:
        """PING on a client of its own with ``timeout_s`` timeouts and no retries (the store's
        client retries a lost connection for seconds and waits up to 120 s for a reply)."""
        with self._probe_lock:
            if self._probe is None:
                pool = self.client.connection_pool
                settings = {**pool.connection_kwargs, "socket_timeout": timeout_s}
                settings.update(socket_connect_timeout=timeout_s, retry=None)
                self._probe = self._redis.Redis(
                    connection_pool=self._redis.ConnectionPool(
                        connection_class=pool.connection_class, **settings
                    )
                )
            probe = self._probe
        try:
            probe.ping()
            return None
        except self._redis.exceptions.RedisError as exc:
            return f"Redis at {self.where}: {exc}"

    # -- meta ----------------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any] | None:
        with self._errors("reading the index meta"):
            text, layout = self.client.mget(self.meta_key, self.layout_key)
        if text is None:
            return None
        self.layout = _layout(layout)
        return load_meta(text, f"{self.where} key {self.meta_key}")

    def write_meta(self, meta: dict[str, Any]) -> None:
        with self._errors("writing the index meta"):
            created = self._create(
                keys=[self.meta_key, self.layout_key], args=[dump_meta(meta), self.new_layout]
            )
        if not created:
            raise StorageConflictError(
                f"another process created an index at {self.where} (key {self.meta_key}) meanwhile; "
                "open it again"
            )
        self.layout = self.new_layout

    def _check_layout(self) -> None:
        """Refuse buckets of another layout. Only buckets: records read the same in every
        layout, so ``neardup index rebuild`` can still read an old store's ids and clusters."""
        if self.layout is None:
            with self._errors("reading the store layout"):
                self.layout = _layout(self.client.get(self.layout_key))
        if self.layout in LAYOUTS:
            return
        made = (
            f"one hash per bucket, {self.prefix}:t{{table}}:{{hex}}, made by an earlier neardup"
            if self.layout == "1"
            else "made by another version of neardup"
        )
        raise IndexConfigMismatchError(
            f"the index at {self.where} keeps its buckets in Redis layout {self.layout} ({made}); this "
            f"neardup reads layouts {' and '.join(LAYOUTS)}. Rebuild it into a "
            f"new store, keeping its ids and cluster ids: `neardup index rebuild {self.where} NEW_URL "
            "TEXTS.jsonl`"
        )

    # -- the writer lock -----------------------------------------------------------------
    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """The local lock plus the lease ``P:lock`` (SET NX PX with a random token; see
        :mod:`neardup.storage.lease`). Writes made under it pass the token to their script,
        which refuses to write if the lease expired meanwhile (fencing)."""
        with self._local_lock, self._errors("holding the writer lock"), self.lease.held():
            yield

    def _fence(self) -> str:
        """The lock token a write must still hold, or '' outside ``exclusive()``."""
        return self.lease.token

    # -- buckets -------------------------------------------------------------------------
    def _script_args(
        self, fields: list[bytes], records: list[bytes], words: UInt64Array, postings: UInt64Array
    ) -> list[Any]:
        """ARGV of the add and remove scripts after the lock token."""
        width = self.shape.fingerprint_words
        prints = words_to_bytes(words[:, :width])
        entries = [entry(fp, field) for fp, field in zip(prints, fields, strict=True)]
        head: list[Any] = [len(fields), 8 * width]
        return head + fields + records + entries + bucket_args(self._names, postings, entries)

    def _names(self, tables: npt.NDArray[np.int64], keys: UInt64Array) -> npt.NDArray[np.uint8]:
        """The bucket of each (table, key) as equal-width rows of bytes: its key name in
        layout 2, its field in the table's hash in layout 3."""
        if self.layout == "2":
            widths = name_widths(self.shape.columns, self.shape.posting_bits)
            return bucket_names(self.prefix, widths, tables, keys)
        return bucket_fields(field_width(self.shape.posting_bits), keys)

    def _hashes(self) -> list[str]:
        """The hash of each table in layout 3 (``P:h{table}``); none in layout 2."""
        if self.layout == "2":
            return []
        return [f"{self.prefix}:h{table}" for table in range(self.shape.columns)]

    # -- records -------------------------------------------------------------------------
    def add_many(self, batch: RecordBatch) -> None:
        if not len(batch):
            return
        self._check_layout()
        words = np.ascontiguousarray(batch.words, dtype=np.uint64)
        fields = [_field(key) for key in batch.keys]
        stored = words_to_bytes(words)
        records = [
            pack_record(stored[row], batch.cluster(row), batch.signature(row), batch.digest(row))
            for row in range(len(fields))
        ]
        answer = self._write(
            self._scripts[str(self.layout)][0],
            "added",
            self._script_args(fields, records, words, batch.posting_keys()),
        )
        if answer[0] == 1:
            raise KeyExistsError(
                f"key {decode_key(answer[1])!r} is already in {self.where}; nothing of the batch was "
                "added: remove it first or use another key"
            )

    def remove_many(self, keys: Sequence[Key]) -> None:
        if not keys:
            return
        self._check_layout()
        unique = list(dict.fromkeys(keys))
        fields = [_field(key) for key in unique]
        width = self.shape.words
        with self._local_lock:
            for _attempt in range(REMOVE_RETRIES):
                with self._errors("reading records to remove"):
                    packed = cast("list[bytes | None]", self.client.hmget(self.records_key, fields))
                missing = [key for key, value in zip(unique, packed, strict=True) if value is None]
                if missing:
                    raise key_not_found_error(missing[0], len(missing), self.where)
                values = cast("list[bytes]", packed)
                words = bytes_to_words([value[: width * 8] for value in values], width)
                # A removal finds the buckets to rewrite from the records' stored words.
                postings = self.shape.postings_of(words)
                answer = self._write(
                    self._scripts[str(self.layout)][1],
                    "removed",
                    self._script_args(fields, values, words, postings),
                )
                if answer[0] == 0:
                    return
                if answer[0] == 1:
                    raise KeyNotFoundError(
                        f"key {decode_key(answer[1])!r} was removed from {self.where} by another writer "
                        "meanwhile; nothing of this batch was removed"
                    )
            raise StorageConflictError(
                f"records of this batch kept changing in {self.where} while they were being removed; "
                "nothing was removed: retry"
            )

    def _write(self, script: Any, what: str, args: list[Any]) -> list[Any]:
        """Run a write script under the lock token; its answer when it wrote (0), or found a
        key stored (1) or changed (4). Nothing was written unless the answer is 0."""
        doing = "adding records" if what == "added" else "removing records"
        with self._local_lock, self._errors(doing):
            answer = cast(
                "list[Any]",
                script(keys=[self.records_key, self.lock_key, *self._hashes()], args=[self._fence(), *args]),
            )
        answer[0] = int(answer[0])
        if answer[0] == 2:
            raise KeyExistsError(
                f"key {decode_key(answer[1])!r} appears twice in the batch; nothing was added"
            )
        if answer[0] == 3:
            raise StorageConflictError(
                f"the writer lock {self.lock_key} at {self.where} expired before the batch was {what} "
                "(the process stalled or lost the server for longer than the lock lives); nothing was "
                f"{what}: retry"
            )
        if answer[0] == 5:
            raise StorageDamagedError(
                f"the Redis bucket {answer[1].decode()} at {self.where} is damaged (its entries do not "
                f"parse); nothing was {what}"
            )
        return answer

    def get_many(self, keys: Sequence[Key]) -> list[StoredRecord | None]:
        if not keys:
            return []
        with self._errors("reading records"):
            packed = cast(
                "list[bytes | None]", self.client.hmget(self.records_key, [_field(key) for key in keys])
            )
        return [
            None if value is None else self._record(key, value)
            for key, value in zip(keys, packed, strict=True)
        ]

    def _record(self, key: Key, packed: bytes) -> StoredRecord:
        stored, cluster, signature, digest = unpack_record(key, packed, self.shape.words)
        # The fingerprint is its first 1 or 2 little-endian words, low word first.
        value = int.from_bytes(stored[: 8 * self.shape.fingerprint_words], "little")
        return StoredRecord(key, value, cluster, signature, digest)

    # -- values --------------------------------------------------------------------------
    def _values_key(self, name: str) -> str:
        return f"{self.prefix}:values:{name}"

    def put_values(self, name: str, keys: Sequence[Key], values: Sequence[bytes]) -> None:
        check_value_map(name, keys, values)
        plain = plain_keys(keys)
        check_keys(plain)
        if not plain:
            return
        latest = dict(zip(_fields(plain), values, strict=True))
        with self._local_lock, self._errors("storing values"):
            pipe = self.client.pipeline(transaction=True)
            mapping: dict[Any, bytes] = {}  # redis-py types its keys as a union
            size = 0
            for field, value in latest.items():
                if mapping and (len(mapping) == VALUE_FIELDS or size + len(value) > VALUE_BYTES):
                    pipe.hset(self._values_key(name), mapping=mapping)
                    mapping, size = {}, 0
                mapping[field] = value
                size += len(value)
            pipe.hset(self._values_key(name), mapping=mapping)
            pipe.execute()

    def get_values(self, name: str, keys: Sequence[Key]) -> list[bytes | None]:
        check_value_map(name, keys)
        if not len(keys):
            return []
        fields = _fields(plain_keys(keys))
        with self._errors("reading values"):
            pipe = self.client.pipeline(transaction=True)
            for start in range(0, len(fields), VALUE_FIELDS):
                pipe.hmget(self._values_key(name), fields[start : start + VALUE_FIELDS])
            parts = cast("list[list[bytes | None]]", pipe.execute())
        return [value for part in parts for value in part]

    def scan_values(self, name: str, batch_size: int = 10_000) -> Iterator[list[tuple[Key, bytes]]]:
        """HSCAN of the map's hash (a field written meanwhile may show twice or not at all)."""
        check_value_map(name, [])
        cursor = 0
        while True:
            with self._errors("reading values"):
                cursor, found = self.client.hscan(self._values_key(name), cursor, count=batch_size)
            pairs = cast("dict[bytes, bytes]", found)
            if pairs:
                yield [(decode_key(field), bytes(value)) for field, value in pairs.items()]
            if cursor == 0:
                return

    def remove_values(self, name: str, keys: Sequence[Key]) -> None:
        check_value_map(name, keys)
        fields = list(dict.fromkeys(_fields(plain_keys(keys))))
        if not fields:
            return
        with self._local_lock, self._errors("removing values"):
            pipe = self.client.pipeline(transaction=True)
            for start in range(0, len(fields), VALUE_FIELDS):
                pipe.hdel(self._values_key(name), *fields[start : start + VALUE_FIELDS])
            pipe.execute()

    # -- search --------------------------------------------------------------------------
    #: Queries per read of their buckets (one bucket per query and table).
    query_batch = 4096

    def candidates(
        self, postings: UInt64Array, *, records: bool = False, screen: Screen | None = None
    ) -> Candidates:
        """One MGET of each distinct (table, block) bucket of the batch; a member found in
        bucket b is a candidate of every query whose posting key in b's table is b's. The
        words returned are the members' fingerprint words (all that a bucket keeps)."""
        self._check_layout()
        width = self.shape.fingerprint_words
        found = Buckets(postings)
        rows = self._names(found.tables, found.keys)
        # Void, not S: an S item loses its trailing zero bytes, which a binary field has.
        names = cast("list[bytes]", rows.view(f"V{rows.shape[1]}").reshape(-1).tolist())
        with self._errors("querying"):
            values = self._read_buckets(found, names)
        positions: list[int] = []
        prints: list[bytes] = []
        members: list[bytes] = []
        for position, value in enumerate(values):
            if value is not None:
                entries = bucket_entries(value, 8 * width, names[position])
                positions += [position] * len(entries)
                prints += [entry[0] for entry in entries]
                members += [entry[1] for entry in entries]
        if not members:
            return no_candidates(width)
        # Member i of bucket b is a candidate of each row that named b (its key in b's table).
        at = np.asarray(positions, dtype=np.int64)
        sizes = found.counts[at]
        member_rows = np.repeat(np.arange(at.size), sizes)
        offsets = np.arange(member_rows.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        query_rows = found.rows[np.repeat(found.starts[at], sizes) + offsets].astype(np.int64)
        decoded = {member: decode_key(member) for member in members}
        keys = [decoded[members[row]] for row in member_rows.tolist()]
        return Candidates(query_rows, keys, bytes_to_words(prints, width)[member_rows]).screened(screen)

    def _read_buckets(self, found: Buckets, names: list[bytes]) -> list[bytes | None]:
        """The value of each bucket of ``found`` (named ``names``): one MGET in layout 2; in
        layout 3 one script that reads each table's fields (HMGET) from one string per table
        and answers only the buckets found (a batch's tens of thousands of names as separate
        arguments cost the client more than the server's work)."""
        if not names:
            return []
        if self.layout == "2":
            return cast("list[bytes | None]", self.client.mget(names))
        bounds = np.searchsorted(found.tables, np.arange(self.shape.columns + 1)).tolist()
        blobs = [b"".join(names[bounds[table] : bounds[table + 1]]) for table in range(self.shape.columns)]
        answer = cast(
            "list[Any]",
            self._query(keys=self._hashes(), args=[field_width(self.shape.posting_bits), *blobs]),
        )
        values: list[bytes | None] = [None] * len(names)
        for at in range(0, len(answer), 2):
            values[int(answer[at])] = answer[at + 1]
        return values

    def size(self) -> int:
        with self._errors("counting records"):
            return int(self.client.hlen(self.records_key))

    def scan(self, batch_size: int = 10_000) -> Iterator[list[StoredRecord]]:
        """HSCAN in batches; a key HSCAN returns twice (it may while the hash is resized)
        is yielded once."""
        seen: set[bytes] = set()
        cursor = 0
        while True:
            with self._errors("scanning records"):
                cursor, page = cast(
                    "tuple[int, dict[bytes, bytes]]",
                    self.client.hscan(self.records_key, cursor, count=batch_size),
                )
            records = [
                self._record(decode_key(name), value) for name, value in page.items() if name not in seen
            ]
            seen.update(page)
            if records:
                yield records
            if cursor == 0:
                return

    def posting_counts(self) -> list[PostingCounts]:
        """Bucket sizes from a SCAN over the bucket keys and an MGET of each page of them."""
        self._check_layout()
        sizes: list[list[int]] = [[] for _ in range(self.shape.columns)]
        width = 8 * self.shape.fingerprint_words
        with self._errors("collecting bucket statistics"):
            for table, hash_name in enumerate(self._hashes()):
                for bucket in self.client.hscan_iter(hash_name, count=10_000):
                    sizes[table].append(len(bucket_entries(bucket[1], width, hash_name)))
            for names in self._keys_matching(f"{self.prefix}:b*") if self.layout == "2" else ():
                values = cast("list[bytes | None]", self.client.mget(names))
                for name, value in zip(names, values, strict=True):
                    table = int(name.split(b":")[-2][1:])
                    if value is not None and table < len(sizes):
                        sizes[table].append(len(bucket_entries(value, width, name)))
        return [PostingCounts.of_sizes(lengths) for lengths in sizes]

    def drop(self) -> None:
        """Every key under ``P:``: meta, records, buckets, value maps and the lock."""
        with self._errors("dropping the store"):
            for names in self._keys_matching(f"{self.prefix}:*"):
                self.client.unlink(*names)

    def _keys_matching(self, pattern: str) -> Iterator[list[bytes]]:
        cursor = 0
        while True:
            cursor, names = cast(
                "tuple[int, list[bytes]]", self.client.scan(cursor, match=pattern, count=10_000)
            )
            if names:
                yield list(names)
            if cursor == 0:
                return


def _field(key: Key) -> bytes:
    return encode_key(key).encode("utf-8", "surrogatepass")


def _fields(keys: list[Key]) -> list[bytes]:
    """:func:`_field` of each plain key (a batch of ints formatted at once)."""
    if key_kind(keys) == 1:
        return [b"i:%d" % key for key in cast("list[int]", keys)]
    return [_field(key) for key in keys]


def _layout(stored: bytes | str | None) -> str:
    """The layout ``P:layout`` names; a store without it is of layout 1."""
    if stored is None:
        return "1"
    return stored.decode("utf-8", "replace") if isinstance(stored, bytes) else str(stored)


def from_url(url: str, parts: SplitResult, options: dict[str, str]) -> RedisStorage:
    try:
        import redis
        from redis.connection import URL_QUERY_ARGUMENT_PARSERS
    except ImportError as exc:
        raise MissingDependencyError("redis", "stores", "a Redis store") from exc
    check_options(options, {"prefix", "layout", *URL_QUERY_ARGUMENT_PARSERS}, url)
    prefix = check_prefix(options.pop("prefix", DEFAULT_PREFIX))
    layout = options.pop("layout", LAYOUT)
    if layout not in LAYOUTS:
        raise ConfigError(f"layout={layout!r} in {redacted(url)!r} must be one of {', '.join(LAYOUTS)}")
    where = redacted(parts)
    client_url = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(options), ""))
    try:
        client = redis.Redis.from_url(
            client_url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=SOCKET_TIMEOUT_S
        )
    except ValueError as exc:
        raise ConfigError(f"bad Redis URL {where}: {exc}") from exc
    try:
        client.ping()
    except redis.exceptions.AuthenticationError as exc:
        client.close()
        raise StorageUnavailableError(
            f"Redis at {where} refused the credentials ({exc}); check the password in the URL"
        ) from exc
    except redis.exceptions.RedisError as exc:
        client.close()
        raise StorageUnavailableError(
            f"cannot connect to Redis at {where} ({exc}); is the server running and the URL right?"
        ) from exc
    return RedisStorage(client, prefix, where, new_layout=layout)
