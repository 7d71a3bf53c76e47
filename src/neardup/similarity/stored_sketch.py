"""The text sketch a band index stores per record: 512 one-permutation MinHash bins of the
record's shingles, one byte each (:func:`~neardup.similarity.sketches.byte_bins`), 512 bytes.

One sketch does both jobs of the online search. Its first bytes are the band keys the
store's postings are keyed on (:class:`~neardup.similarity.bands.BandScheme`), and all 512
bins estimate the shingle Jaccard of a candidate pair without its texts, which an index does
not keep (:func:`~neardup.similarity.sketches.estimate_from_bins`; standard error about 0.022
near J = 0.5; figures in docs/storage.md).

The shingles, the sketch and the estimate are the batch search's
(:func:`~neardup.similarity.shingles.shingles_of`,
:func:`~neardup.similarity.sketches.oph_sketches`), so a text gets the same sketch in any
batch, process or version that keeps these functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..errors import InputError
from ..text.normalize import Normalizer
from .bands import SKETCH_BYTES
from .shingles import shingles_of
from .sketches import TEXT_SKETCH_BINS, TEXT_SKETCH_SEED, byte_bins, estimate_from_bins, oph_sketches

UInt64Array = npt.NDArray[np.uint64]
FloatArray = npt.NDArray[np.float64]

#: uint64 words of one stored sketch.
SKETCH_WORDS = SKETCH_BYTES // 8
#: The one-permutation sketches (bins, seed) a stored sketch is the first 512 bins of, by
#: version: stored sketches must be comparable forever, so an index records its version.
#: 2 is the text sketch of every mode (:data:`~neardup.similarity.sketches.TEXT_SKETCH_BINS`),
#: whose first bins are the batch search's check bins; 1 is that of band indexes made before.
SKETCH_LAYOUTS: dict[int, tuple[int, int]] = {1: (512, 17), 2: (TEXT_SKETCH_BINS, TEXT_SKETCH_SEED)}
SKETCH_VERSION = 2
#: Texts sketched at a time (bounds the (n, 512) uint32 temporary).
_CHUNK = 8192


def text_sketches(
    texts: Sequence[str], normalizer: Normalizer | None = None, version: int = SKETCH_VERSION
) -> UInt64Array:
    """(n, 64) uint64: each text's first 512 sketch bins at one byte, packed in bin order,
    from the sketch of ``version`` (:data:`SKETCH_LAYOUTS`)."""
    if version not in SKETCH_LAYOUTS:
        known = sorted(SKETCH_LAYOUTS)
        raise InputError(f"unknown text sketch version {version!r}; this neardup knows {known}")
    width, seed = SKETCH_LAYOUTS[version]
    out = np.empty((len(texts), SKETCH_WORDS), dtype=np.uint64)
    for low in range(0, len(texts), _CHUNK):
        part = texts[low : low + _CHUNK]
        sketch = oph_sketches(shingles_of(part, normalizer), width, seed)
        bins = np.ascontiguousarray(byte_bins(sketch, SKETCH_BYTES))
        out[low : low + len(part)] = bins.view(np.uint64)
    return out


def sketch_similarity(left: npt.ArrayLike, right: npt.ArrayLike) -> FloatArray:
    """Ĵ of rows of ``left`` against rows of ``right`` (either may be one row), stored
    sketches: :func:`~neardup.similarity.sketches.estimate_from_bins` of their bins."""
    return estimate_from_bins(_bins(left), _bins(right))


def _bins(sketches: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    array = np.ascontiguousarray(sketches, dtype=np.uint64)
    if array.shape[-1] != SKETCH_WORDS:
        raise InputError(
            f"a text sketch is {SKETCH_WORDS} uint64 words (Verifier('sketch').signatures); "
            f"got shape {array.shape}"
        )
    return array.view(np.uint8)
