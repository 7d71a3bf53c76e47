"""Tests for :mod:`neardup.dedup.clusters`: connected components against a union-find written
here, the keep policies (first, longest, drop-all), sizes and counts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import ConfigError
from neardup.dedup.clusters import KEEP_POLICIES, Clusters, check_keep, cluster_records, components


def union_find_labels(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Each record's component, labelled by the component's smallest index."""
    parent = list(range(n))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)  # the smaller index stays the root
    return [root(x) for x in range(n)]


@st.composite
def graphs(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]]]:
    n = draw(st.integers(0, 40))
    if n == 0:
        return 0, []
    node = st.integers(0, n - 1)
    edges = draw(st.lists(st.tuples(node, node), max_size=2 * n))
    return n, edges


def split_edges(edges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    i = np.array([a for a, _ in edges], dtype=np.int64)
    j = np.array([b for _, b in edges], dtype=np.int64)
    return i, j


# --- components ------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(graph=graphs())
def test_components_match_union_find(graph: tuple[int, list[tuple[int, int]]]) -> None:
    n, edges = graph
    i, j = split_edges(edges)
    labels = components(n, i, j)
    assert labels.dtype == np.int64
    assert labels.shape == (n,)
    assert labels.tolist() == union_find_labels(n, edges)
    # lists and reversed edges give the same labels
    assert components(n, [a for a, _ in edges], [b for _, b in edges]).tolist() == labels.tolist()
    assert components(n, j, i).tolist() == labels.tolist()


@settings(max_examples=100, deadline=None)
@given(graph=graphs(), chunk=st.integers(1, 5))
def test_components_joined_a_chunk_of_edges_at_a_time(
    graph: tuple[int, list[tuple[int, int]]], chunk: int
) -> None:
    """Edges joined a few at a time (as a run of 10^7 records joins 2^22 at a time) give the
    labels of the union-find over all of them."""
    n, edges = graph
    i, j = split_edges(edges)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("neardup.dedup.clusters.EDGE_CHUNK", chunk)
        assert components(n, i, j).tolist() == union_find_labels(n, edges)


def test_components_small_examples() -> None:
    assert components(0, [], []).tolist() == []
    assert components(1, [], []).tolist() == [0]
    assert components(4, [], []).tolist() == [0, 1, 2, 3]
    # a chain 4-2-0 and a pair 1-3 given out of order
    assert components(5, [4, 3, 2], [2, 1, 0]).tolist() == [0, 1, 0, 1, 0]
    assert components(3, [1], [1]).tolist() == [0, 1, 2]  # a self-loop joins nothing
    assert components(3, [0, 0, 1], [1, 1, 0]).tolist() == [0, 0, 2]  # repeated edges


# --- keep policies ---------------------------------------------------------------------------


def reference_clusters(n: int, edges: list[tuple[int, int]], keep: str, lengths: list[int]) -> dict:
    labels = union_find_labels(n, edges)
    members: dict[int, list[int]] = {}
    for record, label in enumerate(labels):
        members.setdefault(label, []).append(record)
    if keep == "longest":
        # the longest text; ties go to the earliest record (max keeps the first maximum)
        chosen = {label: max(group, key=lambda r: lengths[r]) for label, group in members.items()}
    else:
        chosen = {label: group[0] for label, group in members.items()}
    representative = [chosen[label] for label in labels]
    size = [len(members[label]) for label in labels]
    kept = [s == 1 for s in size] if keep == "drop-all" else [representative[r] == r for r in range(n)]
    return {
        "cluster": labels,
        "representative": representative,
        "keep": kept,
        "size": size,
        "count": len(members),
    }


@settings(max_examples=100, deadline=None)
@given(graph=graphs(), keep=st.sampled_from(KEEP_POLICIES), data=st.data())
def test_cluster_records_match_the_reference(
    graph: tuple[int, list[tuple[int, int]]], keep: str, data: st.DataObject
) -> None:
    n, edges = graph
    lengths = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))  # many ties
    i, j = split_edges(edges)
    result = cluster_records(n, i, j, keep=keep, lengths=lengths)
    expected = reference_clusters(n, edges, keep, lengths)
    assert isinstance(result, Clusters)
    assert result.cluster.tolist() == expected["cluster"]
    assert result.representative.tolist() == expected["representative"]
    assert result.keep.tolist() == expected["keep"]
    assert result.size.tolist() == expected["size"]
    assert result.count == expected["count"]
    assert result.keep.dtype == np.bool_
    assert result.size.dtype == np.int64
    if keep != "drop-all":  # exactly one survivor per cluster
        assert int(result.keep.sum()) == result.count


