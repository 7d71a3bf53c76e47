"""The :class:`Storage` interface every index backend implements, and helpers they share.

A store holds three things (DESIGN §5): *records* (key → stored words, plus the cluster id
that :meth:`~neardup.IncrementalDeduper.check_and_add` assigned and an optional signature),
*postings* (column, posting key) → keys, in whatever layout suits the backend: indexed
columns in SQL, one string per bucket in Redis, bucket documents in MongoDB) and *meta* (the
index configuration, written once when the store is created and checked on every open).

A store is a key → value container: it knows nothing of LSH or of distances. The index
computes each record's posting keys from its scheme and hands them over with the record
(:attr:`RecordBatch.postings`), asks for the records under a batch's posting keys
(:meth:`Storage.candidates`) and decides itself which of them are near
(:mod:`neardup.index.simhash_index`). What a store knows of the records is their shape
(:class:`RecordShape`): how many words, how many posting keys. The interface is batch-first:
every call takes or returns a batch, so a backend can make it one transaction and one round
trip. Backends never unpickle anything: keys, clusters and meta are JSON or plain columns,
stored words little-endian 64-bit words.
"""

from __future__ import annotations

import contextlib
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import xxhash

from ..errors import (
    ConfigError,
    InputError,
    KeyExistsError,
    KeyNotFoundError,
    StorageDamagedError,
    StorageUnsupportedError,
)
from ..fingerprint.token_cache import fmix64

Key = int | str
UInt64Array = npt.NDArray[np.uint64]
IntArray = npt.NDArray[np.int64]
#: Which candidates a query batch keeps by their stored words alone: (query rows, stored
#: words) → one bool each. An index decides with it (a compact index's estimate, a band
#: index's prefilter); a store may apply it before it reads the rest of the records.
Screen = Callable[[IntArray, UInt64Array], npt.NDArray[np.bool_]]

#: The longest id every store holds, in UTF-8 bytes (an int's decimal text counts as its
#: bytes): MariaDB/MySQL's key column is VARCHAR(255), and one rule for every store means an
#: id stored in one can be moved to any other.
MAX_KEY_BYTES = 255
#: Attempts of :meth:`Storage.add_new` when other writers keep taking the batch's keys.
ADD_ATTEMPTS = 10
#: Queries per backend round trip: large enough to amortise latency, small enough that the
#: statement (an IN list per table) stays well inside every server's limits.
QUERY_BATCH = 256
_SIGN = np.uint64(1 << 63)
#: The value maps a store keeps beside its records (:meth:`Storage.put_values`): ``texts``
#: holds each record's text compressed by :func:`neardup.index.texts.pack_text`; ``rows``,
#: ``blocks`` and ``state`` hold what a records index keeps (:mod:`neardup.records.incremental`:
#: a row's values by its key, the rows under a block key, its current model and row count).
#: The store knows nothing of their meaning.
VALUE_MAPS = ("texts", "rows", "blocks", "state")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
#: Tags that keep the hashes of big ints and of strings apart from those of int64 keys.
_STR_TAG = 0x5BD1E9955BD1E995
_BIG_INT_TAG = 0x27D4EB2F165667C5
#: Bytes of a record's text digest (:func:`neardup.index.digests.text_digest`).
DIGEST_BYTES = 16


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """What a store keeps per key. ``cluster`` is None for records added without
    check-and-add; ``signature`` is None unless MinHash signatures are stored; ``digest`` is
    the hash of the record's text (:func:`neardup.index.digests.text_digest`), None for a
    record added from a fingerprint alone or kept by a store made before digests."""

    key: Key
    fingerprint: int
    cluster: Key | None = None
    signature: bytes | None = None
    digest: bytes | None = None


@dataclass(frozen=True)
class RecordShape:
    """What a store knows of the records an index keeps: their sizes, not their meaning.

    A record is ``words`` uint64 words, the first ``fingerprint_words`` of them its
    fingerprint (what :attr:`StoredRecord.fingerprint` reads back); it has ``columns`` posting
    keys (one per column of :attr:`RecordBatch.postings`), the widest of ``posting_bits``
    bits (Redis pads its bucket names to it). ``postings_of`` is the index's function from
    stored words to their posting keys, for the layouts that keep postings apart from the
    records and must find a removed record's postings again (Redis, MongoDB buckets)."""

    words: int
    fingerprint_words: int
    columns: int
    posting_bits: int
    postings_of: Callable[[UInt64Array], UInt64Array]


