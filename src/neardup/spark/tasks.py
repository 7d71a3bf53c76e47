"""The work of each Spark task, as plain functions over iterators of tuples.

Nothing here imports pyspark: Spark hands a partition's rows to these functions through
``mapPartitions``, and tests call them directly. Each function is the Spark-side twin of a
step of ``neardup dedup`` and calls the same core: :mod:`neardup.io`'s record checks,
:meth:`Fingerprinter.encode_many` over batches, and :func:`~neardup.dedup.batch.row_distances`
with the block masks of the same :class:`~neardup.blocks.BlockScheme` for verification.

Records are named by an *order key*, a 64-bit integer that sorts like the input: the rank of
the file (input files sorted by path) in the top bits, then the position inside the file —
for JSONL the byte offset of the split plus the line's index within the split (unique,
because a split of B bytes holds at most B lines), for Parquet the row index. Clusters take
the smallest order key, so "the earliest record" means the same as in ``neardup dedup``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from ..blocks import BitSelection, BlockScheme
from ..dedup.batch import pairs_in_runs, row_distances
from ..errors import InputError
from ..fingerprint import Fingerprinter
from ..io import InputLine, Record, RecordFields, jsonl_record, parquet_record, record_row, too_long_error

#: Bits of the order key left for the position inside a file (4 TiB of JSONL, 2^42 rows).
POSITION_BITS = 42
POSITION_MASK = (1 << POSITION_BITS) - 1
#: Rows of sorted block keys verified per step: bounds a task's temporary arrays.
VERIFY_CHUNK = 1 << 18

IntArray = npt.NDArray[np.int64]
UInt64Array = npt.NDArray[np.uint64]
#: (order, id as JSON, text length, empty, low word, high word, record as JSON, error reason,
#: then with the shingle LSH: text, band keys, check bins, short shingles)
FingerprintRow = tuple[Any, ...]
#: (order of a, order of b, distance, table) with a before b in the input
PairRow = tuple[int, int, int, int]


def order_key(file_rank: int, position: int) -> int:
    """The order key of a record: file rank, then position in the file (see above)."""
    if position > POSITION_MASK:
        raise InputError(f"a position past {POSITION_MASK:,} in one file is beyond the Spark job's order key")
    return (file_rank << POSITION_BITS) | position


def signed(value: int) -> int:
    """An unsigned 64-bit word as Spark's signed long (same bits)."""
    return value - (1 << 64) if value >> 63 else value


@dataclass(frozen=True)
class ReadSettings:
    """How a task turns input rows into records: the field names and limits of ``neardup
    dedup``'s input options, and the input files in order (a file's rank is its index)."""

    format: str
    id_field: str = "id"
    text_field: str = "text"
    title_field: str = "title"
    max_bytes: int = 64 * 1024 * 1024
    files: tuple[str, ...] = ()
    keep_rows: bool = False

    @property
    def fields(self) -> RecordFields:
        return RecordFields(self.id_field, self.text_field, self.title_field, self.max_bytes)

    def rank(self, path: str) -> int:
        try:
            return self.files.index(canonical_path(path))
        except ValueError:
            raise InputError(f"{path} was not among the input files listed when the job started") from None


def canonical_path(uri: str) -> str:
    """One spelling per file: Spark lists ``file:///x`` but tags rows with ``file:/x``."""
    return "file:/" + uri[len("file:///") :] if uri.startswith("file:///") else uri


# -- reading ------------------------------------------------------------------------------------


def jsonl_records(
    rows: Iterable[tuple[str, int, bytes]], settings: ReadSettings
) -> Iterator[tuple[int, Record | InputError]]:
    """(order, record or error) for rows of Spark's text source: (file, split start, line bytes).

    A split's rows arrive together and in file order, so a row's index within its split is
    counted here. Blank lines are not records, as in :func:`neardup.io.read_records`. File
    offsets in UTF-8 error reasons are exact in a file's first split; later splits count from
    the split's start, as Spark does not say where its first whole line begins.
    """
    fields = settings.fields
    current: tuple[str, int] | None = None
    position = offset = rank = 0
    for path, start, raw in rows:
        if (path, start) != current:
            current, position, offset, rank = (path, start), 0, start, settings.rank(path)
        else:
            position += 1
        line_bytes = bytes(raw)
        data = line_bytes.removesuffix(b"\r")
        order = order_key(rank, start + position)
        line = InputLine(1 if start == 0 and position == 0 else 2, offset, data, len(data))
        offset += len(line_bytes) + 1
        if len(data) > fields.max_bytes:
            yield order, InputError(too_long_error(len(data), fields).reason)
            continue
        if not data.strip():
            continue
        record = jsonl_record(line, data, fields, "")
        yield order, (InputError(record.reason) if isinstance(record, InputError) else record)


