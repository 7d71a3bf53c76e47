"""The public surface is exactly what __all__ lists, and every name resolves."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

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


def _all_order(name: str) -> tuple[int, str]:
    """The documented order of ``__all__`` (ruff's RUF022, isort-style): CONSTANTS, then
    Classes, then everything else (``__version__`` and functions), each alphabetically."""
    if name.isupper():
        return 0, name
    if name[0].isupper():
        return 1, name
    return 2, name


def test_all_is_in_the_documented_order() -> None:
    assert neardup.__all__ == sorted(neardup.__all__, key=_all_order)


def _public_objects() -> set[str]:
    """Every public name the package provides: the names it loads on first use, and those it
    binds itself (classes, functions and constants of neardup's modules; not submodules, nor
    helpers it imports from elsewhere such as ``import_module``)."""
    names = set(getattr(neardup, "_LAZY_MODULE", {}))
    for name, value in vars(neardup).items():
        if name.startswith("_") or name == "TYPE_CHECKING" or isinstance(value, types.ModuleType):
            continue
        if callable(value) and not str(getattr(value, "__module__", "")).startswith("neardup"):
            continue
        names.add(name)
    return names


def test_all_lists_every_public_name_the_package_binds() -> None:
    """Dropping a name from ``__all__`` (while still importing it) is caught here, and so is
    a stray name in ``__all__``; ``__version__`` is the one dunder that is public."""
    assert set(neardup.__all__) == _public_objects() | {"__version__"}


def test_every_name_in_all_imports_in_a_fresh_interpreter() -> None:
    """``from neardup import *`` binds each listed name (lazy ones included), and each is the
    object its home module defines."""
    code = (
        "import neardup\n"
        "namespace = {}\n"
        "exec('from neardup import *', namespace)\n"
        "missing = [n for n in neardup.__all__ if n not in namespace]\n"
        "print(missing)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    for module, names in neardup._LAZY.items():
        home = importlib.import_module(module, "neardup")
        for name in names:
            assert getattr(neardup, name) is getattr(home, name)
