"""Hamming distance and the array forms of fingerprints.

A fingerprint of up to 64 bits is one ``uint64``; a 128-bit fingerprint is a row of two
``uint64`` words ``[low, high]`` (bits 0-63, then 64-127), so an array of n 128-bit
fingerprints has shape (n, 2). Bit i of a fingerprint is bit i of the integer (bit 0 is the
least significant). Hex text is big-endian, ``bits / 4`` lower-case digits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from .errors import ConfigError, InputError
from .hashing import check_bits, split_128

FingerprintArray = npt.NDArray[np.uint64]


def hamming(a: int, b: int) -> int:
    """Number of differing bits of two fingerprints given as non-negative integers."""
    return (a ^ b).bit_count()


def hamming_many(a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """Element-wise Hamming distances of fingerprint arrays (numpy broadcasting applies).

    Arrays of shape (..., 2) are read as 128-bit ``[low, high]`` rows when both inputs have a
    trailing axis of 2 and are two-dimensional; pass 1-d uint64 arrays for <= 64 bits.
    """
    left = np.asarray(a, dtype=np.uint64)
    right = np.asarray(b, dtype=np.uint64)
    distances = np.bitwise_count(np.bitwise_xor(left, right))
    if left.ndim == 2 and left.shape[-1] == 2 and right.ndim >= 1 and right.shape[-1] == 2:
        return np.asarray(distances.sum(axis=-1, dtype=np.uint8))
    return np.asarray(distances, dtype=np.uint8)


def to_array(fingerprints: Iterable[int], bits: int = 64) -> FingerprintArray:
    """Python ints → the array form (uint64 for <= 64 bits, (n, 2) for 128)."""
    check_bits(bits)
    values = list(fingerprints)
    if bits == 128:
        return split_128(values)
    return np.fromiter(values, dtype=np.uint64, count=len(values))


def to_ints(array: FingerprintArray) -> list[int]:
    """The array form → Python ints."""
    if array.ndim == 2:
        return [int(low) | (int(high) << 64) for low, high in array.tolist()]
    return [int(value) for value in array.tolist()]


def to_hex(fingerprint: int, bits: int = 64) -> str:
    """Fixed-width hex: ``bits / 4`` digits, so every fingerprint of a run has one length."""
    return format(fingerprint, f"0{bits // 4}x")


def from_hex(text: str, bits: int = 64) -> int:
    """Parse :func:`to_hex` output; the digit count must match ``bits``."""
    check_bits(bits)
    if len(text) != bits // 4:
        raise InputError(f"fingerprint {text!r} has {len(text)} hex digits; {bits}-bit ones have {bits // 4}")
    try:
        return int(text, 16)
    except ValueError as exc:
        raise InputError(f"fingerprint {text!r} is not hexadecimal") from exc


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