@dataclass(slots=True)
class RecordBatch:
    """A batch of records to add: ``words`` is (n, w) uint64 (the fingerprint's 1 or 2 words,
    then whatever else the index keeps per record); ``postings`` (n, columns) uint64, each
    record's posting keys, computed by the index (every store but the index's own in-memory
    one needs them). ``keys`` is a list of plain keys, or an integer array in memory."""

    keys: Sequence[Key]
    words: UInt64Array
    clusters: list[Key | None] | None = None
    signatures: list[bytes | None] | None = None
    digests: list[bytes | None] | None = None
    postings: UInt64Array | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def cluster(self, row: int) -> Key | None:
        return None if self.clusters is None else self.clusters[row]

    def signature(self, row: int) -> bytes | None:
        return None if self.signatures is None else self.signatures[row]

    def digest(self, row: int) -> bytes | None:
        return None if self.digests is None else self.digests[row]

    def posting_keys(self) -> UInt64Array:
        """:attr:`postings`, which a store needs to add the batch."""
        if self.postings is None or self.postings.shape[0] != len(self.keys):
            raise InputError("a batch added to a store needs one row of posting keys per record")
        return self.postings

    def subset(self, rows: list[int]) -> RecordBatch:
        """The records at ``rows``, in that order."""
        keys: Sequence[Key] = (
            self.keys[np.asarray(rows, dtype=np.int64)]
            if isinstance(self.keys, np.ndarray)
            else [self.keys[row] for row in rows]
        )
        return RecordBatch(
            keys,
            self.words[rows],
            None if self.clusters is None else [self.clusters[row] for row in rows],
            None if self.signatures is None else [self.signatures[row] for row in rows],
            None if self.digests is None else [self.digests[row] for row in rows],
            None if self.postings is None else self.postings[rows],
        )


@dataclass(slots=True)
class Candidates:
    """Records a backend found for a batch of queries through its postings: ``rows[i]`` is
    the query that record i was found for, ``words[i]`` its stored words (at least the
    fingerprint's). A record may appear more than once per query (once per column that
    shares a posting key); the index removes the repeats."""

    rows: IntArray
    keys: list[Key]
    words: UInt64Array
    #: The stored records of the keys, where the backend read them with the postings
    #: (``candidates(..., records=True)`` on a store whose :attr:`Storage.reads_records`).
    records: dict[Key, StoredRecord] = field(default_factory=dict)

    def subset(self, positions: IntArray) -> Candidates:
        """The candidates at ``positions``, in that order (the records read stay)."""
        keys = [self.keys[i] for i in positions.tolist()]
        return Candidates(self.rows[positions], keys, self.words[positions], self.records)

    def screened(self, screen: Screen | None) -> Candidates:
        """The candidates ``screen`` keeps (all of them without one)."""
        if screen is None or not self.keys:
            return self
        return self.subset(np.flatnonzero(screen(self.rows, self.words)))


@dataclass(frozen=True, slots=True)
class PostingCounts:
    """One posting column's statistics: how many distinct keys it holds, the most records
    under one key, and the mean."""

    keys: int = 0
    largest: int = 0
    mean: float = 0.0

    @classmethod
    def of_sizes(cls, sizes: Sequence[int]) -> PostingCounts:
        """The statistics of a column whose keys list ``sizes`` records each."""
        return cls(len(sizes), max(sizes, default=0), sum(sizes) / len(sizes) if sizes else 0.0)


def no_candidates(width: int) -> Candidates:
    """An empty answer of stored words ``width`` words wide."""
    return Candidates(np.empty(0, np.int64), [], np.empty((0, width), np.uint64))


