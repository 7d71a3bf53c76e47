"""What makes two submissions under one id the same document: a hash of the exact text.

A fingerprint cannot tell: two texts that differ by one word have the same 64-bit Simhash
about 15 % of the time (23 % for a changed number, dev en_news), and a check of fingerprints
took such a corrected text for a retry and dropped it. Each stored record therefore keeps
:func:`text_digest` of the text its fingerprint and sketch were computed from; the same id
with the same digest is a retry, with another digest a conflict (or, asked for, a replace).
Records without a digest (stores made before digests, records added from bare fingerprints)
are compared by fingerprint, as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ..errors import KeyExistsError
from ..storage.base import (
    DIGEST_BYTES,
    Key,
    RecordBatch,
    Storage,
    StoredRecord,
    plain_key,
    shown_key,
    words_to_int,
)


def text_digest(text: str, extra: Sequence[str] | None = None) -> bytes:
    """The 16-byte BLAKE2b of ``text``'s UTF-8 bytes, exactly as given (a changed space or
    letter case is another text). ``extra`` (the metadata a ``combined`` index stores a
    signature of) is hashed after the text, each item NUL-separated. 128 bits make an
    accidental collision under one id impossible in practice, at 16 bytes per record."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=DIGEST_BYTES)
    for item in extra or ():
        digest.update(b"\x00" + item.encode("utf-8", "surrogatepass"))
    return digest.digest()


def same_document(record: StoredRecord, digest: bytes | None, fingerprint: int) -> bool:
    """Is ``record`` the document given by ``digest`` and ``fingerprint``? By digest where
    both have one; a record without one, or a caller without text, falls back to the
    fingerprint, which tells most other texts apart but not all."""
    if digest is not None and record.digest is not None:
        return record.digest == digest
    return record.fingerprint == fingerprint


def changed_text_error(
    key: Key, location: str | None = None, fix: str = 'existing="replace"'
) -> KeyExistsError:
    """A stored id sent again with another text: naming the record and how to update it."""
    where = f"{location}: " if location else ""
    return KeyExistsError(
        f"{where}id {shown_key(key)} is already stored with another text; nothing of this batch was "
        f"added: use another id, or replace the stored record ({fix})"
    )


def check_same_documents(batch: RecordBatch, stored: Sequence[StoredRecord | None], width: int) -> None:
    """Refuse a batch given with digests that names a stored key with another text (a batch
    of bare fingerprints skips stored keys as before); ``width``: the fingerprint's words."""
    if batch.digests is None:
        return
    for row, record in enumerate(stored):
        fingerprint = words_to_int(batch.words[row], width)
        if record is not None and not same_document(record, batch.digest(row), fingerprint):
            raise changed_text_error(record.key)


def replace_records(storage: Storage, batch: RecordBatch) -> None:
    """Store records over the stored ones of their keys (fingerprint, postings, signature,
    digest: the batch's; the cluster id too where the batch gives one, else the stored one
    stays), adding those not stored, under the writer lock. In SQL that is one transaction;
    elsewhere a crash between the removal and the add leaves the keys absent, and running the
    same replace again adds them."""
    keys = [plain_key(key) for key in batch.keys]
    with storage.exclusive():
        records = storage.get_many(keys)
        if batch.clusters is None:
            batch.clusters = [None if record is None else record.cluster for record in records]
        stored = [key for key, record in zip(keys, records, strict=True) if record is not None]
        if stored:
            storage.remove_many(stored)
        storage.add_many(batch)


def changed_keys(
    stored: dict[Key, StoredRecord | None],
    values: Sequence[int],
    first_row: dict[Key, int],
    digests: Sequence[bytes | None] | None,
) -> list[Key]:
    """The stored keys a batch gives another text (by digest where both have one, else by
    fingerprint); ``first_row``: each key's row in ``values`` and ``digests``."""
    changed = []
    for key, record in stored.items():
        row = first_row[key]
        digest = None if digests is None else digests[row]
        if record is not None and not same_document(record, digest, values[row]):
            changed.append(key)
    return changed
