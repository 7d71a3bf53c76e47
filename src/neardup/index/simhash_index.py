"""SimhashIndex: add, query and remove fingerprints by key; every query exact and verified.

The index is a :class:`~neardup.blocks.BlockScheme` (which bits key which table) over a
:class:`~neardup.storage.base.Storage` of (key, fingerprint) records. Queries return
:class:`Match` objects within ``max_distance``, ordered by (distance, key), identical to a
brute-force scan. ``SimhashIndex(...)`` lives in memory, in the block index of
:mod:`.memory_blocks` (``save``/``load`` write and read one ``.npz`` file);
``SimhashIndex.open(url)`` lives in a store (SQLite, Redis, PostgreSQL, MariaDB/MySQL,
MongoDB, ``memory://``) whose meta records the configuration, checked on every open. A store
knows nothing of the scheme: the index hands it each record's posting keys and keeps the
candidates it answers within the distance (:mod:`.store_search`).

The index stores and finds; policy (check-and-add with cluster ids, MinHash verification)
lives above it in :mod:`neardup.dedup.incremental`, which uses only the public methods here.
"""

from __future__ import annotations

import contextlib
import json
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..blocks import DEFAULT_MU, BucketStats
from ..distance import as_words, ints_to_words
from ..errors import ConfigError, IndexConfigMismatchError, InputError
from ..fingerprint.config import FingerprintConfig
from ..similarity.bands import BandScheme, Scheme, scheme_from_dict
from ..similarity.minhash import signature_blobs
from ..storage import DEFAULT_URL, open_storage
from ..storage.base import (
    Candidates,
    Key,
    RecordBatch,
    Storage,
    StoredRecord,
    check_keys,
    key_hash,
    key_hashes,
    key_not_found_error,
    lookable,
    plain_key,
)
from ..storage.sqlite import SqliteStorage
from ..storage.urls import redacted
from .config import IndexConfig
from .digests import check_same_documents, replace_records
from .files import read_digests, write_index_file
from .keys import (
    Keep,
    Match,
    Matches,
    _check_distinct,
    _check_key,
    _check_keys,
    _key_array,
    capped,
    check_max_matches,
    match_order,
    matches_of,
)
from .memory_blocks import MemoryBlockIndex
from .meta import (
    DEFAULT_MEMORY_BUDGET,
    FORMAT,
    FORMAT_VERSION,
    check_header,
    resolve_scheme,
    settle_meta,
    tables_within,
)
from .store_search import bucket_stats, record_shape, search

#: What ``add_many`` does with a key that is stored already (see its docstring).
EXISTING = ("fail", "skip", "replace")


