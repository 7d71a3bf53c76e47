"""The batches of ``neardup index add``: which records of a batch are new, which repeat an id
(of the input or of the store) with the same text (skipped) or with another text (an error
naming the line, or with ``--existing replace`` the new text stored over the old)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dedup.documents import digests_of, signatures_of
from ..errors import InputError
from ..fingerprint.fingerprinter import Fingerprinter
from ..index.digests import changed_text_error, same_document
from ..index.simhash_index import SimhashIndex
from ..io.record import Record
from ..similarity.verify import Verifier
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


def add_batch(
    opened: SimhashIndex,
    fingerprinter: Fingerprinter,
    verifier: Verifier | None,
    group: list[Record],
    existing: str,
) -> tuple[int, int]:
    """Add a batch of distinct ids; (how many were added, how many stored ones were replaced).
    A stored id with the same text is skipped (``existing="skip"``, an id another writer adds
    meanwhile too); with another text it stops the run naming its line, or is replaced."""
    keys = [record.id for record in group]
    values = fingerprinter.fingerprint_many([r.text for r in group])
    digests = digests_of(verifier, group)
    stored = opened.get_many(keys)
    fresh = [row for row, record in enumerate(stored) if record is None]
    if len(fresh) < len(group) and existing == "fail":
        row = next(row for row, record in enumerate(stored) if record is not None)
        raise InputError(
            f"id {shown_key(keys[row])} is already in the index; use --existing skip to skip "
            "stored records, or remove it first",
            group[row].location,
        )
    changed = _changed(stored, values, digests, existing, group)
    rows = sorted(fresh + changed)
    if not rows:
        return 0, 0
    signatures = signatures_of(verifier, [group[row] for row in rows], fingerprinter)
    written = opened.add_many(
        [keys[row] for row in rows],
        values[rows],
        signatures=signatures,
        existing="replace" if changed else existing,
        digests=[digests[row] for row in rows],
    )
    return sum(written) - len(changed), len(changed)


def _changed(
    stored: list[Any],
    values: np.ndarray[Any, Any],
    digests: list[bytes | None],
    existing: str,
    group: list[Record],
) -> list[int]:
    """The rows whose stored record has another text (by digest; by fingerprint for records
    stored without one): to replace, or (skip) an error naming the first one's line."""
    changed = []
    for row, (record, value) in enumerate(zip(stored, values.tolist(), strict=True)):
        if record is None:
            continue
        new = value if isinstance(value, int) else int(value[0]) | int(value[1]) << 64
        if not same_document(record, digests[row], new):
            if existing != "replace":
                raise changed_text_error(record.key, group[row].location, "--existing replace")
            changed.append(row)
    return changed
