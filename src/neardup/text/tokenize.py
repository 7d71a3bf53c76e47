"""Tokenizers: Chinese words (rjieba, optionally with part-of-speech tags), Latin words,
character n-grams, and the automatic per-document choice between them.

Tokenizers see normalized text (see :mod:`neardup.text.normalize`). For speed they return a
:class:`TokenBatch`: the code points of the batch in one numpy array and each token as a
``(start, end)`` span of it, with the document it belongs to. Nothing is created per token
except by jieba itself; Latin words and n-grams are found with array operations. Token lists
(``TokenBatch.token_lists``) are derived from it for callers who want strings.

Why rjieba: it is the Rust port of jieba (same dictionary and tags) and segments an order of
magnitude faster (docs/fingerprints.md). Its version is pinned in ``pyproject.toml`` and recorded
in :data:`SEGMENTER_VERSION`, because a different segmenter gives different tokens and so
different fingerprints.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from importlib import metadata
from itertools import chain, pairwise
from operator import itemgetter
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, InputError
from .normalize import any_of, texts_holding

LANGUAGES: tuple[str, ...] = ("auto", "zh", "en")

try:
    SEGMENTER_VERSION = f"rjieba-{metadata.version('rjieba')}"
except metadata.PackageNotFoundError:  # pragma: no cover - rjieba is a core dependency
    SEGMENTER_VERSION = "rjieba-unknown"

# CJK unified ideographs and their extensions: a document with any of these is cut by jieba.
_HAN_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F))
_HAN_CLASS = "".join(f"{chr(low)}-{chr(high)}" for low, high in _HAN_RANGES)
_HAN = re.compile(f"[{_HAN_CLASS}]")

# Tag given to user-dictionary words that carry none: they are almost always domain terms.
USER_WORD_TAG = "nz"
LATIN_TAG = "eng"
NGRAM_TAG = "ngram"

Int64Array = npt.NDArray[np.int64]
_SEPARATOR = "\0"
#: Whitespace that makes :func:`_close_han_gaps` look at a text.
_GAPS = " \n\t\r"
#: Joins the texts of a batch for one jieba call (see ChineseTokenizer.tokenize_batch).
_DOCUMENT_BREAK = "\n"
#: Spaces after the last text of a Latin batch: 16 code points, two 64-bit words of bytes.
TAIL_PADDING = 16
CodePoints = npt.NDArray[np.uint32] | npt.NDArray[np.uint8]


@dataclass(frozen=True)
class TokenBatch:
    """The tokens of a batch of documents as spans of one code-point array.

    Token i is ``codepoints[starts[i]:ends[i]]`` and belongs to document ``documents[i]``
    (non-decreasing). ``tags[i]`` indexes ``tag_names`` when the tokenizer tagged parts of
    speech, else ``tags`` is None.
    """

    codepoints: CodePoints
    starts: Int64Array
    ends: Int64Array
    documents: Int64Array
    count: int
    tags: npt.NDArray[np.int32] | None = None
    tag_names: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.starts)

    def token(self, index: int) -> str:
        return decode(self.codepoints[self.starts[index] : self.ends[index]])

    def tag(self, index: int) -> str:
        return "" if self.tags is None else self.tag_names[int(self.tags[index])]

    def token_lists(self) -> list[list[str]]:
        """The tokens of each document as strings (slow path, for inspection and IDF fitting)."""
        result: list[list[str]] = [[] for _ in range(self.count)]
        for index, document in enumerate(self.documents.tolist()):
            result[document].append(self.token(index))
        return result

    def word_token_lists(self) -> list[list[str]]:
        """Like :meth:`token_lists` without tokens that lack a letter or digit (spaces and
        punctuation, which jieba emits and weighting always drops): what IDF is fitted on."""
        word = word_character_mask(self.codepoints)
        prefix = np.concatenate([[0], np.cumsum(word)])
        kept = (prefix[self.ends] - prefix[self.starts]) > 0
        result: list[list[str]] = [[] for _ in range(self.count)]
        for index in np.flatnonzero(kept).tolist():
            result[int(self.documents[index])].append(self.token(index))
        return result

    def tagged_lists(self) -> list[list[tuple[str, str]]]:
        result: list[list[tuple[str, str]]] = [[] for _ in range(self.count)]
        for index, document in enumerate(self.documents.tolist()):
            result[document].append((self.token(index), self.tag(index)))
        return result


def merge_batches(parts: Sequence[tuple[TokenBatch, Sequence[int]]], count: int) -> TokenBatch:
    """Combine batches tokenized separately; ``positions`` maps each part's documents to the
    merged batch (the result is ordered by document)."""
    parts = [(batch, positions) for batch, positions in parts if batch.count]
    if len(parts) == 1 and list(parts[0][1]) == list(range(count)):
        return parts[0][0]
    tag_names: list[str] = []
    pieces_codepoints, starts, ends, documents, tags = [], [], [], [], []
    offset = 0
    for batch, positions in parts:
        mapping = np.asarray(positions, dtype=np.int64)
        pieces_codepoints.append(batch.codepoints)
        starts.append(batch.starts + offset)
        ends.append(batch.ends + offset)
        documents.append(mapping[batch.documents])
        offset += len(batch.codepoints)
        if batch.tags is not None:
            remap = np.array([_index_of(tag_names, name) for name in batch.tag_names], dtype=np.int32)
            tags.append(remap[batch.tags] if len(batch.tags) else batch.tags)
    all_documents = np.concatenate(documents) if documents else np.zeros(0, dtype=np.int64)
    order = np.argsort(all_documents, kind="stable")
    return TokenBatch(
        codepoints=np.concatenate([piece.astype(np.uint32, copy=False) for piece in pieces_codepoints])
        if pieces_codepoints
        else np.zeros(0, dtype=np.uint32),
        starts=np.concatenate(starts)[order] if starts else all_documents,
        ends=np.concatenate(ends)[order] if ends else all_documents,
        documents=all_documents[order],
        count=count,
        tags=np.concatenate(tags)[order] if tags else None,
        tag_names=tuple(tag_names),
    )


def _index_of(names: list[str], name: str) -> int:
    if name not in names:
        names.append(name)
    return names.index(name)


def _codepoints(text: str) -> CodePoints:
    """The code points of a text: one byte each for ASCII text (a quarter of the memory
    traffic for English), four otherwise."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4")


