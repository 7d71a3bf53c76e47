"""The text sketch a band index stores per record: 512 one-permutation MinHash bins of the
record's search shingles, one byte each (b-bit MinHash, Li and König 2010), 512 bytes.

One sketch does both jobs of issue 17's online search. Its first bytes are the band keys the
store's postings are keyed on (:class:`~neardup.similarity.bands.BandScheme`), and all 512 bins estimate
the shingle Jaccard of a candidate pair without its texts, which an index does not keep:
two bins agree with probability J + (1 − J)/256, so Ĵ = (agree/512 − 1/256) / (1 − 1/256),
standard error about 0.022 near J = 0.5 (``benchmarks/check_margin.py`` measured 0.021-0.023
for the batch's estimate). On the dev sets deciding by Ĵ ≥ 0.5 alone gives pairwise F1
0.992 / 0.988 (zh / en news, ``benchmarks/online_bands.py``), the batch search 0.996 / 0.992.

The shingles and the sketch are the batch search's (:func:`~neardup.similarity.sketches.shingles_of`,
:func:`~neardup.similarity.sketches.oph_sketches`), so a text gets the same sketch in any batch,
process or version that keeps these functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..errors import InputError
from ..text.normalize import Normalizer
from .bands import SKETCH_BYTES
from .sketches import oph_sketches, shingles_of

UInt64Array = npt.NDArray[np.uint64]
FloatArray = npt.NDArray[np.float64]

#: uint64 words of one stored sketch.
SKETCH_WORDS = SKETCH_BYTES // 8
#: The sketch's seed: fixed, since stored sketches must be comparable forever.
SKETCH_SEED = 17
#: Texts sketched at a time (bounds the (n, 512) uint32 temporary).
_CHUNK = 8192
_CHANCE = 1.0 / 256.0


def text_sketches(texts: Sequence[str], normalizer: Normalizer | None = None) -> UInt64Array:
    """(n, 64) uint64: each text's 512 one-byte bins, packed in bin order."""
    out = np.empty((len(texts), SKETCH_WORDS), dtype=np.uint64)
    for low in range(0, len(texts), _CHUNK):
        part = texts[low : low + _CHUNK]
        sketch = oph_sketches(shingles_of(part, normalizer), SKETCH_BYTES, SKETCH_SEED)
        bins = np.ascontiguousarray((sketch & np.uint32(0xFF)).astype(np.uint8))
        out[low : low + len(part)] = bins.view(np.uint64)
    return out


def sketch_similarity(left: npt.ArrayLike, right: npt.ArrayLike) -> FloatArray:
    """Ĵ of rows of ``left`` against rows of ``right`` (either may be one row): the share of
    equal bins, corrected for the 1/256 chance agreement, clipped to [0, 1]."""
    a, b = _bins(left), _bins(right)
    agree = np.count_nonzero(a == b, axis=-1) / SKETCH_BYTES
    return np.clip((agree - _CHANCE) / (1.0 - _CHANCE), 0.0, 1.0)  # type: ignore[no-any-return]


def _bins(sketches: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    array = np.ascontiguousarray(sketches, dtype=np.uint64)
    if array.shape[-1] != SKETCH_WORDS:
        raise InputError(
            f"a text sketch is {SKETCH_WORDS} uint64 words (Verifier('sketch').signatures); "
            f"got shape {array.shape}"
        )
    return array.view(np.uint8)
