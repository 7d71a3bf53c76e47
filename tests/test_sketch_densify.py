"""Optimal densification of one-permutation sketches, against its definition: an empty bin j
copies the first filled bin of its probe sequence p(j, 1), p(j, 2), ... Texts of a few
shingles (where probing takes about bins / filled attempts per empty bin) go through the
first-hit table, the others through probing; both must give the definition's values, since
stored sketches must never change."""

from __future__ import annotations

import numpy as np
import pytest

from neardup.similarity import sketches
from neardup.similarity.shingles import Shingles
from neardup.similarity.sketches import EMPTY32, oph_sketches


def reference(row: np.ndarray, seed: int) -> np.ndarray:
    """The definition, one bin at a time."""
    bins = len(row)
    probes = sketches._probe_table(bins, seed, range(1, 1 << 14))
    out = row.copy()
    for j in np.flatnonzero(row == EMPTY32).tolist():
        sequence = probes[j]
        attempt = int(np.argmax(row[sequence] != EMPTY32))
        assert row[sequence[attempt]] != EMPTY32
        out[j] = row[sequence[attempt]]
    return out


@pytest.mark.parametrize(("bins", "seed"), [(64, 3), (512, 17)])
def test_every_row_is_densified_as_defined(bins: int, seed: int) -> None:
    rng = np.random.default_rng(bins)
    sizes = [1, 1, 2, 3, 5, 8, 13, 31, 32, 33, 60, 200, 0]
    documents = np.repeat(np.arange(len(sizes)), sizes)
    hashes = rng.integers(0, 1 << 40, size=len(documents), dtype=np.uint64)
    shingles = Shingles(hashes, documents.astype(np.int64), len(sizes))
    sketch = oph_sketches(shingles, bins, seed)
    for row, size in enumerate(sizes):
        if size == 0:
            assert (sketch[row] == EMPTY32).all()  # no shingles: nothing to copy
            continue
        undensified = np.full(bins, EMPTY32, dtype=np.uint32)
        single = Shingles(hashes[documents == row], np.zeros(size, dtype=np.int64), 1)
        # Recompute the undensified row from the same shingles, then densify by definition.
        mixed = sketches.fmix64(single.hashes ^ sketches.fmix64(np.full(1, seed, dtype=np.uint64)))
        slot = ((mixed >> np.uint64(32)) * np.uint64(bins)) >> np.uint64(32)
        np.minimum.at(undensified, slot.astype(np.int64), (mixed & np.uint64(0xFFFFFFFF)).astype(np.uint32))
        assert np.array_equal(sketch[row], reference(undensified, seed)), size


def test_both_paths_agree_on_rows_of_few_shingles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first-hit table and probing give the same sketches (probing forced by a limit of 0)."""
    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 40, size=300)
    documents = np.repeat(np.arange(len(sizes)), sizes).astype(np.int64)
    shingles = Shingles(rng.integers(0, 1 << 40, size=len(documents), dtype=np.uint64), documents, len(sizes))
    table = oph_sketches(shingles, 512, 17)
    monkeypatch.setattr(sketches, "_FEW_FILLED", 0)
    assert np.array_equal(oph_sketches(shingles, 512, 17), table)


def test_rows_densified_in_several_blocks_follow_the_definition() -> None:
    """More holed rows than one block of the probing path: every row as defined."""
    bins, seed = 128, 5
    rng = np.random.default_rng(11)
    sizes = rng.integers(40, 300, size=3 * sketches._BLOCK_ROWS + 7)
    documents = np.repeat(np.arange(len(sizes)), sizes)
    hashes = rng.integers(0, 1 << 40, size=len(documents), dtype=np.uint64)
    sketch = oph_sketches(Shingles(hashes, documents.astype(np.int64), len(sizes)), bins, seed)
    mixed = sketches.fmix64(hashes ^ sketches.fmix64(np.full(1, seed, dtype=np.uint64)))
    slot = ((mixed >> np.uint64(32)) * np.uint64(bins)) >> np.uint64(32)
    undensified = np.full((len(sizes), bins), EMPTY32, dtype=np.uint32)
    np.minimum.at(
        undensified, (documents, slot.astype(np.int64)), (mixed & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    )
    assert (undensified == EMPTY32).any(axis=1).sum() > 2 * sketches._BLOCK_ROWS
    for row in range(len(sizes)):
        assert np.array_equal(sketch[row], reference(undensified[row], seed)), row