def parquet_records(
    rows: Iterable[tuple[Any, ...]], settings: ReadSettings
) -> Iterator[tuple[int, Record | InputError]]:
    """(order, record or error) for Parquet rows: (file, row index, id, text[, title])."""
    fields = settings.fields
    for row in rows:
        path, index = row[0], row[1]
        data = {fields.id: row[2], fields.text: row[3]}
        if len(row) > 4:
            data[fields.title] = row[4]
        record = parquet_record(data, fields, "")
        yield (
            order_key(settings.rank(path), index),
            InputError(record.reason) if isinstance(record, InputError) else record,
        )


def id_json(record_id: Any) -> str:
    """An id as ``write_jsonl`` writes it inside a row, so lines built from it match byte for byte."""
    return json.dumps(record_id, ensure_ascii=False, separators=(",", ":"))


# -- fingerprints -------------------------------------------------------------------------------


def fingerprint_records(
    records: Iterable[tuple[int, Record | InputError]],
    fingerprinter: Fingerprinter,
    settings: ReadSettings,
    batch_size: int,
    characters: int,
    lsh: bool = False,
) -> Iterator[FingerprintRow]:
    """One row per record (or per bad record, with its reason) in batches through
    :meth:`Fingerprinter.encode_many`, the same call and batching ``neardup dedup`` makes;
    with ``lsh``, also the text and its shingle LSH features (:func:`~neardup.spark.lsh.lsh_features`)."""
    batch: list[tuple[int, Record]] = []
    total = 0
    for order, item in records:
        if isinstance(item, InputError):
            yield order, None, 0, False, 0, 0, None, item.reason, None, None, None, None
            continue
        batch.append((order, item))
        total += len(item.text)
        if len(batch) >= batch_size or total >= characters:
            yield from _fingerprint_batch(batch, fingerprinter, settings, lsh)
            batch, total = [], 0
    if batch:
        yield from _fingerprint_batch(batch, fingerprinter, settings, lsh)


def _fingerprint_batch(
    batch: Sequence[tuple[int, Record]], fingerprinter: Fingerprinter, settings: ReadSettings, lsh: bool
) -> Iterator[FingerprintRow]:
    records = [record for _, record in batch]
    features: list[tuple[Any, ...]] = [(None, None, None, None)] * len(records)
    if lsh:
        from .lsh import lsh_features  # imports pyspark, which only the job's workers need

        texts = [r.text for r in records]
        found = lsh_features(texts, fingerprinter.normalizer)
        features = [(text, *row) for text, row in zip(texts, found, strict=True)]
    encoded = fingerprinter.encode_many([r.text for r in records], [r.title for r in records])
    words = np.asarray(encoded.fingerprints, dtype=np.uint64).reshape(len(records), -1).view(np.int64)
    low = words[:, 0].tolist()
    high = words[:, 1].tolist() if words.shape[1] == 2 else [0] * len(records)
    empty = (encoded.feature_counts == 0).tolist()
    fields = (settings.id_field, settings.text_field, settings.title_field)
    for index, (order, record) in enumerate(batch):
        row = record_json(record, fields) if settings.keep_rows else None
        values = (
            order,
            id_json(record.id),
            len(record.text),
            empty[index],
            low[index],
            high[index],
            row,
            None,
        )
        yield (*values, *features[index])


def record_json(record: Record, fields: tuple[str, str, str]) -> str:
    """The record as ``--emit`` writes it (the line ``neardup dedup`` would write)."""
    return json.dumps(record_row(record, fields), ensure_ascii=False, separators=(",", ":"))


