"""SimhashIndex: add, query and remove fingerprints by key; every query exact and verified.

The index is a :class:`~neardup.blocks.BlockScheme` (which bits key which table) over a
store of (key, fingerprint) entries. Queries return :class:`Match` objects within
``max_distance``, ordered by (distance, key), identical to a brute-force scan. The store is
in memory for now (:mod:`neardup.storage.memory`); ``save``/``load`` write and read one
``.npz`` file whose header records the format version and the configuration, checked on load.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .blocks import BlockScheme
from .config import FingerprintConfig
from .dedup.batch import DEFAULT_MU, BucketStats, as_words
from .errors import ConfigError, IndexConfigMismatchError, InputError, KeyExistsError, KeyNotFoundError
from .hashing import check_bits, ints_to_array
from .storage.memory import Key, MemoryStorage, key_hash, key_hashes
from .storage.memory import plain_key as _plain

FORMAT = "neardup-index"
FORMAT_VERSION = 1
#: Bytes per entry that do not depend on the number of tables (fingerprint, key, alive flag,
#: sorted key hash and its slot) and per entry per table (slot and 32-bit filter).
FIXED_BYTES_PER_ENTRY = 29
TABLE_BYTES_PER_ENTRY = 8
DEFAULT_MEMORY_BUDGET = 64


@dataclass(frozen=True, slots=True)
class Match:
    """One verified near-duplicate of a query."""

    key: Key
    fingerprint: int
    distance: int


def _order(match: Match) -> tuple[int, bool, Key]:
    """(distance, key) with int keys before str keys, so mixed keys still sort."""
    return (match.distance, isinstance(match.key, str), match.key)


def tables_within(budget: int, bits: int = 64) -> int:
    """How many tables fit ``budget`` bytes per indexed fingerprint (approximately)."""
    fixed = FIXED_BYTES_PER_ENTRY + (8 if bits == 128 else 0)
    return max(0, (budget - fixed) // TABLE_BYTES_PER_ENTRY)


class SimhashIndex:
    """Fingerprints by key, searchable within ``max_distance`` bits.

    ``scheme`` defaults to the pigeonhole scheme, or with ``expected_size`` to
    ``BlockScheme.auto(expected_size, ...)`` limited to the tables that fit
    ``memory_budget`` bytes per fingerprint. Keys are ints or strs; fingerprints are ints
    (single calls) or arrays in the :mod:`neardup.distance` layout (batch calls).
    ``fingerprint_config`` is recorded so a saved index refuses fingerprints made otherwise.
    """

    def __init__(
        self,
        bits: int = 64,
        max_distance: int = 3,
        *,
        scheme: BlockScheme | None = None,
        expected_size: int | None = None,
        mu: float = DEFAULT_MU,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        fingerprint_config: FingerprintConfig | None = None,
    ) -> None:
        check_bits(bits)
        if fingerprint_config is not None and fingerprint_config.bits != bits:
            raise ConfigError(
                f"the fingerprint config makes {fingerprint_config.bits}-bit fingerprints "
                f"but the index is for {bits}-bit ones; pass bits={fingerprint_config.bits}"
            )
        if mu < 0:
            raise ConfigError(f"mu must be >= 0; got {mu!r}")
        if scheme is None:
            if expected_size is None:
                scheme = BlockScheme(bits, max_distance)
            else:
                limit = max(max_distance + 1, tables_within(memory_budget, bits))
                scheme = BlockScheme.auto(expected_size, bits, max_distance, max_tables=limit)
        if scheme.bits != bits or scheme.max_distance != max_distance:
            raise ConfigError(
                f"the block scheme is for bits={scheme.bits}, max_distance={scheme.max_distance}; "
                f"the index for bits={bits}, max_distance={max_distance}"
            )
        self.bits = bits
        self.max_distance = max_distance
        self.scheme = scheme
        self.mu = mu
        self.fingerprint_config = fingerprint_config
        self._store = MemoryStorage(scheme, mu)

    def __repr__(self) -> str:
        return f"SimhashIndex({len(self)} fingerprints; {self.scheme.describe()})"

    # -- adding --------------------------------------------------------------------------
    def add(self, key: Key, fingerprint: int) -> None:
        """Store one fingerprint; :class:`KeyExistsError` if the key is stored already."""
        self.add_many([key], self._one_array(fingerprint))

    def add_many(self, keys: Sequence[Key] | npt.NDArray[Any], fingerprints: npt.ArrayLike) -> None:
        """Store a batch. All or nothing: a stored or repeated key raises before any is added."""
        words = self._words(fingerprints)
        if len(keys) != words.shape[0]:
            raise InputError(f"got {len(keys)} keys for {words.shape[0]} fingerprints; give one key each")
        if not len(keys):
            return
        keys = _check_keys(keys)
        hashes = key_hashes(keys)
        _check_distinct(keys, hashes)
        existing = self._store.find_many(keys, hashes)
        taken = np.flatnonzero(existing >= 0)
        if taken.size:
            key = _plain(keys[int(taken[0])])
            raise KeyExistsError(
                f"key {key!r} is already in the index ({taken.size} of this batch are); "
                "remove it first or use another key"
            )
        self._store.append(keys, words)

    # -- reading -------------------------------------------------------------------------
    def query(self, fingerprint: int, max_distance: int | None = None) -> list[Match]:
        """Stored fingerprints within ``max_distance`` (default: the index's), by (distance, key)."""
        distance = self._distance(max_distance)
        value = self._one_int(fingerprint)
        key_at = self._store.key_at
        matches = [
            Match(key_at(slot), found, found_distance)
            for slot, (found, found_distance) in self._store.search_one(value, distance).items()
        ]
        if len(matches) > 1:
            matches.sort(key=_order)
        return matches

    def query_many(self, fingerprints: npt.ArrayLike, max_distance: int | None = None) -> list[list[Match]]:
        """:meth:`query` for a batch, vectorised; one list per fingerprint, in order."""
        distance = self._distance(max_distance)
        words = self._words(fingerprints)
        rows, slots, distances = self._store.search_many(words, distance)
        out: list[list[Match]] = [[] for _ in range(words.shape[0])]
        bounds = np.searchsorted(rows, np.arange(words.shape[0] + 1))
        for row in np.flatnonzero(np.diff(bounds)).tolist():
            start, stop = bounds[row], bounds[row + 1]
            out[row] = self._matches(slots[start:stop], distances[start:stop])
        return out

    def get(self, key: Key) -> int:
        """The fingerprint stored under ``key``; :class:`KeyNotFoundError` if none."""
        slot = self._store.find(_check_key(key))
        if slot < 0:
            raise KeyNotFoundError(f"key {key!r} is not in the index")
        return self._store.fingerprint_at(slot)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, bool) or not isinstance(key, int | str | np.integer):
            return False
        return self._store.find(_plain(key)) >= 0

    def __len__(self) -> int:
        return self._store.live

    def __iter__(self) -> Iterator[Key]:
        """The stored keys (in no particular order)."""
        store = self._store
        for slot in np.flatnonzero(store.alive[: store.count]).tolist():
            yield store.key_at(slot)

    def items(self) -> Iterator[tuple[Key, int]]:
        store = self._store
        for slot in np.flatnonzero(store.alive[: store.count]).tolist():
            yield store.key_at(slot), store.fingerprint_at(slot)

    # -- removing ------------------------------------------------------------------------
    def remove(self, key: Key) -> None:
        """Forget one key; :class:`KeyNotFoundError` if it is not stored."""
        self.remove_many([key])

    def remove_many(self, keys: Iterable[Key]) -> None:
        """Forget keys. All or nothing: a missing key raises before any is removed."""
        listed = _check_keys(list(keys))
        if not listed:
            return
        slots = self._store.find_many(listed, key_hashes(listed))
        missing = np.flatnonzero(slots < 0)
        if missing.size:
            raise KeyNotFoundError(
                f"key {_plain(listed[int(missing[0])])!r} is not in the index "
                f"({missing.size} of this batch are not); nothing was removed"
            )
        self._store.kill(np.unique(slots))

    # -- facts ---------------------------------------------------------------------------
    def stats(self) -> BucketStats:
        """Bucket statistics of the largest segment (sizes, largest bucket, splits)."""
        return self._store.stats()

    def memory_bytes(self) -> int:
        """Bytes the index's arrays hold (str keys' objects estimated)."""
        return self._store.nbytes()

    def compact(self) -> None:
        """Rebuild into one segment without removed entries (also done automatically)."""
        self._store.rebuild()

    def config(self) -> dict[str, Any]:
        return {
            "bits": self.bits,
            "max_distance": self.max_distance,
            "scheme": self.scheme.to_dict(),
            "mu": self.mu,
            "fingerprint_config": None
            if self.fingerprint_config is None
            else self.fingerprint_config.to_dict(),
        }

    # -- files ---------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the index to one ``.npz`` file (atomically: a temporary file, then rename)."""
        store = self._store
        live = np.flatnonzero(store.alive[: store.count])
        header = {"format": FORMAT, "version": FORMAT_VERSION, "count": int(live.size), **self.config()}
        arrays: dict[str, npt.NDArray[Any]] = {
            "header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
            "words": store.words[live],
        }
        keys = store.keys[live]
        if keys.dtype == object:
            texts = [json.dumps(key) for key in keys.tolist()]
            arrays["key_json"] = np.frombuffer("\n".join(texts).encode("utf-8", "surrogatepass"), np.uint8)
        else:
            arrays["keys"] = keys
        target = Path(path)
        temporary = target.with_name(target.name + ".tmp")
        try:
            with open(temporary, "wb") as stream:
                np.savez(stream, **arrays)  # type: ignore[arg-type]
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        bits: int | None = None,
        max_distance: int | None = None,
        fingerprint_config: FingerprintConfig | None = None,
    ) -> SimhashIndex:
        """Read :meth:`save` output. Settings given here must match the stored ones
        (:class:`IndexConfigMismatchError` otherwise), so fingerprints made under another
        configuration are never mixed in."""
        try:
            with np.load(path, allow_pickle=False) as data:
                header = json.loads(bytes(data["header"]).decode())
                _check_header(header, path)
                words = data["words"]
                if "keys" in data:
                    keys: Sequence[Key] | npt.NDArray[Any] = data["keys"]
                else:
                    text = bytes(data["key_json"]).decode("utf-8", "surrogatepass")
                    keys = [json.loads(line) for line in text.split("\n")] if text else []
        except (OSError, ValueError, KeyError, EOFError, TypeError, zipfile.BadZipFile) as exc:
            # EOFError: an empty file; BadZipFile: a truncated or corrupt one; TypeError: a
            # plain .npy file (np.load returns an array, which is no context manager).
            raise InputError(f"cannot read {str(path)!r} as a neardup index: {exc}") from exc
        recorded = header["fingerprint_config"]
        stored = FingerprintConfig.from_dict(recorded) if recorded else None
        expected = {"bits": bits, "max_distance": max_distance}
        for name, value in expected.items():
            if value is not None and value != header[name]:
                raise IndexConfigMismatchError(
                    f"{path}: the index was built with {name}={header[name]}, not {value}; "
                    f"open it with {name}={header[name]} or build a new index"
                )
        if fingerprint_config is not None and (
            stored is None or stored.to_dict() != fingerprint_config.to_dict()
        ):
            raise IndexConfigMismatchError(
                f"{path}: the index was built with fingerprint settings "
                f"{header['fingerprint_config']}, not {fingerprint_config.to_dict()}; "
                "fingerprint with the stored settings or build a new index"
            )
        index = cls(
            header["bits"],
            header["max_distance"],
            scheme=BlockScheme.from_dict(header["scheme"]),
            mu=header["mu"],
            fingerprint_config=stored,
        )
        if len(keys):
            index.add_many(keys, words if header["bits"] == 128 else words.reshape(-1))
        return index

    # -- helpers -------------------------------------------------------------------------
    def _distance(self, max_distance: int | None) -> int:
        if max_distance is None:
            return self.max_distance
        if isinstance(max_distance, bool) or not isinstance(max_distance, int | np.integer):
            raise ConfigError(f"max_distance must be an integer; got {max_distance!r}")
        if not 0 <= max_distance <= self.max_distance:
            raise ConfigError(
                f"max_distance={max_distance} is outside what this index guarantees "
                f"(0 to {self.max_distance}); build an index with max_distance={max_distance}"
            )
        return int(max_distance)

    def _one_int(self, fingerprint: int) -> int:
        if type(fingerprint) is not int:
            if isinstance(fingerprint, bool) or not isinstance(fingerprint, int | np.integer):
                raise InputError(f"a fingerprint must be an int; got {type(fingerprint).__name__}")
            fingerprint = int(fingerprint)
        if not 0 <= fingerprint < 1 << self.bits:
            raise InputError(f"fingerprint {fingerprint} does not fit in {self.bits} bits")
        return fingerprint

    def _one_array(self, fingerprint: int) -> npt.NDArray[np.uint64]:
        value = self._one_int(fingerprint)
        if self.bits == 128:
            return np.array([[value & (2**64 - 1), value >> 64]], dtype=np.uint64)
        return np.array([value], dtype=np.uint64)

    def _words(self, fingerprints: npt.ArrayLike) -> npt.NDArray[np.uint64]:
        array = np.asarray(fingerprints)
        if not isinstance(fingerprints, np.ndarray) and array.ndim == 1:
            # A list of ints: numpy would make [1, 2**63] float64 and a 128-bit list of small
            # values one-dimensional, so convert the values themselves.
            array = _ints_to_words(list(fingerprints), self.bits)  # type: ignore[arg-type]
        elif array.dtype == object:
            array = _ints_to_words(list(array.reshape(-1)), self.bits)
        elif self.bits == 128 and array.ndim == 1 and array.size == 0:
            array = array.reshape(0, 2)
        return as_words(array, self.bits)

    def _matches(self, slots: npt.NDArray[np.int64], distances: npt.NDArray[np.int64]) -> list[Match]:
        store = self._store
        matches = [
            Match(store.key_at(slot), store.fingerprint_at(slot), distance)
            for slot, distance in zip(slots.tolist(), distances.tolist(), strict=True)
        ]
        matches.sort(key=_order)
        return matches