def decode(codepoints: CodePoints) -> str:
    """Inverse of :func:`_codepoints`."""
    if codepoints.dtype == np.uint8:
        return codepoints.tobytes().decode("ascii")
    return codepoints.astype("<u4", copy=False).tobytes().decode("utf-32-le")


@lru_cache(maxsize=1)
def _bmp_word_table() -> npt.NDArray[np.bool_]:
    """Word characters of the Basic Multilingual Plane: letters and digits (``str.isalnum``,
    which is what the regex ``[^\\W_]`` means), as a lookup table."""
    return np.array([chr(code).isalnum() for code in range(0x10000)], dtype=bool)


@lru_cache(maxsize=1)
def _byte_word_table() -> bytes:
    """``bytes.translate`` table of :func:`word_character_mask` for one-byte code points."""
    return bytes(chr(code).isalnum() for code in range(1 << 8))


def word_character_mask(codepoints: CodePoints) -> npt.NDArray[np.bool_]:
    if codepoints.dtype == np.uint8:  # one C loop, no conversion of every index to intp
        return np.frombuffer(codepoints.tobytes().translate(_byte_word_table()), dtype=np.bool_)
    table = _bmp_word_table()
    if not len(codepoints) or int(codepoints.max()) <= 0xFFFF:
        return table[codepoints]
    mask = table[np.minimum(codepoints, 0xFFFF)]
    astral = codepoints > 0xFFFF
    for code in np.unique(codepoints[astral]).tolist():
        mask[codepoints == code] = chr(code).isalnum()
    return mask


def han_character_mask(codepoints: CodePoints) -> npt.NDArray[np.bool_]:
    """Chinese characters (the ranges of :data:`_HAN`)."""
    return _in_ranges(codepoints, _HAN_RANGES)


def _in_ranges(codepoints: CodePoints, ranges: tuple[tuple[int, int], ...]) -> npt.NDArray[np.bool_]:
    mask = np.zeros(len(codepoints), dtype=bool)
    for low, high in ranges:
        mask |= (codepoints >= low) & (codepoints <= high)
    return mask


def word_letters(texts: Sequence[str]) -> tuple[CodePoints, npt.NDArray[np.int32]]:
    """The letters and digits of the texts, concatenated (what the n-gram shingles are cut
    from), and the number of the text each belongs to (int32: batches hold < 2^31 texts)."""
    codepoints, offsets = _joined(texts)
    lengths = np.diff(np.append(offsets, len(codepoints)))
    owner = np.repeat(np.arange(len(texts), dtype=np.int32), lengths)
    keep = word_character_mask(codepoints)
    return codepoints[keep], owner[keep]


