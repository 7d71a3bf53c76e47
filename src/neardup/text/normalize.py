"""Text normalization: NFKC (which folds full-width forms), case, whitespace, optional
traditional → simplified Chinese.

Copies of the same text differ in width (People's Daily writes ``１９９８``), case and line
breaks; normalizing first makes those copies produce the same features. The result is the
input of every tokenizer, so any change here changes fingerprints: bump
:data:`NORMALIZER_VERSION` when it does (indexes record it and refuse a mismatch).

Speed: ``unicodedata.normalize("NFKC", ...)`` is about as slow on Chinese news as segmentation
itself (docs/fingerprints.md). We first map every code point whose NFKC form differs through a
``str.translate`` table and only fall back to full NFKC when the result is still not
normalized (combining sequences). Both give the same string: NFKD works code point by code
point, so replacing a code point by its NFKC form does not change the string's NFKC form.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import MissingDependencyError

NORMALIZER_VERSION = 1


@lru_cache(maxsize=1)
def _nfkc_table() -> dict[int, str]:
    """Code point → its NFKC form, for every code point where the two differ.

    Only the Basic Multilingual Plane is scanned, and blocks of 256 code points that are
    normalized as a whole are skipped (a small fraction of a full scan's time). A code point
    this misses (astral compatibility characters such as 𝐀) only sends its text through the
    exact ``unicodedata.normalize`` fallback in :func:`nfkc`, so the result stays exact.
    """
    table: dict[int, str] = {}
    for block in range(0, 0x10000, 256):
        codes = [code for code in range(block, block + 256) if not 0xD800 <= code <= 0xDFFF]
        if unicodedata.is_normalized("NFKC", "".join(map(chr, codes))):
            continue
        for code in codes:
            char = chr(code)
            folded = unicodedata.normalize("NFKC", char)
            if folded != char:
                table[code] = folded
    return table


@lru_cache(maxsize=1)
def _nfkc_arrays() -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.bool_]]:
    """The BMP part of :func:`_nfkc_table` as arrays: code → code for one-to-one mappings,
    and a mask of code points that map to several (or no) code points."""
    single = np.arange(0x10000, dtype=np.uint32)
    multiple = np.zeros(0x10000, dtype=bool)
    for code, folded in _nfkc_table().items():
        if len(folded) == 1:
            single[code] = ord(folded)
        else:
            multiple[code] = True
    return single, multiple


def nfkc_many(texts: Sequence[str]) -> list[str]:
    """:func:`nfkc` of many texts, mapping the one-to-one cases of a whole batch with one
    array lookup (twice as fast as ``str.translate`` on Chinese news)."""
    result = list(texts)
    pending = [
        i
        for i, text in enumerate(texts)
        if not text.isascii() and not unicodedata.is_normalized("NFKC", text)
    ]
    if not pending:
        return result
    single, multiple = _nfkc_arrays()
    joined = "".join(texts[i] for i in pending)
    codepoints = np.frombuffer(joined.encode("utf-32-le"), dtype="<u4")
    lengths = np.fromiter((len(texts[i]) for i in pending), dtype=np.int64, count=len(pending))
    ends = np.cumsum(lengths)
    astral = codepoints > 0xFFFF
    bmp = np.where(astral, 0, codepoints)
    irregular = multiple[bmp] | astral
    irregular_prefix = np.concatenate([[0], np.cumsum(irregular)])
    mapped = single[bmp].tobytes().decode("utf-32-le")
    for index, end, length in zip(pending, ends.tolist(), lengths.tolist(), strict=True):
        start = end - length
        if irregular_prefix[end] != irregular_prefix[start]:
            result[index] = nfkc(texts[index])
            continue
        text = mapped[start:end]
        result[index] = (
            text if unicodedata.is_normalized("NFKC", text) else unicodedata.normalize("NFKC", text)
        )
    return result


def nfkc(text: str) -> str:
    """NFKC normalization, fast on text that is mostly normalized already."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    mapped = text.translate(_nfkc_table())
    if unicodedata.is_normalized("NFKC", mapped):
        return mapped
    return unicodedata.normalize("NFKC", mapped)


@dataclass
class Normalizer:
    """Turns raw text into the canonical form the tokenizers see.

    Steps: NFKC, lower case (``casefold`` would also fold ß → ss; we keep ``lower`` so
    German and Turkish text keep their letters), optionally traditional → simplified Chinese
    with OpenCC (extra ``zh-convert``). Whitespace is left alone: every tokenizer treats any
    run of it as a separator, so collapsing it here would only cost time.
    """

    lowercase: bool = True
    to_simplified: bool = False
    _converter: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.to_simplified:
            try:
                import opencc
            except ImportError as exc:  # pragma: no cover - depends on the environment
                raise MissingDependencyError(
                    "opencc", "zh-convert", "Traditional → simplified conversion"
                ) from exc
            self._converter = opencc.OpenCC("t2s")

    def normalize(self, text: str) -> str:
        return self.normalize_many([text])[0]

    def normalize_many(self, texts: Sequence[str]) -> list[str]:
        folded = nfkc_many(texts)
        if self.lowercase:
            folded = [text.lower() for text in folded]
        if self._converter is not None:
            folded = [self._converter.convert(text) for text in folded]
        return folded
