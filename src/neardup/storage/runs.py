"""The runs layout of the SQL stores that hold large indexes (PostgreSQL and SQLite): records in
one table, postings in immutable runs built in bulk, each with a filter. The statements that
differ between the two engines are their dialects' (:mod:`.sqlite`, :mod:`.postgres`).

Tables (``<prefix>`` as in :mod:`neardup.storage.sql`):

- ``<prefix>_records(id, key_text, key_int, fingerprint, cluster_text, cluster_int,
  signature)``: one row per record; no block columns.
- ``<prefix>_postings(id, keys)``: the postings of the records added since the last cut, one
  row per record: its id (the primary key, so an add appends) and its posting keys, one per
  (table, block key) (:func:`posting_keys`), in one value (SQLite: a JSON
  array; PostgreSQL: a BIGINT[]), unpacked by the engine when a cut makes them a run. A row
  per posting made the insert most of an add, and it grows with the bands. Stores made
  before (no ``packed`` in the meta row ``runs``) keep ``<prefix>_postings(k, id)``, one row
  per posting, and are served as made.
- ``<prefix>_run<n>(k, id)``: runs, each written once and never updated: a cut's rows
  sorted in numpy and written in (k, id) order (:meth:`PostingRuns._cut`), a merge's by
  ``CREATE TABLE … AS SELECT`` and ``CREATE INDEX`` (a sorted bulk build), or in steps. Their names, sizes and
  tiers are the meta row ``runs``, with the last record id in a run (``cut``), the next id
  and how many records were removed.
- ``<prefix>_filters(name, bits)``: each run's filter (:func:`build_filter`, a blocked Bloom
  filter; under 1 % false positives), read once per process and kept, since runs never change.

Why: the column layout inserts every record into 16 B-trees at random places, so at 10^6
records a move of the recent records reads, dirties and writes again most leaf pages of every
index. Building a run of the same records costs one sort and one bulk index build, a fraction
of that (docs/storage.md, "Measured speed").

Once ``<prefix>_postings`` holds the postings of :data:`RUN_RECORDS` records they become a run
of tier 0, and :data:`MERGE_RUNS` runs of one tier are merged into one of the next tier
(size-tiered, as in LSM trees): a posting is rewritten log_4(records / RUN_RECORDS) times and
about 3 runs per tier are read. On SQLite a merge runs after the add that filled its tier has
committed, in steps of at most :data:`MERGE_STEP` postings, each its own transaction (see
:meth:`PostingRuns.merge_step`): a merge of a high tier inside one add would hold the writer
lock past every other writer's timeout. A run's keys are read back in parts, never as one text
or blob, since a large run's keys exceed SQLite's 1 GB length limit. Merges leave out the
postings of removed records (a remove deletes the record row only; postings whose id has no
row are ignored by every read).

Reads: one statement per batch, each run asked only for the keys that pass its filter (a few
hundred of a batch's 16,000: each probe of a B-tree is a descent from its root, so asking every
run for every key would make those descents most of a batch's time). The recent postings are indexed by
record id only, and each process searches its own copy of them in memory
(:class:`RecentPostings`), so that an add appends instead of touching one
random index page per posting. A store with no ``stamp`` in its meta row has its recent
postings indexed by key and is asked by key.

Writers run one at a time (PostgreSQL: the advisory writer lock for the whole transaction;
SQLite: ``BEGIN IMMEDIATE``). Readers see the run list and the runs of one moment: SQLite's
WAL snapshot gives that; on PostgreSQL a reader locks ``<prefix>_postings`` in ACCESS SHARE
mode before it reads the list, and a writer that retires runs takes ACCESS EXCLUSIVE on it
before it empties it, drops the old runs and publishes the new list (the sort and index builds
run before that lock).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..errors import StorageError
from .base import (
    Candidates,
    IntArray,
    PostingCounts,
    RecordBatch,
    Screen,
    UInt64Array,
    bytes_to_words,
    key_columns,
    key_from_columns,
    match_postings,
    no_candidates,
    raced_key_error,
    to_signed,
    words_to_bytes,
)

if TYPE_CHECKING:
    from .sql import SqlStorage
    from .sql_dialects import SqlDialect

#: The layout a store of this module records in its meta row ``layout``.
LAYOUT = "runs-1"
#: Records whose postings make one run (the postings table holds at most about this many).
RUN_RECORDS = 32_768
#: Runs of one tier merged into one run of the next tier once there are this many.
MERGE_RUNS = 4
#: Postings a merge step copies at most (SQLite): one step is one transaction holding the
#: writer lock, about a second at this size, so other writers wait for a step, never a merge.
MERGE_STEP = 1 << 20
#: Merge work an add does once it has committed, in postings per posting it added (and at
#: least :data:`MERGE_STEP`): a posting is rewritten once per tier, so merges keep up.
MERGE_WORK = 16
#: Queries per candidates call (16 times the column layout's; see RunsLayout.query_batch).
QUERY_BATCH_RUNS = 4096
#: Keys read back per statement at most (one comma-separated text, 20 MB or so).
KEYS_PER_READ = 1 << 22
#: Bytes of a filter per row of the filters table at most (a row holds one blob, and SQL
#: engines refuse values past 1 GB): a run of 537 M postings has a 1 GiB filter.
FILTER_PART_BYTES = 1 << 28
#: Postings a key must list in a run for a process to keep the list (:class:`KnownLists`):
#: the long lists are few keys and most of what queries read.
KNOWN_LIST_POSTINGS = 3
#: Postings a process keeps in :class:`KnownLists` at most (all are let go past it).
KNOWN_LISTS_POSTINGS = 1 << 25
#: Bytes of stored words a process keeps (:class:`KnownWords`); records whose ids lie past
#: what fits are read each time.
KNOWN_WORDS_BYTES = 1 << 30
#: A screen that misses the words of more than 1/WHOLE_COPY_SHARE of a store's ids reads the
#: words of every record, in one pass in id order, where :class:`KnownWords` holds them all:
#: a read by id costs several times a row of the pass.
WHOLE_COPY_SHARE = 8
#: A position in a run's (key, id) order: everything up to and including it, None for nothing
#: yet, "end" for everything.
Position = list[int] | str | None

log = logging.getLogger("neardup.storage")


# -- posting keys and run filters -------------------------------------------------------------
# A posting key is one (table, block key) pair as one signed 64-bit integer, so a query batch is
# one lookup of one set of integers; a run's filter is a blocked Bloom filter of its keys, so a
# query asks a run only for the keys that may be in it.

#: Bits of a posting key that name its table (schemes with more tables are refused earlier).
TABLE_BITS = 6
#: Filter bits per posting, at least (rounded up to a power of two) and probes per key.
FILTER_BITS = 16
FILTER_PROBES = 3

_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def posting_keys(blocks: UInt64Array) -> IntArray:
    """One signed 64-bit run key per (row, column) of a batch's posting keys ``blocks``: the
    column (table) number in the top bits and the posting key mixed (splitmix64's finaliser,
    a bijection) into the rest. Two different posting keys share a run key with probability
    2^-58; such a candidate is checked like any other by the index."""
    mixed = _mixed(np.ascontiguousarray(blocks, dtype=np.uint64).view(np.int64))
    shift = np.uint64(64 - TABLE_BITS)
    tables = np.arange(blocks.shape[1], dtype=np.uint64)[None, :] << shift
    return to_signed(tables | (mixed >> np.uint64(TABLE_BITS)))


def _mixed(values: IntArray) -> UInt64Array:
    """splitmix64's finaliser over int64 values, as uint64."""
    mixed = np.ascontiguousarray(values).view(np.uint64).copy()
    with np.errstate(over="ignore"):
        mixed ^= mixed >> np.uint64(30)
        mixed *= _MIX_1
        mixed ^= mixed >> np.uint64(27)
        mixed *= _MIX_2
        mixed ^= mixed >> np.uint64(31)
    return mixed


