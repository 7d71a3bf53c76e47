"""Clusters of near-duplicates: connected components of the pair graph, and what to keep.

Keep policies decide each cluster's representative and which records survive dedup:

=========  ==============================================================================
first      the earliest record (input order) represents the cluster and is kept
longest    the record with the longest text represents it and is kept (ties: earliest)
drop-all   every record of a cluster of two or more is dropped; the earliest represents it
=========  ==============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError

IntArray = npt.NDArray[np.int64]
KEEP_POLICIES: tuple[str, ...] = ("first", "longest", "drop-all")


@dataclass(frozen=True)
class Clusters:
    """Per-record cluster facts, all arrays of length n (record order).

    ``cluster[r]`` is the index of the cluster's earliest record (a stable label),
    ``representative[r]`` the index chosen by the keep policy, ``keep[r]`` whether record r
    survives dedup and ``size[r]`` how many records its cluster has.
    """

    cluster: IntArray
    representative: IntArray
    keep: npt.NDArray[np.bool_]
    size: IntArray

    @property
    def count(self) -> int:
        """Number of clusters, singletons included."""
        return int(np.count_nonzero(self.cluster == np.arange(self.cluster.size)))


def check_keep(policy: str) -> str:
    if policy not in KEEP_POLICIES:
        raise ConfigError(f"unknown keep policy {policy!r}; choose one of {', '.join(KEEP_POLICIES)}")
    return policy


def components(n: int, i: npt.ArrayLike, j: npt.ArrayLike) -> IntArray:
    """Connected components of the graph with edges (i, j); each record's label is the index
    of its component's earliest record."""
    from scipy.sparse import coo_matrix  # scipy loads on use: `neardup --help` must stay fast
    from scipy.sparse.csgraph import connected_components

    left = np.asarray(i, dtype=np.int64)
    right = np.asarray(j, dtype=np.int64)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    graph = coo_matrix((np.ones(left.size, dtype=np.int8), (left, right)), shape=(n, n)).tocsr()
    _, labels = connected_components(graph, directed=False)
    first = np.full(int(labels.max()) + 1, n, dtype=np.int64)
    np.minimum.at(first, labels, np.arange(n, dtype=np.int64))
    labelled: IntArray = first[labels]
    return labelled


def cluster_records(
    n: int,
    i: npt.ArrayLike,
    j: npt.ArrayLike,
    keep: str = "first",
    lengths: npt.ArrayLike | None = None,
) -> Clusters:
    """Cluster n records from their near-duplicate pairs and apply a keep policy.

    ``lengths`` (text lengths) is needed by ``longest``.
    """
    check_keep(keep)
    cluster = components(n, i, j)
    index = np.arange(n, dtype=np.int64)
    size = np.bincount(cluster, minlength=n)[cluster] if n else np.empty(0, dtype=np.int64)
    if keep == "longest":
        if lengths is None:
            raise ConfigError("keep='longest' needs the records' text lengths")
        length = np.asarray(lengths, dtype=np.int64)
        if length.shape != (n,):
            raise ConfigError(f"lengths has shape {length.shape}; expected ({n},)")
        # Per cluster, the longest text first, then the earliest record.
        order = np.lexsort((index, -length, cluster))
        leaders = order[np.concatenate(([True], cluster[order][1:] != cluster[order][:-1]))] if n else order
        chosen = np.empty(n, dtype=np.int64)
        chosen[cluster[leaders]] = leaders
        representative = chosen[cluster]
    else:
        representative = cluster
    kept = size == 1 if keep == "drop-all" else representative == index
    return Clusters(cluster=cluster, representative=representative, keep=kept, size=size.astype(np.int64))
