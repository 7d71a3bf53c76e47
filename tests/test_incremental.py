"""Tests for :mod:`neardup.dedup.documents`: the deduper's cluster rule, over a real index
(in memory and in SQLite), and the layering that keeps the index free of dedup policy."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from neardup import Assignment, IncrementalDeduper, SimhashIndex
from neardup.errors import InputError
from neardup.index.config import IndexConfig

BASE = 0x0123_4567_89AB_CDEF


@pytest.fixture(params=["memory", "sqlite"])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], SimhashIndex]:
    def make() -> SimhashIndex:
        if request.param == "memory":
            return SimhashIndex(64, 3)
        index = SimhashIndex.open(f"sqlite:///{tmp_path}/incremental.db", IndexConfig(max_distance=3))
        request.addfinalizer(index.close)
        return index

    return make


def test_a_new_record_joins_the_cluster_of_its_nearest_match(opened: Callable[[], SimhashIndex]) -> None:
    """The documented rule: nearest match first (smallest distance), not the smallest key."""
    deduper = IncrementalDeduper(opened())
    far = deduper.check_and_add("a", BASE ^ 0b111)  # distance 3 from BASE, the smaller key
    near = deduper.check_and_add("z", BASE ^ (1 << 40))  # distance 1 from BASE
    assert (far.cluster, near.cluster, near.duplicate) == ("a", "z", False)  # 4 bits apart
    joined = deduper.check_and_add("new", BASE)
    assert isinstance(joined, Assignment)
    assert (joined.cluster, joined.duplicate, joined.added) == ("z", True, True)
    assert [(m.key, m.distance) for m in joined.matches] == [("z", 1), ("a", 3)]
    assert deduper.index.get_many(["new"])[0].cluster == "z"  # type: ignore[union-attr]


def test_a_batched_record_joins_its_nearest_stored_match(opened: Callable[[], SimhashIndex]) -> None:
    """The nearest-match rule through check_and_add_many: two stored matches at distances 1
    and 3, in two clusters; the farther one has the smaller key, so neither key order nor
    storage order can stand in for distance."""
    deduper = IncrementalDeduper(opened())
    stored = deduper.check_and_add_many(["a", "z"], [BASE ^ 0b111, BASE ^ (1 << 40)])  # 4 bits apart
    assert [(r.cluster, r.duplicate) for r in stored] == [("a", False), ("z", False)]
    unrelated = BASE ^ (0xF << 50)  # 4, 5 and 7 bits from BASE, "z" and "a": matches nothing
    results = deduper.check_and_add_many(["new", "other"], [BASE, unrelated])
    assert [(r.key, r.cluster, r.duplicate, r.added) for r in results] == [
        ("new", "z", True, True),
        ("other", "other", False, True),
    ]
    assert [(m.key, m.distance) for m in results[0].matches] == [("z", 1), ("a", 3)]
    assert [record.cluster for record in deduper.index.get_many(["new", "other"])] == ["z", "other"]  # type: ignore[union-attr]


@pytest.mark.parametrize("nearer", ["stored", "batch"])
def test_nearest_match_wins_between_stored_and_earlier_batch_records(
    opened: Callable[[], SimhashIndex], nearer: str
) -> None:
    """One match stored, one an earlier record of the same batch, at distances 1 and 3 (either
    way round): the record joins the nearer one's cluster, and is stored with it."""
    near, far = BASE ^ (1 << 40), BASE ^ 0b111  # 1 and 3 bits from BASE, 4 bits apart
    stored_value, batch_value = (near, far) if nearer == "stored" else (far, near)
    deduper = IncrementalDeduper(opened())
    assert deduper.check_and_add("s", stored_value).cluster == "s"
    results = deduper.check_and_add_many(["b", "new"], [batch_value, BASE])
    assert results[0].cluster == "b" and not results[0].duplicate  # 4 bits from "s"
    expected = "s" if nearer == "stored" else "b"
    distances = {"s": 1 if nearer == "stored" else 3, "b": 3 if nearer == "stored" else 1}
    assert (results[1].cluster, results[1].duplicate) == (expected, True)
    assert [(m.key, m.distance) for m in results[1].matches] == sorted(
        distances.items(), key=lambda kv: kv[1]
    )
    assert deduper.index.get_many(["new"])[0].cluster == expected  # type: ignore[union-attr]
    # A later single check-and-add sees the same clusters.
    assert deduper.check_and_add("late", BASE ^ (1 << 60)).cluster == expected  # 1 bit from "new"


