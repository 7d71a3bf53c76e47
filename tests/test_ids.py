"""Record ids (keys), one rule everywhere (docs/index.md, "Ids"): an id is what the input typed
it as (JSON string or number); ids on a command line are strings unless --int-ids, and then
canonical decimal only; no Unicode digit folding; every store holds the same ids (valid
Unicode, no NUL, at most 255 UTF-8 bytes); a repeated id of the input is refused or counted
whatever the batch size; concurrent adds with skip never fail on a key another writer added.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from neardup import IncrementalDeduper, SimhashIndex
from neardup.cli.main import main
from neardup.dedup.documents import resolve_keys
from neardup.errors import InputError, KeyNotFoundError
from neardup.index.config import IndexConfig

from .conftest import write_lines

TEXT = "the quick brown fox jumps over the lazy dog near the river bank number {}"


def run(*args: str) -> tuple[int, str, str, BaseException | None]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr, result.exception


def no_traceback(code: int, err: str, exception: BaseException | None) -> None:
    assert exception is None or isinstance(exception, SystemExit), repr(exception)
    assert "Traceback" not in err
    assert code in (0, 1, 2)


def filled(tmp_path: Path, *ids: Any, name: str = "ids.db") -> str:
    url = f"sqlite:///{tmp_path}/{name}"
    docs = write_lines(
        tmp_path / f"{name}.jsonl", *({"id": key, "text": TEXT.format(n)} for n, key in enumerate(ids))
    )
    code, _, err, _ = run("index", "add", url, str(docs))
    assert code == 0, err
    return url


def stored_ids(url: str) -> set[Any]:
    with SimhashIndex.open(url, create=False) as index:
        return set(index)


# -- probe 6: ids on the command line ----------------------------------------------------------
def test_command_line_ids_are_strings_never_folded(tmp_path: Path) -> None:
    url = filled(tmp_path, 3, 42, "0042", "7")
    code, _, err, exception = run("index", "remove", url, "٣", "0042")  # Arabic-Indic three
    no_traceback(code, err, exception)
    assert code == 1 and "'٣' is not in the index" in err
    assert stored_ids(url) == {3, 42, "0042", "7"}  # all or none: nothing was removed
    code, _, err, _ = run("index", "remove", url, "0042", "7")
    assert code == 0, err
    assert stored_ids(url) == {3, 42}  # the string ids went; the int 42 stayed


@pytest.mark.parametrize("typed", ["²", "³", "--5", "٣", "0042", "+3", "-0", "3.0", " 3", "0x2a"])
def test_odd_ids_are_one_line_errors_with_and_without_int_ids(tmp_path: Path, typed: str) -> None:
    url = filled(tmp_path, 3, 42, -5)
    code, _, err, exception = run("index", "remove", url, "--", typed)
    no_traceback(code, err, exception)
    assert code == 1 and "not in the index" in err and len(err.strip().splitlines()) == 1
    code, _, err, exception = run("index", "remove", url, "--int-ids", "--", typed)
    no_traceback(code, err, exception)
    assert code == 1 and "plain decimal" in err and len(err.strip().splitlines()) == 1
    assert stored_ids(url) == {3, 42, -5}


def test_int_ids_remove_integer_ids_only(tmp_path: Path) -> None:
    url = filled(tmp_path, 3, "3", 42, -5, 0)
    code, _, err, _ = run("index", "remove", url, "--int-ids", "--", "3", "-5", "0")
    assert code == 0, err
    assert stored_ids(url) == {"3", 42}
    code, _, err, _ = run("index", "remove", url, "3")
    assert code == 0, err
    assert stored_ids(url) == {42}


def test_resolve_keys_takes_ids_as_strings_unless_int_ids(tmp_path: Path) -> None:
    url = filled(tmp_path, 7, "x")
    with SimhashIndex.open(url, create=False) as index:
        assert resolve_keys(index, ["7", "x"]) == [None, "x"]
        assert resolve_keys(index, ["7", "8"], int_ids=True) == [7, None]
        with pytest.raises(InputError, match="plain decimal"):
            resolve_keys(index, ["٧"], int_ids=True)


# -- probe 7: repeated ids, concurrent adds -------------------------------------------------------
def repeated_input(tmp_path: Path, same: bool = False) -> Path:
    return write_lines(
        tmp_path / "repeat.jsonl",
        {"id": "a", "text": TEXT.format(1)},
        {"id": "b", "text": TEXT.format(2)},
        {"id": "a", "text": TEXT.format(1) if same else "another text under the same id, lost silently"},
    )


@pytest.mark.parametrize("batch", [[], ["--batch-size", "1"], ["--batch-size", "2"]])
def test_a_repeated_id_is_counted_whatever_the_batch_size(tmp_path: Path, batch: list[str]) -> None:
    url = f"sqlite:///{tmp_path}/repeat.db"
    code, _, err, _ = run("index", "add", url, str(repeated_input(tmp_path, same=True)), *batch)
    assert code == 0, err
    assert "added 2, skipped 1 already stored (1 repeating an earlier id of the input)" in err
    assert stored_ids(url) == {"a", "b"}


@pytest.mark.parametrize("batch", [[], ["--batch-size", "1"], ["--batch-size", "2"]])
def test_a_repeated_id_with_another_text_names_both_lines(tmp_path: Path, batch: list[str]) -> None:
    """Issue 28: the repeat's text used to be dropped silently (the first was kept)."""
    url = f"sqlite:///{tmp_path}/repeat.db"
    source = repeated_input(tmp_path)
    code, _, err, _ = run("index", "add", url, str(source), *batch)
    assert code == 1 and f"{source}:3" in err and f"{source}:1" in err and "another text" in err


