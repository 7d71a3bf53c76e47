"""Text normalization: escapes and markup written as text, NFKC (which folds full-width
forms), case, whitespace, optional traditional → simplified Chinese.

Copies of the same text differ in width (People's Daily writes ``１９９８``), case and line
breaks, and crawled copies carry their transport with them: JSON or C escapes left as text
(``\\n``), HTML entities (``&nbsp;``) and tags (``<p>``). Left in, ``\\n`` becomes a word ``n``
(or a letter inside a Chinese n-gram) repeated on every line, which one copy has and the other
not. Normalizing first makes those copies produce the same features. The result is the input
of every tokenizer and of the shingles, so any change here changes fingerprints and sketches:
each behaviour is a version (:data:`NORMALIZER_VERSIONS`), indexes record the one they were
built with and keep using it (``FingerprintConfig.normalizer_version``).

Speed: ``unicodedata.normalize("NFKC", ...)`` is about as slow on Chinese news as segmentation
itself (docs/fingerprints.md). We first map every code point whose NFKC form differs through a
``str.translate`` table and only fall back to full NFKC when the result is still not
normalized (combining sequences). Both give the same string: NFKD works code point by code
point, so replacing a code point by its NFKC form does not change the string's NFKC form.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from html.entities import html5
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, MissingDependencyError

#: 1: NFKC and case only. 2: also escapes, entities and markup written as text (:func:`unescape`).
NORMALIZER_VERSIONS: tuple[int, ...] = (1, 2)
#: The version new indexes and batch runs use.
NORMALIZER_VERSION = 2
#: Joins the texts of a batch for the steps that run on the whole batch at once.
_SEPARATOR = "\0"

#: HTML elements whose tags are read as separators. A closed list, not any ``<word>``: plain
#: text writes ``<IBM>`` or ``<Tandem Computers Inc>`` (Reuters' company and ticker marks)
#: and those must stay words; the single letters a, b, i, p, q, s, u still collide with such
#: tickers (``<U>``), which then fall out as separators.
_ELEMENT_NAMES = (
    "a abbr address article aside audio b big blockquote body br button caption center cite code "
    "col colgroup dd del div dl dt em embed figcaption figure font footer form h1 h2 h3 h4 h5 h6 "
    "head header hr html i iframe img input ins kbd label li link main mark meta nav nobr noscript "
    "ol option p picture pre q s section select small source span strike strong style sub sup "
    "table tbody td textarea tfoot th thead time title tr tt u ul var video wbr"
)
MARKUP_ELEMENTS = frozenset(_ELEMENT_NAMES.split())
_ATTRIBUTE = r"""\s+[\w:.-]+\s*=\s*(?:"[^"<>]*"|'[^'<>]*'|[^\s"'<>]+)"""
_TAG_NAMES = "|".join(sorted(MARKUP_ELEMENTS, key=len, reverse=True))
#: One pattern per first character, each starting with that literal, so ``re`` finds
#: candidates by a fast literal search instead of trying every alternative at every position
#: (a single alternation with IGNORECASE normalized Reuters at a sixteenth of the speed).
_ESCAPES = {
    "\\": re.compile(
        r"\\+u(?P<high>d[89abAB][0-9a-fA-F]{2})\\+u(?P<low>d[c-fC-F][0-9a-fA-F]{2})"  # a surrogate pair
        r"|\\+u(?P<code>[0-9a-fA-F]{4})"  # \uXXXX
        r"|\\+[nrt]"  # \n \r \t, also escaped twice (\\n)
    ),
    "&": re.compile(r"&(?P<entity>#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});"),
    "<": re.compile(rf"<(?:!--.*?--|/?(?i:{_TAG_NAMES})(?:{_ATTRIBUTE})*\s*/?)>", re.DOTALL),
}


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
def _nfkc_arrays() -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.bool_], dict[int, str]]:
    """The BMP part of :func:`_nfkc_table` as arrays: code → the first code point of its NFKC
    form (itself where it has none of its own), a mask of the code points whose form is
    longer, and the rest of those forms."""
    first = np.arange(0x10000, dtype=np.uint32)
    longer = np.zeros(0x10000, dtype=bool)
    rest: dict[int, str] = {}
    for code, folded in _nfkc_table().items():
        first[code] = ord(folded[0])  # no BMP form is empty
        if len(folded) > 1:
            longer[code] = True
            rest[code] = folded[1:]
    return first, longer, rest


