"""Validated, frozen configuration of the fingerprint pipeline.

A :class:`FingerprintConfig` fully determines the fingerprint of a text (together with the
normalizer and segmenter versions it records), which is why indexes store it and refuse to
mix fingerprints made under another one. It comes from keyword arguments, a TOML file
(``[fingerprint]`` table or top level) or ``NEARDUP_*`` environment variables.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..distance import BITS_CHOICES
from ..errors import ConfigError
from ..text.normalize import NORMALIZER_VERSION, NORMALIZER_VERSIONS
from ..text.tokenize import LANGUAGES, SEGMENTER_VERSION
from .hashing import HASH_NAMES
from .weighting import TERM_FREQUENCIES, WEIGHTINGS

IDF_CHOICES = ("default", "none")
#: Longest character n-gram: a word is rarely longer, and a huge one overflows the tokenizer.
MAX_NGRAM = 100
#: What settings added later meant before they existed: a recorded config (index meta, which
#: always holds ``segmenter_version``) that lacks one was made without it, and keeps meaning that.
BEFORE_SETTING: dict[str, Any] = {"term_frequency": "raw", "max_share": 1.0}


@dataclass(frozen=True)
class FingerprintConfig:
    """Everything that decides a fingerprint.

    bits: 32, 64 or 128. weighting: tf, tfidf, tfidf-len, composite, fields. hash: a name from
    :data:`neardup.fingerprint.hashing.HASH_NAMES`. lang: auto, zh or en. ngram: 0 for words, n >= 1 for
    character n-grams. idf: ``default`` (jieba's Chinese table), ``none`` (idf = 1) or the path
    of a file from ``neardup idf fit``. stopwords: drop the shipped zh/en stopwords;
    stopword_files: more lists. user_dictionary: a jieba user dictionary. to_simplified:
    traditional → simplified Chinese before tokenizing. hmm: jieba's new-word discovery.
    term_frequency: raw, log or bm25, how repeats of a token count (``neardup.fingerprint.weighting``).
    max_share: the largest share of a document's total weight one feature may hold (1: no cap).
    normalizer_version: the behaviour of :class:`~neardup.text.normalize.Normalizer` (indexes
    record it; older ones keep theirs).
    """

    bits: int = 64
    weighting: str = "tfidf-len"
    hash: str = "city64"
    lang: str = "auto"
    ngram: int = 0
    idf: str = "default"
    stopwords: bool = True
    stopword_files: tuple[str, ...] = ()
    user_dictionary: str | None = None
    to_simplified: bool = False
    hmm: bool = False
    term_frequency: str = "log"
    max_share: float = 0.1
    normalizer_version: int = NORMALIZER_VERSION

    def __post_init__(self) -> None:
        _check_choice("bits", self.bits, BITS_CHOICES)
        _check_choice("weighting", self.weighting, WEIGHTINGS)
        _check_choice("term_frequency", self.term_frequency, TERM_FREQUENCIES)
        _check_choice("normalizer_version", self.normalizer_version, NORMALIZER_VERSIONS)
        share = self.max_share
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0.0 < share <= 1.0:
            raise ConfigError(f"max_share must be a number in (0, 1]; got {share!r}")
        _check_choice("hash", self.hash, HASH_NAMES)
        _check_choice("lang", self.lang, LANGUAGES)
        if (
            not isinstance(self.ngram, int)
            or isinstance(self.ngram, bool)
            or not 0 <= self.ngram <= MAX_NGRAM
        ):
            raise ConfigError(
                f"ngram must be 0 (words) or an n-gram length from 1 to {MAX_NGRAM}; got {self.ngram!r}"
            )
        if not isinstance(self.idf, str) or not self.idf:
            raise ConfigError(f"idf must be 'default', 'none' or a file path; got {self.idf!r}")
        for name in ("stopwords", "to_simplified", "hmm"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false; got {getattr(self, name)!r}")
        if not isinstance(self.stopword_files, tuple):
            object.__setattr__(self, "stopword_files", tuple(self.stopword_files))

    def replace(self, **changes: Any) -> FingerprintConfig:
        return dataclasses.replace(self, **changes)

    def files(self) -> list[tuple[str, str]]:
        """(setting, path) of every setting that names a file, in a fixed order: their
        contents shape fingerprints as much as the settings do, so indexes hash them."""
        named = [] if self.idf in IDF_CHOICES else [("idf", self.idf)]
        if self.user_dictionary:
            named.append(("user_dictionary", self.user_dictionary))
        return named + [("stopword_files", path) for path in self.stopword_files]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for index meta: the settings plus the versions that also shape tokens."""
        data = dataclasses.asdict(self)
        data["stopword_files"] = list(self.stopword_files)
        data["segmenter_version"] = SEGMENTER_VERSION
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FingerprintConfig:
        """Build from :meth:`to_dict` output or user settings; unknown keys are refused. A
        recorded config keeps the meaning of the settings it predates (:data:`BEFORE_SETTING`)."""
        fields = {field.name for field in dataclasses.fields(cls)}
        recorded = {"segmenter_version"}
        unknown = set(data) - fields - recorded
        if unknown:
            raise ConfigError(
                f"unknown fingerprint setting(s) {', '.join(sorted(unknown))}; "
                f"known: {', '.join(sorted(fields))}"
            )
        values = {key: value for key, value in data.items() if key in fields}
        if "segmenter_version" in data:
            values = {**BEFORE_SETTING, **values}
        if "stopword_files" in values:
            files = values["stopword_files"]
            if isinstance(files, str) or not all(isinstance(item, str) for item in files):
                raise ConfigError(f"stopword_files must be a list of paths; got {files!r}")
            values["stopword_files"] = tuple(files)
        try:
            return cls(**values)
        except TypeError as exc:
            raise ConfigError(str(exc)) from exc

    @classmethod
    def from_toml(cls, path: str | Path) -> FingerprintConfig:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"config file {path} is not UTF-8 (byte {exc.start}); re-save it as UTF-8"
            ) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
        section = dict(data.get("fingerprint", data))
        return cls.from_dict(_resolve_paths(section, Path(path).parent))

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, prefix: str = "NEARDUP_"
    ) -> FingerprintConfig:
        """Read ``NEARDUP_BITS``, ``NEARDUP_WEIGHTING``, ... (booleans: 1/0, true/false)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            raw = environ.get(prefix + field.name.upper())
            if raw is None:
                continue
            values[field.name] = _parse_env(field.name, raw)
        return cls.from_dict(values)


def _resolve_paths(section: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Paths in a config file are relative to the file, not to wherever neardup runs."""

    def resolve(value: Any) -> Any:
        return str(folder / value) if isinstance(value, str) and not Path(value).is_absolute() else value

    if section.get("idf") not in (None, *IDF_CHOICES):
        section["idf"] = resolve(section["idf"])
    if section.get("user_dictionary"):
        section["user_dictionary"] = resolve(section["user_dictionary"])
    if isinstance(section.get("stopword_files"), list):
        section["stopword_files"] = [resolve(item) for item in section["stopword_files"]]
    return section


def _parse_env(name: str, raw: str) -> Any:
    if name == "max_share":
        try:
            return float(raw)
        except ValueError as exc:
            raise ConfigError(f"NEARDUP_MAX_SHARE must be a number; got {raw!r}") from exc
    if name in ("bits", "ngram", "normalizer_version"):
        try:
            return int(raw)
        except ValueError as exc:
            raise ConfigError(f"NEARDUP_{name.upper()} must be an integer; got {raw!r}") from exc
    if name in ("stopwords", "to_simplified", "hmm"):
        lowered = raw.strip().lower()
        if lowered not in ("1", "0", "true", "false", "yes", "no"):
            raise ConfigError(f"NEARDUP_{name.upper()} must be true or false; got {raw!r}")
        return lowered in ("1", "true", "yes")
    if name == "stopword_files":
        return tuple(part for part in raw.split(os.pathsep) if part)
    return raw


def _check_choice(name: str, value: Any, choices: tuple[Any, ...]) -> None:
    if value not in choices or isinstance(value, bool):
        listed = ", ".join(str(choice) for choice in choices)
        raise ConfigError(f"{name} must be one of {listed}; got {value!r}")
