"""The batches of ``neardup index add``: which records of a batch are new, which repeat an id
(of the input or of the store) with the same text (skipped) or with another text (an error
naming the line, or with ``--existing replace`` the new text stored over the old)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dedup.documents import Index, digests_of
from ..distance import to_ints
from ..errors import InputError
from ..index.digests import changed_text_error, same_document
from ..io.record import Record
from ..storage.base import Key, shown_key


def first_of_each_id(
    group: list[Record],
    digests: list[bytes | None],
    existing: str,
    first_seen: dict[Key, tuple[str, bytes | None]],
) -> list[Record]:
    """The records whose id did not appear earlier in the input (in this batch or an earlier
    one, so the outcome never depends on --batch-size); a repeat stops the run naming both
    lines (``existing="fail"``, or another text) or is left out, to be counted as skipped."""
    kept = []
    for record, digest in zip(group, digests, strict=True):
        first = first_seen.get(record.id)
        if first is None:
            first_seen[record.id] = (record.location, digest)
            kept.append(record)
        elif existing == "fail":
            raise InputError(
                f"id {shown_key(record.id)} appears again (first at {first[0]}); ids must be unique: "
                "fix the input, or use --existing skip to keep the first",
                record.location,
            )
        elif first[1] != digest:
            raise InputError(
                f"id {shown_key(record.id)} appears again with another text (first at {first[0]}); "
                "an id names one text: fix the input",
                record.location,
            )
    return kept


def add_batch(opened: Index, group: list[Record], existing: str) -> tuple[int, int, int]:
    """Add a batch of distinct ids; (how many were added, how many stored ones were replaced,
    how many of those texts are empty). A stored id with the same text is skipped
    (``existing="skip"``, an id another writer adds meanwhile too); with another text it
    stops the run naming its line, or is replaced. Only what is stored is sketched, so a
    re-run over stored records costs little more than reading them."""
    keys = [record.id for record in group]
    stored = opened.index.get_many(keys)
    known = [row for row, record in enumerate(stored) if record is not None]
    if known and existing == "fail":
        raise InputError(
            f"id {shown_key(keys[known[0]])} is already in the index; use --existing skip to skip "
            "stored records, or remove it first",
            group[known[0]].location,
        )
    changed = _changed(opened, [group[row] for row in known], [stored[row] for row in known], existing)
    rows = sorted([row for row, record in enumerate(stored) if record is None] + [known[i] for i in changed])
    if not rows:
        return 0, 0, 0
    prepared = opened.prepare([group[row] for row in rows])
    written = opened.index.add_many(
        prepared.keys,
        prepared.fingerprints,
        signatures=prepared.signatures,
        existing="replace" if changed else existing,
        digests=prepared.digests,
    )
    return sum(written) - len(changed), len(changed), int(np.count_nonzero(prepared.empty_rows()))


def _changed(opened: Index, records: list[Record], stored: list[Any], existing: str) -> list[int]:
    """The positions of ``records`` whose stored record has another text (by digest; by
    fingerprint for records stored without one): to replace, or (skip) an error naming the
    first one's line."""
    if not records:
        return []
    digests = digests_of(opened.verifier, records)
    values = to_ints(opened.fingerprinter.fingerprint_many([record.text for record in records]))
    changed = []
    for position, (record, value) in enumerate(zip(stored, values, strict=True)):
        if not same_document(record, digests[position], int(value)):
            if existing != "replace":
                raise changed_text_error(record.key, records[position].location, "--existing replace")
            changed.append(position)
    return changed
