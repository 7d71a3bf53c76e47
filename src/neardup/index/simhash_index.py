"""SimhashIndex: add, query and remove fingerprints by key; every query exact and verified.

The index is a :class:`~neardup.blocks.BlockScheme` (which bits key which table) over a
:class:`~neardup.storage.base.Storage` of (key, fingerprint) records. Queries return
:class:`Match` objects within ``max_distance``, ordered by (distance, key), identical to a
brute-force scan. ``SimhashIndex(...)`` lives in memory, in the block index of
:mod:`.memory_blocks` (``save``/``load`` write and read one ``.npz`` file);
``SimhashIndex.open(url)`` lives in a store (SQLite, Redis, PostgreSQL, MariaDB/MySQL,
MongoDB, ``memory://``) whose meta records the configuration, checked on every open.

A store is a key → value container (:mod:`neardup.storage.base`) and knows nothing of the
scheme: it is handed each record's posting keys and answers which records share one with a
query. What the keys are (the block keys of a Simhash scheme, the band keys of a sketch) and
which candidates count (those within ``max_distance`` Hamming bits) are the index's, here:
:func:`search` asks the store batch by batch and keeps the candidates :func:`verified` finds
within the distance, and :func:`bucket_stats` names a store's posting columns after the
scheme's tables (:func:`~.meta.record_shape` tells a store the sizes of a scheme's records).

A query's results are :class:`Match` objects in :class:`Matches` lists (the nearest
``max_matches`` of them, flagged when cut: :func:`matches_of`); keys are ints or strs, checked
here and kept as arrays.

The index stores and finds; policy (check-and-add with cluster ids, MinHash verification)
lives above it in :mod:`neardup.dedup.documents`, which uses only the public methods here.
"""

from __future__ import annotations

import contextlib
import functools
import json
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..blocks import DEFAULT_MU, BucketStats, TableStats
from ..distance import as_words, ints_to_words, row_distances, word_ints
from ..errors import ConfigError, IndexConfigMismatchError, InputError, KeyExistsError
from ..fingerprint.config import FingerprintConfig
from ..similarity.bands import BandScheme, Scheme, scheme_from_dict
from ..storage import DEFAULT_URL, open_storage
from ..storage.base import (
    Candidates,
    Key,
    PostingCounts,
    RecordBatch,
    Storage,
    StoredRecord,
    UInt64Array,
    check_keys,
    key_hash,
    key_hashes,
    key_not_found_error,
    key_order,
    lookable,
    no_candidates,
    plain_key,
    words_to_bytes,
)
from ..storage.memory import MemoryStorage
from ..storage.sqlite import SqliteStorage
from ..storage.urls import redacted
from .config import IndexConfig
from .digests import check_same_documents, replace_records
from .files import read_digests, write_index_file
from .memory_blocks import MemoryBlockIndex
from .meta import (
    DEFAULT_MEMORY_BUDGET,
    FORMAT,
    FORMAT_VERSION,
    check_header,
    record_shape,
    resolve_scheme,
    settle_meta,
    tables_within,
)

# -- what a query returns, and how keys are checked ------------------------------------------


@dataclass(frozen=True, slots=True)
class Match:
    """One verified near-duplicate of a query."""

    key: Key
    fingerprint: int
    distance: int


class Matches(list[Match]):
    """One query's matches by (distance, key): a plain list, with ``truncated`` True when a
    ``max_matches`` cap left farther matches out (the nearest are the ones kept), so a
    caller can say that the list is not all there is."""

    __slots__ = ("truncated",)

    def __init__(self, matches: Iterable[Match] = (), truncated: bool = False) -> None:
        super().__init__(matches)
        self.truncated = truncated


#: Which candidates count, for queries that verify: (query rows, keys, Hamming distances, the
#: stored records read with them) → one bool per candidate.
Keep = Callable[
    [npt.NDArray[np.int64], list[Key], npt.NDArray[np.int64], Mapping[Key, StoredRecord]],
    npt.NDArray[np.bool_],
]

#: Which candidates of a batch of queries to keep by their stored words alone, before their
#: records are read: (the queries' stored words, the candidates' query rows, their stored
#: words) → one bool per candidate (a :data:`~neardup.storage.base.Screen` once the batch is
#: given).
Decide = Callable[[UInt64Array, npt.NDArray[np.int64], UInt64Array], npt.NDArray[np.bool_]]


def match_order(match: Match) -> tuple[int, bool, Key]:
    """(distance, key) with int keys before str keys, so mixed keys still sort."""
    return (match.distance, isinstance(match.key, str), match.key)


