"""Feature hashes by name: each maps a token to a 64-bit (or 128-bit) integer.

==========  ===========================================================================
city64      CityHash64 / CityHash128 of the UTF-8 bytes (Google; the default, seed 002)
farm64      FarmHash64 / FarmHash128 of the UTF-8 bytes (CityHash's successor)
murmur3_64  MurmurHash3_x64_128 (seed 0) of the UTF-8 bytes: its low 64 bits, or all 128
xxh3_64     XXH3 64 / XXH3 128 of the UTF-8 bytes
bkdr64      BKDR: h = h·131 + byte over the UTF-8 bytes, mod 2^64 (mod 2^128 for 128 bits)
java        seed 001's Java polynomial hash over UTF-16 code units, reproduced exactly:
            x = c0 << 7; x = (x·1000003 XOR c) mod 2^f per char; x XOR= length
md5_64      the first 8 bytes (or all 16) of MD5, read little-endian
blake2b_64  BLAKE2b with an 8-byte (or 16-byte) digest, read little-endian
==========  ===========================================================================

128-bit CityHash/FarmHash values are the integers python-cityhash returns (the C++ pair packed
as ``first << 64 | second``); FarmHash's 128-bit function is CityHash128 v1.1, so ``farm64``
and ``city64`` agree at 128 bits.

32-bit hashes are the low 32 bits of the 64-bit ones (for ``java`` that equals the 32-bit
Java computation, since multiplication and XOR commute with truncation mod 2^32).

The hash functions run once per *distinct* token: :class:`neardup.Fingerprinter` caches
them, so their per-call cost is amortised and a plain Python call per token is fine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from ..distance import check_bits, ints_to_array
from ..errors import ConfigError

HashFunction = Callable[[str], int]

MASK_128 = (1 << 128) - 1
JAVA_MULTIPLIER = 1000003
BKDR_SEED = 131


def java_hash(token: str, bits: int = 64) -> int:
    """Seed 001's ``SimHash.hash``: Java ``char``s are UTF-16 code units."""
    if not token:
        return 0
    data = token.encode("utf-16-le")
    units = [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]
    mask = (1 << bits) - 1
    x = units[0] << 7
    for unit in units:
        x = ((x * JAVA_MULTIPLIER) ^ unit) & mask
    x ^= len(units)  # Java's String.length() counts UTF-16 code units
    return -2 if x == -1 else x  # the seed's guard; x is never negative here


def bkdr_hash(token: str, bits: int = 64) -> int:
    mask = (1 << bits) - 1
    value = 0
    for byte in token.encode("utf-8"):
        value = (value * BKDR_SEED + byte) & mask
    return value


def _digest_int(name: str, size: int) -> HashFunction:
    def digest(token: str) -> int:
        if name == "blake2b":
            raw = hashlib.blake2b(token.encode("utf-8"), digest_size=size).digest()
        else:
            raw = hashlib.md5(token.encode("utf-8"), usedforsecurity=False).digest()[:size]
        return int.from_bytes(raw, "little")

    return digest


def _functions_64() -> dict[str, HashFunction]:
    import cityhash
    import farmhash
    import mmh3
    import xxhash

    return {
        "city64": lambda token: int(cityhash.CityHash64(token.encode("utf-8"))),
        "farm64": lambda token: int(farmhash.FarmHash64(token.encode("utf-8"))),
        "murmur3_64": lambda token: int(mmh3.hash64(token.encode("utf-8"), 0, signed=False)[0]),
        "xxh3_64": lambda token: int(xxhash.xxh3_64_intdigest(token.encode("utf-8"))),
        "bkdr64": lambda token: bkdr_hash(token, 64),
        "java": lambda token: java_hash(token, 64),
        "md5_64": _digest_int("md5", 8),
        "blake2b_64": _digest_int("blake2b", 8),
    }


def _functions_128() -> dict[str, HashFunction]:
    import cityhash
    import farmhash
    import mmh3
    import xxhash

    return {
        "city64": lambda token: int(cityhash.CityHash128(token.encode("utf-8"))),
        "farm64": lambda token: int(farmhash.FarmHash128(token.encode("utf-8"))),
        "murmur3_64": lambda token: int(mmh3.hash128(token.encode("utf-8"), 0, signed=False)),
        "xxh3_64": lambda token: int(xxhash.xxh3_128_intdigest(token.encode("utf-8"))),
        "bkdr64": lambda token: bkdr_hash(token, 128),
        "java": lambda token: java_hash(token, 128),
        "md5_64": _digest_int("md5", 16),
        "blake2b_64": _digest_int("blake2b", 16),
    }


HASH_NAMES: tuple[str, ...] = (
    "city64",
    "farm64",
    "murmur3_64",
    "xxh3_64",
    "bkdr64",
    "java",
    "md5_64",
    "blake2b_64",
)


def get_hash_function(name: str, bits: int = 64) -> HashFunction:
    """The token → int function for ``name`` at ``bits`` (32, 64 or 128)."""
    check_bits(bits)
    if name not in HASH_NAMES:
        raise ConfigError(f"unknown hash {name!r}; choose one of {', '.join(HASH_NAMES)}")
    if bits == 128:
        return _functions_128()[name]
    function = _functions_64()[name]
    if bits == 64:
        return function
    return lambda token: function(token) & 0xFFFFFFFF


def hash_tokens(tokens: Sequence[str], name: str = "city64", bits: int = 64) -> npt.NDArray[np.uint64]:
    """Hash a batch of tokens: shape (n,) uint64 for 32/64 bits, (n, 2) uint64 ``[low, high]``
    words for 128 bits. The 64-bit functions of C libraries are mapped over the UTF-8 bytes
    without a Python step per token (the same values as :func:`get_hash_function`'s)."""
    check_bits(bits)
    direct = _direct_64().get(name) if bits <= 64 else None
    if direct is None:
        function = get_hash_function(name, bits)
        return ints_to_array([function(token) for token in tokens], bits)
    values = np.fromiter(map(direct, map(str.encode, tokens)), dtype=np.uint64, count=len(tokens))
    return values & np.uint64(0xFFFFFFFF) if bits == 32 else values


@lru_cache(maxsize=1)
def _direct_64() -> dict[str, Callable[[bytes], int]]:
    """The 64-bit hashes that are one C call on the UTF-8 bytes, returning an unsigned int."""
    import cityhash
    import farmhash
    import xxhash

    return {"city64": cityhash.CityHash64, "farm64": farmhash.FarmHash64, "xxh3_64": xxhash.xxh3_64_intdigest}
