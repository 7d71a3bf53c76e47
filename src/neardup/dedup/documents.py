"""The persistent index's front door, :class:`Index`: texts in, near-duplicates out, for the
command line, the service and Python alike.

A stored index records the fingerprint settings and the verifier it was created with, so a
text added today is fingerprinted and verified exactly as one added a year ago. :class:`Index`
pairs a :class:`~neardup.index.simhash_index.SimhashIndex` (the store of fingerprints and
postings) with that fingerprinter and verifier, and the check-and-add policy below
(:class:`IncrementalDeduper`). Its work can be split in two steps: :meth:`Index.prepare` is
pure CPU (fingerprints and signatures of a batch of records) and touches no store, while
:meth:`~Index.add`, :meth:`~Index.check_and_add` and :meth:`~Index.query` take prepared
batches to the store. A server can so prepare the next batch while the store commits the last.

The policy is incremental dedup (seed 002 §2.2): check new records against a stored index and
add them, giving each a stable cluster id.

Seed 002 offers two modes: "is there any near-duplicate?" (:meth:`SimhashIndex.check`) and
"return all of them" (:meth:`SimhashIndex.query`). Streams need a third: decide and store in
one step. :class:`IncrementalDeduper` does that for a batch under the store's writer lock,
through the index's public methods only (the index stores and finds; this is the policy):

- A new record joins the cluster of its nearest match (smallest distance, then smallest key),
  among stored records and earlier records of the same batch; with no match it starts a
  cluster named by its own key. The cluster id is stored with the record and never changes,
  so ids handed out earlier stay valid (a later record that bridges two clusters joins the
  nearer one; clusters are never merged behind a client's back).
- A key submitted again with the same text (the same :func:`~neardup.index.digests.text_digest`:
  texts a word apart share a fingerprint 15 % of the time) gets its first answer
  (``added=False``), so retries are safe. Another text is refused (``KeyExistsError``: keeping
  either would lose data) unless ``existing="replace"`` updates the record (its cluster id
  stays). Records without a digest, and callers that give none, compare fingerprints.
- The batch is written in one transaction after every decision is made, so an acknowledged
  batch is stored whole and a failed one not at all.
- With a verifier (minhash or combined), a Simhash match counts only when the stored MinHash
  signatures confirm it, in queries and in check-and-add alike. A band index's sketch
  decides its candidates; with ``check_texts`` those near the threshold are decided by the
  exact Jaccard of the texts (the batch's given as ``texts``, the stored ones kept by
  check-and-add: :mod:`neardup.dedup.stored_texts`).
- A record whose text is empty (no shingles for a band index, no features for a Simhash
  one: no letters or digits) pairs with nothing, as in batch dedup: its query finds nothing
  and check-and-add starts its own cluster. Callers say which rows are empty (``empty``);
  fingerprints and sketches alone cannot tell, since one short text in 256 gets the sketch of
  an empty one.
- ``max_matches`` bounds the matches listed per record (the nearest are kept, and the list's
  ``truncated`` says when more were found), and the verifying it takes: a service must not
  answer 3,000 matches per document because 3,000 near-identical ones are stored. The
  cluster decision is the nearest match's, which every cap keeps, so it does not change.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from ..arrays import sorted_unique
from ..blocks import BlockScheme
from ..collector import collector_paused
from ..distance import row_distances, to_ints
from ..errors import ConfigError, IndexNotFoundError, InputError, KeyExistsError
from ..fingerprint.config import FingerprintConfig
from ..fingerprint.fingerprinter import Fingerprinter
from ..index.compact_index import CompactIndex, open_stored
from ..index.config import IndexConfig
from ..index.digests import changed_keys, changed_text_error, same_document, text_digest
from ..index.simhash_index import (
    Decide,
    Keep,
    Match,
    Matches,
    SimhashIndex,
    capped,
    check_max_matches,
    match_order,
    signature_blobs,
)
from ..io.read import BATCH_RECORDS, batches
from ..io.record import Record
from ..similarity.bands import SKETCH_BYTES
from ..similarity.minhash import (
    combined_score,
    estimate_jaccard,
    signature_from_bytes,
)
from ..similarity.shingles import Shingles
from ..similarity.sketches import CHECK_MARGIN, estimate_floor, estimate_from_bins, sketch_similarity
from ..similarity.verify import (
    Verifier,
    check_verifiable,
    metadata_of,
    metadata_sets,
    stacked_signatures,
    verify_with_records,
)
from ..storage import DEFAULT_URL
from ..storage.base import (
    MAX_KEY_BYTES,
    Key,
    StoredRecord,
    check_key,
    key_order,
    match_postings,
    plain_key,
    shown_key,
)
from ..storage.urls import redacted
from ..text.normalize import Normalizer
from .batch import find_all_pairs
from .stored_texts import TEXTS, TextCheck, keep_texts, unpack_text

UInt64Array = npt.NDArray[np.uint64]
#: What the text calls take: (id, text) pairs, an {id: text} mapping, or records.
Documents = Mapping[Key, str] | Iterable[tuple[Key, str] | Record]
#: The stored sketch of an empty text in a band index: bins 0, 1, ..., 255, 0, ..., 255.
#: ``text_sketches`` gives an empty text all 0xFF bins, but so it does one text in 256 of
#: those with a single shingle (its one bin value, copied everywhere), which a query could
#: then match (and all such short texts match each other). No text has this sketch:
#: adjacent bins differ everywhere, so every bin must be filled by its own shingles
#: (densification copies a neighbour's value into an empty bin) and then each of the 512
#: bytes must come out as here, a chance of 256^-512. A text's sketch agrees with it in
#: about 2 bins of 512 (Ĵ about 0), far below any threshold, so no query finds a stored
#: empty record; its band keys are one shared bucket no text reaches.
EMPTY_TEXT_SKETCH = (np.arange(SKETCH_BYTES, dtype=np.int64) % 256).astype(np.uint8).view(np.uint64)
EXISTING_CHOICES: tuple[str, ...] = ("fail", "skip", "replace")


def fingerprinter_of(opened: SimhashIndex) -> Fingerprinter:
    """The fingerprinter of the settings stored in the index."""
    config = opened.fingerprint_config
    if config is None:
        raise InputError(
            f"the index at {redacted(opened.url)} records no fingerprint settings (it was filled with "
            "fingerprints, not texts); add fingerprints through the Python API"
        )
    return Fingerprinter(config=config)


def stored_verifier(opened: SimhashIndex) -> Verifier | None:
    """The verifier recorded in the index's meta, or None for an unverified index."""
    return None if opened.verification is None else Verifier.from_settings(opened.verification)


def signatures_of(
    verifier: Verifier | None, group: Sequence[Record], fingerprinter: Fingerprinter
) -> UInt64Array | None:
    """The MinHash signatures a verifying index keeps for a batch (None otherwise): of the
    text shingles (minhash) or of the records' metadata, else their top keywords (combined)."""
    if verifier is None:
        return None
    texts = [record.text for record in group]
    if verifier.mode == "combined":
        metadata = [metadata_of(record.fields) for record in group]
        return verifier.signatures(texts, metadata_sets(metadata, texts, fingerprinter))
    if verifier.mode == "sketch":  # texts as the fingerprints see them (e.g. to_simplified)
        return verifier.signatures(texts, normalizer=fingerprinter.normalizer)
    return verifier.signatures(texts)


