"""MinHash signatures of sets, the Jaccard estimate, and seed 000's combined similarity.

A set's signature holds, for each of ``num_perm`` universal hash functions
h_i(x) = (a_i·x + b_i) mod p with p = 2^61 − 1 (a Mersenne prime), the minimum of h_i over
the set's elements. Two sets agree at position i with probability J, their Jaccard
similarity, so the share of agreeing positions estimates J with standard error
sqrt(J(1 − J)/num_perm). Seed 000 uses (x + i) mod 100, which is not a family of random
permutations (all functions order the rows alike); a·x + b over a 61-bit prime field is.

Everything is vectorised: elements are hashed to 64 bits once, reduced mod p, and the
element × function matrix is computed in chunks with exact 61-bit modular products in uint64
arithmetic (no overflow, no Python loop per element or function). Signatures are uint64
values below p; an empty set gets the sentinel :data:`EMPTY` in every position, which never
equals a real minimum, so an empty set is similar only to another empty set.

The combined score of seed 000 eq. 1, sim = μ/(H + 1) + (1 − μ)·Ĵ, mixes the Hamming
distance H of the content fingerprints with the MinHash estimate Ĵ of the metadata sets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import xxhash

from ..errors import ConfigError, InputError

UInt64Array = npt.NDArray[np.uint64]
FloatArray = npt.NDArray[np.float64]

#: The Mersenne prime 2^61 − 1: residues fit in 61 bits, and x mod p is a shift and an add.
PRIME = np.uint64((1 << 61) - 1)
#: The signature value of an empty set (above every residue mod p).
EMPTY = np.uint64((1 << 64) - 1)
DEFAULT_NUM_PERM = 128
#: Most hash functions per signature: the error falls as 1/sqrt(num_perm), the memory grows.
MAX_NUM_PERM = 4096
DEFAULT_SEED = 1
#: Seed 000 recommends μ in [0.8, 0.9]: the content distance dominates, metadata adjusts.
DEFAULT_CONTENT_WEIGHT = 0.9
#: Elements × functions computed per step: 128 KB temporaries stay in cache (5x faster
#: than 64 MB ones here).
CHUNK_CELLS = 1 << 14

_LOW32 = np.uint64(0xFFFFFFFF)
_LOW29 = np.uint64((1 << 29) - 1)
_S29 = np.uint64(29)
_S32 = np.uint64(32)
_S61 = np.uint64(61)


def mod_prime(values: UInt64Array) -> UInt64Array:
    """Any uint64 → its residue mod 2^61 − 1 (2^61 ≡ 1, so fold the top bits down)."""
    values = (values & PRIME) + (values >> _S61)
    return np.where(values >= PRIME, values - PRIME, values)


def mul_mod_prime(a: UInt64Array, x: UInt64Array) -> UInt64Array:
    """a·x mod 2^61 − 1 for residues a, x < 2^61, exactly, in uint64 (numpy broadcasting).

    With a = a1·2^32 + a0 and x = x1·2^32 + x0 (a1, x1 < 2^29): a·x = a1x1·2^64 +
    (a1x0 + a0x1)·2^32 + a0x0, and mod p 2^64 ≡ 8 and 2^61 ≡ 1, so every partial product
    stays below 2^62 and their sum below 2^64.
    """
    a0, a1 = a & _LOW32, a >> _S32
    x0, x1 = x & _LOW32, x >> _S32
    high = (a1 * x1) << np.uint64(3)  # < 2^61
    middle = a1 * x0 + a0 * x1  # < 2^62
    middle = (middle >> _S29) + ((middle & _LOW29) << _S32)  # ·2^32 mod p: < 2^33 + 2^61
    low = a0 * x0  # < 2^64
    low = (low & PRIME) + (low >> _S61)  # < 2^61 + 8
    return mod_prime(mod_prime(high + middle) + low)


def universal_hash(a: UInt64Array, b: UInt64Array, x: UInt64Array) -> UInt64Array:
    """(a·x + b) mod 2^61 − 1 for residues a, b < 2^61 and keys x < 2^32, as an outer
    product: shape (len(x), len(a)). With x below 2^32 only a is split (a = a1·2^32 + a0), so
    this takes half the operations of :func:`mul_mod_prime`, in place."""
    x = x.reshape(-1, 1)
    high = (a >> _S32) * x  # a1·x < 2^61; times 2^32 mod p is a shift and an add
    out = high >> _S29
    high &= _LOW29
    high <<= _S32
    out += high
    low = (a & _LOW32) * x  # a0·x < 2^64
    out += low >> _S61
    low &= PRIME
    out += low
    out += b  # < 2^32 + 3·2^61 + 8 < 2^64
    return mod_prime(out)


def hash_elements(elements: Iterable[str]) -> UInt64Array:
    """64-bit XXH3 of each element's UTF-8 bytes (fixed seed 0, so signatures are stable)."""
    return np.fromiter(
        (xxhash.xxh3_64_intdigest(str(element).encode("utf-8")) for element in elements), dtype=np.uint64
    )


