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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..fingerprint.fingerprinter import Fingerprinter
from ..io.lines import InputLine
from ..io.read import jsonl_record, parquet_record
from ..io.record import Record, RecordFields, record_row, too_long_error

#: Bits of the order key left for the position inside a file (4 TiB of JSONL, 2^42 rows).
POSITION_BITS = 42
POSITION_MASK = (1 << POSITION_BITS) - 1
#: (order, id as JSON, text length, empty, low word, high word, record as JSON, error reason,
#: then with the shingle LSH: text, band keys, check bins, short shingles)
FingerprintRow = tuple[Any, ...]


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
    counted here. Blank lines are not records, as in :func:`neardup.io.read.read_records`. File
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