class Tokenizer(Protocol):
    """Splits normalized documents into tokens."""

    def tokenize_batch(self, texts: Sequence[str], tagged: bool = False) -> TokenBatch: ...


def contains_han(text: str) -> bool:
    """True when the text holds at least one Chinese character."""
    return _HAN.search(text) is not None


def detect_language(text: str) -> Literal["zh", "en"]:
    """``zh`` for text with Chinese characters (jieba also keeps its Latin words whole, so
    mixed text is served well), ``en`` for everything else."""
    return "zh" if contains_han(text) else "en"


def read_user_dictionary(path: str | Path) -> list[tuple[str, int | None, str | None]]:
    """Parse a jieba user dictionary: one ``word [freq] [tag]`` per line, ``#`` comments.

    rjieba has no file loader (only ``add_word``), so we read the file here.
    """
    entries: list[tuple[str, int | None, str | None]] = []
    location = str(path)
    try:
        lines = Path(path).read_text(encoding="utf-8-sig").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read user dictionary {location}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"user dictionary {location} is not UTF-8; re-save it as UTF-8") from exc
    for number, line in enumerate(lines, start=1):
        parts = line.split("#", 1)[0].split()
        if not parts:
            continue
        word, freq, tag = parts[0], None, None
        rest = parts[1:]
        if rest and rest[0].isdigit():
            freq = int(rest.pop(0))
        if rest:
            tag = rest.pop(0)
        if rest:
            raise InputError("expected 'word [freq] [tag]'; remove the extra columns", f"{location}:{number}")
        entries.append((word, freq, tag))
    return entries


def read_word_list(path: str | Path) -> frozenset[str]:
    """One word per line (stopwords, signal words); blank lines and ``#`` comments ignored."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"cannot read word list {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"word list {path} is not UTF-8; re-save it as UTF-8") from exc
    words = (line.split("#", 1)[0].strip().lower() for line in text.splitlines())
    return frozenset(word for word in words if word)


@dataclass
class ChineseTokenizer:
    """jieba segmentation through rjieba; ``hmm`` enables new-word discovery (off by default:
    unknown words then fall apart into characters, which is stable and fast)."""

    hmm: bool = False
    user_dictionary: str | Path | None = None
    _jieba: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        import rjieba

        if self.user_dictionary is None:
            self._jieba = rjieba  # the module-level default instance; never modified by us
            return
        self._jieba = rjieba.Jieba()
        for word, freq, tag in read_user_dictionary(self.user_dictionary):
            self._jieba.add_word(word.lower(), freq, tag or USER_WORD_TAG)

    def tokenize_batch(self, texts: Sequence[str], tagged: bool = False) -> TokenBatch:
        """One jieba call for the whole batch: the texts joined by a line break, which jieba
        always cuts off as a token of its own and never segments across (no text holds one
        once :func:`_close_han_gaps` has run), so the tokens are those of each text alone,
        without jieba's cost per call. A batch that does not cut that way (which the count of
        line-break tokens would show) is cut text by text."""
        texts = _close_han_gaps_many(texts)
        cut, tag, hmm = self._jieba.cut, self._jieba.tag, self.hmm
        joined = _DOCUMENT_BREAK.join(texts)
        if tagged:
            pairs = tag(joined, hmm)  # rjieba's tag() defaults to hmm=True
            batch = _batch_from_cut(list(map(itemgetter(0), pairs)), len(texts))
            if batch is not None:
                ids: dict[str, int] = {}
                tag_ids = np.asarray([ids.setdefault(name, len(ids)) for _, name in pairs], dtype=np.int32)
                return replace(batch.tokens, tags=tag_ids[batch.kept], tag_names=tuple(ids))
            return self._tokenize_one_by_one(texts, tagged)
        batch = _batch_from_cut(cut(joined, hmm), len(texts))
        return batch.tokens if batch is not None else self._tokenize_one_by_one(texts, tagged)

    def _tokenize_one_by_one(self, texts: list[str], tagged: bool) -> TokenBatch:
        cut, tag, hmm = self._jieba.cut, self._jieba.tag, self.hmm
        if tagged:
            pairs = [tag(text, hmm) for text in texts]
            flat_pairs = list(chain.from_iterable(pairs))
            ids: dict[str, int] = {}
            tag_ids = [ids.setdefault(name, len(ids)) for _, name in flat_pairs]
            batch = _batch_from_tokens([token for token, _ in flat_pairs], list(map(len, pairs)), len(texts))
            return replace(batch, tags=np.asarray(tag_ids, dtype=np.int32), tag_names=tuple(ids))
        documents = [cut(text, hmm) for text in texts]
        return _batch_from_tokens(list(chain.from_iterable(documents)), list(map(len, documents)), len(texts))


@dataclass(frozen=True)
class _CutBatch:
    """The tokens of a batch cut as one text, line-break tokens dropped, and which of the
    cut's tokens they are."""

    tokens: TokenBatch
    kept: npt.NDArray[np.bool_]


