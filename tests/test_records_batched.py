"""A records index checks a batch of rows at once (issue 31): block keys a key type at a time,
one read of the batch's blocks and one of its stored rows, comparisons over all the batch's
pairs. Its answers are the rows' own: queries give what each row checked alone gives, block
keys are each row's, and check-and-add decides as the code that went row by row did."""

from __future__ import annotations

import csv
import hashlib
import json
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xxhash

from neardup.records.block_map import BLOCKS_MAP, BlockDocuments, BlockMap, BlockRuns, stored_blocks
from neardup.records.candidates import derived_value
from neardup.records.incremental import (
    MODEL_ENTRY,
    ROWS_MAP,
    STATE_MAP,
    BatchDone,
    CheckedRow,
    RecordsIndex,
    StoredRow,
    _BlockPairs,
    _stored_pairs,
    block_keys,
    index_records,
    refit_stored,
    rows_block_keys,
    stored_model,
)
from neardup.records.index_model import RecordsModel
from neardup.records.schema import RecordSchema
from neardup.records.sources import open_source
from neardup.storage import open_storage

SYLLABLES = ["an", "bo", "ci", "da", "el", "fu", "ga", "hi", "jo", "ka", "li", "mu", "ne", "or", "pa", "qi"]
HEADER = ["id", "name", "street", "city", "born", "phone"]
STORED, NEW = 2400, 1500
#: sha256 of :func:`outcome` (probabilities to 12 places) of the new rows added in batches of
#: 1000 and of 300 (a refit of the weights on the way), as the code of commit 1fca6f9, which
#: gathered candidates row by row, decided them.
ADDED_DIGEST = {
    1000: "5108024d910b47eb35116f73006ac684279b87daa38db0cd7fad2cdea59fe2ee",
    300: "a9783cc2acfc086c2f2c8968f397843d6aa8b258a722a9929c8cb88b59ed336e",
}
#: sha256 of :func:`stored_digest` (every entry of the rows, blocks and state maps) after the
#: first run, and after the new rows were added in batches of 1000 and of 300, as the code of
#: commit b10d33e (before the value maps were written by upsert and read in batches) stored
#: them (the refitted model left out, as commit 9a91928 stored it: the batches differ there only).
FIRST_STORED = "054c7b34625d1bc70bac5000f07b4a28d1942e2fa1c3f9537723468cc4e0a0be"
#: The same after 700 new rows in batches of 300, then a refit and the other 800 in batches of 250.
REFIT_STORED = "b467f60a698dc403ac8a20189895adc80619ff5878569b6a3809209414b2e827"
ADDED_STORED = {
    1000: "70b735d78bac1a27993c4eca4c566d91136a216f22e3a25433081b24d0c873a4",
    300: "70b735d78bac1a27993c4eca4c566d91136a216f22e3a25433081b24d0c873a4",
}


def typo(text: str, rng: random.Random) -> str:
    position = rng.randrange(1, len(text) - 1)
    return text[:position] + text[position + 1] + text[position] + text[position + 2 :]


