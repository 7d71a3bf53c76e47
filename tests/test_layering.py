"""The package layering of docs/layout.md, checked on the source: every import of every module
under src/neardup (including imports inside functions, which are dependencies all the same)
must go to a package its own package may use, and no two modules may import each other
through any chain.

Imports under ``if TYPE_CHECKING:`` are left out: they exist for annotations only and are
never executed, so they create neither a runtime dependency nor a circle (dedup-level types
named in a similarity signature, for example).
"""

from __future__ import annotations

import ast
from pathlib import Path

import neardup

SOURCE = Path(neardup.__file__).resolve().parent

#: Low to high. A package may import the packages listed for it (and itself), nothing else.
#: ``io`` sits at the bottom because it owns the Record type every pipeline reads (it imports
#: only errors); ``arrays`` (numpy helpers) and ``collector`` (the garbage collector paused for
#: a batch) are of the same rank as errors.
BASE = {"errors", "arrays", "collector"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "arrays": set(),
    "collector": set(),
    "distance": {"errors"},
    "blocks": {"errors", "distance"},
    "text": {"errors"},
    "io": {"errors"},
    "fingerprint": {*BASE, "distance", "text", "io"},
    "similarity": {*BASE, "distance", "blocks", "text", "fingerprint"},
    "storage": {*BASE, "distance", "blocks", "fingerprint", "similarity"},
    "index": {*BASE, "distance", "blocks", "fingerprint", "similarity", "storage"},
    "dedup": {*BASE, "distance", "blocks", "text", "io", "fingerprint", "similarity", "storage", "index"},
    "records": {*BASE, "distance", "text", "io", "fingerprint", "storage", "dedup"},  # storage.urls
    "eval": {*BASE, "blocks", "io", "fingerprint", "similarity", "dedup"},
    "service": {*BASE, "distance", "io", "storage", "index", "dedup", "records", "neardup"},
    "spark": {*BASE, "blocks", "text", "io", "fingerprint", "similarity", "dedup"},
    "cli": {
        *BASE,
        *("distance", "blocks", "text", "io", "fingerprint", "similarity", "storage", "index"),
        *("dedup", "records", "eval", "service", "spark", "neardup"),
    },
    # The package itself loads its public names lazily, by name, from the packages above.
    "neardup": {"errors"},
}


def module_name(path: Path) -> str:
    parts = ["neardup", *path.relative_to(SOURCE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


def package_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "neardup"
    return "cli" if parts[1] == "__main__" else parts[1]


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and _type_checking_only(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def imported_from(package: str, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` in ``package`` reads, relative levels resolved."""
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(module: str, source_file: Path | None = None) -> set[str]:
    """The neardup modules ``module`` imports (a name imported from a package that is itself
    a module counts as that module), read from its file or from ``source_file``."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    path = source_file or path
    targets: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names if alias.name.split(".")[0] == "neardup")
            continue
        source = imported_from(package, node)
        if source.split(".")[0] != "neardup":
            continue
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            targets.add(submodule if submodule in MODULES else source)
    return {target for target in targets if target in MODULES and target != module}


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_package_has_its_rule() -> None:
    assert {package_of(module) for module in MODULES} <= set(ALLOWED)


#: The arrows against the layers that are kept, each with its reason (at most two).
EXCEPTIONS = {
    # The spark-submit entry script runs the command line (spark-submit runs a file, and
    # docs/spark.md names this one); nothing imports it.
    ("neardup.spark.submit", "neardup.cli.main"),
}


def wrong_arrows(graph: dict[str, set[str]]) -> list[str]:
    return [
        f"{module} imports {target}"
        for module, targets in graph.items()
        for target in sorted(targets)
        if package_of(target) != package_of(module)
        and package_of(target) not in ALLOWED[package_of(module)]
        and (module, target) not in EXCEPTIONS
    ]


def test_imports_follow_the_layers() -> None:
    assert len(EXCEPTIONS) <= 2
    assert wrong_arrows(GRAPH) == []


def test_storage_never_imports_the_index_or_dedup() -> None:
    assert not [
        (module, target)
        for module, targets in GRAPH.items()
        if package_of(module) == "storage"
        for target in targets
        if package_of(target) in ("index", "dedup")
    ]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles() -> None:
    assert cycles(GRAPH) == []


def test_the_checks_see_a_wrong_arrow(tmp_path: Path) -> None:
    """``from ..dedup.batch import ...`` added to storage/base.py is refused, parsed from the
    text as the real modules are."""
    added = tmp_path / "base.py"
    added.write_text(
        MODULES["neardup.storage.base"].read_text(encoding="utf-8") + "\nfrom ..dedup import batch\n"
    )
    graph = {**GRAPH, "neardup.storage.base": imports_of("neardup.storage.base", added)}
    assert wrong_arrows(graph) == ["neardup.storage.base imports neardup.dedup.batch"]
    inside = tmp_path / "inside.py"
    inside.write_text("def later():\n    from ..index.simhash_index import SimhashIndex\n")
    assert imports_of("neardup.storage.base", inside) == {"neardup.index.simhash_index"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


MAX_FUNCTION_LINES = 60


def test_functions_stay_small() -> None:
    """Every function within 60 lines (from ``def`` to its last line) unless its docstring
    gives the reason in a line starting ``Long:``. Modules have no line cap: a module is one
    concept whatever its length, and a cap only invites splits along line counts."""
    too_long: list[str] = []
    for module, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            reason = any(
                line.strip().startswith("Long:") for line in (ast.get_docstring(node) or "").splitlines()
            )
            if size > MAX_FUNCTION_LINES and not reason:
                too_long.append(f"{module}.{node.name}: {size} lines")
    assert too_long == []


def test_batch_dedup_loads_no_store() -> None:
    """``neardup dedup`` without --index touches no store: importing its command loads no
    storage, index or service module (they load with --index, in the command's body)."""
    import subprocess
    import sys

    code = (
        "import sys, neardup.cli.dedup; "
        "print(' '.join(m for m in sys.modules if m.split('.')[:2] in "
        "(['neardup', 'storage'], ['neardup', 'index'], ['neardup', 'service'])))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.split() == []
