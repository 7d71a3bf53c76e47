"""Records incrementally (``neardup records SOURCE --index URL``): seed 002's incremental
mode for the learned path. New rows are checked against the stored ones instead of the whole
table being read, weighed and renumbered every day.

**First run** (an empty store): the batch of :mod:`neardup.records.learned` runs on the
source as it does without ``--index``, and the store keeps its model
(:class:`~neardup.records.index_model.RecordsModel`, in the store's meta) and per row its
normalised values, its group and its block keys. A group is named by the key of its first
row (the representative of ``--clusters``), so a group id never has to be renumbered.

**Later runs** check each new row (a key not stored yet) against the stored rows that share
one of its block keys, and against the earlier new rows of its batch, with the stored model:
it joins the group of its most probable match at or above the threshold, or starts its own.
A stored row's group never changes (groups are never merged: a row that matches two groups
joins the likelier one, which is also what keeps a chain of plausible pairs from joining
groups, as the batch's chain guard does). Rows whose key is already stored, or that
appear earlier in the same run, are skipped and counted; they are never changed.

**The model over time**: a model fitted on a first day's rows has seen little of the table
(a value common in it looks rare, and its agreement weighs too much), so before a batch that
makes the stored rows :data:`GROWTH` times the rows the model was fitted on, the weights are
fitted again on all of them and the batch's new ones; stored groups stay, later rows are
decided by the new model. Only ``refit`` (:func:`refit_stored`, ``--refit``) regroups stored
rows, and it keeps the id of every group whose members did not change.

**Queries** (``mode="any"`` / ``"all"``) check rows against the stored ones without adding
anything: whether a row has a stored duplicate, or every stored duplicate with its match
probability (seed 002's two incremental modes).

What a store holds (three value maps, :meth:`~neardup.storage.base.Storage.put_values`; the
store knows nothing of what they mean): ``state`` holds the row count and which model decides
(:class:`_Size`), and the latest refitted model; ``rows`` maps a row's key to JSON ``{"v": values,
"g": group}``; ``blocks`` maps a block key (a 64-bit hash of the key type and the key) to the
JSON list of the stored rows holding it (:mod:`neardup.records.block_map`: sorted runs on the
SQL stores, a document per block on Redis and on MongoDB, seed 002's ``{"blockName", "info":
[...]}``). A key type's block that
grows past the type's cap makes no pairs in the batch, and never will again (stores only
grow), so its list is replaced by ``"*"``:
a common surname costs one short read, whatever the table's size, and one a run (its later
batches know it, until a refit rebuilds the blocks). Exact copies (every
compared value the same) share the block of their values' hash, which keeps only the first
copy, so a copy joins its group however many there are, as in the batch.

Each batch is checked and written under the store's writer lock, and its rows and blocks are
written in one transaction on SQL stores (elsewhere blocks first, then rows: a row is stored
only once its blocks are, and a re-run adds whatever a crash left out; block entries naming
rows never stored are passed over).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import xxhash

from ..collector import collector_paused
from ..dedup.clusters import cluster_records
from ..errors import ConfigError, InputError, StorageDamagedError
from ..io.record import ErrorReport
from ..storage import open_storage
from ..storage.base import RecordShape, Storage, key_problem, shown_key
from ..storage.urls import redacted
from .block_map import BlockMap, new_block_map, open_block_map
from .candidates import KeyColumn, derived_form, factorize, key_specs
from .compare import LEVELS, PairLevels, compare_values, normalize_column
from .index_model import META_KEY, MODEL_VERSION, RecordsModel, RefitSettings, check_columns, stored_terms
from .learned import (
    DEFAULT_THRESHOLD,
    FEW_PAIRS_AGREEMENT,
    fit_table,
    guarded_pairs,
    prepared,
    read_key_columns,
    score_table,
)
from .schema import RecordSchema, RowChunk
from .sources import RowSource, SqlSource, read_only_needed
from .values import RecordKey, record_key
from .weights import match_probability

#: Rows checked and written per transaction: a new row writes a block per key type, each on a
#: random page of a large store, so the more rows a transaction holds, the more of them share
#: a page (and a batch's reads and commit); a batch this size holds the writer lock for
#: seconds, well within another writer's wait.
DEFAULT_BATCH_SIZE = 10_000
MODES = ("add", "any", "all")
ROWS_MAP = "rows"
#: The map of the index's state: the refitted model (``model``) and the row count (``size``).
STATE_MAP = "state"
MODEL_ENTRY = "model"
SIZE_ENTRY = "size"
#: The weights are refitted before a batch that makes the rows stored at least this many times
#: the rows they were fitted on: a model learned on a first slice misses the variety of the
#: whole table (a value common in it looks rare), and refitting at a fixed ratio r reads in all
#: at most r / (r - 1) times the rows added, while the model has always seen 1 / r of them.
GROWTH = 1.5
#: The list of a block held by more rows than its key type's cap (it makes no pairs).
OVER_CAP = "*"
#: Over-cap blocks a run remembers (about 100 bytes each), so as not to read them again.
OVER_CAP_KEPT = 1 << 20

Values = list[str | None]


def _no_postings(words: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    return words[:, :1]


#: What a records index tells a store of its records: nothing it uses (it keeps no records
#: or postings there, only meta and value maps), but every store is attached to a shape
#: before its meta is written or its writer lock taken.
STORE_SHAPE = RecordShape(1, 1, 1, 64, _no_postings)


@dataclass(frozen=True)
class RecordMatch:
    """A stored row that a checked row matches: its key, group and match probability."""

    key: RecordKey
    group: RecordKey
    probability: float


@dataclass(frozen=True)
class CheckedRow:
    """One row of the source as a run saw it. ``status``: ``added`` (stored now, in
    ``group``), ``stored`` (its key was stored already: skipped, ``group`` the stored one) or
    ``checked`` (a query). ``matches``: the stored or earlier rows it matched, most probable
    first (``all``: every one; otherwise the best one)."""

    key: RecordKey
    status: str
    group: RecordKey | None
    matches: tuple[RecordMatch, ...] = ()

    @property
    def duplicate(self) -> bool:
        """Whether the row matched a row stored (or added before it)."""
        return bool(self.matches)


@dataclass(frozen=True)
class BatchDone:
    """A batch committed to the store (``--report-batches``): its number (from 1), rows
    added, rows skipped (their key stored already) and the key of its last row."""

    number: int
    added: int
    skipped: int
    last_key: RecordKey | None

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.number, "added": self.added, "skipped": self.skipped, "last_id": self.last_key}


@dataclass(frozen=True)
class Refit:
    """What ``refit`` did before the run's rows were added: the stored ``rows`` it refitted
    and regrouped, the ``groups`` after it, how many of them ``changed`` (members not those of
    a group before; the others kept their ids) and how many rows ``moved`` to another id."""

    rows: int
    groups: int
    changed: int
    moved: int

    def describe(self) -> str:
        return (
            f"refitted the weights on {self.rows} stored rows and regrouped them: {self.changed} of "
            f"{self.groups} groups changed ({self.moved} rows moved to another group id), the others "
            "kept their ids"
        )


@dataclass
class IndexedRecords:
    """What a run did: the rows in source order, and counts. ``created`` is True for the
    first run, which learned the model and made the store; ``refit`` says what ``refit=True``
    did; ``refitted`` lists the row counts the weights were refitted on as the store grew
    (:data:`GROWTH`); ``model`` is the one the last rows were decided with."""

    mode: str
    created: bool
    model: RecordsModel
    rows: list[CheckedRow] = field(default_factory=list)
    added: int = 0
    skipped: int = 0
    bad: int = 0
    refit: Refit | None = None
    refitted: list[int] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        """Rows that matched a stored (or earlier) row."""
        return sum(row.duplicate for row in self.rows)

    def cluster_rows(self) -> Iterator[dict[str, Any]]:
        """``{"id": key, "cluster": group}`` for every row with a group (``--clusters``)."""
        for row in self.rows:
            if row.group is not None:
                yield {"id": row.key, "cluster": row.group}

    def check_rows(self) -> Iterator[dict[str, Any]]:
        """One line per row: ``{"id", "duplicate"}`` for ``any``, with ``"matches": [{"id",
        "group", "probability"}]`` for ``all``; ``{"id", "group", "status"}`` for ``add``."""
        for row in self.rows:
            if self.mode == "add":
                yield {"id": row.key, "group": row.group, "status": row.status}
            elif self.mode == "any":
                yield {"id": row.key, "duplicate": row.duplicate}
            else:
                found = [{"id": m.key, "group": m.group, "probability": m.probability} for m in row.matches]
                yield {"id": row.key, "duplicate": row.duplicate, "matches": found}


def index_records(
    source: RowSource,
    index: str | Storage,
    schema: RecordSchema,
    *,
    mode: str = "add",
    threshold: float = DEFAULT_THRESHOLD,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_error: str = "fail",
    report: ErrorReport | None = None,
    progress: Callable[[int], object] | None = None,
    on_batch: Callable[[BatchDone], object] | None = None,
    refit: bool = False,
) -> IndexedRecords:
    """``neardup records SOURCE --index URL``: check the rows of ``source`` against the
    records index at ``index`` (a store URL or SQLite path, or an opened store, which is
    left open) and, in ``add`` mode, store the new ones, ``batch_size`` rows a transaction
    (module docstring); ``on_batch`` hears each committed batch. An empty store learns its
    model from ``source`` (``threshold`` applies there; a stored model keeps its own);
    queries need a stored model. ``schema``'s key must be the stored one. ``refit``
    (``--refit``, add mode) first refits the weights on every stored row and regroups them
    (:func:`refit_stored`), also rebuilding a store of an older model version."""
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be at least 1; got {batch_size!r}")
    if refit and mode != "add":
        raise ConfigError(f"refit regroups stored rows, which --mode {mode} never changes; use --mode add")
    report = report if report is not None else ErrorReport()
    store = open_storage(index) if isinstance(index, str) else index
    where = redacted(index) if isinstance(index, str) else store.name
    try:
        store.attach(STORE_SHAPE)
        done = _refit_first(store, isinstance(index, str), where, schema.key, batch_size) if refit else None
        stored = _stored(store, where)
        model, generation = (None, 0) if stored is None else stored
        if model is None and mode != "add":
            if isinstance(index, str):
                store.discard()  # a query leaves no empty store behind
            raise ConfigError(f"{where} holds no records index yet; add rows first (--mode add)")
        if isinstance(source, SqlSource) and not source.columns:
            source.open()  # a query's columns are known once it runs
        if model is None:
            learn = _Learn(schema, threshold, batch_size, on_error)
            return _first_run(source, store, learn, report, progress, on_batch)
        _check_key(schema.key, model.key, where)
        check_columns(model, source.columns, source.name)
        result = IndexedRecords(mode, False, model, refit=done)
        checker = _Checker(store, model, result, where, generation)
        for number, batch in enumerate(_batches(source, model, batch_size, on_error, report, progress), 1):
            added, skipped = result.added, result.skipped
            checker.run(batch)
            if on_batch is not None and mode == "add":
                on_batch(BatchDone(number, result.added - added, result.skipped - skipped, batch.keys[-1]))
        result.bad = report.count
        return result
    finally:
        if isinstance(index, str):
            store.close()


def _refit_first(store: Storage, opened: bool, where: str, key: str, batch_size: int) -> Refit:
    """:func:`refit_stored`; a store this call ``opened`` and found empty is not left behind."""
    if store.read_meta() is None:
        if opened:
            store.discard()
        raise _nothing_to_refit(where, key)
    return refit_stored(store, where, key, batch_size)


def _check_key(given: str, stored: str, where: str) -> None:
    if given != stored:
        raise ConfigError(f"the records index at {where} is keyed by column {stored!r}; give --key {stored}")


class RecordsIndex:
    """A records index opened for rows given as mappings of column → value, not read from a
    source: the service's ``/v1/records/check`` and Python callers. The index must exist
    (made by a first run of :func:`index_records`); its stored model decides."""

    def __init__(self, store: Storage, model: RecordsModel, where: str, generation: int = 0) -> None:
        self.store = store
        self.model = model
        self.where = where
        self.generation = generation
        #: The stored blocks, kept between calls: the runs' parts read stay in memory.
        self._blocks: BlockMap | None = None

    @classmethod
    def open(cls, url: str) -> RecordsIndex:
        """The records index at ``url`` (a store URL or SQLite path)."""
        store = open_storage(url)
        try:
            store.attach(STORE_SHAPE)
            stored = _stored(store, redacted(url))
        except BaseException:
            store.close()
            raise
        if stored is None:
            store.discard()
            raise ConfigError(
                f"{redacted(url)} holds no records index; make one with `neardup records SOURCE "
                f"--key KEY --index {redacted(url)}`"
            )
        return cls(store, stored[0], redacted(url), stored[1])

    def check_many(self, rows: Sequence[Mapping[str, Any]], *, mode: str = "any") -> list[CheckedRow]:
        """Each row checked against the stored ones (``any``/``all``, nothing added) or
        checked and added (``add``), in order. A column the model compares that a row lacks
        is null; other fields are ignored. A row without a usable key is refused naming it,
        and nothing of the call is stored."""
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        batch = _Batch([], [], [])
        for number, row in enumerate(rows, 1):
            where = f"row {number}"
            try:
                key = record_key(row.get(self.model.key))
                problem = key_problem(key)
                if problem is not None:
                    raise ValueError(f"the key {shown_key(key)} {problem}")
            except ValueError as exc:
                raise InputError(f"{exc}; every row needs its {self.model.key!r} (a key)", where) from None
            batch.keys.append(key)
            batch.numbers.append(number)
        columns = [
            normalize_column([row.get(name) for row in rows], kind).tolist()
            for name, kind in self.model.columns
        ]
        batch.values = [[column[row] for column in columns] for row in range(len(rows))]
        result = IndexedRecords(mode, False, self.model)
        checker = _Checker(self.store, self.model, result, self.where, self.generation, self._blocks)
        for start in range(0, len(rows), DEFAULT_BATCH_SIZE):
            part = slice(start, start + DEFAULT_BATCH_SIZE)
            checker.run(_Batch(batch.keys[part], batch.numbers[part], batch.values[part]))
        self.model, self.generation, self._blocks = checker.model, checker.generation, checker.blocks
        return result.rows

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> RecordsIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def stored_model(store: Storage, where: str) -> RecordsModel | None:
    """The records model a store holds (the refitted one if any); None for an empty store. A
    store holding something else (a document index) is refused."""
    found = _stored(store, where)
    return None if found is None else found[0]


def _stored(store: Storage, where: str) -> tuple[RecordsModel, int] | None:
    """The current model and its generation (:class:`_Size`); None for an empty store."""
    found = _model_meta(store, where)
    return None if found is None else (RecordsModel.from_meta(found[0], where), found[1].generation)


def _model_meta(store: Storage, where: str) -> tuple[Mapping[str, Any], _Size] | None:
    """The current model's meta and the store's size entry; None for an empty store."""
    meta = _records_meta(store, where)
    if meta is None:
        return None
    size = _Size.read(store, where)
    if not size.generation:
        return meta[META_KEY], size
    data = store.get_values(STATE_MAP, [MODEL_ENTRY])[0]
    if data is None:
        raise StorageDamagedError(
            f"{where}: the refitted records model is missing; the store is damaged: build a new index "
            "with `neardup records SOURCE --key KEY --index NEW_URL`"
        )
    return json.loads(data), size


def _records_meta(store: Storage, where: str) -> dict[str, Any] | None:
    """The store's meta; None for an empty store, a document index refused."""
    meta = store.read_meta()
    if meta is not None and META_KEY not in meta:
        raise ConfigError(f"{where} holds a document index, not a records index; give --index another store")
    return meta