def check_max_matches(max_matches: int | None) -> int | None:
    """``max_matches`` checked: None (every match) or a positive integer."""
    if max_matches is None:
        return None
    if isinstance(max_matches, bool) or not isinstance(max_matches, int | np.integer) or max_matches < 1:
        raise ConfigError(
            f"max_matches must be a positive integer or None (every match); got {max_matches!r}"
        )
    return int(max_matches)


def capped(matches: list[Match], max_matches: int | None) -> Matches:
    """The first ``max_matches`` of matches already in (distance, key) order, flagged if cut."""
    if max_matches is None or len(matches) <= max_matches:
        return Matches(matches)
    return Matches(matches[:max_matches], truncated=True)


def matches_of(
    words: npt.NDArray[np.uint64],
    found: Candidates,
    width: int,
    *,
    max_matches: int | None = None,
    keep: Keep | None = None,
) -> list[Matches]:
    """One list of matches per query row of ``words``, by (distance, key), from a store's
    search (distances over the first ``width`` words, the fingerprint's). With
    ``max_matches``, only the nearest that many per row become matches, and ``keep`` (a
    verifier) is asked about candidates nearest first, only until a row has one more than
    the cap: 3,000 near-identical stored records cost a query 101 checks, not 3,000."""
    out = [Matches() for _ in range(words.shape[0])]
    if not found.keys:
        return out
    prints = found.words[:, :width]
    distances = row_distances(prints ^ words[found.rows, :width]).astype(np.int64)
    if max_matches is None and keep is None:
        values, listed = word_ints(prints), distances.tolist()
        for position, row in enumerate(found.rows.tolist()):
            out[row].append(Match(found.keys[position], values[position], listed[position]))
        for matches in out:
            if len(matches) > 1:
                matches.sort(key=match_order)
        return out
    rows = np.asarray(found.rows, dtype=np.int64)
    chosen, truncated = _nearest(rows, found, distances, len(out), max_matches, keep)
    values = word_ints(prints[chosen])
    for position, (row, candidate) in enumerate(zip(rows[chosen].tolist(), chosen.tolist(), strict=True)):
        out[row].append(Match(found.keys[candidate], values[position], int(distances[candidate])))
    for row in np.flatnonzero(truncated).tolist():
        out[row].truncated = True
    return out