def _filter_slots(keys: IntArray, words: int) -> tuple[UInt64Array, UInt64Array]:
    """Where ``keys`` go in a blocked Bloom filter of ``words`` 64-bit words (a power of two):
    each key's word and the mask of its :data:`FILTER_PROBES` bits in it, taken from
    different bits of the key mixed again (so the table bits count too). One word per key
    makes building one scatter and testing one gather."""
    mixed = _mixed(keys.ravel())
    slots = mixed & np.uint64(words - 1)
    masks = np.zeros(mixed.shape, dtype=np.uint64)
    for probe in range(FILTER_PROBES):
        masks |= np.uint64(1) << ((mixed >> np.uint64(40 + 6 * probe)) & np.uint64(63))
    return slots, masks


def empty_filter(count: int) -> UInt64Array:
    """An empty filter for ``count`` keys: :data:`FILTER_BITS` bits or more per key, rounded to
    a power of two words. Keys can then be added in parts (:func:`add_to_filter`), so a run's
    keys never have to be in memory at once."""
    return np.zeros(1 << max(0, int(np.ceil(np.log2(max(count, 1) * FILTER_BITS / 64)))), dtype=np.uint64)


def build_filter(keys: IntArray) -> UInt64Array:
    """A filter of ``keys`` (see :func:`empty_filter`)."""
    filter_words = empty_filter(len(keys))
    add_to_filter(filter_words, keys)
    return filter_words


def add_to_filter(filter_words: UInt64Array, keys: IntArray) -> None:
    """Add ``keys`` to a filter in place (past its capacity it only lets more keys through)."""
    slots, masks = _filter_slots(keys, filter_words.size)
    np.bitwise_or.at(filter_words, slots, masks)


def may_contain(filter_words: UInt64Array, keys: IntArray) -> npt.NDArray[np.bool_]:
    """Which of ``keys`` the filter may hold (no false negatives)."""
    slots, masks = _filter_slots(keys, filter_words.size)
    passed: npt.NDArray[np.bool_] = (filter_words[slots] & masks) == masks
    return passed


def sorted_postings(parts: Sequence[tuple[IntArray, IntArray]]) -> tuple[IntArray, IntArray]:
    """(keys, ids) of the postings ``parts`` in (key, id) order, as a run holds them. Parts
    in id order, each sorted by key, need one stable sort by key, which numpy's timsort does
    in about a pass; any other order is sorted on both."""
    keys = np.concatenate([np.asarray(part[0], np.int64) for part in parts] or [np.empty(0, np.int64)])
    ids = np.concatenate([np.asarray(part[1], np.int64) for part in parts] or [np.empty(0, np.int64)])
    order = np.argsort(keys, kind="stable")
    keys, ids = keys[order], ids[order]
    if np.any((keys[1:] == keys[:-1]) & (ids[1:] < ids[:-1])):
        order = np.lexsort((ids, keys))
        keys, ids = keys[order], ids[order]
    return keys, ids


def bigint_array(values: Any) -> str:
    """An integer sequence as one PostgreSQL array literal (one parameter, parsed by the
    server; psycopg dumps a list element by element in Python)."""
    return "{" + ",".join(map(str, values)) + "}"


# -- one process's copy of the recent postings ------------------------------------------------

#: In-memory pieces merged into one once there are this many (a piece per batch).
MAX_PIECES = 8


class SortedPostings:
    """(key, id) postings in pieces sorted by key, searched by numpy: a piece per addition,
    merged into one past :data:`MAX_PIECES` (so one stable sort merges them)."""

    def __init__(self) -> None:
        self.pieces: list[tuple[IntArray, IntArray]] = []
        self.size = 0

    def add(self, keys: IntArray, ids: IntArray) -> None:
        if keys.size:
            order = np.argsort(keys, kind="stable")
            self.pieces.append((np.asarray(keys, np.int64)[order], np.asarray(ids, np.int64)[order]))
            self.size += keys.size
        if len(self.pieces) > MAX_PIECES:
            merged_keys = np.concatenate([piece[0] for piece in self.pieces])
            merged_ids = np.concatenate([piece[1] for piece in self.pieces])
            order = np.argsort(merged_keys, kind="stable")
            self.pieces = [(merged_keys[order], merged_ids[order])]

    def find(self, keys: IntArray) -> tuple[npt.NDArray[np.bool_], IntArray, IntArray]:
        """Which of the sorted, distinct ``keys`` have postings here, and (key, id) of those
        postings."""
        listed = np.zeros(keys.size, dtype=np.bool_)
        found_keys, found_ids = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
        for stored, ids in self.pieces:
            # Few keys are found: the right ends are searched for those alone.
            low = np.searchsorted(stored, keys, side="left")
            hit = np.flatnonzero(stored[np.minimum(low, stored.size - 1)] == keys)
            if not hit.size:
                continue
            listed[hit] = True
            sizes = np.searchsorted(stored, keys[hit], side="right") - low[hit]
            starts = np.repeat(low[hit] - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))
            found_keys.append(np.repeat(keys[hit], sizes))
            found_ids.append(ids[starts])
        return listed, np.concatenate(found_keys), np.concatenate(found_ids)


