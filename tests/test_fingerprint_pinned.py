"""Fingerprints of real texts pinned under many settings: stores and the seeds' examples depend
on them, so speed work on the pipeline (normalizer, tokenizers, token cache, weighting, the
bit accumulation) must leave every one of them bit-identical.

The digests were computed before the fingerprint speed work of issue 32 (item 4) and must
never be regenerated to make a change pass: a different digest means a changed fingerprint.
Each setting runs one mixed batch (Chinese paragraphs, Reuters stories, short reviews, and
hand-made texts with escapes, entities, markup, full-width, astral and combining characters),
cold, then again warm in smaller batches, which must agree with the cold pass.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any

import numpy as np
import pytest

from neardup import Fingerprinter
from tests.conftest import shared_file

#: Hand-made texts: what the real sample may not hold (escapes written as text, entities,
#: markup, full-width and astral characters, combining sequences, empty and blank texts).
EDGE_TEXTS = [
    "",
    "   \n\t ",
    "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ　１２３ and ① ℃ … ﬁ",
    "北京\\n大学的学生\\n\\n在\\t图书馆&nbsp;学习&amp;工作<p>今天</p><br/>天气很好",
    "line one\\nline two\\\\nline three &#20013;&#x6587; \\u4e2d\\u6587 "
    "\\ud83d\\ude00 &bogus; <IBM> <b>bold</b>",
    "𝐀𝐁𝐂 astral 𠀀𠀁 中文 e\u0301te\u0301 cafe\u0301 Å Ω",
    "数字１９９８年和English words混合 mixed text with 中文 inside",
    "x" * 300 + " " + "长" * 120,
    "the the the the the the the the the the the the the the quick fox",
    "新华社北京１月１日电 新华社北京１月１日电 新华社北京１月１日电",
    # Token lengths around the packed keys' words (7, 8, 9, 16, 17 letters), one-byte
    # code points beyond ASCII, and a NUL inside text (the batch steps join texts with NUL).
    "abcdefg abcdefgh abcdefghi abcdefghijklmnop abcdefghijklmnopq écolière naïveté ÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿ",
    "北京abcdefghijklmnopq大学 中文écolière中文 12345678901234567890 ab\x00cd 中\x00文",
    "ΟΔΟΣ ΣΟΦΟΣ Σ",
    "\u0301combining first, and a line\r\nbreak\rin 中文\r里",
    "&#0; and \\u0000 escape to NUL; &#x4e2d;&#25991; 中文",
]


@lru_cache(maxsize=1)
def _sample(count_zh: int = 120, count_en: int = 60, count_short: int = 60) -> list[str]:
    zh_lines = [line.strip() for line in _lines("raw/zh_news.txt") if line.strip()]
    en_docs = [json.loads(line)["text"] for line in _lines("raw/en_reuters.jsonl")]
    short = [json.loads(line)["text"] for line in _lines("dev/zh_short.jsonl")]
    zh = zh_lines[:: len(zh_lines) // count_zh][:count_zh]
    en = en_docs[:: len(en_docs) // count_en][:count_en]
    short = short[:: len(short) // count_short][:count_short]
    # Copies as crawled: line breaks written as "\n" text, markup around paragraphs.
    escaped = [text.replace("\n", "\\n") for text in en[:10]] + [f"<p>{text}</p>\\n" for text in zh[:10]]
    texts = zh + en + short + escaped + EDGE_TEXTS
    # A fixed shuffle, so batches mix the languages (the tokenizer merges their parts).
    return sorted(texts, key=lambda text: hashlib.md5(text.encode("utf-8")).digest())


def _lines(relative: str) -> list[str]:
    return shared_file(relative).read_text(encoding="utf-8").splitlines()


def _digest(fingerprinter: Fingerprinter, texts: list[str], titles: list[str | None] | None) -> str:
    encoded = fingerprinter.encode_many(texts, titles)
    digest = hashlib.sha256(np.ascontiguousarray(encoded.fingerprints, dtype="<u8").tobytes())
    digest.update(np.ascontiguousarray(encoded.feature_counts, dtype="<i8").tobytes())
    return digest.hexdigest()


def _titles(texts: list[str]) -> list[str | None]:
    return [None if number % 3 == 0 else text[:12] for number, text in enumerate(texts)]


def fingerprint_digest(settings: dict[str, Any]) -> str:
    """The digest of one setting on the sample; the warm pass, in batches of 37 texts on a
    fingerprinter whose cache holds fewer tokens than the sample has, must agree."""
    texts = list(_sample())
    titles = _titles(texts) if settings.get("weighting") == "composite" else None
    fingerprinter = Fingerprinter(**settings)
    cold = fingerprinter.fingerprint_many(texts, titles)
    small = Fingerprinter(**settings, cache_size=3000)
    for again in (fingerprinter, small, small):
        for start in range(0, len(texts), 37):
            part = again.fingerprint_many(
                texts[start : start + 37], None if titles is None else titles[start : start + 37]
            )
            assert np.array_equal(part, cold[start : start + 37]), settings
    return _digest(fingerprinter, texts, titles)


SETTINGS: list[dict[str, Any]] = [
    {},
    {"weighting": "tf"},
    {"weighting": "tfidf"},
    {"weighting": "composite"},
    {"normalizer_version": 1},
    {"term_frequency": "raw", "max_share": 1.0, "normalizer_version": 1},
    {"weighting": "tf", "term_frequency": "raw", "max_share": 1.0, "normalizer_version": 1},
    {"weighting": "composite", "term_frequency": "raw", "max_share": 1.0, "normalizer_version": 1},
    {"term_frequency": "bm25", "max_share": 0.05},
    {"bits": 128},
    {"bits": 32, "weighting": "tf"},
    {"ngram": 3},
    {"ngram": 2, "weighting": "tf", "normalizer_version": 1},
    {"lang": "zh"},
    {"lang": "en"},
    {"hash": "java", "weighting": "tf", "term_frequency": "raw"},
    {"hash": "xxh3_64", "bits": 128, "weighting": "tfidf"},
    {"stopwords": False, "idf": "none"},
    {"hmm": True},
    {"to_simplified": False, "weighting": "composite", "bits": 128},
]

#: sha256 of each setting's fingerprints (little-endian bytes) and feature counts, by position
#: in SETTINGS; computed with the code of e461e8c (before the speed work, on a worktree of it),
#: never to be regenerated from a later tree.
PINNED_DIGESTS: dict[int, str] = {
    0: "fdf828fd82d7d0f6debdde5d045dca83c65552debdbe19d81123e5a2ff4c8d88",
    1: "6bfa7da51d67a0b3e095547203ed43a212bc95825e08aa9f25b6f78a41f3e7d6",
    2: "bc87a47a159fa1a32eeba840d3f2a75f527bfa9d27640eed0ac1f71073d22ce8",
    3: "a624fd9fb06807ae738ad5232a513da60359cfd0f1cec8bd549b0adb020ff2fe",
    4: "11bf6a7fcde17c134e51e5ff3133f0ad797e252fb24d9497abb059527481d51b",
    5: "d76037ce052fab40867a8b8e73b8feb6ddcef44acd74ae3cb0b2305112f54dee",
    6: "4bfe3856b71ca44a5079767b29988fa0053326fae0e929e6e75108b703e0e96e",
    7: "cb356b106c1b90e55e84a326dffc4e4f79f95ff753742d2442538081ea49d083",
    8: "5f448300c19d4adff7da04d60f14af9dfa8aa9a88162061e4a036944854207cb",
    9: "271e0151980719ea9c89cb8d2a8e30d6dcc938e2ac3947fb3f4193b31c246301",
    10: "99385ce5ff5c7e266463ade4ba33778e6ad60bce2dcadf30d92fc0195917dc24",
    11: "09e91e32d85d0d2a0782b86e2ede3875de9fbca801b9b65633e8981770d142ec",
    12: "f02536ae80d654370073576624f2f716c4d0f57f774373aa3ef95ed71275e2b9",
    13: "e2816017b5b1dde30103eb45ff68c28592485ec12f40b37787d55a5c6e4e56ab",
    14: "9e0e2b9a570ecdcee70a53dc44dcb4749ef1105da9d916677d894fbc8e6bef86",
    15: "4a38c87ab2c10320a4805e7c7f914b1690f13f28aef19ff3705464743c00c750",
    16: "d37800a4bce4d1a076a6c66fefc97cba85262377c0fb1feb89df45b9b6e3ecd6",
    17: "c1516f49275f8152170f4f543e0145fe7eb2176fac5d13a809be42e039c8c679",
    18: "09faae09f73f45a936520685142dea31ba9bb653b3fd0742b34d8548d0242155",
    19: "cf98f41a0799efe456a76229cedc5a3e5b407a372ab5b7afc3dd40e891ffe73c",
}


@pytest.mark.parametrize("number", range(len(SETTINGS)), ids=[json.dumps(s) for s in SETTINGS])
def test_fingerprints_are_pinned(number: int) -> None:
    assert fingerprint_digest(SETTINGS[number]) == PINNED_DIGESTS[number]


def test_one_text_alone_matches_its_batch() -> None:
    texts = _sample()[::7]
    fingerprinter = Fingerprinter()
    batch = fingerprinter.fingerprint_many(texts)
    alone = [Fingerprinter().fingerprint(text) for text in texts[:20]]
    assert alone == [int(value) for value in batch[:20]]
