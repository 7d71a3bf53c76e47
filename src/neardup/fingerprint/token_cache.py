"""Token identities and the per-fingerprinter cache of what each distinct token costs once:
its feature hash and its static weight.

A token is identified by a 64-bit key computed with array operations from its code points
(a polynomial hash mod 2^64, position-normalized, length-mixed and finalized with MurmurHash3's
fmix64), so a whole batch gets its keys without a Python call per token. The key is only an
identity: the feature hash that goes into the fingerprint is the configured one (city64, ...)
computed from the token's text the first time the key is seen. Two distinct tokens sharing a
key would need a 64-bit collision (about n²/2^65 for n distinct tokens: 10^-8 for 10^6 tokens).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from ..distance import MASK_64
from ..text.tokenize import CodePoints, TokenBatch, decode, han_character_mask, word_character_mask

UInt64Array = npt.NDArray[np.uint64]

_BASE = 0x100000001B3  # FNV-64 prime: odd, so invertible mod 2^64
_BASE_INVERSE = pow(_BASE, -1, 1 << 64)
_LENGTH_MIX = np.uint64(0x9E3779B97F4A7C15)


def fmix64(values: UInt64Array) -> UInt64Array:
    """MurmurHash3's 64-bit finalizer: full avalanche of every input bit."""
    with np.errstate(over="ignore"):
        values = values ^ (values >> np.uint64(33))
        values = values * np.uint64(0xFF51AFD7ED558CCD)
        values = values ^ (values >> np.uint64(33))
        values = values * np.uint64(0xC4CEB9FE1A85EC53)
        return values ^ (values >> np.uint64(33))


WINDOW = 1 << 20  # tokens longer than this many code points (never words) are keyed by BLAKE2b


@lru_cache(maxsize=1)
def _powers() -> tuple[UInt64Array, UInt64Array]:
    """B^i and B^-i mod 2^64 for i <= 2·WINDOW (32 MB, computed once per process)."""
    size = 2 * WINDOW + 1
    with np.errstate(over="ignore"):
        forward = np.cumprod(np.full(size, _BASE, dtype=np.uint64)) * np.uint64(_BASE_INVERSE)
        inverse = np.cumprod(np.full(size, _BASE_INVERSE, dtype=np.uint64)) * np.uint64(_BASE)
    return forward.astype(np.uint64), inverse.astype(np.uint64)


