"""A memory budget changes where the LSH search keeps its parts, never what it finds: a tiny
``--memory`` spills band keys, check bins, texts and candidate pairs to files and gives the
same bytes as a run in memory; the spill directory goes away however the run ends."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from neardup.cli.main import main
from neardup.dedup.band_keys import BandKeys
from neardup.dedup.check_bins import CheckBins
from neardup.dedup.pair_tiles import PairTiles
from neardup.dedup.pipeline import DedupSettings, dedup_documents
from neardup.dedup.prefix_search import prefix_pairs
from neardup.dedup.seen_ids import PackedIds, SeenIds
from neardup.dedup.short_texts import ShortTexts
from neardup.dedup.workspace import SHARES, Workspace
from neardup.errors import ConfigError, InputError, OutputError
from neardup.io.read import read_records
from neardup.io.record import Record

from .conftest import shared_file, write_lines


@pytest.fixture
def spilled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of file the runs of the test spill (band, check, texts, pairs)."""
    made: list[str] = []
    original = Workspace.file

    def file(self: Workspace, stem: str) -> Path:
        made.append(stem.split("-")[0])
        return original(self, stem)

    monkeypatch.setattr(Workspace, "file", file)
    return made


def _dedup(source: Path, out: Path, *extra: str) -> tuple[bytes, bytes]:
    out.mkdir(exist_ok=True)
    words = ["dedup", str(source), "--pairs", str(out / "p.jsonl"), "--clusters", str(out / "c.jsonl")]
    result = CliRunner().invoke(main, [*words, *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return (out / "p.jsonl").read_bytes(), (out / "c.jsonl").read_bytes()


def _short_texts(path: Path, count: int = 3000) -> Path:
    """Many short texts (titles, complaints): few words each, many near-copies."""
    rng = np.random.default_rng(3)
    words = [f"w{n}" for n in range(400)]
    base = [" ".join(rng.choice(words, size=8)) for _ in range(count // 4)]
    rows = []
    for n in range(count):
        text = base[int(rng.integers(len(base)))].split()
        text[int(rng.integers(len(text)))] = words[int(rng.integers(len(words)))]
        rows.append({"id": f"s{n}", "text": " ".join(text)})
    return write_lines(path, *rows)


@pytest.mark.parametrize("name", ["dev/zh_news.jsonl", "dev/en_news.jsonl", "dev/zh_short.jsonl"])
def test_a_tiny_budget_gives_the_same_bytes_on_the_dev_sets(
    name: str, tmp_path: Path, spilled: list[str]
) -> None:
    source = shared_file(name)
    whole = _dedup(source, tmp_path / "memory")
    assert not spilled
    tmp = tmp_path / "spill"
    tmp.mkdir()
    assert _dedup(source, tmp_path / "tiny", "--memory", "1M", "--tmp-dir", str(tmp)) == whole
    assert {"texts"} | ({"band", "check"} if "news" in name else set()) <= set(spilled)
    assert list(tmp.iterdir()) == []


def test_many_short_texts_spill_their_pairs_and_keep_the_bytes(tmp_path: Path, spilled: list[str]) -> None:
    source = _short_texts(tmp_path / "short.jsonl")
    whole = _dedup(source, tmp_path / "memory")
    assert whole[0].count(b"\n") > 1000
    assert _dedup(source, tmp_path / "tiny", "--memory", "1M") == whole
    assert "pairs" in spilled


def test_the_library_call_takes_the_budget_and_refuses_it_where_nothing_spills(tmp_path: Path) -> None:
    source = shared_file("dev/zh_short.jsonl")
    whole = dedup_documents(read_records(source))
    tiny = dedup_documents(
        read_records(source), settings=DedupSettings(memory=1 << 20, tmp_dir=str(tmp_path))
    )
    assert [p.tolist() for p in tiny.pairs] == [p.tolist() for p in whole.pairs]
    assert tiny.candidates == whole.candidates and tiny.summary == whole.summary
    with pytest.raises(ConfigError, match="memory does not apply to the simhash search"):
        DedupSettings(search="simhash", memory=1 << 30).check(64)
    with pytest.raises(ConfigError, match="below the 1 MB"):
        dedup_documents(read_records(source), settings=DedupSettings(memory=1000))
    with pytest.raises(ConfigError, match="does not exist"):
        dedup_documents(read_records(source), settings=DedupSettings(tmp_dir=str(tmp_path / "absent")))


def test_the_command_refuses_a_budget_it_cannot_use(tmp_path: Path) -> None:
    source = str(shared_file("dev/zh_short.jsonl"))
    pairs = str(tmp_path / "p.jsonl")
    for extra, message in [
        (["--memory", "lots"], "is not a size"),
        (["--memory", "1000"], "below the 1M"),
        (["--memory", "1G", "-k", "3"], "--memory applies to the LSH search"),
        (["--tmp-dir", str(tmp_path), "--search", "simhash"], "--tmp-dir applies to the LSH search"),
        (["--memory", "1G", "--index", str(tmp_path / "x.db")], "--memory does not apply with --index"),
    ]:
        result = CliRunner().invoke(main, ["dedup", source, "--pairs", pairs, *extra])
        assert result.exit_code == 2, (extra, result.output)
        assert message in result.output, (extra, result.output)
    assert not (tmp_path / "x.db").exists() and not (tmp_path / "p.jsonl").exists()


def _stop_at(stage: str) -> Any:
    def progress(name: str, advance: int, total: int | None) -> None:
        if name == stage:
            raise KeyboardInterrupt

    return progress


@pytest.mark.parametrize("stage", ["bands", "check", "distances"])
def test_an_interrupted_run_leaves_no_files(tmp_path: Path, stage: str, spilled: list[str]) -> None:
    settings = DedupSettings(memory=1 << 20, tmp_dir=str(tmp_path))
    records = read_records(shared_file("dev/en_news.jsonl"))
    with pytest.raises(KeyboardInterrupt):
        dedup_documents(records, settings=settings, progress=_stop_at(stage))
    assert spilled and list(tmp_path.iterdir()) == []


def test_a_failed_run_leaves_no_files(tmp_path: Path, spilled: list[str]) -> None:
    rows = [json.loads(line) for line in shared_file("dev/en_news.jsonl").read_text().splitlines()]
    source = write_lines(tmp_path / "input.jsonl", *rows, rows[0])  # its first id again, at the end
    spill = tmp_path / "spill"
    spill.mkdir()
    with pytest.raises(InputError, match="duplicate id"):
        dedup_documents(read_records(source), settings=DedupSettings(memory=1 << 20, tmp_dir=str(spill)))
    assert spilled and list(spill.iterdir()) == []


@pytest.mark.parametrize(("sent", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_on_the_command_removes_its_files(tmp_path: Path, sent: int, status: int) -> None:
    """A real SIGINT or SIGTERM to a real ``neardup dedup`` once its spill directory exists."""
    rows = [json.loads(line) for line in shared_file("dev/en_news.jsonl").read_text().splitlines()]
    copies = [{**row, "id": f"{n}-{row['id']}"} for n in range(4) for row in rows]
    source = write_lines(tmp_path / "input.jsonl", *copies)
    spill = tmp_path / "spill"
    spill.mkdir()
    command = [sys.executable, "-m", "neardup", "dedup", str(source), "--pairs", str(tmp_path / "p.jsonl")]
    process = subprocess.Popen(
        [*command, "--memory", "1M", "--tmp-dir", str(spill)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not any(spill.iterdir()) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before it spilled"
    process.send_signal(sent)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == status, stderr
    assert list(spill.iterdir()) == []
    assert not (tmp_path / "p.jsonl").exists()


# -- the parts, spilled and held, against each other -------------------------------------------


def test_band_keys_read_the_same_held_or_in_runs(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 1000, 20)
    batches = [rng.integers(0, 1 << 32, size=(40, int(n)), dtype=np.uint32) for n in sizes]
    held, runs = BandKeys(), BandKeys(Workspace(1 << 20, tmp_path))
    for keys in batches:
        held.append(keys)
        runs.append(keys)
    assert runs._runs, "nothing was written"
    for band in range(40):
        assert np.array_equal(held.column(band), np.concatenate([keys[band] for keys in batches]))
        assert np.array_equal(runs.column(band), held.column(band))


def test_a_tile_of_pairs_reads_each_block_of_check_bins_once(tmp_path: Path) -> None:
    """Two sides of a tile, misaligned with the blocks, fit the cache: chunk after chunk of
    pairs across them reads no block twice (an overfull least-recently-used cache read in
    block order would read every block at every chunk)."""
    rng = np.random.default_rng(3)
    rows = rng.integers(0, 256, size=(6000, 512), dtype=np.uint8)
    written = CheckBins(512, Workspace(1 << 20, tmp_path))
    written.extend(rows)
    span = written.span
    assert 3 * span + 7 < len(rows)
    left, right = 7 + np.arange(span), 7 + 2 * span + np.arange(span)
    blocks = len(np.unique(np.concatenate([left, right]) // written.block_rows))
    for _ in range(5):
        chosen = np.concatenate([rng.choice(left, 500), rng.choice(right, 500)])
        assert np.array_equal(written.take(chosen), rows[chosen])
    assert written.reads <= blocks, (written.reads, blocks)


def test_check_bins_take_the_same_rows_held_or_written(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    rows = rng.integers(0, 256, size=(5000, 512), dtype=np.uint8)
    held, written = CheckBins(512), CheckBins(512, Workspace(1 << 20, tmp_path))
    for start in range(0, len(rows), 333):
        held.extend(rows[start : start + 333])
        written.extend(rows[start : start + 333])
    assert any(block is None for block in written._blocks), "nothing was written"
    wanted = rng.integers(0, len(rows), size=20000)
    assert np.array_equal(written.take(wanted), rows[wanted])
    assert np.array_equal(held.take(wanted), rows[wanted])


def test_pair_tiles_give_every_pair_once_held_or_spilled(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    documents = 20000
    parts = []
    for _ in range(40):
        i = rng.integers(0, documents - 1, size=5000)
        j = np.minimum(documents - 1, i + 1 + rng.integers(0, 3000, size=5000))
        parts.append((i << 32) | j)
    expected = np.unique(np.concatenate(parts))
    held, spilled = PairTiles(documents, 1 << 40), PairTiles(documents, 500, Workspace(1 << 20, tmp_path))
    for keys in parts:
        held.add(keys)
        spilled.add(keys)
    held.finish()
    spilled.finish()
    assert spilled.spilled and not held.spilled
    assert held.count == spilled.count == len(expected)
    tiles = list(spilled.tiles())
    assert all(np.array_equal(tile, np.unique(tile)) for tile in tiles)
    assert np.array_equal(np.sort(np.concatenate(tiles)), expected)
    assert np.array_equal(held.all(), expected) and np.array_equal(spilled.all(), expected)
    span = spilled.span
    for tile in tiles:  # a tile reads two spans of documents
        assert len(np.unique((tile >> 32) // span)) == 1 and len(np.unique((tile & 0xFFFFFFFF) // span)) == 1


def _short_sets(rng: np.random.Generator, documents: int) -> tuple[np.ndarray, np.ndarray]:
    """Shingle keys of short documents drawn from a small skewed vocabulary: many shared
    keys, buckets past max_bucket (copies of a stock text), sizes 1 to 40."""
    keys, owners = [], []
    for document in range(documents):
        if document % 7 == 0:
            continue  # documents the prefix search does not hold (long or empty ones)
        drawn = rng.zipf(1.3, int(rng.integers(1, 40))) % 600
        values = np.unique(drawn.astype(np.uint64) * np.uint64(0x9E3779B1) % np.uint64(1 << 40))
        keys.append(values)
        owners.append(np.full(values.size, document, dtype=np.int64))
    return np.concatenate(keys), np.concatenate(owners)


def test_short_texts_give_the_pairs_and_jaccards_of_all_sets_at_once_when_spilled(tmp_path: Path) -> None:
    """The partitioned prefix search (by key, by document span, by prefix key, through
    files) gives exactly the pairs of the search over every set in memory, big buckets and
    their hubs included; the exact Jaccard read from spilled blocks is the set Jaccard."""
    rng = np.random.default_rng(6)
    keys, owners = _short_sets(rng, 3000)
    expected = prefix_pairs(keys, owners, 0.5, max_bucket=20, hub=2)
    # Sets that fit their share (16 bytes an entry) while the search over them would not
    # (WORKING_BYTES an entry) stay in memory and are searched in partitions.
    partitioned_space = Workspace(int(keys.size * 64 / SHARES["short_texts"]), tmp_path)
    held, spilled = ShortTexts(), ShortTexts(Workspace(1 << 20, tmp_path))
    partitioned = ShortTexts(partitioned_space)
    for low in range(0, 3000, 256):
        chosen = (owners >= low) & (owners < low + 256)
        held.append(keys[chosen], owners[chosen])
        spilled.append(keys[chosen], owners[chosen])
        partitioned.append(keys[chosen], owners[chosen])
    assert spilled.spilled and not held.spilled and not partitioned.spilled
    found = {}
    for name, sets in (("held", held), ("spilled", spilled), ("partitioned", partitioned)):
        tiles = PairTiles(3000, 1 << 40)
        sets.add_pairs(tiles, 0.5, 20, 2)
        tiles.finish()
        found[name] = tiles.all()
    assert expected.size > 1000
    assert np.array_equal(found["held"], expected) and np.array_equal(found["spilled"], expected)
    assert np.array_equal(found["partitioned"], expected)
    assert partitioned_space.spilled, "the search over sets too many for its share was not partitioned"
    left_over = {path.name for path in tmp_path.rglob("short-*")}
    assert left_over == {path.name for path in tmp_path.rglob("short-texts-*")}, "a partition file was left"
    members = np.unique(owners)
    left, right = rng.choice(members, 5000), rng.choice(members, 5000)
    sets = {int(d): set(keys[owners == d].tolist()) for d in members.tolist()}
    truth = [
        len(sets[a] & sets[b]) / len(sets[a] | sets[b])
        for a, b in zip(left.tolist(), right.tolist(), strict=True)
    ]
    assert np.array_equal(spilled.jaccard(left, right), np.array(truth))
    assert np.array_equal(held.jaccard(left, right), np.array(truth))
    assert np.array_equal(spilled.documents(), members)


def test_a_workspace_makes_its_directory_only_when_something_spills(tmp_path: Path) -> None:
    with Workspace(1 << 30, tmp_path) as space:
        assert not space.spilled and list(tmp_path.iterdir()) == []
        path = space.file("texts")
        path.write_bytes(b"x")
        assert space.spilled and path.parent.parent == tmp_path
    assert list(tmp_path.iterdir()) == []


def test_packed_ids_give_back_each_id_as_it_was_added() -> None:
    """The run's ids, packed: each reads back equal and of the same type (text or integer),
    whatever its characters, by index, slice and iteration; equal to the list of them."""
    ids: list[str | int] = ["a", "", "é文\ud800x", 5, -12, 2**70, "7", "0x1", " 3 "]
    packed = PackedIds(ids[:4])
    packed.extend(ids[4:])
    assert len(packed) == len(ids) and list(packed) == ids and packed == ids
    assert [packed[k] for k in range(len(ids))] == ids and packed[-3] == "7" and packed[2:5] == ids[2:5]
    assert [type(value) for value in packed] == [type(value) for value in ids]
    with pytest.raises(IndexError):
        packed[len(ids)]
    assert len(repr(PackedIds(f"id{k}" for k in range(100_000)))) < 100


def test_seen_ids_refuse_exactly_the_repeats_with_where_the_first_was_read() -> None:
    rng = np.random.default_rng(5)
    for trial in range(20):
        count = int(rng.integers(2, 3000))
        ids: list[Any] = [f"r{n}" if n % 3 else n for n in range(count)]
        repeat = int(rng.integers(1, count))
        first = int(rng.integers(0, repeat))
        ids[repeat] = ids[first]
        records = [
            Record(record_id, "text", None, f"in.jsonl:{n + 1}", {}) for n, record_id in enumerate(ids)
        ]
        seen_list: list[Any] = []
        seen = SeenIds(seen_list)
        size = int(rng.integers(1, 200))
        with pytest.raises(InputError) as error:
            for start in range(0, count, size):
                group = records[start : start + size]
                seen.check(group, len(seen_list))
                seen_list.extend(record.id for record in group)
        assert error.value.location == f"in.jsonl:{repeat + 1}", trial
        assert f"first seen at in.jsonl:{first + 1};" in str(error.value), trial
    unique = [Record(n, "t", None, "<stdin>", {}) for n in range(5000)]
    kept: list[Any] = []
    seen = SeenIds(kept)
    for start in range(0, 5000, 64):
        seen.check(unique[start : start + 64], len(kept))
        kept.extend(record.id for record in unique[start : start + 64])


KILLED_POOL = """
import os, sys, time
from neardup.dedup.shingle_sets import forked_map

def slow(item):
    time.sleep(60)
    return item

for _ in forked_map(slow, range(4), None, 2):
    pass
"""


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (a container's init may leave the dead unreaped)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_end_with_a_parent_killed_outright() -> None:
    """SIGKILL (or the out-of-memory killer) gives a run no chance to stop its pool: its forked
    workers end with it instead of waiting on their pipes for ever, holding its memory."""
    parent = subprocess.Popen([sys.executable, "-c", KILLED_POOL])
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while len(workers := _children(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(workers) == 2, workers
        time.sleep(0.5)  # the workers' initializer has run
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while any(map(_running, workers)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(_running, workers)), "a worker outlived its parent"
    finally:
        parent.kill()
        for pid in workers:  # reparented by now: not the parent's children any more
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_a_full_disk_under_the_spill_is_one_line_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spill that fills its disk ends the run with one line naming --tmp-dir and --memory
    (the library's parameters in Python), writes no output and leaves no spill file."""
    written = BandKeys._write_run

    def full(self: BandKeys) -> None:
        written(self)  # the spill file is made, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(BandKeys, "_write_run", full)
    source = shared_file("dev/en_news.jsonl")
    spill = tmp_path / "spill"
    spill.mkdir()
    with pytest.raises(OutputError, match=r"filled its disk .*give tmp_dir a folder.*larger memory budget"):
        dedup_documents(read_records(source), settings=DedupSettings(memory=1 << 20, tmp_dir=str(spill)))
    assert list(spill.iterdir()) == []
    pairs = tmp_path / "pairs.jsonl"
    arguments = ["dedup", str(source), "--pairs", str(pairs), "--memory", "1M", "--tmp-dir", str(spill)]
    outcome = CliRunner().invoke(main, arguments)
    assert outcome.exit_code != 0 and not pairs.exists() and list(spill.iterdir()) == []
    message = outcome.output.strip().splitlines()
    assert len(message) == 1 and "give --tmp-dir a folder" in message[0] and "--memory budget" in message[0]
