"""The persistent index's front door, :class:`Index`: texts in, near-duplicates out, for the
command line, the service and Python alike.

A stored index records the fingerprint settings and the verifier it was created with, so a
text added today is fingerprinted and verified exactly as one added a year ago. :class:`Index`
pairs a :class:`~neardup.index.simhash_index.SimhashIndex` (the store of fingerprints and
postings) with that fingerprinter and verifier, and the check-and-add policy of
:mod:`neardup.dedup.incremental`. Its work can be split in two steps: :meth:`Index.prepare` is
pure CPU (fingerprints and signatures of a batch of records) and touches no store, while
:meth:`~Index.add`, :meth:`~Index.check_and_add` and :meth:`~Index.query` take prepared
batches to the store. A server can so prepare the next batch while the store commits the last.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..distance import to_ints
from ..errors import IndexNotFoundError, InputError, KeyExistsError
from ..fingerprint.fingerprinter import Fingerprinter
from ..index.config import IndexConfig
from ..index.digests import changed_text_error, same_document, text_digest
from ..index.simhash_index import SimhashIndex
from ..io.record import Record
from ..similarity.bands import SKETCH_BYTES
from ..similarity.minhash import combined_score, estimate_jaccard, signature_from_bytes
from ..similarity.shingles import Shingles
from ..similarity.sketches import sketch_similarity
from ..similarity.verify import Verifier, metadata_of, metadata_sets
from ..storage import DEFAULT_URL
from ..storage.base import MAX_KEY_BYTES, Key, shown_key
from ..storage.urls import redacted
from .incremental import Assignment, IncrementalDeduper
from .stored_texts import TEXTS, keep_texts, unpack_text

if TYPE_CHECKING:
    from ..index.keys import Match, Matches

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
                return cls._wrap(SimhashIndex.open(url, create=False, **options))
            except IndexNotFoundError:
                if not create:
                    raise
            config = IndexConfig.band_index()
        return cls._wrap(SimhashIndex.open(url, config, create=create, **options))

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
        rules: :mod:`neardup.dedup.incremental`). ``existing="replace"`` stores a changed
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


#: The deprecated name of :class:`Index` (its constructor, ``DocumentIndex(simhash_index)``,
#: is :class:`Index`'s); it goes in the next version.
DocumentIndex = Index


def as_records(documents: Documents) -> list[Record]:
    """(id, text) pairs, an {id: text} mapping or :class:`Record` objects, as records."""
    items = documents.items() if isinstance(documents, Mapping) else documents
    records = []
    for position, item in enumerate(items):
        if isinstance(item, Record):
            records.append(item)
            continue
        key, text = item
        records.append(Record(key, text, None, f"document {position}"))
    return records


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
