"""Weighting schemes and the IDF model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from neardup import ConfigError, Fingerprinter, IdfModel, simhash
from neardup.fingerprint.config import FingerprintConfig
from neardup.fingerprint.idf import default_chinese_idf
from neardup.fingerprint.weighting import (
    BM25_K1,
    DEFAULT_POS_WEIGHT,
    SIGNAL_FACTOR,
    TERM_FREQUENCIES,
    Weighting,
    cap_shares,
    pos_weight,
    saturate,
    saturated_counts,
)


def _weighting(name: str, idf: IdfModel | None = None) -> Weighting:
    return Weighting(name=name, idf=idf, stopwords=frozenset({"的", "the"}), signal_words=frozenset({"总之"}))


def test_stopwords_and_punctuation_weigh_nothing() -> None:
    for name in ("tf", "tfidf", "tfidf-len", "composite"):
        weighting = _weighting(name)
        assert weighting.static_weight("的", "uj") == 0.0
        assert weighting.static_weight("the", "eng") == 0.0
        assert weighting.static_weight("，", "x") == 0.0
        assert weighting.static_weight(" ", "x") == 0.0


def test_tfidf_len_follows_seed_000_equation_6() -> None:
    idf = IdfModel({"经济": 4.0, "indicator": 2.0}, default=1.0)
    weighting = _weighting("tfidf-len", idf)
    chinese = 4.0 * (1 + math.exp(-((2 - 4.51) ** 2) / (2 * 2.207**2)))
    latin = 2.0 * (1 + math.exp(-((9 - 6.1) ** 2) / (2 * 2.4**2)))
    assert weighting.static_weight("经济") == pytest.approx(chinese)
    assert weighting.static_weight("indicator") == pytest.approx(latin)
    assert weighting.static_weight("unknown") == pytest.approx(
        1.0 * (1 + math.exp(-((7 - 6.1) ** 2) / 11.52))
    )


def test_composite_uses_pos_and_signal_words() -> None:
    weighting = _weighting("composite", IdfModel({}, default=1.0))
    assert weighting.static_weight("经济", "n") == pytest.approx(1.0)
    assert weighting.static_weight("发展", "v") == pytest.approx(pos_weight("v"))
    assert weighting.static_weight("总之", "c") == pytest.approx(DEFAULT_POS_WEIGHT * SIGNAL_FACTOR)
    assert pos_weight("nr") == 1.0 and pos_weight("zzz") == DEFAULT_POS_WEIGHT


def test_composite_title_words_weigh_five_times_more() -> None:
    fingerprinter = Fingerprinter(weighting="composite", max_share=1.0)  # before the share cap
    without = {f.token: f.weight for f in fingerprinter.features("经济发展很快 人口增长")}
    with_title = {f.token: f.weight for f in fingerprinter.features("经济发展很快 人口增长", title="经济")}
    assert with_title["经济"] == pytest.approx(5 * without["经济"])
    assert with_title["人口"] == pytest.approx(without["人口"])


def test_tf_counts_repeats_and_saturates_them() -> None:
    raw = Fingerprinter(weighting="tf", term_frequency="raw").features("apple apple pear")
    assert {f.token: f.weight for f in raw} == {"apple": 2.0, "pear": 1.0}
    default = Fingerprinter(weighting="tf").features("apple apple pear")
    assert {f.token: f.weight for f in default} == pytest.approx({"apple": 1 + math.log(2), "pear": 1.0})
    bm25 = Fingerprinter(weighting="tf", term_frequency="bm25").features("apple apple pear")
    assert {f.token: f.weight for f in bm25} == pytest.approx({"apple": 2 * 2.2 / 3.2, "pear": 1.0})


def test_saturated_counts_keep_one_and_grow_slower_than_counts() -> None:
    counts = np.array([1, 2, 10, 740])
    assert saturated_counts(counts, "raw").tolist() == [1, 2, 10, 740]
    assert saturated_counts(counts, "log") == pytest.approx(
        [1, 1 + math.log(2), 1 + math.log(10), 1 + math.log(740)]
    )
    assert saturated_counts(counts, "bm25")[0] == 1.0 and saturated_counts(counts, "bm25")[-1] < BM25_K1 + 1
    with pytest.raises(ConfigError, match="term_frequency"):
        saturated_counts(counts, "sqrt")


def test_no_feature_holds_more_than_its_share() -> None:
    # Document 0: one heavy feature among ten light ones; document 1: three features, fewer
    # than 1/max_share, which end equal (a short line is not the hash of its heaviest word).
    weights = np.array([740.0] + [10.0] * 10 + [4.0, 5.0, 6.0])
    documents = np.array([0] * 11 + [1] * 3)
    capped = cap_shares(weights, documents, 2, 0.1)
    assert capped[0] == pytest.approx(0.1 * 840) and capped[1:11].tolist() == [10.0] * 10
    assert capped[11:] == pytest.approx([1.5, 1.5, 1.5]) and capped[11] < capped[12] < capped[13]
    assert cap_shares(weights, documents, 2, 1.0) is weights


def test_short_lines_sharing_their_heaviest_word_no_longer_collide() -> None:
    """People's Daily headings: uncapped, each fingerprint is the hash of 布老虎."""
    lines = ["布老虎（一）", "这只想心事的布老虎"]
    capped, uncapped = Fingerprinter(), Fingerprinter(max_share=1.0)
    assert bin(int(uncapped.fingerprint(lines[0])) ^ uncapped.fingerprint(lines[1])).count("1") <= 3
    assert bin(int(capped.fingerprint(lines[0])) ^ capped.fingerprint(lines[1])).count("1") > 3


