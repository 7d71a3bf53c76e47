"""Rebuild a stored index of an earlier neardup as a band index, keeping its ids and cluster ids.

Stores of format 1 searched Simhash blocks at k = 3 and are refused on open
(:func:`~neardup.index.meta.check_store_version`): their fingerprints cannot find the medium
edits a band index finds, and a band index needs each record's text sketch, which no old
store keeps. So the texts are read again: every input record whose id the old store holds is
fingerprinted and sketched afresh (fingerprints recomputed with the old index's fingerprint
settings, not copied) and added to a new store with the cluster id the old one gave it, so ids
and cluster ids handed out earlier stay valid. The old store is only read, never changed:
it is opened without :meth:`SimhashIndex.open`, whose version check is what refuses it.

Ids match by value and type, as everywhere in neardup (:func:`~neardup.dedup.documents.resolve_keys`):
the text "7" is not the number 7. Stored ids the input gives no text for are not carried.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError, NeardupError
from ..fingerprint.config import FingerprintConfig
from ..index.config import IndexConfig
from ..index.meta import FORMAT, STORE_FORMAT_VERSION, record_shape
from ..index.simhash_index import SimhashIndex
from ..io.read import batches
from ..io.record import Record
from ..similarity.bands import scheme_from_dict
from ..storage import open_storage
from ..storage.base import Key, Storage, check_key, lookable
from ..storage.sqlite import SqliteStorage
from ..storage.urls import redacted
from .documents import Index
from .stored_texts import keep_texts

#: Records per batch: one transaction each in the new store, as ``neardup index add`` does.
DEFAULT_BATCH = 1000
#: Stored ids without a text named in the report.
MISSING_EXAMPLES = 3
#: Store formats whose meta and records this module reads.
READABLE_VERSIONS = (1, STORE_FORMAT_VERSION)


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild did: ``carried`` records added to the new index with their cluster ids;
    ``skipped_unknown`` input records whose id the old index does not hold; ``missing`` stored
    ids no input record gave a text for (not carried), the first of them in
    ``missing_examples``; ``repeated`` input records whose id appeared earlier (the first
    text is kept)."""

    carried: int
    skipped_unknown: int
    missing: int
    missing_examples: list[Key] = field(default_factory=list)
    repeated: int = 0


def sketch_verification() -> dict[str, Any]:
    """The meta's verification of a band index: the same dict ``neardup index add`` records
    (``cli.index.verification_settings("sketch")``)."""
    return dict(IndexConfig.band_index().verification or {})


def rebuild_config(meta: Mapping[str, Any]) -> IndexConfig:
    """The default band index with the old index's fingerprint settings (the defaults where
    the old index recorded none), as ``neardup index add`` creates it."""
    recorded = meta.get("fingerprint_config")
    fingerprint = FingerprintConfig.from_dict(recorded) if recorded else FingerprintConfig()
    return IndexConfig.band_index(fingerprint)


