"""Posting keys and run filters of the runs layout (:mod:`neardup.storage.runs`).

A posting key is one (table, block key) pair as one signed 64-bit integer, so a query batch is
one lookup of one set of integers; a run's filter is a blocked Bloom filter of its keys, so a
query asks a run only for the keys that may be in it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .base import IntArray, UInt64Array, to_signed

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


def bigint_array(values: Any) -> str:
    """An integer sequence as one PostgreSQL array literal (one parameter, parsed by the
    server; psycopg dumps a list element by element in Python)."""
    return "{" + ",".join(map(str, values)) + "}"