def _batch_from_cut(tokens: list[str], count: int) -> _CutBatch | None:
    """The batch of texts cut as one, joined by line breaks; None unless exactly count − 1 of
    the tokens are line breaks."""
    whole = _batch_from_tokens(tokens, [len(tokens)], 1)
    starts, ends = whole.starts, whole.ends
    breaks = ends - starts == 1
    breaks[breaks] = whole.codepoints[starts[breaks]] == ord(_DOCUMENT_BREAK)
    if int(breaks.sum()) != count - 1:
        return None
    kept = ~breaks
    documents = np.cumsum(breaks)[kept]
    return _CutBatch(TokenBatch(whole.codepoints, starts[kept], ends[kept], documents, count), kept)


def _close_han_gaps_many(texts: Sequence[str]) -> list[str]:
    """:func:`_close_han_gaps` of every text, run only on the texts that hold whitespace."""
    result = list(texts)
    joined = "".join(texts)
    if not any(space in joined for space in _GAPS):
        return result
    gaps = [ord(space) for space in _GAPS]
    for index in texts_holding(texts, partial(any_of, values=gaps)).tolist():
        result[index] = _close_han_gaps(texts[index])
    return result


def _is_han(character: str) -> bool:
    code = ord(character)
    return any(low <= code <= high for low, high in _HAN_RANGES)


def _close_han_gaps(text: str) -> str:
    """Drop whitespace between two Chinese characters and collapse the rest to one space.

    Whitespace inside Chinese text is not a word boundary, but jieba would cut there ("北京
    大学" → 北京 / 大学), so copies that differ only in spacing or line breaks would get
    different words. Splitting on whitespace (fast, in C) and looking at the characters on
    each side of a gap costs a Python step per gap, not per character.
    """
    if not any(space in text for space in _GAPS):
        return text
    parts = text.split()
    if len(parts) < 2:
        return parts[0] if parts else ""
    pieces = [parts[0]]
    for before, after in pairwise(parts):
        pieces.append("" if _is_han(before[-1]) and _is_han(after[0]) else " ")
        pieces.append(after)
    return "".join(pieces)


def _batch_from_tokens(tokens: list[str], per_document: list[int], count: int) -> TokenBatch:
    """The batch of ``tokens`` (``per_document[i]`` of them for document i). They are joined
    with a NUL between each two, whose positions give the spans at array speed; the lengths
    come from ``len`` per token only when a token holds a NUL itself."""
    codepoints = _codepoints(_SEPARATOR.join(tokens))
    bounds = np.flatnonzero(codepoints == 0)
    if tokens and len(bounds) == len(tokens) - 1:
        starts = np.concatenate([[0], bounds + 1])
        ends = np.append(bounds, len(codepoints))
    else:
        lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
        starts = np.cumsum(lengths + 1) - lengths - 1
        ends = starts + lengths
    return TokenBatch(
        codepoints=codepoints,
        starts=starts,
        ends=ends,
        documents=np.repeat(np.arange(count, dtype=np.int64), per_document),
        count=count,
    )


def _joined(texts: Sequence[str]) -> tuple[CodePoints, Int64Array]:
    """Code points of the texts separated by one space, and each text's start offset."""
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return _codepoints(" ".join(texts) + " "), offsets


def _with_tags(batch: TokenBatch, tagged: bool, name: str) -> TokenBatch:
    """Tokenizers without a tagger give every token the same tag."""
    if not tagged:
        return batch
    return replace(batch, tags=np.zeros(len(batch), dtype=np.int32), tag_names=(name,))


