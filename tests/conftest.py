"""Shared fixtures: the labelled data in ../shared/data (beside the clone) and a few
fingerprinters, which are built once per session because loading the default IDF costs ~0.3 s.

Markers (declared in pyproject.toml, applied here at collection): ``servers`` on every test that
uses a real database server (tests/servers.py), ``spark`` on the pyspark tests and ``slow`` on
the dataset-quality modules that take minutes and the single tests of 3 s or more
(SLOW_TESTS; they run in the full run and CI), so that the fast lane is
``python3 -m pytest -m "not servers and not spark and not slow"``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from neardup import Fingerprinter, SimhashIndex
from neardup.index.config import IndexConfig

pytest_plugins = ["tests.servers"]

REPOSITORY = Path(__file__).resolve().parents[1]
SHARED_DATA = REPOSITORY.parent / "shared" / "data"


def shared_file(relative: str) -> Path:
    """A file under ../shared/data, or skip the test with the reason."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"needs {relative} from ../shared/data beside the clone ({path} is absent)")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_lines(path: Path, *lines: bytes | str | dict[str, Any]) -> Path:
    """A JSONL file from raw bytes, text lines or objects (objects are JSON-encoded)."""
    parts = []
    for line in lines:
        if isinstance(line, dict):
            line = json.dumps(line, ensure_ascii=False)
        parts.append(line.encode("utf-8") if isinstance(line, str) else line)
    path.write_bytes(b"\n".join(parts) + b"\n")
    return path


# -- markers -------------------------------------------------------------------------------------
#: Fixtures of tests/servers.py that start (or reach) a real database server.
SERVER_FIXTURES = frozenset(
    {
        "redis_url",
        "postgres_url",
        "mysql_url",
        "mongodb_url",
        "fresh_redis_url",
        "fresh_postgres_url",
        "fresh_mysql_url",
        "fresh_mongodb_url",
        "throwaway_server",
    }
)
#: Parameter values that make a parametrised test ask for a server through
#: ``request.getfixturevalue`` (so the fixture is not among its static fixture names).
SERVER_PARAMETERS = frozenset(
    {"redis", "postgres", "postgresql", "mysql", "mariadb", "mongo", "mongodb", "mongo-buckets"}
)
#: Modules whose every test needs pyspark (and Java).
SPARK_MODULES = frozenset({"test_spark.py"})
#: Dataset-quality modules that take minutes: test_online_quality runs every online path (dedup
#: --index, index add/query, a real server under 8 clients) over the whole dev sets for F1 (its
#: shared fixture alone takes 60-120 s on 2 cores), and test_batch_online_agreement (every dev
#: news set through batch and three stores).
SLOW_MODULES = frozenset({"test_online_quality.py", "test_batch_online_agreement.py"})
#: Single tests of 6-12 s each that the fast lane leaves to the full run: a real headless
#: browser, and the longest stateful property run (by module and test or class name); and the
#: service's lock-out acceptance tests (20-40 s each: an attack runs while 100 probes are timed);
#: SIGKILLs at every statement of a group-table swap, a real server whose client leaves, a
#: body timed out, and two server processes on one store (4-8 s each); and the slowest of the
#: rest (4-7 s each: whole dev sets under a tiny memory budget, a 50 MB document, killed adds
#: and runs, a MongoDB that is down, concurrent command-line adds, the README's records lines).
SLOW_TESTS = frozenset(
    {
        ("test_memory_budget.py", "test_a_tiny_budget_gives_the_same_bytes_on_the_dev_sets"),
        (
            "test_memory_budget.py",
            "test_the_library_call_takes_the_budget_and_refuses_it_where_nothing_spills",
        ),
        ("test_memory_budget.py", "test_an_interrupted_run_leaves_no_files"),
        ("test_cli.py", "test_50_mb_document_works"),
        ("test_store_crash.py", "test_killed_add_keeps_every_acknowledged_batch"),
        ("test_readme_records_index.py", "test_the_incremental_records_lines_run_as_written"),
        ("test_store_redis_mongo.py", "test_mongo_down_is_unavailable_with_a_safe_message"),
        ("test_records_batched.py", "test_a_batch_of_queries_answers_as_each_row_checked_alone"),
        (
            "test_records_incremental.py",
            "test_a_killed_run_keeps_every_acknowledged_batch_and_a_rerun_completes_it",
        ),
        ("test_ids.py", "test_concurrent_cli_adds_with_skip_never_fail"),
        ("test_report.py", "test_plots_render_in_headless_chromium"),
        ("test_index.py", "TestIndexMachine"),
        ("test_service_lockout.py", "test_p99_under_an_endless_header"),
        ("test_service_lockout.py", "test_p99_under_slow_bodies_at_the_minimum_rate"),
        ("test_service_lockout.py", "test_p99_under_the_amplification_request"),
        ("test_records_atomic_table.py", "test_sigkill_at_any_point_of_replace_table_keeps_one_whole_table"),
        ("test_service_bounded.py", "test_a_real_server_stops_a_query_whose_client_left"),
        ("test_service_lockout.py", "test_a_body_must_arrive_within_the_body_timeout"),
        ("test_service_server.py", "test_two_servers_on_one_sqlite_file_never_split_a_family"),
        ("test_service_server.py", "test_worker_processes_share_one_store"),
        ("test_sketch_densify.py", "test_rows_densified_in_several_blocks_follow_the_definition"),
        ("test_candidates.py", "test_shingles_of_keys_the_n_grams_of_the_tokenizer"),
        ("test_sqlite_merges.py", "test_a_kill_at_any_step_of_a_merge_loses_nothing"),
        ("test_sqlite_merges.py", "test_a_store_past_the_length_limit_answers_like_a_memory_index"),
        ("test_records_query_ignore.py", "test_a_query_leaves_the_ignored_column_out_as_a_table_does"),
        ("test_service_server.py", "test_real_server_with_token"),
        ("test_readme_run.py", "test_run_section_block"),
        ("test_index.py", "test_long_sequence_crosses_tail_segments_merging_and_compaction"),
    }
)
#: Warnings that test code (not neardup) causes, ignored for those tests only, by (module,
#: function): pyproject.toml turns every other warning into an error.
KNOWN_TEST_WARNINGS = {
    # TODO(tests/test_store_crash.py, kill_after): the killed add's stdout and stderr pipes are
    # never closed (process.stdout/stderr.close(), or Popen as a context manager).
    ("test_store_crash.py", "test_killed_add_keeps_every_acknowledged_batch"): (
        r"ignore:unclosed file <_io.TextIOWrapper name=\d+ encoding=:ResourceWarning"
    ),
}


