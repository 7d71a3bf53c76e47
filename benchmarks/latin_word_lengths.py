"""Where tfidf-len's Latin-word length curve comes from: the mean and standard deviation of
the lengths of content words (non-stopwords of 2+ letters) in Reuters bodies.

    python benchmarks/latin_word_lengths.py [--data ../shared/data/raw] [--documents 3000]

Seed 000 fits a normal curve to Chinese term lengths (mu 4.51, sd 2.207); neardup uses this
script's figures, rounded, for Latin words (LATIN_LENGTH_MEAN / LATIN_LENGTH_SD in
src/neardup/fingerprint/weighting.py).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from importlib import resources
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from neardup.text.tokenize import read_word_list

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "raw"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--documents", type=int, default=3000)
    args = parser.parse_args()
    path = args.data / "en_reuters.jsonl"
    if not path.exists():
        sys.exit(f"{path} not found; pass --data")
    stopwords = read_word_list(str(resources.files("neardup.text").joinpath("stopwords", "en.txt")))
    lengths: list[int] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if number >= args.documents:
                break
            words = re.findall(r"[a-z]+", json.loads(line)["text"].lower())
            lengths += [len(word) for word in words if len(word) > 1 and word not in stopwords]
    print(f"{len(lengths)} content words from {args.documents} documents")
    print(f"mean length {statistics.mean(lengths):.2f}, standard deviation {statistics.pstdev(lengths):.2f}")


if __name__ == "__main__":
    main()
