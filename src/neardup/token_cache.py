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
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .hashing import split_128
from .text.tokenize import TokenBatch, han_character_mask, word_character_mask

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


@dataclass
class _Powers:
    """B^i and B^-i mod 2^64 for i < len, grown on demand."""

    forward: UInt64Array = field(default_factory=lambda: np.ones(1, dtype=np.uint64))
    inverse: UInt64Array = field(default_factory=lambda: np.ones(1, dtype=np.uint64))

    def ensure(self, length: int) -> None:
        if len(self.forward) >= length:
            return
        size = max(length, 2 * len(self.forward))
        self.forward = np.cumprod(np.full(size, _BASE, dtype=np.uint64)) * np.uint64(_BASE_INVERSE)
        self.inverse = np.cumprod(np.full(size, _BASE_INVERSE, dtype=np.uint64)) * np.uint64(_BASE)
        self.forward[0] = self.inverse[0] = 1


def token_keys(batch: TokenBatch, powers: _Powers) -> UInt64Array:
    """The 64-bit key of every token of the batch (tagged tokens: token and tag together)."""
    count = len(batch.codepoints)
    powers.ensure(count + 1)
    with np.errstate(over="ignore"):
        weighted = (batch.codepoints.astype(np.uint64) + np.uint64(1)) * powers.forward[:count]
        prefix = np.concatenate([np.zeros(1, dtype=np.uint64), np.cumsum(weighted, dtype=np.uint64)])
        raw = (prefix[batch.ends] - prefix[batch.starts]) * powers.inverse[batch.starts]
        lengths = (batch.ends - batch.starts).astype(np.uint64)
        keys = fmix64(raw ^ (lengths * _LENGTH_MIX))
        if batch.tags is not None:
            tag_keys = np.array([_name_key(name) for name in batch.tag_names], dtype=np.uint64)
            keys = fmix64(keys ^ tag_keys[batch.tags]) if len(tag_keys) else keys
    return keys


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
    text = batch.codepoints.tobytes().decode("utf-32-le")
    word_prefix = np.concatenate([[0], np.cumsum(word_character_mask(batch.codepoints))])
    han_prefix = np.concatenate([[0], np.cumsum(han_character_mask(batch.codepoints))])
    return NewTokens(
        texts=[text[start:end] for start, end in zip(starts.tolist(), ends.tolist())],
        tags=[batch.tag(int(index)) for index in examples] if batch.tags is not None else [""] * len(examples),
        lengths=(ends - starts).astype(np.int64),
        has_word_character=(word_prefix[ends] - word_prefix[starts]) > 0,
        has_han=(han_prefix[ends] - han_prefix[starts]) > 0,
    )


@dataclass
class TokenCache:
    """Key → column, and per column: feature hash, static weight, length, word key, text.

    ``describe(new_tokens)`` returns the feature hashes and static weights of tokens met for
    the first time; it runs once per distinct key. The cache is cleared when it would exceed
    ``capacity`` columns, bounding memory on endless streams of new words.
    """

    describe: Callable[[NewTokens], tuple[list[int], npt.NDArray[np.float64]]]
    bits: int
    capacity: int
    powers: _Powers = field(default_factory=_Powers)

    def __post_init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.sorted_keys = np.zeros(0, dtype=np.uint64)
        self.sorted_columns = np.zeros(0, dtype=np.int64)
        self.hashes = np.zeros((0, 2) if self.bits == 128 else 0, dtype=np.uint64)
        self.static = np.zeros(0, dtype=np.float64)
        self.lengths = np.zeros(0, dtype=np.float64)
        self.word_keys = np.zeros(0, dtype=np.uint64)
        self.texts: list[str] = []

    def __len__(self) -> int:
        return len(self.texts)

    def columns(self, batch: TokenBatch) -> npt.NDArray[np.int64]:
        """The cache column of every token of the batch, adding new tokens as needed."""
        keys = token_keys(batch, self.powers)
        positions = np.searchsorted(self.sorted_keys, keys)
        clipped = np.minimum(positions, max(len(self.sorted_keys) - 1, 0))
        found = (
            self.sorted_keys[clipped] == keys if len(self.sorted_keys) else np.zeros(len(keys), dtype=bool)
        )
        columns = np.empty(len(keys), dtype=np.int64)
        columns[found] = self.sorted_columns[clipped[found]]
        missing = np.flatnonzero(~found)
        if len(missing):
            new_keys, first = np.unique(keys[missing], return_index=True)
            if len(self) + len(new_keys) > self.capacity:
                self.clear()
                return self.columns(batch)
            new_columns = self._add(batch, new_keys, missing[first])
            columns[missing] = new_columns[np.searchsorted(new_keys, keys[missing])]
        return columns

    def _add(self, batch: TokenBatch, new_keys: UInt64Array, examples: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
        start = len(self)
        new_columns = np.arange(start, start + len(new_keys), dtype=np.int64)
        new_tokens = describe_new_tokens(batch, examples)
        values, static = self.describe(new_tokens)
        self.texts.extend(new_tokens.texts)
        self.static = np.concatenate([self.static, static])
        self.lengths = np.concatenate([self.lengths, new_tokens.lengths.astype(np.float64)])
        word_keys = token_keys(
            TokenBatch(
                batch.codepoints, batch.starts[examples], batch.ends[examples], batch.documents[examples], 1
            ),
            self.powers,
        )
        self.word_keys = np.concatenate([self.word_keys, word_keys])
        if self.bits == 128:
            self.hashes = np.concatenate([self.hashes, split_128(values)])
        else:
            self.hashes = np.concatenate([self.hashes, np.array(values, dtype=np.uint64)])
        insert_at = np.searchsorted(self.sorted_keys, new_keys)
        self.sorted_keys = np.insert(self.sorted_keys, insert_at, new_keys)
        self.sorted_columns = np.insert(self.sorted_columns, insert_at, new_columns)
        return new_columns

    def hash_of(self, column: int) -> int:
        row = self.hashes[column]
        return int(row[0]) | (int(row[1]) << 64) if self.bits == 128 else int(row)