#: The only text an id given on a command line (or URL) with ``--int-ids`` may be: canonical
#: ASCII decimal, so "٣", "²", "0042" or "--5" never silently name another record.
_INT_ID = re.compile(r"0|-?[1-9][0-9]*")


def parse_ids(texts: Sequence[str], int_ids: bool = False) -> list[Key]:
    """Ids typed as text (a command line, a URL path) as keys: strings, exactly as given,
    unless ``int_ids``, when each must be a canonical decimal integer (``0``, ``42``, ``-5``;
    no sign ``+``, no leading zeros, no other digits than 0-9) and becomes that int."""
    if not int_ids:
        return list(texts)
    keys: list[Key] = []
    for text in texts:
        if not _INT_ID.fullmatch(text):
            raise InputError(
                f"id {shown_key(text)} is not an integer written in plain decimal (digits 0-9, "
                "no leading zeros, an optional '-'): fix it, or look it up as a string id"
            )
        if len(text) > MAX_KEY_BYTES:  # before int(): Python refuses over 4,300 digits
            raise InputError(
                f"id {shown_key(text)} is {len(text):,} characters long; ids are at most {MAX_KEY_BYTES} "
                "characters, so no record has it: check the id"
            )
        keys.append(int(text))
    return keys


def resolve_keys(opened: SimhashIndex, texts: Sequence[str], int_ids: bool = False) -> list[Key | None]:
    """The stored key each id names, None where none. Ids are strings as given; with
    ``int_ids`` integers (see :func:`parse_ids`). One rule, no guessing: "7" never finds
    the int 7, and "٣" or "0042" never find 3 or 42."""
    keys = parse_ids(texts, int_ids)
    stored = opened.get_many(keys)
    return [key if record is not None else None for key, record in zip(keys, stored, strict=True)]


def digests_of(verifier: Verifier | None, group: Sequence[Record]) -> list[bytes | None]:
    """What makes each record the same document as a stored one: the digest of its text
    (:func:`~neardup.index.digests.text_digest`), and of its metadata in a ``combined``
    index, whose stored signatures are made of it. The title counts nowhere: nothing stored
    is computed from it."""
    if verifier is not None and verifier.mode == "combined":
        return [text_digest(record.text, metadata_of(record.fields)) for record in group]
    return [text_digest(record.text) for record in group]


@dataclass(frozen=True)
class Prepared:
    """A batch ready for the store: keys, fingerprints in the index's layout ((n,) words, or
    (n, 2) for 128 bits), MinHash signatures when the index verifies, text digests when the
    batch came from texts (:func:`digests_of`), which texts are empty (nothing to compare:
    they pair with nothing; None when the batch came from fingerprints), and the texts
    themselves where the index keeps them for its exact check (``Verifier.check_texts``)."""

    keys: list[Key]
    fingerprints: UInt64Array
    signatures: UInt64Array | None = None
    digests: list[bytes | None] | None = None
    empty: npt.NDArray[np.bool_] | None = None
    texts: list[str] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    @staticmethod
    def concat(batches: Sequence[Prepared]) -> Prepared:
        """One batch of several, in order (to serve several requests with one store call)."""
        keys = [key for batch in batches for key in batch.keys]
        fingerprints = np.concatenate([batch.fingerprints for batch in batches])
        signed = [batch.signatures for batch in batches]
        digests: list[bytes | None] = []
        for batch in batches:
            digests += [None] * len(batch) if batch.digests is None else batch.digests
        given = None if all(batch.digests is None for batch in batches) else digests
        empty = None
        if any(batch.empty is not None for batch in batches):
            empty = np.concatenate([batch.empty_rows() for batch in batches])
        texts = None
        if all(batch.texts is not None for batch in batches):
            texts = [text for batch in batches for text in batch.texts or ()]
        if any(signature is None for signature in signed):
            return Prepared(keys, fingerprints, None, given, empty, texts)
        return Prepared(keys, fingerprints, np.concatenate(signed), given, empty, texts)  # type: ignore[arg-type]

    def empty_rows(self) -> npt.NDArray[np.bool_]:
        """One bool per record: whether its text is empty (all False without texts)."""
        return np.zeros(len(self), dtype=bool) if self.empty is None else self.empty

    def part(self, rows: slice | npt.NDArray[np.intp]) -> Prepared:
        """The batch's records at ``rows`` (a slice, or positions)."""
        picked = range(len(self))[rows] if isinstance(rows, slice) else rows.tolist()
        return Prepared(
            [self.keys[row] for row in picked],
            np.asarray(self.fingerprints)[rows],
            None if self.signatures is None else self.signatures[rows],
            None if self.digests is None else [self.digests[row] for row in picked],
            None if self.empty is None else self.empty[rows],
            None if self.texts is None else [self.texts[row] for row in picked],
        )


