"""neardup.collector: the cyclic garbage collector paused for a batch, and resumed as found."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from neardup.collector import collector_paused


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