@dataclass(frozen=True)
class _Size:
    """The ``size`` entry of the state map: rows stored, which model decides them (0: the
    meta's, n: the n-th refitted one) and whether a refit is under way (it is one
    transaction on SQL stores; elsewhere a run that finds it unfinished is refused)."""

    rows: int = 0
    generation: int = 0
    refitting: bool = False

    @classmethod
    def read(cls, store: Storage, where: str, *, refitting_ok: bool = False) -> _Size:
        data = store.get_values(STATE_MAP, [SIZE_ENTRY])[0]
        if data is None:
            return cls()
        try:
            body = json.loads(data)
            size = cls(int(body["rows"]), int(body["generation"]), bool(body.get("refitting")))
        except (ValueError, KeyError, TypeError) as exc:
            raise StorageDamagedError(
                f"{where}: the records index's row count is not readable ({exc!r}); the store is "
                "damaged: build a new index"
            ) from exc
        if size.refitting and not refitting_ok:
            raise ConfigError(
                f"a refit of the records index at {where} did not finish; run it again with "
                "`neardup records SOURCE --key KEY --index URL --refit`"
            )
        return size

    def encode(self) -> bytes:
        body = {"rows": self.rows, "generation": self.generation, "refitting": self.refitting}
        return json.dumps(body).encode()


