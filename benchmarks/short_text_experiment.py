"""Seed 001 §5 reproduced: how Hamming distance tracks similarity for short Chinese strings.

Seed 001 builds strings of city names ("北京,上海,香港,…", 20 cities), edits them and reports
that a word similarity of about 0.8 already means a Hamming distance of 7, and only 0.94
brings it down to 4: Simhash's k = 3 is made for long web pages. Here, with neardup's default
64-bit fingerprints:

* synthetic: 2,000 strings of 4-12 city names (8-45 characters, the seed's range), each
  paired with a copy where 1-4 names are replaced, dropped or added (seeded, repeatable);
* real: every gold near-duplicate pair of ../shared/data/dev/zh_short.jsonl.

For each pair: word Jaccard (cities / jieba words), character-bigram Jaccard, and the Hamming
distance. Prints the table; ``--write-docs`` writes docs/results/short_text.md (table) and
docs/results/short_text.png (plot, needs matplotlib: pip install matplotlib, or the project's
`eval` extra), ``--out DIR`` the same two files to DIR.

    python benchmarks/short_text_experiment.py [--data ../shared/data/dev] [--write-docs | --out DIR]
"""

from __future__ import annotations

import argparse
import random
import sys
from itertools import pairwise
from pathlib import Path

import numpy as np
from dev_separation import DEFAULT_DATA, gold_pairs, load

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from neardup import Fingerprinter, hamming_many
from neardup.similarity.minhash import exact_jaccard
from neardup.similarity.verify import Shingles

CITIES = [
    *("北京", "上海", "香港", "深圳", "广州", "台北", "南京", "大连", "苏州", "青岛"),
    *("无锡", "佛山", "重庆", "宁波", "杭州", "成都", "武汉", "澳门", "天津", "沈阳"),
]
BINS = [0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0001]
OUT = Path(__file__).resolve().parents[1] / "docs" / "results"


def synthetic_pairs(count: int, seed: int = 1) -> list[tuple[list[str], list[str]]]:
    rnd = random.Random(seed)
    pairs = []
    for _ in range(count):
        words = rnd.sample(CITIES, rnd.randint(4, 12))
        copy = list(words)
        for _ in range(rnd.randint(1, 4)):
            action = rnd.choice(("replace", "drop", "add"))
            if action == "replace":
                copy[rnd.randrange(len(copy))] = rnd.choice(CITIES)
            elif action == "drop" and len(copy) > 2:
                copy.pop(rnd.randrange(len(copy)))
            else:
                copy.insert(rnd.randrange(len(copy) + 1), rnd.choice(CITIES))
        pairs.append((words, copy))
    return pairs


def measure(
    fingerprinter: Fingerprinter, left: list[str], right: list[str], word_sets: list[tuple[set, set]]
) -> dict[str, np.ndarray]:
    prints = fingerprinter.fingerprint_many(left + right)
    n = len(left)
    distance = hamming_many(prints[:n], prints[n:]).astype(np.int64)
    bigram = Shingles.of(left + right).jaccard(np.arange(n), np.arange(n) + n)
    words = np.array([exact_jaccard(a, b) for a, b in word_sets])
    return {"distance": distance, "bigram": bigram, "words": words}


def table_rows(name: str, data: dict[str, np.ndarray], key: str) -> list[str]:
    rows = []
    for low, high in pairwise(BINS):
        inside = (data[key] >= low) & (data[key] < high)
        if inside.sum() < 5:
            continue
        d = data["distance"][inside]
        rows.append(
            f"| {name} | {key} | [{low:.2f}, {min(high, 1.0):.2f}{']' if high > 1 else ')'} | {inside.sum()} "
            f"| {d.mean():.1f} | {np.median(d):.0f} | {np.percentile(d, 90):.0f} "
            f"| {np.mean(d <= 3):.2f} | {np.mean(d <= 10):.2f} | {np.mean(d <= 16):.2f} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--write-docs", action="store_true", help=f"write short_text.md and .png to {OUT}")
    where.add_argument("--out", type=Path, metavar="DIR", help="write short_text.md and .png to DIR")
    parser.add_argument("--count", type=int, default=2000)
    args = parser.parse_args()
    fingerprinter = Fingerprinter()

    synthetic = synthetic_pairs(args.count)
    results = {
        "synthetic": measure(
            fingerprinter,
            [",".join(a) for a, _ in synthetic],
            [",".join(b) for _, b in synthetic],
            [(set(a), set(b)) for a, b in synthetic],
        )
    }
    path = args.data / "zh_short.jsonl"
    if path.exists():
        records = load(path)
        gold = sorted(gold_pairs(records)[0])
        texts = [record["text"] for record in records]
        tokens = fingerprinter.word_tokens_many(texts)
        results["zh_short"] = measure(
            fingerprinter,
            [texts[a] for a, _ in gold],
            [texts[b] for _, b in gold],
            [(set(tokens[a]), set(tokens[b])) for a, b in gold],
        )
    else:
        print(f"{path} is absent: only the synthetic pairs are measured", file=sys.stderr)

    lines = [
        "# Short texts: Hamming distance against similarity (seed 001 §5)",
        "",
        "Generated by `python benchmarks/short_text_experiment.py`; default 64-bit fingerprints",
        "(tfidf-len, jieba words). *synthetic*: strings of 4-12 of seed 001's 20 city names with 1-4",
        "names replaced, dropped or added; *zh_short*: the gold near-duplicate pairs of",
        "../shared/data/dev/zh_short.jsonl. `words` is the Jaccard of the word sets, `bigram` of the",
        "character bigrams; H the Hamming distance.",
        "",
        "| pairs | similarity | range | n | mean H | median H | 90th pct H | H <= 3 | H <= 10 | H <= 16 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, data in results.items():
        for key in ("words", "bigram"):
            lines.extend(table_rows(name, data, key))
    print("\n".join(lines))
    out: Path | None = OUT if args.write_docs else args.out
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "short_text.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out / 'short_text.md'}", file=sys.stderr)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no plot: pip install matplotlib (or neardup[eval])", file=sys.stderr)
        return
    figure, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.5), squeeze=False)
    for axis, (name, data) in zip(axes[0], results.items(), strict=True):
        jitter = np.random.default_rng(0).uniform(-0.3, 0.3, len(data["distance"]))
        axis.scatter(data["words"], data["distance"] + jitter, s=4, alpha=0.3, label="pairs")
        centres, means = [], []
        for low, high in pairwise(BINS):
            inside = (data["words"] >= low) & (data["words"] < high)
            if inside.sum() >= 5:
                centres.append(float(data["words"][inside].mean()))
                means.append(float(data["distance"][inside].mean()))
        axis.plot(centres, means, "r-o", label="mean per bin")
        axis.axhline(3, color="grey", linestyle="--", label="k = 3")
        axis.set_xlabel("word Jaccard similarity")
        axis.set_ylabel("Hamming distance (64 bits)")
        axis.set_title(name)
        axis.legend()
    figure.tight_layout()
    figure.savefig(out / "short_text.png", dpi=110)
    print(f"wrote {out / 'short_text.png'}", file=sys.stderr)


if __name__ == "__main__":
    main()
