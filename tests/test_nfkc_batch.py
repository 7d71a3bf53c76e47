"""The batch NFKC of :func:`neardup.text.normalize.nfkc_many` against ``unicodedata``: every
code point of the Basic Multilingual Plane alone, random strings of them (forms longer than one
code point, combining marks, code points beyond the BMP among them) in one batch."""

from __future__ import annotations

import unicodedata

import numpy as np

from neardup.text.normalize import nfkc_many

BMP = [chr(code) for code in range(0x10000) if not 0xD800 <= code <= 0xDFFF]


def test_every_bmp_code_point_alone() -> None:
    assert nfkc_many(BMP) == [unicodedata.normalize("NFKC", char) for char in BMP]


def test_random_strings_in_one_batch() -> None:
    rng = np.random.default_rng(0)
    alphabet = [*BMP, "𝐀", "😀", "…", "℃", "Ⅱ", "\u0301", "ﬁ"]
    texts = [
        "".join(alphabet[k] for k in rng.integers(0, len(alphabet), size=size))
        for size in rng.integers(0, 12, size=20_000)
    ]
    texts += ["…", "a…b", "x…", "…y", "…" * 5, "℃ Ⅱ ＡＢＣ", "e\u0301", "𝐀 …", ""]
    assert nfkc_many(texts) == [unicodedata.normalize("NFKC", text) for text in texts]