# -- rows -------------------------------------------------------------------------------------


@dataclass
class _Batch:
    """New rows of one batch: key, source row number, normalised values (model order)."""

    keys: list[RecordKey]
    numbers: list[int]
    values: list[Values]


def _batches(
    source: RowSource,
    model: RecordsModel,
    size: int,
    on_error: str,
    report: ErrorReport,
    progress: Callable[[int], object] | None,
) -> Iterator[_Batch]:
    """The source's rows with good keys, normalised by the model's kinds, ``size`` at a time."""
    wanted = [name for name in source.columns if name in (model.key, *model.names)]
    source.select(wanted)
    position = {name: index for index, name in enumerate(source.columns)}
    pending = _Batch([], [], [])
    for chunk in source.chunks():
        columns = [normalize_column(list(chunk.columns[position[n]]), k).tolist() for n, k in model.columns]
        good = _good_keys(chunk, position[model.key], on_error, report, source.name)
        for row, (key, number) in good:
            pending.keys.append(key)
            pending.numbers.append(number)
            pending.values.append([column[row] for column in columns])
            if len(pending.keys) == size:
                yield pending
                pending = _Batch([], [], [])
        if progress is not None:
            progress(chunk.count)
    if pending.keys:
        yield pending


def _good_keys(
    chunk: RowChunk, key_index: int, on_error: str, report: ErrorReport, source_name: str
) -> list[tuple[int, tuple[RecordKey, int]]]:
    """(row in chunk, (key, row number)) of the rows whose key a store can hold; the others
    stop the run (``fail``) or are counted and skipped."""
    good = []
    for row, value in enumerate(chunk.columns[key_index]):
        number = chunk.first_row + row
        try:
            key = record_key(value)
            problem = key_problem(key)
            if problem is not None:
                raise ValueError(f"the key {shown_key(key)} {problem}")
        except ValueError as exc:
            error = InputError(
                f"{exc}; every row needs a key a store can hold", f"{source_name} row {number}"
            )
            if on_error == "fail":
                raise error from None
            report.add(error)
            continue
        good.append((row, (key, number)))
    return good


def block_keys(model: RecordsModel, values: Values) -> list[tuple[int, int]]:
    """A row's blocks as (key type, block key); the type ``len(model.specs)`` is the hash of
    all its values (exact copies), absent for a row with no value."""
    return rows_block_keys(model, [values])[0]


def rows_block_keys(model: RecordsModel, rows: Sequence[Values]) -> list[list[tuple[int, int]]]:
    """:func:`block_keys` of many rows (:func:`_block_columns`)."""
    out: list[list[tuple[int, int]]] = [[] for _ in rows]
    for number, held, keys in _block_columns(model, rows):
        for row, key in zip(held, keys, strict=True):
            out[row].append((number, key))
    return out


def _block_columns(model: RecordsModel, rows: Sequence[Values]) -> Iterator[tuple[int, list[int], list[int]]]:
    """The blocks of many rows a key type at a time, the copies last: (key type, the rows with
    a key of that type, their block keys). A batch asks for the blocks of all its rows at once,
    and a derived form and a block key are computed once per distinct value."""
    if not rows:
        return
    columns = list(zip(*rows, strict=True))
    kinds = model.kinds
    for number, spec in enumerate(model.specs):
        texts: Sequence[str | None]
        if len(spec.columns) == 1:
            texts = columns[spec.columns[0]]
        else:
            parts = zip(*(columns[column] for column in spec.columns), strict=True)
            texts = [None if None in both else "\x1f".join(both) for both in parts]
        if spec.form is not None:
            function = derived_form(kinds[spec.columns[0]], spec.form)
            forms = {text: function(text) or None for text in set(texts) if text is not None}
            texts = [None if text is None else forms[text] for text in texts]
        prefix, hash_ = f"{number}\x1e", _hash
        hashed = {
            text: hash_((prefix + text).encode("utf-8", "surrogatepass"))
            for text in set(texts)
            if text is not None
        }
        held = [row for row, text in enumerate(texts) if text is not None]
        yield number, held, [hashed[texts[row]] for row in held]
    held = [row for row, values in enumerate(rows) if any(value is not None for value in values)]
    yield len(model.specs), held, [_block_hash(-1, _json(rows[row])) for row in held]


_hash = xxhash.xxh3_64_intdigest


def _block_hash(number: int, text: str) -> int:
    return _hash(f"{number}\x1e{text}".encode("utf-8", "surrogatepass"))


# -- the stored maps --------------------------------------------------------------------------


