"""Stored signatures stay comparable across versions: an index records the version of its text
sketch (mode ``sketch``) and of its shingle keys (mode ``minhash``); one that records none was
made before versions existed (sketch 1, shingles 1), and its texts are still signed as then.
The digests below are of the signatures neardup made at commit 1acfe21, before the text sketch
became the batch search's and before one shingler keyed every shingle set."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from neardup.similarity.shingles import shingles_of
from neardup.similarity.sketches import (
    CHECK_BINS,
    TEXT_SKETCH_BINS,
    TEXT_SKETCH_SEED,
    byte_bins,
    oph_sketches,
)
from neardup.similarity.verify import Verifier

TEXTS = [
    "The central bank raised interest rates by a quarter point on Tuesday.",
    "央行周二宣布加息二十五个基点，以应对通胀。",
    "q7",
    "...",
]
#: Settings as an index of that time recorded them (no version keys).
RECORDED = {"threshold": 0.5, "content_weight": 0.8, "num_perm": 128, "seed": 1}
BEFORE = {"minhash": "75deacfc08e73809", "sketch": "831612c14f363ee8"}


def digest(signatures: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(signatures).tobytes()).hexdigest()[:16]


@pytest.mark.parametrize("mode", ["minhash", "sketch"])
def test_an_index_without_versions_signs_texts_as_it_was_made(mode: str) -> None:
    verifier = Verifier.from_settings({"mode": mode, **RECORDED})
    assert digest(verifier.signatures(TEXTS)) == BEFORE[mode]
    assert verifier.settings()[f"{'sketch' if mode == 'sketch' else 'shingle'}_version"] == 1


def test_new_indexes_record_the_current_versions() -> None:
    assert Verifier("sketch").settings()["sketch_version"] == 2
    assert Verifier("minhash").settings()["shingle_version"] == 2
    assert "sketch_version" not in Verifier("combined").settings()
    for mode in ("minhash", "sketch"):
        recorded = Verifier(mode).settings()
        assert Verifier.from_settings(recorded).settings() == recorded


def test_the_stored_sketch_is_the_batch_searchs_check_bins() -> None:
    """Version 2: the first 512 bins of the one text sketch at one byte, as the batch search's
    candidate check reads them, so online and batch estimate a pair from the same numbers."""
    signed = Verifier("sketch").signatures(TEXTS[:2]).view(np.uint8)
    sketch = oph_sketches(shingles_of(TEXTS[:2]), TEXT_SKETCH_BINS, TEXT_SKETCH_SEED)
    assert np.array_equal(signed, byte_bins(sketch, CHECK_BINS))
