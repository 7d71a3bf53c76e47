"""One definition each of shingling, sketching, estimating, banding and MinHash, read from the
source: the tell-tale constructs of each live in the similarity core only (plus the uses listed
here with their reason), the core's functions are defined once and imported from where they
are defined, and the known callers do import them.

Each concept is recognised by what its code must contain, not by its name, so a pasted copy
is found under any name (the last tests paste the core's own functions into a scratch module
and check that they are):

- shingling: the letters an n-gram is cut from (``word_letters``, ``han_character_mask``), the
  n-gram tokenizer, the shingle lengths or the n-gram keys' multiplier;
- the one-permutation sketch and MinHash: a minimum per cell (``np.minimum.at`` or
  ``np.minimum.reduceat``), or the universal hash family mod 2^61 − 1;
- the b-bit estimate: the 1/256 chance agreement of one-byte bins; the one-byte bins: a mask
  with 0xFF;
- band keys: ``fmix64`` in a loop over a band's rows, or the FNV multiplier that chains them
  (the batch layout); bytes shifted in by 8 in a loop over a ``uint8`` view, or over the
  stored words' ``bins`` (the index layout).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterator

from neardup.similarity import bands, minhash, shingles, sketches

from .test_layering import MODULES, imported_from

CORE = "neardup.similarity"

#: Where each construct may appear, as module:function (every other appearance is a copy).
EXPECTED: dict[str, set[str]] = {
    "shingling": {
        "neardup.similarity.shingles:_shingles_of_normalized",
        "neardup.similarity.shingles:_long_text_hashes",
        "neardup.similarity.shingles:_window_keys",
        "neardup.similarity.shingles:_short_text_keys",
        # The keys of MinHash signatures stored by indexes made before the one shingler: kept
        # so those indexes go on verifying (Verifier.shingle_version 1), used nowhere else.
        "neardup.similarity.shingles:legacy_shingle_keys",
        # Not shingles: the Simhash's own tokens. `--ngram N` fingerprints character n-grams,
        # and Chinese tokens are told apart for their weights.
        "neardup.fingerprint.fingerprinter:Fingerprinter.__init__",
        "neardup.fingerprint.token_cache:describe_new_tokens",
        "neardup.fingerprint.weighting:Weighting.static_weight",
    },
    "minimum per cell": {
        "neardup.similarity.sketches:oph_sketches",
        "neardup.similarity.minhash:MinHasher.signatures_of_keys",
        # Part of the sketch's densification: the first attempt each bin probes each other.
        "neardup.similarity.sketches:_first_hits",
        # Not a sketch: the shortest word of each text.
        "neardup.fingerprint.fingerprinter:_relative_length_factor",
    },
    "universal hashing": {
        "neardup.similarity.minhash:mod_prime",
        "neardup.similarity.minhash:mul_mod_prime",
        "neardup.similarity.minhash:universal_hash",
        "neardup.similarity.minhash:MinHasher.__post_init__",
        "neardup.similarity.minhash:MinHasher.signatures_of_keys",
    },
    "b-bit chance": {
        "neardup.similarity.sketches:_estimate_of_agreement",
        "neardup.similarity.sketches:_agreement_chance",
        # Not an estimate: NFKC is tabulated in blocks of 256 code points.
        "neardup.text.normalize:_nfkc_table",
    },
    "one-byte bins": {"neardup.similarity.sketches:byte_bins"},
    "hashed band keys": {"neardup.similarity.sketches:hashed_band_keys"},
    "byte band keys": {"neardup.similarity.bands:BandScheme.keys"},
}

#: The core's functions and types, by the one module that defines each.
DEFINED_IN: dict[str, str] = {
    "shingles_of": "neardup.similarity.shingles",
    "compact_keys": "neardup.similarity.shingles",
    "Shingles": "neardup.similarity.shingles",
    "oph_sketches": "neardup.similarity.sketches",
    "band_sketches": "neardup.similarity.sketches",
    "byte_bins": "neardup.similarity.sketches",
    "estimate_from_bins": "neardup.similarity.sketches",
    "hashed_band_keys": "neardup.similarity.sketches",
    "shingle_signatures": "neardup.similarity.sketches",
    "minhash_sketches": "neardup.similarity.sketches",
    "MinHasher": "neardup.similarity.minhash",
    "BandScheme": "neardup.similarity.bands",
}

#: What the batch search, the check, the stored sketch (index and service), the verifier and the
#: Spark job import of the core (Spark's band keys and check bins come through ``sketch_long``).
CALLERS: dict[str, set[str]] = {
    "neardup.dedup.candidates": {"band_sketches", "minhash_sketches", "hashed_band_keys", "byte_bins"},
    "neardup.dedup.lsh": {"shingles_of"},
    "neardup.dedup.shingle_sets": {"shingles_of", "compact_keys"},
    "neardup.similarity.sketches": {"shingles_of"},  # the stored sketch (text_sketches)
    "neardup.similarity.verify": {"Shingles", "shingle_signatures", "MinHasher"},
    "neardup.spark.lsh": {"shingles_of", "estimate_from_bins", "sketch_long"},
}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _number(node: ast.AST) -> object:
    """The constant of ``256``, ``np.uint64(256)`` and the like, else None."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Call) and len(node.args) == 1 and isinstance(node.args[0], ast.Constant):
        return node.args[0].value
    return None


