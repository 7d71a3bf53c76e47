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


#: Edges joined at a time by :func:`components`: its temporaries are a few times this many
#: indexes, whatever the number of pairs.
EDGE_CHUNK = 1 << 22


def components(n: int, i: npt.ArrayLike, j: npt.ArrayLike) -> IntArray:
    """Connected components of the graph with edges (i, j); each record's label is the index
    of its component's earliest record.

    The edges are joined :data:`EDGE_CHUNK` at a time: each chunk's edges, between the
    components found so far, are a small graph whose components merge those, so memory holds
    the labels and one chunk (a graph of every edge at once held several copies of it)."""
    from scipy.sparse import coo_matrix  # scipy loads on use: `neardup --help` must stay fast
    from scipy.sparse.csgraph import connected_components

    left = np.asarray(i, dtype=np.int64).reshape(-1)
    right = np.asarray(j, dtype=np.int64).reshape(-1)
    labels = np.arange(n, dtype=np.int64)  # each record's component so far, by its earliest
    renamed = np.arange(n, dtype=np.int64)  # a chunk's merges: old label -> new label
    position = np.empty(n, dtype=np.int64)  # a label's node in the chunk's graph
    touched = np.zeros(n, dtype=bool)
    for low in range(0, left.size, EDGE_CHUNK):
        a, b = labels[left[low : low + EDGE_CHUNK]], labels[right[low : low + EDGE_CHUNK]]
        joins = a != b
        if not joins.any():
            continue
        a, b = a[joins], b[joins]
        touched[a] = touched[b] = True
        roots = np.flatnonzero(touched)  # ascending
        touched[roots] = False
        position[roots] = np.arange(roots.size)
        edges = (np.ones(a.size, dtype=np.int8), (position[a], position[b]))
        graph = coo_matrix(edges, shape=(roots.size, roots.size))
        _, merged = connected_components(graph.tocsr(), directed=False)
        earliest = np.empty(int(merged.max()) + 1, dtype=np.int64)
        earliest[merged[::-1]] = roots[::-1]  # roots ascend: the first root of each wins
        renamed[roots] = earliest[merged]
        labels = renamed[labels]
        renamed[roots] = roots
    return labels


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
