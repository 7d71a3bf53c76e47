"""Band schemes: an index searched by the LSH bands of each record's text sketch.

The Simhash block index of :mod:`neardup.blocks` finds fingerprints within k bits, and at the
k a store can afford (3) it misses medium edits: on the labelled dev sets F1 0.44-0.45
against 0.99 for the batch shingle search (issue 17). A band index finds what the batch
search finds: each record keeps its one-permutation MinHash sketch of 512 bins with 8 bits
per bin (:func:`neardup.similarity.sketches.text_sketches`, stored as its signature), and table t is keyed
on the 8·rows bits of bins rows·t … rows·t + rows − 1. Two records share a table's key with
probability about J^rows (J their shingle Jaccard; a bin also agrees by chance, 1/256), so
with the default 16 tables of 3 bins a pair at J = 0.5 is found with probability
1 − (1 − 0.5³)¹⁶ = 0.88 and at J = 0.6 with 0.98; the sketch, and near the threshold the
texts, then decide. Unrelated records
share a 24-bit key with probability 2⁻²⁴: about one chance candidate per query among 10⁶
stored records (16 · 10⁶ / 2²⁴), which its sketch rejects. 16 × 3 gives the dev sets the F1
of 32 × 4 (0.995 / 0.993 / 0.992 on zh_news / en_news / zh_short through a real index) with
half the postings.

Stores need nothing new: a record's *words* are its fingerprint words followed by its band
keys, and each table is a :class:`~neardup.blocks.BitSelection` over one band key, so the
same ``keys(words)`` lays out postings (SQL columns, Redis buckets, MongoDB documents) and
recomputes them on removal. Hamming distances are taken over the fingerprint words alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from ..blocks import BitSelection, BlockScheme
from ..distance import check_bits
from ..errors import ConfigError, InputError

UInt64Array = npt.NDArray[np.uint64]

#: Tables of a band index. A store pays for every posting on each write, so fewer and shorter
#: bands than the batch search's 235 x 5 (two of them to agree). 40 x 3 is the fewest that give
#: the batch pairs on the dev sets (a pair of Jaccard 0.5 found with probability 0.995, against
#: 0.88), but each store still checks and adds fewer documents a second with it than with 16
#: (the candidate statement and the commit grow with the postings in SQL, the bucket reads and
#: writes in Redis); docs/candidates.md has the figures.
DEFAULT_BANDS = 16
#: Sketch bins (one byte each) per band: a band key is 8·rows bits of the stored sketch.
DEFAULT_ROWS = 3
#: Bytes of the stored sketch (512 one-byte bins), which bound bands · rows.
SKETCH_BYTES = 512


@dataclass(frozen=True)
class BandScheme:
    """``bands`` tables, table t keyed on sketch bytes [rows·t, rows·t + rows).

    Presents what stores use of a :class:`BlockScheme` (``words``, ``tables``, ``keys``,
    ``table_count``, ``sub_blocks``, ``describe``, ``to_dict``), over words that hold the
    ``bits``-bit fingerprint first and then the front of the sketch (its band bins).
    """

    bits: int = 64
    bands: int = DEFAULT_BANDS
    rows: int = DEFAULT_ROWS

    def __post_init__(self) -> None:
        check_bits(self.bits)
        for name, value, top in (
            ("rows", self.rows, 8),
            ("bands", self.bands, SKETCH_BYTES // max(1, self.rows)),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ConfigError(f"{name} must be an integer from 1 to {top}; got {value!r}")

    @property
    def max_distance(self) -> int:
        """A band index returns every candidate whatever its Hamming distance; the sketch
        decides (see :class:`~neardup.dedup.documents.IncrementalDeduper`)."""
        return self.bits

    @property
    def fingerprint_words(self) -> int:
        return 2 if self.bits == 128 else 1

    @property
    def key_bits(self) -> int:
        """Bits of a band key: 8 per sketch bin."""
        return 8 * self.rows

    @property
    def key_words(self) -> int:
        """uint64 words at the front of a sketch that hold every band's bins."""
        return (self.bands * self.key_bits + 63) // 64

    @property
    def words(self) -> int:
        """uint64 words per stored record: fingerprint, then band keys."""
        return self.fingerprint_words + self.key_words

    @cached_property
    def tables(self) -> tuple[BitSelection, ...]:
        """Band t: the bits of sketch bytes [rows·t, rows·t + rows), most significant first,
        so a key reads its bytes as a little-endian integer (as :meth:`keys` does)."""
        start = self.fingerprint_words * 64
        return tuple(
            BitSelection(
                tuple(range(start + (band + 1) * self.key_bits - 1, start + band * self.key_bits - 1, -1))
            )
            for band in range(self.bands)
        )

    @property
    def table_count(self) -> int:
        return self.bands

    def sub_blocks(self, key: BitSelection) -> tuple[BitSelection, ...]:
        """How an in-memory store splits an oversized bucket keyed on a prefix of a band key:
        on the rest of that key (members of one band bucket agree on all of it)."""
        for table in self.tables:
            if table.positions[: key.bit_count] == key.positions:
                return (BitSelection(table.positions[key.bit_count :]),)
        return (BitSelection(()),)

    def keys(self, words: UInt64Array) -> UInt64Array:
        """(n, bands) uint64 band keys of (n, words) stored words."""
        bins = self.bins(words).reshape(-1, self.bands, self.rows)
        out = np.zeros((words.shape[0], self.bands), dtype=np.uint64)
        for row in range(self.rows - 1, -1, -1):
            out = (out << np.uint64(8)) | bins[:, :, row]
        return out

    def bins(self, words: UInt64Array) -> npt.NDArray[np.uint8]:
        """(n, bands · rows) one-byte sketch bins that (n, words) stored words hold after
        the fingerprint: the bins the band keys are made of."""
        keyed = np.ascontiguousarray(words[:, self.fingerprint_words :], dtype=np.uint64)
        return keyed.view(np.uint8)[:, : self.bands * self.rows]

    def compose(self, fingerprint_words: UInt64Array, signatures: npt.ArrayLike | None) -> UInt64Array:
        """The stored words of a batch: its (n, 1 or 2) fingerprint words and the band keys
        read from the front of its sketches ((n, ≥ key_words) uint64, as the stored sketch
        makes them)."""
        if signatures is None:
            raise InputError(
                "a band index finds records by their text sketches: pass signatures= "
                "(Verifier('sketch').signatures(texts)) with the fingerprints"
            )
        sketches = np.asarray(signatures)
        count = fingerprint_words.shape[0]
        if sketches.dtype != np.uint64 or sketches.ndim != 2 or sketches.shape[0] != count:
            raise InputError(
                f"the signatures of a band index must be a ({count}, n) uint64 array of text sketches "
                f"(Verifier('sketch').signatures); got {sketches.dtype} {sketches.shape}"
            )
        if sketches.shape[1] < self.key_words:
            raise InputError(
                f"a sketch of {sketches.shape[1]} words holds fewer than the {self.bands} band keys "
                f"of this index ({self.key_words} words)"
            )
        out = np.empty((count, self.words), dtype=np.uint64)
        out[:, : self.fingerprint_words] = fingerprint_words
        out[:, self.fingerprint_words :] = sketches[:, : self.key_words]
        spare = self.key_words * 64 - self.bands * self.key_bits
        if spare:  # bins beyond the last band: zeroed, so stored words are band keys only
            out[:, -1] &= np.uint64((1 << (64 - spare)) - 1)
        return out

    def shares_key(self, left: UInt64Array, right: UInt64Array) -> npt.NDArray[np.bool_]:
        """Whether rows of ``left`` and ``right`` (stored words) agree on any band key."""
        return np.any(self.keys(left) == self.keys(right), axis=1)  # type: ignore[no-any-return]

    def describe(self) -> str:
        return (
            f"{self.bands} bands of {self.rows} sketch bins ({self.key_bits}-bit keys), {self.bits}-bit "
            "fingerprints; "
            "candidates decided by the stored sketch"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "bands", "bits": self.bits, "bands": self.bands, "rows": self.rows}


Scheme = BlockScheme | BandScheme


def scheme_from_dict(data: dict[str, Any]) -> Scheme:
    """The scheme a meta records: a band scheme (``kind`` "bands") or a block scheme. A compact
    index's meta is read by :mod:`neardup.index.compact_index`, which its opener calls; any
    other reader names that opener instead of failing on unknown settings."""
    if data.get("kind") == "compact":
        raise ConfigError(
            "this store holds a compact index (--index-kind compact): open it with "
            "neardup.Index.open(url) or the neardup command, which read its kind; "
            "`neardup index rebuild` cannot read it yet"
        )
    if data.get("kind") == "bands":
        unknown = set(data) - {"kind", "bits", "bands", "rows"}
        if unknown:
            raise ConfigError(f"unknown band scheme settings: {', '.join(sorted(unknown))}")
        return BandScheme(data["bits"], data["bands"], data["rows"])
    return BlockScheme.from_dict(data)