def _nearest(
    rows: npt.NDArray[np.int64],
    found: Candidates,
    distances: npt.NDArray[np.int64],
    count: int,
    max_matches: int | None,
    keep: Keep | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """The candidates that become matches, grouped by row and in (distance, key) order
    within each, and which rows were cut. Candidates are checked in rounds, each asking
    ``keep`` about just as many per row as that row still needs (the cap plus one, which
    tells whether the cap cut anything)."""
    order = np.lexsort((_key_ranks(found.keys), distances, rows))
    ordered_rows = rows[order]
    starts = np.searchsorted(ordered_rows, np.arange(count), "left")
    ends = np.searchsorted(ordered_rows, np.arange(count), "right")
    limit = np.iinfo(np.int64).max if max_matches is None else max_matches + 1
    accepted = np.zeros(order.size, dtype=bool)
    have = np.zeros(count, dtype=np.int64)
    cursor = starts.astype(np.int64)
    while True:
        need = np.clip(np.minimum(limit - have, ends - cursor), 0, None)
        total = int(need.sum())
        if not total:
            break
        row_of = np.repeat(np.arange(count), need)
        positions = cursor[row_of] + np.arange(total) - np.repeat(np.cumsum(need) - need, need)
        candidates = order[positions]
        if keep is None:
            ok = np.ones(total, dtype=bool)
        else:
            keys = [found.keys[candidate] for candidate in candidates.tolist()]
            ok = np.asarray(keep(rows[candidates], keys, distances[candidates], found.records), dtype=bool)
        accepted[positions] = ok
        have += np.bincount(row_of[ok], minlength=count)
        cursor += need
    positions = np.flatnonzero(accepted)
    if max_matches is None:
        return order[positions], np.zeros(count, dtype=bool)
    kept_rows = ordered_rows[positions]
    first = np.searchsorted(kept_rows, np.arange(count), "left")
    positions = positions[np.arange(positions.size) - first[kept_rows] < max_matches]
    return order[positions], have > max_matches


def _key_ranks(keys: list[Key]) -> npt.NDArray[np.int64]:
    """Each key's place in key order (int keys before str keys), for sorting in numpy."""
    ordered = sorted(dict.fromkeys(keys), key=key_order)
    rank = {key: place for place, key in enumerate(ordered)}
    return np.fromiter((rank[key] for key in keys), dtype=np.int64, count=len(keys))


def _key_array(keys: list[Key]) -> npt.NDArray[Any]:
    if all(type(key) is int and -(1 << 63) <= key < 1 << 63 for key in keys):
        return np.asarray(keys, dtype=np.int64)
    array = np.empty(len(keys), dtype=object)
    array[:] = keys
    return array


def _check_key(key: Any) -> Key:
    if isinstance(key, bool) or not isinstance(key, int | str | np.integer | np.str_):
        raise InputError(f"key {key!r} is a {type(key).__name__}; keys must be int or str")
    return plain_key(key)


def _check_keys(keys: Sequence[Key] | npt.NDArray[Any]) -> Sequence[Key] | npt.NDArray[Any]:
    if isinstance(keys, np.ndarray) and keys.dtype.kind in "iu":
        return keys
    return [_check_key(key) for key in keys]


def _check_distinct(keys: Sequence[Key] | npt.NDArray[Any], hashes: npt.NDArray[np.uint64]) -> None:
    ordered = np.sort(hashes)  # np.unique hashes its input, 10x slower than a sort here
    if not np.any(ordered[1:] == ordered[:-1]):
        return
    seen: dict[Key, int] = {}
    for position, key in enumerate(keys):
        plain = plain_key(key)
        if plain in seen:
            raise KeyExistsError(
                f"key {plain!r} appears twice in the batch (positions {seen[plain]} and {position}); "
                "keys must be unique"
            )
        seen[plain] = position


def signature_blobs(signatures: npt.ArrayLike | None, count: int) -> list[bytes | None] | None:
    """A batch's signatures (MinHash signatures, or a band index's text sketches) as the bytes
    a store keeps, one row per record: little-endian uint64 words, as fingerprints are kept
    (:func:`~neardup.storage.base.words_to_bytes`)."""
    if signatures is None:
        return None
    array = np.asarray(signatures)
    if array.ndim != 2 or array.shape[0] != count or array.dtype.kind not in "iu":
        raise InputError(
            f"signatures must be an ({count}, num_perm) integer array, one row per record; "
            f"got shape {array.shape} of {array.dtype}"
        )
    return list(words_to_bytes(np.asarray(array, dtype=np.uint64)))


# -- the index ----------------------------------------------------------------------------

#: What ``add_many`` does with a key that is stored already (see its docstring).
EXISTING = ("fail", "skip", "replace")


class SimhashIndex:
    """Fingerprints by key, searchable within ``max_distance`` bits.

    ``SimhashIndex(...)`` is an index in this process's memory; :meth:`open` opens (or
    creates) one in a store named by URL (SQLite by default, or Redis, PostgreSQL,
    MariaDB/MySQL, MongoDB) with the same methods. ``scheme`` defaults to the pigeonhole
    scheme, or with ``expected_size`` to ``BlockScheme.auto(expected_size, ...)`` limited to
    the tables that fit ``memory_budget`` bytes per fingerprint. Keys are ints or strs;
    fingerprints are ints (single calls) or arrays in the :mod:`neardup.distance` layout
    (batch calls). ``fingerprint_config`` is recorded so a saved or stored index refuses
    fingerprints made otherwise.

    This is the low-level index of fingerprints, and the explicit choice of a Simhash block
    index. For texts in a store use :class:`neardup.Index`: its ``Index.open(url)`` creates
    the band index the command line and the service create (far better recall), where
    ``SimhashIndex.open(url)`` with no config creates a Simhash index with k = 3.
    """

    def __init__(
        self,
        bits: int = 64,
        max_distance: int = 3,
        *,
        scheme: Scheme | None = None,
        expected_size: int | None = None,
        mu: float = DEFAULT_MU,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        fingerprint_config: FingerprintConfig | None = None,
        storage: Storage | None = None,
    ) -> None:
        config = IndexConfig(bits, max_distance, scheme, expected_size, mu, memory_budget, fingerprint_config)
        self.bits = bits
        self.scheme = resolve_scheme(config)
        self.max_distance = self.scheme.max_distance
        self.mu = mu
        self.fingerprint_config = fingerprint_config
        self.url = "memory://"
        self.storage: Storage = MemoryBlockIndex(self.scheme, mu) if storage is None else storage
        self.storage.attach(record_shape(self.scheme))
        self._memory = self.storage if isinstance(self.storage, MemoryBlockIndex) else None
        #: Verifier settings recorded in a store's meta (see IndexConfig.verification).
        self.verification: dict[str, Any] | None = None

    @classmethod
    def open(
        cls,
        url: str = DEFAULT_URL,
        config: IndexConfig | None = None,
        *,
        create: bool = True,
        create_in_existing: bool = False,
        check_files: bool = True,
    ) -> SimhashIndex:
        """The index stored at ``url`` (see :mod:`neardup.storage`), created with ``config``
        (default :class:`IndexConfig()`, a Simhash block index with k = 3; the command line's
        default index is :meth:`neardup.Index.open`'s) when the store is empty. An existing index is opened
        with its stored configuration; a ``config`` that disagrees with it, or setting files
        (idf, dictionary, stopwords) whose content changed, raise
        :class:`IndexConfigMismatchError` showing both (``check_files=False`` skips the files,
        for callers that fingerprint nothing). ``create=False`` refuses a new store;
        ``create_in_existing`` lets a new index into an SQLite database with other tables."""
        storage = open_storage(url)
        if create_in_existing and isinstance(storage, SqliteStorage):
            storage.dialect.create_in_existing = True
        try:
            # What a new store is made for; an existing one is attached to its own below.
            storage.attach(record_shape(resolve_scheme(config or IndexConfig())))
            meta, fingerprint = settle_meta(storage, config, create, redacted(url), check_files)
            if isinstance(storage, MemoryStorage):
                # memory:// is always new: the index's own arrays search it, as SimhashIndex(...)
                # does, instead of the dict store's per-posting lists.
                blocks = MemoryBlockIndex(scheme_from_dict(meta["scheme"]), meta["mu"])
                blocks.write_meta(meta)
                storage = blocks
            index = cls(
                meta["bits"],
                meta["max_distance"],
                scheme=scheme_from_dict(meta["scheme"]),
                mu=meta["mu"],
                fingerprint_config=fingerprint,
                storage=storage,
            )
            index.verification = meta.get("verification")
        except BaseException:
            storage.close()
            raise
        index.url = url
        return index

    def close(self) -> None:
        """Release the store's connections (nothing to do in memory)."""
        self.storage.close()

    def __enter__(self) -> SimhashIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SimhashIndex({len(self)} fingerprints at {redacted(self.url)}; {self.scheme.describe()})"

    # -- adding --------------------------------------------------------------------------
    def add(self, key: Key, fingerprint: int) -> None:
        """Store one fingerprint; :class:`KeyExistsError` if the key is stored already."""
        self.add_many([key], self._one_array(fingerprint))

    def add_many(
        self,
        keys: Sequence[Key] | npt.NDArray[Any],
        fingerprints: npt.ArrayLike,
        *,
        signatures: npt.ArrayLike | None = None,
        existing: str = "fail",
        clusters: Sequence[Key | None] | None = None,
        digests: Sequence[bytes | None] | None = None,
    ) -> list[bool]:
        """Store a batch; which records were added. All or nothing: a stored or repeated key
        raises before any is added (one transaction in a persistent store). With
        ``existing="skip"`` a key stored already, or by another writer meanwhile, is skipped
        (False) instead, unless its ``digests`` entry (:func:`~.digests.text_digest`) says the
        text changed; ``"replace"`` stores the batch over stored records (which keep their
        cluster ids unless ``clusters`` are given). ``signatures`` ((n, num_perm) from
        :meth:`Verifier.signatures`) are stored for verified queries, ``clusters`` as
        check-and-add assigned them. Ids follow the id rule (:func:`~.base.key_problem`)."""
        if existing not in EXISTING:
            raise InputError(f"existing must be one of {', '.join(EXISTING)}; got {existing!r}")
        words = self._stored_words(self.words(fingerprints), signatures)
        checked = self._batch_keys(keys, words)
        blobs = signature_blobs(signatures, len(checked))
        for name, given in (("cluster ids", clusters), ("digests", digests)):
            if given is not None and len(given) != len(checked):
                raise InputError(f"got {len(given)} {name} for {len(checked)} records; give one each")
        listed = None if clusters is None else list(clusters)
        batch = RecordBatch(checked, words, listed, blobs, None if digests is None else list(digests))
        batch.postings = self._postings(words)
        width = self.scheme.fingerprint_words
        if existing == "skip" and len(batch):
            return self.storage.add_new(batch, lambda stored: check_same_documents(batch, stored, width))
        if existing == "replace" and len(batch):
            replace_records(self.storage, batch)
            return [True] * len(batch)
        self.storage.add_many(batch)
        return [True] * len(batch)

    def check_keys(
        self, keys: Sequence[Key] | npt.NDArray[Any], count: int, *, validate: bool = True
    ) -> Sequence[Key] | npt.NDArray[Any]:
        """Keys for ``count`` fingerprints, checked as every batch call checks them: one each,
        ints or strs (numpy scalars made plain) and, with ``validate``, within the id rule."""
        if len(keys) != count:
            raise InputError(f"got {len(keys)} keys for {count} fingerprints; give one key each")
        checked = _check_keys(keys)
        if validate:
            check_keys(checked)  # type: ignore[arg-type]
        return checked

    def _batch_keys(
        self, keys: Sequence[Key] | npt.NDArray[Any], words: npt.NDArray[np.uint64], validate: bool = True
    ) -> Any:
        """Checked, distinct keys in the form the store takes (arrays only in memory)."""
        checked = self.check_keys(keys, words.shape[0], validate=validate)
        if len(checked):
            _check_distinct(checked, key_hashes(checked))
        if self._memory is None and isinstance(checked, np.ndarray):
            return [plain_key(key) for key in checked.tolist()]
        return checked

    # -- reading -------------------------------------------------------------------------
    def query(
        self,
        fingerprint: int,
        *,
        max_distance: int | None = None,
        signature: npt.ArrayLike | None = None,
        max_matches: int | None = None,
    ) -> Matches:
        """Stored fingerprints within ``max_distance`` (default: the index's), by (distance,
        key). A band index needs the query's text ``signature`` and returns every record
        sharing a band with it (its distance is the Hamming distance, for information).
        ``max_matches`` keeps only the nearest that many (the answer's ``truncated`` says
        when it cut), so near-identical records by the thousand cannot make an answer huge.
        The index's answer alone: :class:`~neardup.dedup.documents.IncrementalDeduper`
        verifies matches by their stored signatures."""
        distance = self._distance(max_distance)
        cap = check_max_matches(max_matches)
        value = self._one_int(fingerprint)
        if self.bands is not None:
            sketch = None if signature is None else np.asarray(signature, dtype=np.uint64).reshape(1, -1)
            return self.query_many(
                self._one_array(value), max_distance=distance, signatures=sketch, max_matches=cap
            )[0]
        if self._memory is not None:
            found = self._memory.search_one(value, distance)
            matches = [Match(key, stored, near) for key, stored, near in found]
            if len(matches) > 1:
                matches.sort(key=match_order)
            return capped(matches, cap)
        return self.query_many(self._one_array(value), max_distance=distance, max_matches=cap)[0]

    def query_many(
        self,
        fingerprints: npt.ArrayLike,
        *,
        max_distance: int | None = None,
        signatures: npt.ArrayLike | None = None,
        max_matches: int | None = None,
    ) -> list[Matches]:
        """:meth:`query` for a batch, vectorised; one list per fingerprint, in order
        (``signatures``: one row per fingerprint, for a band index)."""
        distance = self._distance(max_distance)
        cap = check_max_matches(max_matches)
        words = self._stored_words(self.words(fingerprints), signatures)
        return matches_of(
            words, self._search(words, distance), self.scheme.fingerprint_words, max_matches=cap
        )

    def query_many_with_records(
        self,
        fingerprints: npt.ArrayLike,
        *,
        max_distance: int | None = None,
        signatures: npt.ArrayLike | None = None,
        max_matches: int | None = None,
        keep: Keep | None = None,
        prefilter: Decide | None = None,
    ) -> tuple[list[Matches], dict[Key, StoredRecord]]:
        """:meth:`query_many`, and the stored record (cluster id, signature) of every match:
        what verifying and placing a batch needs, read with the postings where the store
        can (SQL stores), which saves a statement per batch over :meth:`get_many`.
        ``keep`` (a verifier's verdict on candidates) decides which are matches before the
        ``max_matches`` cap, nearest first, so it is asked about few more than the cap.
        ``prefilter(queries, rows, words)`` drops candidates by their stored words before
        their records are read (then read for the rest alone)."""
        distance = self._distance(max_distance)
        cap = check_max_matches(max_matches)
        words = self._stored_words(self.words(fingerprints), signatures)
        found = self._search(words, distance, records=True, prefilter=prefilter)
        matches = matches_of(words, found, self.scheme.fingerprint_words, max_matches=cap, keep=keep)
        return matches, found.records

    def check(
        self, fingerprint: int, *, max_distance: int | None = None, signature: npt.ArrayLike | None = None
    ) -> bool:
        """Is any stored fingerprint within ``max_distance``? (Seed 002's first mode.)"""
        return bool(self.query(fingerprint, max_distance=max_distance, signature=signature, max_matches=1))

    def check_many(
        self,
        fingerprints: npt.ArrayLike,
        *,
        max_distance: int | None = None,
        signatures: npt.ArrayLike | None = None,
    ) -> list[bool]:
        found = self.query_many(fingerprints, max_distance=max_distance, signatures=signatures, max_matches=1)
        return [bool(matches) for matches in found]

    @property
    def bands(self) -> BandScheme | None:
        """The band scheme of an index searched by text sketches (None: Simhash blocks)."""
        return self.scheme if isinstance(self.scheme, BandScheme) else None

    def _stored_words(
        self, words: npt.NDArray[np.uint64], signatures: npt.ArrayLike | None
    ) -> npt.NDArray[np.uint64]:
        """What the store keeps and searches per record: the fingerprint words, followed by
        the band keys of the signature in a band index."""
        return words if self.bands is None else self.bands.compose(words, signatures)

    def _postings(self, words: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64] | None:
        """The posting keys a store lists records of ``words`` under (the in-memory block
        index keys its segments on the words themselves)."""
        return None if self._memory is not None else self.scheme.keys(words)

    def _search(
        self,
        words: npt.NDArray[np.uint64],
        distance: int,
        *,
        records: bool = False,
        prefilter: Decide | None = None,
    ) -> Candidates:
        """The stored records within ``distance`` of each row of ``words`` (``records``: with
        their stored records) that ``prefilter`` keeps."""
        if self._memory is None:
            return search(self.storage, self.scheme, words, distance, records=records, decide=prefilter)
        rows, keys, found = self._memory.search_many(words, distance)
        read: dict[Key, StoredRecord] = {}
        if records:
            stored = self._memory.get_many(list(dict.fromkeys(keys)))
            read = {record.key: record for record in stored if record is not None}
        return Candidates(rows, keys, found, read)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the store's writer lock (across processes for server stores), so a caller can
        read, decide and write as one step: what check-and-add needs to hand out one cluster
        id to near-duplicates that arrive at once."""
        with self.storage.exclusive():
            yield

    def get(self, key: Key) -> StoredRecord | None:
        """The stored record (fingerprint, cluster id, signature) of ``key``, None if absent:
        one element of :meth:`get_many` (``index.get(key).fingerprint`` is the fingerprint)."""
        return self.get_many([key])[0]

    def get_many(self, keys: Sequence[Key]) -> list[StoredRecord | None]:
        """The stored records (fingerprint, cluster id, signature) of keys; None where absent
        (and for an id no store can hold, without asking the store)."""
        checked = [_check_key(key) for key in keys]
        if all(lookable(key) for key in checked):
            return self.storage.get_many(checked)
        asked = [key for key in checked if lookable(key)]
        found = iter(self.storage.get_many(asked) if asked else [])
        return [next(found) if lookable(key) else None for key in checked]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, bool) or not isinstance(key, int | str | np.integer):
            return False
        return self.get_many([plain_key(key)])[0] is not None

    def __len__(self) -> int:
        return self.storage.size()

    def __iter__(self) -> Iterator[Key]:
        """The stored keys (in no particular order)."""
        for batch in self.storage.scan():
            for record in batch:
                yield record.key

    def items(self) -> Iterator[tuple[Key, int]]:
        for batch in self.storage.scan():
            for record in batch:
                yield record.key, record.fingerprint

    # -- removing ------------------------------------------------------------------------
    def remove(self, key: Key) -> None:
        """Forget one key; :class:`KeyNotFoundError` if it is not stored. Returns None: the
        key is removed or the call raises, so there is no count to give (:meth:`remove_many`
        returns 1 for the same call)."""
        self.remove_many([key])

    def remove_many(self, keys: Iterable[Key]) -> int:
        """Forget keys; the number removed (every distinct key given). All or nothing: a
        missing key raises :class:`KeyNotFoundError` before any is removed."""
        listed = [_check_key(key) for key in keys]
        absent = [key for key in listed if not lookable(key)]
        if absent:  # no store holds such an id
            raise key_not_found_error(absent[0], len(absent), "the index")
        if listed:
            self.storage.remove_many(listed)
        return len({(type(key), key) for key in listed})

    # -- facts ---------------------------------------------------------------------------
    def stats(self) -> BucketStats:
        """Bucket statistics (in memory: of the largest segment)."""
        if self._memory is not None:
            return self._memory.stats()
        return bucket_stats(self.scheme, self.storage.posting_counts())

    def memory_bytes(self) -> int:
        """Bytes the in-memory index's arrays hold (str keys' objects estimated); 0 for a
        persistent store, whose memory is the server's."""
        return 0 if self._memory is None else self._memory.nbytes()

    def compact(self) -> None:
        """Rebuild into one segment without removed entries (in memory; also automatic)."""
        if self._memory is not None:
            self._memory.rebuild()

    def config(self) -> dict[str, Any]:
        return {
            "bits": self.bits,
            "max_distance": self.max_distance,
            "scheme": self.scheme.to_dict(),
            "mu": self.mu,
            "fingerprint_config": None
            if self.fingerprint_config is None
            else self.fingerprint_config.to_dict(),
            "verification": self.verification,
        }

    # -- files ---------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the index to one ``.npz`` file (atomically: a temporary file, then rename)."""
        if self.bands is not None:
            raise ConfigError(
                "a band index keeps a text sketch per record, which .npz index files do not hold; "
                "keep it in a store instead (SimhashIndex.open, e.g. sqlite:///index.db)"
            )
        if self._memory is not None:
            store = self._memory
            live = np.flatnonzero(store.alive[: store.count])
            words = store.words[live]
            keys: Any = store.keys[live]
            digests = [store.digests.get(plain_key(key)) for key in keys.tolist()] if store.digests else []
        else:
            records = [record for batch in self.storage.scan() for record in batch]
            words = self.words([record.fingerprint for record in records]).reshape(len(records), -1)
            keys = _key_array([record.key for record in records])
            digests = [record.digest for record in records]
        header = {"format": FORMAT, "version": FORMAT_VERSION, "count": int(words.shape[0]), **self.config()}
        write_index_file(path, header, words, keys, digests)

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        bits: int | None = None,
        max_distance: int | None = None,
        fingerprint_config: FingerprintConfig | None = None,
    ) -> SimhashIndex:
        """Read :meth:`save` output. Settings given here must match the stored ones
        (:class:`IndexConfigMismatchError` otherwise), so fingerprints made under another
        configuration are never mixed in."""
        try:
            # neardup opens the file: given a path, numpy left it open when the archive was
            # damaged (a ResourceWarning per bad file).
            with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as data:
                header = json.loads(bytes(data["header"]).decode())
                check_header(header, path)
                words = data["words"]
                if "keys" in data:
                    keys: Sequence[Key] | npt.NDArray[Any] = data["keys"]
                else:
                    text = bytes(data["key_json"]).decode("utf-8", "surrogatepass")
                    keys = [json.loads(line) for line in text.split("\n")] if text else []
                digests = read_digests(data)
        except (OSError, ValueError, KeyError, EOFError, TypeError, zipfile.BadZipFile) as exc:
            # EOFError: an empty file; BadZipFile: a truncated or corrupt one; TypeError: a
            # plain .npy file (np.load returns an array, which is no context manager).
            raise InputError(f"cannot read {str(path)!r} as a neardup index: {exc}") from exc
        recorded = header["fingerprint_config"]
        stored = FingerprintConfig.from_dict(recorded) if recorded else None
        expected = {"bits": bits, "max_distance": max_distance}
        for name, value in expected.items():
            if value is not None and value != header[name]:
                raise IndexConfigMismatchError(
                    f"{path}: the index was built with {name}={header[name]}, not {value}; "
                    f"open it with {name}={header[name]} or build a new index"
                )
        if fingerprint_config is not None and (
            stored is None or stored.to_dict() != fingerprint_config.to_dict()
        ):
            raise IndexConfigMismatchError(
                f"{path}: the index was built with fingerprint settings "
                f"{header['fingerprint_config']}, not {fingerprint_config.to_dict()}; "
                "fingerprint with the stored settings or build a new index"
            )
        index = cls(
            header["bits"],
            header["max_distance"],
            scheme=scheme_from_dict(header["scheme"]),
            mu=header["mu"],
            fingerprint_config=stored,
        )
        if len(keys):
            # A saved index is loaded as it was, even with ids from before the id rule.
            loaded = index.words(words if header["bits"] == 128 else words.reshape(-1))
            checked = index._batch_keys(keys, loaded, validate=False)
            index.storage.add_many(
                RecordBatch(checked, loaded, digests=digests, postings=index._postings(loaded))
            )
        return index

    # -- helpers -------------------------------------------------------------------------
    def _distance(self, max_distance: int | None) -> int:
        if max_distance is None:
            return self.max_distance
        if isinstance(max_distance, bool) or not isinstance(max_distance, int | np.integer):
            raise ConfigError(f"max_distance must be an integer; got {max_distance!r}")
        if not 0 <= max_distance <= self.max_distance:
            raise ConfigError(
                f"max_distance={max_distance} is outside what this index guarantees "
                f"(0 to {self.max_distance}); build an index with max_distance={max_distance}"
            )
        return int(max_distance)

    def _one_int(self, fingerprint: int) -> int:
        if type(fingerprint) is not int:
            if isinstance(fingerprint, bool) or not isinstance(fingerprint, int | np.integer):
                raise InputError(f"a fingerprint must be an int; got {type(fingerprint).__name__}")
            fingerprint = int(fingerprint)
        if not 0 <= fingerprint < 1 << self.bits:
            raise InputError(f"fingerprint {fingerprint} does not fit in {self.bits} bits")
        return fingerprint

    def _one_array(self, fingerprint: int) -> npt.NDArray[np.uint64]:
        value = self._one_int(fingerprint)
        if self.bits == 128:
            return np.array([[value & (2**64 - 1), value >> 64]], dtype=np.uint64)
        return np.array([value], dtype=np.uint64)

    def words(self, fingerprints: npt.ArrayLike) -> npt.NDArray[np.uint64]:
        """Fingerprints (one int, a list of ints, or an array in the :mod:`neardup.distance`
        layout) as checked (n, w) uint64 words of this index's width; w is 2 for 128 bits."""
        if isinstance(fingerprints, int | np.integer):
            return as_words(self._one_array(fingerprints), self.bits)  # type: ignore[arg-type]
        array = np.asarray(fingerprints)
        if not isinstance(fingerprints, np.ndarray) and array.ndim == 1:
            # A list of ints: numpy would make [1, 2**63] float64 and a 128-bit list of small
            # values one-dimensional, so convert the values themselves.
            array = ints_to_words(list(fingerprints), self.bits)  # type: ignore[arg-type]
        elif array.dtype == object:
            array = ints_to_words(list(array.reshape(-1)), self.bits)
        elif self.bits == 128 and array.ndim == 1 and array.size == 0:
            array = array.reshape(0, 2)
        return as_words(array, self.bits)