@pytest.mark.parametrize("batch", [[], ["--batch-size", "1"]])
def test_a_repeated_id_with_existing_fail_names_both_lines(tmp_path: Path, batch: list[str]) -> None:
    url = f"sqlite:///{tmp_path}/repeat.db"
    source = repeated_input(tmp_path)
    code, _, err, exception = run("index", "add", url, str(source), "--existing", "fail", *batch)
    no_traceback(code, err, exception)
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert f"{source}:3" in err and f"{source}:1" in err and "'a' appears again" in err


def test_concurrent_cli_adds_with_skip_never_fail(tmp_path: Path) -> None:
    """Real processes on one SQLite file, the same ids in the same order: each checks a batch,
    finds it free, and one of them loses the race to insert it."""
    source = write_lines(tmp_path / "many.jsonl", *({"id": n, "text": TEXT.format(n)} for n in range(1200)))
    url = f"sqlite:///{tmp_path}/race.db"
    code, _, err, _ = run(
        "index", "add", url, str(write_lines(tmp_path / "seed.jsonl", {"id": -1, "text": "x"}))
    )
    assert code == 0, err
    command = [sys.executable, "-m", "neardup", "index", "add", url, str(source), "--batch-size", "10"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    workers = [
        subprocess.Popen([*command, "--existing", "skip"], stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(4)
    ]
    errors = [worker.communicate(timeout=300)[1] for worker in workers]
    for worker, stderr in zip(workers, errors, strict=True):
        assert worker.returncode == 0, stderr
    added = [int(stderr.split("added ", 1)[1].split(",", 1)[0]) for stderr in errors]
    assert sum(added) == 1200  # every record stored exactly once, by one of them
    with SimhashIndex.open(url, create=False) as index:
        assert len(index) == 1201


def racing_adds(url: str, rounds: int = 30, writers: int = 4, size: int = 40) -> list[int]:
    """Writers that add overlapping batches at the same moment, with existing="skip"; how many
    each added. Each writer has its own connection."""
    barrier = threading.Barrier(writers)
    added = [0] * writers
    failures: list[BaseException] = []

    def write(number: int) -> None:
        try:
            with SimhashIndex.open(url, create=False) as index:
                for round_number in range(rounds):
                    keys = [f"r{round_number}-{key}" for key in range(size)]
                    keys = keys[number * 5 :] + keys[: number * 5]  # overlapping, in another order
                    barrier.wait()
                    flags = index.add_many(keys, np.arange(size, dtype=np.uint64), existing="skip")
                    added[number] += sum(flags)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=write, args=(number,)) for number in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    return added


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_storage_skip_adds_race_safely(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = {
        "sqlite": lambda: f"sqlite:///{tmp_path}/race.db",
        "postgres": lambda: str(request.getfixturevalue("fresh_postgres_url")),
        "redis": lambda: str(request.getfixturevalue("fresh_redis_url")),
    }[backend]()
    SimhashIndex.open(url, IndexConfig()).close()
    added = racing_adds(url)
    assert sum(added) == 30 * 40
    with SimhashIndex.open(url, create=False) as index:
        assert len(index) == 30 * 40


# -- probe 9: one id rule for every store, errors with file:line ----------------------------------
BAD_IDS = [("a\u0000b", "NUL"), ("é" * 128, "256 UTF-8 bytes"), ("x" * 300, "300 UTF-8 bytes")]


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres", "mysql", "redis"])
def test_every_store_refuses_the_same_ids(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = {
        "memory": lambda: "memory://",
        "sqlite": lambda: f"sqlite:///{tmp_path}/rule.db",
        "postgres": lambda: str(request.getfixturevalue("fresh_postgres_url")),
        "mysql": lambda: str(request.getfixturevalue("fresh_mysql_url")),
        "redis": lambda: str(request.getfixturevalue("fresh_redis_url")),
    }[backend]()
    with SimhashIndex.open(url, IndexConfig()) as index:
        for bad, why in BAD_IDS:
            with pytest.raises(InputError, match=why):
                index.add_many(["fine", bad], [1, 2])
            with pytest.raises(InputError, match=why):
                IncrementalDeduper(index).check_and_add(bad, 3)
            assert index.get_many([bad]) == [None]
        assert len(index) == 0  # nothing of a refused batch was stored
        index.add_many(["é" * 127 + "x", "y" * 255, 10**254], [1, 2, 3])  # at the limit
        assert len(index) == 3 and index.get("y" * 255).fingerprint == 2
        with pytest.raises(KeyNotFoundError):
            index.remove("a\u0000b")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_bad_ids_are_one_line_errors_naming_the_line(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = (
        f"sqlite:///{tmp_path}/bad.db"
        if backend == "sqlite"
        else str(request.getfixturevalue("fresh_postgres_url"))
    )
    for bad, why in BAD_IDS:
        source = write_lines(
            tmp_path / "bad.jsonl", {"id": "ok", "text": TEXT.format(1)}, {"id": bad, "text": TEXT.format(2)}
        )
        for command in (
            ["index", "add", url, str(source)],
            ["dedup", str(source), "--index", url, "--clusters", str(tmp_path / "c.jsonl")],
        ):
            code, _, err, exception = run(*command)
            no_traceback(code, err, exception)
            assert code == 1 and len(err.strip().splitlines()) == 1, err
            assert f"{source}:2" in err and why in err and repr(bad)[:20] in err
        code, _, err, _ = run("index", "add", url, str(source), "--on-error", "skip")
        assert code == 0 and "1 bad records skipped" in err, err
    assert stored_ids(url) == {"ok"}


def test_dedup_index_errors_name_file_and_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/inc.db"
    clusters = str(tmp_path / "clusters.jsonl")
    source = write_lines(
        tmp_path / "inc.jsonl",
        {"id": "a", "text": TEXT.format(1)},
        {"id": "b", "text": TEXT.format(2)},
        {"id": "a", "text": "a wholly different text under the id of line one"},
    )
    code, _, err, exception = run("dedup", str(source), "--index", url, "--clusters", clusters)
    no_traceback(code, err, exception)
    assert code == 1 and f"{source}:3" in err and f"{source}:1" in err and "position" not in err
    later = write_lines(tmp_path / "later.jsonl", {"id": "b", "text": "another text for b"})
    first = write_lines(tmp_path / "first.jsonl", {"id": "b", "text": TEXT.format(2)})
    assert run("dedup", str(first), "--index", url, "--clusters", clusters)[0] == 0
    code, _, err, _ = run("dedup", str(later), "--index", url, "--clusters", clusters)
    assert code == 1 and f"{later}:1" in err and "another text" in err and "--existing replace" in err
    assert stored_ids(url) == {"b"}