def _ints_to_words(values: list[Any], bits: int) -> npt.NDArray[np.uint64]:
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 0 <= value < 1 << bits:
            raise InputError(f"fingerprint {value!r} is not an integer from 0 to 2^{bits} - 1")
    return ints_to_array([int(value) for value in values], bits)


def _check_header(header: dict[str, Any], path: str | Path) -> None:
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InputError(f"{str(path)!r} is not a neardup index file")
    if header.get("version") != FORMAT_VERSION:
        raise InputError(
            f"{str(path)!r} is a neardup index of format version {header.get('version')}; "
            f"this neardup reads version {FORMAT_VERSION}: rebuild the index"
        )


def _check_key(key: Any) -> Key:
    if isinstance(key, bool) or not isinstance(key, int | str | np.integer | np.str_):
        raise InputError(f"key {key!r} is a {type(key).__name__}; keys must be int or str")
    return _plain(key)


def _check_keys(keys: Sequence[Key] | npt.NDArray[Any]) -> Sequence[Key] | npt.NDArray[Any]:
    if isinstance(keys, np.ndarray) and keys.dtype.kind in "iu":
        return keys
    return [_check_key(key) for key in keys]


def _check_distinct(keys: Sequence[Key] | npt.NDArray[Any], hashes: npt.NDArray[np.uint64]) -> None:
    ordered = np.sort(hashes)  # np.unique hashes its input, 10x slower than a sort here
    if not np.any(ordered[1:] == ordered[:-1]):
        return
    seen: dict[Key, int] = {}
    for position, key in enumerate(keys):
        plain = _plain(key)
        if plain in seen:
            raise KeyExistsError(
                f"key {plain!r} appears twice in the batch (positions {seen[plain]} and {position}); "
                "keys must be unique"
            )
        seen[plain] = position


__all__ = ["FORMAT_VERSION", "Match", "SimhashIndex", "key_hash", "tables_within"]