class Index:
    """The persistent near-duplicate index of the command line, the service and Python: texts
    in, near-duplicates out, in a store named by URL.

    ``Index.open(url)`` opens the index stored there with its stored settings, or creates the
    one ``neardup index add`` creates (:meth:`IndexConfig.band_index`); give ``config`` for
    another (``IndexConfig(max_distance=k, fingerprint=...)`` for a Simhash block index).
    Plain (id, text) pairs go through :meth:`add_texts`, :meth:`query_texts` and
    :meth:`check_and_add_texts`; adapters that serve many requests use the two-step calls
    (:meth:`prepare`, then :meth:`add`, :meth:`query` or :meth:`check_and_add`). A text with
    no letters or digits pairs with nothing, as in batch dedup. ``index`` is the
    :class:`SimhashIndex` below (the low-level store of fingerprints and postings).
    """

    def __init__(self, index: SimhashIndex) -> None:
        self.index = index
        self.verifier = stored_verifier(index)
        self._fingerprinter: Fingerprinter | None = None
        #: Whether the index keeps its texts for the exact check near the threshold.
        self.keeps_texts = self.verifier is not None and self.verifier.check_texts
        normalizer = self.fingerprinter.normalizer if self.keeps_texts else None
        self.deduper = IncrementalDeduper(index, self.verifier, normalizer)

    @classmethod
    def open(
        cls,
        url: str = DEFAULT_URL,
        config: IndexConfig | None = None,
        *,
        create: bool = True,
        create_in_existing: bool = False,
        check_files: bool = True,
    ) -> Index:
        """The index stored at ``url``. Without ``config`` an existing index opens with its
        stored settings and a new one (``create``) gets :meth:`IndexConfig.band_index`; a
        ``config`` is checked against the stored one (:class:`IndexConfigMismatchError`).
        ``create=False`` refuses a store holding no index (:class:`IndexNotFoundError`);
        ``create_in_existing`` and ``check_files`` are :meth:`SimhashIndex.open`'s."""
        options: dict[str, Any] = {"create_in_existing": create_in_existing, "check_files": check_files}
        if config is None:
            try:
                return cls._wrap(open_stored(url, create=False, **options))
            except IndexNotFoundError:
                if not create:
                    raise
            config = IndexConfig.band_index()
        return cls._wrap(open_stored(url, config, create=create, **options))

    @classmethod
    def _wrap(cls, opened: SimhashIndex) -> Index:
        try:
            return cls(opened)
        except BaseException:
            opened.close()
            raise

    @property
    def fingerprinter(self) -> Fingerprinter:
        """The fingerprinter of the stored settings (:class:`InputError` for an index filled
        with bare fingerprints, which records none)."""
        if self._fingerprinter is None:
            self._fingerprinter = fingerprinter_of(self.index)
        return self._fingerprinter

    @property
    def url(self) -> str:
        return self.index.url

    @property
    def bits(self) -> int:
        return self.index.bits

    def close(self) -> None:
        """Release the store's connections."""
        self.index.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, key: object) -> bool:
        return key in self.index

    def __repr__(self) -> str:
        return f"Index({len(self)} documents at {redacted(self.url)}; {self.index.scheme.describe()})"

    # -- texts: the plain calls --------------------------------------------------------------
    def add_texts(self, documents: Documents, *, existing: str = "fail") -> list[bool]:
        """Store (id, text) pairs (or :class:`Record` objects, or an {id: text} mapping), all
        or nothing; which were added. ``existing`` as for :meth:`add`."""
        return self.add(self.prepare(as_records(documents)), existing=existing)

    def query_texts(self, texts: Iterable[str], *, max_matches: int | None = None) -> list[Matches]:
        """The stored near-duplicates of each text, by (distance, key) (the nearest
        ``max_matches``, when given); the index is not changed."""
        records = [Record(position, text, None, f"text {position}") for position, text in enumerate(texts)]
        return self.query(self.prepare(records), max_matches=max_matches)

    def check_and_add_texts(
        self, documents: Documents, *, max_matches: int | None = None, existing: str = "skip"
    ) -> list[Assignment]:
        """Each document's cluster (stable: the key of the record that started it) and
        matches, storing the new ones, in one transaction (see :meth:`check_and_add`)."""
        batch = self.prepare(as_records(documents))
        return self.check_and_add(batch, max_matches=max_matches, existing=existing)

    def remove_many(self, keys: Iterable[Key]) -> int:
        """Remove stored records by key, all or none (:class:`KeyNotFoundError` for a missing
        one); how many were removed."""
        listed = list(keys)
        with self.index.exclusive():
            removed = self.index.remove_many(listed)
            if self.keeps_texts:
                self.index.storage.remove_values(TEXTS, listed)
        return removed

    # -- prepared batches: the two-step calls --------------------------------------------------
    def prepare(self, records: Sequence[Record]) -> Prepared:
        """Fingerprints (and signatures, if the index verifies) of a batch; no store access."""
        texts = [record.text for record in records]
        encoded = self.fingerprinter.encode_many(texts)
        signatures = signatures_of(self.verifier, records, self.fingerprinter)
        empty = self._empty(texts, encoded.feature_counts, signatures)
        digests = digests_of(self.verifier, records)
        keys = [record.id for record in records]
        return Prepared(
            keys, encoded.fingerprints, signatures, digests, empty, texts if self.keeps_texts else None
        )

    def _empty(
        self, texts: Sequence[str], feature_counts: npt.NDArray[np.int64], signatures: UInt64Array | None
    ) -> npt.NDArray[np.bool_]:
        """Which texts have nothing to compare: no shingles in a band index (the batch
        search's rule), no features in a Simhash one (its fingerprint is 0). In a band index
        their sketch rows become :data:`EMPTY_TEXT_SKETCH` (see there why)."""
        if self.index.bands is None or signatures is None:
            return np.asarray(feature_counts == 0)
        # An empty text's sketch is one value in every bin; so is that of a text with one
        # shingle, so the shingles decide, counted only for the rare constant sketches.
        empty = np.zeros(len(texts), dtype=bool)
        bins = np.ascontiguousarray(signatures).view(np.uint8)
        maybe = np.flatnonzero((bins == bins[:, :1]).all(axis=1))
        if maybe.size:
            shingles = Shingles.of([texts[row] for row in maybe.tolist()], self.fingerprinter.normalizer)
            empty[maybe[shingles.sizes == 0]] = True
            signatures[empty] = EMPTY_TEXT_SKETCH
        return empty

    def add(
        self,
        batch: Prepared,
        *,
        existing: str = "fail",
        hint: str = 'existing="replace"',
        skip_hint: str = 'existing="skip"',
    ) -> list[bool]:
        """Store a batch, all or nothing; which records were added. ``existing="skip"``
        passes over keys stored already with the same text (a retried request) and refuses
        one with another text; ``"replace"`` also stores the other texts over the stored ones
        (they keep their cluster ids); ``"fail"`` refuses any stored key. ``hint`` and
        ``skip_hint`` are how the errors name the fix (an adapter names its own option)."""
        if existing not in EXISTING_CHOICES:
            raise InputError(f"existing must be one of {', '.join(EXISTING_CHOICES)}; got {existing!r}")
        if not len(batch):
            return []
        stored = self.index.get_many(batch.keys)
        taken = [key for key, record in zip(batch.keys, stored, strict=True) if record is not None]
        if taken and existing == "fail":
            raise KeyExistsError(
                f"id {taken[0]!r} is already stored ({len(taken)} of {len(batch)} are); nothing was "
                f"added: remove it first, or give {skip_hint} to add only the new ones"
            )
        values = to_ints(np.asarray(batch.fingerprints))
        changed = []
        for row, record in enumerate(stored):
            digest = None if batch.digests is None else batch.digests[row]
            if record is not None and not same_document(record, digest, int(values[row])):
                if existing != "replace":
                    raise changed_text_error(record.key, None, hint)
                changed.append(row)
        fresh = [row for row, record in enumerate(stored) if record is None]
        if changed:  # one call: new and changed records, stored together
            fresh = sorted(fresh + changed)
            existing = "replace"
        if not fresh:
            return [False] * len(batch)
        signatures = None if batch.signatures is None else batch.signatures[fresh]
        fresh_keys = [batch.keys[row] for row in fresh]
        with self.index.exclusive():
            if batch.texts is not None:
                keep_texts(self.index.storage, fresh_keys, [batch.texts[row] for row in fresh])
            # "skip" also skips a key another writer stores between the check and the write.
            added = self.index.add_many(
                fresh_keys,
                batch.fingerprints[fresh],
                signatures=signatures,
                existing=existing,
                digests=None if batch.digests is None else [batch.digests[row] for row in fresh],
            )
        flags = [False] * len(batch)
        for row, was_added in zip(fresh, added, strict=True):
            flags[row] = was_added
        return flags

    def check_and_add(
        self,
        batch: Prepared,
        *,
        max_matches: int | None = None,
        existing: str = "skip",
        locations: Sequence[str] | None = None,
        hint: str = 'existing="replace"',
    ) -> list[Assignment]:
        """Seed 002's incremental mode with stable cluster ids, one transaction per batch (the
        rules: :class:`IncrementalDeduper`). ``existing="replace"`` stores a changed
        text over its stored record (``"skip"`` refuses it, naming ``hint`` as the fix);
        ``locations`` (file:line of each record) name records in errors."""
        return self.deduper.check_and_add_many(
            batch.keys,
            batch.fingerprints,
            signatures=batch.signatures,
            locations=locations,
            max_matches=max_matches,
            digests=batch.digests,
            existing=existing,
            empty=batch.empty,
            hint=hint,
            texts=batch.texts,
        )

    def query(
        self, batch: Prepared, *, max_distance: int | None = None, max_matches: int | None = None
    ) -> list[Matches]:
        """The stored near-duplicates of each record, verified as the index verifies (the
        nearest ``max_matches`` of each, when given); an empty text matches nothing."""
        return self.deduper.query_many(
            batch.fingerprints,
            max_distance=max_distance,
            signatures=batch.signatures,
            max_matches=max_matches,
            empty=batch.empty,
            texts=batch.texts,
        )

    def query_fingerprints(
        self, fingerprints: npt.ArrayLike, *, max_distance: int | None = None, max_matches: int | None = None
    ) -> list[Matches]:
        """The stored fingerprints near each given one. Without a text there is no signature,
        so these matches are Simhash's alone, never verified. A band index finds records by
        their text sketches and cannot answer a bare fingerprint."""
        if self.index.bands is not None:
            raise InputError(
                "this index finds near-duplicates by their texts (band search, the default): "
                "send documents with a text, not fingerprints"
            )
        return self.index.query_many(fingerprints, max_distance=max_distance, max_matches=max_matches)

    def describe(self) -> dict[str, Any]:
        """The index's size and settings, as ``neardup index stats --json`` prints them."""
        return {"url": redacted(self.index.url), "documents": len(self.index), **self.index.config()}

    def dedup(
        self,
        documents: Documents,
        *,
        existing: str = "skip",
        batch_size: int = BATCH_RECORDS,
        max_matches: int | None = None,
        hint: str = 'existing="replace"',
    ) -> Iterator[IndexBatch]:
        """``neardup dedup INPUT --index URL`` as a library call: check-and-add a stream of
        documents a batch at a time (each batch one transaction, :meth:`check_and_add`),
        yielding each batch's outcome with the near-duplicate pairs it decided. The pairs are
        batch dedup's: each once, the earlier-stored record as ``a``; pairs with a stored
        record the input never reached come in a last batch of no records. Held across batches:
        the ids read and the pairs given (so that each pair comes once, in order)."""
        log = _PairLog()
        for group in batches(_records_of(documents), batch_size):
            prepared = self.prepare(group)
            locations = [record.location for record in group]  # errors name file:line
            assignments = self.check_and_add(
                prepared, max_matches=max_matches, existing=existing, locations=locations, hint=hint
            )
            for result in assignments:
                log.note(result.key, result.added, result.cluster, result.matches)
            empty = int(np.count_nonzero(prepared.empty_rows()))
            yield IndexBatch(group, assignments, empty, log.take())
        log.finish()
        if log.rows:
            yield IndexBatch([], [], 0, log.take())