class RecentPostings:
    """One process's copy of the recent postings of one state of a store
    (:class:`SortedPostings`).

    The recent postings (``<prefix>_postings``: those of the records added since the last cut)
    change with every add. Kept in a B-tree by posting key they would cost each commit one random
    leaf page per posting, most of a small add's time (docs/service.md). So the table is indexed
    by record id only (appends), and each process holds the
    postings in memory, searched by numpy: it adds its own after they commit, reads another
    process's by id range (``id >= next_id seen``), and reads them all again after a cut (the
    meta row's ``stamp`` is new at every cut) or when the store's ``next_id`` went back (a
    rollback in another process).
    """

    def __init__(self) -> None:
        self.stamp: str | None = None
        self.next_id = 0
        self._held = SortedPostings()

    def usable_for(self, state: dict[str, Any]) -> str:
        """How these postings relate to a store's ``state``: ``"current"`` (the same),
        ``"behind"`` (the same cut, more records since: read ids from :attr:`next_id`) or
        ``"stale"`` (another cut, a store without stamps, or ids gone back: read them all)."""
        stamp, next_id = state.get("stamp"), int(state["next_id"])
        if stamp is None or stamp != self.stamp or next_id < self.next_id:
            return "stale"
        return "current" if next_id == self.next_id else "behind"

    def reset(self, state: dict[str, Any], keys: IntArray, ids: IntArray) -> None:
        """Exactly ``keys``/``ids``: the recent postings of ``state``."""
        self.stamp, self.next_id, self._held = state.get("stamp"), int(state["next_id"]), SortedPostings()
        self._held.add(keys, ids)

    def extend(self, keys: IntArray, ids: IntArray, next_id: int) -> None:
        """The postings of the records from :attr:`next_id` up to ``next_id`` (excluded)."""
        self._held.add(keys, ids)
        self.next_id = next_id

    def keys(self) -> list[IntArray]:
        """Every recent posting's key, in parts."""
        return [piece[0] for piece in self._held.pieces]

    def postings(self) -> list[tuple[IntArray, IntArray]]:
        """Every recent posting, as (keys, ids) parts each sorted by key."""
        return list(self._held.pieces)

    def find(self, keys: IntArray) -> tuple[IntArray, IntArray]:
        """(key, id) of every recent posting whose key is one of the sorted, distinct ``keys``."""
        _, found_keys, found_ids = self._held.find(keys)
        return found_keys, found_ids