def nfkc_many(texts: Sequence[str]) -> list[str]:
    """:func:`nfkc` of many texts, as one string: the texts joined by NUL (which has no
    decomposition, composes with nothing and is no combining mark, so each text normalizes as
    it would alone), normalized by :func:`nfkc_joined`, split again. A text holding a NUL
    itself goes alone."""
    joined = _SEPARATOR.join(texts)
    if joined.count(_SEPARATOR) != len(texts) - 1:
        return [nfkc(text) for text in texts]
    return nfkc_joined(joined).split(_SEPARATOR) if texts else []


def nfkc_joined(joined: str) -> str:
    """:func:`nfkc` of texts joined by NUL, mapping every BMP code point of the batch to its
    NFKC form with one array lookup (twice as fast as ``str.translate`` on Chinese news) and
    inserting the rest of the forms longer than one code point (``…`` → ``...``, ``℃`` →
    ``°c``) in one ``np.insert``; only when the result is still not normalized (combining
    sequences, astral compatibility characters) are its texts normalized one by one."""
    if joined.isascii() or unicodedata.is_normalized("NFKC", joined):
        return joined
    first, longer, rest = _nfkc_arrays()
    codepoints = np.frombuffer(joined.encode("utf-32-le"), dtype="<u4")
    astral = codepoints > 0xFFFF
    if astral.any():  # beyond the tables: kept as they are, for the check below
        bmp = np.minimum(codepoints, 0xFFFF)
        mapped_codes = np.where(astral, codepoints, first[bmp])
        growing = np.flatnonzero(longer[bmp] & ~astral)
    else:
        bmp, mapped_codes = codepoints, first[codepoints]
        growing = np.flatnonzero(longer[codepoints])
    if growing.size:
        forms = [rest[code] for code in bmp[growing].tolist()]
        sizes = np.fromiter(map(len, forms), dtype=np.int64, count=len(forms))
        at = np.repeat(growing + 1, sizes)  # after the code point whose form goes on
        mapped_codes = np.insert(mapped_codes, at, np.frombuffer("".join(forms).encode("utf-32-le"), "<u4"))
    mapped = mapped_codes.astype("<u4", copy=False).tobytes().decode("utf-32-le")
    if unicodedata.is_normalized("NFKC", mapped):
        return mapped
    return _SEPARATOR.join(
        text if unicodedata.is_normalized("NFKC", text) else unicodedata.normalize("NFKC", text)
        for text in mapped.split(_SEPARATOR)
    )


def nfkc(text: str) -> str:
    """NFKC normalization, fast on text that is mostly normalized already."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    mapped = text.translate(_nfkc_table())
    if unicodedata.is_normalized("NFKC", mapped):
        return mapped
    return unicodedata.normalize("NFKC", mapped)


def _unescaped(match: re.Match[str]) -> str:
    """The character an escape or entity stands for, or a space (a separator) for line
    breaks, tabs, tags, unknown entities and code points that are not characters."""
    groups = match.groupdict()
    if groups.get("high") is not None:
        high, low = int(groups["high"], 16), int(groups["low"], 16)
        return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    if groups.get("code") is not None:
        code = int(groups["code"], 16)
        return " " if 0xD800 <= code <= 0xDFFF else chr(code)
    entity = groups.get("entity")
    if entity is None:
        return " "
    if entity[0] == "#":
        code = int(entity[2:], 16) if entity[1] in "xX" else int(entity[1:])
        return chr(code) if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else " "
    return html5.get(entity + ";", html5.get(entity.lower() + ";", match.group()))


def unescape(text: str) -> str:
    """``text`` with escapes, entities and markup written as text read as what they stand
    for: ``\\n``, ``\\t``, ``\\r`` (also escaped twice) and tags of :data:`MARKUP_ELEMENTS`
    become spaces, ``\\uXXXX`` and entities become their character (``&nbsp;`` a no-break
    space, which NFKC folds to a space; ``&amp;`` an ``&``, punctuation). Decoding rather than
    blanking ``\\u4e2d`` and ``&#20013;`` keeps the words a writer escaped."""
    for start, pattern in _ESCAPES.items():
        if start in text:
            text = pattern.sub(_unescaped, text)
    return text