#: The deprecated name of :class:`Index` (its constructor, ``DocumentIndex(simhash_index)``,
#: is :class:`Index`'s); it goes in the next version.
DocumentIndex = Index


def as_records(documents: Documents) -> list[Record]:
    """(id, text) pairs, an {id: text} mapping or :class:`Record` objects, as records."""
    return list(_records_of(documents))


def _records_of(documents: Documents) -> Iterator[Record]:
    """:func:`as_records` one at a time (a stream stays a stream)."""
    items = documents.items() if isinstance(documents, Mapping) else documents
    for position, item in enumerate(items):
        if isinstance(item, Record):
            yield item
        else:
            key, text = item
            yield Record(key, text, None, f"document {position}")


def explain_matches(
    documents: Index,
    fingerprint: npt.ArrayLike,
    signature: UInt64Array | None,
    matches: Sequence[Match],
    text: str | None = None,
) -> list[dict[str, Any]]:
    """Why each match of one query was found: the bits that differ (bit i is bit i of the
    integer), the similarity 1 - distance/bits, the index tables whose block keys agree
    (where the pigeonhole search met it) and, when the index verifies and the query has a
    signature, the MinHash estimate and seed 000's combined score it was kept with. In a
    band index the bands shared and the sketch estimate, and, where the index keeps texts
    and the query's ``text`` is given, the exact shingle Jaccard (what decides near the
    threshold)."""
    index = documents.index
    words = np.asarray(fingerprint, dtype=np.uint64)
    query = to_ints(words.reshape(1, 2) if index.bits == 128 else words.reshape(1))[0]
    scheme = index.scheme
    bands = index.bands
    query_keys = [table.extract_int(query) for table in scheme.tables] if bands is None else []
    mine = None if signature is None else np.asarray(signature, dtype=np.uint64).reshape(1, -1)
    query_bands = None
    if bands is not None and mine is not None:
        query_bands = bands.keys(bands.compose(words.reshape(1, -1), mine))[0]
    verifier = documents.verifier
    stored: dict[Key, bytes | None] = {}
    if verifier is not None and signature is not None and matches:
        records = index.get_many([match.key for match in matches])
        stored = {record.key: record.signature for record in records if record is not None}
    out = []
    for match in matches:
        differing = query ^ match.fingerprint
        explanation: dict[str, Any] = {
            "differing_bits": [bit for bit in range(index.bits) if differing >> bit & 1],
            "similarity": round(1 - match.distance / index.bits, 4),
        }
        blob = stored.get(match.key)
        if bands is None:
            explanation["tables"] = [
                number
                for number, table in enumerate(scheme.tables)
                if table.extract_int(match.fingerprint) == query_keys[number]
            ]
        elif mine is not None and blob is not None and verifier is not None:
            other = signature_from_bytes(blob, verifier.signature_words).reshape(1, -1)
            shared = bands.keys(bands.compose(words.reshape(1, -1), other))[0] == query_bands
            explanation["tables"] = np.flatnonzero(shared).tolist()  # the bands it shares
            explanation["sketch_jaccard"] = round(float(sketch_similarity(mine, other)[0]), 4)
            out.append(explanation)
            continue
        if verifier is not None and signature is not None and blob is not None:
            other = signature_from_bytes(blob, verifier.num_perm)
            estimate = float(estimate_jaccard(signature, other))
            score = float(combined_score(match.distance, estimate, verifier.content_weight))
            explanation["signature_jaccard"] = round(estimate, 4)
            explanation["score"] = round(score, 4)
        out.append(explanation)
    if text is not None and documents.keeps_texts and matches:
        _add_exact_jaccard(documents, text, matches, out)
    return out