class StoredRow(NamedTuple):
    """A stored row as the ``rows`` map keeps it (a named tuple: a batch makes thousands). Its
    block keys are not kept: they follow from its values and the model, and were most of its
    bytes, which every check reads (stores made before wrote them as ``"b"``; they are passed
    over)."""

    values: Values
    group: RecordKey

    def encode(self) -> bytes:
        """``json.dumps({"v": values, "g": group}, ensure_ascii=False)`` as bytes, written out
        (a batch encodes thousands)."""
        text = f'{{"v": {_json(self.values)}, "g": {_json(self.group)}}}'
        return text.encode("utf-8", "surrogatepass")

    @classmethod
    def decode(cls, data: bytes, key: RecordKey) -> StoredRow:
        try:
            body = _loads(data)
            group = body["g"]
            if not isinstance(group, str | int):
                raise TypeError(f"group {group!r}")
            return cls(list(body["v"]), group)
        except (ValueError, KeyError, TypeError) as exc:
            raise StorageDamagedError(
                f"stored row {shown_key(key)} of the records index is not readable ({exc!r}); the store "
                "is damaged: build a new index"
            ) from exc

    @classmethod
    def decode_checked(cls, data: bytes, key: RecordKey) -> StoredRow:
        """:meth:`decode`, reading no further than the group: a check reads thousands of rows,
        and a row stored before may hold its block keys after it. A row not laid out as
        :meth:`encode` writes it is decoded whole."""
        text = data.decode("utf-8", "surrogatepass")
        if text.startswith('{"v": '):
            try:
                values, end = _DECODER.raw_decode(text, 6)
                if isinstance(values, list) and text.startswith(', "g": ', end):
                    group, end = _DECODER.raw_decode(text, end + 7)
                    if (
                        isinstance(group, str | int)
                        and (end == len(text) - 1 or text.startswith(', "b": [', end))
                        and text.endswith("}")
                    ):
                        return cls(values, group)
            except ValueError:
                pass
        return cls.decode(data, key)


_DECODER = json.JSONDecoder()


def _loads(data: bytes) -> Any:
    """``json.loads`` of what this module wrote (UTF-8 with lone surrogates passed), without
    its per-call encoding sniffing: a batch decodes thousands of small values."""
    return _DECODER.decode(data.decode("utf-8", "surrogatepass"))


def _read_blocks(
    blocks: BlockMap, keys: Sequence[int], raw: dict[int, bytes] | None = None
) -> dict[int, list[RecordKey] | None]:
    """Each block's stored rows (None: over its cap); blocks not stored are left out. ``raw``
    receives the stored bytes, which :func:`_grown` extends rather than encoding a list again.
    The lists are parsed as one JSON array of them (a batch reads thousands), each alone only
    where that fails, to name the damaged one."""
    held_keys, held_data = [], []
    out: dict[int, list[RecordKey] | None] = {}
    for key, data in zip(keys, blocks.get(keys), strict=True):
        if data == _OVER_CAP_JSON:
            out[key] = None  # most of a large store's blocks: no need to parse them
        elif data is not None:
            held_keys.append(key)
            held_data.append(data)
    if raw is not None:
        raw.update(zip(held_keys, held_data, strict=True))
    lists = _parsed_together(held_data, _looks_like_block)
    if lists is None:
        lists = [_block_list(key, data) for key, data in zip(held_keys, held_data, strict=True)]
    out.update((key, None if held == OVER_CAP else held) for key, held in zip(held_keys, lists, strict=True))
    return out


def _looks_like_block(data: bytes) -> bool:
    return (data[:1] == b"[" and data[-1:] == b"]") or data == _OVER_CAP_JSON


def _parsed_together(datas: list[bytes], whole: Callable[[bytes], bool]) -> list[Any] | None:
    """The JSON values of ``datas`` parsed as one array, None if any is not ``whole`` (one
    value that starts and ends as it should) or the array does not hold one value each."""
    if not all(map(whole, datas)):
        return None
    try:
        parsed = _loads(b"[" + b", ".join(datas) + b"]")
    except ValueError:
        return None
    return parsed if isinstance(parsed, list) and len(parsed) == len(datas) else None


def _block_list(key: int, data: bytes) -> list[RecordKey] | str:
    try:
        held = _loads(data)
    except ValueError as exc:
        raise StorageDamagedError(
            f"stored block {key} of the records index is not readable ({exc!r}); the store is "
            "damaged: build a new index"
        ) from exc
    return held if held == OVER_CAP else list(held)


def _scan_rows(store: Storage) -> dict[RecordKey, StoredRow]:
    """Every stored row by key, in key order (whatever order the store lists them in)."""
    rows = {key: data for batch in store.scan_values(ROWS_MAP) for key, data in batch}
    return {key: StoredRow.decode(rows[key], key) for key in _in_order(rows)}


def _key_columns(columns: Sequence[tuple[str, str]], rows: Sequence[Values]) -> list[KeyColumn]:
    """Normalised stored values as the batch's code columns (:mod:`neardup.records.learned`)."""
    out = []
    for position, (name, kind) in enumerate(columns):
        lookup: dict[str, int] = {}
        codes = factorize([row[position] for row in rows], lookup)
        out.append(KeyColumn(name, kind, codes, list(lookup)))
    return out


def _read_rows(store: Storage, keys: Sequence[RecordKey]) -> dict[RecordKey, StoredRow]:
    """The stored rows of ``keys`` (those stored), their blocks unread (:meth:`StoredRow.decode_checked`)."""
    found = store.get_values(ROWS_MAP, list(keys))
    decode = StoredRow.decode_checked
    return {key: decode(data, key) for key, data in zip(keys, found, strict=True) if data is not None}


def _write(
    store: Storage,
    block_map: BlockMap,
    rows: dict[RecordKey, StoredRow],
    blocks: dict[int, bytes],
    state: dict[str, bytes] | None = None,
) -> None:
    """Blocks (encoded by :func:`_grown`), the state entries, then rows (one transaction on
    SQL stores: the caller holds ``exclusive``; elsewhere a crash leaves at worst blocks naming
    rows never stored and a row count a batch too high, which only moves the next refit)."""
    block_map.put(blocks)
    if state:
        store.put_values(STATE_MAP, list(state), list(state.values()))
    store.put_values(ROWS_MAP, list(rows), [row.encode() for row in rows.values()])


_OVER_CAP_JSON = json.dumps(OVER_CAP).encode()


def _grown(
    model: RecordsModel,
    blocks: Iterable[tuple[int, int, list[RecordKey] | None, Sequence[int]]],
    keys: Sequence[RecordKey],
    texts: Sequence[bytes],
    raw: Mapping[int, bytes] | None = None,
) -> dict[int, bytes]:
    """The blocks after adding their new rows (``blocks``: key type, block, its stored list
    (None: over its cap for good), the new rows in it as positions in ``keys``, whose JSON is
    ``texts``) as JSON to store: appended, replaced by the over-cap mark past the type's cap;
    the copies block keeps its first row only. A stored list whose bytes are in ``raw`` is
    extended on them: a batch rewrites thousands of blocks, most of whose keys were encoded
    when first stored."""
    before = raw or {}
    copies, caps = len(model.specs), model.caps
    out: dict[int, bytes] = {}
    for number, block, held, positions in blocks:
        if held is None:
            continue
        if number == copies:
            if not held:
                out[block] = b"[" + texts[positions[0]] + b"]"
        elif not held:  # most blocks: new to the store
            if len(positions) > caps[number]:
                out[block] = _OVER_CAP_JSON
            elif len(positions) == 1:
                out[block] = b"[" + texts[positions[0]] + b"]"
            else:
                out[block] = b"[" + b", ".join([texts[position] for position in positions]) + b"]"
        else:
            out.update(_extended(block, held, positions, keys, texts, caps[number], before))
    return out