class KnownLists:
    """One process's copy of the long posting lists it has read from runs, by run
    (:class:`SortedPostings`).

    Queries of a large collection of related texts meet the same long lists again and
    again (a common passage makes the same band keys), and reading a list back from a run
    costs a row per posting. Runs never change and their names are never reused, so a list
    kept under its run's name stays true until the run is merged away (:meth:`keep_runs`).
    Only lists of at least :data:`KNOWN_LIST_POSTINGS` are kept: the rest cost a lookup
    either way."""

    def __init__(self, limit: int = KNOWN_LISTS_POSTINGS) -> None:
        self.limit = limit
        self.postings = 0
        self._lists: dict[str, SortedPostings] = {}

    def keep_runs(self, tables: Sequence[str]) -> None:
        """Let go of the lists of runs not in ``tables`` (merged away)."""
        for table in set(self._lists) - set(tables):
            self.postings -= self._lists.pop(table).size

    def split(self, table: str, keys: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """(the sorted, distinct ``keys`` not known, then the keys and ids of the known lists'
        postings) in run ``table``."""
        lists = self._lists.get(table)
        if lists is None:
            return keys, np.empty(0, np.int64), np.empty(0, np.int64)
        known, found_keys, found_ids = lists.find(keys)
        return keys[~known], found_keys, found_ids

    def learn(self, table: str, keys: IntArray, ids: IntArray) -> None:
        """Keep the long lists among the postings ``keys``/``ids`` read from run ``table``."""
        if not keys.size:
            return
        order = np.argsort(keys, kind="stable")
        keys, ids = keys[order], ids[order]
        starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        sizes = np.diff(np.append(starts, keys.size))
        long = np.repeat(sizes >= KNOWN_LIST_POSTINGS, sizes)
        if not long.any():
            return
        if self.postings + int(long.sum()) > self.limit:
            self._lists, self.postings = {}, 0
        self._lists.setdefault(table, SortedPostings()).add(keys[long], ids[long])
        self.postings += int(long.sum())


class KnownWords:
    """One process's copy of the stored words of the records it has screened
    (:meth:`RunsLayout.candidates`) or added since (once the add commits), by record id: an
    array indexed by id.

    A query batch of a large store finds many candidates a query, mostly the same
    records again (those that share common passages), and a screen needs only their words.
    A record's words never change and its id is never handed out again (:meth:`PostingRuns.
    reserve_ids`), so the copy stays true for as long as the store is the same one: it is let
    go when the meta row's ``made`` differs (a store dropped and made again hands out ids from
    1 again; stores without ``made`` are not copied) or ``next_id`` went back (a rollback).
    A removed record's words stay here; the read of the kept candidates' rows leaves it out.
    """

    def __init__(self, width: int, limit: int = KNOWN_WORDS_BYTES) -> None:
        self.width = width
        #: Ids below this fit in ``limit`` bytes (words and a flag an id).
        self.capacity = limit // (8 * width + 1)
        self.made: str | None = None
        self.next_id = 0
        self._known = np.zeros(0, dtype=np.bool_)
        self._words = np.zeros((0, width), dtype=np.uint64)

    def follow(self, state: dict[str, Any]) -> None:
        """Keep the copy only if ``state`` is the same store, no ids gone back."""
        made, next_id = state.get("made"), int(state["next_id"])
        if made is None or made != self.made or next_id < self.next_id:
            self.made = made
            self._known = np.zeros(0, dtype=np.bool_)
            self._words = np.zeros((0, self.width), dtype=np.uint64)
        self.next_id = next_id

    def holds(self, ids: IntArray) -> npt.NDArray[np.bool_]:
        """Which of ``ids`` this copy holds."""
        if not ids.size or int(ids.max()) < self._known.size:
            return self._known[ids]
        inside = ids < self._known.size
        held = np.zeros(ids.size, dtype=np.bool_)
        held[inside] = self._known[ids[inside]]
        return held

    def holds_every(self, stop: int) -> bool:
        """Whether this copy would hold every id below ``stop``."""
        return self.made is not None and stop <= self.capacity

    def words_of(self, ids: IntArray) -> UInt64Array:
        """The words of ``ids``, which this copy holds (:meth:`holds`)."""
        return self._words[ids]

    def learn(self, ids: IntArray, words: UInt64Array) -> None:
        """Keep the words of ``ids`` (those below :attr:`capacity`) of a store that has
        ``made`` (:meth:`follow`)."""
        if self.made is None:
            return
        fits = ids < self.capacity
        ids, words = ids[fits], words[fits]
        if not ids.size:
            return
        needed = int(ids.max()) + 1
        if needed > self._known.size:
            size = min(self.capacity, max(needed, 2 * self._known.size))
            known = np.zeros(size, dtype=np.bool_)
            known[: self._known.size] = self._known
            grown = np.zeros((size, self.width), dtype=np.uint64)
            grown[: self._words.shape[0]] = self._words
            self._known, self._words = known, grown
        self._known[ids] = True
        self._words[ids] = words


class PostingRuns:
    """The SQL of the runs layout for one table prefix, in ``dialect``; the caller owns the
    transaction. Merges run after the add, in steps, where the dialect says so (SQLite), and
    inside the add otherwise (PostgreSQL, whose merges sort and index in bulk before they take
    the readers' lock)."""

    def __init__(self, dialect: SqlDialect, prefix: str, records_table: str, meta_table: str) -> None:
        self.dialect = dialect
        self.prefix = prefix
        self.records_table = records_table
        self.meta_table = meta_table
        self.postings_table = f"{prefix}_postings"
        self.filters_table = f"{prefix}_filters"
        self.run_records = RUN_RECORDS
        #: Filters read so far, by run table (runs never change, so neither do they).
        self.filters: dict[str, UInt64Array] = {}
        #: Filters of merged runs being copied, by run table: (position read, words).
        self.building: dict[str, tuple[Position, UInt64Array]] = {}
        self.recent = RecentPostings()
        self.known = KnownLists()
        #: The batch being added in the open transaction: (stamp, first id, its posting keys
        #: and their ids).
        self._adding: tuple[str | None, int, IntArray, IntArray] | None = None
        #: Runs a function once the current transaction commits (set by the store).
        self.on_commit: Callable[[Callable[[], None]], None] = lambda function: None

    # -- creation and state ---------------------------------------------------------------
    def create(self, cursor: Any, record_columns: str) -> None:
        p = self.dialect.placeholder
        cursor.execute(f"CREATE TABLE {self.records_table} ({record_columns}, UNIQUE (key_text, key_int))")
        self.dialect.create_packed_postings(cursor, self.postings_table)
        blob = self.dialect.blob_type
        cursor.execute(
            f"CREATE TABLE {self.filters_table} (name VARCHAR(80) PRIMARY KEY, bits {blob} NOT NULL)"
        )
        state = {
            "runs": [],
            "cut": 0,
            "next_id": 1,
            "removed": 0,
            "stamp": _stamp(),
            "made": _stamp(),
            "packed": True,
        }
        cursor.execute(
            f"INSERT INTO {self.meta_table} (name, value) VALUES ('layout', {p}), ('runs', {p})",
            (LAYOUT, json.dumps(state)),
        )

    def state(self, cursor: Any) -> dict[str, Any]:
        """The meta row ``runs``: ``runs`` ([{"table", "postings", "tier"}], oldest first),
        ``cut`` (the last record id whose postings are in a run), ``next_id``, ``removed``
        (records removed so far), ``stamp`` (new at every cut, :class:`RecentPostings`;
        absent in stores whose recent postings are indexed by key), ``made`` (one per store,
        so ids from 1 again are another store's: :class:`KnownWords`; stores made before get
        it at their next add), ``packed`` (true: the recent postings are one row per record,
        see :meth:`add`; absent in stores made before, one row per posting), and where
        merges run in steps ``merges`` ([{"table", "sources", "tier", "after", "postings",
        "capacity"}]: merged runs being copied, not read yet) and ``retired`` ([{"table",
        "postings"}]: runs merged away, to drop)."""
        cursor.execute(f"SELECT value FROM {self.meta_table} WHERE name = 'runs'")
        state: dict[str, Any] = json.loads(cursor.fetchone()[0])
        return state

    def _save(self, cursor: Any, state: dict[str, Any]) -> None:
        cursor.execute(
            f"UPDATE {self.meta_table} SET value = {self.dialect.placeholder} WHERE name = 'runs'",
            (json.dumps(state),),
        )

    def tables(self, state: dict[str, Any]) -> list[str]:
        """Every table that holds postings, the recent one first."""
        return [self.postings_table, *(run["table"] for run in state["runs"])]

    # -- writes ---------------------------------------------------------------------------
    def reserve_ids(self, cursor: Any, count: int) -> tuple[list[int], dict[str, Any]]:
        """Ids for new records, from the meta row (so they are never handed out twice: a
        removed record's postings must not come back as another's), and the state as saved
        (for :meth:`cut_if_full` in the same transaction)."""
        state = self.state(cursor)
        first = int(state["next_id"])
        if first <= int(state["cut"]) + 1 and self.recent.usable_for(state) == "stale":
            empty = np.empty(0, np.int64)
            self.recent.reset(state, empty, empty)  # no recent postings: nothing to read
        state["next_id"] = first + count
        state.setdefault("made", _stamp())
        self._save(cursor, state)
        return list(range(first, first + count)), state

    def add(self, cursor: Any, keys: IntArray, ids: list[int], state: dict[str, Any]) -> None:
        """The postings of new records: ``keys`` is (records, tables), ``ids`` their ids (the
        last ones reserved) and ``state`` what :meth:`reserve_ids` returned. Once the
        transaction commits, this process's copy of the recent postings takes them, if it
        held every earlier one."""
        flat = keys.ravel()
        repeated = np.repeat(np.asarray(ids, dtype=np.int64), keys.shape[1])
        if state.get("packed"):  # one row per record: a row per posting cost most of an add
            self.dialect.insert_packed(cursor, self.postings_table, keys, np.asarray(ids, dtype=np.int64))
        else:
            self.dialect.insert_postings(cursor, self.postings_table, flat, repeated)
        stamp, first, after = state.get("stamp"), min(ids), int(state["next_id"])
        recent = self.recent
        self._adding = (stamp, first, flat, repeated)

        def committed() -> None:
            if stamp is not None and recent.stamp == stamp and recent.next_id == first:
                recent.extend(flat, repeated, after)

        self.on_commit(committed)

    def note_removed(self, cursor: Any, count: int) -> None:
        """Count removed records, whose postings later merges must leave out."""
        state = self.state(cursor)
        state["removed"] += count
        self._save(cursor, state)

    def cut_if_full(self, cursor: Any, state: dict[str, Any], last_id: int) -> None:
        """Turn the recent postings into a run once :attr:`run_records` records were added
        since the last cut, then merge (see the module docstring). ``state``: the meta row
        as this transaction last saved it."""
        if last_id - int(state["cut"]) < self.run_records:
            return
        self.dialect.prepare_builds(cursor)
        runs: list[dict[str, Any]] = list(state["runs"])
        retired: list[str] = []
        runs.append(self._cut(cursor, state))
        self._adding = None
        while (
            not self.dialect.merge_in_steps
            and len(runs) >= MERGE_RUNS
            and len({run["tier"] for run in runs[-MERGE_RUNS:]}) == 1
        ):
            merged, runs = runs[-MERGE_RUNS:], runs[:-MERGE_RUNS]
            tables = [run["table"] for run in merged]
            tier = merged[0]["tier"] + 1
            runs.append(self._build(cursor, tables, tier=tier, live_only=bool(state["removed"]), state=state))
            retired += tables
        self.dialect.empty_postings(cursor, self.postings_table)
        for table in retired:
            cursor.execute(f"DROP TABLE {table}")
            self.dialect.delete_filter(cursor, self.filters_table, table)
        state.update(runs=runs, cut=last_id, stamp=_stamp())
        self._save(cursor, state)
        empty = np.empty(0, np.int64)
        self.on_commit(lambda: self.recent.reset(state, empty, empty))

    def _build(
        self, cursor: Any, sources: list[str], tier: int, live_only: bool, state: dict[str, Any]
    ) -> dict[str, Any]:
        """One new run of ``tier`` from the postings of ``sources`` (``live_only``: without
        the postings of removed records), with its filter, its keys read back from the run."""
        table = self._new_run_name()
        union = " UNION ALL ".join(self._select(source, state) for source in sources)
        live = self._live_condition() if live_only else ""
        created = self.dialect.create_run(cursor, table, f"SELECT k, id FROM ({union}) AS p{live}")
        bits, postings = self._run_filter(cursor, table, created)
        self._save_filter(cursor, table, bits)
        self.filters[table] = bits
        return {"table": table, "postings": postings, "tier": tier}

    def _cut(self, cursor: Any, state: dict[str, Any]) -> dict[str, Any]:
        """A run of tier 0 of the recent postings, sorted by numpy and written in (k, id)
        order: from this process's copy where it holds them all, else read once from the
        postings table. The same run the engine's sort would build (``INSERT … SELECT …
        ORDER BY``, or ``CREATE INDEX``), which sorted every posting row by row and made the
        cut the part of an add that grows with the bands."""
        parts = self._recent_postings()
        if parts is None:
            parts = [self._postings_between(cursor, 0, int(state["next_id"]), state)]
        keys, ids = sorted_postings(parts)
        table = self._new_run_name()
        self.dialect.create_run(cursor, table, (keys, ids))
        bits = build_filter(keys)
        self._save_filter(cursor, table, bits)
        self.filters[table] = bits
        return {"table": table, "postings": int(keys.size), "tier": 0}

    def _recent_postings(self) -> list[tuple[IntArray, IntArray]] | None:
        """Every recent posting, the batch being added included, where this process's copy
        holds all the others (it held every posting before the batch); else None."""
        if self._adding is None:
            return None
        stamp, first, keys, ids = self._adding
        if stamp is None or self.recent.stamp != stamp or self.recent.next_id != first:
            return None
        return [*self.recent.postings(), (keys, ids)]

    def _select(self, table: str, state: dict[str, Any]) -> str:
        """(k, id) of every posting of ``table``: a run, or the recent postings (unpacked by
        the engine where they are packed)."""
        if table == self.postings_table and state.get("packed"):
            return self.dialect.unpacked(table)
        return f"SELECT k, id FROM {table}"

    def _new_run_name(self) -> str:
        # A random name is never reused (not even after a rollback), so a filter cached
        # under a run's name always belongs to that run.
        return f"{self.prefix}_run_{secrets.token_hex(8)}"

    def _live_condition(self) -> str:
        """Keeps the postings ``p`` of records that still have a row."""
        return f" WHERE EXISTS (SELECT 1 FROM {self.records_table} r WHERE r.id = p.id)"

    def _run_filter(self, cursor: Any, table: str, rows: int) -> tuple[UInt64Array, int]:
        """A new run's filter and posting count (``rows``: the count if known, else -1), its
        keys read in parts: in bulk where the dialect can, else in (key, id) ranges, each a
        comma-separated text parsed by numpy (faster than a row at a time through Python)."""
        if rows < 0:
            cursor.execute(f"SELECT COUNT(*) FROM {table}")
            rows = int(cursor.fetchone()[0])
        bits, count = empty_filter(rows), 0
        parts = self.dialect.run_keys(cursor, table, rows)
        for keys in self._keys_between(cursor, table, None, "end") if parts is None else parts:
            add_to_filter(bits, keys)
            count += keys.size
        return bits, count

    def _postings_between(
        self, cursor: Any, first: int, stop: int, state: dict[str, Any] | None = None
    ) -> tuple[IntArray, IntArray]:
        """(keys, ids) of the recent postings of records ``first`` ≤ id < ``stop``."""
        if (self.state(cursor) if state is None else state).get("packed"):
            return self.dialect.packed_between(cursor, self.postings_table, first, stop)
        return self.dialect.postings_between(cursor, self.postings_table, first, stop)

    def _save_filter(self, cursor: Any, table: str, bits: UInt64Array) -> None:
        """A run's filter, in rows of at most :data:`FILTER_PART_BYTES` (and half the engine's
        length limit): ``table``, then ``table#1``, ``table#2``, …"""
        data = memoryview(np.ascontiguousarray(bits).view(np.uint8).data)
        size = max(8, min(FILTER_PART_BYTES, self.dialect.max_length(cursor) // 2) // 8 * 8)
        p = self.dialect.placeholder
        cursor.executemany(
            f"INSERT INTO {self.filters_table} (name, bits) VALUES ({p}, {p})",
            [
                (f"{table}#{part}" if part else table, data[start : start + size])
                for part, start in enumerate(range(0, max(len(data), 1), size))
            ],
        )

    # -- merges in steps (SQLite) ---------------------------------------------------------
    def merge_work(self, state: dict[str, Any]) -> bool:
        """Whether ``state`` has merge work to do (runs to merge, merges to finish, runs to drop)."""
        return bool(state.get("merges") or state.get("retired") or self._ready_sources(state))

    def merge_step(self, cursor: Any, limit: int) -> tuple[int, str | None]:
        """One bounded piece of merge work, in the caller's write transaction (writer lock
        held): drop one retired run, or publish a merged run whose copy and filter are
        complete, or copy up to ``limit`` postings into the merged run of the lowest tier
        (starting a merge if a tier is full). Returns the work done (postings, about; 0: none
        left) and, when this process's filter of that run is behind its copy, the run's name:
        read it first with :meth:`catch_up`, outside the lock.

        Each step commits alone and records its progress in the meta row, so a process
        killed anywhere leaves the old runs serving reads and the merge to whoever adds next.
        A merged run is copied in (key, id) order, range after range, so the postings copied
        never change afterwards and each process reads each one once into its filter."""
        state = self.state(cursor)
        merges: list[dict[str, Any]] = state.setdefault("merges", [])
        for table in set(self.building) - {merge["table"] for merge in merges}:
            del self.building[table]  # published or abandoned meanwhile
        retired: list[dict[str, Any]] = state.get("retired", [])
        if retired:
            run = retired.pop(0)
            cursor.execute(f"DROP TABLE IF EXISTS {run['table']}")
            self.dialect.delete_filter(cursor, self.filters_table, run["table"])
            self._save(cursor, state)
            return max(1, int(run["postings"]) // 16), None
        merge = self._next_merge(cursor, state)
        if merge is None:
            return 0, None
        table = merge["table"]
        if merge["after"] is None and table not in self.building:
            self.building[table] = (None, empty_filter(int(merge["capacity"])))
        position, bits = self.building.get(table, (None, None))
        if bits is None or position != merge["after"]:
            return 0, table
        if merge["after"] == "end":
            self._publish(cursor, state, merge, bits)
            return 1, None
        return self._copy_step(cursor, state, merge, limit), None

    def catch_up(self, cursor: Any, table: str) -> int:
        """Read into this process's filter of the merged run ``table`` the keys copied since
        it last read (another process copied them, or this one started after a crash); in a
        read transaction, since copied postings never change. Returns the keys read (at
        least 1)."""
        state = self.state(cursor)
        merge = next((merge for merge in state.get("merges", []) if merge["table"] == table), None)
        if merge is None:
            self.building.pop(table, None)
            return 1
        position, bits = self.building.get(table, (None, empty_filter(int(merge["capacity"]))))
        read = 0
        for keys in self._keys_between(cursor, table, position, merge["after"]):
            add_to_filter(bits, keys)
            read += keys.size
        self.building[table] = (merge["after"], bits)
        return max(1, read)

    def _ready_sources(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        """The oldest :data:`MERGE_RUNS` runs of the lowest tier that has that many runs
        outside merges, or none."""
        busy = {source for merge in state.get("merges", []) for source in merge["sources"]}
        tiers: dict[int, list[dict[str, Any]]] = {}
        for run in state["runs"]:
            if run["table"] not in busy:
                tiers.setdefault(int(run["tier"]), []).append(run)
        for tier in sorted(tiers):
            if len(tiers[tier]) >= MERGE_RUNS:
                return tiers[tier][:MERGE_RUNS]
        return []

    def _next_merge(self, cursor: Any, state: dict[str, Any]) -> dict[str, Any] | None:
        """The merge to work on: the pending one of the lowest tier, unless a lower tier is
        full, whose merge starts here (an empty run table; the step saves the state)."""
        merges: list[dict[str, Any]] = state["merges"]
        pending = min(merges, key=lambda merge: int(merge["tier"]), default=None)
        sources = self._ready_sources(state)
        if sources and (pending is None or int(sources[0]["tier"]) + 1 < int(pending["tier"])):
            table = self._new_run_name()
            self.dialect.create_run_table(cursor, table)
            pending = {
                "table": table,
                "sources": [run["table"] for run in sources],
                "tier": int(sources[0]["tier"]) + 1,
                "after": None,
                "postings": 0,
                "capacity": sum(int(run["postings"]) for run in sources),
            }
            merges.append(pending)
        return pending

    def _copy_step(self, cursor: Any, state: dict[str, Any], merge: dict[str, Any], limit: int) -> int:
        """Copy the next range of about ``limit`` postings (in (key, id) order) of the merge's
        sources into its run; this process's filter takes their keys once the step commits."""
        table, sources, after = merge["table"], merge["sources"], merge["after"]
        share = max(1, limit // len(sources))
        # Each source has at most `share` postings up to the smallest of their share-th
        # postings, and the one it came from exactly that many: the step is bounded and moves.
        bounds = [bound for source in sources if (bound := self._nth_after(cursor, source, after, share))]
        until: Position = min(bounds) if bounds else "end"
        condition, parameters = _between(after, until)
        union = " UNION ALL ".join(f"SELECT k, id FROM {source} WHERE {condition}" for source in sources)
        live = self._live_condition() if state["removed"] else ""
        cursor.execute(
            f"INSERT INTO {table} (k, id) SELECT k, id FROM ({union}) AS p{live} ORDER BY k, id",
            parameters * len(sources),
        )
        copied = max(0, int(cursor.rowcount))
        keys = [part for part in self._keys_between(cursor, table, after, until)]
        merge["after"], merge["postings"] = until, int(merge["postings"]) + copied
        self._save(cursor, state)

        def committed() -> None:
            position, bits = self.building.get(table, (None, None))
            if bits is not None and position == after:
                for part in keys:
                    add_to_filter(bits, part)
                self.building[table] = (until, bits)

        self.on_commit(committed)
        return max(1, copied)

    def _publish(self, cursor: Any, state: dict[str, Any], merge: dict[str, Any], bits: UInt64Array) -> None:
        """Swap a merged run, copied whole and with its filter, for its sources (which retire)."""
        runs: list[dict[str, Any]] = state["runs"]
        tables = [run["table"] for run in runs]
        table, sources = merge["table"], merge["sources"]
        state["merges"].remove(merge)
        retired = state.setdefault("retired", [])
        if not all(source in tables for source in sources):  # changed by another program: redo
            retired.append({"table": table, "postings": merge["postings"]})
            self._save(cursor, state)
            return
        self._save_filter(cursor, table, bits)
        first = tables.index(sources[0])
        state["runs"] = [run for run in runs if run["table"] not in sources]
        state["runs"].insert(
            first, {"table": table, "postings": int(merge["postings"]), "tier": merge["tier"]}
        )
        retired.extend(
            {"table": run["table"], "postings": run["postings"]} for run in runs if run["table"] in sources
        )
        self._save(cursor, state)

        def committed() -> None:
            self.filters[table] = bits
            self.building.pop(table, None)

        self.on_commit(committed)

    def _nth_after(self, cursor: Any, table: str, after: Position, count: int) -> list[int] | None:
        """The ``count``-th posting (key, id) of ``table`` after position ``after``, or None."""
        condition, parameters = _between(after, "end")
        cursor.execute(
            f"SELECT k, id FROM {table} WHERE {condition} ORDER BY k, id LIMIT 1 OFFSET {int(count) - 1}",
            parameters,
        )
        row = cursor.fetchone()
        return None if row is None else [int(row[0]), int(row[1])]

    def _keys_between(self, cursor: Any, table: str, after: Position, until: Position) -> Iterator[IntArray]:
        """The keys of the postings of ``table`` after ``after`` up to ``until`` (in (key, id)
        order), in parts of at most :data:`KEYS_PER_READ` and well under SQLite's length limit
        (a key is at most 20 characters and a comma)."""
        if until is None or after == until:
            return
        per_read = max(1, min(KEYS_PER_READ, (self.dialect.max_length(cursor) - 64) // 21))
        while True:
            bound = self._nth_after(cursor, table, after, per_read)
            last = bound is None or (isinstance(until, list) and bound >= until)
            part_until = until if last else bound
            condition, parameters = _between(after, part_until)
            cursor.execute(f"SELECT group_concat(k) FROM {table} WHERE {condition}", parameters)
            text = cursor.fetchone()[0]
            yield np.fromstring(text, dtype=np.int64, sep=",") if text else np.empty(0, np.int64)
            if last:
                return
            after = part_until

    # -- reads ----------------------------------------------------------------------------
    def open_for_reading(self, cursor: Any) -> tuple[list[str], dict[str, Any]]:
        """The posting tables and the state, with the filters of the runs read; run changes
        are locked out for the rest of the transaction."""
        self.dialect.lock_for_reading(cursor, self.postings_table)
        state = self.state(cursor)
        tables = self.tables(state)
        missing = [table for table in tables[1:] if table not in self.filters]
        if missing:
            parts: dict[str, list[tuple[int, bytes]]] = {}
            for name, bits in self.dialect.read_filters(cursor, self.filters_table, missing):
                table, _, part = name.partition("#")  # see _save_filter
                parts.setdefault(table, []).append((int(part or 0), bits))
            for table, pieces in parts.items():
                pieces.sort(key=lambda piece: piece[0])
                joined = pieces[0][1] if len(pieces) == 1 else b"".join(piece[1] for piece in pieces)
                self.filters[table] = np.frombuffer(joined, dtype=np.uint64)
        for table in set(self.filters) - set(tables):
            del self.filters[table]  # merged away
        self.known.keep_runs(tables)
        return tables, state

    def find(self, cursor: Any, keys: IntArray) -> tuple[IntArray, IntArray, dict[str, Any]]:
        """(key, id) of every posting under one of ``keys``, removed records' included (a
        remove deletes the record row only), and the state read."""
        tables, state = self.open_for_reading(cursor)
        unique = np.sort(keys, axis=None)
        unique = unique[np.concatenate(([True], unique[1:] != unique[:-1]))] if unique.size else unique
        parts, parameters = [], []
        found_keys, found_ids = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
        if self._recent_in_memory(cursor, state):
            recent_keys, recent_ids = self.recent.find(unique)
            found_keys.append(recent_keys)
            found_ids.append(recent_ids)
        else:  # a store without stamps: its recent postings are indexed by key
            condition, parameter = self.dialect.one_of_keys(unique)
            parts.append(f"SELECT -1, k, id FROM {tables[0]} WHERE {condition}")
            parameters.append(parameter)
        asked = []  # the runs read, by number
        for number, table in enumerate(tables[1:]):
            passed, known_keys, known_ids = self.known.split(
                table, unique[may_contain(self.filters[table], unique)]
            )
            found_keys.append(known_keys)
            found_ids.append(known_ids)
            if passed.size:
                condition, parameter = self.dialect.one_of_keys(passed)
                parts.append(f"SELECT {number}, k, id FROM {table} WHERE {condition}")
                parameters.append(parameter)
                asked.append(number)
        if parts:
            found = self.dialect.int_rows(cursor, " UNION ALL ".join(parts), parameters, 3)
            for number in asked:
                mine = found[:, 0] == number
                self.known.learn(tables[1 + number], found[mine, 1], found[mine, 2])
            found_keys.append(found[:, 1])
            found_ids.append(found[:, 2])
        return np.concatenate(found_keys), np.concatenate(found_ids), state

    def _recent_in_memory(self, cursor: Any, state: dict[str, Any]) -> bool:
        """Bring this process's copy of the recent postings to ``state`` (reading another
        process's adds by id, or all of them after a cut); False for a store without stamps."""
        if state.get("stamp") is None:
            return False
        usable = self.recent.usable_for(state)
        if usable == "behind":
            keys, ids = self._postings_between(cursor, self.recent.next_id, int(state["next_id"]), state)
            self.recent.extend(keys, ids, int(state["next_id"]))
        elif usable == "stale":
            keys, ids = self._postings_between(cursor, 0, int(state["next_id"]), state)
            self.recent.reset(state, keys, ids)
        return True

    def stats(self, cursor: Any, columns: int) -> list[PostingCounts]:
        """Posting counts per column over the live postings."""
        tables, state = self.open_for_reading(cursor)
        union = " UNION ALL ".join(self._select(table, state) for table in tables)
        shift, mask = 64 - TABLE_BITS, (1 << TABLE_BITS) - 1
        cursor.execute(
            f"SELECT t, COUNT(*), MAX(n), AVG(n) FROM (SELECT (p.k >> {shift}) & {mask} AS t, "
            f"COUNT(*) AS n FROM ({union}) AS p JOIN {self.records_table} AS r ON r.id = p.id "
            "GROUP BY p.k) AS buckets GROUP BY t"
        )
        found = {int(row[0]): row for row in cursor.fetchall()}
        stats = []
        for column in range(columns):
            _, buckets, largest, mean = found.get(column, (column, 0, 0, 0.0))
            stats.append(PostingCounts(int(buckets or 0), int(largest or 0), float(mean or 0.0)))
        return stats

    def drop(self, cursor: Any) -> None:
        state = self.state(cursor)
        unread = [run["table"] for run in state.get("merges", []) + state.get("retired", [])]
        for table in [*self.tables(state), *unread]:
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
        cursor.execute(f"DROP TABLE IF EXISTS {self.records_table}")
        cursor.execute(f"DROP TABLE IF EXISTS {self.filters_table}")


class RunsLayout:
    """Records in one table, their postings in runs (see the module docstring); stores made
    by this layout record it in the meta row ``layout``."""

    #: One writer at a time: a cut rewrites the postings.
    locks_writes = True
    #: Queries per candidates call: a batch's keys travel as one parameter (a JSON text or
    #: an array), so a call per 256 queries would only repeat each call's fixed costs.
    query_batch = QUERY_BATCH_RUNS
    screens_first = True

    def __init__(self, store: SqlStorage) -> None:
        self.store = store
        self.runs = PostingRuns(store.dialect, store.prefix, store.records_table, store.meta_table)
        self.runs.on_commit = store._on_commit
        #: The words of the records this process has screened (made at the first screen).
        self.known: KnownWords | None = None

    @property
    def tables(self) -> tuple[str, ...]:
        return (self.store.records_table,)

    def create(self, cursor: Any) -> None:
        self.runs.create(cursor, self.store.record_columns(self.store.dialect.runs_id_column))

    def add_many(self, batch: RecordBatch) -> None:
        store = self.store
        keys = posting_keys(batch.posting_keys())
        fingerprints = words_to_bytes(batch.words)
        columns = ", ".join(["id", "key_text", "key_int", "fingerprint", *store.record_fields])
        with store._transaction(write=True) as cursor:
            store._lock(cursor)
            store.check_new_keys(cursor, batch.keys)
            ids, state = self.runs.reserve_ids(cursor, len(batch))
            rows = [
                (ids[row], *key_columns(key), fingerprints[row], *store.record_values(batch, row))
                for row, key in enumerate(batch.keys)
            ]
            rows.sort(key=lambda row: (row[1], row[2]))  # see ColumnsLayout.add_many
            try:
                store.dialect.insert_rows(cursor, store.records_table, columns, rows)
            except store.dialect.integrity_errors() as exc:
                raise raced_key_error(store.where, exc) from exc
            self.runs.add(cursor, keys, ids, state)
            self.runs.cut_if_full(cursor, state, max(ids))
            if self.known is not None:  # a screening process knows its own records' words
                known, added = self.known, np.asarray(ids, dtype=np.int64)
                words = np.asarray(batch.words, dtype=np.uint64)
                store._on_commit(lambda: known.learn(added, words))
            if store.dialect.merge_in_steps and self.runs.merge_work(state):
                # Once the outermost transaction (check-and-add's, if any) has committed:
                # merges hold no adding transaction open.
                store._on_commit(lambda: self._merge_after_add(keys.size))

    def _merge_after_add(self, postings: int) -> None:
        """Pending merge work worth :data:`MERGE_WORK` times the postings just added. A
        failure here is logged, not raised: the batch is stored, and the next add resumes."""
        try:
            self.merge_pending(max(MERGE_STEP, MERGE_WORK * postings))
        except StorageError as exc:
            log.warning("merging runs paused, to resume at the next add: %s", exc)

    def merge_pending(self, budget: int | None = None) -> None:
        """Do merge work (SQLite) until about ``budget`` postings of it are done or none is
        left (None: until none is left), one bounded step per write transaction
        (:meth:`PostingRuns.merge_step`)."""
        store = self.store
        done = 0
        while budget is None or done < budget:
            with store._transaction(write=True) as cursor:
                store._lock(cursor)
                work, behind = self.runs.merge_step(cursor, MERGE_STEP)
            if behind is not None:
                with store._transaction() as cursor:
                    work = self.runs.catch_up(cursor, behind)
            if not work:
                return
            done += work

    def removed(self, cursor: Any, count: int) -> None:
        """The record rows went; their postings are skipped by reads and dropped by merges."""
        self.runs.note_removed(cursor, count)

    def candidates(self, postings: UInt64Array, records: bool, screen: Screen | None) -> Candidates:
        """The postings of a batch's keys, then (with a ``screen``) the pairs it keeps by the
        records' words (:meth:`_screened`), then the rows of the records left, by id."""
        store = self.store
        keys = posting_keys(postings)
        extra = store.record_fields if records else ()
        fields = ", ".join(f"r.{column}" for column in ("key_text", "key_int", "fingerprint", *extra))
        with store._transaction() as cursor:
            store.dialect.prefer_indexes(cursor)
            found_keys, found_ids, state = self.runs.find(cursor, keys)
            positions, hits = match_postings(
                keys.reshape(-1, 1).view(np.uint64), found_keys.view(np.uint64).reshape(-1, 1)
            )
            query_rows, ids = positions // keys.shape[1], found_ids[hits]
            if screen is not None and ids.size:
                query_rows, ids = self._screened(cursor, state, query_rows, ids, screen)
            distinct, owners = np.unique(ids, return_inverse=True)
            rows = store.dialect.records_by_id(cursor, distinct, self.runs.records_table, fields)
        if not rows:
            return no_candidates(store.shape.words)
        owners = owners.reshape(-1)
        if len(rows) < distinct.size:  # removed records: their postings stay in older runs
            present = np.isin(distinct, np.fromiter((row[0] for row in rows), np.int64, len(rows)))
            live = present[owners]
            query_rows, owners = query_rows[live], (np.cumsum(present) - 1)[owners[live]]
        found_words = bytes_to_words([bytes(row[3]) for row in rows], store.shape.words)
        record_keys = [key_from_columns(row[1], row[2]) for row in rows]
        read = {}
        if records:
            read = {record.key: record for record in store.records_of([row[1:] for row in rows])}
        return Candidates(query_rows, [record_keys[i] for i in owners.tolist()], found_words[owners], read)

    def _screened(
        self, cursor: Any, state: dict[str, Any], query_rows: IntArray, ids: IntArray, screen: Screen
    ) -> tuple[IntArray, IntArray]:
        """The (query row, record id) pairs whose records' words ``screen`` keeps: the words
        this process knows (:class:`KnownWords`), the others read by id and learnt. Pairs of
        removed records this process has not read before go here; the others with the rows."""
        width = self.store.shape.words
        if self.known is None or self.known.width != width:
            self.known = KnownWords(width, KNOWN_WORDS_BYTES)
        known = self.known
        known.follow(state)
        held = known.holds(ids)
        if held.all():
            words = known.words_of(ids)
        else:
            missing = np.unique(ids[~held])
            dialect, table, stop = self.store.dialect, self.runs.records_table, int(state["next_id"])
            if known.holds_every(stop) and missing.size * WHOLE_COPY_SHARE >= stop:
                read, read_words = dialect.words_below(cursor, stop, table, width)  # one pass
            else:
                read, read_words = dialect.words_by_id(cursor, missing, table, width)
            known.learn(read, read_words)
            held = known.holds(ids)
            words = (
                known.words_of(np.where(held, ids, 0))
                if held.any()
                else np.empty((ids.size, width), np.uint64)
            )
            live = held.copy()
            rest = np.flatnonzero(~held)  # not copied (past the copy's bytes, or no copy): as read
            if rest.size and read.size:
                at = np.minimum(np.searchsorted(read, ids[rest]), read.size - 1)
                present = read[at] == ids[rest]  # the others were removed
                words[rest[present]] = read_words[at[present]]
                live[rest[present]] = True
            if not live.all():
                query_rows, ids, words = query_rows[live], ids[live], words[live]
        kept = screen(query_rows, words)
        return query_rows[kept], ids[kept]

    def posting_counts(self) -> list[PostingCounts]:
        with self.store._transaction() as cursor:
            return self.runs.stats(cursor, self.store.shape.columns)

    def drop(self, cursor: Any) -> None:
        self.runs.drop(cursor)


def _between(after: Position, until: Position) -> tuple[str, list[int]]:
    """The postings after position ``after`` up to ``until`` (see :data:`Position`), as a
    condition on (k, id) that an index on (k, id) answers by range, and its parameters."""
    if until is None or after == "end" or (after is not None and after == until):
        return "0 = 1", []
    conditions, parameters = [], []
    if isinstance(after, list):
        conditions.append("(k, id) > (?, ?)")
        parameters += after
    if isinstance(until, list):
        conditions.append("(k, id) <= (?, ?)")
        parameters += until
    return " AND ".join(conditions) or "1 = 1", parameters


def _stamp() -> str:
    """A token never used before (the meta row's ``stamp``, new at every cut)."""
    return secrets.token_hex(8)
