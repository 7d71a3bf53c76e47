"""The texts a band index keeps, and the exact check that reads them.

A sketch estimate is within a few hundredths of the Jaccard it estimates, so near the
threshold it cannot tell a copy from a neighbour. Batch dedup settles those candidates on
the exact shingle Jaccard of the two texts; an index whose verifier has ``check_texts``
(the default band index) does the same, reading the stored side's text from the store's
``texts`` value map: it decides the pairs batch decides, the same way.

Texts are kept as UTF-8, zlib-compressed when long enough for compression to pay (each
call pays a fixed set-up, which costs more than it saves on a short text); a tag byte says
which.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..errors import StorageDamagedError
from ..similarity.shingles import Shingles
from ..similarity.verify import Verifier
from ..storage.base import Key, Storage, key_order
from ..text.normalize import Normalizer

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: The store's value map of the texts.
TEXTS = "texts"
#: UTF-8 bytes from which a text is stored compressed.
COMPRESS_FROM = 1024
_PLAIN = 0
_ZLIB = 1


def pack_text(text: str) -> bytes:
    """A text as stored: a tag byte, then its UTF-8 (zlib-compressed when long)."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) < COMPRESS_FROM:
        return bytes((_PLAIN,)) + encoded
    return bytes((_ZLIB,)) + zlib.compress(encoded, 1)


def unpack_text(value: bytes, key: Key) -> str:
    """The text :func:`pack_text` stored under ``key``."""
    tag, body = value[:1], value[1:]
    try:
        if tag == bytes((_PLAIN,)):
            return body.decode("utf-8", "surrogatepass")
        if tag == bytes((_ZLIB,)):
            return zlib.decompress(body).decode("utf-8", "surrogatepass")
    except (zlib.error, UnicodeDecodeError) as exc:
        raise StorageDamagedError(f"the stored text of id {key!r} cannot be read ({exc}); re-add it") from exc
    raise StorageDamagedError(f"the stored text of id {key!r} has an unknown format; re-add it")


def keep_texts(storage: Storage, keys: Sequence[Key], texts: Sequence[str]) -> None:
    """Store ``texts[i]`` under ``keys[i]`` (before their records: a record is never
    stored without its text)."""
    if keys:
        storage.put_values(TEXTS, list(keys), [pack_text(text) for text in texts])


class TextCheck:
    """The exact check of one batch's candidates: ``texts`` are the batch's (by row), the
    stored texts are read from ``storage`` when a candidate needs them."""

    def __init__(
        self, verifier: Verifier, texts: Sequence[str], storage: Storage, normalizer: Normalizer | None
    ) -> None:
        self.verifier = verifier
        self.texts = texts
        self.storage = storage
        self.normalizer = normalizer

    def subset(self, rows: Sequence[int] | npt.NDArray[np.int64]) -> TextCheck:
        """The check of the batch's rows ``rows``, renumbered from 0."""
        return TextCheck(
            self.verifier, [self.texts[row] for row in list(rows)], self.storage, self.normalizer
        )

    def store(self, keys: Sequence[Key], rows: Sequence[int]) -> None:
        """Keep the texts of ``rows`` under ``keys`` (inside the caller's transaction, before
        the records: a record is never stored without its text)."""
        keep_texts(self.storage, keys, [self.texts[row] for row in rows])

    def refine(self, rows: IntArray, keys: Sequence[Key], similarity: FloatArray) -> FloatArray:
        """``similarity`` (the estimates of candidates: batch row ``rows[t]`` against stored
        record ``keys[t]``) with the exact Jaccard where the estimate is near the threshold
        and the stored text is kept (a record stored without one keeps its estimate)."""
        near = np.flatnonzero(self.verifier.near_threshold(similarity))
        if not near.size:
            return similarity
        wanted = sorted({keys[t] for t in near.tolist()}, key=key_order)
        stored = {
            key: unpack_text(value, key)
            for key, value in zip(wanted, self.storage.get_values(TEXTS, wanted), strict=True)
            if value is not None
        }
        kept = [t for t in near.tolist() if keys[t] in stored]
        if not kept:
            return similarity
        # One shingling of every text involved: batch rows first, then the stored texts.
        batch_rows = sorted({int(rows[t]) for t in kept})
        row_at = {row: position for position, row in enumerate(batch_rows)}
        stored_keys = [key for key in wanted if key in stored]
        key_at = {key: len(batch_rows) + position for position, key in enumerate(stored_keys)}
        texts = [self.texts[row] for row in batch_rows] + [stored[key] for key in stored_keys]
        left = np.array([row_at[int(rows[t])] for t in kept], dtype=np.int64)
        right = np.array([key_at[keys[t]] for t in kept], dtype=np.int64)
        refined = np.array(similarity, dtype=np.float64, copy=True)
        refined[kept] = Shingles.of(texts, self.normalizer).jaccard(left, right)
        return refined

    def refine_within(self, left: IntArray, right: IntArray, similarity: FloatArray) -> FloatArray:
        """``similarity`` of pairs of the batch's own rows (``left[t]``, ``right[t]``), with
        the exact Jaccard where the estimate is near the threshold."""
        near = np.flatnonzero(self.verifier.near_threshold(similarity))
        if not near.size:
            return similarity
        involved, positions = np.unique(np.concatenate([left[near], right[near]]), return_inverse=True)
        shingles = Shingles.of([self.texts[row] for row in involved.tolist()], self.normalizer)
        refined = np.array(similarity, dtype=np.float64, copy=True)
        refined[near] = shingles.jaccard(positions[: near.size], positions[near.size :])
        return refined