def _add_exact_jaccard(
    documents: Index, text: str, matches: Sequence[Match], explanations: list[dict[str, Any]]
) -> None:
    """``jaccard``: the exact shingle Jaccard of the query's text and each match's kept text
    (left out for a match stored without one)."""
    keys = [match.key for match in matches]
    kept = [
        (position, unpack_text(value, key))
        for position, (key, value) in enumerate(
            zip(keys, documents.index.storage.get_values(TEXTS, keys), strict=True)
        )
        if value is not None
    ]
    if not kept:
        return
    shingles = Shingles.of([text] + [other for _, other in kept], documents.fingerprinter.normalizer)
    others = np.arange(1, len(kept) + 1, dtype=np.int64)
    exact = shingles.jaccard(np.zeros(len(kept), dtype=np.int64), others)
    for (position, _), value in zip(kept, exact.tolist(), strict=True):
        explanations[position]["jaccard"] = round(float(value), 4)


# -- the check-and-add policy ---------------------------------------------------------------


def text_index_config(fingerprint: FingerprintConfig) -> IndexConfig:
    """Deprecated name of :meth:`IndexConfig.band_index` (the index created by default)."""
    return IndexConfig.band_index(fingerprint)


@dataclass(frozen=True, slots=True)
class Assignment:
    """The outcome of one check-and-add: the record's cluster id (the key of the record that
    started the cluster), whether it had any near-duplicate, whether this call stored it (False
    for a key already stored), and its near-duplicates by (distance, key)."""

    key: Key
    cluster: Key
    duplicate: bool
    added: bool
    matches: list[Match] = field(default_factory=list)
    #: Whether ``max_matches`` left farther matches out of ``matches``.
    truncated: bool = False
    #: Whether this call replaced a stored record's text (``existing="replace"``).
    replaced: bool = False


@dataclass(frozen=True, slots=True)
class IndexBatch:
    """One batch of :meth:`Index.dedup`: its records, their assignments (in order), how many
    had no letters or digits, and the pairs decided with it, rows ``{"a", "b", "distance"}``."""

    records: Sequence[Record]
    assignments: list[Assignment]
    empty: int
    pairs: list[dict[str, Any]]


