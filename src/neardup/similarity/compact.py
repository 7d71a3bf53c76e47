"""The compact record: a text's 64-bit Simhash and a 56-byte summary of its sketch, 64 bytes in all.

A band index (:class:`~neardup.similarity.bands.BandScheme`) keeps a 512-byte sketch a record,
terabytes at billions of documents, where a Simhash is 8 bytes. A compact record keeps what the
search and the decision need and no more:

- the **band bins**: the first ``bands · rows`` one-byte bins of the text sketch
  (:func:`~neardup.similarity.sketches.text_sketches`), whole. Band keys must be whole bins: a
  band of b-bit bins agrees by chance with 2^-b a bin, so as selective a key needs 8/b times the
  bins, and a pair of Jaccard 0.5 would share it with probability 0.625^12 (2-bit bins) instead
  of 0.5^3. Kept in the record, the postings are recomputed from it on removal in every store
  (:meth:`BandScheme.keys`, inherited), and the bins count in the estimate;
- the **tail**: the low bit of the next bins (b-bit MinHash, Li and König 2010, with b = 1),
  64 of them for a 64-bit fingerprint. Two 1-bit bins agree with probability (1 + J)/2.

The estimate (:func:`compact_similarity`) weighs the two parts by the inverse of their
variance near the threshold J = 0.5: a whole bin is worth about three 1-bit bins there
(variances J(1 − J) and (1 − J²) a bin). The search finds a pair through a band it shares, so
its band bins agree more often than J says (three more at least); the tail does not know the
band and keeps unrelated pairs that share a band by chance far below the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..distance import row_distances
from ..errors import ConfigError, InputError
from .bands import SKETCH_BYTES, BandScheme
from .sketches import estimate_from_packed_bins

UInt64Array = npt.NDArray[np.uint64]
FloatArray = npt.NDArray[np.float64]

#: Bytes of a compact record: fingerprint, band bins and tail.
RECORD_BYTES = 64
#: The version of the compact record's layout, recorded in its scheme (stores keep it).
COMPACT_VERSION = 1
#: Estimate weights a bin, from the variances near J = 0.5 (module docstring): a whole bin
#: J(1 − J) = 0.25, a 1-bit bin 1 − J² = 0.75.
WHOLE_BIN_WEIGHT = 1 / 0.25
BIT_BIN_WEIGHT = 1 / 0.75


@dataclass(frozen=True)
class CompactScheme(BandScheme):
    """A band scheme whose stored record is :data:`RECORD_BYTES` bytes: the fingerprint, the
    band bins (the band keys, as :class:`BandScheme` keeps them) and a 1-bit tail of the next
    sketch bins. The postings are :class:`BandScheme`'s; :meth:`compose` makes the record from
    the 512-byte text sketch, which is never stored. Its bands are its own (16 bands of
    3 bins), not whatever the band index's default becomes: they are the record's layout."""

    bands: int = 16
    rows: int = 3

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.tail_bins < 0:
            raise ConfigError(
                f"{self.bands} bands of {self.rows} bins and a {self.bits}-bit fingerprint do not fit "
                f"a {RECORD_BYTES}-byte compact record; use fewer bands"
            )
        if self.bands * self.rows % 8:
            raise ConfigError(
                f"bands x rows must be a multiple of 8 in a compact record; got {self.bands * self.rows}"
            )

    @property
    def band_bins(self) -> int:
        return self.bands * self.rows

    @property
    def tail_bins(self) -> int:
        """1-bit bins after the band bins: the record's bits left over."""
        return 8 * (RECORD_BYTES - 8 * self.fingerprint_words - self.band_bins)

    @property
    def words(self) -> int:
        return RECORD_BYTES // 8

    def compose(self, fingerprint_words: UInt64Array, signatures: npt.ArrayLike | None) -> UInt64Array:
        """The records of a batch: its (n, 1 or 2) fingerprint words and its text sketches
        ((n, 64) uint64, :func:`~neardup.similarity.sketches.text_sketches`)."""
        banded = BandScheme(self.bits, self.bands, self.rows).compose(fingerprint_words, signatures)
        sketches = np.ascontiguousarray(signatures, dtype=np.uint64)
        if sketches.shape[1] * 8 < self.band_bins + self.tail_bins or sketches.shape[1] * 8 != SKETCH_BYTES:
            raise InputError(
                f"a compact record is made from the {SKETCH_BYTES}-byte text sketch "
                f"(Verifier('sketch').signatures); got {sketches.shape[1] * 8} bytes"
            )
        tail = sketches.view(np.uint8)[:, self.band_bins : self.band_bins + self.tail_bins] & np.uint8(1)
        packed = np.packbits(tail, axis=1, bitorder="little")
        out = np.empty((banded.shape[0], self.words), dtype=np.uint64)
        out[:, : banded.shape[1]] = banded
        out[:, banded.shape[1] :] = packed.view(np.uint64).reshape(banded.shape[0], -1)
        return out

    def describe(self) -> str:
        return (
            f"compact records of {RECORD_BYTES} bytes: {self.bits}-bit fingerprint, {self.bands} bands of "
            f"{self.rows} sketch bins, {self.tail_bins} 1-bit bins; candidates decided by their estimate"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "compact",
            "version": COMPACT_VERSION,
            "bits": self.bits,
            "bands": self.bands,
            "rows": self.rows,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompactScheme:
        """The scheme a store's meta records (:meth:`to_dict`); a layout of another version
        is refused, never read as this one."""
        unknown = set(data) - {"kind", "version", "bits", "bands", "rows"}
        if unknown:
            raise ConfigError(f"unknown compact scheme settings: {', '.join(sorted(unknown))}")
        if data.get("version") != COMPACT_VERSION:
            raise ConfigError(
                f"the compact records of this index have layout version {data.get('version')!r}; "
                f"this neardup reads version {COMPACT_VERSION}: use the neardup that made it"
            )
        return cls(data["bits"], data["bands"], data["rows"])


def compact_similarity(scheme: CompactScheme, left: UInt64Array, right: UInt64Array) -> FloatArray:
    """Ĵ of rows of ``left`` against rows of ``right`` (compact records, (n, 8) uint64; either
    may be one row): the band bins' estimate and the tail's, weighed by their variances."""
    a = np.ascontiguousarray(left, dtype=np.uint64)
    b = np.ascontiguousarray(right, dtype=np.uint64)
    start = scheme.fingerprint_words
    bins = scheme.band_bins
    whole = estimate_from_packed_bins(a[:, start : start + bins // 8], b[:, start : start + bins // 8])
    tail_words = scheme.tail_bins // 64
    if not tail_words:
        return whole
    differ = row_distances(a[:, scheme.words - tail_words :] ^ b[:, scheme.words - tail_words :])
    bit = np.clip(1.0 - 2.0 * differ / scheme.tail_bins, 0.0, 1.0)
    weights = WHOLE_BIN_WEIGHT * bins, BIT_BIN_WEIGHT * scheme.tail_bins
    return np.asarray((weights[0] * whole + weights[1] * bit) / (weights[0] + weights[1]), dtype=np.float64)
