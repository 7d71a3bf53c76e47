"""The online paths keep the batch search's quality: pairwise F1 >= 0.95 on dev zh_news and
en_news, with default options and a fresh SQLite index each, for

- ``neardup dedup DEV --index URL --clusters FILE`` (each record's cluster id),
- ``neardup index add URL DEV`` then ``neardup index query URL DEV`` (each record's matches as
  pairs),
- a real ``neardup serve URL`` given one ``POST /v1/check`` per record by 8 concurrent clients
  (each answer's cluster id).

The paths are benchmarks/online_quality.py's own functions (that script prints the same table
with per-path timings). Here the command-line paths run in a background thread while the
served ones are checked, which keeps the module under a minute on 2 cores; the figures are
printed (visible with ``-s``).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("uvicorn", reason="the serve path needs the 'service' extra (uvicorn, httpx)")
pytest.importorskip("httpx", reason="the serve path needs the 'service' extra (uvicorn, httpx)")

REPOSITORY = Path(__file__).resolve().parents[1]
DEV = REPOSITORY.parent / "shared" / "data" / "dev"
CLIENTS = 8


def _benchmark() -> ModuleType:
    """benchmarks/online_quality.py (benchmarks/ is not a package), loaded by path."""
    name = "neardup_online_quality"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPOSITORY / "benchmarks" / "online_quality.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


online_quality = _benchmark()
SETS: tuple[str, ...] = online_quality.SETS
PATHS: tuple[str, ...] = online_quality.PATHS
COMMAND_PATHS = tuple(path for path in PATHS if path != "serve")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Any]]:
    """Every (set, path) of the sets present: its Result, or the exception it raised. The
    command-line paths run one after another in a background thread while this thread runs
    each set's serve path (one server per set)."""
    present = {name: DEV / f"{name}.jsonl" for name in SETS if (DEV / f"{name}.jsonl").exists()}
    if not present:
        yield {}
        return
    folder = tmp_path_factory.mktemp("online-quality")
    sets = {name: online_quality.load_set(path) for name, path in present.items()}

    def run(name: str, path: str) -> Any:
        url = f"sqlite:///{folder}/{name}-{path}.db"
        return online_quality.run_path(sets[name], path, url, folder, CLIENTS)

    found: dict[tuple[str, str], Any] = {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending: dict[tuple[str, str], Future[Any]] = {
            (name, path): pool.submit(run, name, path) for name in sets for path in COMMAND_PATHS
        }
        for name in sets:  # the server is started from this thread, which outlives it
            try:
                found[(name, "serve")] = run(name, "serve")
            except Exception as exc:
                found[(name, "serve")] = exc
        for key, future in pending.items():
            error = future.exception()
            found[key] = error if error is not None else future.result()
    print(f"\n{online_quality.TABLE_HEAD}")
    for (name, path), result in ((key, found[key]) for key in ((n, p) for n in sets for p in PATHS)):
        failed = isinstance(result, BaseException)
        print(f"| {name} | {path} | error: {result!r} |" if failed else result.row())
    print("(seconds: the command-line paths ran beside the serve paths, sharing the cores)")
    print(online_quality.verdict([r for r in found.values() if not isinstance(r, BaseException)]))
    yield {**found, ("folder", ""): folder}


@pytest.fixture(params=SETS)
def set_name(request: pytest.FixtureRequest) -> str:
    name = str(request.param)
    if not (DEV / f"{name}.jsonl").exists():
        pytest.skip(f"needs dev/{name}.jsonl from ../shared/data beside the clone ({DEV} lacks it)")
    return name


@pytest.fixture(params=PATHS)
def path_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_online_path_reaches_f1(outcomes: dict[tuple[str, str], Any], set_name: str, path_name: str) -> None:
    result = outcomes[(set_name, path_name)]
    if isinstance(result, BaseException):
        raise result
    scores = result.scores
    print(
        f"\n{set_name} {path_name}: F1 {scores.f1:.4f} precision {scores.precision:.4f} "
        f"recall {scores.recall:.4f} ({scores.true_positives}/{scores.gold_pairs} gold pairs found, "
        f"{scores.predicted_pairs} predicted) in {result.seconds:.1f} s"
    )
    assert result.records == len(online_quality.read_jsonl(DEV / f"{set_name}.jsonl"))
    assert scores.gold_pairs > 500  # the whole set was scored: 694 (zh) and 1,410 (en) gold pairs
    assert scores.f1 >= online_quality.TARGET_F1, f"{set_name} {path_name}: F1 {scores.f1:.4f}"


def test_online_predictions_score_the_same_with_neardup_eval(outcomes: dict[tuple[str, str], Any]) -> None:
    """The prediction files each path leaves are what ``neardup eval`` reads, and it gives
    the figures the library's metrics gave (zh_news: one set is enough to tie them)."""
    name = "zh_news"
    if not (DEV / f"{name}.jsonl").exists():
        pytest.skip(f"needs dev/{name}.jsonl from ../shared/data beside the clone ({DEV} lacks it)")
    folder: Path = outcomes[("folder", "")]
    files = {
        "dedup": f"{name}-dedup-clusters.jsonl",
        "index": f"{name}-index-pairs.jsonl",
        "serve": f"{name}-serve-clusters.jsonl",
    }
    for path, file in files.items():
        result = outcomes[(name, path)]
        if isinstance(result, BaseException):
            pytest.fail(f"{name} {path} failed, so its predictions cannot be scored: {result!r}")
        command = [sys.executable, "-m", "neardup", "eval", str(DEV / f"{name}.jsonl"), str(folder / file)]
        done = subprocess.run([*command, "--format", "json"], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        scored = json.loads(done.stdout)
        expected = result.scores
        assert (scored["predicted_pairs"], scored["true_positives"], scored["gold_pairs"]) == (
            expected.predicted_pairs,
            expected.true_positives,
            expected.gold_pairs,
        ), path