class SimhashIndex:
    """Fingerprints by key, searchable within ``max_distance`` bits.

    ``SimhashIndex(...)`` is an index in this process's memory; :meth:`open` opens (or
    creates) one in a store named by URL (SQLite by default, or Redis, PostgreSQL,
    MariaDB/MySQL, MongoDB) with the same methods. ``scheme`` defaults to the pigeonhole
    scheme, or with ``expected_size`` to ``BlockScheme.auto(expected_size, ...)`` limited to
    the tables that fit ``memory_budget`` bytes per fingerprint. Keys are ints or strs;
    fingerprints are ints (single calls) or arrays in the :mod:`neardup.distance` layout
    (batch calls). ``fingerprint_config`` is recorded so a saved or stored index refuses
    fingerprints made otherwise.

    This is the low-level index of fingerprints, and the explicit choice of a Simhash block
    index. For texts in a store use :class:`neardup.Index`: its ``Index.open(url)`` creates
    the band index the command line and the service create (far better recall), where
    ``SimhashIndex.open(url)`` with no config creates a Simhash index with k = 3.
    """

    def __init__(
        self,
        bits: int = 64,
        max_distance: int = 3,
        *,
        scheme: Scheme | None = None,
        expected_size: int | None = None,
        mu: float = DEFAULT_MU,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        fingerprint_config: FingerprintConfig | None = None,
        storage: Storage | None = None,
    ) -> None:
        config = IndexConfig(bits, max_distance, scheme, expected_size, mu, memory_budget, fingerprint_config)
        self.bits = bits
        self.scheme = resolve_scheme(config)
        self.max_distance = self.scheme.max_distance
        self.mu = mu
        self.fingerprint_config = fingerprint_config
        self.url = "memory://"
        self.storage: Storage = MemoryBlockIndex(self.scheme, mu) if storage is None else storage
        self.storage.attach(record_shape(self.scheme))
        self._memory = self.storage if isinstance(self.storage, MemoryBlockIndex) else None
        #: Verifier settings recorded in a store's meta (see IndexConfig.verification).
        self.verification: dict[str, Any] | None = None

    @classmethod
    def open(
        cls,
        url: str = DEFAULT_URL,
        config: IndexConfig | None = None,
        *,
        create: bool = True,
        create_in_existing: bool = False,
        check_files: bool = True,
    ) -> SimhashIndex:
        """The index stored at ``url`` (see :mod:`neardup.storage`), created with ``config``
        (default :class:`IndexConfig()`, a Simhash block index with k = 3; the command line's
        default index is :meth:`neardup.Index.open`'s) when the store is empty. An existing index is opened
        with its stored configuration; a ``config`` that disagrees with it, or setting files
        (idf, dictionary, stopwords) whose content changed, raise
        :class:`IndexConfigMismatchError` showing both (``check_files=False`` skips the files,
        for callers that fingerprint nothing). ``create=False`` refuses a new store;
        ``create_in_existing`` lets a new index into an SQLite database with other tables."""
        storage = open_storage(url)
        if create_in_existing and isinstance(storage, SqliteStorage):
            storage.dialect.create_in_existing = True
        try:
            # What a new store is made for; an existing one is attached to its own below.
            storage.attach(record_shape(resolve_scheme(config or IndexConfig())))
            meta, fingerprint = settle_meta(storage, config, create, redacted(url), check_files)
            index = cls(
                meta["bits"],
                meta["max_distance"],
                scheme=scheme_from_dict(meta["scheme"]),
                mu=meta["mu"],
                fingerprint_config=fingerprint,
                storage=storage,
            )
            index.verification = meta.get("verification")
        except BaseException:
            storage.close()
            raise
        index.url = url
        return index

    def close(self) -> None:
        """Release the store's connections (nothing to do in memory)."""
        self.storage.close()

    def __enter__(self) -> SimhashIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SimhashIndex({len(self)} fingerprints at {redacted(self.url)}; {self.scheme.describe()})"

    # -- adding --------------------------------------------------------------------------
    def add(self, key: Key, fingerprint: int) -> None:
        """Store one fingerprint; :class:`KeyExistsError` if the key is stored already."""
        self.add_many([key], self._one_array(fingerprint))

    def add_many(
        self,
        keys: Sequence[Key] | npt.NDArray[Any],
        fingerprints: npt.ArrayLike,
        *,
        signatures: npt.ArrayLike | None = None,
        existing: str = "fail",
        clusters: Sequence[Key | None] | None = None,
        digests: Sequence[bytes | None] | None = None,
    ) -> list[bool]:
        """Store a batch; which records were added. All or nothing: a stored or repeated key
        raises before any is added (one transaction in a persistent store). With
        ``existing="skip"`` a key stored already, or by another writer meanwhile, is skipped
        (False) instead, unless its ``digests`` entry (:func:`~.digests.text_digest`) says the
        text changed; ``"replace"`` stores the batch over stored records (which keep their
        cluster ids unless ``clusters`` are given). ``signatures`` ((n, num_perm) from
        :meth:`Verifier.signatures`) are stored for verified queries, ``clusters`` as
        check-and-add assigned them. Ids follow the id rule (:func:`~.base.key_problem`)."""
        if existing not in EXISTING:
            raise InputError(f"existing must be one of {', '.join(EXISTING)}; got {existing!r}")
        words = self._stored_words(self.words(fingerprints), signatures)
        checked = self._batch_keys(keys, words)
        blobs = signature_blobs(signatures, len(checked))
        for name, given in (("cluster ids", clusters), ("digests", digests)):
            if given is not None and len(given) != len(checked):
                raise InputError(f"got {len(given)} {name} for {len(checked)} records; give one each")
        listed = None if clusters is None else list(clusters)
        batch = RecordBatch(checked, words, listed, blobs, None if digests is None else list(digests))
        batch.postings = self._postings(words)
        width = self.scheme.fingerprint_words
        if existing == "skip" and len(batch):
            return self.storage.add_new(batch, lambda stored: check_same_documents(batch, stored, width))
        if existing == "replace" and len(batch):
            replace_records(self.storage, batch)
            return [True] * len(batch)
        self.storage.add_many(batch)
        return [True] * len(batch)

    def check_keys(
        self, keys: Sequence[Key] | npt.NDArray[Any], count: int, *, validate: bool = True
    ) -> Sequence[Key] | npt.NDArray[Any]:
        """Keys for ``count`` fingerprints, checked as every batch call checks them: one each,
        ints or strs (numpy scalars made plain) and, with ``validate``, within the id rule."""
        if len(keys) != count:
            raise InputError(f"got {len(keys)} keys for {count} fingerprints; give one key each")
        checked = _check_keys(keys)
        if validate:
            check_keys(checked)  # type: ignore[arg-type]
        return checked

    def _batch_keys(
        self, keys: Sequence[Key] | npt.NDArray[Any], words: npt.NDArray[np.uint64], validate: bool = True
    ) -> Any:
        """Checked, distinct keys in the form the store takes (arrays only in memory)."""
        checked = self.check_keys(keys, words.shape[0], validate=validate)
        if len(checked):
            _check_distinct(checked, key_hashes(checked))
        if self._memory is None and isinstance(checked, np.ndarray):
            return [plain_key(key) for key in checked.tolist()]
        return checked

    # -- reading -------------------------------------------------------------------------
    def query(
        self,
        fingerprint: int,
        *,
        max_distance: int | None = None,
        signature: npt.ArrayLike | None = None,
        max_matches: int | None = None,
    ) -> Matches:
        """Stored fingerprints within ``max_distance`` (default: the index's), by (distance,
        key). A band index needs the query's text ``signature`` and returns every record
        sharing a band with it (its distance is the Hamming distance, for information).
        ``max_matches`` keeps only the nearest that many (the answer's ``truncated`` says
        when it cut), so near-identical records by the thousand cannot make an answer huge.
        The index's answer alone: :class:`~neardup.dedup.incremental.IncrementalDeduper`
        verifies matches by their stored signatures."""
        distance = self._distance(max_distance)
        cap = check_max_matches(max_matches)
        value = self._one_int(fingerprint)
        if self.bands is not None:
            sketch = None if signature is None else np.asarray(signature, dtype=np.uint64).reshape(1, -1)
            return self.query_many(
                self._one_array(value), max_distance=distance, signatures=sketch, max_matches=cap
            )[0]
        if self._memory is not None:
            found = self._memory.search_one(value, distance)
            matches = [Match(key, stored, near) for key, stored, near in found]
            if len(matches) > 1:
                matches.sort(key=match_order)
            return capped(matches, cap)
        return self.query_many(self._one_array(value), max_distance=distance, max_matches=cap)[0]

    def query_many(
        self,
        fingerprints: npt.ArrayLike,
        *,
        max_distance: int | None = None,
        signatures: npt.ArrayLike | None = None,
        max_matches: int | None = None,
    ) -> list[Matches]:
        """:meth:`query` for a batch, vectorised; one list per fingerprint, in order
        (``signatures``: one row per fingerprint, for a band index)."""
        distance = self._distance(max_distance)
        cap = check_max_matches(max_matches)
        words = self._stored_words(self.words(fingerprints), signatures)
        return matches_of(
            words, self._search(words, distance), self.scheme.fingerprint_words, max_matches=cap
        )

    def query_many_with_records(
        self,
        fingerprints: npt.ArrayLike,
        *,
        max_distance: int | None = None,
        signatures: npt.ArrayLike | None = None,
        max_matches: int | None = None,
        keep: Keep | None = None,
    ) -> tuple[list[Matches], dict[Key, StoredRecord]]:
        """:meth:`query_many`, and the stored record (cluster id, signature) of every match:
        what verifying and placing a batch needs, read with the postings where the store
        can (SQL stores), which saves a statement per batch over :meth:`get_many`.
        ``keep`` (a verifier's verdict on candidates) decides which are matches before the
        ``max_matches`` cap, nearest first, so it is asked about few more than the cap."""
        distance = self._distance(max_distance)
        cap = check_max_matches(max_matches)
        words = self._stored_words(self.words(fingerprints), signatures)
        found = self._search(words, distance, records=True)
        matches = matches_of(words, found, self.scheme.fingerprint_words, max_matches=cap, keep=keep)
        return matches, found.records

    def check(
        self, fingerprint: int, *, max_distance: int | None = None, signature: npt.ArrayLike | None = None
    ) -> bool:
        """Is any stored fingerprint within ``max_distance``? (Seed 002's first mode.)"""
        return bool(self.query(fingerprint, max_distance=max_distance, signature=signature, max_matches=1))

    def check_many(
        self,
        fingerprints: npt.ArrayLike,
        *,
        max_distance: int | None = None,
        signatures: npt.ArrayLike | None = None,
    ) -> list[bool]:
        found = self.query_many(fingerprints, max_distance=max_distance, signatures=signatures, max_matches=1)
        return [bool(matches) for matches in found]

    @property
    def bands(self) -> BandScheme | None:
        """The band scheme of an index searched by text sketches (None: Simhash blocks)."""
        return self.scheme if isinstance(self.scheme, BandScheme) else None

    def _stored_words(
        self, words: npt.NDArray[np.uint64], signatures: npt.ArrayLike | None
    ) -> npt.NDArray[np.uint64]:
        """What the store keeps and searches per record: the fingerprint words, followed by
        the band keys of the signature in a band index."""
        return words if self.bands is None else self.bands.compose(words, signatures)

    def _postings(self, words: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64] | None:
        """The posting keys a store lists records of ``words`` under (the in-memory block
        index keys its segments on the words themselves)."""
        return None if self._memory is not None else self.scheme.keys(words)

    def _search(self, words: npt.NDArray[np.uint64], distance: int, *, records: bool = False) -> Candidates:
        """The stored records within ``distance`` of each row of ``words`` (``records``: with
        their stored records)."""
        if self._memory is None:
            return search(self.storage, self.scheme, words, distance, records=records)
        rows, keys, found = self._memory.search_many(words, distance)
        read: dict[Key, StoredRecord] = {}
        if records:
            stored = self._memory.get_many(list(dict.fromkeys(keys)))
            read = {record.key: record for record in stored if record is not None}
        return Candidates(rows, keys, found, read)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the store's writer lock (across processes for server stores), so a caller can
        read, decide and write as one step: what check-and-add needs to hand out one cluster
        id to near-duplicates that arrive at once."""
        with self.storage.exclusive():
            yield

    def get(self, key: Key) -> StoredRecord | None:
        """The stored record (fingerprint, cluster id, signature) of ``key``, None if absent:
        one element of :meth:`get_many` (``index.get(key).fingerprint`` is the fingerprint)."""
        return self.get_many([key])[0]

    def get_many(self, keys: Sequence[Key]) -> list[StoredRecord | None]:
        """The stored records (fingerprint, cluster id, signature) of keys; None where absent
        (and for an id no store can hold, without asking the store)."""
        checked = [_check_key(key) for key in keys]
        if all(lookable(key) for key in checked):
            return self.storage.get_many(checked)
        asked = [key for key in checked if lookable(key)]
        found = iter(self.storage.get_many(asked) if asked else [])
        return [next(found) if lookable(key) else None for key in checked]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, bool) or not isinstance(key, int | str | np.integer):
            return False
        return self.get_many([plain_key(key)])[0] is not None

    def __len__(self) -> int:
        return self.storage.size()

    def __iter__(self) -> Iterator[Key]:
        """The stored keys (in no particular order)."""
        for batch in self.storage.scan():
            for record in batch:
                yield record.key

    def items(self) -> Iterator[tuple[Key, int]]:
        for batch in self.storage.scan():
            for record in batch:
                yield record.key, record.fingerprint

    # -- removing ------------------------------------------------------------------------
    def remove(self, key: Key) -> None:
        """Forget one key; :class:`KeyNotFoundError` if it is not stored. Returns None: the
        key is removed or the call raises, so there is no count to give (:meth:`remove_many`
        returns 1 for the same call)."""
        self.remove_many([key])

    def remove_many(self, keys: Iterable[Key]) -> int:
        """Forget keys; the number removed (every distinct key given). All or nothing: a
        missing key raises :class:`KeyNotFoundError` before any is removed."""
        listed = [_check_key(key) for key in keys]
        absent = [key for key in listed if not lookable(key)]
        if absent:  # no store holds such an id
            raise key_not_found_error(absent[0], len(absent), "the index")
        if listed:
            self.storage.remove_many(listed)
        return len({(type(key), key) for key in listed})

    # -- facts ---------------------------------------------------------------------------
    def stats(self) -> BucketStats:
        """Bucket statistics (in memory: of the largest segment)."""
        if self._memory is not None:
            return self._memory.stats()
        return bucket_stats(self.scheme, self.storage.posting_counts())

    def memory_bytes(self) -> int:
        """Bytes the in-memory index's arrays hold (str keys' objects estimated); 0 for a
        persistent store, whose memory is the server's."""
        return 0 if self._memory is None else self._memory.nbytes()

    def compact(self) -> None:
        """Rebuild into one segment without removed entries (in memory; also automatic)."""
        if self._memory is not None:
            self._memory.rebuild()

    def config(self) -> dict[str, Any]:
        return {
            "bits": self.bits,
            "max_distance": self.max_distance,
            "scheme": self.scheme.to_dict(),
            "mu": self.mu,
            "fingerprint_config": None
            if self.fingerprint_config is None
            else self.fingerprint_config.to_dict(),
            "verification": self.verification,
        }

    # -- files ---------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the index to one ``.npz`` file (atomically: a temporary file, then rename)."""
        if self.bands is not None:
            raise ConfigError(
                "a band index keeps a text sketch per record, which .npz index files do not hold; "
                "keep it in a store instead (SimhashIndex.open, e.g. sqlite:///index.db)"
            )
        if self._memory is not None:
            store = self._memory
            live = np.flatnonzero(store.alive[: store.count])
            words = store.words[live]
            keys: Any = store.keys[live]
            digests = [store.digests.get(plain_key(key)) for key in keys.tolist()] if store.digests else []
        else:
            records = [record for batch in self.storage.scan() for record in batch]
            words = self.words([record.fingerprint for record in records]).reshape(len(records), -1)
            keys = _key_array([record.key for record in records])
            digests = [record.digest for record in records]
        header = {"format": FORMAT, "version": FORMAT_VERSION, "count": int(words.shape[0]), **self.config()}
        write_index_file(path, header, words, keys, digests)

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
            # neardup opens the file: given a path, numpy left it open when the archive was
            # damaged (a ResourceWarning per bad file).
            with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as data:
                header = json.loads(bytes(data["header"]).decode())
                check_header(header, path)
                words = data["words"]
                if "keys" in data:
                    keys: Sequence[Key] | npt.NDArray[Any] = data["keys"]
                else:
                    text = bytes(data["key_json"]).decode("utf-8", "surrogatepass")
                    keys = [json.loads(line) for line in text.split("\n")] if text else []
                digests = read_digests(data)
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
            scheme=scheme_from_dict(header["scheme"]),
            mu=header["mu"],
            fingerprint_config=stored,
        )
        if len(keys):
            # A saved index is loaded as it was, even with ids from before the id rule.
            loaded = index.words(words if header["bits"] == 128 else words.reshape(-1))
            checked = index._batch_keys(keys, loaded, validate=False)
            index.storage.add_many(
                RecordBatch(checked, loaded, digests=digests, postings=index._postings(loaded))
            )
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

    def words(self, fingerprints: npt.ArrayLike) -> npt.NDArray[np.uint64]:
        """Fingerprints (one int, a list of ints, or an array in the :mod:`neardup.distance`
        layout) as checked (n, w) uint64 words of this index's width; w is 2 for 128 bits."""
        if isinstance(fingerprints, int | np.integer):
            return as_words(self._one_array(fingerprints), self.bits)  # type: ignore[arg-type]
        array = np.asarray(fingerprints)
        if not isinstance(fingerprints, np.ndarray) and array.ndim == 1:
            # A list of ints: numpy would make [1, 2**63] float64 and a 128-bit list of small
            # values one-dimensional, so convert the values themselves.
            array = ints_to_words(list(fingerprints), self.bits)  # type: ignore[arg-type]
        elif array.dtype == object:
            array = ints_to_words(list(array.reshape(-1)), self.bits)
        elif self.bits == 128 and array.ndim == 1 and array.size == 0:
            array = array.reshape(0, 2)
        return as_words(array, self.bits)


__all__ = ["FORMAT_VERSION", "Match", "SimhashIndex", "key_hash", "resolve_scheme", "tables_within"]