def _extended(
    block: int,
    held: list[RecordKey],
    positions: Sequence[int],
    keys: Sequence[RecordKey],
    texts: Sequence[bytes],
    cap: int,
    raw: Mapping[int, bytes],
) -> dict[int, bytes]:
    """:func:`_grown` of a stored list: nothing where its new rows are listed already (by a
    batch a crash cut short)."""
    # a stored list holds at most its type's cap of keys: looked through, not hashed
    added = [position for position in positions if keys[position] not in held]
    if len(held) + len(added) > cap:
        return {block: _OVER_CAP_JSON}
    if not added:
        return {}
    stored = raw.get(block)
    if stored is not None and stored[-1:] == b"]":
        return {block: stored[:-1] + b", " + b", ".join([texts[position] for position in added]) + b"]"}
    return {block: _json_bytes([*held, *(keys[position] for position in added)])}


def _key_texts(keys: Sequence[RecordKey]) -> list[bytes]:
    """Each key's JSON as a block list holds it (``json.dumps``'s)."""
    return [_json_bytes(key) for key in keys]


@dataclass(frozen=True)
class _BlockPairs:
    """A batch's blocks as arrays: each (row, block) pair of :func:`_block_columns`, row by
    row, and the distinct blocks they name (ascending), each with its key type and the number
    of rows holding it. A row has a pair per key type, so they are kept in arrays, not in a
    dict or list each."""

    rows: npt.NDArray[np.int64]  # the row of each pair
    offsets: npt.NDArray[np.int64]  # row r's pairs are offsets[r]:offsets[r + 1]
    of_pair: npt.NDArray[np.int64]  # each pair's distinct block (an index into ``distinct``)
    distinct: list[int]
    types: list[int]
    counts: npt.NDArray[np.int64]

    @classmethod
    def of(cls, model: RecordsModel, rows: Sequence[Values]) -> _BlockPairs:
        """The blocks of ``rows`` (:func:`_block_columns`)."""
        held_rows, kinds, keys = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)], []
        for number, held, found in _block_columns(model, rows):
            held_rows.append(np.asarray(held, dtype=np.int64))
            kinds.append(np.full(len(held), number, dtype=np.int64))
            keys.append(np.asarray(found, dtype=np.uint64))
        row_of = np.concatenate(held_rows)
        order = np.argsort(row_of, kind="stable")  # row by row, each row's key types in order
        distinct, first, of_pair, counts = np.unique(
            np.concatenate([np.zeros(0, dtype=np.uint64), *keys])[order],
            return_index=True,
            return_inverse=True,
            return_counts=True,
        )
        return cls(
            row_of[order],
            np.searchsorted(row_of[order], np.arange(len(rows) + 1)).astype(np.int64),
            of_pair.reshape(-1).astype(np.int64),
            distinct.tolist(),
            np.concatenate(kinds)[order][first].tolist(),
            counts.astype(np.int64),
        )

    def members(self) -> list[list[int]]:
        """The rows holding each distinct block, in order."""
        order = np.argsort(self.of_pair, kind="stable")
        rows = self.rows[order].tolist()
        bounds = [0, *np.cumsum(self.counts).tolist()]
        return [rows[start:end] for start, end in itertools.pairwise(bounds)]

    def held(self, stored: Mapping[int, list[RecordKey] | None]) -> list[list[RecordKey] | None]:
        """Each distinct block's stored list from ``stored`` (:func:`_read_blocks`): None over
        its cap, empty where the block is not stored yet."""
        return [stored.get(block, _NOTHING) for block in self.distinct]

    def blocks_of(self, row: int) -> list[int]:
        """The distinct blocks (indexes) of a row, in its order."""
        return self.of_pair[self.offsets[row] : self.offsets[row + 1]].tolist()  # type: ignore[no-any-return]


def _stored_pairs(
    pairs: _BlockPairs, open_: Sequence[list[RecordKey] | None], keys: Sequence[RecordKey]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[RecordKey]]:
    """Each row's stored candidates: the stored rows its open blocks list (``open_``, per
    distinct block), in the order of its blocks and of their lists, each once, never the row
    itself. Returned as (row, name) pairs in that order, row by row, a name an index into the
    returned list of the names listed."""
    lengths = np.fromiter((len(held) if held else 0 for held in open_), dtype=np.int64, count=len(open_))
    listed = list(itertools.chain.from_iterable(held for held in open_ if held))
    index = {name: number for number, name in enumerate(dict.fromkeys(listed))}
    flat = np.fromiter(map(index.__getitem__, listed), dtype=np.int64, count=len(listed))
    starts = np.cumsum(lengths) - lengths  # each block's first name in ``flat``
    per_pair = lengths[pairs.of_pair]
    chosen = np.flatnonzero(per_pair)
    repeat = per_pair[chosen]
    rows = np.repeat(pairs.rows[chosen], repeat)
    within = np.arange(int(repeat.sum()), dtype=np.int64) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    names = flat[np.repeat(starts[pairs.of_pair[chosen]], repeat) + within]
    _, first = np.unique(rows * max(len(index), 1) + names, return_index=True)  # each once a row
    first.sort()
    rows, names = rows[first], names[first]
    own = np.fromiter((index.get(key, -1) for key in keys), dtype=np.int64, count=len(keys))
    others = names != own[rows]
    return rows[others], names[others], list(index)


def _batch_candidates(
    pairs: _BlockPairs,
    shared: dict[int, list[int]],
    open_: Sequence[list[RecordKey] | None],
    position: int,
    keys: list[RecordKey],
) -> list[int]:
    """The new rows (positions) before the one at ``position`` that share an open block with
    it (``shared``: the open distinct blocks holding two new rows or more, their rows in
    order) and that the block's stored list does not name already."""
    found: dict[int, None] = {}
    for block in pairs.blocks_of(position):
        held = shared.get(block)
        if held is None:
            continue
        named = open_[block] or ()
        for other in held:
            if other == position:
                break
            if keys[other] not in named:
                found[other] = None
    return list(found)


_NOTHING: list[RecordKey] = []


def _json_bytes(value: Any) -> bytes:
    return _json(value).encode("utf-8", "surrogatepass")


#: ``json.dumps(value, ensure_ascii=False)`` without making an encoder each call.
_json = json.JSONEncoder(ensure_ascii=False).encode


# -- the first run ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Learn:
    """The settings of a first run."""

    schema: RecordSchema
    threshold: float
    batch_size: int
    on_error: str