__all__ = ["FORMAT_VERSION", "Match", "SimhashIndex", "key_hash", "resolve_scheme", "tables_within"]


# -- the index's side of a search in a store ------------------------------------------------


def search(
    storage: Storage,
    scheme: Scheme,
    words: UInt64Array,
    max_distance: int,
    *,
    records: bool = False,
    decide: Decide | None = None,
) -> Candidates:
    """Every stored record within ``max_distance`` of each query row of ``words`` (each
    (row, key) once), found through the store's postings :attr:`Storage.query_batch` queries
    at a time. ``records``: with the stored record of every key found (their signatures
    verify the matches, their cluster ids place a new record), read with the postings where
    the store can (one statement fewer per batch), else by :meth:`Storage.get_many`.
    ``decide(queries, rows, words)`` keeps the candidates of a batch of queries that an
    index decides by their whole stored words (a compact index, the band bins' prefilter),
    before distances are checked: the store screens them before it reads the rest of their
    records (:meth:`Storage.candidates`); the records of those it keeps are read with them
    where the store screens first (:attr:`Storage.screens_first`), else alone after."""
    width = scheme.fingerprint_words
    postings = scheme.keys(words)
    with_postings = records and storage.reads_records and (decide is None or storage.screens_first)
    parts, read = [], {}
    for start in range(0, words.shape[0], storage.query_batch):
        batch = words[start : start + storage.query_batch]
        screen = None if decide is None else functools.partial(decide, batch)
        found = storage.candidates(
            postings[start : start + storage.query_batch], records=with_postings, screen=screen
        )
        read.update(found.records)
        parts.append(verified(found, words, max_distance, start, width))
    if not parts:
        return no_candidates(width)
    result = Candidates(
        np.concatenate([part.rows for part in parts]),
        [key for part in parts for key in part.keys],
        np.concatenate([part.words[:, :width] for part in parts]),
        read,
    )
    if records and not with_postings:
        stored = storage.get_many(list(dict.fromkeys(result.keys)))
        result.records = {record.key: record for record in stored if record is not None}
    return result


