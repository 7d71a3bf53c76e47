"""Stores are key → value containers (issue 29, item 3): no module under src/neardup/storage
imports the LSH and distance code (``neardup.similarity``, ``neardup.blocks``,
``neardup.distance``), not even for annotations, nor computes a Hamming distance, a popcount
or a scheme's keys. The index computes the posting keys and keeps the candidates within the
distance (:mod:`neardup.index.simhash_index`); these checks read the source, as
tests/test_layering.py does, and are shown to catch a pasted violation.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np

from neardup import SimhashIndex
from neardup.index.config import IndexConfig
from neardup.index.memory_blocks import MemoryBlockIndex
from neardup.index.simhash_index import search
from neardup.similarity.bands import BandScheme

from .test_layering import MODULES, imported_from, package_of

#: What a store must not import (its own package's modules are fine).
LSH_MODULES = ("neardup.similarity", "neardup.blocks", "neardup.distance")
#: Words that mean distances or LSH keys in code or text: a store never mentions them.
LSH_WORDS = re.compile(r"hamming|popcount|bitwise_count|bit_count|row_distances|\bscheme\.keys\b", re.I)


def lsh_imports(module: str, source: str) -> list[str]:
    """The LSH modules ``source`` (the text of ``module``) imports, ``if TYPE_CHECKING:``
    blocks included: a store does not even name their types."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [imported_from(package, node)]
        else:
            continue
        found += [name for name in names if name.startswith(LSH_MODULES)]
    return found


def lsh_mentions(source: str) -> list[str]:
    return sorted({match.group(0).lower() for match in LSH_WORDS.finditer(source)})


STORAGE = {module: path for module, path in MODULES.items() if package_of(module) == "storage"}


def test_stores_import_no_lsh_code() -> None:
    assert STORAGE  # the modules were found
    found = {
        module: lsh_imports(module, path.read_text(encoding="utf-8")) for module, path in STORAGE.items()
    }
    assert {module: names for module, names in found.items() if names} == {}


def test_stores_compute_no_distances_or_keys() -> None:
    found = {module: lsh_mentions(path.read_text(encoding="utf-8")) for module, path in STORAGE.items()}
    assert {module: words for module, words in found.items() if words} == {}


def test_the_checks_see_a_violation() -> None:
    """An import of the band scheme (even for annotations) and a popcount pasted into
    storage/base.py are found, as is a scheme's keys."""
    source = MODULES["neardup.storage.base"].read_text(encoding="utf-8")
    typed = source + "\nif TYPE_CHECKING:\n    from ..similarity.bands import Scheme\n"
    assert lsh_imports("neardup.storage.base", typed) == ["neardup.similarity.bands"]
    assert lsh_imports("neardup.storage.base", source + "\nimport neardup.distance\n") == ["neardup.distance"]
    assert lsh_mentions(source + "\nnear = np.bitwise_count(a ^ b) <= k\n") == ["bitwise_count"]
    assert lsh_mentions("blocks = self.scheme.keys(words)") == ["scheme.keys"]


def test_the_block_index_answers_a_store_search_as_its_own() -> None:
    """The in-memory block index answers :meth:`~.MemoryBlockIndex.candidates` (posting keys
    in, records sharing one out) as every store does: the index's generic search over it
    finds exactly what its own search does, in segments, split buckets and the tail."""
    rng = np.random.default_rng(5)
    index = SimhashIndex(64, 3)
    base = rng.integers(0, 2**64 - 1, size=3000, dtype=np.uint64)
    close = base[:400] ^ (np.uint64(1) << rng.integers(0, 64, size=400).astype(np.uint64))
    skewed = (base[:200] & np.uint64(0xFFFF)) | np.uint64(0xABCD << 48)  # one oversized bucket
    index.add_many(list(range(3600)), np.concatenate([base, close, skewed]))
    index.add_many(list(range(3600, 3700)), rng.integers(0, 2**64 - 1, size=100, dtype=np.uint64))  # tail
    assert isinstance(index._memory, MemoryBlockIndex) and index._memory.segments
    queries = np.concatenate([base[:300] ^ np.uint64(5), skewed[:50] ^ np.uint64(1 << 3)]).reshape(-1, 1)
    rows, keys, _ = index._memory.search_many(queries, 3)
    generic = search(index._memory, index.scheme, queries, 3)
    assert sorted(zip(rows.tolist(), keys, strict=True)) == sorted(
        zip(generic.rows.tolist(), generic.keys, strict=True)
    )


def test_a_band_index_in_memory_and_in_a_store_agree(tmp_path: Path) -> None:
    """A band index keeps band keys after the fingerprint; the block index in memory, the
    plain ``memory://`` store and SQLite find the same records for the same sketches."""
    rng = np.random.default_rng(11)
    scheme = BandScheme(64, 16, 3)
    sketches = rng.integers(0, 2**64 - 1, size=(500, scheme.key_words), dtype=np.uint64)
    sketches[250:] = sketches[:250]
    sketches[250:, 0] ^= np.uint64(0xFF)  # the copies differ in their first band only
    fingerprints = rng.integers(0, 2**64 - 1, size=500, dtype=np.uint64)
    answers = []
    for url in (None, "memory://", f"sqlite:///{tmp_path}/bands.db"):
        config = IndexConfig(scheme=scheme)
        index = SimhashIndex(scheme=scheme) if url is None else SimhashIndex.open(url, config)
        index.add_many(list(range(250)), fingerprints[:250], signatures=sketches[:250])
        found = index.query_many(fingerprints[250:], signatures=sketches[250:])
        answers.append([sorted(match.key for match in matches) for matches in found])
        index.close()
    assert answers[0] == answers[1] == answers[2]
    assert all(row in keys for row, keys in enumerate(answers[0]))
