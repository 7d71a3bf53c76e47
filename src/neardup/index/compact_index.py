"""The compact index: a band index whose stored record is 64 bytes and which decides its
candidates itself, by the records' estimate (:mod:`neardup.similarity.compact`).

It is a :class:`SimhashIndex` in every other respect (stores, postings, keys, digests,
clusters), so the policy above it (:class:`neardup.Index`, check-and-add) treats it as a band
index: it hands over each batch's 512-byte text sketches, from which :meth:`add_many` makes
the records (the sketch itself is not stored), and a query finds candidates by the band keys
and keeps those whose estimate reaches the recorded threshold, before the policy sees them.
The candidates reach the policy without signatures, so it keeps them as found.

:func:`open_stored` opens any stored index, this kind or the others, from its meta: what
``Index.open`` calls, so a compact store reopens with no option.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import StorageUnsupportedError
from ..similarity.bands import Scheme, scheme_from_dict
from ..similarity.compact import CompactScheme, compact_similarity
from ..similarity.verify import Verifier
from ..storage import DEFAULT_URL, open_storage
from ..storage.base import Candidates, Storage
from ..storage.sqlite import SqliteStorage
from ..storage.urls import redacted
from .config import IndexConfig
from .meta import record_shape, resolve_scheme, settle_meta
from .simhash_index import Decide, SimhashIndex, search


def stored_scheme(data: dict[str, Any]) -> Scheme:
    """The scheme a meta records: a compact one (``kind`` "compact"), or a band or block one."""
    if data.get("kind") == "compact":
        return CompactScheme.from_dict(data)
    return scheme_from_dict(data)


def open_stored(
    url: str = DEFAULT_URL,
    config: IndexConfig | None = None,
    *,
    create: bool = True,
    create_in_existing: bool = False,
    check_files: bool = True,
) -> SimhashIndex:
    """:meth:`SimhashIndex.open`, for every kind of index: a :class:`CompactIndex` where the
    store's meta (or a new store's ``config``) says compact, else a :class:`SimhashIndex`."""
    storage = open_storage(url)
    if create_in_existing and isinstance(storage, SqliteStorage):
        storage.dialect.create_in_existing = True
    try:
        requested = resolve_scheme(config or IndexConfig())
        check_store(storage, requested)  # before a new store's meta is written
        storage.attach(record_shape(requested))
        meta, fingerprint = settle_meta(storage, config, create, redacted(url), check_files)
        scheme = stored_scheme(meta["scheme"])
        check_store(storage, scheme)
        kind = CompactIndex if isinstance(scheme, CompactScheme) else SimhashIndex
        index = kind(
            meta["bits"],
            meta["max_distance"],
            scheme=scheme,
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


#: Stores whose postings answer fingerprints only (Redis buckets keep a member's fingerprint),
#: where a compact index could not read the records it decides by.
FINGERPRINT_ONLY_POSTINGS = ("redis",)


def check_store(storage: Storage, scheme: Scheme) -> None:
    """Refuse a compact index in a store whose postings hold fingerprints only."""
    if isinstance(scheme, CompactScheme) and storage.name in FINGERPRINT_ONLY_POSTINGS:
        raise StorageUnsupportedError(
            f"a compact index decides by the 64-byte records its postings return, and {storage.name} "
            "postings keep fingerprints only: use SQLite, PostgreSQL, MariaDB/MySQL or MongoDB"
        )


class CompactIndex(SimhashIndex):
    """A band index of :data:`~neardup.similarity.compact.RECORD_BYTES`-byte records (open
    one with :func:`open_stored` or :meth:`neardup.Index.open`; create one with
    :meth:`IndexConfig.compact`)."""

    scheme: CompactScheme

    @property
    def threshold(self) -> float:
        """The estimate a candidate must reach: the recorded verifier's threshold."""
        return Verifier.from_settings(self.verification or {"mode": "sketch"}).cutoff

    def words(self, fingerprints: npt.ArrayLike) -> npt.NDArray[np.uint64]:
        """:meth:`SimhashIndex.words`; composed records ((n, 8) uint64) pass as they are."""
        if (
            isinstance(fingerprints, np.ndarray)
            and fingerprints.ndim == 2
            and fingerprints.shape[1] == self.scheme.words
            and fingerprints.dtype == np.uint64
        ):
            return fingerprints
        return super().words(fingerprints)

    def _stored_words(
        self, words: npt.NDArray[np.uint64], signatures: npt.ArrayLike | None
    ) -> npt.NDArray[np.uint64]:
        if words.shape[1] == self.scheme.words:
            return words
        return self.scheme.compose(words, signatures)

    def add_many(
        self,
        keys: Any,
        fingerprints: npt.ArrayLike,
        *,
        signatures: npt.ArrayLike | None = None,
        **options: Any,
    ) -> list[bool]:
        """:meth:`SimhashIndex.add_many` of the records made from the fingerprints and the
        text sketches (``signatures``); the sketches are not stored."""
        records = self._stored_words(self.words(fingerprints), signatures)
        return super().add_many(keys, records, **options)

    def _search(
        self,
        words: npt.NDArray[np.uint64],
        distance: int,
        *,
        records: bool = False,
        prefilter: Decide | None = None,
    ) -> Candidates:
        """The stored records that share a band with each row of ``words`` and whose
        estimate reaches :attr:`threshold` (``records``: with their stored records); the
        compact estimate is the whole decision, so a ``prefilter`` adds nothing."""
        return search(self.storage, self.scheme, words, distance, records=records, decide=self._decide)

    def _decide(
        self, queries: npt.NDArray[np.uint64], rows: npt.NDArray[np.int64], words: npt.NDArray[np.uint64]
    ) -> npt.NDArray[np.bool_]:
        """Which candidates' estimate against their query reaches :attr:`threshold`."""
        scheme = self.scheme
        if words.shape[1] < scheme.words:
            raise StorageUnsupportedError(
                f"{self.storage.name} returned {words.shape[1]}-word records; a compact index "
                f"decides by its {scheme.words}-word records"
            )
        similar = compact_similarity(scheme, queries[rows], words)
        return np.asarray(similar >= self.threshold - 1e-12)
