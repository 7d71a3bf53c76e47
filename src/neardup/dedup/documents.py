"""Texts in, index operations out: what every adapter of a stored index shares (CLI, service).

A stored index records the fingerprint settings and the verifier it was created with, so a
text added today is fingerprinted and verified exactly as one added a year ago.
:class:`DocumentIndex` pairs a :class:`~neardup.index.simhash_index.SimhashIndex` with that fingerprinter
and verifier. Its work is split in two steps on purpose: :meth:`DocumentIndex.prepare` is
pure CPU (fingerprints and MinHash signatures of a batch of records) and touches no store,
while :meth:`~DocumentIndex.add`, :meth:`~DocumentIndex.check_and_add` and
:meth:`~DocumentIndex.query` take prepared batches to the store. A server can so prepare the
next batch while the store commits the last one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..distance import to_ints
from ..errors import InputError, KeyExistsError
from ..fingerprint.fingerprinter import Fingerprinter
from ..index.digests import changed_text_error, same_document, text_digest
from ..io.record import Record
from ..similarity.minhash import combined_score, estimate_jaccard, signature_from_bytes
from ..similarity.stored_sketch import sketch_similarity
from ..similarity.verify import Verifier, metadata_of, metadata_sets
from ..storage.base import MAX_KEY_BYTES, Key, shown_key
from ..storage.urls import redacted
from .incremental import Assignment, IncrementalDeduper

if TYPE_CHECKING:
    from ..index.keys import Match, Matches
    from ..index.simhash_index import SimhashIndex

UInt64Array = npt.NDArray[np.uint64]
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
    return None if opened.verification is None else Verifier(**opened.verification)


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
    (n, 2) for 128 bits), MinHash signatures when the index verifies, and text digests when
    the batch came from texts (:func:`digests_of`)."""

    keys: list[Key]
    fingerprints: UInt64Array
    signatures: UInt64Array | None = None
    digests: list[bytes | None] | None = None

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
        if any(signature is None for signature in signed):
            return Prepared(keys, fingerprints, None, given)
        return Prepared(keys, fingerprints, np.concatenate(signed), given)  # type: ignore[arg-type]


class DocumentIndex:
    """A stored index that takes records (id, text, title, metadata) instead of fingerprints."""

    def __init__(self, index: SimhashIndex) -> None:
        self.index = index
        self.fingerprinter = fingerprinter_of(index)
        self.verifier = stored_verifier(index)
        self.deduper = IncrementalDeduper(index, self.verifier)

    def prepare(self, records: Sequence[Record]) -> Prepared:
        """Fingerprints (and signatures, if the index verifies) of a batch; no store access."""
        fingerprints = self.fingerprinter.fingerprint_many([record.text for record in records])
        signatures = signatures_of(self.verifier, records, self.fingerprinter)
        digests = digests_of(self.verifier, records)
        return Prepared([record.id for record in records], fingerprints, signatures, digests)

    def add(
        self, batch: Prepared, *, existing: str = "fail", hint: str = '"existing": "replace"'
    ) -> list[bool]:
        """Store a batch, all or nothing; which records were added. ``existing="skip"``
        passes over keys stored already with the same text (a retried request) and refuses
        one with another text; ``"replace"`` also stores the other texts over the stored ones
        (they keep their cluster ids); ``"fail"`` refuses any stored key. ``hint`` is how the
        changed-text error names the fix."""
        if existing not in EXISTING_CHOICES:
            raise InputError(f"existing must be one of {', '.join(EXISTING_CHOICES)}; got {existing!r}")
        if not len(batch):
            return []
        stored = self.index.get_many(batch.keys)
        taken = [key for key, record in zip(batch.keys, stored, strict=True) if record is not None]
        if taken and existing == "fail":
            raise KeyExistsError(
                f"id {taken[0]!r} is already stored ({len(taken)} of {len(batch)} are); nothing was "
                'added: remove it first, or send "existing": "skip" to add only the new ones'
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
        # "skip" also skips a key another writer stores between the check and the write.
        added = self.index.add_many(
            [batch.keys[row] for row in fresh],
            batch.fingerprints[fresh],
            signatures=signatures,
            existing=existing,
            digests=None if batch.digests is None else [batch.digests[row] for row in fresh],
        )
        flags = [False] * len(batch)
        for row, was_added in zip(fresh, added, strict=True):
            flags[row] = was_added
        return flags

    def check_and_add(self, batch: Prepared, *, max_matches: int | None = None) -> list[Assignment]:
        """Seed 002's incremental mode with stable cluster ids (see :mod:`neardup.dedup.incremental`)."""
        return self.deduper.check_and_add_many(
            batch.keys,
            batch.fingerprints,
            signatures=batch.signatures,
            max_matches=max_matches,
            digests=batch.digests,
        )

    def query(
        self, batch: Prepared, *, max_distance: int | None = None, max_matches: int | None = None
    ) -> list[Matches]:
        """The stored near-duplicates of each record, verified as the index verifies (the
        nearest ``max_matches`` of each, when given)."""
        return self.deduper.query_many(
            batch.fingerprints,
            max_distance=max_distance,
            signatures=batch.signatures,
            max_matches=max_matches,
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


def explain_matches(
    documents: DocumentIndex,
    fingerprint: npt.ArrayLike,
    signature: UInt64Array | None,
    matches: Sequence[Match],
) -> list[dict[str, Any]]:
    """Why each match of one query was found: the bits that differ (bit i is bit i of the
    integer), the similarity 1 - distance/bits, the index tables whose block keys agree
    (where the pigeonhole search met it) and, when the index verifies and the query has a
    signature, the MinHash estimate and seed 000's combined score it was kept with."""
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
    return out