@dataclass
class LatinTokenizer:
    """Words: maximal runs of letters and digits (``str.isalnum``), found with array
    operations over the whole batch. POS tags are not known, so every word is ``eng``."""

    def tokenize_batch(self, texts: Sequence[str], tagged: bool = False) -> TokenBatch:
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1
        offsets = np.cumsum(lengths) - lengths
        # The padding lets a reader of whole 64-bit words at any token start stay in bounds
        # (neardup.fingerprint.token_cache packs short tokens that way).
        codepoints = _codepoints(" ".join(texts) + " " * TAIL_PADDING)
        word = word_character_mask(codepoints)
        # Word runs begin and end where the mask changes; the joined text ends with a space,
        # so after a possible start at 0 the changes alternate start, end, start, end, ...
        changes = np.flatnonzero(word[1:] != word[:-1]) + 1
        if len(word) and word[0]:
            changes = np.concatenate([[0], changes])
        starts, ends = np.ascontiguousarray(changes[0::2]), np.ascontiguousarray(changes[1::2])
        # Text i holds the tokens from its first start at or after offsets[i] to the next text's.
        firsts = np.searchsorted(starts, offsets)
        per_text = np.diff(np.append(firsts, len(starts)))
        documents = np.repeat(np.arange(len(texts), dtype=np.int64), per_text)
        batch = TokenBatch(codepoints, starts, ends, documents, len(texts))
        return _with_tags(batch, tagged, LATIN_TAG)


@dataclass
class CharNgramTokenizer:
    """Overlapping character n-grams of the letters and digits of each text (spaces and
    punctuation dropped first), the robust choice for short texts. A text with fewer than
    ``n`` such characters yields them as one token."""

    n: int = 2

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ConfigError(f"ngram must be >= 1, got {self.n}")

    def tokenize_batch(self, texts: Sequence[str], tagged: bool = False) -> TokenBatch:
        codepoints, offsets = _joined(texts)
        keep = word_character_mask(codepoints)
        owner = np.searchsorted(offsets, np.arange(len(codepoints)), side="right") - 1
        letters = codepoints[keep]
        documents = owner[keep]
        n = self.n
        per_document = np.bincount(documents, minlength=len(texts))
        first = np.concatenate([[0], np.cumsum(per_document)[:-1]]).astype(np.int64)
        if len(letters) >= n:
            starts = np.arange(len(letters) - n + 1, dtype=np.int64)
            full = documents[starts] == documents[starts + n - 1]
            starts = starts[full]
        else:
            starts = np.zeros(0, dtype=np.int64)
        ends = starts + n
        short = np.flatnonzero((per_document > 0) & (per_document < n))
        if len(short):
            starts = np.concatenate([starts, first[short]])
            ends = np.concatenate([ends, first[short] + per_document[short]])
            order = np.argsort(starts, kind="stable")
            starts, ends = starts[order], ends[order]
        batch = TokenBatch(letters, starts, ends, documents[starts].astype(np.int64), len(texts))
        return _with_tags(batch, tagged, NGRAM_TAG)


@dataclass
class AutoTokenizer:
    """Chooses per document: jieba for text with Chinese characters (mixed zh+en included),
    Latin words otherwise. ``lang`` forces one of them for every document."""

    lang: str = "auto"
    chinese: ChineseTokenizer = field(default_factory=ChineseTokenizer)
    latin: LatinTokenizer = field(default_factory=LatinTokenizer)

    def __post_init__(self) -> None:
        if self.lang not in LANGUAGES:
            raise ConfigError(f"lang must be one of {', '.join(LANGUAGES)}; got {self.lang!r}")

    def tokenize_batch(self, texts: Sequence[str], tagged: bool = False) -> TokenBatch:
        if self.lang == "zh":
            return self.chinese.tokenize_batch(texts, tagged)
        if self.lang == "en":
            return self.latin.tokenize_batch(texts, tagged)
        han = np.zeros(len(texts), dtype=bool)
        if not "".join(texts).isascii():
            han[texts_holding(texts, partial(_in_ranges, ranges=_HAN_RANGES))] = True
        zh, en = np.flatnonzero(han).tolist(), np.flatnonzero(~han).tolist()
        if not zh:
            return self.latin.tokenize_batch(texts, tagged)
        if not en:
            return self.chinese.tokenize_batch(texts, tagged)
        parts = [
            (self.chinese.tokenize_batch([texts[i] for i in zh], tagged), zh),
            (self.latin.tokenize_batch([texts[i] for i in en], tagged), en),
        ]
        return merge_batches(parts, len(texts))
