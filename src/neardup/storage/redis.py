"""Redis store (redis-py): ``redis://[:password@]host[:port]/db[?prefix=P]``, ``rediss://`` for TLS.

Seed 000 §1 keeps each table's block values as Redis keys whose values are the fingerprints
that carry them. Keys (``P`` is the prefix, ``neardup`` by default):

- ``P:meta``: the index configuration, a JSON string.
- ``P:records``: a hash, typed key (``i:42`` / ``s:doc``, see :func:`~.base.encode_key`) →
  packed record: the fingerprint (8 or 16 little-endian bytes), one flag byte (bit 0: a
  cluster follows, bit 1: a signature follows), the cluster as a 4-byte little-endian length
  and its typed key in UTF-8, then the signature bytes to the end. No pickle.
- ``P:t{table}:{block key in hex}``: one hash per (table, block value) bucket, typed key →
  fingerprint bytes, so a query reads a bucket with one HGETALL and verifies it in numpy.
  Redis deletes a hash with its last field, so empty buckets cost nothing.
- ``P:lock``: the writer lock of check-and-add (a random token with an expiry).

Writes are Lua scripts (EVALSHA): Redis runs a script to completion before any other
command, so the existence check and every record and posting of a batch happen at once,
and with ``appendfsync always`` the script's writes reach the AOF as one MULTI/EXEC block,
fsynced before the reply; Redis drops an incomplete trailing MULTI block when it loads the
AOF, so a killed server keeps a batch whole or not at all. A killed client never leaves half
a batch either: the script runs entirely inside the server. Removals read the records,
compute their buckets in numpy and delete in one script that first checks the records are
unchanged (retried if another writer replaced one meanwhile). Queries are one script per
batch that reads every bucket the batch names (one command, not one per bucket). Redis
Cluster is not supported (a batch's keys span slots).
"""

from __future__ import annotations

import contextlib
import re
import struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import SplitResult, urlencode, urlunsplit

import numpy as np

from ..bands import scheme_from_dict
from ..buckets import BucketStats, TableStats
from ..errors import (
    ConfigError,
    KeyExistsError,
    KeyNotFoundError,
    MissingDependencyError,
    StorageError,
    StorageUnavailableError,
)
from . import check_options
from .base import (
    Candidates,
    Key,
    RecordBatch,
    Storage,
    StoredRecord,
    UInt64Array,
    bytes_to_words,
    decode_key,
    dump_meta,
    encode_key,
    key_not_found_error,
    load_meta,
    match_blocks,
    words_to_bytes,
)
from .lease import Lease
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
_HAS_CLUSTER, _HAS_SIGNATURE = 1, 2

# Returns {0} when written, {1, key} for a key already stored, {2, key} for a key twice in
# the batch, {3} when the caller's writer lock is no longer held (expired; nothing written).
_ADD_SCRIPT = """
local tables = tonumber(ARGV[1])
if ARGV[2] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[2] then return {3} end
local count = (#ARGV - 2) / 3
local seen = {}
for i = 0, count - 1 do
  local key = ARGV[3 + 3 * i]
  if seen[key] then return {2, key} end
  seen[key] = true
  if redis.call('HEXISTS', KEYS[1], key) == 1 then return {1, key} end
end
for i = 0, count - 1 do
  local key, fingerprint = ARGV[3 + 3 * i], ARGV[5 + 3 * i]
  redis.call('HSET', KEYS[1], key, ARGV[4 + 3 * i])
  for t = 1, tables do redis.call('HSET', KEYS[2 + i * tables + t], key, fingerprint) end
end
return {0}
"""

# ARGV after the lock token: (key, packed record the caller read) pairs. Returns {0}, {1, key}
# for a key not stored, {3} for a lost lock, {4, key} for a record changed since it was read.
_REMOVE_SCRIPT = """
local tables = tonumber(ARGV[1])
if ARGV[2] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[2] then return {3} end
local count = (#ARGV - 2) / 2
for i = 0, count - 1 do
  local key = ARGV[3 + 2 * i]
  local stored = redis.call('HGET', KEYS[1], key)
  if not stored then return {1, key} end
  if stored ~= ARGV[4 + 2 * i] then return {4, key} end
end
for i = 0, count - 1 do
  local key = ARGV[3 + 2 * i]
  redis.call('HDEL', KEYS[1], key)
  for t = 1, tables do redis.call('HDEL', KEYS[2 + i * tables + t], key) end
end
return {0}
"""

#: Every bucket of a query batch in one call: (bucket position, [field, value, ...]) for each
#: non-empty bucket, the names given as one space-separated argument. A pipeline of one
#: HGETALL per bucket spent 59 % of a band index's check-and-add in redis-py's per-command
#: packing and parsing (16 buckets per query). Names hold no spaces (see check_prefix).
_LOOKUP_SCRIPT = """
local out = {}
local position = 0
for name in string.gmatch(ARGV[1], '[^ ]+') do
  position = position + 1
  local fields = redis.call('HGETALL', name)
  if #fields > 0 then
    out[#out + 1] = position
    out[#out + 1] = fields
  end
end
return out
"""

_RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_RENEW_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""


def check_prefix(prefix: str) -> str:
    """No ``:`` (one store's keys must not match another's ``P:*``) and no glob characters."""
    if not _PREFIX_PATTERN.fullmatch(prefix):
        raise ConfigError(
            f"Redis key prefix {prefix!r} must be 1-64 letters, digits, '_', '.' or '-' "
            "(no ':' or glob characters)"
        )
    return prefix


def pack_record(fingerprint: bytes, cluster: Key | None, signature: bytes | None) -> bytes:
    """The ``P:records`` value: fingerprint, flags, optional cluster, optional signature."""
    flags = (0 if cluster is None else _HAS_CLUSTER) | (0 if signature is None else _HAS_SIGNATURE)
    parts = [fingerprint, bytes((flags,))]
    if cluster is not None:
        text = encode_key(cluster).encode("utf-8", "surrogatepass")
        parts += [struct.pack("<I", len(text)), text]
    if signature is not None:
        parts.append(bytes(signature))
    return b"".join(parts)


def unpack_record(key: Key, packed: bytes, width: int) -> tuple[bytes, Key | None, bytes | None]:
    """(fingerprint bytes, cluster, signature) of a packed record; a short value is damage."""
    size = width * 8
    if len(packed) < size + 1:
        raise StorageError(f"the stored record of key {key!r} is truncated: the Redis store is damaged")
    flags = packed[size]
    position = size + 1
    cluster: Key | None = None
    if flags & _HAS_CLUSTER:
        (length,) = struct.unpack_from("<I", packed, position)
        position += 4
        cluster = decode_key(packed[position : position + length])
        position += length
    signature = packed[position:] if flags & _HAS_SIGNATURE else None
    return packed[:size], cluster, signature


