"""Hamming distance and the array forms of fingerprints.

A fingerprint of up to 64 bits is one ``uint64``; a 128-bit fingerprint is a row of two
``uint64`` words ``[low, high]`` (bits 0-63, then 64-127), so an array of n 128-bit
fingerprints has shape (n, 2). Bit i of a fingerprint is bit i of the integer (bit 0 is the
least significant). Hex text is big-endian, ``bits / 4`` lower-case digits.

The helpers every layer shares about widths and words live here too: :func:`check_bits`,
:func:`ints_to_array` (Python ints to words) and :func:`word_ints` (back), and the
:class:`DistanceProfile` of a collection, which the wide searches are tuned by.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import ConfigError, InputError

FingerprintArray = npt.NDArray[np.uint64]
_HEX = re.compile(r"[0-9a-fA-F]+")


def hamming(a: int, b: int) -> int:
    """Number of differing bits of two fingerprints given as non-negative integers."""
    return (a ^ b).bit_count()


def hamming_many(a: npt.ArrayLike, b: npt.ArrayLike, bits: int | None = None) -> npt.NDArray[np.uint8]:
    """Element-wise Hamming distances of fingerprint arrays (numpy broadcasting applies).

    128-bit fingerprints are ``[low, high]`` rows: they are meant when ``bits=128`` or when
    either input is two-dimensional with rows of two words (the other may then be one row of
    shape (2,)). Otherwise every uint64 element is one fingerprint of <= 64 bits.
    """
    left = np.asarray(a, dtype=np.uint64)
    right = np.asarray(b, dtype=np.uint64)
    distances = np.bitwise_count(np.bitwise_xor(left, right))
    wide = bits == 128 or (
        bits is None and any(array.ndim == 2 and array.shape[-1] == 2 for array in (left, right))
    )
    if wide:
        return np.asarray(distances.sum(axis=-1, dtype=np.uint8))
    return np.asarray(distances, dtype=np.uint8)


def to_array(fingerprints: Iterable[int], bits: int = 64) -> FingerprintArray:
    """Python ints → the array form (uint64 for <= 64 bits, (n, 2) for 128)."""
    return ints_to_array(list(fingerprints), check_bits(bits))


def to_ints(array: FingerprintArray) -> list[int]:
    """The array form → Python ints."""
    if array.ndim == 2:
        return [int(low) | (int(high) << 64) for low, high in array.tolist()]
    return [int(value) for value in array.tolist()]


def to_hex(fingerprint: int, bits: int = 64) -> str:
    """Fixed-width hex: ``bits / 4`` digits, so every fingerprint of a run has one length."""
    return format(check_fingerprint(fingerprint, bits), f"0{bits // 4}x")


def from_hex(text: str, bits: int = 64) -> int:
    """Parse :func:`to_hex` output: exactly ``bits / 4`` ASCII hex digits, nothing else."""
    check_bits(bits)
    if len(text) != bits // 4:
        raise InputError(f"fingerprint {text!r} has {len(text)} hex digits; {bits}-bit ones have {bits // 4}")
    if _HEX.fullmatch(text) is None:
        raise InputError(f"fingerprint {text!r} is not hexadecimal (digits 0-9 and a-f only)")
    return int(text, 16)


def hex_many(array: FingerprintArray, bits: int = 64) -> list[str]:
    """Hex text of a whole array (vectorised for <= 64 bits)."""
    if bits == 128:
        return [to_hex(value, 128) for value in to_ints(array)]
    width = bits // 4
    return [format(value, f"0{width}x") for value in array.tolist()]


def check_fingerprint(value: int, bits: int) -> int:
    """Validate a fingerprint integer for a ``bits``-wide configuration."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >> bits:
        raise ConfigError(f"fingerprint {value!r} is not a non-negative integer of at most {bits} bits")
    return value