def unescape_many(texts: list[str]) -> list[str]:
    """:func:`unescape` of many texts; a batch that holds none of the three characters an
    escape, entity or tag starts with is returned as it is, after one scan of it."""
    joined = "".join(texts)
    if not any(start in joined for start in _ESCAPES):
        return texts
    return [unescape(text) for text in texts]


def any_of(codepoints: npt.NDArray[Any], values: list[int]) -> npt.NDArray[np.bool_]:
    """Where ``codepoints`` equals one of a few ``values`` (one comparison each: faster than
    ``np.isin`` for a handful)."""
    mask: npt.NDArray[np.bool_] = codepoints == values[0]
    for value in values[1:]:
        mask |= codepoints == value
    return mask


def texts_holding(
    texts: Sequence[str], select: Callable[[npt.NDArray[Any]], npt.NDArray[np.bool_]]
) -> npt.NDArray[np.intp]:
    """The numbers (ascending) of the texts in which ``select`` marks at least one code point
    (given as uint8 for an ASCII batch, else uint32), over the batch at once: no Python step
    per text."""
    joined = _SEPARATOR.join(texts)
    codepoints: npt.NDArray[Any] = (
        np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
        if joined.isascii()
        else np.frombuffer(joined.encode("utf-32-le"), dtype="<u4")
    )
    hits = np.flatnonzero(select(codepoints))
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1)
    return np.flatnonzero(np.diff(np.searchsorted(hits, ends), prepend=0))


def lower_many(texts: list[str]) -> list[str]:
    """``str.lower`` of many texts in one call: NUL is neither cased nor case-ignorable, so
    the one context rule (a final sigma) sees each text as it would alone."""
    joined = _SEPARATOR.join(texts)
    if joined.count(_SEPARATOR) != len(texts) - 1:
        return [text.lower() for text in texts]
    return joined.lower().split(_SEPARATOR) if texts else []


def _fold(texts: list[str], lowercase: bool) -> list[str]:
    """NFKC, then lower case: text by text in C for ASCII batches (NFKC leaves ASCII as it
    is), else on the batch joined by NUL at once."""
    if all(map(str.isascii, texts)):
        return list(map(str.lower, texts)) if lowercase else texts
    joined = _SEPARATOR.join(texts)
    if joined.count(_SEPARATOR) == len(texts) - 1:
        joined = nfkc_joined(joined)
        return (joined.lower() if lowercase else joined).split(_SEPARATOR)
    folded = nfkc_many(texts)
    return lower_many(folded) if lowercase else folded


@dataclass
class Normalizer:
    """Turns raw text into the canonical form the tokenizers see.

    Steps: escapes and markup (:func:`unescape`, from ``version`` 2), NFKC, lower case
    (``casefold`` would also fold ß → ss; we keep ``lower`` so German and Turkish text keep
    their letters), optionally traditional → simplified Chinese with OpenCC (extra
    ``zh-convert``). Whitespace is left alone: every tokenizer treats any run of it as a
    separator, so collapsing it here would only cost time. ``version`` selects an earlier
    behaviour for indexes built with it (:data:`NORMALIZER_VERSIONS`).
    """

    lowercase: bool = True
    to_simplified: bool = False
    version: int = NORMALIZER_VERSION
    _converter: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.version not in NORMALIZER_VERSIONS or isinstance(self.version, bool):
            raise ConfigError(
                f"normalizer_version must be one of {', '.join(map(str, NORMALIZER_VERSIONS))}; "
                f"got {self.version!r}"
            )
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
        texts = list(texts)
        if self.version >= 2:
            texts = unescape_many(texts)
        folded = _fold(texts, self.lowercase)
        if self._converter is not None:
            folded = [self._converter.convert(text) for text in folded]
        return folded