def needs_servers(item: pytest.Item) -> bool:
    if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(
        isinstance(value, str) and value in SERVER_PARAMETERS for value in callspec.params.values()
    )


def needs_spark(item: pytest.Item) -> bool:
    return item.path.name in SPARK_MODULES or "spark" in getattr(item, "originalname", item.name)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark server, Spark and slow tests; a test that asks for a server without being marked
    fails (tests/servers.py checks), so the fast lane cannot start servers unnoticed."""
    for item in items:
        if needs_servers(item):
            item.add_marker(pytest.mark.servers)
        if needs_spark(item):
            item.add_marker(pytest.mark.spark)
        names = {getattr(item, "originalname", item.name), getattr(item.parent, "name", "")}
        if item.path.name in SLOW_MODULES or any((item.path.name, name) in SLOW_TESTS for name in names):
            item.add_marker(pytest.mark.slow)
        known = KNOWN_TEST_WARNINGS.get((item.path.name, getattr(item, "originalname", item.name)))
        if known is not None:
            item.add_marker(pytest.mark.filterwarnings(known))


@pytest.fixture(scope="session")
def default_fingerprinter() -> Fingerprinter:
    return Fingerprinter()


def with_option(url: str, option: str) -> str:
    """The store URL with one more query option (``prefix=P``, ``table=T``)."""
    return url + ("&" if "?" in url else "?") + option


@pytest.fixture
def opened() -> Iterator[Callable[..., SimhashIndex]]:
    """``SimhashIndex.open`` whose indexes are closed after the test (some test modules
    define their own ``opened`` over a parametrised store)."""
    indexes: list[SimhashIndex] = []

    def open_index(url: str, config: IndexConfig | None = None) -> SimhashIndex:
        index = SimhashIndex.open(url, config)
        indexes.append(index)
        return index

    yield open_index
    for index in indexes:
        index.close()