# -- verification -------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyPlan:
    """The masks that decide which table (and sub-block) emits a pair, from one scheme.

    Keys are the tables' first 64 bits (``prefix(64)``), the same bits the job groups on; a
    pair is emitted by the first table whose key it agrees on, and inside a split bucket by
    the first sub-block it agrees on, so every pair is emitted exactly once.
    """

    scheme: BlockScheme
    max_distance: int

    @cached_property
    def keys(self) -> tuple[BitSelection, ...]:
        return tuple(table.prefix(64) for table in self.scheme.tables)

    def sub_blocks(self, table: int) -> tuple[BitSelection, ...]:
        return self.scheme.sub_blocks(self.keys[table])

    def table_masks(self) -> list[UInt64Array]:
        return [key.mask(self.scheme.words) for key in self.keys]

    def sub_masks(self) -> list[list[UInt64Array]]:
        return [[sub.mask(self.scheme.words) for sub in self.sub_blocks(t)] for t in range(len(self.keys))]


#: (table, sub-block or -1, key, sub-block key, order, low word, high word), sorted in that order
GroupRow = tuple[int, int, int, int, int, int, int]


def verify_groups(
    rows: Iterable[GroupRow], plan: VerifyPlan, candidates: Callable[[int, int], object] | None = None
) -> Iterator[PairRow]:
    """All pairs within the distance among rows sorted by (table, sub, key, sub key, order).

    Rows come in chunks that end at a group boundary, so a group is never cut (a group larger
    than a chunk is held whole). ``candidates(table, count)`` is told how many pairs were
    compared, for the bucket statistics.
    """
    table_masks, sub_masks = plan.table_masks(), plan.sub_masks()
    pending: list[GroupRow] = []
    for row in rows:
        if len(pending) >= VERIFY_CHUNK and row[:4] != pending[-1][:4]:
            yield from _verify_chunk(pending, plan.max_distance, table_masks, sub_masks, candidates)
            pending = []
        pending.append(row)
    if pending:
        yield from _verify_chunk(pending, plan.max_distance, table_masks, sub_masks, candidates)


def _verify_chunk(
    rows: list[GroupRow],
    max_distance: int,
    table_masks: list[UInt64Array],
    sub_masks: list[list[UInt64Array]],
    candidates: Callable[[int, int], object] | None,
) -> Iterator[PairRow]:
    array = np.array(rows, dtype=np.int64).reshape(-1, 7)
    table, sub, group = array[:, 0], array[:, 1], array[:, :4]
    orders = array[:, 4]
    width = table_masks[0].size
    words = np.ascontiguousarray(array[:, 5 : 5 + width]).view(np.uint64)
    # Segments of one (table, sub-block): each has its own masks.
    change = np.flatnonzero((table[1:] != table[:-1]) | (sub[1:] != sub[:-1])) + 1
    bounds = np.concatenate(([0], change, [len(rows)]))
    same = np.all(group[1:] == group[:-1], axis=1)
    for begin, end in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        t, s = int(table[begin]), int(sub[begin])
        earlier = [*table_masks[:t], *(sub_masks[t][:s] if s > 0 else [])]
        starts, lengths = _runs(same[begin : end - 1], begin)
        for a, b in pairs_in_runs(starts, lengths):
            if candidates is not None:
                candidates(t, int(a.size))
            xor = words[a] ^ words[b]
            distance = row_distances(xor)
            keep = distance <= max_distance
            for mask in earlier:
                keep &= ~np.all((xor & mask) == 0, axis=1)
            for i, j, d in zip(
                orders[a[keep]].tolist(), orders[b[keep]].tolist(), distance[keep].tolist(), strict=True
            ):
                yield i, j, d, t


def _runs(same: npt.NDArray[np.bool_], offset: int) -> tuple[IntArray, IntArray]:
    """(starts, lengths) of runs of >= 2 equal rows, from "row p equals row p + 1" flags."""
    equal_at = np.flatnonzero(same)
    if equal_at.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    breaks = np.flatnonzero(np.diff(equal_at) != 1) + 1
    first = np.concatenate(([0], breaks))
    last = np.concatenate((breaks - 1, [equal_at.size - 1]))
    starts = equal_at[first]
    return (starts + offset).astype(np.int64), (equal_at[last] - starts + 2).astype(np.int64)