def _first_run(
    source: RowSource,
    store: Storage,
    learn: _Learn,
    report: ErrorReport,
    progress: Callable[[int], object] | None,
    on_batch: Callable[[BatchDone], object] | None,
) -> IndexedRecords:
    """Learn the model from the whole source (the batch path), store it, then the rows with
    their batch groups, a transaction per batch."""
    schema, threshold, batch_size = learn.schema, learn.threshold, learn.batch_size
    if not 0.0 <= threshold <= 1.0:
        raise ConfigError(f"threshold must be between 0 and 1; got {threshold!r}")
    schema = read_only_needed(source, schema)
    resolved, keys, columns = read_key_columns(
        source.columns,
        source.chunks(),
        schema,
        on_error=learn.on_error,
        report=report,
        source_name=source.name,
        progress=progress,
    )
    for key in keys:
        problem = key_problem(key)
        if problem is not None:
            raise InputError(
                f"the key {shown_key(key)} {problem}; every row needs a key a store can hold", source.name
            )
    model, groups = _learned(resolved.key, columns, keys, threshold)
    store.write_meta({META_KEY: model.to_meta()})
    result = IndexedRecords("add", True, model, bad=report.count)
    block_map = new_block_map(store)
    for start in range(0, len(keys), batch_size):
        chosen = range(start, min(start + batch_size, len(keys)))
        values = [[_value(column, row) for column in columns] for row in chosen]
        size = {SIZE_ENTRY: _Size(chosen[-1] + 1).encode()}
        chosen_keys, chosen_groups = [keys[row] for row in chosen], [groups[row] for row in chosen]
        _store_rows(store, block_map, model, chosen_keys, values, chosen_groups, size)
        for row in chosen:
            result.rows.append(CheckedRow(keys[row], "added", groups[row]))
        if on_batch is not None:
            on_batch(BatchDone(start // batch_size + 1, len(chosen), 0, keys[chosen[-1]]))
    result.added = len(keys)
    return result


def _learned(
    key: str, columns: list[KeyColumn], keys: list[RecordKey], threshold: float
) -> tuple[RecordsModel, list[RecordKey]]:
    """The batch's model of the table, and each row's group (its group's first row's key)."""
    pairs, scored = score_table(columns, len(keys), threshold)
    table, counts = prepared(columns)
    model = RecordsModel(
        key=key,
        columns=tuple((column.name, column.kind) for column in columns),
        specs=tuple(key_specs(columns)),
        caps=scored.caps,
        weights=scored.model.weights,
        learned=scored.model.learned,
        threshold=threshold,
        idf=table.idf,
        terms=stored_terms(counts),
        fitted=len(keys),
    )
    clusters = cluster_records(len(keys), pairs.i, pairs.j, keep="first")
    groups = [keys[index] for index in clusters.cluster.tolist()]
    return model, groups


def _value(column: KeyColumn, row: int) -> str | None:
    code = int(column.codes[row])
    return None if code < 0 else column.values[code]


def _store_rows(
    store: Storage,
    block_map: BlockMap,
    model: RecordsModel,
    keys: list[RecordKey],
    values: list[Values],
    groups: list[RecordKey],
    state: dict[str, bytes],
) -> None:
    """Store rows whose groups are decided, with their blocks, in one transaction."""
    pairs = _BlockPairs.of(model, values)
    with store.exclusive():
        raw: dict[int, bytes] = {}
        stored = _read_blocks(block_map, pairs.distinct, raw)
        rows = {key: StoredRow(row, group) for key, row, group in zip(keys, values, groups, strict=True)}
        lists = pairs.held(stored)
        blocks = zip(pairs.types, pairs.distinct, lists, pairs.members(), strict=True)
        _write(store, block_map, rows, _grown(model, blocks, keys, _key_texts(keys), raw), state)


# -- refit ------------------------------------------------------------------------------------


def refit_stored(store: Storage, where: str, key: str, batch_size: int = DEFAULT_BATCH_SIZE) -> Refit:
    """Learn the model again, as a first run would, from every stored row (its normalised
    values as stored: normalising twice is not always the identity), regroup the rows as the
    batch groups them, and rebuild the blocks by this version's key types. A group whose
    members are those of a group before keeps its id; a changed one takes the most common
    earlier id that names one of its rows (else its first row's key). What ``key`` names must
    be the stored key. One transaction on SQL stores; elsewhere the ``size`` entry marks the
    refit unfinished until it ends, and a run refuses such a store until the refit is run
    again. The store's rows are read into memory."""
    with store.exclusive():
        meta = _records_meta(store, where)
        if meta is None:
            raise _nothing_to_refit(where, key)
        size = _Size.read(store, where, refitting_ok=True)  # an unfinished refit is done again
        current = meta[META_KEY]
        if size.generation:
            data = store.get_values(STATE_MAP, [MODEL_ENTRY])[0]
            current = json.loads(data) if data is not None else current
        settings = RefitSettings.from_meta(current, where)
        _check_key(key, settings.key, where)
        rows = _scan_rows(store)
        keys = list(rows)
        for row_key, row in rows.items():
            if len(row.values) != len(settings.columns):
                raise StorageDamagedError(
                    f"stored row {shown_key(row_key)} of {where} has {len(row.values)} values for "
                    f"{len(settings.columns)} columns; the store is damaged: build a new index"
                )
        generation = size.generation + 1
        store.put_values(STATE_MAP, [SIZE_ENTRY], [_Size(size.rows, size.generation, True).encode()])
        values = [row.values for row in rows.values()]
        table = _key_columns(settings.columns, values)
        model, fresh = _learned(settings.key, table, keys, settings.threshold)
        groups, done = _stable_ids(keys, [row.group for row in rows.values()], fresh)
        open_block_map(store, size.rows).clear()
        block_map = new_block_map(store)  # a store made before runs gets them (but MongoDB)
        pairs = _BlockPairs.of(model, values)
        by_batch: dict[int, list[tuple[int, int, list[RecordKey] | None, list[int]]]] = {}
        for kind, block, rows_in in zip(pairs.types, pairs.distinct, pairs.members(), strict=True):
            # a block is written with the batch of its first row
            by_batch.setdefault(rows_in[0] // batch_size, []).append((kind, block, _NOTHING, rows_in))
        texts = _key_texts(keys)
        for start in range(0, len(keys), batch_size):
            chosen = range(start, min(start + batch_size, len(keys)))
            part = {keys[row]: StoredRow(values[row], groups[row]) for row in chosen}
            _write(store, block_map, part, _grown(model, by_batch.get(start // batch_size, []), keys, texts))
        state = {
            MODEL_ENTRY: json.dumps(model.to_meta(), ensure_ascii=False).encode(),
            SIZE_ENTRY: _Size(len(keys), generation).encode(),
        }
        store.put_values(STATE_MAP, list(state), list(state.values()))
    return done


def _nothing_to_refit(where: str, key: str) -> ConfigError:
    return ConfigError(
        f"{where} holds no records index to refit; make one with `neardup records SOURCE --key {key} "
        "--index URL`"
    )


def _stable_ids(
    keys: list[RecordKey], before: list[RecordKey], fresh: list[RecordKey]
) -> tuple[list[RecordKey], Refit]:
    """Each row's group id after a refit (:func:`refit_stored`): ``fresh`` groups the rows
    anew (any label per group), ``before`` is each row's stored group id."""
    earlier: dict[RecordKey, set[RecordKey]] = {}
    for key, group in zip(keys, before, strict=True):
        earlier.setdefault(group, set()).add(key)
    members: dict[RecordKey, list[RecordKey]] = {}
    for key, label in zip(keys, fresh, strict=True):
        members.setdefault(label, []).append(key)
    was = dict(zip(keys, before, strict=True))
    name: dict[RecordKey, RecordKey] = {}
    changed = []
    for label, inside in members.items():
        olds = {was[key] for key in inside}
        if len(olds) == 1 and earlier[next(iter(olds))] == set(inside):
            name[label] = next(iter(olds))
        else:
            changed.append(label)
    taken = set(name.values())
    for label in changed:
        inside = members[label]
        held = set(inside)
        tally = Counter(was[key] for key in inside)
        choices = [group for group, _ in tally.most_common() if group in held and group not in taken]
        name[label] = (choices or [key for key in inside if key not in taken] or inside)[0]
        taken.add(name[label])
    groups = [name[label] for label in fresh]
    moved = sum(old != new for old, new in zip(before, groups, strict=True))
    return groups, Refit(len(keys), len(members), len(changed), moved)


# -- later runs and queries -------------------------------------------------------------------


class _Checker:
    """Checks batches of new rows against a store with its model (module docstring)."""

    def __init__(
        self,
        store: Storage,
        model: RecordsModel,
        result: IndexedRecords,
        where: str,
        generation: int,
        blocks: BlockMap | None = None,
    ) -> None:
        self.store = store
        self.model = model
        self.result = result
        self.where = where
        self.blocks = blocks if blocks is not None else open_block_map(store, _Size.read(store, where).rows)
        #: The model's generation (:class:`_Size`): another writer's refit is taken up.
        self.generation = generation
        self.seen: set[RecordKey] = set()
        #: Blocks found or made over their cap: they stay so (stores only grow) until a refit
        #: rebuilds the blocks, so later batches of the run need not read them again.
        self.over: set[int] = set()
        #: The match each added row of the last batch joined, by key.
        self.best: dict[RecordKey, tuple[RecordMatch, ...]] = {}
        self.tops = np.asarray([len(LEVELS[kind]) - 1 for kind in model.kinds], dtype=np.int8)

    def run(self, batch: _Batch) -> None:
        with collector_paused():
            if self.result.mode == "add":
                with self.store.exclusive():
                    self._add(batch)
            else:
                self._query(batch)

    def _query(self, batch: _Batch) -> None:
        """One read of the blocks and one of the stored rows for the whole batch, every
        candidate pair scored at once; nothing is written."""
        self._follow()
        pairs = _BlockPairs.of(self.model, batch.values)
        stored = self._read_blocks(set(pairs.distinct))
        lists = pairs.held(stored)
        open_ = self._open(lists, pairs.types, [1] * len(lists))  # a row is checked alone
        found, names, rows = self._stored_candidates(pairs, open_, batch.keys)
        nodes, others = _nodes(found[1], names, len(batch.keys))
        i, j = found[0], nodes
        chances = self._probabilities(
            _table([*batch.values, *(rows[other].values for other in others)]), i, j
        )
        every = self.result.mode == "all"
        bounds = np.searchsorted(i, np.arange(len(batch.keys) + 1)).tolist()
        named = [names[number] for number in found[1].tolist()]
        for row, key in enumerate(batch.keys):
            candidates = named[bounds[row] : bounds[row + 1]]
            mine = chances[bounds[row] : bounds[row + 1]]
            matches = _matches(candidates, [rows[other].group for other in candidates], mine, self._accepts)
            self.result.rows.append(
                CheckedRow(key, "checked", None, tuple(matches if every else matches[:1]))
            )

    def _add(self, batch: _Batch) -> None:
        """Read the batch's stored rows and blocks once, score every candidate pair at once,
        decide each new row (against stored rows and the new rows before it), write."""
        size = self._follow()
        present = _read_rows(self.store, batch.keys)
        new = []
        for row, key in enumerate(batch.keys):
            if key not in present and key not in self.seen:
                new.append(row)
            self.seen.add(key)
        size = _Size(size.rows + len(new), size.generation)
        state = {}
        if new and size.rows >= GROWTH * max(self.model.fitted, 1):
            self._refit_weights([batch.values[row] for row in new])
        elif self.model.version != MODEL_VERSION:  # read by an older version's rules: stored again
            self.model = dataclasses.replace(self.model, version=MODEL_VERSION)
            self.generation += 1
        if self.generation != size.generation:
            size = _Size(size.rows, self.generation)
            state[MODEL_ENTRY] = json.dumps(self.model.to_meta(), ensure_ascii=False).encode()
        state[SIZE_ENTRY] = size.encode()
        keys = [batch.keys[row] for row in new]
        values = [batch.values[row] for row in new]
        pairs = _BlockPairs.of(self.model, values)
        raw: dict[int, bytes] = {}
        stored = self._read_blocks(set(pairs.distinct), raw)
        lists = pairs.held(stored)
        open_ = self._open(lists, pairs.types, pairs.counts.tolist())
        found, names, rows = self._stored_candidates(pairs, open_, keys)
        members = pairs.members()  # the new rows (positions in keys) of each block
        i, j, others = self._candidate_pairs(pairs, open_, members, found, names, keys)
        chances = self._probabilities(_table([*values, *(rows[other].values for other in others)]), i, j)
        groups = self._decide(keys, others, rows, i, j, chances)
        added = {
            key: StoredRow(row_values, group)
            for key, row_values, group in zip(keys, values, groups, strict=True)
        }
        blocks = zip(pairs.types, pairs.distinct, lists, members, strict=True)
        grown = _grown(self.model, blocks, keys, _key_texts(keys), raw)
        _write(self.store, self.blocks, added, grown, state)
        self._note_over(block for block, data in grown.items() if data == _OVER_CAP_JSON)
        first = dict(zip(keys, new, strict=True))
        for row, key in enumerate(batch.keys):
            if first.get(key) == row:
                self.result.rows.append(CheckedRow(key, "added", added[key].group, self.best.get(key, ())))
                self.result.added += 1
            else:
                before = present[key].group if key in present else None
                self.result.rows.append(CheckedRow(key, "stored", before))
                self.result.skipped += 1

    def _stored_candidates(
        self, pairs: _BlockPairs, open_: Sequence[list[RecordKey] | None], keys: Sequence[RecordKey]
    ) -> tuple[
        tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]], list[RecordKey], dict[RecordKey, StoredRow]
    ]:
        """:func:`_stored_pairs` of the rows still stored (a block may name a row a crash cut
        short), with those rows read."""
        found, named, names = _stored_pairs(pairs, open_, keys)
        used = np.unique(named).tolist()
        rows = _read_rows(self.store, [names[number] for number in used])
        stored = np.zeros(len(names), dtype=bool)
        stored[[number for number in used if names[number] in rows]] = True
        kept = stored[named]
        return (found[kept], named[kept]), names, rows

    def _candidate_pairs(
        self,
        pairs: _BlockPairs,
        open_: Sequence[list[RecordKey] | None],
        members: list[list[int]],
        found: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
        names: list[RecordKey],
        keys: list[RecordKey],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[RecordKey]]:
        """Every candidate pair of the batch's new rows, row by row: its stored candidates
        (``found``), then the new rows before it that share an open block with it. As
        (new row, node) with nodes the new rows then the stored candidates (returned, in key
        order)."""
        shared = {
            block: members[block]
            for block in np.flatnonzero(pairs.counts > 1).tolist()
            if open_[block] is not None
        }
        later = sorted({position for held in shared.values() for position in held[1:]})  # a new row before
        earlier = [_batch_candidates(pairs, shared, open_, at, keys) for at in later]
        nodes, others = _nodes(found[1], names, len(keys))
        i = np.concatenate(
            [found[0], np.repeat(np.asarray(later, dtype=np.int64), [len(rows) for rows in earlier])]
        )
        j = np.concatenate([nodes, np.fromiter(itertools.chain.from_iterable(earlier), dtype=np.int64)])
        order = np.argsort(i, kind="stable")  # a row's stored candidates, then its earlier rows
        return i[order], j[order], others

    def _open(
        self, lists: Sequence[list[RecordKey] | None], types: Sequence[int], counts: Sequence[int]
    ) -> list[list[RecordKey] | None]:
        """Per distinct block of the batch, its stored rows, or None where it makes no pairs:
        over its cap for good, or past its type's cap with ``counts`` rows of the batch (the
        batch's new rows in it, or the row itself in a query). The copies block has no cap."""
        specs, caps = len(self.model.specs), self.model.caps
        return [
            None if held is None or (kind < specs and len(held) + count > caps[kind]) else held
            for held, kind, count in zip(lists, types, counts, strict=True)
        ]

    def _read_blocks(
        self, blocks: set[int], raw: dict[int, bytes] | None = None
    ) -> dict[int, list[RecordKey] | None]:
        """:func:`_read_blocks` of the blocks not known to be over their cap (those are None)."""
        over = self.over
        stored = _read_blocks(self.blocks, [block for block in blocks if block not in over], raw)
        self._note_over(block for block, held in stored.items() if held is None)
        stored.update(dict.fromkeys(blocks & over))
        return stored

    def _note_over(self, blocks: Iterable[int]) -> None:
        if len(self.over) > OVER_CAP_KEPT:
            self.over.clear()
        self.over.update(blocks)

    def _follow(self) -> _Size:
        """The store's size entry, with the model of its generation taken up if another
        writer refitted it since this checker read it (under the writer lock)."""
        size = _Size.read(self.store, self.where)
        if size.generation != self.generation:
            stored = _stored(self.store, self.where)
            if stored is None:
                raise StorageDamagedError(f"{self.where}: the records index has gone from the store")
            self.model, self.generation = stored
            self.over.clear()  # a refit rebuilt the blocks, maybe in another layout
            self.blocks = open_block_map(self.store, size.rows)
            self.result.model = self.model
        return size

    def _refit_weights(self, new: list[Values]) -> None:
        """Fit the weights, word weights and term frequencies again on every stored row and
        the batch's new ones, as the batch learns from the rows it decides. The key types and
        caps stay (the stored blocks were made by them), and so do the stored groups."""
        values = [row.values for row in _scan_rows(self.store).values()] + new
        fit = fit_table(_key_columns(self.model.columns, values), len(values))
        self.model = dataclasses.replace(
            self.model,
            weights=fit.weights,
            learned=fit.learned,
            idf=fit.table.idf,
            terms=stored_terms(fit.counts),
            fitted=len(values),
            version=MODEL_VERSION,
        )
        self.generation += 1
        self.result.model = self.model
        self.result.refitted.append(len(values))

    def _decide(
        self,
        keys: list[RecordKey],
        stored: list[RecordKey],
        rows: dict[RecordKey, StoredRow],
        i: npt.NDArray[np.int64],
        j: npt.NDArray[np.int64],
        chances: npt.NDArray[np.float64],
    ) -> list[RecordKey]:
        """The new rows' groups, joined as the batch joins rows (accepted pairs most
        probable first, under the chain guard: :func:`~neardup.records.learned.guarded_pairs`),
        except that two stored groups are never joined: a component holding stored rows takes
        their group, any other the key of its first new row. Nodes are the new ``keys``, then
        the ``stored`` candidates; pair ``k`` is (new row ``i[k]``, node ``j[k]``)."""
        names = [*keys, *stored]
        accepted = np.flatnonzero(chances >= self._limit()).astype(np.int64)
        first_of: dict[RecordKey, int] = {}
        first = np.arange(len(names), dtype=np.int64)
        for index, key in enumerate(stored, len(keys)):
            first[index] = first_of.setdefault(rows[key].group, index)
        apart = np.arange(len(names)) >= len(keys)
        kept = guarded_pairs(i, j, chances, accepted, first, apart)
        links = np.flatnonzero(first != np.arange(len(names)))
        cluster = cluster_records(
            len(names), np.concatenate([i[kept], links]), np.concatenate([j[kept], first[links]])
        ).cluster.tolist()
        anchor = {cluster[index]: rows[key].group for index, key in enumerate(stored, len(keys))}
        groups: list[RecordKey] = [anchor.get(label, keys[min(label, len(keys) - 1)]) for label in cluster]
        self.best = {}
        likelier = accepted[np.argsort(-chances[accepted], kind="stable")]  # ties in pair order
        for left, right, chance in zip(
            i[likelier].tolist(), j[likelier].tolist(), chances[likelier].tolist(), strict=True
        ):
            if groups[left] == groups[right] and keys[left] not in self.best:
                self.best[keys[left]] = (RecordMatch(names[right], groups[right], chance),)
        # the component of a new row holds a new row or a stored group
        return groups[: len(keys)]

    def _probabilities(
        self, table: npt.NDArray[np.object_], i: npt.NDArray[np.int64], j: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """The match probability of each pair of rows ``(table[i[k]], table[j[k]])`` (1 for an
        exact copy), a column of all the batch's pairs at a time."""
        if not len(i):
            return np.zeros(0, dtype=np.float64)
        model = self.model
        levels = np.full((len(i), len(model.columns)), -1, dtype=np.int8)
        shared = []
        equal = np.ones(len(i), dtype=bool)
        for column, kind in enumerate(model.kinds):
            left, right = table[i, column], table[j, column]
            levels[:, column] = compare_values(left, right, kind, model.idf[column])
            differ = left != right
            equal &= ~differ
            same = left.copy()
            same[differ] = None
            shared.append(same)
        copies = equal & (table[i] != None).any(axis=1)  # noqa: E711 - elementwise on objects
        if model.learned:
            pairs = PairLevels(model.names, model.kinds, levels, tuple(shared))
            chances = match_probability(model.weights, pairs, model.terms)
        else:
            compared = (levels >= 0).sum(axis=1)
            agreeing = (levels >= self.tops - 1).sum(axis=1)
            share = np.where(compared > 0, agreeing / np.maximum(compared, 1), 0.0)
            chances = np.where(share >= FEW_PAIRS_AGREEMENT, 1.0, 0.0)
        return np.where(copies, 1.0, chances)

    def _limit(self) -> float:
        # with nothing learned, the agreement rule alone decides (as in the batch)
        return self.model.threshold if self.model.learned else 1.0

    def _accepts(self, probability: float) -> bool:
        return probability >= self._limit()


def _nodes(
    named: npt.NDArray[np.int64], names: list[RecordKey], first: int
) -> tuple[npt.NDArray[np.int64], list[RecordKey]]:
    """The node of each candidate (``names[named[k]]``): ``first`` plus its place among the
    distinct candidates in key order (the nodes before are the batch's rows); and those."""
    used = np.unique(named).tolist()
    others = _in_order(names[number] for number in used)
    place = {name: number for number, name in enumerate(others, first)}
    node_of = np.zeros(len(names), dtype=np.int64)
    node_of[used] = [place[names[number]] for number in used]
    return node_of[named], others


def _table(rows: Sequence[Values]) -> npt.NDArray[np.object_]:
    """Rows of values as one (rows, columns) object array, for pairs taken by index."""
    width = len(rows[0]) if rows else 0
    table = np.empty((len(rows), width), dtype=object)
    if rows:
        table[:] = rows  # a sequence of equal-length lists fills the rows
    return table


def _matches(
    keys: list[RecordKey],
    groups: list[RecordKey],
    chances: npt.NDArray[np.float64],
    accepts: Callable[[float], bool],
) -> list[RecordMatch]:
    """The accepted candidates, most probable first (ties in candidate order)."""
    found = [
        RecordMatch(key, group, float(chance))
        for key, group, chance in zip(keys, groups, chances.tolist(), strict=True)
        if accepts(chance)
    ]
    return sorted(found, key=lambda match: -match.probability)


def _in_order(keys: Iterable[RecordKey]) -> list[RecordKey]:
    """``keys`` sorted, ints before texts: keys of one type (the usual table) sort as they
    are; a mix fails to compare and is sorted again by type first."""
    out = list(keys)
    try:
        out.sort()
    except TypeError:
        out.sort(key=_order)
    return out


def _order(key: RecordKey) -> tuple[bool, str | int]:
    return (isinstance(key, str), key)