def verified(
    found: Candidates, queries: UInt64Array, max_distance: int, offset: int = 0, width: int | None = None
) -> Candidates:
    """Keep candidates within ``max_distance`` of their query, once per (query, key);
    ``offset`` is added to the rows (queries handed to the store in slices). Distances are
    taken over the first ``width`` words (the fingerprint's; a band index stores keys after)."""
    if not found.keys:
        return Candidates(found.rows + offset, [], found.words)
    width = queries.shape[1] if width is None else width
    distance = row_distances(found.words[:, :width] ^ queries[found.rows + offset, :width])
    within = np.flatnonzero(distance <= max_distance)
    # The first position of each (row, key), in numpy: near-identical records by the
    # thousand put millions of (row, key) hits here, too many for a set of tuples.
    everything = within.size == len(found.keys)
    keys = found.keys if everything else [found.keys[position] for position in within.tolist()]
    number = {key: place for place, key in enumerate(dict.fromkeys(keys))}
    ids = np.fromiter(map(number.__getitem__, keys), dtype=np.int64, count=len(keys))
    pairs = found.rows[within].astype(np.int64) * max(len(number), 1) + ids
    firsts = np.sort(np.unique(pairs, return_index=True)[1])
    chosen = within[firsts]
    return Candidates(found.rows[chosen] + offset, [keys[i] for i in firsts.tolist()], found.words[chosen])


def bucket_stats(scheme: Scheme, counts: list[PostingCounts]) -> BucketStats:
    """A store's posting statistics as bucket statistics: column t is the scheme's table t."""
    stats = BucketStats(scheme=scheme.describe())
    for table, column in enumerate(counts):
        bits = scheme.tables[table].bit_count
        stats.tables.append(TableStats(table, bits, column.keys, column.largest, column.mean))
    return stats
