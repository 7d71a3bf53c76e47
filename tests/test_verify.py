"""Candidate verification: shingle Jaccard is exact, identical texts always survive, the
index path filters matches by stored signatures, metadata parsing, explanations, and the
zh_short target (F1 >= 0.90 with verification)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import Fingerprinter, Match, Verifier, find_all_pairs
from neardup.errors import ConfigError, InputError
from neardup.similarity.minhash import combined_score, exact_jaccard
from neardup.similarity.verify import (
    VERIFY_MODES,
    Shingles,
    explain_pairs,
    metadata_of,
    metadata_sets,
    shared_features,
)

from .conftest import read_jsonl, shared_file

A = "这家酒店的服务非常好，房间干净，早餐丰盛，下次还会再来。"
A_COPY = "这家酒店的服务非常好,房间干净,早餐丰盛,下次还会再来!（来自手机客户端）"
B = "物流太慢了，等了一个星期才到，包装也破了，很失望。"
E = "The quick brown fox jumps over the lazy dog near the river bank."

texts_strategy = st.text(alphabet=st.sampled_from(list("酒店服务好房间干净abc xyz，。!1")), max_size=30)


@settings(deadline=None)
@given(st.lists(texts_strategy, min_size=2, max_size=6))
def test_shingle_jaccard_is_exact(texts: list[str]) -> None:
    shingles = Shingles.of(texts)
    sets = shingles.sets()
    i, j = np.triu_indices(len(texts), 1)
    got = shingles.jaccard(i, j)
    want = [exact_jaccard(sets[a], sets[b]) for a, b in zip(i.tolist(), j.tolist(), strict=True)]
    assert got.tolist() == pytest.approx(want)


def test_shingles_are_bigrams_for_chinese_and_5grams_otherwise() -> None:
    sizes = Shingles.of(["酒店服务", "abcdefg", "", "！！"]).sizes
    assert sizes.tolist() == [3, 3, 0, 0]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(texts_strategy, min_size=1, max_size=4),
    st.lists(st.lists(st.sampled_from(["tag1", "tag2", "x"]), max_size=3), min_size=8, max_size=8),
    st.lists(st.integers(0, 64), min_size=4, max_size=4),
    st.sampled_from(VERIFY_MODES),
)
def test_verification_never_removes_identical_texts(
    texts: list[str], tags: list[list[str]], distances: list[int], mode: str
) -> None:
    """Each text twice (different metadata, any distance, e.g. from different titles)."""
    doubled = texts + texts
    metadata = [tags[k] or None for k in range(len(doubled))]
    n = len(texts)
    i = np.arange(n)
    j = i + n
    result = Verifier(mode, threshold=1.0).verify_texts(
        np.array(distances[:n]), i, j, doubled, metadata, _fingerprinter()
    )
    assert result.kept.all()


def test_modes_reject_unrelated_and_keep_edited_copies() -> None:
    texts = [A, A_COPY, B]
    i, j, distances = np.array([0, 0]), np.array([1, 2]), np.array([9, 9])
    for mode in ("jaccard", "minhash"):
        assert Verifier(mode).verify_texts(distances, i, j, texts).kept.tolist() == [True, False]
    assert Verifier("none").verify_texts(distances, i, j, texts).kept.tolist() == [True, True]


def test_combined_decision_follows_the_score() -> None:
    verifier = Verifier("combined", threshold=0.2)
    distances = np.array([3, 5, 5, 9])
    jaccard = np.array([0.0, 0.5, 0.4, 1.0])
    result = verifier.decide(distances, jaccard)
    assert result.similarity.tolist() == pytest.approx(combined_score(distances, jaccard, 0.9).tolist())
    assert result.kept.tolist() == [True, True, False, False]


def test_index_path_filters_matches_by_stored_signatures() -> None:
    verifier = Verifier("minhash")
    stored = verifier.signatures([A, A_COPY, B])
    query = verifier.signatures([A])[0]
    matches = [Match("a", 1, 0), Match("copy", 2, 8), Match("b", 3, 9)]
    assert [m.key for m in verifier.verify_matches(matches, query, stored)] == ["a", "copy"]
    assert verifier.verify_matches([], query, stored[:0]) == []
    combined = Verifier("combined")
    signatures = combined.signatures(["x", "y"], [["simhash", "dedup"], ["weather"]])
    kept = combined.verify_matches([Match(1, 0, 4), Match(2, 0, 4)], signatures[0], signatures)
    assert [m.key for m in kept] == [1]


def test_bad_settings() -> None:
    with pytest.raises(ConfigError):
        Verifier("cosine")
    with pytest.raises(ConfigError):
        Verifier("jaccard", threshold=2.0)
    with pytest.raises(ConfigError):
        Verifier("jaccard").signatures([A])
    with pytest.raises(InputError):
        Verifier("combined").signatures([A], None)
    with pytest.raises(InputError):
        metadata_sets([None], [A], None)


def test_metadata_of_reads_lists_strings_and_named_fields() -> None:
    assert metadata_of({"tags": ["a", " b ", None], "keywords": "c, d；e"}) == ["a", "b", "c", "d", "e"]
    assert metadata_of({"text": "x"}) is None
    assert metadata_of(None) is None
    assert metadata_of({"topics": ["t"], "tags": ["a"]}, ["topics"]) == ["t"]


def test_missing_metadata_falls_back_to_top_keywords() -> None:
    sets = metadata_sets([None, ["Ｔａｇ"]], [A, B], _fingerprinter())
    assert {"酒店", "早餐"} <= set(sets[0]) and sets[1] == ["tag"]


def test_explanations() -> None:
    fingerprinter = _fingerprinter()
    texts = [A, A_COPY, B]
    (explanation,) = explain_pairs(Verifier(), fingerprinter, texts, None, [0], [1], [7])
    assert explanation.distance == 7 and 0.5 < explanation.jaccard < 1.0
    assert explanation.score == pytest.approx(0.9 / 8 + 0.1 * explanation.metadata_jaccard)
    assert {"酒店", "早餐"} & set(explanation.shared)
    assert set(explanation.as_dict()) == {"jaccard", "metadata_jaccard", "score", "shared"}
    assert shared_features(fingerprinter, texts, [0, 0], [1, 1], top=2) == [explanation.shared[:2]] * 2
    assert explain_pairs(Verifier(), fingerprinter, texts, None, [], [], []) == []


def test_zh_short_reaches_f1_090_with_verification() -> None:
    """The issue's target: search at k = 16, confirm with shingle Jaccard (benchmarks/verify_quality.py)."""
    records = read_jsonl(shared_file("dev/zh_short.jsonl"))
    texts = [record["text"] for record in records]
    pairs = find_all_pairs(_fingerprinter().fingerprint_many(texts), 16)
    kept = Verifier("jaccard").verify_texts(pairs.distance, pairs.i, pairs.j, texts).kept
    found = set(zip(pairs.i[kept].tolist(), pairs.j[kept].tolist(), strict=True))
    groups: dict[str, list[int]] = {}
    for position, record in enumerate(records):
        if record["level"] in ("original", "light", "medium"):
            groups.setdefault(record["cluster"], []).append(position)
    gold = {(a, b) for members in groups.values() for a in members for b in members if a < b}
    heavy = {p for p, record in enumerate(records) if record["level"] == "heavy"}
    found = {(a, b) for a, b in found if a not in heavy and b not in heavy}
    precision = len(found & gold) / len(found)
    recall = len(found & gold) / len(gold)
    assert 2 * precision * recall / (precision + recall) >= 0.90


_CACHE: list[Fingerprinter] = []


def _fingerprinter() -> Fingerprinter:
    if not _CACHE:
        _CACHE.append(Fingerprinter())
    return _CACHE[0]