def _loops(node: ast.AST) -> Iterator[ast.For | ast.While]:
    return (n for n in ast.walk(node) if isinstance(n, ast.For | ast.While))


def concepts(function: ast.AST) -> set[str]:
    """The concepts whose tell-tale constructs ``function`` contains."""
    names = _names(function)
    found: set[str] = set()
    if names & {"word_letters", "han_character_mask", "CharNgramTokenizer", "HAN_SHINGLE", "LATIN_SHINGLE"}:
        found.add("shingling")
    if names & {"_NGRAM_BASE"}:
        found.add("shingling")
    if names & {"universal_hash", "mod_prime", "mul_mod_prime", "PRIME"}:
        found.add("universal hashing")
    if names & {"BIN_VALUES"}:
        found.add("b-bit chance")
    if names & {"_ROW_MULTIPLIERS"}:  # a band's rows combined by their multipliers
        found.add("hashed band keys")
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("at", "reduceat")
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "minimum"
        ):
            found.add("minimum per cell")
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            if node.value == 256 or node.value == 1 / 256:
                found.add("b-bit chance")
            if node.value == 0x100000001B3:
                found.add("hashed band keys")
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.BitAnd)
            and 0xFF in (_number(node.left), _number(node.right))
        ):
            found.add("one-byte bins")
    for loop in _loops(function):
        if "fmix64" in _names(loop):
            found.add("hashed band keys")
        shifts = [
            n
            for n in ast.walk(loop)
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.LShift) and _number(n.right) == 8
        ]
        if shifts and (("uint8" in names and "view" in names) or "bins" in names):
            found.add("byte band keys")
    return found


