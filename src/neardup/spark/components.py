"""Connected components of the pair graph over Spark DataFrames: large-star / small-star.

The algorithm of Kiveris et al., "Connected Components in MapReduce and Beyond" (SoCC
2014): with every node's neighbourhood N(u),

- *large-star* links each neighbour v > u to m(u) = min(N(u) ∪ {u});
- *small-star* links u and each neighbour v < u to the smallest of those.

Both keep the components and shrink their diameter; alternated, they end with every
component a star around its smallest node in O(log² n) rounds, each a few shuffles of the
edge list. Nothing is collected to the driver but one "done yet?" flag per round, so the
graph may be far larger than the driver's memory. Nodes are order keys, so a component's
root is its earliest record, the label :func:`neardup.dedup.clusters.components` gives.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

#: Rounds after which the job gives up: O(log² n) is ~1,000 for 2^30 nodes.
MAX_ROUNDS = 1000


def connected_components(
    edges: DataFrame,
    checkpoint: Callable[[DataFrame], DataFrame] | None = None,
    rounds: list[int] | None = None,
) -> DataFrame:
    """(node, root) for every node that has an edge (roots included, as their own root);
    ``edges`` has long columns ``u``, ``v``.

    ``checkpoint`` is applied to each round's edges to cut the lineage (default:
    ``localCheckpoint``); ``rounds``, when given, receives the number of rounds.
    """
    cut = checkpoint or (lambda frame: frame.localCheckpoint(eager=True))
    # Edges point from the larger node to the smaller: (u, v) with v < u.
    current = cut(
        edges.where(F.col("u") != F.col("v"))
        .select(F.greatest("u", "v").alias("u"), F.least("u", "v").alias("v"))
        .distinct()
    )
    for round_number in range(1, MAX_ROUNDS + 1):
        current = cut(_small_star(_large_star(current)))
        if _is_star_forest(current):
            if rounds is not None:
                rounds.append(round_number)
            roots = current.select(F.col("v").alias("node"), F.col("v").alias("root")).distinct()
            return current.select(F.col("u").alias("node"), F.col("v").alias("root")).unionByName(roots)
    raise RuntimeError(f"connected components did not converge in {MAX_ROUNDS} rounds")  # pragma: no cover


def _large_star(edges: DataFrame) -> DataFrame:
    both = edges.unionByName(edges.select(F.col("v").alias("u"), F.col("u").alias("v")))
    smallest = both.groupBy("u").agg(F.min("v").alias("m"))
    return (
        both.join(smallest, "u")
        .where(F.col("v") > F.col("u"))
        .select(F.col("v").alias("u"), F.least("m", "u").alias("v"))
        .distinct()
    )


def _small_star(edges: DataFrame) -> DataFrame:
    """``edges`` point down (v < u), so each node's smaller neighbours are its out-edges."""
    smallest = edges.groupBy("u").agg(F.min("v").alias("m"))
    neighbours = (
        edges.join(smallest, "u")
        .where(F.col("v") != F.col("m"))
        .select(F.col("v").alias("u"), F.col("m").alias("v"))
    )
    return neighbours.unionByName(smallest.select("u", F.col("m").alias("v"))).distinct()


def _is_star_forest(edges: DataFrame) -> bool:
    """Done when no node is both a child and a parent: every edge then points at a root,
    which is smaller than all its children, so it is its component's smallest node."""
    parents = edges.select(F.col("v").alias("node"))
    return parents.intersect(edges.select(F.col("u").alias("node"))).isEmpty()