class IncrementalDeduper:
    """Check-and-add with stable cluster ids, and verified queries, over a :class:`SimhashIndex`.

    ``verifier`` (minhash or combined; None or mode "none" for Simhash alone) decides which
    matches count; the signatures it makes (:meth:`Verifier.signatures`) are passed with each
    batch and stored beside the fingerprints.
    """

    def __init__(
        self, index: SimhashIndex, verifier: Verifier | None = None, normalizer: Normalizer | None = None
    ) -> None:
        if index.bands is not None and (verifier is None or verifier.mode != "sketch"):
            raise ConfigError(
                "a band index finds and decides candidates by their text sketches: "
                "use Verifier('sketch') (the verifier recorded in its meta)"
            )
        self.index = index
        self.verifier = verifier
        #: Drops the candidates whose band bins rule out a match before their records are read.
        self.prefilter = _band_prefilter(index, verifier)
        #: How the texts of the exact check are compared (the index's fingerprinter's).
        self.normalizer = normalizer
        #: How a changed-text error names the fix (the command line sets its flag).
        self.replace_hint = 'existing="replace"'

    @property
    def verifying(self) -> bool:
        return self.verifier is not None and self.verifier.mode != "none"

    def _text_check(self, texts: Sequence[str] | None, count: int) -> TextCheck | None:
        """The exact check of a batch, where the verifier asks for it and the texts are given."""
        if texts is None or self.verifier is None or not self.verifier.check_texts:
            return None
        if len(texts) != count:
            raise InputError(f"got {len(texts)} texts for {count} records; give one each")
        return TextCheck(self.verifier, texts, self.index.storage, self.normalizer)

    # -- queries -------------------------------------------------------------------------
    def query(
        self,
        fingerprint: int,
        *,
        max_distance: int | None = None,
        signature: npt.ArrayLike | None = None,
        max_matches: int | None = None,
    ) -> Matches:
        """The stored near-duplicates of one fingerprint, by (distance, key); with a verifier,
        only those the query's ``signature`` and the stored ones confirm; with
        ``max_matches``, only the nearest that many (flagged ``truncated`` when cut)."""
        if not self.verifying:
            return self.index.query(fingerprint, max_distance=max_distance, max_matches=max_matches)
        signatures = None if signature is None else np.asarray(signature, dtype=np.uint64).reshape(1, -1)
        return self.query_many(
            _flat(self.index.words(fingerprint)),
            max_distance=max_distance,
            signatures=signatures,
            max_matches=max_matches,
        )[0]

    def query_many(
        self,
        fingerprints: npt.ArrayLike,
        *,
        max_distance: int | None = None,
        signatures: npt.ArrayLike | None = None,
        max_matches: int | None = None,
        empty: Sequence[bool] | npt.NDArray[np.bool_] | None = None,
        texts: Sequence[str] | None = None,
    ) -> list[Matches]:
        """:meth:`query` for a batch; ``signatures`` has one row per fingerprint. Rows that
        ``empty`` flags (texts with nothing to compare) match nothing and are not searched.
        ``texts`` (one per fingerprint) let a verifier with ``check_texts`` decide the
        candidates near its threshold exactly."""
        cap = check_max_matches(max_matches)
        words = self.index.words(fingerprints)
        check = self._text_check(texts, words.shape[0])
        return self._query_records(fingerprints, max_distance, signatures, cap, empty, check)[0]

    def _query_records(
        self,
        fingerprints: npt.ArrayLike,
        max_distance: int | None,
        signatures: npt.ArrayLike | None,
        max_matches: int | None = None,
        empty: Sequence[bool] | npt.NDArray[np.bool_] | None = None,
        check: TextCheck | None = None,
    ) -> tuple[list[Matches], dict[Key, StoredRecord]]:
        """The verified matches, and the stored records read to verify them (check-and-add
        takes their cluster ids from these instead of reading them again). With a cap, the
        candidates are verified nearest first, only as many as the cap needs. Repeated
        (fingerprint, signature) rows are searched once: a batch of copies is one search.
        Empty rows get no matches and no search."""
        words = self.index.words(fingerprints)
        sketches = None if signatures is None else np.asarray(signatures, dtype=np.uint64)
        blank = _empty_mask(empty, words.shape[0])
        if blank.any():
            searched = np.flatnonzero(~blank)
            found, read = self._query_records(
                _flat(words[searched]),
                max_distance,
                None if sketches is None else sketches.reshape(words.shape[0], -1)[searched],
                max_matches,
                None,
                None if check is None else check.subset(searched),
            )
            answers = [Matches() for _ in range(words.shape[0])]
            for row, matches in zip(searched.tolist(), found, strict=True):
                answers[row] = matches
            return answers, read
        if words.shape[0] > 1 and (sketches is None or sketches.shape[0] == words.shape[0]):
            rows = words if sketches is None else np.hstack([words, sketches.reshape(words.shape[0], -1)])
            _, first, of_row = np.unique(rows, axis=0, return_index=True, return_inverse=True)
            if first.size < words.shape[0]:
                found, read = self._query_records(
                    _flat(words[first]),
                    max_distance,
                    None if sketches is None else sketches[first],
                    max_matches,
                    None,
                    None if check is None else check.subset(first),
                )
                return [found[row] for row in of_row.reshape(-1).tolist()], read
        return self._verified_query(words, max_distance, signatures, max_matches, check)

    def _verified_query(
        self,
        words: npt.NDArray[np.uint64],
        max_distance: int | None,
        signatures: npt.ArrayLike | None,
        max_matches: int | None,
        check: TextCheck | None,
    ) -> tuple[list[Matches], dict[Key, StoredRecord]]:
        """:meth:`_query_records` of distinct, non-empty rows: the search and its verdicts."""
        if not self.verifying or self.verifier is None:
            found = self.index.query_many(
                _flat(words), max_distance=max_distance, signatures=signatures, max_matches=max_matches
            )
            return found, {}
        check_verifiable(self.verifier, signatures)
        if max_matches is None:
            every, stored = self.index.query_many_with_records(
                _flat(words), max_distance=max_distance, signatures=signatures, prefilter=self.prefilter
            )
            verified = verify_with_records(
                cast(list[list[Match]], every),
                self.verifier,
                signatures,
                stored,
                None if check is None else check.refine,
            )
            return [Matches(matches) for matches in verified], stored
        return self.index.query_many_with_records(
            _flat(words),
            max_distance=max_distance,
            signatures=signatures,
            max_matches=max_matches,
            keep=_signature_keep(self.verifier, signatures, len(words), check),
            prefilter=self.prefilter,
        )

    # -- check-and-add -------------------------------------------------------------------
    def check_and_add(
        self,
        key: Key,
        fingerprint: int,
        *,
        signature: npt.ArrayLike | None = None,
        max_matches: int | None = None,
    ) -> Assignment:
        """Add one record and give it a stable cluster id (the module's rules)."""
        signatures = None if signature is None else np.asarray(signature, dtype=np.uint64).reshape(1, -1)
        return self.check_and_add_many(
            [key], _flat(self.index.words(fingerprint)), signatures=signatures, max_matches=max_matches
        )[0]

    def check_and_add_many(
        self,
        keys: Sequence[Key] | npt.NDArray[Any],
        fingerprints: npt.ArrayLike,
        *,
        signatures: npt.ArrayLike | None = None,
        locations: Sequence[str] | None = None,
        max_matches: int | None = None,
        digests: Sequence[bytes | None] | None = None,
        existing: str = "skip",
        empty: Sequence[bool] | npt.NDArray[np.bool_] | None = None,
        hint: str | None = None,
        texts: Sequence[str] | None = None,
    ) -> list[Assignment]:
        """Assign clusters to a batch and store its new records, as one locked transaction;
        one result per input, in order (the module's rules). With a verifier, ``signatures``
        (one row per record) are required and stored; ``texts`` are kept and checked when it
        has ``check_texts``. ``locations`` (file:line) name records in errors. ``digests``
        (:func:`~neardup.index.digests.text_digest`) are stored and tell a retry from another
        text, which ``existing="replace"`` stores over the record (``"skip"`` refuses it,
        naming ``hint``, default :attr:`replace_hint`). ``empty`` rows match nothing."""
        if existing not in ("skip", "replace"):
            raise InputError(f"existing must be 'skip' or 'replace' for check-and-add; got {existing!r}")
        index = self.index
        cap = check_max_matches(max_matches)
        words = index.words(fingerprints)
        where = _Where(locations)
        listed = [plain_key(key) for key in where.checked(index, keys, words.shape[0])]
        if not listed:
            return []
        values = [int(value) for value in _ints(words)]
        sig_rows = self._checked_signatures(signatures, digests, len(listed))
        blank, check = _empty_mask(empty, len(listed)), self._text_check(texts, len(listed))
        with index.exclusive(), collector_paused():
            first_row = _first_rows(listed, values, where, digests)
            unique_rows = sorted(first_row.values())
            stored = dict(zip(first_row, index.get_many(list(first_row)), strict=True))
            changed = changed_keys(stored, values, first_row, digests)
            if changed and existing != "replace":
                location = where.location(first_row[changed[0]])
                raise changed_text_error(changed[0], location, hint or self.replace_hint)
            found, read = self._query_rows(words, sig_rows, unique_rows, cap, blank, check)
            clusters_of = self._known_clusters(found, read, first_row, stored)
            new_rows = [row for row in unique_rows if stored[listed[row]] is None]
            earlier = self._earlier_neighbours(words, sig_rows, new_rows, blank, check)
            results = _assign(found, unique_rows, listed, values, stored, earlier, clusters_of, cap)
            self._store(
                words, sig_rows, digests, listed, results, new_rows, [first_row[k] for k in changed], check
            )
            for key in changed:  # stored anew, in the cluster it had (ids handed out stay valid)
                results[key] = dataclasses.replace(results[key], added=True, replaced=True)
        return [
            results[key] if row == first_row[key] else _repeat(results[key]) for row, key in enumerate(listed)
        ]

    def _query_rows(
        self,
        words: npt.NDArray[np.uint64],
        sig_rows: npt.NDArray[np.uint64] | None,
        rows: list[int],
        cap: int | None,
        blank: npt.NDArray[np.bool_],
        check: TextCheck | None,
    ) -> tuple[list[Matches], dict[Key, StoredRecord]]:
        """:meth:`_query_records` of a check-and-add batch's ``rows``, with one match more
        than ``cap``: a stored key finds itself."""
        return self._query_records(
            _flat(words[rows]),
            None,
            None if sig_rows is None or not self.verifying else sig_rows[rows],
            None if cap is None else cap + 1,
            blank[rows],
            None if check is None else check.subset(rows),
        )

    def _checked_signatures(
        self, signatures: npt.ArrayLike | None, digests: Sequence[bytes | None] | None, count: int
    ) -> npt.NDArray[np.uint64] | None:
        """A batch's signatures as rows, its signatures and digests checked before locking."""
        signature_blobs(signatures, count)  # refuse a malformed batch
        if self.verifying and signatures is None:
            raise InputError("verified check-and-add needs the batch's signatures (Verifier.signatures)")
        if digests is not None and len(digests) != count:
            raise InputError(f"got {len(digests)} digests for {count} records; give one each")
        return None if signatures is None else np.asarray(signatures, dtype=np.uint64)

    def _store(
        self,
        words: npt.NDArray[np.uint64],
        sig_rows: npt.NDArray[np.uint64] | None,
        digests: Sequence[bytes | None] | None,
        listed: list[Key],
        results: dict[Key, Assignment],
        new_rows: list[int],
        replaced_rows: list[int],
        check: TextCheck | None = None,
    ) -> None:
        """Write the batch's new records and the ones whose text it replaces, each with the
        cluster check-and-add gave it (inside the caller's transaction), and their texts
        first where ``check`` keeps them: a record is never stored without its text."""
        if check is not None:
            written = new_rows + replaced_rows
            check.store([listed[row] for row in written], written)
        for rows, mode in ((new_rows, "fail"), (replaced_rows, "replace")):
            if rows:
                self.index.add_many(
                    [listed[row] for row in rows],
                    _flat(words[rows]),
                    signatures=None if sig_rows is None else sig_rows[rows],
                    clusters=[results[listed[row]].cluster for row in rows],
                    digests=None if digests is None else [digests[row] for row in rows],
                    existing=mode,
                )

    def _known_clusters(
        self,
        found: Sequence[list[Match]],
        read: dict[Key, StoredRecord],
        first_row: dict[Key, int],
        stored: dict[Key, StoredRecord | None],
    ) -> dict[Key, Key]:
        """The cluster of every stored record the batch matched or already holds."""
        matched = {match.key for matches in found for match in matches if match.key not in first_row}
        unread = sorted(matched - read.keys(), key=key_order)
        records = [read[key] for key in matched if key in read] + self.index.get_many(unread)
        clusters_of = {
            record.key: record.cluster if record.cluster is not None else record.key
            for record in records
            if record is not None
        }
        for key, record in stored.items():
            if record is not None:
                clusters_of[key] = record.cluster if record.cluster is not None else key
        return clusters_of

    def _earlier_neighbours(
        self,
        words: npt.NDArray[np.uint64],
        sig_rows: npt.NDArray[np.uint64] | None,
        new_rows: list[int],
        blank: npt.NDArray[np.bool_],
        check: TextCheck | None = None,
    ) -> dict[int, list[tuple[int, int]]]:
        """For each new row, the earlier new rows of the batch it matches, with their
        distance; an empty row (``blank``) matches none and is matched by none."""
        alone: dict[int, list[tuple[int, int]]] = {row: [] for row in new_rows if blank[row]}
        new_rows = [row for row in new_rows if not blank[row]]
        index = self.index
        if index.bands is not None and sig_rows is not None:
            earlier = _band_neighbours(index, words[new_rows], sig_rows[new_rows], new_rows)
        else:
            earlier = _batch_neighbours(words[new_rows], index.bits, index.max_distance, new_rows)
        if self.verifying and self.verifier is not None and sig_rows is not None:
            earlier = _verified_neighbours(earlier, self.verifier, sig_rows, check)
        return earlier | alone


