"""FingerprintConfig validation and its sources."""

from __future__ import annotations

import pytest

from neardup import ConfigError, FingerprintConfig


def test_defaults_and_round_trip() -> None:
    config = FingerprintConfig()
    assert (config.bits, config.weighting, config.hash, config.lang) == (64, "tfidf-len", "city64", "auto")
    data = config.to_dict()
    assert data["segmenter_version"].startswith("rjieba-") and data["normalizer_version"] >= 1
    assert FingerprintConfig.from_dict(data) == config


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"bits": 48}, "bits must be one of"),
        ({"bits": True}, "bits must be one of"),
        ({"weighting": "bm25"}, "weighting must be one of"),
        ({"hash": "sha1"}, "hash must be one of"),
        ({"lang": "fr"}, "lang must be one of"),
        ({"ngram": -1}, "ngram must be"),
        ({"hmm": "yes"}, "hmm must be true or false"),
        ({"idf": ""}, "idf must be"),
    ],
)
def test_invalid_settings_are_refused(settings: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        FingerprintConfig(**settings)


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown fingerprint setting"):
        FingerprintConfig.from_dict({"bitz": 64})


def test_from_toml(tmp_path) -> None:
    path = tmp_path / "neardup.toml"
    path.write_text(
        '[fingerprint]\nbits = 128\nweighting = "tf"\nstopword_files = ["a.txt"]\n', encoding="utf-8"
    )
    config = FingerprintConfig.from_toml(path)
    # paths in a config file are relative to the file
    assert (config.bits, config.weighting, config.stopword_files) == (128, "tf", (str(tmp_path / "a.txt"),))
    path.write_text('stopword_files = "a.txt"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="stopword_files must be a list"):
        FingerprintConfig.from_toml(path)
    path.write_text("bits = = 3", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        FingerprintConfig.from_toml(path)


def test_from_env() -> None:
    config = FingerprintConfig.from_env({"NEARDUP_BITS": "32", "NEARDUP_HMM": "true", "NEARDUP_LANG": "zh"})
    assert (config.bits, config.hmm, config.lang) == (32, True, "zh")
    with pytest.raises(ConfigError, match="NEARDUP_BITS must be an integer"):
        FingerprintConfig.from_env({"NEARDUP_BITS": "many"})
