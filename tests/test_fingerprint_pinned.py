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
#: in SETTINGS; computed before the speed work, never to be regenerated.
PINNED_DIGESTS: dict[int, str] = {
    0: "799571db8179fb43130f9ba47942fb13999d046a32f7e13c6629a4609997eb5d",
    1: "feac97bcbd47ca6184673452c93d80d8ad9ee2717e4f79d47badb717e7437636",
    2: "5bd8e766d8007cdf095d203b6005b088b5d5308fc5e180358e66994bb2b84927",
    3: "6c626c334c5a6e25d86469f03b18b3d7ed411d4553a80801b4ff097b36dd3af1",
    4: "f33c7ba94be68e11453450e7ade7d47c91a09311822f964bf9284d34b85b9d72",
    5: "33f38ded135372c8f29ee2a429831551c28fa9b1a568e3eedc9c3d8b73c4fc4a",
    6: "6b16d3c3050e774fa98975723e7c850d3aa1a72e6ed1f2d5e81c797cd316de55",
    7: "33ba95ca51b321b61f61eb7043bc2f6bfbca8f290d34a67053a887d22f5df77b",
    8: "f6bf6c36fb1ed055ce69704c158b028a8cb7d9693785e851b560a33d36ae01a0",
    9: "1f27a1d312556609c8dc4806d517285cde8939249f4aa899e180674184f5ee3a",
    10: "5355a4d29ea53f742fc6add10cf2043cb0516f8a1b2f4233af6ae23c133a4988",
    11: "0b849cf08db685aa816cc0a1b02d11f0b6e9290a623367878547451de016fe26",
    12: "bf80f8ecd0cc7ac4e9d19a26991a238eb5d22412189f3e81c9c313c85d166279",
    13: "799571db8179fb43130f9ba47942fb13999d046a32f7e13c6629a4609997eb5d",
    14: "d7d11d980fee636b78bf3dab5a809e501db19cc5608aa52e2f78916e3c955748",
    15: "298e245670caba66a3ace3e561b90a4b9f6ce07398270f1971d965df068ec863",
    16: "650635b089c976f46b35374dbda9321a96350d564b491cfa4c640b38a15c843b",
    17: "e7efdded169ef636d31a594568fb86bb7ad5c422318ef91bd2e75bd818b83958",
    18: "16b65f06886ffc1ce9a6074ad5b63a33b53367a105a8c925e759eaacf409ee26",
    19: "266ed27204c6a8cc9407013c808d4ba3ea5db186b9f2185d89c982d7543589d5",
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
