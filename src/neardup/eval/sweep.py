"""The parameter sweep: score a grid of fingerprint and search settings on labelled data and
rank them by F1 with what each costs, the guidance users otherwise ask peers for.

The grid is weighting × hash × bits × max_distance × verification. Fingerprints are computed
once per (weighting, hash, bits); each max_distance runs its own exact pair search and each
verification its own check of those candidates, so the seconds reported per row are what
``neardup dedup`` with those options spends after reading the input (fingerprints + pairs +
verification; model loading left out). Baselines can join the ranking at their defaults.

What ``neardup dedup`` runs with no options (the shingle LSH) is always scored too, so a
grid of Simhash settings cannot recommend one that does worse than doing nothing: the
recommendation (:func:`recommended`) is the default unless a grid setting beats its F1.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..arrays import IntArray
from ..blocks import BlockScheme
from ..dedup.batch import find_all_pairs
from ..dedup.pipeline import dedup_documents
from ..errors import ConfigError
from ..fingerprint.fingerprinter import Fingerprinter
from ..io.record import Record
from ..similarity.verify import Verifier
from .baselines import BASELINES, run_baseline
from .metrics import Gold, Prediction, Scores, evaluate

#: :attr:`Setting.method` of ``neardup dedup`` run with no options.
DEFAULT = "default"
DEFAULT_DESCRIPTION = "neardup dedup (default: --search lsh)"


@dataclass(frozen=True)
class Setting:
    """One point of the grid; or, with ``method`` set, the default search (:data:`DEFAULT`,
    with the check it ran) or a baseline (the rest blank)."""

    weighting: str = ""
    hash: str = ""
    bits: int = 0
    max_distance: int = 0
    verify: str = ""
    method: str = "neardup"

    def describe(self) -> str:
        if self.method == DEFAULT:
            return DEFAULT_DESCRIPTION
        if self.method != "neardup":
            return f"baseline {self.method}"
        return (
            f"--weighting {self.weighting} --hash {self.hash} --bits {self.bits} -k {self.max_distance}"
            + (f" --verify {self.verify}" if self.verify != "none" else "")
        )


@dataclass(frozen=True)
class SweepRow:
    """A scored setting and its cost in seconds (fingerprints, pair search, verification)."""

    setting: Setting
    scores: Scores
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())

    def as_dict(self) -> dict[str, Any]:
        s = self.setting
        return {
            "method": s.method,
            "weighting": s.weighting,
            "hash": s.hash,
            "bits": s.bits,
            "max_distance": s.max_distance,
            "verify": s.verify,
            "precision": round(self.scores.precision, 6),
            "recall": round(self.scores.recall, 6),
            "f1": round(self.scores.f1, 6),
            "adjusted_rand_index": round(self.scores.ari, 6),
            "pairs": self.scores.predicted_pairs,
            "seconds": round(self.total_seconds, 4),
            "seconds_by_step": {step: round(value, 4) for step, value in self.seconds.items()},
            "options": s.describe(),
        }


@dataclass(frozen=True)
class Grid:
    """The values to combine; every combination the block scheme allows is run."""

    weightings: Sequence[str] = ("tf", "tfidf", "tfidf-len", "composite")
    hashes: Sequence[str] = ("city64", "java")
    bits: Sequence[int] = (64,)
    distances: Sequence[int] = (3, 6, 10, 16)
    verifications: Sequence[str] = ("none", "jaccard", "minhash")
    baselines: Sequence[str] = ()

    @property
    def size(self) -> int:
        """Rows a sweep scores at most: the grid, the baselines and the default search."""
        settings = len(self.weightings) * len(self.hashes) * len(self.bits)
        return settings * len(self.distances) * len(self.verifications) + len(self.baselines) + 1


def run_sweep(
    texts: Sequence[str],
    gold: Gold,
    grid: Grid,
    *,
    titles: Sequence[str | None] | None = None,
    metadata: Sequence[Sequence[str] | None] | None = None,
    progress: Callable[[int], object] | None = None,
) -> list[SweepRow]:
    """Every setting of ``grid``, and the default search, scored against ``gold``, best F1
    first (the default, then the cheaper, first on ties)."""
    if len(texts) != len(gold):
        raise ConfigError(f"{len(texts)} texts but {len(gold)} gold records")
    gold_pairs = gold.pairs()
    rows: list[SweepRow] = []
    for bits in grid.bits:
        distances = [k for k in grid.distances if _allowed(bits, k)]
        for weighting in grid.weightings:
            for hash_name in grid.hashes:
                fingerprinter = Fingerprinter(bits=bits, weighting=weighting, hash=hash_name)
                started = time.perf_counter()
                fingerprints = fingerprinter.fingerprint_many(list(texts), titles)
                fingerprint_seconds = time.perf_counter() - started
                for k in distances:
                    started = time.perf_counter()
                    pairs = find_all_pairs(fingerprints, k, bits=bits)
                    pair_seconds = time.perf_counter() - started
                    for mode in grid.verifications:
                        started = time.perf_counter()
                        keep = np.ones(len(pairs), dtype=bool)
                        if mode != "none" and len(pairs):
                            keep = (
                                Verifier(mode)
                                .verify_texts(
                                    pairs.distance, pairs.i, pairs.j, texts, metadata, fingerprinter
                                )
                                .kept
                            )
                        verify_seconds = time.perf_counter() - started
                        scores = evaluate(
                            gold, Prediction.from_pairs(pairs.i[keep], pairs.j[keep]), gold_pairs=gold_pairs
                        )
                        seconds = {"fingerprints": fingerprint_seconds, "pairs": pair_seconds}
                        if mode != "none":
                            seconds["verify"] = verify_seconds
                        rows.append(SweepRow(Setting(weighting, hash_name, bits, k, mode), scores, seconds))
                        if progress is not None:
                            progress(1)
    rows.append(_default_row(texts, titles, gold, gold_pairs))  # after the grid: tokenizer loaded
    if progress is not None:
        progress(1)
    for name in grid.baselines:
        started = time.perf_counter()
        found = run_baseline(name, texts)
        seconds = {"total": time.perf_counter() - started}
        scores = evaluate(gold, Prediction.from_pairs(found.i, found.j), gold_pairs=gold_pairs)
        rows.append(SweepRow(Setting(method=name), scores, seconds))
        if progress is not None:
            progress(1)
    return rank(rows)


def _default_row(
    texts: Sequence[str],
    titles: Sequence[str | None] | None,
    gold: Gold,
    gold_pairs: tuple[IntArray, IntArray],
) -> SweepRow:
    """``neardup dedup`` with no options on the same records, its seconds those of its stages."""
    records = [
        Record(position, text, None if titles is None else titles[position], f"record {position + 1}")
        for position, text in enumerate(texts)
    ]
    result = dedup_documents(records)
    scores = evaluate(gold, Prediction.from_pairs(result.pairs.i, result.pairs.j), gold_pairs=gold_pairs)
    return SweepRow(Setting(verify=result.search.verify, method=DEFAULT), scores, dict(result.seconds))


def rank(rows: Sequence[SweepRow]) -> list[SweepRow]:
    """Best F1 first; among equal F1 (to 4 places) the default search, then the cheaper
    setting, first: a grid setting must beat the default to rank above it."""
    return sorted(
        rows,
        key=lambda row: (-round(row.scores.f1, 4), row.setting.method != DEFAULT, row.total_seconds),
    )


def recommended(rows: Sequence[SweepRow]) -> SweepRow | None:
    """The best-ranked setting of ``neardup dedup`` (never a baseline, which is for comparison
    only): the default search unless a grid setting beats its F1."""
    return next((row for row in rows if row.setting.method in ("neardup", DEFAULT)), None)


def _allowed(bits: int, k: int) -> bool:
    try:
        BlockScheme(bits, k)
    except ConfigError:
        return False
    return True


def check_grid(grid: Grid) -> Grid:
    """Refuse unknown names before any work."""
    unknown = [name for name in grid.baselines if name not in BASELINES]
    if unknown:
        raise ConfigError(f"unknown baseline {unknown[0]!r}; choose from {', '.join(BASELINES)}")
    if any(k < 0 for k in grid.distances):
        raise ConfigError("max distances must be >= 0")
    return grid


def format_rows(rows: Sequence[SweepRow], top: int | None = None, markdown: bool = False) -> str:
    """The ranking as a fixed-width or markdown table."""
    header = ["rank", "method", "weighting", "hash", "bits", "k", "verify", "P", "R", "F1", "ARI", "seconds"]
    lines: list[list[str]] = []
    for position, row in enumerate(rows[:top] if top else rows, start=1):
        s, sc = row.setting, row.scores
        lines.append(
            [
                str(position),
                s.method,
                s.weighting or "-",
                s.hash or "-",
                str(s.bits or "-"),
                str(s.max_distance) if s.method == "neardup" else "-",
                s.verify or "-",
                f"{sc.precision:.3f}",
                f"{sc.recall:.3f}",
                f"{sc.f1:.3f}",
                f"{sc.ari:.3f}",
                f"{row.total_seconds:.2f}",
            ]
        )
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out.extend("| " + " | ".join(line) + " |" for line in lines)
        return "\n".join(out)
    widths = [
        max(len(header[c]), *(len(line[c]) for line in lines)) if lines else len(header[c])
        for c in range(len(header))
    ]
    return "\n".join(
        "  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True))
        for line in [header, *lines]
    )
