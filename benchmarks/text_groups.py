"""How many texts the batch run's text store compresses together (``dedup.text_store.GROUP_TEXTS``):
the compression ratio, the compression time a text, and the time of one sparse read (one text
of a random group inflated, as the exact check reads texts once a large run's candidates are
spread thin), for groups of 1 to 16 texts, side by side on the same texts and in one process.

The texts are a slice of a ``scale_quality.py`` corpus (dev news among haystack documents):

    python3 benchmarks/text_groups.py --corpus /work/corpora/en_1000000.g2.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from pathlib import Path

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from neardup.dedup.text_store import COMPRESSION_LEVEL, GROUP_TEXTS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a JSON-lines corpus with a text field")
    parser.add_argument("--skip", type=int, default=200_000, help="lines skipped first (default 200000)")
    parser.add_argument("--texts", type=int, default=32_000, help="texts measured (default 32000)")
    parser.add_argument("--reads", type=int, default=4_000, help="sparse reads timed (default 4000)")
    args = parser.parse_args()
    with args.corpus.open(encoding="utf-8") as handle:
        lines = itertools.islice(handle, args.skip, args.skip + args.texts)
        encoded = [json.loads(line)["text"].encode("utf-8") for line in lines]
    raw = sum(map(len, encoded))
    print(f"{len(encoded):,} texts of {raw / len(encoded):,.0f} bytes on average; level {COMPRESSION_LEVEL}")
    header = f"{'group':>5} {'ratio':>6} {'compress µs/text':>17} {'sparse read µs':>15}"
    print(f"{header}   (today: {GROUP_TEXTS})")
    compressor, decompressor = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL), zstandard.ZstdDecompressor()
    for group in (1, 2, 4, 8, 16):
        start = time.perf_counter()
        starts = range(0, len(encoded), group)
        streams = [compressor.compress(b"".join(encoded[k : k + group])) for k in starts]
        packed = time.perf_counter() - start
        chosen = random.Random(1).sample(range(len(streams)), min(args.reads, len(streams)))
        start = time.perf_counter()
        for number in chosen:
            decompressor.decompress(streams[number])
        read = time.perf_counter() - start
        ratio = raw / sum(map(len, streams))
        per_text, per_read = 1e6 * packed / len(encoded), 1e6 * read / len(chosen)
        print(f"{group:>5} {ratio:>6.2f} {per_text:>17.1f} {per_read:>15.1f}")


if __name__ == "__main__":
    main()