def as_words(fingerprints: npt.ArrayLike, bits: int) -> FingerprintArray:
    """Check a fingerprint array against ``bits`` and view it as (n, words) uint64."""
    check_bits(bits)
    array = np.asarray(fingerprints)
    if array.dtype.kind in "fO" and not isinstance(fingerprints, np.ndarray):
        # numpy reads a list mixing ints >= 2**63 with smaller ones as float64: read such a
        # list as Python ints instead (anything else is refused below).
        exact = np.asarray(fingerprints, dtype=object)
        ints = (isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in exact.flat)
        if all(ints) and all(0 <= v < 1 << 64 for v in exact.flat):
            array = exact.astype(np.uint64)
    if array.dtype != np.uint64:
        if array.size and (not np.issubdtype(array.dtype, np.integer) or array.min() < 0):
            raise InputError(f"fingerprints must be non-negative integers (uint64); got dtype {array.dtype}")
        array = array.astype(np.uint64)
    words = 2 if bits == 128 else 1
    if bits == 128:
        if array.ndim != 2 or array.shape[1] != 2:
            raise InputError(
                f"128-bit fingerprints must be an (n, 2) [low, high] array; got shape {array.shape}"
            )
        return array
    if array.ndim != 1:
        raise InputError(f"{bits}-bit fingerprints must be a one-dimensional array; got shape {array.shape}")
    if bits == 32 and array.size and int(array.max()) >> 32:
        raise InputError("a fingerprint does not fit in 32 bits; pass bits=64 or bits=128")
    return array.reshape(-1, words)


def row_distances(xor: FingerprintArray) -> npt.NDArray[np.uint8]:
    """Popcount of each row of a (n, w) XOR array: the Hamming distances."""
    counts = np.bitwise_count(xor)
    if counts.shape[1] == 1:
        return np.asarray(counts[:, 0], dtype=np.uint8)
    return np.asarray(counts.sum(axis=1, dtype=np.uint8))


MASK_64 = (1 << 64) - 1

BITS_CHOICES: tuple[int, ...] = (32, 64, 128)


def check_bits(bits: int) -> int:
    if bits not in BITS_CHOICES:
        raise ConfigError(f"bits must be 32, 64 or 128; got {bits!r}")
    return bits


def ints_to_array(values: Sequence[int], bits: int) -> npt.NDArray[np.uint64]:
    """Python ints → uint64 (n,) for <= 64 bits, (n, 2) ``[low, high]`` for 128 bits."""
    if bits == 128:
        return split_128(values)
    return np.fromiter(values, dtype=np.uint64, count=len(values))


def split_128(values: Sequence[int]) -> npt.NDArray[np.uint64]:
    """Python ints of up to 128 bits → (n, 2) uint64 ``[low, high]``."""
    out = np.empty((len(values), 2), dtype=np.uint64)
    out[:, 0] = np.fromiter((value & MASK_64 for value in values), dtype=np.uint64, count=len(values))
    out[:, 1] = np.fromiter((value >> 64 for value in values), dtype=np.uint64, count=len(values))
    return out


def word_ints(words: npt.NDArray[np.uint64]) -> list[int]:
    if words.shape[1] == 1:
        return [int(value) for value in words[:, 0].tolist()]
    return [low | (high << 64) for low, high in words.tolist()]


def ints_to_words(values: list[Any], bits: int) -> npt.NDArray[np.uint64]:
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 0 <= value < 1 << bits:
            raise InputError(f"fingerprint {value!r} is not an integer from 0 to 2^{bits} - 1")
    return ints_to_array([int(value) for value in values], bits)


# -- the distances of a collection (what a wide search will meet) --------------------------
#: Distances counted per profile: sampled rows × all rows stop near this many pairs.
PROFILE_PAIRS = 1 << 25
#: Pairs compared per step of a scan (bounds its temporary arrays to ~100-200 MB).
SCAN_TILE = 1 << 23


