"""Inverse document frequency: fit on a corpus, save, load, and a default for Chinese.

``idf(t) = ln((1 + N) / (1 + df(t))) + 1`` (smoothed: never zero, never a division by zero),
N the number of documents, df(t) how many contain t. A token the model has never seen gets
``default``: for a fitted model the idf of df = 0 (it is rare), for jieba's table the median
(jieba's own choice, since its table omits many ordinary words).

Files: our JSON (``{"format": "neardup-idf", "version": 1, "documents": N, "default": x,
"idf": {token: value}}``) or jieba's ``word idf`` text lines. The default Chinese model is
jieba's bundled ``analyse/idf.txt`` read from the installed jieba package.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..errors import ConfigError, NeardupError
from ..io.output import write_text

IDF_FORMAT = "neardup-idf"
IDF_VERSION = 1


@dataclass(frozen=True)
class IdfModel:
    """Token → idf, with ``default`` for tokens the model has not seen."""

    idf: Mapping[str, float]
    default: float
    documents: int = 0
    name: str = field(default="custom", compare=False)

    def __getitem__(self, token: str) -> float:
        return self.idf.get(token, self.default)

    def __len__(self) -> int:
        return len(self.idf)

    @classmethod
    def fit(cls, documents: Iterable[Iterable[str]], name: str = "fitted") -> IdfModel:
        """Fit on token lists (one per document; repeats within a document count once)."""
        document_frequency: Counter[str] = Counter()
        count = 0
        for tokens in documents:
            document_frequency.update(set(tokens))
            count += 1
        if count == 0:
            raise ConfigError("cannot fit an IDF model on an empty corpus; give it some documents")
        idf = {token: _smoothed_idf(count, df) for token, df in document_frequency.items()}
        return cls(idf=idf, default=_smoothed_idf(count, 0), documents=count, name=name)

    def save(self, path: str | Path) -> None:
        payload = {
            "format": IDF_FORMAT,
            "version": IDF_VERSION,
            "name": self.name,
            "documents": self.documents,
            "default": self.default,
            "idf": dict(sorted(self.idf.items())),
        }
        try:
            write_text(path, json.dumps(payload, ensure_ascii=False))
        except NeardupError as exc:
            reason = str(exc).rpartition(": ")[2]
            raise ConfigError(f"cannot write IDF file {path}: {reason}") from exc

    @classmethod
    def load(cls, path: str | Path) -> IdfModel:
        """Load our JSON format or a jieba-style ``word idf`` text file."""
        location = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise ConfigError(f"cannot read IDF file {location}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"IDF file {location} is not UTF-8; re-save it as UTF-8") from exc
        if text.lstrip().startswith("{"):
            return _from_json(text, location)
        return _from_word_lines(text, location, name=Path(path).name)


def _smoothed_idf(documents: int, document_frequency: int) -> float:
    return math.log((1 + documents) / (1 + document_frequency)) + 1.0


def _from_json(text: str, location: str) -> IdfModel:
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"IDF file {location} is not valid JSON: {exc.msg} (line {exc.lineno})") from exc
    if payload.get("format") != IDF_FORMAT or payload.get("version") != IDF_VERSION:
        raise ConfigError(
            f"IDF file {location} is not a {IDF_FORMAT} v{IDF_VERSION} file; make it with `neardup idf fit`"
        )
    try:
        idf = {str(token): float(value) for token, value in payload["idf"].items()}
        return IdfModel(
            idf=idf,
            default=float(payload["default"]),
            documents=int(payload.get("documents", 0)),
            name=str(payload.get("name", "custom")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"IDF file {location} lacks 'idf' or 'default' or has wrong types") from exc


def _from_word_lines(text: str, location: str, name: str) -> IdfModel:
    idf: dict[str, float] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        try:
            word, value = parts
            idf[word.lower()] = float(value)
        except ValueError as exc:
            raise ConfigError(f"{location}:{number}: expected 'word idf', got {line[:60]!r}") from exc
    if not idf:
        raise ConfigError(f"IDF file {location} holds no 'word idf' lines")
    ordered = sorted(idf.values())
    return IdfModel(idf=idf, default=ordered[len(ordered) // 2], name=name)


@lru_cache(maxsize=1)
def default_chinese_idf() -> IdfModel:
    """jieba's bundled idf table (~277k words, fitted by jieba's authors on a large Chinese
    corpus). Loaded once per process: it is immutable and slow to parse."""
    try:
        source = resources.files("jieba").joinpath("analyse", "idf.txt")
        text = source.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as exc:  # pragma: no cover - core dependency
        raise ConfigError("the default Chinese IDF needs the jieba package: pip install jieba") from exc
    return _from_word_lines(text, "jieba/analyse/idf.txt", name="jieba-0.42.1")
