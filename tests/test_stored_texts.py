"""A band index keeps its texts and decides candidates near its threshold by their exact
shingle Jaccard, as batch dedup does; indexes made before keep deciding on the sketch.

The pair under test has an exact Jaccard and a sketch estimate on either side of the
threshold (both within the check margin), so every path (a query, a capped query, a pair
inside one check-and-add batch, a pair across batches) shows which of the two decided."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from neardup import Index
from neardup.dedup.stored_texts import TEXTS, pack_text, unpack_text
from neardup.errors import StorageDamagedError
from neardup.index.config import IndexConfig
from neardup.similarity.shingles import Shingles
from neardup.similarity.sketches import CHECK_MARGIN, sketch_similarity
from neardup.similarity.verify import Verifier

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
]


def straddling_pair() -> tuple[str, str, float, float]:
    """Two texts whose exact Jaccard J and sketch estimate E differ by more than 0.03 near
    0.5 (seeded: the same pair every run)."""
    rng = random.Random(3)
    base = " ".join(f"{rng.choice(WORDS)}{rng.randint(0, 99)}" for _ in range(120))
    for _ in range(2000):
        tokens = base.split()
        for _ in range(rng.randint(25, 45)):
            tokens[rng.randrange(len(tokens))] = f"{rng.choice(WORDS)}{rng.randint(0, 99)}"
        other = " ".join(tokens)
        exact = float(Shingles.of([base, other]).jaccard(np.array([0]), np.array([1]))[0])
        sketches = Verifier("sketch").signatures([base, other])
        estimate = float(sketch_similarity(sketches[:1], sketches[1:])[0])
        if abs(exact - 0.5) < 0.06 and abs(estimate - exact) > 0.03:
            return base, other, exact, estimate
    raise AssertionError("no straddling pair found")


BASE, OTHER, EXACT, ESTIMATE = straddling_pair()
#: Between the two, so the exact Jaccard and the estimate decide differently.
THRESHOLD = round((EXACT + ESTIMATE) / 2, 4)
#: Whether the texts are near-duplicates by their exact Jaccard (what batch dedup says).
EXACT_SAYS = EXACT >= THRESHOLD


def config(check_texts: bool) -> IndexConfig:
    verifier = Verifier("sketch", threshold=THRESHOLD, check_texts=check_texts)
    return IndexConfig.band_index().replace(verification=verifier.settings())


def test_the_pair_straddles_the_threshold_within_the_margin() -> None:
    assert (EXACT >= THRESHOLD) != (ESTIMATE >= THRESHOLD)
    assert abs(EXACT - THRESHOLD) <= CHECK_MARGIN and abs(ESTIMATE - THRESHOLD) <= CHECK_MARGIN


@pytest.mark.parametrize("check_texts", [True, False])
def test_queries_decide_by_the_exact_jaccard_where_texts_are_kept(tmp_path: Path, check_texts: bool) -> None:
    expected = EXACT_SAYS if check_texts else not EXACT_SAYS
    with Index.open(f"sqlite:///{tmp_path}/i.db", config(check_texts)) as index:
        index.add_texts([("base", BASE)])
        assert bool(index.query_texts([OTHER])[0]) == expected
        assert bool(index.query_texts([OTHER], max_matches=1)[0]) == expected  # the capped path
        later = index.check_and_add_texts([("other", OTHER)])[0]  # across batches
        assert later.duplicate == expected
        stored = index.index.storage.get_values(TEXTS, ["base", "other"])
        assert (stored != [None, None]) == check_texts
    with Index.open(f"sqlite:///{tmp_path}/j.db", config(check_texts)) as index:
        together = index.check_and_add_texts([("base", BASE), ("other", OTHER)])  # one batch
        assert together[1].duplicate == expected


def test_removed_and_replaced_texts_follow_their_records(tmp_path: Path) -> None:
    with Index.open(f"sqlite:///{tmp_path}/i.db", config(True)) as index:
        index.add_texts([("base", BASE), ("copy", BASE + " and one more line")])
        index.remove_many(["copy"])
        assert index.index.storage.get_values(TEXTS, ["copy"]) == [None]
        index.add_texts([("base", OTHER)], existing="replace")
        assert unpack_text(index.index.storage.get_values(TEXTS, ["base"])[0] or b"", "base") == OTHER
        assert bool(index.query_texts([OTHER])[0])  # the stored text is the new one


def test_a_record_stored_without_its_text_is_decided_by_its_sketch(tmp_path: Path) -> None:
    """Records added through the fingerprint-level calls, or by an earlier version, have
    no kept text; their candidates keep the sketch's verdict."""
    with Index.open(f"sqlite:///{tmp_path}/i.db", config(True)) as index:
        index.add_texts([("base", BASE)])
        index.index.storage.remove_values(TEXTS, ["base"])
        assert bool(index.query_texts([OTHER])[0]) == (not EXACT_SAYS)


def test_the_default_index_keeps_texts_and_an_older_one_opens_as_it_was(tmp_path: Path) -> None:
    with Index.open(f"sqlite:///{tmp_path}/new.db") as index:
        assert index.keeps_texts and index.verifier is not None and index.verifier.check_texts
    older = IndexConfig.band_index(keep_texts=False)
    with Index.open(f"sqlite:///{tmp_path}/old.db", older) as index:
        index.add_texts([("base", BASE)])
    with Index.open(f"sqlite:///{tmp_path}/old.db") as index:  # its own settings, no texts
        assert not index.keeps_texts
        assert index.index.storage.get_values(TEXTS, ["base"]) == [None]
    with Index.open(f"sqlite:///{tmp_path}/old.db", IndexConfig.band_index()) as index:
        assert not index.keeps_texts  # what the store was made with is not a setting to match


@pytest.mark.parametrize(
    "text", ["", "short", "长" * 600, "x" * 5000, "mixed 中文 and \U0001f600 " * 100, "\ud800 lone"]
)
def test_texts_round_trip(text: str) -> None:
    packed = pack_text(text)
    assert unpack_text(packed, "k") == text
    assert len(packed) <= len(text.encode("utf-8", "surrogatepass")) + 1


def test_a_damaged_text_is_named_with_its_id() -> None:
    with pytest.raises(StorageDamagedError, match=r"'k7'.*re-add it"):
        unpack_text(b"\x01not zlib", "k7")
    with pytest.raises(StorageDamagedError, match="unknown format"):
        unpack_text(b"\x09abc", "k7")


def test_service_explanations_give_the_exact_jaccard_beside_the_estimate(tmp_path: Path) -> None:
    """``/v1/query`` with ``explain`` shows both numbers a band index decides on."""
    pytest.importorskip("fastapi", reason="the service needs the 'service' extra")
    from fastapi.testclient import TestClient

    from neardup.service import ServiceSettings, create_app

    edited = BASE.replace("alpha", "omega", 3)
    exact = float(Shingles.of([edited, BASE]).jaccard(np.array([0]), np.array([1]))[0])
    with (
        Index.open(f"sqlite:///{tmp_path}/s.db") as index,
        TestClient(create_app(index, ServiceSettings())) as client,
    ):
        assert client.post("/v1/documents", json={"id": "base", "text": BASE}).status_code == 201
        answer = client.post("/v1/query", json={"text": edited, "explain": True}).json()
    explanation = answer["matches"][0]["explanation"]
    assert explanation["jaccard"] == round(exact, 4) and exact < 1.0
    assert 0.0 < explanation["sketch_jaccard"] <= 1.0 and explanation["tables"]