class Storage(ABC):
    """A home for one index's records, postings and meta. Subclasses are chosen by URL
    (:func:`neardup.storage.open_storage`) and learn the shape of the records from the
    index through :meth:`attach`."""

    #: The URL scheme(s) this backend serves, for messages.
    name: str = "storage"
    #: Queries per :meth:`candidates` call: large enough to amortise latency, small enough
    #: that the statement stays well inside every server's limits.
    query_batch = QUERY_BATCH
    #: Whether :meth:`candidates` can read the found records in the same statement.
    reads_records = False
    #: Whether :meth:`candidates` screens before it reads the records (``records=True``
    #: then reads the records of the candidates kept only).
    screens_first = False

    def __init__(self) -> None:
        self._shape: RecordShape | None = None
        self._local_lock = threading.RLock()

    # -- life cycle ----------------------------------------------------------------------
    def attach(self, shape: RecordShape) -> None:
        """Learn the shape of the index's records. No I/O: the index attaches the shape a
        new store is made for before :meth:`write_meta`, and the stored index's once the
        meta is settled."""
        self._shape = shape

    @property
    def shape(self) -> RecordShape:
        if self._shape is None:
            raise ConfigError(f"{self.name}: the store is not attached to an index yet")
        return self._shape

    def close(self) -> None:  # noqa: B027 - most backends have nothing to release
        """Release connections; the store stays usable for a new open."""

    def reachable(self, timeout_s: float) -> str | None:
        """None if the store's server answers within about ``timeout_s`` seconds, else why
        not in one line. Safe beside a call in progress on another thread (``/healthz`` asks
        it while the store thread may be busy); stores without a server are always reachable."""
        return None

    def discard(self) -> None:
        """Close, undoing what merely opening created (an empty SQLite file), for an open
        that finds no index and must not leave one behind."""
        self.close()

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the store's writer lock: check-and-add reads, decides and writes inside it, so
        two near-duplicates submitted at once cannot both start a cluster. The default
        serialises threads of this process; server backends lock across processes."""
        with self._local_lock:
            yield

    # -- meta ----------------------------------------------------------------------------
    @abstractmethod
    def read_meta(self) -> dict[str, Any] | None:
        """The stored index configuration, or None for a new (empty) store."""

    @abstractmethod
    def write_meta(self, meta: dict[str, Any]) -> None:
        """Record the configuration of a new store, creating its tables or keys for the
        attached :class:`RecordShape`."""

    # -- records -------------------------------------------------------------------------
    @abstractmethod
    def add_many(self, batch: RecordBatch) -> None:
        """Store new records and their postings atomically: all or none. A key that is
        already stored raises :class:`~neardup.errors.KeyExistsError` and writes nothing."""

    def add_new(
        self, batch: RecordBatch, check: Callable[[list[StoredRecord | None]], None] | None = None
    ) -> list[bool]:
        """Store the records whose keys are not stored yet; which ones were added. A key
        stored before, or by another writer between the check and the write, is skipped, not
        an error: each attempt is one all-or-nothing :meth:`add_many` of the keys found free,
        and an attempt that loses a race checks again (no backend-specific upsert needed).
        ``check`` sees the stored records of the keys first and may refuse the batch."""
        keys = [plain_key(key) for key in batch.keys]
        for _attempt in range(ADD_ATTEMPTS):
            stored = self.get_many(keys)
            if check is not None:
                check(stored)
            free = [row for row, record in enumerate(stored) if record is None]
            if not free:
                return [False] * len(keys)
            try:
                self.add_many(batch.subset(free))
            except KeyExistsError:
                if all(record is None for record in self.get_many([keys[row] for row in free])):
                    raise  # no other writer took them: the batch itself is wrong
                continue
            added = set(free)
            return [row in added for row in range(len(keys))]
        raise raced_key_error(self.name, f"other writers kept taking its keys in {ADD_ATTEMPTS} attempts")

    @abstractmethod
    def remove_many(self, keys: Sequence[Key]) -> None:
        """Forget records atomically; a key not stored raises
        :class:`~neardup.errors.KeyNotFoundError` and removes nothing."""

    @abstractmethod
    def get_many(self, keys: Sequence[Key]) -> list[StoredRecord | None]:
        """The stored record of each key (None where absent), in order."""

    @abstractmethod
    def candidates(
        self, postings: UInt64Array, *, records: bool = False, screen: Screen | None = None
    ) -> Candidates:
        """The records that share at least one posting key with each query, given the
        queries' (q, columns) posting keys: a key matches the same column's keys only
        (``records``: with their stored records too, where :attr:`reads_records`), and that
        ``screen`` keeps (the runs layout screens before it reads the records' other columns)."""

    @abstractmethod
    def size(self) -> int:
        """How many records are stored."""

    @abstractmethod
    def scan(self, batch_size: int = 10_000) -> Iterator[list[StoredRecord]]:
        """Every stored record, a batch at a time (in no particular order)."""

    # -- values: named maps of key → bytes beside the records ---------------------------
    @abstractmethod
    def put_values(self, name: str, keys: Sequence[Key], values: Sequence[bytes]) -> None:
        """Store ``values[i]`` under ``keys[i]`` in the map ``name`` (a :data:`VALUE_MAPS`
        name), replacing any value there, in one transaction where the backend has them.
        The maps hold what the policy above keeps per record (a band index: its texts, for
        the exact check near the threshold); the store knows nothing of what they mean."""

    @abstractmethod
    def get_values(self, name: str, keys: Sequence[Key]) -> list[bytes | None]:
        """The value of each key in the map ``name`` (None where absent), in order."""

    @abstractmethod
    def remove_values(self, name: str, keys: Sequence[Key]) -> None:
        """Forget the values of ``keys`` in the map ``name``; absent keys are ignored."""

    def scan_values(self, name: str, batch_size: int = 10_000) -> Iterator[list[tuple[Key, bytes]]]:
        """Every ``(key, value)`` of the map ``name``, a batch at a time (in no particular
        order; a store written to meanwhile may show a key twice or not at all)."""
        raise StorageUnsupportedError(f"{self.name} stores cannot list a value map")

    def posting_counts(self) -> list[PostingCounts]:
        """Statistics of each posting column, where the backend can afford them (none
        otherwise); the index adds what the columns mean."""
        return []

    def drop(self) -> None:
        """Delete everything this store holds, meta included (tests, ``index drop``)."""
        raise StorageUnsupportedError(
            f"{self.name} stores cannot be dropped by neardup; delete them yourself"
        )


def match_postings(queries: UInt64Array, found: UInt64Array) -> tuple[IntArray, IntArray]:
    """(query rows, found rows) of every pair that shares a posting key in some column, given
    (q, C) posting keys of the queries and (c, C) of records found for the whole batch
    (sorted search per column, so a batch costs O((q + c) log q), not q x c)."""
    query_parts, found_parts = [], []
    for column in range(queries.shape[1]):
        order = np.argsort(queries[:, column], kind="stable")
        ordered = queries[order, column]
        low = np.searchsorted(ordered, found[:, column], side="left")
        high = np.searchsorted(ordered, found[:, column], side="right")
        counts = high - low
        if not counts.any():
            continue
        found_rows = np.repeat(np.arange(found.shape[0], dtype=np.int64), counts)
        starts = np.repeat(low - np.cumsum(counts) + counts, counts)
        positions = starts + np.arange(found_rows.size)
        query_parts.append(order[positions].astype(np.int64))
        found_parts.append(found_rows)
    if not query_parts:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    return np.concatenate(query_parts), np.concatenate(found_parts)


# -- the errors every backend raises, worded once ------------------------------------------------
def key_exists_error(key: Key, count: int, where: str) -> KeyExistsError:
    """A batch that names stored keys: ``key`` is the first, ``count`` how many there are."""
    return KeyExistsError(
        f"key {key!r} is already in {where} ({count} of this batch are); nothing of the batch was "
        "added: remove it first or use another key"
    )


def key_not_found_error(key: Key, count: int, where: str) -> KeyNotFoundError:
    """A removal that names keys not stored: ``key`` is the first, ``count`` how many."""
    return KeyNotFoundError(
        f"key {key!r} is not in {where} ({count} of this batch are not); nothing was removed"
    )


def raced_key_error(where: str, detail: object) -> KeyExistsError:
    """Another writer stored one of the batch's keys between the check and the write."""
    return KeyExistsError(
        f"a key of this batch was stored in {where} by another writer meanwhile; "
        f"nothing of the batch was added ({detail})"
    )


# -- encodings shared by the backends ------------------------------------------------------
def words_to_bytes(words: UInt64Array) -> list[bytes]:
    """One little-endian byte string per row (8 bytes, 16 for 128-bit fingerprints)."""
    raw = np.ascontiguousarray(words, dtype="<u8")
    width = raw.shape[1] * 8
    flat = raw.tobytes()
    return [flat[start : start + width] for start in range(0, len(flat), width)]


def bytes_to_words(values: Sequence[bytes], width: int) -> UInt64Array:
    """Inverse of :func:`words_to_bytes`; a value of the wrong size is a corrupt store."""
    return joined_words(b"".join(values), len(values), width)


def joined_words(joined: bytes, count: int, width: int) -> UInt64Array:
    """The words of ``count`` stored values of ``width`` words laid end to end in ``joined``."""
    if len(joined) != count * width * 8:
        raise StorageDamagedError(
            f"a stored fingerprint is not {width * 8} bytes long: the store is damaged "
            "or was written by another program"
        )
    return np.frombuffer(joined, dtype="<u8").astype(np.uint64).reshape(count, width)


def words_to_int(row: UInt64Array, width: int = 1) -> int:
    """The fingerprint held in the first ``width`` (1 or 2) words of a stored record's words."""
    value = int(row[0])
    if width > 1:
        value |= int(row[1]) << 64
    return value


def to_signed(values: UInt64Array) -> npt.NDArray[np.int64]:
    """uint64 block keys as the int64 that SQL BIGINT and BSON int64 columns hold (same bits)."""
    return np.ascontiguousarray(values, dtype=np.uint64).view(np.int64)


def encode_key(key: Key) -> str:
    """A key as text that keeps its type: ``i:42`` and ``s:42`` are different keys, as they
    are in the in-memory index."""
    return f"i:{key}" if isinstance(key, int) else f"s:{key}"


def decode_key(text: str | bytes) -> Key:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogatepass")
    kind, value = text[:2], text[2:]
    if kind == "i:":
        return int(value)
    if kind == "s:":
        return value
    raise StorageDamagedError(f"stored key {text!r} is not a neardup key: the store is damaged")


def key_columns(key: Key) -> tuple[str, int]:
    """(text, is_int) for SQL columns that keep a key's type."""
    return (str(key), 1) if isinstance(key, int) else (key, 0)


def key_from_columns(text: str, is_int: Any) -> Key:
    return int(text) if is_int else text


def dump_meta(meta: dict[str, Any]) -> str:
    return json.dumps(meta, sort_keys=True)


def load_meta(text: str | bytes, where: str) -> dict[str, Any]:
    try:
        meta = json.loads(text)
    except ValueError as exc:
        raise StorageDamagedError(
            f"{where}: the stored index meta is not JSON ({exc}); the store is damaged"
        ) from exc
    if not isinstance(meta, dict):
        raise StorageDamagedError(f"{where}: the stored index meta is not an object; the store is damaged")
    return meta


def plain_key(key: Any) -> Key:
    """numpy scalars as the Python int or str they hold, so dict lookups and equality behave."""
    if isinstance(key, np.integer):
        return int(key)
    return str(key) if isinstance(key, np.str_) else key


def key_hash(key: Key) -> int:
    """A stable 64-bit hash of a key: fmix64 of an int64, XXH3 of other keys' text."""
    key = plain_key(key)  # a numpy integer hashes as the equal Python int, not as its text
    if isinstance(key, int) and INT64_MIN <= key <= INT64_MAX:
        return int(fmix64(np.array([key], dtype=np.int64).view(np.uint64))[0])
    tag = _BIG_INT_TAG if isinstance(key, int) else _STR_TAG
    return xxhash.xxh3_64_intdigest(str(key).encode("utf-8", "surrogatepass")) ^ tag


def key_hashes(keys: Sequence[Key] | npt.NDArray[Any]) -> UInt64Array:
    """Vectorised :func:`key_hash` (one array operation for int64 keys)."""
    array = np.asarray(keys) if not isinstance(keys, np.ndarray) else keys
    if (
        array.dtype.kind in "iu"
        and array.dtype.itemsize <= 8
        and not (array.dtype == np.uint64 and array.size and int(array.max()) > INT64_MAX)
    ):
        return fmix64(array.astype(np.int64).view(np.uint64))
    return np.fromiter((key_hash(key) for key in keys), dtype=np.uint64, count=len(keys))


def key_order(key: Key) -> tuple[bool, Key]:
    """A sort key for ids of both types: ints first, then strings, each in their order."""
    return (isinstance(key, str), key)


def key_problem(key: Key) -> str | None:
    """Why every store refuses ``key`` (None if none): the one id rule of docs/index.md is
    valid Unicode text without NUL, at most :data:`MAX_KEY_BYTES` UTF-8 bytes (an int's
    decimal text likewise), so an id behaves the same in every backend."""
    if isinstance(key, int):
        if key.bit_length() < 800 or len(str(key)) <= MAX_KEY_BYTES:
            return None
        return f"is {len(str(key))} digits long; ids are at most {MAX_KEY_BYTES} characters"
    if "\x00" in key:
        return "contains a NUL character, which no store can keep in an id"
    if key.isascii():
        size = len(key)
    else:
        try:
            size = len(key.encode("utf-8"))
        except UnicodeEncodeError:
            return "is not valid Unicode (it holds a lone surrogate)"
    if size > MAX_KEY_BYTES:
        return f"is {size} UTF-8 bytes long; ids are at most {MAX_KEY_BYTES} (use a hash of the long id)"
    return None


def lookable(key: Key) -> bool:
    """Could any store hold ``key``? A lookup of one with NUL or a lone surrogate finds
    nothing without asking the store (PostgreSQL would refuse the statement); an over-long
    id is still looked up, as a store may hold one from before the limit."""
    if isinstance(key, int) or (key.isascii() and "\x00" not in key):
        return True
    if "\x00" in key:
        return False
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_key(key: Key) -> str:
    """A key for a one-line message: its repr, cut to 60 characters."""
    text = repr(key)
    return text if len(text) <= 60 else text[:57] + "..."


def check_key(key: Key, location: str | None = None) -> None:
    """Refuse a key no store can hold (see :func:`key_problem`), naming it and ``location``."""
    problem = key_problem(key)
    if problem is not None:
        raise InputError(f"id {shown_key(key)} {problem}", location)


def check_value_map(name: str, keys: Sequence[Key], values: Sequence[bytes] | None = None) -> None:
    """Refuse an unknown map name, or values that do not pair with the keys, before a
    backend touches anything."""
    if name not in VALUE_MAPS:
        raise InputError(f"unknown value map {name!r}; stores keep {', '.join(VALUE_MAPS)}")
    if values is not None:
        if len(values) != len(keys):
            raise InputError(f"got {len(values)} values for {len(keys)} keys; give one each")
        if set(map(type, values)) - {bytes}:
            for value in values:
                if not isinstance(value, bytes):
                    raise InputError(f"stored values are bytes; got {type(value).__name__}")


def check_keys(keys: Sequence[Key]) -> None:
    """:func:`check_key` for a batch (int arrays need no check). A batch of plain ints, or of
    ASCII texts, is checked as a whole (a value map's batch holds thousands of keys)."""
    if isinstance(keys, np.ndarray) and keys.dtype.kind in "iu":
        return
    kinds = set(map(type, keys))
    if kinds == {int}:
        if min(keys) > _SMALLEST_KEY and max(keys) < _LARGEST_KEY:
            return
    elif kinds == {str}:
        texts = cast("Sequence[str]", keys)
        joined = "".join(texts)
        if joined.isascii() and "\x00" not in joined and max(map(len, texts)) <= MAX_KEY_BYTES:
            return
    for key in keys:
        check_key(plain_key(key))


#: The ints whose decimal text is at most :data:`MAX_KEY_BYTES` long lie strictly between these.
_SMALLEST_KEY, _LARGEST_KEY = -(10 ** (MAX_KEY_BYTES - 1)), 10**MAX_KEY_BYTES
_PLAIN_KINDS = frozenset({int, str})


def plain_keys(keys: Sequence[Any]) -> list[Key]:
    """:func:`plain_key` of each key, as a list: a list of Python ints and texts is returned
    as it is, and an integer or text array converted at once."""
    if isinstance(keys, np.ndarray) and keys.dtype.kind in "iuU":
        return list(keys.tolist())
    if isinstance(keys, list) and set(map(type, keys)) <= _PLAIN_KINDS:
        return keys
    return [plain_key(key) for key in keys]


def key_kind(keys: Sequence[Key]) -> int | None:
    """1 if every key of a batch of plain keys is an int, 0 if every one is a text that any
    store can look up (:func:`lookable`: ASCII without NUL, or valid Unicode), None for a mix
    or an empty batch: the SQL stores' ``key_int`` column of the whole batch."""
    kinds = set(map(type, keys))
    if kinds == {int}:
        return 1
    if kinds == {str}:
        joined = "".join(cast("Sequence[str]", keys))
        if "\x00" not in joined and (joined.isascii() or lookable(joined)):
            return 0
    return None
