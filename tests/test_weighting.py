"""Weighting schemes and the IDF model."""

from __future__ import annotations

import math

import pytest

from neardup import ConfigError, Fingerprinter, IdfModel
from neardup.fingerprint.idf import default_chinese_idf
from neardup.fingerprint.weighting import DEFAULT_POS_WEIGHT, SIGNAL_FACTOR, Weighting, pos_weight


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
    fingerprinter = Fingerprinter(weighting="composite")
    without = {f.token: f.weight for f in fingerprinter.features("经济发展很快 人口增长")}
    with_title = {f.token: f.weight for f in fingerprinter.features("经济发展很快 人口增长", title="经济")}
    assert with_title["经济"] == pytest.approx(5 * without["经济"])
    assert with_title["人口"] == pytest.approx(without["人口"])


def test_tf_counts_repeats() -> None:
    features = {f.token: f.weight for f in Fingerprinter(weighting="tf").features("apple apple pear")}
    assert features == {"apple": 2.0, "pear": 1.0}


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
        f.token: f.weight for f in Fingerprinter(weighting="tfidf", idf=str(path)).features("alpha beta")
    }
    assert features["alpha"] == pytest.approx(9 * features["beta"])
