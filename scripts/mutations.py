#!/usr/bin/env python3
"""Mutation check: deliberate bugs that the test suite must catch.

Each mutation is one textual change to src/neardup (its text is looked for in every module, so
moving code between modules does not break it). For each, in turn, this script copies src/ to a
temporary folder, applies the change there (the working tree is never touched), and runs the
tests relevant to it (fast lane only: no servers, no Spark) with PYTHONPATH pointing at the
copy; then it prints "caught" (naming the first failing test) or "SURVIVED". The unchanged copy
is run first on the same tests, which must pass, or no verdict would mean anything.

    python3 scripts/mutations.py                 # all of them
    python3 scripts/mutations.py --only farm64   # some of them (repeat --only)
    python3 scripts/mutations.py --list          # what they are
    python3 scripts/mutations.py --every         # list every test that catches each one

Exit status: 0 when every mutation is caught, 1 when any survives, 2 when the unchanged code
fails its tests or a mutation no longer applies (its text is not in the source exactly once:
update the mutation together with the code).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
#: The fast lane: mutations are judged without database servers or Spark.
MARKERS = "not servers and not spark"


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str
    old: str  # found wherever it is under src/neardup (modules move), and must be there once
    new: str
    tests: tuple[str, ...]  # test files (relative to the repository) that must catch it


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "farm64",
        "the farm64 token hash is CityHash64 (the two agree up to 32 bytes only)",
        '"farm64": lambda token: int(farmhash.FarmHash64(token.encode("utf-8"))),',
        '"farm64": lambda token: int(cityhash.CityHash64(token.encode("utf-8"))),',
        ("tests/test_hashing.py",),
    ),
    Mutation(
        "farthest-match",
        "check-and-add gives a new record the cluster of its farthest match, not its nearest",
        "cluster = clusters_of[matches[0].key] if matches else key",
        "cluster = clusters_of[matches[-1].key] if matches else key",
        ("tests/test_incremental.py",),
    ),
    Mutation(
        "redacted-unchanged",
        "storage.urls.redacted() returns the URL unchanged, password and all",
        "    text = url if isinstance(url, str) else url_text(url)\n",
        "    text = url if isinstance(url, str) else url_text(url)\n    return text\n",
        ("tests/test_redaction.py", "tests/test_index_safety.py"),
    ),
    Mutation(
        "all-drops-a-name",
        "neardup.__all__ loses a public name (IdfModel) that the package still provides",
        '    "IdfModel",\n    "IncrementalDeduper",\n',
        '    "IncrementalDeduper",\n',
        ("tests/test_public_api.py",),
    ),
    Mutation(
        "all-reordered",
        "neardup.__all__ leaves its documented order (two names swapped)",
        '    "hamming",\n    "hamming_many",\n',
        '    "hamming_many",\n    "hamming",\n',
        ("tests/test_public_api.py",),
    ),
    Mutation(
        "identity-by-fingerprint",
        "a stored id sent again with another text of the same fingerprint is taken for a retry",
        "        return record.digest == digest\n",
        "        return record.fingerprint == fingerprint\n",
        ("tests/test_text_identity.py", "tests/test_mutations_changed_text.py"),
    ),
    Mutation(
        "resolve-int-first",
        "resolve_keys tries an id as an int before the string it was typed as",
        "    keys = parse_ids(texts, int_ids)\n    stored = opened.get_many(keys)\n",
        "    if not int_ids:\n"
        "        found: list[Key | None] = []\n"
        "        for text in texts:\n"
        "            tried: list[Key] = [int(text), text] if text.lstrip('-').isdigit() else [text]\n"
        "            records = opened.get_many(tried)\n"
        "            found.append(next((k for k, r in zip(tried, records) if r is not None), None))\n"
        "        return found\n"
        "    keys = parse_ids(texts, int_ids)\n    stored = opened.get_many(keys)\n",
        ("tests/test_mutations_resolve_keys.py", "tests/test_ids.py"),
    ),
    Mutation(
        "recent-postings-stale",
        "a process trusts its copy of the recent postings after another process has written",
        'return "current" if next_id == self.next_id else "behind"',
        'return "current"',
        ("tests/test_sql_runs.py",),
    ),
)


@dataclass
class Outcome:
    verdict: str  # "caught", "SURVIVED", "NOT APPLIED" or "ERROR"
    detail: str
    seconds: float


def copy_source(root: Path, destination: Path) -> Path:
    """src/ of ``root`` copied to ``destination``/src (no caches); returns the copy."""
    target = destination / "src"
    shutil.copytree(root / "src", target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    return target


def apply(mutation: Mutation, source: Path) -> tuple[str | None, str]:
    """Apply the mutation to the copy: (why it cannot be applied or None, the file changed)."""
    package = source / "neardup"
    found = [
        (path, text.count(mutation.old))
        for path in sorted(package.rglob("*.py"))
        if mutation.old in (text := path.read_text(encoding="utf-8"))
    ]
    total = sum(count for _, count in found)
    if total != 1:
        where = ", ".join(str(path.relative_to(source)) for path, _ in found) or "nowhere"
        return f"its text occurs {total} times under src/neardup ({where}); expected once", ""
    path = found[0][0]
    path.write_text(path.read_text(encoding="utf-8").replace(mutation.old, mutation.new), encoding="utf-8")
    return None, f"src/{path.relative_to(source).as_posix()}"


def environment(source: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), env.get("PYTHONPATH", "")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave no caches in the copy or the working tree
    return env


def imported_from(source: Path) -> Path:
    """Where ``import neardup`` resolves with the copy on PYTHONPATH (must be the copy)."""
    code = "import neardup, pathlib; print(pathlib.Path(neardup.__file__).resolve())"
    out = subprocess.run(
        [sys.executable, "-c", code], env=environment(source), capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip())


def run_tests(root: Path, source: Path, tests: list[str], every: bool = False) -> tuple[int, str]:
    """pytest on ``tests`` with the copy on PYTHONPATH: stops at the first failure unless
    ``every``; (exit code, output)."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        *([] if every else ["-x"]),
        "-q",
        "-p",
        "no:cacheprovider",
        "--no-header",
        "-rf",
        "-m",
        MARKERS,
        *tests,
    ]
    done = subprocess.run(command, cwd=root, env=environment(source), capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def failures(output: str) -> list[str]:
    """The ids of the failing tests, from pytest's -rf summary."""
    return re.findall(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", output, re.MULTILINE)


def first_failure(output: str) -> str:
    found = failures(output)
    return found[0] if found else (output.strip().splitlines() or ["(no output)"])[-1]


def existing(root: Path, tests: tuple[str, ...]) -> list[str]:
    return [test for test in tests if (root / test).exists()]


def judge(root: Path, mutation: Mutation, every: bool = False) -> Outcome:
    started = time.monotonic()
    tests = existing(root, mutation.tests)
    with tempfile.TemporaryDirectory(prefix=f"neardup-mutation-{mutation.name}-") as folder:
        source = copy_source(root, Path(folder))
        problem, changed = apply(mutation, source)
        if problem is not None:
            return Outcome("NOT APPLIED", problem, time.monotonic() - started)
        code, output = run_tests(root, source, tests, every)
    seconds = time.monotonic() - started
    if code == 1 and every:
        found = failures(output)
        listed = "".join(f"\n{'':26}{test}" for test in found)
        return Outcome("caught", f"in {changed}, by {len(found)} tests:{listed}", seconds)
    if code == 1:
        return Outcome("caught", f"in {changed}, by {first_failure(output)}", seconds)
    if code == 0:
        return Outcome("SURVIVED", f"in {changed}: {', '.join(tests)} all pass", seconds)
    # 2-5: interrupted, internal or usage error, no tests: not a verdict on the mutation.
    return Outcome("ERROR", f"pytest exited {code}: {first_failure(output)}", seconds)


def baseline(root: Path, mutations: list[Mutation]) -> tuple[bool, str]:
    """The unchanged copy passes every test the chosen mutations use."""
    tests = sorted({test for mutation in mutations for test in existing(root, mutation.tests)})
    with tempfile.TemporaryDirectory(prefix="neardup-mutation-baseline-") as folder:
        source = copy_source(root, Path(folder))
        where = imported_from(source)
        if not where.is_relative_to(source.resolve()):
            return False, f"import neardup resolves to {where}, not the copy in {source}"
        code, output = run_tests(root, source, tests)
    if code != 0:
        return False, f"pytest exited {code} on {' '.join(tests)}: {first_failure(output)}"
    return True, f"{len(tests)} test files pass unchanged"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    names = [mutation.name for mutation in MUTATIONS]
    parser.add_argument("--only", action="append", choices=names, help="run this mutation (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument(
        "--root",
        type=Path,
        default=REPOSITORY,
        help="a checkout whose src/ and tests/ to use (default: this repository)",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the run of the unchanged copy")
    parser.add_argument(
        "--every",
        action="store_true",
        help="run all the tests of each mutation and list every one that fails",
    )
    args = parser.parse_args(argv)
    chosen = [mutation for mutation in MUTATIONS if not args.only or mutation.name in args.only]
    if args.list:
        for mutation in chosen:
            print(f"{mutation.name:22} {mutation.what}")
            print(f"{'':22} tests: {' '.join(mutation.tests)}")
        return 0
    root = args.root.resolve()
    if not args.no_baseline:
        ok, detail = baseline(root, chosen)
        print(f"{'unchanged code':22} {'passes' if ok else 'FAILS'}: {detail}", flush=True)
        if not ok:
            return 2
    outcomes = []
    for mutation in chosen:
        outcome = judge(root, mutation, args.every)
        outcomes.append(outcome)
        print(f"{mutation.name:22} {outcome.verdict}: {outcome.detail} ({outcome.seconds:.0f} s)", flush=True)
    survived = sum(outcome.verdict == "SURVIVED" for outcome in outcomes)
    broken = sum(outcome.verdict not in ("caught", "SURVIVED") for outcome in outcomes)
    caught = len(outcomes) - survived - broken
    print(f"{caught} caught, {survived} survived, {broken} not judged, of {len(outcomes)} mutations")
    if broken:
        return 2
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
