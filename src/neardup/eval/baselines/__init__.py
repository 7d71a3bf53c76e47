"""Baselines for evaluation only: the methods the seeds compare Simhash with (classic Simhash,
Shingle/DSC, I-Match, VSM) and the external peers (PyPI ``simhash``, datasketch MinHashLSH,
both imported only when run)."""

from .methods import BASELINES, Baseline, ScoredPairs, run_baseline

__all__ = ["BASELINES", "Baseline", "ScoredPairs", "run_baseline"]
