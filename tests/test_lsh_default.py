"""The default search of ``dedup_documents`` / ``neardup dedup`` (shingle LSH) against brute
force: every pair of exact shingle Jaccard >= 0.5 among dev documents is found and kept, and
nothing below it is, with the texts kept as they are or compressed (past PLAIN_TEXTS records;
forced here by lowering it to 0)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import neardup.dedup.lsh as lsh
import neardup.dedup.pair_tiles as pair_tiles
import neardup.dedup.text_store as text_store
import neardup.dedup.workspace as workspace
from neardup import Fingerprinter
from neardup.dedup.pipeline import DedupSettings, dedup_documents
from neardup.dedup.text_store import TextStore
from neardup.io.read import read_records
from neardup.similarity.verify import Shingles

from .conftest import shared_file


def exact_pairs(texts: list[str], normalizer: Any) -> dict[tuple[int, int], float]:
    """Every pair i < j with its exact shingle Jaccard, for the pairs sharing any shingle."""
    shingles = Shingles.of(texts, normalizer)
    matrix, sizes = shingles.matrix(), shingles.sizes
    common = (matrix @ matrix.T).tocoo()
    upper = common.row < common.col
    i, j, shared = common.row[upper], common.col[upper], common.data[upper]
    jaccard = shared / (sizes[i] + sizes[j] - shared)
    return {(int(a), int(b)): float(s) for a, b, s in zip(i, j, jaccard, strict=True)}


@pytest.fixture(scope="module")
def dev_sample() -> list[Any]:
    records = list(read_records(shared_file("dev/zh_news.jsonl")))
    return records[:700]


def test_the_text_store_gives_back_every_text_plain_or_packed(dev_sample: list[Any]) -> None:
    texts = [r.text for r in dev_sample] + ["", "\ud800 lone surrogate", "表情 😀"]
    store = TextStore(100)
    for low in range(0, len(texts), 64):  # two plain batches, then packed blocks
        store.extend(texts[low : low + 64])
    assert len(store) == len(texts) and store.packs_next()
    assert [store[k] for k in reversed(range(len(texts)))] == texts[::-1]  # any order
    assert store[-1] == texts[-1] and store[5:8] == texts[5:8]
    with pytest.raises(IndexError):
        store[len(texts)]
    with pytest.raises(ValueError, match="cannot follow"):
        store._plain_limit = 10**9
        store.extend(["late"])


def test_packed_texts_read_back_by_group_held_or_spilled(dev_sample: list[Any], tmp_path: Path) -> None:
    """Batches of several groups of GROUP_TEXTS texts (the last one short), held in memory
    or written to the spill file: every text comes back, in any order."""
    from neardup.dedup.workspace import Workspace

    texts = [r.text for r in dev_sample] + ["", "\ud800 lone surrogate", "表情 😀"]
    held, spilled = TextStore(0), TextStore(0, Workspace(1 << 20, tmp_path))
    for store in (held, spilled):
        for low in range(0, len(texts), 150):
            store.extend(texts[low : low + 150])
    assert spilled._file is not None and held._file is None
    order = np.random.default_rng(3).permutation(len(texts)).tolist()
    for store in (held, spilled):
        assert [store[k] for k in order] == [texts[k] for k in order]
        assert [store[k] for k in range(len(texts))] == texts


@pytest.mark.parametrize("plain", [200_000, 0], ids=["plain texts", "compressed texts"])
def test_the_default_finds_what_brute_force_finds(
    dev_sample: list[Any], plain: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(text_store, "PLAIN_TEXTS", plain)
    fingerprinter = Fingerprinter()
    result = dedup_documents(dev_sample, fingerprinter=fingerprinter)
    assert result.search.method == "lsh"
    truth = exact_pairs([r.text for r in dev_sample], fingerprinter.normalizer)
    wanted = {pair for pair, similarity in truth.items() if similarity >= 0.5}
    found = set(zip(result.pairs.i.tolist(), result.pairs.j.tolist(), strict=True))
    assert len(wanted) > 50
    # The texts decide: exactly the brute-force pairs, barring an LSH miss (p < 0.01 each at
    # J = 0.5, far less above; a couple at most in a few hundred pairs).
    assert found <= wanted and len(wanted - found) <= 2
    # Every pair carries the Hamming distance of its fingerprints.
    fingerprints = result_fingerprints(fingerprinter, dev_sample)
    for a, b, distance in zip(result.pairs.i, result.pairs.j, result.pairs.distance, strict=True):
        assert distance == bin(fingerprints[a] ^ fingerprints[b]).count("1")


def result_fingerprints(fingerprinter: Fingerprinter, records: list[Any]) -> list[int]:
    return [int(value) for value in np.asarray(fingerprinter.fingerprint_many([r.text for r in records]))]


def test_simhash_search_stays_available_and_exact() -> None:
    records = list(read_records(shared_file("dev/zh_short.jsonl")))[:400]
    result = dedup_documents(records, settings=DedupSettings(search="simhash"))
    # -k auto from the data: 400 short reviews are cheap to check, so the widest k (22 bits).
    assert result.search.method == "simhash" and result.search.max_distance == 22
    by_hand = dedup_documents(records, settings=DedupSettings(max_distance=3))
    assert by_hand.search == (3, "none", "simhash")


def test_thousands_of_copies_of_a_short_text_give_linear_pairs() -> None:
    """A stock reply repeated 3,000 times is one cluster through a hub, not 4.5 M pairs."""
    from neardup.io.record import Record

    texts = ("谢谢您的耐心等待，我们会尽快处理", "thanks for your patience, we will handle it soon")
    records = [Record(id=i, text=texts[i % 2], title=None, location=f"r{i}") for i in range(6000)]
    result = dedup_documents(records)
    assert len(result.pairs) <= 2 * 6000
    assert result.summary.clusters == 2 and result.summary.dropped == 5998


def test_sketching_in_worker_processes_changes_nothing(
    dev_sample: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches sketched by forked workers (taken back in input order) give the same result
    as one process: the pool starts at the second batch, so small batches force it here, and
    past the first 200 texts the workers pack the texts for the checks."""
    settings = DedupSettings(batch_size=64)
    monkeypatch.setattr(text_store, "PLAIN_TEXTS", 200)
    monkeypatch.setattr(lsh, "default_workers", lambda: 1)
    alone = dedup_documents(dev_sample, settings=settings)
    monkeypatch.setattr(lsh, "default_workers", lambda: 2)
    shared = dedup_documents(dev_sample, settings=settings)
    assert list(shared.pair_rows()) == list(alone.pair_rows()) and len(alone.pairs) > 50
    assert list(shared.cluster_rows()) == list(alone.cluster_rows())