class _PairLog:
    """The near-duplicate pairs of a run of check-and-adds, each once, the earlier-stored
    record as ``a``, as batch dedup writes its pairs. :meth:`note` each :class:`Assignment`'s
    key, added, cluster and matches; the rows decided so far wait in ``rows`` (:meth:`take`);
    :meth:`finish` decides the rest.

    A record this run adds lists only records stored before it (or earlier in its batch), so
    its matches are ``a``. A record stored before the run (a re-run, a repeated id) also lists
    records stored after it, which would repeat a pair reversed. Such a pair is ordered by
    what is known: the record whose id is the other's cluster came first; else the one read
    first in this input; a stored record absent from the input is taken as the earlier one
    (those pairs are decided at the end, once it is clear the other record never came).
    """

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self._read: set[Key] = set()  # ids read so far in this run
        self._clusters: dict[Key, Key] = {}  # clusters of the records stored before this run
        self._done: set[frozenset[Key]] = set()
        self._waiting: dict[frozenset[Key], tuple[Key, Key, int]] = {}

    def note(self, key: Key, added: bool, cluster: Key, matches: Sequence[Match]) -> None:
        """Record one check-and-add outcome, deciding the pairs that are new and decidable."""
        if key not in self._read:
            self._read.add(key)
            if not added:
                self._clusters[key] = cluster
        for match in matches:
            pair = frozenset((key, match.key))
            if pair in self._done:
                continue
            if added or cluster == match.key:
                self._decide(pair, match.key, key, match.distance)
            elif match.key in self._read:  # read earlier in this run: it came first, unless it
                # was added by this run or joined this record's cluster
                later = match.key not in self._clusters or self._clusters[match.key] == key
                a, b = (key, match.key) if later else (match.key, key)
                self._decide(pair, a, b, match.distance)
            else:
                self._waiting.setdefault(pair, (match.key, key, match.distance))

    def take(self) -> list[dict[str, Any]]:
        """The rows decided since the last call."""
        rows, self.rows = self.rows, []
        return rows

    def finish(self) -> None:
        """Decide the pairs still waiting (their stored record was not in the input)."""
        for pair, (a, b, distance) in list(self._waiting.items()):
            self._decide(pair, a, b, distance)

    def _decide(self, pair: frozenset[Key], a: Key, b: Key, distance: int) -> None:
        self._done.add(pair)
        self._waiting.pop(pair, None)
        self.rows.append({"a": a, "b": b, "distance": distance})


def _first_rows(
    listed: list[Key], values: list[int], where: _Where, digests: Sequence[bytes | None] | None = None
) -> dict[Key, int]:
    """The first row of each key; a key repeated with another text (digest, else fingerprint)
    is refused."""
    first_row: dict[Key, int] = {}
    texts = values if digests is None else [d or v for d, v in zip(digests, values, strict=True)]
    for row, key in enumerate(listed):
        if key in first_row and texts[first_row[key]] != texts[row]:
            raise KeyExistsError(
                f"{where.at(row)}id {shown_key(key)} appears again with another text (first at "
                f"{where.name(first_row[key])}); ids must name one record"
            )
        first_row.setdefault(key, row)
    return first_row


def _assign(
    found: list[Matches],
    unique_rows: list[int],
    listed: list[Key],
    values: list[int],
    stored: dict[Key, StoredRecord | None],
    earlier: dict[int, list[tuple[int, int]]],
    clusters_of: dict[Key, Key],
    max_matches: int | None = None,
) -> dict[Key, Assignment]:
    """Each key's assignment: a new record joins the cluster of its nearest match (stored or
    earlier in the batch), or starts its own; a stored one keeps its cluster. The cap cuts
    the listed matches after the decision (``found`` holds the nearest stored ones)."""
    results: dict[Key, Assignment] = {}
    for position, row in enumerate(unique_rows):
        key = listed[row]
        matches = [match for match in found[position] if match.key != key]
        if stored[key] is None:
            matches += [Match(listed[other], values[other], distance) for other, distance in earlier[row]]
            matches.sort(key=match_order)
            cluster = clusters_of[matches[0].key] if matches else key
            clusters_of[key] = cluster
        else:
            cluster = clusters_of[key]
        listed_matches = capped(matches, max_matches)
        truncated = found[position].truncated or listed_matches.truncated
        results[key] = Assignment(key, cluster, bool(matches), stored[key] is None, listed_matches, truncated)
    return results


class _Where:
    """How errors name a record of the batch: its file:line when known, else its position."""

    def __init__(self, locations: Sequence[str] | None) -> None:
        self.locations = locations

    def name(self, row: int) -> str:
        return f"position {row}" if self.locations is None else self.locations[row]

    def location(self, row: int) -> str | None:
        """The record's file:line, or None (the message names the key)."""
        return None if self.locations is None else self.locations[row]

    def at(self, row: int) -> str:
        """A message prefix: the record's location, or nothing (the message names the key)."""
        return "" if self.locations is None else f"{self.locations[row]}: "

    def checked(
        self, index: SimhashIndex, keys: Sequence[Key] | npt.NDArray[Any], count: int
    ) -> Sequence[Key] | npt.NDArray[Any]:
        """The index's key checks, with an invalid id named by its record's location."""
        checked = index.check_keys(keys, count, validate=self.locations is None)
        if self.locations is not None:
            for row, key in enumerate(checked):
                check_key(plain_key(key), self.locations[row])
        return checked


