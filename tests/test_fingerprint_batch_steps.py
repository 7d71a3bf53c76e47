"""The batch steps of the fingerprint pipeline against the text-by-text steps they replace
(issue 32, item 4): each must give the same result on real texts and on the texts that could
make a batch differ (a NUL in a text, a final sigma at a text's end, a combining mark at its
start, line breaks, escapes that decode to NUL)."""

from __future__ import annotations

import json
import unicodedata

import numpy as np
import pytest
import rjieba

from neardup.fingerprint.hashing import get_hash_function, hash_tokens
from neardup.fingerprint.token_cache import cache_keys
from neardup.fingerprint.weighting import group_pairs
from neardup.text.normalize import Normalizer, nfkc_many, unescape
from neardup.text.tokenize import ChineseTokenizer, LatinTokenizer, TokenBatch, _close_han_gaps
from tests.conftest import shared_file

HOSTILE = [
    "",
    "ΟΔΟΣ",
    "ΣΟΦΟΣ Σ",
    "\u0301leading combining mark",
    "trailing combining e\u0301",
    "nul\x00inside",
    "&#0; and \\u0000 decode to NUL",
    "line\r\nbreaks\rand\ttabs\n",
    "ｗｉｄｅ １２３ ℃ … ﬁ 𝐀𝐁 𠀀 中文 Å",
    "北京 大学\n读书 hello\u3000world",
    "<p>tags</p>&amp;&nbsp;\\n\\t",
]


def _real_texts() -> list[str]:
    zh = shared_file("raw/zh_news.txt").read_text(encoding="utf-8").splitlines()
    en = shared_file("raw/en_reuters.jsonl").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in zh[:400] if line.strip()] + [
        json.loads(line)["text"] for line in en[:100]
    ]


def _alone(text: str, version: int) -> str:
    """The normalizer's steps on one text, with unicodedata's NFKC."""
    if version >= 2:
        text = unescape(text)
    return unicodedata.normalize("NFKC", text).lower()


@pytest.mark.parametrize("version", [1, 2])
def test_batch_normalization_is_text_by_text_normalization(version: int) -> None:
    texts = _real_texts() + HOSTILE
    for batch in (texts, HOSTILE, [t for t in texts if t.isascii()], [t for t in texts if "\x00" not in t]):
        assert Normalizer(version=version).normalize_many(batch) == [_alone(t, version) for t in batch]
    assert nfkc_many(HOSTILE) == [unicodedata.normalize("NFKC", t) for t in HOSTILE]


@pytest.mark.parametrize("tagged", [False, True])
@pytest.mark.parametrize("hmm", [False, True])
def test_one_jieba_call_per_batch_cuts_as_one_call_per_text(tagged: bool, hmm: bool) -> None:
    texts = Normalizer().normalize_many([t for t in _real_texts() + HOSTILE if not t.isascii()][:300])
    texts += ["", "中文", ""]
    tokenizer = ChineseTokenizer(hmm=hmm)
    batch = tokenizer.tokenize_batch(texts, tagged=tagged)
    closed = [_close_han_gaps(text) for text in texts]
    if tagged:
        expected = [list(rjieba.tag(text, hmm)) for text in closed]
        assert batch.tagged_lists() == [[tuple(pair) for pair in pairs] for pairs in expected]
    else:
        assert batch.token_lists() == [rjieba.cut(text, hmm) for text in closed]


def test_a_token_has_one_cache_key_in_every_batch_and_distinct_tokens_distinct_keys() -> None:
    words = ["a", "abcdefg", "abcdefgh", "abcdefghi", "abcdefghijklmnop", "abcdefghijklmnopq", "écolière"]
    words += ["ÿ" * 17, "a\x00", "a", "中文", "x1", "1x", "ab" * 40]
    latin = LatinTokenizer().tokenize_batch([" ".join(w for w in words if w.isascii() and w.isalnum())])
    wide = ChineseTokenizer().tokenize_batch(["中" + "，".join(words)])
    keys: dict[str, int] = {}
    for batch in (latin, wide):
        for token, key in zip(batch.token_lists()[0], cache_keys(batch).tolist(), strict=True):
            assert keys.setdefault(token, key) == key, token
    assert len(set(keys.values())) == len(keys)


def test_packed_keys_of_real_tokens_do_not_collide() -> None:
    batch = LatinTokenizer().tokenize_batch(Normalizer().normalize_many(_real_texts()))
    tokens = [token for tokens in batch.token_lists() for token in tokens]
    keys = cache_keys(batch).tolist()
    by_key: dict[int, str] = {}
    for token, key in zip(tokens, keys, strict=True):
        assert by_key.setdefault(key, token) == token


def test_hash_tokens_maps_the_same_values_as_the_hash_functions() -> None:
    tokens = ["", "a", "中文", "écolière", "𝐀", "a\x00b"] + [str(number) for number in range(200)]
    for name in ("city64", "farm64", "xxh3_64", "java", "murmur3_64"):
        for bits in (32, 64, 128):
            function = get_hash_function(name, bits)
            values = hash_tokens(tokens, name, bits)
            if bits == 128:
                assert [int(low) | int(high) << 64 for low, high in values.tolist()] == list(
                    map(function, tokens)
                )
            else:
                assert values.tolist() == list(map(function, tokens))


@pytest.mark.parametrize("seed", range(5))
def test_grouped_pairs_are_numpys_unique_pairs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    count, width = int(rng.integers(1, 70_000)), int(rng.integers(1, 140_000))
    documents = np.sort(rng.integers(0, count, 50_000))
    columns = rng.integers(0, width, 50_000)
    first, counts = group_pairs(documents, columns)
    _, expected_first, expected_counts = np.unique(
        documents * width + columns, return_index=True, return_counts=True
    )
    # Grouped by column, documents ascending within a column; per document in column order.
    order = np.lexsort((documents[first], columns[first]))
    assert np.array_equal(order, np.arange(len(first)))
    by_document = np.lexsort((columns[first], documents[first]))
    assert np.array_equal(first[by_document], expected_first)
    assert np.array_equal(counts[by_document], expected_counts)


def test_a_batch_of_no_texts_and_of_empty_texts() -> None:
    assert Normalizer().normalize_many([]) == []
    empty = ChineseTokenizer().tokenize_batch([])
    assert isinstance(empty, TokenBatch) and len(empty) == 0
    assert ChineseTokenizer().tokenize_batch(["", ""]).token_lists() == [[], []]
