"""The public surface is exactly what __all__ lists, and every name resolves."""

from __future__ import annotations

import neardup


def test_all_names_resolve_and_are_sorted_uniquely() -> None:
    assert len(set(neardup.__all__)) == len(neardup.__all__)
    for name in neardup.__all__:
        assert getattr(neardup, name) is not None


def test_core_api_is_public() -> None:
    for name in (
        "simhash",
        "Fingerprinter",
        "FingerprintConfig",
        "hamming",
        "hamming_many",
        "NeardupError",
        "BlockScheme",
        "SimhashIndex",
        "Match",
        "find_all_pairs",
        "cluster_records",
    ):
        assert name in neardup.__all__


def test_the_dedup_pipeline_is_public() -> None:
    """The whole batch job is one library call, not only a command (issue 16)."""
    for name in ("dedup_documents", "DedupSettings", "DedupResult"):
        assert name in neardup.__all__
    assert neardup.dedup_documents([]).summary.records == 0


def test_errors_form_one_tree() -> None:
    errors = [getattr(neardup, name) for name in neardup.__all__ if name.endswith("Error")]
    assert all(issubclass(error, neardup.NeardupError) for error in errors)
    assert issubclass(neardup.ConfigError, ValueError) and issubclass(neardup.KeyNotFoundError, KeyError)
    assert "pip install 'neardup[stores]'" in str(neardup.MissingDependencyError("redis", "stores", "Redis"))