def test_keep_first() -> None:
    result = cluster_records(6, [1, 4, 2], [3, 5, 4], keep="first")
    assert result.cluster.tolist() == [0, 1, 2, 1, 2, 2]
    assert result.representative.tolist() == [0, 1, 2, 1, 2, 2]
    assert result.keep.tolist() == [True, True, True, False, False, False]
    assert result.size.tolist() == [1, 2, 3, 2, 3, 3]
    assert result.count == 3


def test_keep_first_is_the_default_and_ignores_lengths() -> None:
    plain = cluster_records(3, [0], [2])
    assert plain.keep.tolist() == [True, True, False]
    assert cluster_records(3, [0], [2], lengths=[1, 1, 99]).keep.tolist() == [True, True, False]


def test_keep_longest_with_ties_to_the_earliest() -> None:
    lengths = [5, 9, 7, 9, 1, 7]
    result = cluster_records(6, [0, 1, 0, 4], [1, 3, 3, 5], keep="longest", lengths=lengths)
    # clusters {0, 1, 3} (lengths 5, 9, 9 → record 1), {2} and {4, 5} (→ record 5)
    assert result.cluster.tolist() == [0, 0, 2, 0, 4, 4]
    assert result.representative.tolist() == [1, 1, 2, 1, 5, 5]
    assert result.keep.tolist() == [False, True, True, False, False, True]
    assert result.size.tolist() == [3, 3, 1, 3, 2, 2]
    assert result.count == 3


def test_keep_longest_accepts_numpy_lengths() -> None:
    result = cluster_records(3, [0, 1], [1, 2], keep="longest", lengths=np.array([2, 2, 2], dtype=np.int32))
    assert result.representative.tolist() == [0, 0, 0]
    assert result.keep.tolist() == [True, False, False]


def test_keep_drop_all() -> None:
    result = cluster_records(5, [0, 3], [2, 4], keep="drop-all")
    assert result.keep.tolist() == [False, True, False, False, False]
    assert result.representative.tolist() == [0, 1, 0, 3, 3]  # the earliest represents
    assert result.size.tolist() == [2, 1, 2, 2, 2]
    assert result.count == 3


@pytest.mark.parametrize("keep", KEEP_POLICIES)
def test_no_pairs_keeps_everything(keep: str) -> None:
    result = cluster_records(4, [], [], keep=keep, lengths=[3, 1, 4, 1])
    assert result.cluster.tolist() == [0, 1, 2, 3]
    assert result.representative.tolist() == [0, 1, 2, 3]
    assert result.keep.tolist() == [True] * 4
    assert result.size.tolist() == [1] * 4
    assert result.count == 4


@pytest.mark.parametrize("keep", KEEP_POLICIES)
def test_no_records(keep: str) -> None:
    result = cluster_records(0, [], [], keep=keep, lengths=[])
    for array in (result.cluster, result.representative, result.keep, result.size):
        assert array.shape == (0,)
    assert result.count == 0


def test_unknown_policy() -> None:
    with pytest.raises(
        ConfigError, match="unknown keep policy 'last'; choose one of first, longest, drop-all"
    ):
        cluster_records(2, [0], [1], keep="last")
    with pytest.raises(ConfigError, match="unknown keep policy"):
        check_keep("First")


def test_check_keep_returns_the_policy() -> None:
    assert KEEP_POLICIES == ("first", "longest", "drop-all")
    for policy in KEEP_POLICIES:
        assert check_keep(policy) == policy


def test_longest_needs_lengths() -> None:
    with pytest.raises(ConfigError, match="needs the records' text lengths"):
        cluster_records(2, [0], [1], keep="longest")
    with pytest.raises(ConfigError, match=r"lengths has shape \(3,\); expected \(2,\)"):
        cluster_records(2, [0], [1], keep="longest", lengths=[1, 2, 3])