def _batch_neighbours(
    words: npt.NDArray[np.uint64], bits: int, max_distance: int, rows: list[int]
) -> dict[int, list[tuple[int, int]]]:
    """For each new record (by input row), the earlier new records of the batch within the
    distance, as (row, distance); exact, through the same block sort as batch dedup."""
    neighbours: dict[int, list[tuple[int, int]]] = {row: [] for row in rows}
    if len(rows) < 2:
        return neighbours
    # The pigeonhole scheme: a batch is small, and auto-tuning would cost more than the sort.
    pairs = find_all_pairs(_flat(words), max_distance, bits=bits, scheme=BlockScheme(bits, max_distance))
    for first, second, distance in zip(
        pairs.i.tolist(), pairs.j.tolist(), pairs.distance.tolist(), strict=True
    ):
        neighbours[rows[second]].append((rows[first], distance))
    return neighbours


def _band_neighbours(
    index: SimhashIndex, words: npt.NDArray[np.uint64], sketches: npt.NDArray[np.uint64], rows: list[int]
) -> dict[int, list[tuple[int, int]]]:
    """For each new record of a band index (by input row), the earlier new records of the
    batch that share a band with it, as (row, Hamming distance): what a query would find."""
    neighbours: dict[int, list[tuple[int, int]]] = {row: [] for row in rows}
    if len(rows) < 2 or index.bands is None:
        return neighbours
    keys = index.bands.keys(index.bands.compose(words, sketches))
    left, right = match_postings(keys, keys)  # every (row, row) sharing a band, both ways
    earlier = left < right
    count = np.int64(len(rows))
    # Each pair once, however many bands it shares.
    pairs = np.asarray(sorted_unique(left[earlier] * count + right[earlier]), dtype=np.int64)
    if not pairs.size:
        return neighbours
    first, second = pairs // count, pairs % count
    width = index.scheme.fingerprint_words
    distances = row_distances(words[first, :width] ^ words[second, :width]).tolist()
    for a, b, distance in zip(first.tolist(), second.tolist(), distances, strict=True):
        neighbours[rows[b]].append((rows[a], int(distance)))
    return neighbours


def _verified_neighbours(
    neighbours: dict[int, list[tuple[int, int]]],
    verifier: Verifier,
    signatures: npt.NDArray[np.uint64],
    check: TextCheck | None = None,
) -> dict[int, list[tuple[int, int]]]:
    """The in-batch neighbours whose signatures confirm them (and their texts, near the
    threshold, with ``check``)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for row, found in neighbours.items():
        if not found:
            out[row] = found
            continue
        others = np.array([other for other, _ in found], dtype=np.int64)
        distances = np.array([distance for _, distance in found], dtype=np.int64)
        verdict = verifier.verify_signatures(distances, signatures[row : row + 1], signatures[others])
        if check is not None:
            similarity = check.refine_within(
                np.full(len(others), row, dtype=np.int64), others, verdict.similarity
            )
            verdict = verifier.decide(distances, similarity)
        kept = verdict.kept
        out[row] = [pair for pair, keep in zip(found, kept.tolist(), strict=True) if keep]
    return out


def _empty_mask(empty: Sequence[bool] | npt.NDArray[np.bool_] | None, count: int) -> npt.NDArray[np.bool_]:
    """``empty`` as one bool per row (all False when not given)."""
    if empty is None:
        return np.zeros(count, dtype=bool)
    mask = np.asarray(empty, dtype=bool).reshape(-1)
    if mask.shape[0] != count:
        raise InputError(f"got {mask.shape[0]} empty flags for {count} records; give one each")
    return mask


def _flat(words: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """(n, w) words back in the batch-call layout: (n,) for one word, (n, 2) for 128 bits."""
    return words[:, 0] if words.shape[1] == 1 else words


def _repeat(assignment: Assignment) -> Assignment:
    """The answer for a key's second appearance in one batch: the same, but not added again."""
    return Assignment(
        assignment.key,
        assignment.cluster,
        assignment.duplicate,
        False,
        assignment.matches,
        assignment.truncated,
    )


def _band_prefilter(index: SimhashIndex, verifier: Verifier | None) -> Decide | None:
    """For a band index decided by its sketches: keep a candidate only when the band bins
    its stored words hold estimate its Jaccard at or above the floor
    (:func:`~neardup.similarity.sketches.estimate_floor`) of the lowest estimate the check
    can accept (the threshold less :data:`CHECK_MARGIN`). Most candidates of a large
    collection of related texts share one band by chance; this drops them before their
    records are read, and drops a pair the check would accept with probability at most
    :data:`~neardup.similarity.sketches.PREFILTER_MISS`. A store whose postings return the
    fingerprint alone (Redis) keeps every candidate."""
    bands = index.bands
    if bands is None or isinstance(index, CompactIndex) or verifier is None or verifier.mode != "sketch":
        return None
    floor = estimate_floor(bands.bands * bands.rows, verifier.cutoff - CHECK_MARGIN)

    def prefilter(
        queries: npt.NDArray[np.uint64], rows: npt.NDArray[np.int64], words: npt.NDArray[np.uint64]
    ) -> npt.NDArray[np.bool_]:
        if words.shape[1] < bands.words:
            return np.ones(rows.size, dtype=np.bool_)
        return np.asarray(estimate_from_bins(bands.bins(queries[rows]), bands.bins(words)) >= floor)

    return prefilter


def _signature_keep(
    verifier: Verifier, signatures: npt.ArrayLike | None, count: int, check: TextCheck | None = None
) -> Keep:
    """The verifier's verdict on candidates, as :func:`verify_with_records` gives it for
    whole lists (a stored record without a signature is kept as the search found it), for
    a capped query that verifies the nearest candidates first."""
    queries = np.asarray(signatures, dtype=np.uint64)
    width = verifier.signature_words
    if queries.ndim != 2 or queries.shape != (count, width):
        raise InputError(f"the query signatures must be ({count}, {width}); got {queries.shape}")

    def keep(
        rows: npt.NDArray[np.int64],
        keys: list[Key],
        distances: npt.NDArray[np.int64],
        records: Mapping[Key, StoredRecord],
    ) -> npt.NDArray[np.bool_]:
        kept = np.ones(len(keys), dtype=bool)
        signed, blobs = [], []
        for position, key in enumerate(keys):
            record = records.get(key)
            if record is not None and record.signature is not None:
                signed.append(position)
                blobs.append(record.signature)
        if not signed:
            return kept
        stacked = stacked_signatures(blobs, width)
        verdict = verifier.verify_signatures(distances[signed], queries[rows[signed]], stacked)
        if check is not None:
            similarity = check.refine(rows[signed], [keys[t] for t in signed], verdict.similarity)
            verdict = verifier.decide(distances[signed], similarity)
        kept[signed] = verdict.kept
        return kept

    return keep


def _ints(words: npt.NDArray[np.uint64]) -> list[int]:
    if words.shape[1] == 1:
        return [int(value) for value in words[:, 0].tolist()]
    return [low | (high << 64) for low, high in words.tolist()]
