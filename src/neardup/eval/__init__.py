"""Evaluation: scores against labelled data, the parameter sweep and the HTML report.

Pure functions over record positions live in :mod:`.metrics` and :mod:`.sweep`; file reading
in :mod:`.files`; the CLI adapters in :mod:`neardup.cli.eval`.
"""

from .metrics import Gold, Prediction, Recall, Scores, adjusted_rand_index, evaluate

__all__ = ["Gold", "Prediction", "Recall", "Scores", "adjusted_rand_index", "evaluate"]