def functions(
    tree: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every function and method, nested ones included."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + child.name, child
            yield from functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from functions(child, f"{prefix}{child.name}.")
        else:
            yield from functions(child, prefix)


def found_concepts(sources: dict[str, str]) -> dict[str, set[str]]:
    """concept -> {module:function} over ``sources`` (module name -> source text). A function
    counts once, for its own code: a nested function is reported under its own name."""
    found: dict[str, set[str]] = {concept: set() for concept in EXPECTED}
    for module, text in sources.items():
        for name, node in functions(ast.parse(text)):
            own = ast.Module(
                body=[n for n in node.body if not isinstance(n, ast.FunctionDef)], type_ignores=[]
            )
            for concept in concepts(own):
                found[concept].add(f"{module}:{name}")
    return found


def imported(module: str, text: str) -> Iterator[tuple[str, str]]:
    """(source module, name) of every ``from ... import name`` in ``module``'s text."""
    path = MODULES.get(module)
    package = module if path is not None and path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = imported_from(package, node)
        for alias in node.names:
            yield source, alias.name


def misplaced(sources: dict[str, str]) -> list[str]:
    """Definitions of the core's names outside their module, and imports of them from
    anywhere but that module (a re-export is a second way in)."""
    wrong: list[str] = []
    for module, text in sources.items():
        tree = ast.parse(text)
        for node in tree.body:
            if (
                isinstance(node, ast.FunctionDef | ast.ClassDef)
                and DEFINED_IN.get(node.name, module) != module
            ):
                wrong.append(f"{module} defines {node.name}")
        for source, name in imported(module, text):
            home = DEFINED_IN.get(name)
            if home is not None and source != home:
                wrong.append(f"{module} imports {name} from {source}, not {home}")
    return wrong


SOURCES = {module: path.read_text(encoding="utf-8") for module, path in MODULES.items()}


def test_each_concept_is_where_it_is_expected() -> None:
    found = found_concepts(SOURCES)
    copies = [
        f"{where} has the code of {concept}: call the core's function (or list it here with the reason)"
        for concept in EXPECTED
        for where in sorted(found[concept] - EXPECTED[concept])
    ]
    gone = [
        f"{where} no longer has the code of {concept}: update EXPECTED"
        for concept in EXPECTED
        for where in sorted(EXPECTED[concept] - found[concept])
    ]
    assert copies + gone == []


def test_the_core_is_defined_once_and_imported_from_where_it_is() -> None:
    assert misplaced(SOURCES) == []


def test_the_known_callers_import_the_core() -> None:
    for module, names in CALLERS.items():
        assert names <= {name for _, name in imported(module, SOURCES[module])}, module


def test_the_verifier_shingles_with_the_one_shingler() -> None:
    """``Shingles.of`` (what ``--verify jaccard`` and the explanations compare) is a call of
    :func:`shingles_of`, nothing else."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(shingles.Shingles.of)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    statements = [
        node for node in body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
    ]
    assert len(statements) == 1 and isinstance(statements[0], ast.Return)
    call = statements[0].value
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "shingles_of"


# -- the checks see a copy ----------------------------------------------------------------------

#: The core's own code, each pasted into a scratch module: every concept must be found there.
PASTED = {
    "shingling": [shingles._window_keys, shingles._shingles_of_normalized],
    "minimum per cell": [sketches.oph_sketches],
    "universal hashing": [minhash.universal_hash],
    "b-bit chance": [sketches._estimate_of_agreement, sketches._agreement_chance],
    "one-byte bins": [sketches.byte_bins],
    "hashed band keys": [sketches.hashed_band_keys],
    "byte band keys": [bands.BandScheme.keys],
}


def test_a_pasted_copy_of_each_definition_is_found() -> None:
    for concept, originals in PASTED.items():
        for original in originals:
            copied = textwrap.dedent(inspect.getsource(original)).replace(
                f"def {original.__name__}(", "def mine("
            )
            found = found_concepts({"neardup.dedup.scratch": copied})
            assert found[concept] == {"neardup.dedup.scratch:mine"}, (concept, original)


def test_a_copy_written_anew_is_found() -> None:
    """The old shingler of the verifier (its own keys), a hand-written chance correction and
    a re-export, as someone might write them again."""
    scratch = textwrap.dedent(
        """
        from ..similarity.sketches import shingles_of
        from ..text.tokenize import CharNgramTokenizer

        def verifier_shingles(texts, size):
            return token_keys(CharNgramTokenizer(size).tokenize_batch(texts))

        def estimate(a, b):
            agree = np.count_nonzero(a == b, axis=-1) / a.shape[-1]
            return np.clip((agree - 1 / 256) / (1 - 1 / 256), 0, 1)
        """
    )
    found = found_concepts({"neardup.dedup.scratch": scratch})
    assert found["shingling"] == {"neardup.dedup.scratch:verifier_shingles"}
    assert found["b-bit chance"] == {"neardup.dedup.scratch:estimate"}
    assert misplaced({"neardup.dedup.scratch": scratch}) == [
        "neardup.dedup.scratch imports shingles_of from neardup.similarity.sketches, "
        "not neardup.similarity.shingles"
    ]
    assert misplaced({"neardup.dedup.scratch": "def estimate_from_bins(a, b): ...\n"}) == [
        "neardup.dedup.scratch defines estimate_from_bins"
    ]