def test_equally_near_matches_resolve_to_the_smallest_key(opened: Callable[[], SimhashIndex]) -> None:
    deduper = IncrementalDeduper(opened())
    deduper.check_and_add_many(["m", "b"], [BASE ^ (0b11 << 40), BASE ^ 0b11])  # 4 bits apart
    # Within one batch too: "c" is an earlier record of the batch, as near as "b" and "m".
    results = deduper.check_and_add_many(["c", "new"], [BASE ^ (0b11 << 20), BASE])
    assert [r.cluster for r in results] == ["c", "b"]
    assert [(m.key, m.distance) for m in results[1].matches] == [("b", 2), ("c", 2), ("m", 2)]


def test_the_index_keeps_the_cluster_ids_it_is_given(opened: Callable[[], SimhashIndex]) -> None:
    index = opened()
    index.add_many(["x", "y"], [1, 2], clusters=["x", "x"])
    assert [record.cluster for record in index.get_many(["x", "y"])] == ["x", "x"]  # type: ignore[union-attr]
    with pytest.raises(InputError, match="cluster ids"):
        index.add_many(["z"], [3], clusters=["x", "y"])
    with index.exclusive():  # the writer lock, as check-and-add takes it
        assert len(index) == 2
    assert IncrementalDeduper(index).check_and_add("w", 3).cluster == "x"


def test_the_index_has_no_policy_of_its_own() -> None:
    assert not hasattr(SimhashIndex, "check_and_add") and not hasattr(SimhashIndex, "check_and_add_many")
    with pytest.raises(TypeError):
        SimhashIndex().query_many([1], verifier=None)  # type: ignore[call-arg]


def test_the_index_imports_nothing_from_dedup() -> None:
    """Layers import downwards only: the index and its stores never load the policy above them."""
    code = (
        "import neardup.index.simhash_index, sys; "
        "print(sorted(m for m in sys.modules if m.startswith('neardup.dedup')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_band_index_links_batch_neighbours_and_explains_them_like_a_query() -> None:
    """In one batch, a record joins an earlier record of the batch that shares a band and
    whose sketch confirms it, exactly as if that record had been stored first; the
    explanation names the shared bands and the sketch Jaccard."""
    from neardup import BandScheme, Fingerprinter, Verifier
    from neardup.dedup.documents import DocumentIndex, explain_matches, text_index_config
    from neardup.fingerprint.config import FingerprintConfig
    from neardup.io.record import Record

    base = "The central bank raised its benchmark rate by a quarter point on Tuesday, citing inflation. "
    texts = [
        base * 3,
        base * 3 + "Markets fell.",
        "An entirely different story about football in Spain. " * 3,
    ]
    fingerprints = Fingerprinter().fingerprint_many(texts)
    sketches = Verifier("sketch").signatures(texts)
    config = text_index_config(FingerprintConfig())
    together = SimhashIndex(scheme=BandScheme(64))
    results = IncrementalDeduper(together, Verifier("sketch")).check_and_add_many(
        ["a", "b", "c"], fingerprints, signatures=sketches
    )
    assert [(r.cluster, r.duplicate) for r in results] == [("a", False), ("a", True), ("c", False)]
    apart = SimhashIndex.open("memory://", config)
    deduper = IncrementalDeduper(apart, Verifier("sketch"))
    for row, key in enumerate(["a", "b", "c"]):
        single = deduper.check_and_add_many(
            [key], fingerprints[row : row + 1], signatures=sketches[row : row + 1]
        )
        assert (single[0].cluster, single[0].duplicate) == (results[row].cluster, results[row].duplicate)
    documents = DocumentIndex(apart)
    batch = documents.prepare([Record("q", texts[1], None, "q")])
    matches = documents.query(batch)[0]
    assert [match.key for match in matches] == ["a", "b"] or [m.key for m in matches] == ["b", "a"]
    explained = explain_matches(documents, batch.fingerprints[0], batch.signatures[0], matches)
    by_key = dict(zip([match.key for match in matches], explained, strict=True))
    assert by_key["b"]["sketch_jaccard"] == 1.0 and by_key["b"]["tables"] == list(range(BandScheme(64).bands))
    assert 0.5 <= by_key["a"]["sketch_jaccard"] < 1.0 and by_key["a"]["tables"]