def entity_rows(count: int, seed: int, prefix: str) -> list[list[str]]:
    """``count`` person rows, entities of three (a typo in one column of each copy), shuffled
    (as benchmarks/records_check_speed.py makes them)."""
    rng = random.Random(seed)
    out = []
    for entity in range((count + 2) // 3):
        name = " ".join("".join(rng.choices(SYLLABLES, k=3)) for _ in range(2))
        values = [
            name,
            f"{rng.randrange(1, 999)} {''.join(rng.choices(SYLLABLES, k=2))} road",
            "".join(rng.choices(SYLLABLES, k=3)),
            f"19{rng.randrange(10, 99)}-{rng.randrange(1, 12):02}-{rng.randrange(1, 28):02}",
            f"555{rng.randrange(10**6, 10**7)}",
        ]
        for copy in range(3):
            row = list(values)
            if copy:
                column = rng.randrange(len(row))
                row[column] = typo(row[column], rng)
            out.append([f"{prefix}{entity}-{copy}", *row])
    rng.shuffle(out)
    return out[:count]


def write_csv(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows(rows)
    return path


def new_rows() -> list[list[str]]:
    """Half copies of stored entities (other typos, new keys), half new entities."""
    again = entity_rows(STORED, 1, "s")[: NEW // 2]
    return [[f"c{number}", *row[1:]] for number, row in enumerate(again)] + entity_rows(
        NEW - len(again), 2, "n"
    )


def outcome(rows: list[CheckedRow]) -> list[tuple[Any, ...]]:
    return [
        (row.key, row.status, row.group, [(m.key, m.group, round(m.probability, 12)) for m in row.matches])
        for row in rows
    ]


def stored_digest(url: str) -> str:
    """A digest of every (map, key, value) a records index stores, in key order, but the
    refitted model: its term frequencies are kept by hash since commit 0000000 (the
    decisions, which read them, are pinned by :data:`ADDED_DIGEST`). The blocks are read
    whatever their layout, and each row as commit b10d33e wrote it, with its block keys
    (``"b"``, left out since: they follow from its values and the stored model)."""
    store = open_storage(url)
    try:
        model = stored_model(store, url)
        digest = hashlib.sha256()
        for name in (ROWS_MAP, BLOCKS_MAP, STATE_MAP):
            held = [list(stored_blocks(store).items())] if name == BLOCKS_MAP else store.scan_values(name)
            for key, value in sorted(
                (repr(key), _as_written_before(name, key, value, model))
                for batch in held
                for key, value in batch
                if (name, key) != (STATE_MAP, MODEL_ENTRY)
            ):
                digest.update(name.encode() + b"\0" + key.encode() + b"\0" + value + b"\n")
        return digest.hexdigest()
    finally:
        store.close()


def _as_written_before(name: str, key: Any, value: bytes, model: RecordsModel | None) -> bytes:
    if name != ROWS_MAP or model is None:
        return value
    row = StoredRow.decode(value, key)
    blocks = ", ".join(str(block) for _, block in block_keys(model, row.values))
    values, group = json.dumps(row.values, ensure_ascii=False), json.dumps(row.group, ensure_ascii=False)
    return f'{{"v": {values}, "g": {group}, "b": [{blocks}]}}'.encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A records index learned from :data:`STORED` rows (SQLite)."""
    folder = tmp_path_factory.mktemp("batched")
    path = folder / "index.db"
    with open_source(str(write_csv(folder / "stored.csv", entity_rows(STORED, 1, "s")))) as source:
        index_records(source, str(path), RecordSchema(key="id"))
    return path


def test_a_batch_of_queries_answers_as_each_row_checked_alone(index: Path) -> None:
    rows = [dict(zip(HEADER, row, strict=True)) for row in new_rows()]
    with RecordsIndex.open(str(index)) as records:
        for mode in ("all", "any"):
            batched = records.check_many(rows, mode=mode)
            alone = [records.check_many([row], mode=mode)[0] for row in rows]
            assert outcome(batched) == outcome(alone)
            assert sum(row.duplicate for row in batched) >= NEW // 2  # the copies are found


def reference_blocks(model: RecordsModel, values: list[str | None]) -> list[tuple[int, int]]:
    """A row's blocks as the stored layout defines them, one key type after another."""
    blocks = []
    for number, spec in enumerate(model.specs):
        parts = [values[column] for column in spec.columns]
        if any(part is None for part in parts):
            continue
        text = "\x1f".join(part for part in parts if part is not None)
        if spec.form is not None:
            text = derived_value(model.kinds[spec.columns[0]], spec.form, text)
            if not text:
                continue
        blocks.append(
            (number, xxhash.xxh3_64_intdigest(f"{number}\x1e{text}".encode("utf-8", "surrogatepass")))
        )
    if any(value is not None for value in values):
        copies = f"-1\x1e{json.dumps(values, ensure_ascii=False)}"
        blocks.append((len(model.specs), xxhash.xxh3_64_intdigest(copies.encode("utf-8", "surrogatepass"))))
    return blocks


def test_block_keys_of_a_batch_are_each_rows_own(index: Path) -> None:
    store = open_storage(str(index))
    try:
        model = stored_model(store, "test")
    finally:
        store.close()
    assert model is not None
    rng = random.Random(5)
    rows: list[list[str | None]] = [
        [None if rng.random() < 0.2 else value for value in row[1:]] for row in new_rows()
    ]
    rows += [[None] * len(model.columns), ["ab", None, "ab", None, "ab"]]
    batched = rows_block_keys(model, rows)
    assert batched == [reference_blocks(model, row) for row in rows]
    assert batched == [block_keys(model, row) for row in rows]


@pytest.mark.parametrize("batch_size", [1000, 300])
def test_check_and_add_decides_as_the_per_row_code_did(index: Path, tmp_path: Path, batch_size: int) -> None:
    url = tmp_path / "index.db"
    shutil.copy(index, url)
    with open_source(str(write_csv(tmp_path / "new.csv", new_rows()))) as source:
        result = index_records(source, str(url), RecordSchema(key="id"), batch_size=batch_size)
    assert result.added == NEW and result.duplicates >= NEW // 2
    digest = hashlib.sha256(json.dumps(outcome(result.rows)).encode()).hexdigest()
    assert digest == ADDED_DIGEST[batch_size]
    assert stored_digest(str(url)) == ADDED_STORED[batch_size]  # the same bytes stored


def test_the_first_run_stores_what_it_stored_before(index: Path) -> None:
    assert stored_digest(str(index)) == FIRST_STORED


def test_a_refit_stores_what_it_stored_before(index: Path, tmp_path: Path) -> None:
    url = tmp_path / "index.db"
    shutil.copy(index, url)
    rows = new_rows()
    with open_source(str(write_csv(tmp_path / "first.csv", rows[:700]))) as source:
        index_records(source, str(url), RecordSchema(key="id"), batch_size=300)
    with open_source(str(write_csv(tmp_path / "then.csv", rows[700:]))) as source:
        result = index_records(source, str(url), RecordSchema(key="id"), batch_size=250, refit=True)
    assert result.refit is not None and result.refit.rows == STORED + 700
    assert stored_digest(str(url)) == REFIT_STORED


def crowded(rows: list[list[str]]) -> list[list[str]]:
    """The rows with one city in every tenth row: its block passes its cap."""
    return [[*row[:3], "metropolis", *row[4:]] if k % 10 == 0 else row for k, row in enumerate(rows)]


def _crowded_store(tmp_path: Path) -> tuple[Any, set[object]]:
    """A records store of crowded rows, and its blocks over their cap."""
    url = str(tmp_path / "index.db")
    with open_source(str(write_csv(tmp_path / "stored.csv", crowded(entity_rows(STORED, 1, "s"))))) as source:
        index_records(source, url, RecordSchema(key="id"))
    store = open_storage(url)
    over = {key for key, data in stored_blocks(store).items() if data == b'"*"'}
    return store, over


def _count_block_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[object]:
    """Count, from now on, how often each block is asked for, in either layout."""
    asked: Counter[object] = Counter()
    for layout in (BlockRuns, BlockDocuments):

        def counted(self: BlockMap, keys: Any, read: Any = layout.get) -> list[bytes | None]:
            asked.update(keys)
            return read(self, keys)  # type: ignore[no-any-return]

        monkeypatch.setattr(layout, "get", counted)
    return asked


def test_blocks_over_their_cap_are_read_once_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block over its cap stays so (stores only grow), so a run reads it once, not in
    every batch of rows holding it (check-and-add and queries alike)."""

    store, over = _crowded_store(tmp_path)
    try:
        asked = _count_block_reads(monkeypatch)
        with open_source(str(write_csv(tmp_path / "new.csv", crowded(new_rows())))) as source:
            result = index_records(source, store, RecordSchema(key="id"), batch_size=300)
        assert result.added == NEW and over
        held = [asked[block] for block in over if asked[block]]
        assert held and max(held) == 1  # the first batch holding it asked, the later ones did not
        # a query run of its own reads each once too
        asked.clear()
        with open_source(str(write_csv(tmp_path / "again.csv", crowded(new_rows())))) as source:
            again = index_records(source, store, RecordSchema(key="id"), batch_size=300, mode="all")
        assert again.duplicates == NEW and max(asked[block] for block in over) == 1
    finally:
        store.close()


def test_a_refit_by_another_writer_makes_the_run_read_the_blocks_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refit rebuilds every block (its model may cap them otherwise), so the batches after
    one read the blocks again rather than trusting what the run knew to be over its cap."""

    store, over = _crowded_store(tmp_path)
    try:
        asked = _count_block_reads(monkeypatch)

        def refit_after_the_first(done: BatchDone) -> None:
            if done.number == 1:
                refit_stored(store, "test", "id")

        with open_source(str(write_csv(tmp_path / "new.csv", crowded(new_rows())))) as source:
            result = index_records(
                source, store, RecordSchema(key="id"), batch_size=300, on_batch=refit_after_the_first
            )
    finally:
        store.close()
    assert result.added == NEW and over
    assert max(asked[block] for block in over) == 2  # before the refit, and once after it


def test_stored_candidates_of_a_batch_are_each_rows_own_in_its_order() -> None:
    """The array gathering of a batch's stored candidates against the row-by-row rule it
    replaced: the lists of a row's open blocks in the order of its blocks and of each list,
    every name once, never the row's own key; over random blocks shared by rows, lists shared
    by blocks, closed (None) and empty blocks, and rows whose key a list names."""
    rng = random.Random(3)
    for _ in range(30):
        keys: list[Any] = [f"new{n}" for n in range(rng.randrange(1, 40))]
        names = [rng.choice([f"s{n}", n]) for n in range(rng.randrange(1, 30))] + keys[:3]
        blocks = [
            [(kind, rng.randrange(12)) for kind in sorted(rng.sample(range(6), rng.randrange(0, 5)))]
            for _ in keys
        ]
        lists: dict[int, list[Any] | None] = {
            block: rng.choice([None, [], rng.sample(names, rng.randrange(1, 6))]) for block in range(12)
        }
        pairs = _BlockPairs(
            np.asarray([row for row, held in enumerate(blocks) for _ in held], dtype=np.int64),
            np.cumsum([0, *map(len, blocks)]).astype(np.int64),
            np.asarray([block for held in blocks for _, block in held], dtype=np.int64),
            list(range(12)),
            [0] * 12,
            np.bincount([block for held in blocks for _, block in held], minlength=12).astype(np.int64),
        )
        found, named, listed = _stored_pairs(pairs, [lists[block] for block in range(12)], keys)
        got: list[list[Any]] = [[] for _ in keys]
        for row, name in zip(found.tolist(), named.tolist(), strict=True):
            got[row].append(listed[name])
        expected = []
        for key, held in zip(keys, blocks, strict=True):
            once = dict.fromkeys(name for _, block in held for name in lists[block] or ())
            once.pop(key, None)
            expected.append(list(once))
        assert got == expected