class RedisStorage(Storage):
    """Records, postings and meta in one Redis database under a key prefix."""

    name = "redis"

    def __init__(
        self, client: redis_module.Redis, prefix: str = DEFAULT_PREFIX, where: str = "redis"
    ) -> None:
        import redis

        super().__init__()
        self._redis = redis
        self.client = client
        self.prefix = check_prefix(prefix)
        self.where = where
        self.meta_key = f"{self.prefix}:meta"
        self.records_key = f"{self.prefix}:records"
        self.lock_key = f"{self.prefix}:lock"
        self._add = client.register_script(_ADD_SCRIPT)
        self._remove = client.register_script(_REMOVE_SCRIPT)
        self._release = client.register_script(_RELEASE_SCRIPT)
        self._lookup = client.register_script(_LOOKUP_SCRIPT)
        self._renew = client.register_script(_RENEW_SCRIPT)
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
            raise StorageError(f"Redis at {self.where} failed while {doing}: {exc}") from exc

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()

    # -- meta ----------------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any] | None:
        with self._errors("reading the index meta"):
            text = self.client.get(self.meta_key)
        return None if text is None else load_meta(text, f"{self.where} key {self.meta_key}")

    def write_meta(self, meta: dict[str, Any]) -> None:
        scheme_from_dict(meta["scheme"])  # refuse a bad scheme before anything is written
        with self._errors("writing the index meta"):
            created = self.client.set(self.meta_key, dump_meta(meta), nx=True)
        if not created:
            raise StorageError(
                f"another process created an index at {self.where} (key {self.meta_key}) meanwhile; "
                "open it again"
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

    # -- records -------------------------------------------------------------------------
    def _bucket_names(self, words: UInt64Array) -> list[str]:
        """``P:t{table}:{hex}`` for every (row, table), row-major."""
        heads = self._bucket_heads()
        return [
            f"{head}{block:x}"
            for row in self.scheme.keys(words).tolist()
            for head, block in zip(heads, row, strict=True)
        ]

    def _bucket_heads(self) -> list[str]:
        """``P:t{table}:`` per table (16 names per record: formatted once, not per name)."""
        return [f"{self.prefix}:t{table}:" for table in range(self.scheme.table_count)]

    def add_many(self, batch: RecordBatch) -> None:
        if not len(batch):
            return
        fingerprints = words_to_bytes(np.ascontiguousarray(batch.words, dtype=np.uint64))
        args: list[Any] = [self.scheme.table_count, ""]
        for row, key in enumerate(batch.keys):
            args += [
                _field(key),
                pack_record(fingerprints[row], batch.cluster(row), batch.signature(row)),
                fingerprints[row],
            ]
        keys = [self.records_key, self.lock_key, *self._bucket_names(batch.words)]
        with self._local_lock:
            args[1] = self._fence()
            with self._errors("adding records"):
                answer = self._add(keys=keys, args=args)
        code = int(answer[0])
        if code == 1:
            raise KeyExistsError(
                f"key {decode_key(answer[1])!r} is already in {self.where}; nothing of the batch was "
                "added: remove it first or use another key"
            )
        if code == 2:
            raise KeyExistsError(
                f"key {decode_key(answer[1])!r} appears twice in the batch; nothing was added"
            )
        if code == 3:
            raise StorageError(self._lost_lock("added"))

    def remove_many(self, keys: Sequence[Key]) -> None:
        if not keys:
            return
        unique = list(dict.fromkeys(keys))
        fields = [_field(key) for key in unique]
        width = self.scheme.words
        with self._local_lock:
            for _attempt in range(REMOVE_RETRIES):
                with self._errors("reading records to remove"):
                    packed = cast("list[bytes | None]", self.client.hmget(self.records_key, fields))
                missing = [key for key, value in zip(unique, packed, strict=True) if value is None]
                if missing:
                    raise key_not_found_error(missing[0], len(missing), self.where)
                values: list[bytes] = [value for value in packed if value is not None]
                words = bytes_to_words([value[: width * 8] for value in values], width)
                args: list[Any] = [self.scheme.table_count, self._fence()]
                for name, value in zip(fields, values, strict=True):
                    args += [name, value]
                with self._errors("removing records"):
                    answer = self._remove(
                        keys=[self.records_key, self.lock_key, *self._bucket_names(words)], args=args
                    )
                code = int(answer[0])
                if code == 0:
                    return
                if code == 1:
                    raise KeyNotFoundError(
                        f"key {decode_key(answer[1])!r} was removed from {self.where} by another writer "
                        "meanwhile; nothing of this batch was removed"
                    )
                if code == 3:
                    raise StorageError(self._lost_lock("removed"))
            raise StorageError(
                f"records of this batch kept changing in {self.where} while they were being removed; "
                "nothing was removed: retry"
            )

    def _lost_lock(self, what: str) -> str:
        return (
            f"the writer lock {self.lock_key} at {self.where} expired before the batch was {what} "
            "(the process stalled or lost the server for longer than the lock lives); nothing was "
            f"{what}: retry"
        )

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
        fingerprint, cluster, signature = unpack_record(key, packed, self.scheme.words)
        # The fingerprint is its first 1 or 2 little-endian words, low word first.
        value = int.from_bytes(fingerprint[: 8 * self.scheme.fingerprint_words], "little")
        return StoredRecord(key, value, cluster, signature)

    def candidates(self, words: UInt64Array) -> Candidates:
        """One round trip: a script reads each distinct (table, block) bucket of the batch;
        the members' own block keys then pair them with the queries in numpy."""
        blocks = self.scheme.keys(words)
        heads = self._bucket_heads()
        names = [
            f"{heads[table]}{block:x}"
            for table in range(blocks.shape[1])
            for block in np.unique(blocks[:, table]).tolist()
        ]
        with self._errors("querying"):
            found = self._lookup(args=[" ".join(names)]) if names else []
        members: dict[bytes, bytes] = {}
        for fields in found[1::2]:
            members.update(zip(fields[::2], fields[1::2], strict=True))
        width = words.shape[1]
        if not members:
            return Candidates(np.empty(0, np.int64), [], np.empty((0, width), np.uint64))
        found_words = bytes_to_words(list(members.values()), width)
        query_rows, found_rows = match_blocks(blocks, self.scheme.keys(found_words))
        keys = [decode_key(name) for name in members]
        return Candidates(query_rows, [keys[i] for i in found_rows.tolist()], found_words[found_rows])

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

    def stats(self) -> BucketStats:
        """Bucket sizes from a SCAN over the bucket keys and a pipelined HLEN of each."""
        sizes: list[list[int]] = [[] for _ in range(self.scheme.table_count)]
        with self._errors("collecting bucket statistics"):
            for names in self._keys_matching(f"{self.prefix}:t*"):
                pipe = self.client.pipeline(transaction=False)
                for name in names:
                    pipe.hlen(name)
                for name, length in zip(names, pipe.execute(), strict=True):
                    table = int(name.split(b":")[-2][1:])
                    if table < len(sizes):
                        sizes[table].append(int(length))
        stats = BucketStats(scheme=self.scheme.describe())
        for table, lengths in enumerate(sizes):
            stats.tables.append(
                TableStats(
                    table,
                    self.scheme.tables[table].bit_count,
                    len(lengths),
                    max(lengths, default=0),
                    sum(lengths) / len(lengths) if lengths else 0.0,
                )
            )
        return stats

    def drop(self) -> None:
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


def from_url(url: str, parts: SplitResult, options: dict[str, str]) -> RedisStorage:
    try:
        import redis
        from redis.connection import URL_QUERY_ARGUMENT_PARSERS
    except ImportError as exc:
        raise MissingDependencyError("redis", "stores", "a Redis store") from exc
    check_options(options, {"prefix", *URL_QUERY_ARGUMENT_PARSERS}, url)
    prefix = check_prefix(options.pop("prefix", DEFAULT_PREFIX))
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
    return RedisStorage(client, prefix, where)
