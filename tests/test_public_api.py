"""The public surface is exactly what __all__ lists, and every name resolves."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import types
import typing

import neardup
from neardup.fingerprint.fingerprinter import EncodedBatch


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


def _neardup_types(hint: object) -> set[type]:
    """The neardup classes a resolved annotation names (inside unions, generics and
    ``Callable``); builtins, numpy and typing constructs are not neardup's and are left out."""
    found: set[type] = set()
    stack = [hint]
    while stack:
        item = stack.pop()
        if isinstance(item, list | tuple):
            stack.extend(item)
            continue
        args = typing.get_args(item)
        if args:
            stack.append(typing.get_origin(item))
            stack.extend(args)
            continue
        if isinstance(item, type) and str(getattr(item, "__module__", "")).startswith("neardup"):
            found.add(item)
    return found


def _public_callables() -> list[tuple[str, object]]:
    """Every public callable: the functions and classes of ``__all__``, and each public
    method (``__init__`` included) of the public classes."""
    out: list[tuple[str, object]] = []
    for name in neardup.__all__:
        value = getattr(neardup, name)
        if inspect.isclass(value):
            for attr, member in vars(value).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                if isinstance(member, staticmethod | classmethod):
                    member = member.__func__
                elif isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member):
                    out.append((f"{name}.{attr}", member))
        elif inspect.isfunction(value):
            out.append((name, value))
    return out


#: Types a public method returns that stay internal on purpose, each with the reason.
_INTERNAL_RESULTS: dict[type, str] = {
    EncodedBatch: "the batch form of Fingerprinter.encode_many (fingerprints and feature counts), "
    "the pipeline's and the Spark job's step; callers use Fingerprinter.fingerprint_many",
}


def _annotation_names() -> dict[str, object]:
    """Names for annotations imported only under ``TYPE_CHECKING``: every class the loaded
    neardup modules define, by its own name (one name, one class: see the test below)."""
    names: dict[str, object] = {}
    for module_name, module in list(sys.modules.items()):
        if module_name == "neardup" or module_name.startswith("neardup."):
            for name, value in vars(module).items():
                if isinstance(value, type) and str(value.__module__).startswith("neardup"):
                    names.setdefault(name, value)
    return names


def test_every_type_in_a_public_signature_is_public() -> None:
    """What a documented call takes or returns can be named from ``neardup`` (httpx's rule):
    every neardup class in the parameters and return annotation of a public callable is in
    ``__all__``."""
    public = {getattr(neardup, name) for name in neardup.__all__ if inspect.isclass(getattr(neardup, name))}
    callables = _public_callables()
    public |= set(_INTERNAL_RESULTS)
    missing: dict[str, set[str]] = {}
    for where, function in callables:
        hints = typing.get_type_hints(function, localns=_annotation_names())
        for hint in hints.values():
            for cls in _neardup_types(hint) - public:
                missing.setdefault(f"{cls.__module__}.{cls.__qualname__}", set()).add(where)
    assert not missing, "\n".join(f"{name} (in {sorted(places)})" for name, places in sorted(missing.items()))


def test_no_private_name_is_public() -> None:
    for name in ("EncodedBatch", "hash_tokens", "signature_from_bytes", "signature_to_bytes"):
        assert name not in neardup.__all__
    assert all(not name.startswith("_") for name in neardup.__all__ if name != "__version__")


def test_the_verb_family_has_twins_of_one_shape() -> None:
    """``x(one, *, options)`` and ``x_many(batch, *, options)``: every option (a parameter with
    a default) of the index and dedup calls is keyword-only."""
    for cls in (neardup.SimhashIndex, neardup.IncrementalDeduper, neardup.DocumentIndex):
        for name, member in vars(cls).items():
            if name.startswith("_") or not inspect.isfunction(member):
                continue
            for parameter in inspect.signature(member).parameters.values():
                if parameter.default is not inspect.Parameter.empty:
                    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, (
                        f"{cls.__name__}.{name}({parameter.name})"
                    )


def test_get_is_one_element_of_get_many_and_remove_many_counts() -> None:
    index = neardup.SimhashIndex(bits=64, max_distance=3)
    index.add_many(["a", "b", 3], [1, 2, 3])
    assert index.get("a") == index.get_many(["a"])[0] == neardup.StoredRecord("a", 1)
    assert index.get("missing") is None and index.get_many(["missing"]) == [None]
    assert index.remove("a") is None
    assert index.remove_many(["b", 3]) == 2 and len(index) == 0
    assert index.remove_many([]) == 0


def test_internal_helpers_left_the_top_level_with_a_warning() -> None:
    """Helpers that were public and are internal now still resolve, for one version, with a
    DeprecationWarning that names where they live."""
    import warnings

    from neardup.dedup.batch import single_pass

    for name in ("single_pass", "brute_force_pairs", "combined_score", "estimate_jaccard"):
        assert name not in neardup.__all__
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert getattr(neardup, name) is not None
        assert any("import it from neardup." in str(w.message) for w in caught), name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert neardup.single_pass is single_pass