def tile_distances(left: FingerprintArray, right: FingerprintArray) -> npt.NDArray[np.uint8]:
    """(len(left), len(right)) Hamming distances of two (n, words) arrays: one 2-D XOR and
    popcount per word (a trailing word axis of length 1 would make numpy loop per element)."""
    distance = np.bitwise_count(left[:, 0][:, None] ^ right[:, 0][None, :])
    for word in range(1, left.shape[1]):
        distance += np.bitwise_count(left[:, word][:, None] ^ right[:, word][None, :])
    return np.asarray(distance, dtype=np.uint8)


@dataclass(frozen=True)
class DistanceProfile:
    """How many pairs of a collection lie at each Hamming distance, measured or estimated.

    ``pairs[d]`` is the (estimated) number of unordered pairs at distance d, d = 0 .. bits;
    ``text[d]``, when the records' lengths were given, the sum of the two lengths over those
    pairs (what a check that reads both texts reads). From ``rows`` sampled records against
    all ``size`` (every record when ``rows == size``, then exact). Simhash bits are symmetric,
    so a pair at distance d shares a given w-bit key with probability C(bits - w, d) / C(bits, d):
    :meth:`collisions` turns the profile into the candidates of any table width, which is how
    the block scheme and the distance are chosen from the data rather than from the size.
    """

    bits: int
    size: int
    rows: int
    pairs: npt.NDArray[np.float64]
    text: npt.NDArray[np.float64] | None = None

    @property
    def exact(self) -> bool:
        return self.rows >= self.size

    def within(self, max_distance: int) -> float:
        """Pairs at distance <= ``max_distance``."""
        return float(self.pairs[: max_distance + 1].sum())

    def text_within(self, max_distance: int) -> float:
        """Characters of both texts summed over the pairs within ``max_distance``."""
        if self.text is None:
            raise ConfigError("this profile was measured without text lengths")
        return float(self.text[: max_distance + 1].sum())

    def collisions(self, key_bits: int) -> float:
        """Expected pairs that agree on a key of ``key_bits`` fingerprint bits."""
        kept = self.bits - min(key_bits, self.bits)
        share = np.array(
            [math.comb(kept, d) / math.comb(self.bits, d) for d in range(self.bits + 1)], dtype=np.float64
        )
        return float(self.pairs @ share)


def distance_profile(
    words: FingerprintArray,
    bits: int,
    *,
    lengths: npt.ArrayLike | None = None,
    budget: int = PROFILE_PAIRS,
    seed: int = 0,
    text_up_to: int | None = None,
) -> DistanceProfile:
    """The :class:`DistanceProfile` of a (n, words) array: every row against all when n² fits
    ``budget`` pairs, else about ``budget / n`` rows drawn at random (``seed``), scaled up.
    ``text`` is summed only up to distance ``text_up_to`` (default: all), where it is read:
    summing a weight for every pair would cost more than the counts."""
    n = words.shape[0]
    counts = np.zeros(bits + 1, dtype=np.float64)
    text = None if lengths is None else np.zeros(bits + 1, dtype=np.float64)
    size = np.asarray(lengths, dtype=np.float64) if lengths is not None else None
    if n < 2:
        return DistanceProfile(bits, n, n, counts, text)
    rows = n if n * n <= budget else max(1, budget // n)
    sample = (
        np.arange(n) if rows == n else np.sort(np.random.default_rng(seed).choice(n, rows, replace=False))
    )
    step = max(1, SCAN_TILE // n)
    for start in range(0, rows, step):
        chosen = sample[start : start + step]
        distance = tile_distances(words[chosen], words).reshape(-1)
        counts += np.bincount(distance, minlength=bits + 1)
        if text is not None and size is not None:
            near = np.flatnonzero(distance <= (bits if text_up_to is None else text_up_to))
            row, column = np.divmod(near, n)
            weights = size[chosen][row] + size[column]
            text += np.bincount(distance[near], weights=weights, minlength=bits + 1)
    # Each sampled row met itself at distance 0; the rest counts every pair twice at n rows.
    counts[0] -= rows
    if text is not None and size is not None:
        text[0] -= 2 * float(size[sample].sum())
    scale = n / (2 * rows)
    return DistanceProfile(bits, n, rows, counts * scale, None if text is None else text * scale)