def span_positions(
    starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For spans of a code-point array: the position of every code point of every span, its
    offset within its span, and where each span begins in that flat list."""
    total = int(lengths.sum())
    firsts = np.cumsum(lengths) - lengths
    within = np.arange(total, dtype=np.int64) - np.repeat(firsts, lengths)
    return np.repeat(starts, lengths) + within, within, firsts


def span_sums(
    values: npt.NDArray[Any], firsts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> npt.NDArray[Any]:
    """Sum of ``values`` over each span (0 for empty spans)."""
    result = np.zeros(len(lengths), dtype=values.dtype)
    nonempty = lengths > 0
    if nonempty.any():
        result[nonempty] = np.add.reduceat(values, firsts[nonempty])
    return result


def token_keys(batch: TokenBatch) -> UInt64Array:
    """The 64-bit key of every token of the batch: its text alone (see :func:`tagged_keys`).

    key = fmix64(Σ_j c_j·B^j  XOR  length·φ) with j counted from the token's first code
    point, read off prefix sums over windows of 2·WINDOW code points starting every WINDOW
    code points, so every token of at most WINDOW code points lies wholly in one of them.
    """
    lengths = batch.ends - batch.starts
    keys = np.zeros(len(lengths), dtype=np.uint64)
    long = lengths > WINDOW
    windows: list[tuple[int, slice | npt.NDArray[np.intp]]]
    if len(batch.codepoints) <= 2 * WINDOW:  # the usual batch: one window holds it all
        windows = [(0, slice(None))] if len(lengths) else []
    else:
        window_of = batch.starts // WINDOW
        windows = [
            (window * WINDOW, np.flatnonzero((window_of == window) & ~long))
            for window in range(int(window_of.min()), int(window_of.max()) + 1)
        ]
    forward, inverse = _powers()
    with np.errstate(over="ignore"):
        for base, members in windows:
            region = batch.codepoints[base : base + 2 * WINDOW].astype(np.uint64)
            region *= forward[: len(region)]
            prefix = np.zeros(len(region) + 1, dtype=np.uint64)
            np.cumsum(region, out=prefix[1:])
            starts = batch.starts[members] - base
            keys[members] = (prefix[batch.ends[members] - base] - prefix[starts]) * inverse[starts]
        keys = fmix64(keys ^ (lengths.astype(np.uint64) * _LENGTH_MIX))
        for index in np.flatnonzero(long).tolist():
            keys[index] = _name_key(batch.token(index))
    return keys


#: Longest token keyed by its packed code points (two 64-bit words of one-byte code points).
PACKED_LENGTH = 16


def cache_keys(batch: TokenBatch) -> UInt64Array:
    """The 64-bit identity of every token of the batch, for the token cache: tokens of at most
    :data:`PACKED_LENGTH` code points, all below 0x100 (English words, digits), are keyed by
    those code points packed as bytes into two words, read straight from the batch at each
    token's start; others by :func:`token_keys`. Which of the two depends on the token's text
    alone, so a token has one key in every batch. Packed keys are exact for tokens of up to 7
    code points (they are not mixed: the key table spreads them itself)."""
    starts, lengths = batch.starts, batch.ends - batch.starts
    if not len(starts):
        return np.zeros(0, dtype=np.uint64)
    if batch.codepoints.dtype != np.uint8:
        return _wide_batch_keys(batch, starts, lengths)
    rest = np.flatnonzero(lengths > PACKED_LENGTH)
    if len(rest):  # their packed keys are computed (from their first 16 code points) and replaced
        lengths = np.minimum(lengths, PACKED_LENGTH)
    keys = _packed_keys(_padded(batch.codepoints, starts), starts, lengths)
    if len(rest):
        keys[rest] = token_keys(_compact(batch, rest))
    return keys


def _wide_batch_keys(
    batch: TokenBatch, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> UInt64Array:
    """:func:`cache_keys` of a batch with code points beyond one byte (Chinese): most tokens
    take :func:`token_keys`; the few of one-byte code points, found from their first code
    point and then checked whole, are packed from a compact copy."""
    keys = token_keys(batch)
    candidates = np.flatnonzero((lengths <= PACKED_LENGTH) & (batch.codepoints[starts] <= 0xFF))
    if not len(candidates):
        return keys
    compact = _compact(batch, candidates)
    wide = np.concatenate([[0], np.cumsum(compact.codepoints > 0xFF)])
    narrow = wide[compact.ends] == wide[compact.starts]
    chosen = candidates[narrow]
    if len(chosen):
        packed = _padded(compact.codepoints.astype(np.uint8), compact.starts)
        keys[chosen] = _packed_keys(packed, compact.starts[narrow], lengths[chosen])
    return keys


def _compact(batch: TokenBatch, members: npt.NDArray[np.intp]) -> TokenBatch:
    """The batch of only the tokens ``members``, their code points copied back to back."""
    lengths = batch.ends[members] - batch.starts[members]
    positions, _, firsts = span_positions(batch.starts[members], lengths)
    return TokenBatch(
        batch.codepoints[positions], firsts, firsts + lengths, batch.documents[members], batch.count
    )


def _padded(packed: CodePoints, starts: npt.NDArray[np.int64]) -> CodePoints:
    """``packed`` extended to hold two whole words after every start (Latin batches already do)."""
    if len(packed) - int(starts.max()) >= PACKED_LENGTH:
        return packed
    return np.concatenate([packed, np.zeros(PACKED_LENGTH, dtype=np.uint8)])


def _packed_keys(
    packed: CodePoints, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> UInt64Array:
    """Keys of tokens of at most 16 one-byte code points in ``packed`` (which extends at least
    16 bytes past every start): the first word XOR length·φ, exact up to 7 code points; for
    tokens longer than 8, fmix64 of that XOR the second word."""
    words = np.ndarray((len(packed) - 7,), dtype="<u8", buffer=packed, strides=(1,))
    masks, mixes = _packing_tables()
    keys = (words[starts] & masks[lengths]) ^ mixes[lengths]
    long = np.flatnonzero(lengths > 8)
    if len(long):
        second = words[starts[long] + 8] & masks[lengths[long] - 8]
        keys[long] = fmix64(keys[long]) ^ second
    return keys


@lru_cache(maxsize=1)
def _packing_tables() -> tuple[UInt64Array, UInt64Array]:
    """By token length up to PACKED_LENGTH: the mask of its bytes in a 64-bit word, and length·φ."""
    sizes = range(PACKED_LENGTH + 1)
    masks = np.array([(1 << (8 * min(size, 8))) - 1 for size in sizes], dtype=np.uint64)
    mixes = np.array([(size * int(_LENGTH_MIX)) & MASK_64 for size in sizes], dtype=np.uint64)
    return masks, mixes


def tagged_keys(word_keys: UInt64Array, batch: TokenBatch) -> UInt64Array:
    """Keys of (token, part-of-speech tag) pairs, for weightings that weigh by tag; the word
    keys themselves when the batch is untagged."""
    if batch.tags is None or not len(batch.tag_names):
        return word_keys
    tag_keys = np.array([_name_key(name) for name in batch.tag_names], dtype=np.uint64)
    with np.errstate(over="ignore"):
        return fmix64(word_keys ^ tag_keys[batch.tags])


def _name_key(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(), "little")


@dataclass(frozen=True)
class NewTokens:
    """Tokens met for the first time, with the facts weighting needs, computed in bulk."""

    texts: list[str]
    tags: list[str]
    lengths: npt.NDArray[np.int64]
    has_word_character: npt.NDArray[np.bool_]
    has_han: npt.NDArray[np.bool_]


def describe_new_tokens(batch: TokenBatch, examples: npt.NDArray[np.intp]) -> NewTokens:
    starts, ends = batch.starts[examples], batch.ends[examples]
    lengths = (ends - starts).astype(np.int64)
    positions, _, firsts = span_positions(starts, lengths)
    codepoints = batch.codepoints[positions]
    return NewTokens(
        texts=_split_text(codepoints, firsts, lengths),
        tags=list(map(batch.tag_names.__getitem__, batch.tags[examples].tolist()))
        if batch.tags is not None
        else [""] * len(examples),
        lengths=lengths,
        has_word_character=span_sums(word_character_mask(codepoints).astype(np.int64), firsts, lengths) > 0,
        has_han=span_sums(han_character_mask(codepoints).astype(np.int64), firsts, lengths) > 0,
    )


def _split_text(
    codepoints: CodePoints, firsts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> list[str]:
    """The tokens laid end to end in ``codepoints`` as strings: decoded with a NUL between
    each two and split there, in C, unless a token holds a NUL itself."""
    separated: CodePoints = np.insert(codepoints, firsts[1:], 0)  # type: ignore[assignment]
    texts = decode(separated).split("\0")
    if len(texts) == len(lengths):
        return texts
    text = decode(codepoints)
    ends = (firsts + lengths).tolist()
    return [text[end - length : end] for end, length in zip(ends, lengths.tolist(), strict=True)]


class KeyTable:
    """uint64 key → int64 value: open addressing with linear probing, every operation
    vectorised over a batch of keys. A key's slot is the top bits of key · an odd constant
    (Fibonacci hashing), which spreads packed keys (:func:`cache_keys`) as well as mixed
    ones; the load factor stays <= 1/4, so most lookups take one probe. Twice as fast as
    ``np.searchsorted`` over a sorted key array, and no sorting on insert."""

    INITIAL_SIZE = 1 << 16

    def __init__(self) -> None:
        self._allocate(self.INITIAL_SIZE)

    def _allocate(self, size: int) -> None:
        self.keys = np.zeros(size, dtype=np.uint64)
        self.values = np.full(size, -1, dtype=np.int64)
        self.mask = np.uint64(size - 1)
        self.shift = np.uint64(64 - (size.bit_length() - 1))
        self.count = 0

    def _slots(self, keys: UInt64Array) -> npt.NDArray[np.int64]:
        return ((keys * _LENGTH_MIX) >> self.shift).view(np.int64)

    def __len__(self) -> int:
        return self.count

    def lookup(self, keys: UInt64Array) -> npt.NDArray[np.int64]:
        """The value of every key, -1 where absent."""
        slots = self._slots(keys)
        values = self.values[slots]
        found = self.keys[slots] == keys  # an empty slot holds key 0 and value -1
        if found.all():
            return values
        result = values
        missed = np.flatnonzero(~found)
        pending = missed[result[missed] >= 0]  # slot taken by another key: probe on
        result[missed] = -1
        while len(pending):
            probe = (slots[pending] + 1) & int(self.mask)
            slots[pending] = probe
            values = self.values[probe]
            found = (self.keys[probe] == keys[pending]) & (values >= 0)
            result[pending[found]] = values[found]
            pending = pending[~found & (values >= 0)]
        return result

    def insert(self, keys: UInt64Array, values: npt.NDArray[np.int64]) -> None:
        """Add keys that are distinct and absent."""
        if 4 * (self.count + len(keys)) > len(self.keys):
            occupied = self.values >= 0
            old_keys, old_values = self.keys[occupied], self.values[occupied]
            size = len(self.keys)
            while 4 * (self.count + len(keys)) > size:
                size *= 2
            self._allocate(size)
            self.insert(old_keys, old_values)
        slots = self._slots(keys)
        pending = np.arange(len(keys))
        while len(pending):
            free = self.values[slots[pending]] < 0
            candidates = pending[free]
            claimed, first = np.unique(slots[candidates], return_index=True)
            winners = candidates[first]
            self.keys[claimed] = keys[winners]
            self.values[claimed] = values[winners]
            placed = np.zeros(len(keys), dtype=bool)
            placed[winners] = True
            pending = pending[~placed[pending]]
            slots[pending] = (slots[pending] + 1) & int(self.mask)
        self.count += len(keys)


@dataclass
class TokenCache:
    """Key → column, and per column: feature hash, static weight (and whether it is not 0),
    length, word key, text.

    ``describe(new_tokens)`` returns the feature hashes and static weights of tokens met for
    the first time; it runs once per distinct key. The cache is cleared when it would exceed
    ``capacity`` columns, bounding memory on endless streams of new words.
    """

    describe: Callable[[NewTokens], tuple[npt.NDArray[np.uint64], npt.NDArray[np.float64]]]
    bits: int
    capacity: int

    def __post_init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.table = KeyTable()
        self.hashes = np.zeros((0, 2) if self.bits == 128 else 0, dtype=np.uint64)
        self.static = np.zeros(0, dtype=np.float64)
        self.kept = np.zeros(0, dtype=bool)
        self.lengths = np.zeros(0, dtype=np.float64)
        self.word_keys = np.zeros(0, dtype=np.uint64)
        self.texts: list[str] = []

    def __len__(self) -> int:
        return len(self.texts)

    def columns(self, batch: TokenBatch) -> npt.NDArray[np.int64]:
        """The cache column of every token of the batch, adding new tokens as needed."""
        word_keys = cache_keys(batch)
        keys = tagged_keys(word_keys, batch)
        columns = self.table.lookup(keys)
        missing = np.flatnonzero(columns < 0)
        if len(missing):
            new_keys = np.unique(keys[missing])  # by hashing (numpy >= 2.3), not by sorting
            if len(self) and len(self) + len(new_keys) > self.capacity:
                self.clear()  # a batch with more new tokens than the capacity still fits alone
                return self.columns(batch)
            start = len(self)
            self.table.insert(new_keys, np.arange(start, start + len(new_keys), dtype=np.int64))
            columns[missing] = found = self.table.lookup(keys[missing])
            examples = np.empty(len(new_keys), dtype=np.intp)
            examples[found - start] = missing  # any occurrence of a token stands for it
            try:
                self._add(batch, examples, word_keys[examples])
            except BaseException:
                self.clear()  # keys without columns: start over rather than serve them
                raise
        return columns

    def _add(self, batch: TokenBatch, examples: npt.NDArray[np.intp], word_keys: UInt64Array) -> None:
        new_tokens = describe_new_tokens(batch, examples)
        values, static = self.describe(new_tokens)
        self.texts.extend(new_tokens.texts)
        self.static = np.concatenate([self.static, static])
        self.kept = self.static != 0.0
        self.lengths = np.concatenate([self.lengths, new_tokens.lengths.astype(np.float64)])
        self.word_keys = np.concatenate([self.word_keys, word_keys])
        self.hashes = np.concatenate([self.hashes, values])

    def hash_of(self, column: int) -> int:
        row = self.hashes[column]
        return int(row[0]) | (int(row[1]) << 64) if self.bits == 128 else int(row)