def rebuild_index(
    old_url: str,
    new_url: str,
    records: Iterable[Record],
    *,
    batch_size: int = DEFAULT_BATCH,
    config: IndexConfig | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> RebuildReport:
    """Create the index at ``new_url`` (``config``, default :func:`rebuild_config`) from the
    ``records`` whose ids the index at ``old_url`` holds, each with its old cluster id (its
    own id where it had none). ``new_url`` must hold no index yet and name another store than
    ``old_url``, which is only read. ``on_batch`` gets the size of each batch read (progress).
    A failure after the new index was created leaves it partly filled; the error says so."""
    if old_url == new_url:
        raise InputError(
            f"the old and the new index are both {redacted(old_url)}: a rebuild writes a new store "
            "and never overwrites the one it reads; give another NEW_URL"
        )
    if config is not None and config.fingerprint is None:
        raise InputError("a rebuild fingerprints texts: give a config with fingerprint settings")
    old, meta = _open_old(old_url)
    try:
        _check_new_store(new_url, old_url, old)
        with SimhashIndex.open(new_url, config or rebuild_config(meta)) as new:
            try:
                counts = _carry(old, new, records, batch_size, on_batch)
                missing, examples = _missing(old, new)
            except NeardupError as exc:  # same error, its one line saying what is left behind
                exc.args = (
                    f"{exc}; the new index at {redacted(new_url)} is left partly rebuilt{_size(new)}: "
                    "delete it before running the rebuild again",
                )
                raise
    finally:
        old.close()
    return RebuildReport(counts["carried"], counts["unknown"], missing, examples, counts["repeated"])


def _size(index: SimhashIndex) -> str:
    """`` (N records)`` for a message about a store that has just failed, if it still answers."""
    try:
        return f" ({len(index)} records)"
    except NeardupError:
        return ""


def _open_old(url: str) -> tuple[Storage, dict[str, Any]]:
    """The old store, attached to its own scheme, and its meta; refused when it holds no
    index, or one of a format this module cannot read."""
    storage = open_storage(url)
    try:
        meta = storage.read_meta()
        shown = redacted(url)
        if meta is None:
            raise InputError(f"there is no neardup index at {shown!r} to rebuild; check OLD_URL")
        if meta.get("format") != FORMAT:
            raise InputError(f"{shown!r} is not a neardup index; check OLD_URL and its table prefix")
        if meta.get("version") not in READABLE_VERSIONS or not isinstance(meta.get("scheme"), dict):
            raise InputError(
                f"the index at {shown} has format version {meta.get('version')!r} (or no scheme in its "
                f"meta); this neardup rebuilds indexes of format {', '.join(map(str, READABLE_VERSIONS))}"
            )
        storage.attach(record_shape(scheme_from_dict(meta["scheme"])))
    except BaseException:
        storage.discard()  # removes only an SQLite file this open created
        raise
    return storage, meta


def _check_new_store(new_url: str, old_url: str, old: Storage) -> None:
    """Refuse a ``new_url`` that holds an index already (the rebuild would mix into it) or
    names the old store under another spelling (an SQLite file reached by another path)."""
    probe = open_storage(new_url)
    try:
        if _same_file(old, probe):
            raise InputError(
                f"{redacted(new_url)} is the store of the old index {redacted(old_url)}: a rebuild writes "
                "a new store and never overwrites the one it reads; give another NEW_URL"
            )
        if probe.read_meta() is not None:
            raise InputError(
                f"{redacted(new_url)} holds an index already; a rebuild creates a new one: "
                "give a NEW_URL that holds no index (or delete that one first)"
            )
    finally:
        probe.discard()  # an SQLite file created by this look is removed again


def _same_file(old: Storage, new: Storage) -> bool:
    if not (isinstance(old, SqliteStorage) and isinstance(new, SqliteStorage)):
        return False
    if old.prefix != new.prefix or ":memory:" in (old.path, new.path) or new.created_file:
        return False
    return os.path.exists(old.path) and os.path.samefile(old.path, new.path)


def _carry(
    old: Storage,
    new: SimhashIndex,
    records: Iterable[Record],
    batch_size: int,
    on_batch: Callable[[int], None] | None,
) -> dict[str, int]:
    """Add the input records the old store holds, batch by batch, with their old cluster ids."""
    documents = Index(new)  # texts stored as the front door stores them (empty ones too)
    documents.fingerprinter  # noqa: B018 - the settings it needs, checked before reading
    counts = {"carried": 0, "unknown": 0, "repeated": 0}
    for group in batches(records, batch_size):
        asked = [record for record in group if lookable(record.id)]  # others no store holds
        stored = old.get_many([record.id for record in asked]) if asked else []
        counts["unknown"] += len(group) - len(asked)
        chosen: dict[Key, tuple[Record, Key]] = {}
        for record, found in zip(asked, stored, strict=True):
            if found is None:
                counts["unknown"] += 1
            elif record.id in chosen:
                counts["repeated"] += 1
            else:
                chosen[record.id] = (record, found.key if found.cluster is None else found.cluster)
        # An id an earlier batch of the input carried keeps its first text (repeated).
        earlier = new.get_many(list(chosen)) if chosen else []
        for key in [key for key, found in zip(list(chosen), earlier, strict=True) if found is not None]:
            del chosen[key]
            counts["repeated"] += 1
        if chosen:
            kept = [record for record, _ in chosen.values()]
            for record in kept:
                check_key(record.id, record.location)  # an over-long id from before the id rule
            batch = documents.prepare(kept)  # with digests: the rebuilt store knows its texts
            clusters: list[Key | None] = [cluster for _, cluster in chosen.values()]
            if batch.texts is not None:  # before the records, as the front door keeps them
                keep_texts(new.storage, batch.keys, batch.texts)
            added = sum(
                new.add_many(
                    batch.keys,
                    batch.fingerprints,
                    signatures=batch.signatures,
                    existing="skip",
                    clusters=clusters,
                    digests=batch.digests,
                )
            )
            counts["carried"] += added
            counts["repeated"] += len(kept) - added  # stored by an earlier batch of the input
        if on_batch is not None:
            on_batch(len(group))
    return counts


def _missing(old: Storage, new: SimhashIndex) -> tuple[int, list[Key]]:
    """How many stored ids of the old index the new one lacks, and the first few of them."""
    missing = 0
    examples: list[Key] = []
    for batch in old.scan():
        keys = [record.key for record in batch]
        for key, found in zip(keys, new.get_many(keys), strict=True):
            if found is None:
                missing += 1
                if len(examples) < MISSING_EXAMPLES:
                    examples.append(key)
    return missing, examples