def test_one_token_on_every_line_no_longer_sets_every_bit() -> None:
    """The issue's crawled news: a token repeated on every line (``n`` of ``\\n`` left in)
    outweighed the rest, so unrelated texts got the same fingerprint. Saturated, it does not."""
    first = " ".join(f"line{i} alpha{i} beta{i} zz" for i in range(60))
    second = " ".join(f"word{i} gamma{i} delta{i} zz" for i in range(60))
    raw = Fingerprinter(weighting="tf", term_frequency="raw")
    assert bin(raw.fingerprint(first) ^ raw.fingerprint(second)).count("1") <= 3
    saturated = Fingerprinter(weighting="tf")
    assert bin(saturated.fingerprint(first) ^ saturated.fingerprint(second)).count("1") > 16


def _seed_fingerprint(hashes: list[int], counts: list[int], bits: int, form: str) -> int:
    """A document whose feature i occurs ``counts[i]`` times, weighted as the fingerprinter
    weights ``tf`` (static weight 1, its share cap) and folded by the reference Simhash."""
    kept = [i for i, count in enumerate(counts) if count]
    occurrences = np.repeat(np.array(kept, dtype=np.int64), [counts[i] for i in kept])
    share = _weighting("tf").share_cap(FingerprintConfig().max_share)
    columns, _, weights = saturate(
        occurrences, np.zeros(len(occurrences), dtype=np.int64), np.ones(len(occurrences)), 1, form, share
    )
    return simhash(zip([hashes[c] for c in columns.tolist()], weights.tolist(), strict=True), bits)


@pytest.mark.parametrize("form", TERM_FREQUENCIES)
def test_the_seeds_examples_keep_their_fingerprints_under_every_saturation(form: str) -> None:
    # Seed 001: d = (1, 2, 0, 3, 0) occurrences of w1..w5, hashes 101 011 100 001 110 → 001.
    assert _seed_fingerprint([0b101, 0b011, 0b100, 0b001, 0b110], [1, 2, 0, 3, 0], 3, form) == 0b001
    # Seed 004: weights 4 and 5 read as counts ("这个词出现的次数"), hashes 100101, 101011 → 101011.
    assert _seed_fingerprint([0b100101, 0b101011], [4, 5], 6, form) == 0b101011


def test_tf_the_seeds_weighting_is_not_capped() -> None:
    """A cap would tie seed 004's two features and change its fingerprint (101011 → 100001)."""
    assert _weighting("tf").share_cap(0.1) == 1.0 and _weighting("tfidf-len").share_cap(0.1) == 0.1
    occurrences = np.array([0] * 4 + [1] * 5)
    columns, _, weights = saturate(occurrences, np.zeros(9, dtype=np.int64), np.ones(9), 1, "log", 0.1)
    capped = simhash(
        zip([[0b100101, 0b101011][c] for c in columns.tolist()], weights.tolist(), strict=True), 6
    )
    assert capped == 0b100001


def test_unknown_weighting_and_fields_on_text_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown weighting"):
        _weighting("bm25")
    with pytest.raises(ConfigError, match="database rows"):
        Fingerprinter(weighting="fields").fingerprint("text")


def test_fields_hook_fingerprints_weighted_features() -> None:
    fingerprinter = Fingerprinter()
    rows = [[("name=张三", 2.0), ("city=广州", 2.0)], [("name=张三", 2.0), ("city=广州", 2.0)], []]
    fingerprints = fingerprinter.fingerprint_features_many(rows).tolist()
    assert fingerprints[0] == fingerprints[1] != 0 and fingerprints[2] == 0


def test_idf_fit_save_load_round_trip(tmp_path) -> None:
    model = IdfModel.fit([["a", "b"], ["a"], ["a", "c", "c"]])
    assert model["a"] == pytest.approx(math.log(4 / 4) + 1)
    assert model["b"] == pytest.approx(math.log(4 / 2) + 1)
    assert model["never-seen"] == pytest.approx(math.log(4 / 1) + 1)
    path = tmp_path / "idf.json"
    model.save(path)
    assert IdfModel.load(path) == model


def test_idf_loads_jieba_word_lines_and_rejects_garbage(tmp_path) -> None:
    path = tmp_path / "idf.txt"
    path.write_text("经济 5.5\n发展 3.5\n人口 7.0\n", encoding="utf-8")
    model = IdfModel.load(path)
    assert model["经济"] == 5.5 and model["其他"] == 5.5  # median default
    path.write_text("only-one-column\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"idf.txt:1"):
        IdfModel.load(path)
    with pytest.raises(ConfigError, match="empty corpus"):
        IdfModel.fit([])


def test_default_chinese_idf_is_jiebas_table() -> None:
    model = default_chinese_idf()
    assert len(model) > 200_000
    assert model["的"] < model["经济"] < model["劳动防护"]


def test_fitted_idf_file_is_used_by_the_fingerprinter(tmp_path) -> None:
    path = tmp_path / "idf.json"
    IdfModel({"alpha": 9.0, "beta": 1.0}, default=1.0).save(path)
    features = {
        f.token: f.weight
        for f in Fingerprinter(weighting="tfidf", idf=str(path), max_share=1.0).features("alpha beta")
    }
    assert features["alpha"] == pytest.approx(9 * features["beta"])
