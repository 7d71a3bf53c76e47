"""neardup on Apache Spark: ``neardup dedup`` for collections larger than one machine.

The job (:mod:`neardup.spark.job`) runs the same core as the local command — the same
Fingerprinter, block scheme and verification — in Spark tasks, and finds clusters with a
distributed connected-components algorithm. pyspark is an optional extra, so this module
imports nothing from it; :func:`require_pyspark` says how to install it.
"""

from __future__ import annotations

from importlib.util import find_spec

from ..errors import MissingDependencyError


def require_pyspark() -> None:
    """Raise :class:`MissingDependencyError` with the pip line when pyspark is absent."""
    if find_spec("pyspark") is None:
        raise MissingDependencyError("pyspark", "spark", "The Spark job")
