"""Token keys and the vectorised key table, checked against plain Python dictionaries."""

from __future__ import annotations

import numpy as np
import pytest

import neardup.fingerprint.token_cache as token_cache
from neardup.fingerprint.token_cache import KeyTable, tagged_keys, token_keys
from neardup.text.tokenize import ChineseTokenizer, LatinTokenizer, merge_batches


def _keys_by_token(batch) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for index, key in enumerate(token_keys(batch).tolist()):
        found.setdefault(batch.token(index), set()).add(key)
    return found


def test_key_table_agrees_with_a_dict() -> None:
    rng = np.random.default_rng(3)
    keys = np.unique(rng.integers(0, 2**64, 50_000, dtype=np.uint64))
    rng.shuffle(keys)
    stored, absent = keys[:30_000], keys[30_000:]
    table = KeyTable()
    reference: dict[int, int] = {}
    for chunk in np.array_split(np.arange(len(stored)), 7):  # several inserts, forcing growth
        table.insert(stored[chunk], chunk.astype(np.int64))
        reference.update(zip(stored[chunk].tolist(), chunk.tolist(), strict=True))
    probe = np.concatenate([stored, absent, stored[:100]])
    expected = [reference.get(key, -1) for key in probe.tolist()]
    assert table.lookup(probe).tolist() == expected
    assert len(table) == len(reference)


def test_key_table_handles_keys_that_share_a_slot() -> None:
    keys = (np.arange(2_000, dtype=np.uint64) << np.uint64(40)) | np.uint64(5)  # same low bits
    table = KeyTable()
    table.insert(keys[:1_000], np.arange(1_000, dtype=np.int64))
    table.insert(keys[1_000:], np.arange(1_000, 2_000, dtype=np.int64))
    assert table.lookup(keys).tolist() == list(range(2_000))
    assert table.lookup(np.array([7], dtype=np.uint64)).tolist() == [-1]


def test_equal_tokens_get_equal_keys_and_distinct_tokens_distinct_keys() -> None:
    words = ["alpha", "beta", "alphabet", "a", "ab", "ba", "中文", "文中", "x" * 300]
    text = " ".join(words * 50)
    found = _keys_by_token(LatinTokenizer().tokenize_batch([text, text[7:]]))
    assert all(len(keys) == 1 for keys in found.values())
    assert len({next(iter(keys)) for keys in found.values()}) == len(found)


def test_keys_do_not_depend_on_the_window_a_token_falls_in(monkeypatch: pytest.MonkeyPatch) -> None:
    text = " ".join(["alpha", "beta", "gamma-ray", "x" * 60] * 40)  # every token <= the small WINDOW
    batch = LatinTokenizer().tokenize_batch([text])
    single_window = token_keys(batch)
    monkeypatch.setattr(token_cache, "WINDOW", 64)  # tokens now spread over many windows
    token_cache._powers.cache_clear()
    try:
        assert token_keys(batch).tolist() == single_window.tolist()
    finally:
        token_cache._powers.cache_clear()


def test_keys_are_the_same_for_one_and_four_byte_code_points() -> None:
    ascii_batch = LatinTokenizer().tokenize_batch(["hello world"])
    wide_batch = LatinTokenizer().tokenize_batch(["hello world é"])
    assert ascii_batch.codepoints.dtype == np.uint8 and wide_batch.codepoints.dtype == np.uint32
    assert token_keys(ascii_batch).tolist() == token_keys(wide_batch).tolist()[:2]


def test_tags_change_keys_and_merged_batches_keep_them() -> None:
    chinese = ChineseTokenizer().tokenize_batch(["经济发展"], tagged=True)
    latin = LatinTokenizer().tokenize_batch(["economic growth"], tagged=True)
    merged = merge_batches([(chinese, [1]), (latin, [0])], 2)
    words = token_keys(merged)
    assert (tagged_keys(words, merged) != words).all()
    assert merged.token_lists() == [["economic", "growth"], ["经济", "发展"]]
    assert [merged.tag(i) for i in range(len(merged))] == ["eng", "eng", "n", "vn"]


def test_a_full_cache_is_cleared_without_changing_fingerprints() -> None:
    from neardup import Fingerprinter

    texts = [f"document {i} about topic{i % 7} and word{i}x{i * 31 % 101}" for i in range(300)]
    reference = Fingerprinter().fingerprint_many(texts)
    tiny = Fingerprinter(cache_size=50)  # fewer columns than one batch has distinct tokens
    assert tiny.fingerprint_many(texts).tolist() == reference.tolist()
    for start in range(0, 300, 40):  # and across many clears
        assert (
            tiny.fingerprint_many(texts[start : start + 40]).tolist()
            == reference[start : start + 40].tolist()
        )
