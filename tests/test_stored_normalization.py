"""An index keeps meaning what it meant when it was made (issue 32).

Normalizer version 2 reads escapes, entities and markup written as text, and term frequencies
saturate; a fingerprint or sketch made before either is no longer what the same text gives
now. An index records its fingerprint settings, and a recorded config made before
``term_frequency`` and ``max_share`` existed (no such keys, ``normalizer_version`` 1) opens
with the old behaviour: its stored fingerprints and sketches stay comparable. The pins are
what neardup made at b10d33e, before the change."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from neardup import Fingerprinter, Index, IndexConfig, to_hex
from neardup.errors import IndexConfigMismatchError
from neardup.fingerprint.config import FingerprintConfig

TEXTS = [
    "<p>&nbsp;&nbsp;Showers continued throughout the week in\\nthe Bahia cocoa zone,\\nalleviating "
    "the drought\\nsince early January.</p>",
    "<p>&nbsp;中央关于１９９８年工作的指导方针中突出强调要“精心部署”。\\n这应该引起我们高度重视。\\n</p>",
    "apple apple apple apple pear plum apple &amp; apple",
]
CLEAN = (
    "Showers continued throughout the week in the Bahia cocoa zone, "
    "alleviating the drought since early January."
)
#: ``fingerprint_config`` as a store made at b10d33e recorded it.
RECORDED_BEFORE = {
    "bits": 64,
    "hash": "city64",
    "hmm": False,
    "idf": "default",
    "lang": "auto",
    "ngram": 0,
    "normalizer_version": 1,
    "segmenter_version": "rjieba-0.2.2",
    "stopword_files": [],
    "stopwords": True,
    "to_simplified": False,
    "user_dictionary": None,
    "weighting": "tfidf-len",
}
#: Fingerprints of TEXTS at b10d33e (tfidf-len, city64).
BEFORE = ["dd24bd761e070825", "c130a9680e47bb75", "59798944198adf19"]


def hexes(fingerprinter: Fingerprinter, texts: list[str]) -> list[str]:
    return [to_hex(int(value)) for value in fingerprinter.fingerprint_many(texts)]


def test_a_config_recorded_before_fingerprints_as_then() -> None:
    config = FingerprintConfig.from_dict(RECORDED_BEFORE)
    assert (config.term_frequency, config.max_share, config.normalizer_version) == ("raw", 1.0, 1)
    assert hexes(Fingerprinter(config=config), TEXTS) == BEFORE
    # Today's defaults read the escaped copy as the clean text.
    assert hexes(Fingerprinter(), TEXTS[:1]) == hexes(Fingerprinter(), [CLEAN]) != BEFORE[:1]


def test_settings_a_user_writes_take_todays_defaults(tmp_path: Path) -> None:
    default = FingerprintConfig()
    assert FingerprintConfig.from_dict({"weighting": "tf"}).term_frequency == default.term_frequency
    path = tmp_path / "settings.toml"
    path.write_text('weighting = "tf"\n', encoding="utf-8")
    loaded = FingerprintConfig.from_toml(path)
    assert (loaded.term_frequency, loaded.max_share, loaded.normalizer_version) == (
        default.term_frequency,
        default.max_share,
        default.normalizer_version,
    )
    recorded = default.to_dict()
    assert FingerprintConfig.from_dict(recorded) == default  # a new index reopens as made


def test_bad_saturation_settings_are_refused() -> None:
    from neardup import ConfigError

    for settings in (
        {"term_frequency": "sqrt"},
        {"max_share": 0},
        {"max_share": 1.5},
        {"normalizer_version": 3},
    ):
        with pytest.raises(ConfigError, match=next(iter(settings))):
            FingerprintConfig.from_dict(settings)
    assert FingerprintConfig.from_env({"NEARDUP_MAX_SHARE": "0.2", "NEARDUP_NORMALIZER_VERSION": "1"}) == (
        FingerprintConfig(max_share=0.2, normalizer_version=1)
    )


def test_an_index_made_before_keeps_its_normalization_and_weights(tmp_path: Path) -> None:
    """A store whose meta is as b10d33e wrote it: the texts it holds were sketched and
    fingerprinted the old way, and a query is read the same way, not the new one."""
    path = tmp_path / "old.db"
    legacy = FingerprintConfig.from_dict(RECORDED_BEFORE)
    with Index.open(f"sqlite:///{path}", IndexConfig.band_index(legacy)) as made:
        made.add_texts([("clean", CLEAN)])
    with sqlite3.connect(path) as connection:  # the meta as a store of before recorded it
        (value,) = connection.execute("SELECT value FROM neardup_meta WHERE name = 'config'").fetchone()
        meta = json.loads(value)
        meta["fingerprint_config"] = RECORDED_BEFORE
        connection.execute("UPDATE neardup_meta SET value = ? WHERE name = 'config'", (json.dumps(meta),))
    expected = bin(int(BEFORE[0], 16) ^ Fingerprinter(config=legacy).fingerprint(CLEAN)).count("1")
    assert expected > 0
    with Index.open(f"sqlite:///{path}") as reopened:
        assert reopened.fingerprinter.config == legacy
        (matches,) = reopened.query_texts(TEXTS[:1])
        assert [(match.key, match.distance) for match in matches] == [("clean", expected)]
    with pytest.raises(IndexConfigMismatchError, match="without settings"):
        Index.open(f"sqlite:///{path}", IndexConfig.band_index(FingerprintConfig()))
    with Index.open(f"sqlite:///{tmp_path}/new.db") as new:
        new.add_texts([("clean", CLEAN)])
        (matches,) = new.query_texts(TEXTS[:1])
        assert [(match.key, match.distance) for match in matches] == [("clean", 0)]