def test_the_exact_jaccard_in_runs_of_few_texts_changes_nothing(
    dev_sample: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``exact_jaccard`` (what ``--explain`` reports) on pairs among more texts than a run
    holds goes a few texts' sets at a time and gets the values one run gets."""
    fingerprinter = Fingerprinter()
    sketcher = lsh.Sketcher(lsh.CandidateSettings(), fingerprinter.normalizer, workers=1)
    sketcher.add(dev_sample)
    sketches = sketcher.finish()
    rng = np.random.default_rng(3)
    pairs = np.sort(rng.integers(0, len(dev_sample), size=(400, 2)), axis=1)
    whole = lsh.exact_jaccard(sketches, pairs, fingerprinter.normalizer)
    monkeypatch.setattr(lsh, "EXACT_DOCUMENTS", 3)
    calls: list[int] = []
    original = lsh.ShingleSets.of

    def counted(count: int, *args: Any, **kwargs: Any) -> Any:
        calls.append(count)
        return original(count, *args, **kwargs)

    monkeypatch.setattr(lsh.ShingleSets, "of", counted)
    runs = lsh.exact_jaccard(sketches, pairs, fingerprinter.normalizer)
    assert len(calls) > 5 and max(calls) <= 3
    assert np.array_equal(runs, whole) and np.count_nonzero(whole < 1) > 0


@pytest.mark.parametrize("workers", [1, 2])
def test_each_text_near_the_threshold_is_shingled_once_however_the_tiles_go(
    dev_sample: list[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, workers: int
) -> None:
    """The near pairs are checked together at the end, each text in them shingled once for
    the run: held in memory when the candidates fitted the budget and the texts are at most
    ``EXACT_DOCUMENTS``, else written to the run's spill directory and mapped. Held, written
    (past ``EXACT_DOCUMENTS``), and spilled to many tiles (a row of them at a time, or each
    tile alone): the same pairs, each text shingled once, the spill files removed."""
    copies = [replace(record, id=f"{record.id}-{k}") for record in dev_sample[:30] for k in range(5)]
    records = [*dev_sample, *copies]  # groups of 6 copies, spread over the tiles as in a large collection
    records = [records[k] for k in np.random.default_rng(7).permutation(len(records))]
    shingled = {"of": 0, "written": 0}
    original_of, original_written = lsh.ShingleSets.of, lsh.ShingleSets.written

    def counted(count: int, *args: Any, **kwargs: Any) -> Any:
        shingled["of"] += count
        return original_of(count, *args, **kwargs)

    def counted_written(path: Path, count: int, *args: Any, **kwargs: Any) -> Any:
        assert path.parent.parent == tmp_path  # in the run's spill directory
        shingled["written"] += count
        return original_written(path, count, *args, **kwargs)

    def run(**settings: Any) -> tuple[Any, dict[str, int]]:
        shingled.update(of=0, written=0)
        result = dedup_documents(records, settings=DedupSettings(tmp_dir=str(tmp_path), **settings))
        assert list(tmp_path.iterdir()) == []  # the spill files removed
        return result, dict(shingled)

    monkeypatch.setattr(lsh.ShingleSets, "of", counted)
    monkeypatch.setattr(lsh.ShingleSets, "written", counted_written)
    monkeypatch.setattr(lsh, "default_workers", lambda: workers)
    monkeypatch.setattr(lsh, "EXACT_BLOCK", 50)  # many blocks of near pairs
    monkeypatch.setattr(lsh, "CHECK_MARGIN", 1.0)  # every candidate to the exact check
    held, held_count = run()
    monkeypatch.setattr(lsh, "EXACT_DOCUMENTS", 8)
    written, written_count = run()
    monkeypatch.setattr(workspace, "SHARES", {**workspace.SHARES, "pairs": 1e-9})  # spill every band
    seen: list[tuple[str, int, int | None]] = []
    rows = dedup_documents(
        records,
        settings=DedupSettings(memory=1 << 20, tmp_dir=str(tmp_path)),
        progress=lambda *step: seen.append(step),
    )
    original_rows = pair_tiles.PairTiles.rows
    monkeypatch.setattr(
        pair_tiles.PairTiles, "rows", lambda self: ([t] for row in original_rows(self) for t in row)
    )
    tiles, tiles_count = run(memory=1 << 20)  # each tile a row of its own
    assert len(held.pairs) > 200
    assert (
        list(held.pair_rows())
        == list(written.pair_rows())
        == list(rows.pair_rows())
        == list(tiles.pair_rows())
    )
    texts = held_count["of"]
    assert 0 < texts <= len(records) and held_count["written"] == 0
    assert written_count == tiles_count == {"of": 0, "written": texts}
    checked = [advance for stage, advance, _ in seen if stage == "check"]
    assert sum(checked) == rows.candidates > 0  # every candidate counted once
    assert list(tmp_path.iterdir()) == []


def test_distances_fingerprinted_by_workers_in_chunks_are_the_same(
    dev_sample: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records of the kept pairs fingerprinted in many chunks over two forked workers,
    and their distances taken a few pairs at a time, give the distances one chunk in this
    process gives."""
    monkeypatch.setattr(lsh, "default_workers", lambda: 1)
    alone = dedup_documents(dev_sample)
    monkeypatch.setattr(lsh, "default_workers", lambda: 2)
    monkeypatch.setattr(lsh, "TEXT_CHUNK", 7)
    monkeypatch.setattr(lsh, "PAIR_DISTANCE_CHUNK", 3)
    chunked = dedup_documents(dev_sample)
    assert chunked.pairs.distance.tolist() == alone.pairs.distance.tolist() and len(alone.pairs) > 50


def test_a_higher_threshold_keeps_fewer_pairs_and_says_so(dev_sample: list[Any]) -> None:
    """--threshold 0.7 under the default search: fewer bands (never fewer than the checked
    bins), only pairs of Jaccard >= 0.7, and the summary names the threshold."""
    fingerprinter = Fingerprinter()
    result = dedup_documents(dev_sample, fingerprinter=fingerprinter, settings=DedupSettings(threshold=0.7))
    truth = exact_pairs([r.text for r in dev_sample], fingerprinter.normalizer)
    found = set(zip(result.pairs.i.tolist(), result.pairs.j.tolist(), strict=True))
    wanted = {pair for pair, similarity in truth.items() if similarity >= 0.7}
    assert found <= wanted and len(wanted - found) <= 2 and len(found) > 30
    assert "pairs of shingle Jaccard >= 0.7 by LSH" in result.summary.line()