@dataclass(frozen=True)
class MinHasher:
    """``num_perm`` universal hash functions drawn from ``seed``: equal settings give equal
    signatures in every process, so signatures can be stored and compared later."""

    num_perm: int = DEFAULT_NUM_PERM
    seed: int = DEFAULT_SEED
    _a: UInt64Array = field(init=False, repr=False, compare=False)
    _b: UInt64Array = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (
            not isinstance(self.num_perm, int)
            or isinstance(self.num_perm, bool)
            or not 1 <= self.num_perm <= MAX_NUM_PERM
        ):
            raise ConfigError(f"num_perm must be from 1 to {MAX_NUM_PERM}; got {self.num_perm!r}")
        rng = np.random.default_rng(self.seed)
        top = int(PRIME)
        object.__setattr__(self, "_a", rng.integers(1, top, size=self.num_perm, dtype=np.uint64))
        object.__setattr__(self, "_b", rng.integers(0, top, size=self.num_perm, dtype=np.uint64))

    def signature(self, elements: Iterable[str]) -> UInt64Array:
        """The signature of one set of strings: shape (num_perm,)."""
        signature: UInt64Array = self.signatures([elements])[0]
        return signature

    def signatures(self, sets: Sequence[Iterable[str]]) -> UInt64Array:
        """Signatures of a batch of sets of strings: shape (n, num_perm) uint64."""
        groups = [list(elements) for elements in sets]
        documents = np.repeat(np.arange(len(groups), dtype=np.int64), [len(group) for group in groups])
        hashes = hash_elements(element for group in groups for element in group)
        return self.signatures_of_hashes(hashes, documents, len(groups))

    def signatures_of_hashes(
        self, hashes: npt.ArrayLike, documents: npt.ArrayLike, count: int
    ) -> UInt64Array:
        """Signatures from 64-bit element hashes (as :func:`hash_elements` makes them) and the
        set (0 .. count − 1) each belongs to: keyed on the top 32 bits of each hash."""
        values = np.asarray(hashes, dtype=np.uint64).reshape(-1)
        return self.signatures_of_keys(values >> _S32, documents, count)

    def signatures_of_keys(self, keys: npt.ArrayLike, documents: npt.ArrayLike, count: int) -> UInt64Array:
        """Signatures from 32-bit element keys and the set (0 .. count − 1) each belongs to;
        the vectorised core (repeated elements are harmless: a minimum ignores them). The
        universal family is over 32-bit keys: wider ones would be cut, not hashed."""
        values = np.asarray(keys, dtype=np.uint64).reshape(-1)
        owners = np.asarray(documents, dtype=np.int64).reshape(-1)
        if values.shape != owners.shape:
            raise InputError(f"got {len(values)} element keys but {len(owners)} set numbers")
        if len(owners) and (owners.min() < 0 or owners.max() >= count):
            raise InputError(f"set numbers must lie in 0 .. {count - 1}")
        if len(values) and int(values.max()) > 0xFFFFFFFF:
            raise InputError("element keys must be 32-bit (signatures_of_hashes takes 64-bit hashes)")
        result: UInt64Array = np.full((count, self.num_perm), EMPTY, dtype=np.uint64)
        if not len(values):
            return result
        order = np.argsort(owners, kind="stable")
        values, owners = values[order], owners[order]
        step = max(1, CHUNK_CELLS // self.num_perm)
        for low in range(0, len(values), step):
            high = min(low + step, len(values))
            hashed = universal_hash(self._a, self._b, values[low:high])
            chunk = owners[low:high]
            heads = np.flatnonzero(np.concatenate([[True], chunk[1:] != chunk[:-1]]))
            members = chunk[heads]
            # A set cut by a chunk boundary keeps the smaller of its two partial minima.
            result[members] = np.minimum(result[members], np.minimum.reduceat(hashed, heads, axis=0))
        return result


def estimate_jaccard(a: npt.ArrayLike, b: npt.ArrayLike) -> FloatArray:
    """Share of equal positions of signatures (last axis; numpy broadcasting applies):
    (n, P) with (n, P) for pairs, (n, P) with (P,) for one query against many."""
    left, right = np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64)
    if left.shape[-1] != right.shape[-1]:
        raise InputError(f"signatures of {left.shape[-1]} and {right.shape[-1]} values cannot be compared")
    return np.asarray(np.mean(left == right, axis=-1), dtype=np.float64)


def standard_error(jaccard: npt.ArrayLike, num_perm: int) -> FloatArray:
    """The standard error of the MinHash estimate: sqrt(J(1 − J)/num_perm)."""
    value = np.asarray(jaccard, dtype=np.float64)
    return np.asarray(np.sqrt(value * (1.0 - value) / num_perm), dtype=np.float64)


def exact_jaccard(a: Iterable[object], b: Iterable[object]) -> float:
    """|A ∩ B| / |A ∪ B|, and 1.0 for two empty sets (they are equal)."""
    left, right = set(a), set(b)
    union = len(left | right)
    return len(left & right) / union if union else 1.0


def combined_score(
    distance: npt.ArrayLike, jaccard: npt.ArrayLike, mu: float = DEFAULT_CONTENT_WEIGHT
) -> FloatArray:
    """Seed 000 eq. 1: μ·1/(H + 1) + (1 − μ)·Ĵ (the +1 keeps H = 0 finite), vectorised."""
    if not 0.0 <= mu <= 1.0:
        raise ConfigError(f"the content weight mu must lie in [0, 1]; got {mu!r}")
    hamming = np.asarray(distance, dtype=np.float64)
    return np.asarray(mu / (hamming + 1.0) + (1.0 - mu) * np.asarray(jaccard, dtype=np.float64))


def signature_to_bytes(signature: npt.ArrayLike) -> bytes:
    """One signature as little-endian uint64 bytes (8 per position), for any storage."""
    return np.ascontiguousarray(np.asarray(signature, dtype=np.uint64), dtype="<u8").tobytes()


def signature_from_bytes(data: bytes, num_perm: int | None = None) -> UInt64Array:
    """Inverse of :func:`signature_to_bytes`; ``num_perm`` checks the length when given."""
    if len(data) % 8 or (num_perm is not None and len(data) != 8 * num_perm):
        expected = f"{8 * num_perm}" if num_perm is not None else "a multiple of 8"
        raise InputError(f"a stored signature has {len(data)} bytes; expected {expected}")
    return np.frombuffer(data, dtype="<u8").astype(np.uint64)
