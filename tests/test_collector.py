"""neardup.collector: the cyclic garbage collector paused for a batch, and resumed as found."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from neardup import Index
from neardup.collector import collector_paused
from neardup.dedup.documents import IncrementalDeduper
from neardup.records.incremental import _Checker
from tests.test_records_incremental import feed, people_rows, write_csv


@pytest.fixture(autouse=True)
def collector_as_found() -> Iterator[None]:
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_a_pause_stops_the_collector_and_resumes_it() -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # nested
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still runs
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_caller_stays_off() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_error_inside_the_pause_resumes_the_collector() -> None:
    gc.enable()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("a batch failed")
    assert gc.isenabled()


def test_overlapping_pauses_on_threads_resume_when_the_last_ends() -> None:
    gc.enable()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with collector_paused():
            second_in.set()
            first_out.wait(5)
            seen.append(gc.isenabled())  # the first pause ended, this one has not

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == [False]
    assert gc.isenabled()


def test_a_records_batch_and_an_index_batch_are_checked_with_the_collector_paused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two checks that pause it (records and documents), seen from inside their batch."""
    gc.enable()
    seen: dict[str, bool] = {}

    def spy(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def inside(*args: Any, **kwargs: Any) -> Any:
            seen[name] = gc.isenabled()
            return method(*args, **kwargs)

        return inside

    monkeypatch.setattr(_Checker, "_add", spy("records", _Checker._add))
    monkeypatch.setattr(IncrementalDeduper, "_query_rows", spy("documents", IncrementalDeduper._query_rows))
    feed(write_csv(tmp_path / "first.csv", people_rows(2, 1, "a")), str(tmp_path / "records.db"))
    feed(write_csv(tmp_path / "later.csv", people_rows(1, 2, "b")), str(tmp_path / "records.db"))  # checked
    with Index.open(str(tmp_path / "texts.db")) as index:
        index.check_and_add_texts([("a", "the same words again and again"), ("b", "other words")])
    assert seen == {"records": False, "documents": False}
    assert gc.isenabled()
