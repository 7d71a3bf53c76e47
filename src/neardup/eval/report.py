"""``neardup report``: one self-contained HTML file of plots (matplotlib, embedded as base64 PNG)
from :mod:`neardup.eval.measures`.

The page carries a tiny script that counts the images the browser decoded and writes the
count into ``<body data-rendered>``, so a headless browser can check that every plot renders.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import MissingDependencyError
from .measures import Curve
from .metrics import Gold

_SCRIPT = """
window.addEventListener('load', function () {
  var images = Array.prototype.slice.call(document.images);
  var ok = images.filter(function (img) { return img.complete && img.naturalWidth > 0; });
  document.body.setAttribute('data-rendered', String(ok.length));
  document.body.setAttribute('data-images', String(images.length));
});
"""
_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;color:#222}"
    "figure{margin:2em 0}img{max-width:100%;border:1px solid #ddd}figcaption{color:#555;font-size:.9em}"
    "table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:right}"
)


@dataclass(frozen=True)
class Figure:
    """One plot of the report: a title, the PNG bytes and a caption saying what it shows."""

    title: str
    png: bytes
    caption: str


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingDependencyError("matplotlib", "eval", "neardup report") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    _pyplot().close(figure)
    return buffer.getvalue()


def curves_figure(curves: Sequence[Curve], dataset: str) -> Figure:
    plt = _pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for curve in curves:
        left.plot(curve.distances, curve.precision, marker=".", label=curve.weighting)
        right.plot(curve.distances, curve.recall, marker=".", label=curve.weighting)
    for axis, name in ((left, "precision"), (right, "recall")):
        axis.set_xlabel("max Hamming distance k")
        axis.set_ylabel(name)
        axis.set_ylim(0, 1.02)
        axis.grid(alpha=0.3)
        axis.legend()
    return Figure(
        f"Precision and recall vs max distance per weighting ({dataset})",
        _png(figure),
        "Simhash alone (64 bits, city64), exact all-pairs search; pairs with heavy copies left out.",
    )


def histogram_figure(
    histograms: dict[str, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]], dataset: str
) -> Figure:
    plt = _pyplot()
    names = list(histograms)
    figure, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.2), sharey=True, squeeze=False)
    bins = np.arange(0, 66) - 0.5
    for axis, name in zip(axes[0], names, strict=True):
        duplicate, other = histograms[name]
        axis.hist(other, bins=bins, density=True, alpha=0.6, label="other pairs (sample)")
        axis.hist(duplicate, bins=bins, density=True, alpha=0.6, label="gold near-duplicates")
        axis.set_title(name)
        axis.set_xlabel("Hamming distance")
    axes[0][0].set_ylabel("share of pairs")
    axes[0][0].legend(fontsize=7)
    return Figure(
        f"Hamming distances of duplicate and non-duplicate pairs ({dataset})",
        _png(figure),
        "Where the two distributions overlap no k separates them; verification does.",
    )


def scaling_figure(times: dict[str, np.ndarray[Any, Any]]) -> Figure:
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6, 4))
    axis.loglog(times["n"], times["index"], marker="o", label="block index (all pairs + components)")
    shown = ~np.isnan(times["single_pass"])
    axis.loglog(times["n"][shown], times["single_pass"][shown], marker="s", label="Single-Pass (seed 002)")
    axis.set_xlabel("fingerprints N")
    axis.set_ylabel("seconds")
    axis.grid(alpha=0.3, which="both")
    axis.legend()
    return Figure(
        "Time vs N: block index vs Single-Pass clustering",
        _png(figure),
        "Uniform 64-bit fingerprints with 1% planted near-duplicates, k = 3.",
    )


def hash_figure(measures: dict[str, tuple[float, np.ndarray[Any, Any]]]) -> Figure:
    plt = _pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = list(measures)
    left.barh(names, [measures[name][0] / 1e6 for name in names])
    left.set_xlabel("million tokens per second (one Python call each)")
    for name in names:
        right.plot(np.arange(64), measures[name][1], label=name, linewidth=1)
    right.axhline(0.5, color="black", linewidth=0.5)
    right.set_xlabel("bit position")
    right.set_ylabel("share of ones")
    right.set_ylim(0, 1)
    right.legend(fontsize=7)
    return Figure(
        "Hash functions: speed and bit balance",
        _png(figure),
        "A balanced hash sets each bit for half the tokens; tokens are the input's words.",
    )


def bucket_figure(measures: dict[str, Any]) -> Figure:
    plt = _pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    sizes = measures["bucket_sizes"]
    left.hist(sizes, bins=np.logspace(0, np.log10(max(int(sizes.max()), 2)) + 0.1, 30), log=True)
    left.set_xscale("log")
    left.set_xlabel("bucket size (first table)")
    left.set_ylabel("buckets")
    runs = measures["runs"]
    labels = list(runs)
    right.bar(labels, [runs[label][1] for label in labels])
    right.set_yscale("log")
    right.set_ylabel("candidate pairs verified")
    for position, label in enumerate(labels):
        seconds, _, pairs = runs[label]
        right.annotate(
            f"{seconds:.2f} s, {pairs} pairs", (position, runs[label][1]), ha="center", va="bottom"
        )
    right.set_title("second hashing")
    return Figure(
        "Bucket sizes on a skewed collection, without and with seed 000's second hash",
        _png(figure),
        f"Scheme: {measures['scheme']}. Both runs return the same pairs; the second hash only "
        "changes how many candidates are verified.",
    )


def render_html(title: str, figures: Sequence[Figure], notes: Sequence[str] = ()) -> str:
    """The self-contained page: every figure inline as a data: URL."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>",
        f"<script>{_SCRIPT}</script></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    parts.extend(f"<p>{html.escape(note)}</p>" for note in notes)
    for figure in figures:
        data = base64.b64encode(figure.png).decode("ascii")
        parts.append(
            f"<figure><h2>{html.escape(figure.title)}</h2>"
            f'<img alt="{html.escape(figure.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(figure.caption)}</figcaption></figure>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)


def evaluation_report(
    texts: Sequence[str],
    titles: Sequence[str | None],
    gold: Gold,
    *,
    names: tuple[str, str],
    weightings: Sequence[str],
    max_distance: int,
    sizes: Sequence[int],
    skew: tuple[int, float],
) -> tuple[str, int]:
    """The HTML page of ``neardup report`` and its number of plots: distance curves and
    histograms of ``texts`` against ``gold`` (``names``: the input's and the gold's file
    names), then synthetic scaling, hashing and bucket measures (``skew``: fingerprints and
    the share of them put in one bucket)."""
    from ..fingerprint.fingerprinter import Fingerprinter
    from . import measures

    name, gold_name = names
    curves, histograms = measures.distance_curves(texts, gold, list(weightings), max_distance, list(titles))
    words = sorted({w for tokens in Fingerprinter().word_tokens_many(texts[:2000]) for w in tokens})[:20_000]
    figures = [
        curves_figure(curves, name),
        histogram_figure(histograms, name),
        scaling_figure(measures.scaling_times(list(sizes))),
        hash_figure(measures.hash_measures(words)),
        bucket_figure(measures.bucket_measures(*skew)),
    ]
    notes = [f"{len(texts)} records of {name}; gold {gold_name}."]
    return render_html("neardup evaluation report", figures, notes), len(figures)
