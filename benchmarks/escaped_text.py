"""``neardup dedup --search simhash -k 3`` on raw text with its transport left in: precision
(the share of reported pairs whose shingle Jaccard is >= 0.5) and recall, before and after
issue 32's saturating weights and escape-aware normalizer, side by side in one run.

Corpora (../shared/data/raw, nobody here wrote them): en_reuters.jsonl (Reuters bodies, their
line wrapping kept) and zh_news.txt (one People's Daily paragraph a line, each a document).
Each is run as it is (``clean``) and as a copy the way a crawler or an export leaves text
(``escaped``): HTML-escaped (``&amp;``, ``&lt;IBM&gt;``), every paragraph in ``<p>…</p>`` with
a ``&nbsp;`` indent, line breaks written as the two characters ``\\n`` (Reuters keeps its
wrapping, Chinese gets one after every sentence) and a ``<br/>`` before the last line.

Ground truth: every pair of the clean texts whose character-shingle Jaccard is >= 0.5, exact,
by one sparse product over all pairs (``scale_quality.brute_force``, the shingles of
``neardup.similarity.shingles``). The same pairs are the truth for the escaped copy: escaping
changes how a text is written, not what it says.

Runs (subprocesses, the real command): ``base`` is the command of ``--base-src`` (a
``git worktree`` of the commit before, on PYTHONPATH); ``legacy`` is this tree with the
settings that restore the old behaviour (``term_frequency = "raw"``, ``max_share = 1.0``,
``normalizer_version = 1`` in a ``--config`` file: what a stored index of before keeps);
``unescape`` the old weights with the new normalizer; ``new`` is this tree's defaults.
``--default`` adds the default search (LSH) on the same copies (base and new only: the
weights do not reach it, the normalizer does).

    git worktree add -f /work/h32a-base <base commit>
    nice -n 19 python3 benchmarks/escaped_text.py --base-src /work/h32a-base/src
    nice -n 19 python3 benchmarks/escaped_text.py --langs zh --default
    nice -n 19 python3 benchmarks/escaped_text.py --speed

``--speed`` instead times what the change costs: warm ``Fingerprinter.fingerprint_many`` (token
cache full, best of ``--repeat``) of each clean corpus under the legacy settings and the new
defaults, in this process, alternating, and the normalizer alone (version 1 against 2).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scale_quality import SHARED, brute_force

SOURCE = Path(__file__).resolve().parents[1] / "src"
_ZH_SENTENCE_END = re.compile(r"(?<=[。！？])")
#: Settings files of the in-tree runs besides the defaults: the old behaviour, and the old
#: weights with the new normalizer (which of the two changes does what).
CONFIGS = {
    "legacy": 'term_frequency = "raw"\nmax_share = 1.0\nnormalizer_version = 1\n',
    "unescape": 'term_frequency = "raw"\nmax_share = 1.0\n',
}


def raw_documents(lang: str) -> list[dict[str, Any]]:
    """``{"id", "text"}`` of every document of the raw corpus of ``lang``."""
    if lang == "zh":
        lines = (SHARED / "raw" / "zh_news.txt").read_text(encoding="utf-8").splitlines()
        return [{"id": f"zh-{n}", "text": line} for n, line in enumerate(lines) if line.strip()]
    with (SHARED / "raw" / "en_reuters.jsonl").open(encoding="utf-8") as handle:
        return [{"id": record["id"], "text": record["text"]} for record in map(json.loads, handle)]


def escaped(text: str, lang: str) -> str:
    """``text`` as a crawl or export leaves it (module docstring)."""
    if lang == "zh":
        paragraphs = ["\n".join(s for s in _ZH_SENTENCE_END.split(text) if s)]
    else:
        paragraphs = [part.strip() for part in re.split(r"\n(?=\s)", text) if part.strip()]
    blocks = []
    for paragraph in paragraphs:
        lines = html.escape(paragraph, quote=False).split("\n")
        if len(lines) > 1:
            lines[-1] = "<br/>" + lines[-1]
        blocks.append("<p>&nbsp;&nbsp;" + "\n".join(lines) + "</p>")
    return "\n".join(blocks).replace("\n", "\\n")


def write(records: list[dict[str, Any]], path: Path) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def run(src: Path, path: Path, options: list[str], folder: Path) -> tuple[set[tuple[str, str]], float]:
    """The pairs ``neardup dedup`` of ``src`` reports on ``path``, and its seconds."""
    pairs = folder / "pairs.jsonl"
    environment = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, "-m", "neardup", "dedup", str(path), "--pairs", str(pairs), *options]
    started = time.perf_counter()
    subprocess.run(command, check=True, stderr=subprocess.DEVNULL, env=environment)
    seconds = time.perf_counter() - started
    rows = [json.loads(line) for line in pairs.read_text(encoding="utf-8").splitlines()]
    return {(min(r["a"], r["b"]), max(r["a"], r["b"])) for r in rows}, seconds


def cell(found: set[tuple[str, str]], gold: set[tuple[str, str]], seconds: float) -> str:
    right = len(found & gold)
    precision = right / len(found) if found else 1.0
    recall = right / len(gold) if gold else 1.0
    return f"{len(found):>7,} {precision:6.3f} {recall:6.3f} {seconds:6.1f}"


def speed(langs: list[str], repeat: int) -> None:
    """Warm fingerprinting and normalizing throughput, legacy against new (module docstring)."""
    from neardup import Fingerprinter
    from neardup.fingerprint.config import FingerprintConfig
    from neardup.text.normalize import Normalizer

    legacy = FingerprintConfig(term_frequency="raw", max_share=1.0, normalizer_version=1)
    print(f"{'corpus':10} {'step':12} {'legacy MB/s':>11} {'new MB/s':>9} {'new/legacy':>10}")
    for lang in langs:
        texts = [record["text"] for record in raw_documents(lang)]
        megabytes = sum(len(text.encode("utf-8")) for text in texts) / 1e6
        steps = {
            "fingerprint": (Fingerprinter(config=legacy).fingerprint_many, Fingerprinter().fingerprint_many),
            "normalize": (Normalizer(version=1).normalize_many, Normalizer().normalize_many),
        }
        for step, functions in steps.items():
            best = [float("inf"), float("inf")]
            for function in functions:
                function(texts)  # warm: token caches filled, tables built
            for _ in range(repeat):
                for side, function in enumerate(functions):
                    started = time.perf_counter()
                    function(texts)
                    best[side] = min(best[side], time.perf_counter() - started)
            old, new = megabytes / best[0], megabytes / best[1]
            corpus = f"{lang} {len(texts):,}"
            print(f"{corpus:10} {step:12} {old:11.1f} {new:9.1f} {new / old:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--langs", nargs="+", default=["en", "zh"], choices=["en", "zh"])
    parser.add_argument("--base-src", type=Path, help="src/ of the commit to compare with (a git worktree)")
    parser.add_argument("--default", action="store_true", help="also the default search (LSH)")
    parser.add_argument("--speed", action="store_true", help="time fingerprinting instead (docstring)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", nargs="+", default=["base", *CONFIGS, "new"], help="which runs (docstring)")
    args = parser.parse_args()
    if args.speed:
        speed(args.langs, args.repeat)
        return
    searches = [("simhash -k 3", ["--search", "simhash", "-k", "3"])]
    if args.default:
        searches.append(("default", []))
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        runs: list[tuple[str, Path, list[str]]] = []
        for name, settings in CONFIGS.items():
            (folder / f"{name}.toml").write_text(settings, encoding="utf-8")
            runs.append((name, SOURCE, ["--config", str(folder / f"{name}.toml")]))
        runs.append(("new", SOURCE, []))
        if args.base_src:
            runs.insert(0, ("base", args.base_src.resolve(), []))
        runs = [entry for entry in runs if entry[0] in args.runs]
        header = " | ".join(f"{name + ': pairs':>14} {'P':>6} {'R':>6} {'s':>6}" for name, _, _ in runs)
        print(f"{'corpus':10} {'copy':8} {'search':13} {'gold':>6} | {header}")
        for lang in args.langs:
            records = raw_documents(lang)
            gold = brute_force(records)
            copies = {
                "clean": write(records, folder / "clean.jsonl"),
                "escaped": write(
                    [{"id": r["id"], "text": escaped(r["text"], lang)} for r in records],
                    folder / "escaped.jsonl",
                ),
            }
            corpus = f"{lang} {len(records):,}"
            for copy, path in copies.items():
                for search, options in searches:
                    cells = []
                    for name, src, extra in runs:
                        if not options and name in CONFIGS:  # weights do not touch the default search
                            cells.append(f"{'-':>7} {'-':>6} {'-':>6} {'-':>6}")
                            continue
                        found, seconds = run(src, path, options + extra, folder)
                        cells.append(cell(found, gold, seconds))
                    print(
                        f"{corpus:10} {copy:8} {search:13} {len(gold):>6,} | " + " | ".join(cells), flush=True
                    )


if __name__ == "__main__":
    main()
