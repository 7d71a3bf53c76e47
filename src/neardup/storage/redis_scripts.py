"""The Lua scripts of the Redis store (:mod:`neardup.storage.redis`), and the encodings of
bucket names, bucket entries and script arguments they share with Python.

Redis runs a script to completion before any other command, so each write below checks and
writes as one step; under ``appendfsync always`` its writes reach the AOF as one MULTI/EXEC
block. Every script works a batch in chunks of :data:`CHUNK` arguments per command (Lua's
``unpack`` is bounded by its C stack), and touches each bucket through multi-key commands
(MGET, MSET, DEL; HMGET, HSET, HDEL of many fields in layout 3) wherever it can: each
``redis.call`` costs the server a fixed overhead on top of the command itself, which one call
per bucket (one per table and record) would make most of a batch's time.

A bucket (a string in layout 2, a hash field in layout 3) is a string of entries, each the
record's fingerprint words (``width`` bytes), the length of its typed key (2 bytes,
little-endian) and the typed key (see :mod:`neardup.storage.redis`).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import StorageDamagedError

#: Keys or (name, value) pairs per multi-key command inside a script.
CHUNK = 1000

# Shared by ADD and REMOVE. KEYS: records, lock. ARGV: the lock token ('' outside the writer
# lock), n (records), the fingerprint's width in bytes, n typed keys, n packed records, n
# values (a record's entry), T (tables), the name width, then per table its bucket names as
# one string of equal-width names and an index ('' when bucket j takes value j; else one
# 4-byte little-endian value number per bucket, those above n naming the extra values that
# end ARGV). ``buckets(handle)`` calls ``handle(names, values)`` a chunk at a time; a value
# returned stops it and is returned.
_PRELUDE = f"""
local chunk = {CHUNK}
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return {{3}} end
local n, width = tonumber(ARGV[2]), tonumber(ARGV[3])
local keys, values = 3, 3 + 2 * n
local function buckets(handle)
  local tables, size = tonumber(ARGV[4 + 3 * n]), tonumber(ARGV[5 + 3 * n])
  local extras, names, chosen = 5 + 3 * n + 2 * tables - values - n, {{}}, {{}}
  for t = 1, tables do
    local blob, index = ARGV[4 + 3 * n + 2 * t], ARGV[5 + 3 * n + 2 * t]
    for j = 1, #blob / size do
      names[#names + 1] = string.sub(blob, (j - 1) * size + 1, j * size)
      local v = j
      if index ~= '' then
        local a, b, c, d = string.byte(index, 4 * j - 3, 4 * j)
        v = a + 256 * (b + 256 * (c + 256 * d))
        if v > n then v = v + extras end
      end
      chosen[#chosen + 1] = ARGV[values + v]
      if #names == chunk then
        local stop = handle(names, chosen)
        if stop then return stop end
        names, chosen = {{}}, {{}}
      end
    end
  end
  if #names > 0 then return handle(names, chosen) end
end
"""

# Lua shared by the layouts' scripts (after their prelude). Records: refused when a key is
# twice in the batch ({2, key}) or stored already ({1, key}), else written to the records hash.
_ADD_RECORDS = """
local seen = {}
for i = keys + 1, keys + n do
  if seen[ARGV[i]] then return {2, ARGV[i]} end
  seen[ARGV[i]] = true
end
for first = keys + 1, keys + n, chunk do
  local last = math.min(first + chunk - 1, keys + n)
  local stored = redis.call('HMGET', KEYS[1], unpack(ARGV, first, last))
  for j = 1, #stored do
    if stored[j] then return {1, ARGV[first + j - 1]} end
  end
end
for first = keys + 1, keys + n, chunk do
  local both = {}
  for i = first, math.min(first + chunk - 1, keys + n) do
    both[#both + 1] = ARGV[i]
    both[#both + 1] = ARGV[i + n]
  end
  redis.call('HSET', KEYS[1], unpack(both))
end
"""
# Each record to remove must be stored ({1, key} if not) as the caller read it ({4, key}).
_CHECK_REMOVED = """
for first = keys + 1, keys + n, chunk do
  local last = math.min(first + chunk - 1, keys + n)
  local stored = redis.call('HMGET', KEYS[1], unpack(ARGV, first, last))
  for j = 1, #stored do
    local i = first + j - 1
    if not stored[j] then return {1, ARGV[i]} end
    if stored[j] ~= ARGV[i + n] then return {4, ARGV[i]} end
  end
end
"""
# A bucket string's entries (typed key, start, end), and buckets without the entries removed.
_ENTRIES_OF = """
local function entries_of(text)
  local out, at = {}, 1
  while at <= #text do
    local low, high = string.byte(text, at + width, at + width + 1)
    if not high then return nil end
    local stop = at + width + 1 + low + 256 * high
    if stop > #text then return nil end
    out[#out + 1] = {string.sub(text, at + width + 2, stop), at, stop}
    at = stop + 1
  end
  return out
end
-- Each bucket names[j] (its value stored[j]) without the entries chosen[j]: emptied ones go to
-- gone, shortened ones to rewrites (name, kept entries); the j of a value that does not parse.
local function drop_entries(names, stored, chosen, gone, rewrites)
  for j = 1, #names do
    local value = stored[j]
    if value == chosen[j] then
      gone[#gone + 1] = names[j]
    elseif value then
      local drop, entries = {}, entries_of(value)
      if not entries then return j end
      for _, entry in ipairs(entries_of(chosen[j]) or {}) do drop[entry[1]] = true end
      local kept = {}
      for _, entry in ipairs(entries) do
        if not drop[entry[1]] then kept[#kept + 1] = string.sub(value, entry[2], entry[3]) end
      end
      if #kept == 0 then
        gone[#gone + 1] = names[j]
      elseif #kept < #entries then
        rewrites[#rewrites + 1] = names[j]
        rewrites[#rewrites + 1] = table.concat(kept)
      end
    end
  end
  return nil
end
"""

# Values: each record's entry. Returns {0} when written, {1, key} for a key already stored,
# {2, key} for a key twice in the batch, {3} when the caller's writer lock is no longer held
# (expired; nothing written).
ADD = (
    _PRELUDE
    + _ADD_RECORDS
    + """
buckets(function(names, chosen)
  local stored = redis.call('MGET', unpack(names))
  local fresh = {}
  for j = 1, #names do
    if stored[j] then
      redis.call('APPEND', names[j], chosen[j])
    else
      fresh[#fresh + 1] = names[j]
      fresh[#fresh + 1] = chosen[j]
    end
  end
  if #fresh > 0 then redis.call('MSET', unpack(fresh)) end
end)
return {0}
"""
)

# Records: the packed records the caller read; values: the entries to drop. Returns {0},
# {1, key} for a key not stored, {3} for a lost lock, {4, key} for a record changed since it
# was read, {5, name} for a bucket whose entries do not parse (a damaged store). Nothing is
# written unless it returns {0}.
REMOVE = (
    _PRELUDE
    + _CHECK_REMOVED
    + _ENTRIES_OF
    + """
local rewrites, gone = {}, {}
local damaged = buckets(function(names, chosen)
  local bad = drop_entries(names, redis.call('MGET', unpack(names)), chosen, gone, rewrites)
  if bad then return {5, names[bad]} end
end)
if damaged then return damaged end
for first = keys + 1, keys + n, chunk do
  redis.call('HDEL', KEYS[1], unpack(ARGV, first, math.min(first + chunk - 1, keys + n)))
end
for first = 1, #gone, chunk do
  redis.call('DEL', unpack(gone, first, math.min(first + chunk - 1, #gone)))
end
for first = 1, #rewrites, 2 * chunk do
  redis.call('MSET', unpack(rewrites, first, math.min(first + 2 * chunk - 1, #rewrites)))
end
return {0}
"""
)

# Layout 3: one hash per table (KEYS[3], KEYS[4], …: ``P:h{table}``), whose fields are the
# table's posting keys (fixed-width bytes) and whose values are the bucket's entries. ARGV as
# in ``_PRELUDE``, the table's field width in place of the name width; ``buckets(handle)``
# calls ``handle(hash, fields, values)`` a chunk of one table at a time.
_PRELUDE_3 = f"""
local chunk = {CHUNK}
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return {{3}} end
local n, width = tonumber(ARGV[2]), tonumber(ARGV[3])
local keys, values = 3, 3 + 2 * n
local function buckets(handle)
  local tables, size = tonumber(ARGV[4 + 3 * n]), tonumber(ARGV[5 + 3 * n])
  local extras = 5 + 3 * n + 2 * tables - values - n
  for t = 1, tables do
    local blob, index = ARGV[4 + 3 * n + 2 * t], ARGV[5 + 3 * n + 2 * t]
    local names, chosen = {{}}, {{}}
    for j = 1, #blob / size do
      names[#names + 1] = string.sub(blob, (j - 1) * size + 1, j * size)
      local v = j
      if index ~= '' then
        local a, b, c, d = string.byte(index, 4 * j - 3, 4 * j)
        v = a + 256 * (b + 256 * (c + 256 * d))
        if v > n then v = v + extras end
      end
      chosen[#chosen + 1] = ARGV[values + v]
      if #names == chunk or j == #blob / size then
        local stop = handle(KEYS[2 + t], names, chosen)
        if stop then return stop end
        names, chosen = {{}}, {{}}
      end
    end
  end
end
"""

# As ADD: one HMGET and one HSET per chunk of a table (a bucket's entries, old and new).
ADD_3 = (
    _PRELUDE_3
    + _ADD_RECORDS
    + """
buckets(function(hash, names, chosen)
  local stored = redis.call('HMGET', hash, unpack(names))
  local both = {}
  for j = 1, #names do
    both[#both + 1] = names[j]
    if stored[j] then both[#both + 1] = stored[j] .. chosen[j] else both[#both + 1] = chosen[j] end
  end
  redis.call('HSET', hash, unpack(both))
end)
return {0}
"""
)

# As REMOVE, bucket by bucket of each table's hash (HDEL of emptied fields, HSET of the rest).
REMOVE_3 = (
    _PRELUDE_3
    + _CHECK_REMOVED
    + _ENTRIES_OF
    + """
local writes = {}
local damaged = buckets(function(hash, names, chosen)
  local gone, rewrites = {}, {}
  if drop_entries(names, redis.call('HMGET', hash, unpack(names)), chosen, gone, rewrites) then
    return {5, hash}
  end
  writes[#writes + 1] = {hash, gone, rewrites}
end)
if damaged then return damaged end
for first = keys + 1, keys + n, chunk do
  redis.call('HDEL', KEYS[1], unpack(ARGV, first, math.min(first + chunk - 1, keys + n)))
end
for _, write in ipairs(writes) do
  if #write[2] > 0 then redis.call('HDEL', write[1], unpack(write[2])) end
  if #write[3] > 0 then redis.call('HSET', write[1], unpack(write[3])) end
end
return {0}
"""
)

# Layout 3's lookup. KEYS: the table hashes; ARGV: the field width, then per table its fields
# in one string. Returns {position, value, …} of the fields found (positions counted from 0
# over all tables' fields, in order): a batch's tens of thousands of fields travel as T
# strings, and only the buckets found come back.
QUERY_3 = f"""
local chunk, size = {CHUNK}, tonumber(ARGV[1])
local out, base = {{}}, 0
for t = 1, #KEYS do
  local blob = ARGV[1 + t]
  local count = #blob / size
  for first = 1, count, chunk do
    local last = math.min(first + chunk - 1, count)
    local names = {{}}
    for j = first, last do names[#names + 1] = string.sub(blob, (j - 1) * size + 1, j * size) end
    local stored = redis.call('HMGET', KEYS[t], unpack(names))
    for j = 1, #stored do
      if stored[j] then
        out[#out + 1] = base + first + j - 2
        out[#out + 1] = stored[j]
      end
    end
  end
  base = base + count
end
return out
"""

# KEYS: meta, layout. ARGV: meta JSON, layout. Creates both, or neither when the meta exists.
CREATE = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""

RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

_LENGTH = struct.Struct("<H")
_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def entry(fingerprint: bytes, field: bytes) -> bytes:
    """A record's entry in its buckets: fingerprint bytes, typed key length, typed key."""
    return fingerprint + _LENGTH.pack(len(field)) + field


def bucket_entries(value: bytes, width: int, name: bytes | str = "") -> list[tuple[bytes, bytes]]:
    """(fingerprint bytes, typed key) of each entry of a bucket string; ``width`` is the
    fingerprint's size in bytes. Entries that do not parse are a damaged store."""
    entries = []
    position, end = 0, len(value)
    while position + width + 2 <= end:
        start = position + width + 2
        stop = start + value[start - 2] + (value[start - 1] << 8)
        if stop > end:
            break
        entries.append((value[position : position + width], value[start:stop]))
        position = stop
    if position != end:
        shown = name.decode() if isinstance(name, bytes) else name
        raise StorageDamagedError(f"the Redis bucket {shown} is damaged (its entries do not parse)")
    return entries


def name_widths(columns: int, posting_bits: int) -> tuple[int, int]:
    """Digits of the table (posting column) number and hex digits of the block (posting) key
    in every bucket name of a store of ``columns`` columns whose widest key has
    ``posting_bits`` bits (all names of a store are as long)."""
    return len(str(columns - 1)), max(1, (posting_bits + 3) // 4)


def bucket_names(
    prefix: str, widths: tuple[int, int], tables: npt.NDArray[np.int64], keys: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint8]:
    """``P:b{table}:{hex}`` of each (table, block key), zero-padded to ``widths``, as rows of
    bytes formatted in numpy (one name per table and record: an f-string each cost more than
    the server's work)."""
    head = f"{prefix}:b".encode()
    digits, hex_digits = widths
    out = np.empty((keys.shape[0], len(head) + digits + 1 + hex_digits), dtype=np.uint8)
    out[:, : len(head)] = np.frombuffer(head, dtype=np.uint8)
    scale = 10 ** np.arange(digits - 1, -1, -1, dtype=np.int64)
    out[:, len(head) : len(head) + digits] = (tables[:, None] // scale) % 10 + ord("0")
    out[:, len(head) + digits] = ord(":")
    shifts = np.arange(4 * (hex_digits - 1), -1, -4, dtype=np.uint64)
    out[:, len(head) + digits + 1 :] = _HEX_DIGITS[(keys[:, None] >> shifts) & np.uint64(15)]
    return out


class Buckets:
    """The distinct (table, block key) buckets of a batch's (n, T) block keys, table by table
    in key order: ``tables`` and ``keys`` of each; ``rows`` lists the batch rows table by
    table in that order, so bucket b is named by rows[starts[b] : starts[b] + counts[b]]."""

    def __init__(self, blocks: npt.NDArray[np.uint64]) -> None:
        count, tables = blocks.shape
        keyed = np.ascontiguousarray(blocks.T)
        order = np.argsort(keyed, axis=1, kind="stable")
        ordered = np.take_along_axis(keyed, order, axis=1)
        first = np.ones((tables, count), dtype=bool)
        first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        self.starts = np.flatnonzero(first)
        self.counts = np.diff(np.append(self.starts, tables * count))
        self.tables = self.starts // max(count, 1)
        self.keys = ordered.reshape(-1)[self.starts]
        self.rows = order.reshape(-1)


def bucket_fields(width: int, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint8]:
    """The field of each posting key in its table's hash (layout 3): its ``width`` low bytes,
    little-endian, as rows of bytes."""
    little = np.ascontiguousarray(keys, dtype="<u8").view(np.uint8).reshape(-1, 8)
    return np.ascontiguousarray(little[:, :width])


def field_width(posting_bits: int) -> int:
    """Bytes of every field of a layout-3 store whose widest posting key has ``posting_bits``."""
    return max(1, (posting_bits + 7) // 8)


Names = Callable[[npt.NDArray[np.int64], npt.NDArray[np.uint64]], npt.NDArray[np.uint8]]


def bucket_args(names: Names, blocks: npt.NDArray[np.uint64], entries: list[bytes]) -> list[Any]:
    """The buckets part of a write script's ARGV (see ``_PRELUDE``), given the records'
    (n, T) posting keys and ``names``, the layout's bucket names (or hash fields) of (table,
    key) pairs as equal-width rows of bytes: per table its bucket names in one string and
    each bucket's value number ('' when the table's buckets are the records', in order;
    records sharing a bucket are joined in an extra value)."""
    count = len(entries)
    tables = blocks.shape[1]
    found = Buckets(blocks)
    in_order = names(np.repeat(np.arange(tables), count), blocks.T.reshape(-1))
    distinct = names(found.tables, found.keys)
    bounds = np.searchsorted(found.starts, np.arange(tables + 1) * count).tolist()
    args: list[Any] = [tables, in_order.shape[1]]
    extras: list[bytes] = []
    for table, (low, high) in enumerate(itertools.pairwise(bounds)):
        if high - low == count:
            args += [in_order[table * count : (table + 1) * count].tobytes(), b""]
            continue
        starts, sizes = found.starts[low:high], found.counts[low:high]
        index = (found.rows[starts] + 1).astype("<u4")
        shared = np.flatnonzero(sizes > 1)
        index[shared] = count + len(extras) + 1 + np.arange(shared.size)
        extras += [
            b"".join(entries[row] for row in found.rows[start : start + size])
            for start, size in zip(starts[shared].tolist(), sizes[shared].tolist(), strict=True)
        ]
        args += [distinct[low:high].tobytes(), index.tobytes()]
    return args + extras
