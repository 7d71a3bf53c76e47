"""neardup: near-duplicate detection with Simhash fingerprints, for Chinese and English.

The public surface is what ``__all__`` lists; everything else is internal. Every public name
loads on first use (PEP 562), so ``import neardup`` and the ``neardup`` command's start-up
(``neardup --help``) stay free of numpy and scipy until something needs them, and ``import
neardup.index`` or a store stays free of :mod:`neardup.dedup` (the layers import downwards
only). ``from neardup import X`` works as for an eager import.
"""

from importlib import import_module
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .blocks import BlockScheme, BucketStats
    from .dedup.batch import Pairs, brute_force_pairs, find_all_pairs, single_pass
    from .dedup.clusters import KEEP_POLICIES, Clusters, cluster_records
    from .dedup.incremental import Assignment, IncrementalDeduper
    from .dedup.pipeline import DedupResult, DedupSettings, dedup_documents
    from .distance import from_hex, hamming, hamming_many, hex_many, to_array, to_hex, to_ints
    from .errors import (
        ConfigError,
        IndexConfigMismatchError,
        InputError,
        KeyExistsError,
        KeyNotFoundError,
        MissingDependencyError,
        NeardupError,
        StorageError,
        StorageUnavailableError,
    )
    from .fingerprint.config import FingerprintConfig
    from .fingerprint.fingerprinter import EncodedBatch, Feature, Fingerprinter, simhash
    from .fingerprint.hashing import HASH_NAMES, hash_tokens
    from .fingerprint.idf import IdfModel
    from .fingerprint.weighting import WEIGHTINGS
    from .index.keys import Match
    from .index.simhash_index import SimhashIndex
    from .records.dedup import find_duplicate_records
    from .records.schema import FieldSpec, RecordSchema
    from .similarity.bands import BandScheme
    from .similarity.minhash import (
        MinHasher,
        combined_score,
        estimate_jaccard,
        signature_from_bytes,
        signature_to_bytes,
    )
    from .similarity.verify import VERIFY_MODES, Verifier

    __version__: str

#: Public names by the module (relative to this package) that defines them.
_LAZY: dict[str, tuple[str, ...]] = {
    ".blocks": ("BlockScheme", "BucketStats"),
    ".dedup.batch": ("Pairs", "brute_force_pairs", "find_all_pairs", "single_pass"),
    ".dedup.clusters": ("KEEP_POLICIES", "Clusters", "cluster_records"),
    ".dedup.incremental": ("Assignment", "IncrementalDeduper"),
    ".dedup.pipeline": ("DedupResult", "DedupSettings", "dedup_documents"),
    ".distance": ("from_hex", "hamming", "hamming_many", "hex_many", "to_array", "to_hex", "to_ints"),
    ".errors": (
        "ConfigError",
        "IndexConfigMismatchError",
        "InputError",
        "KeyExistsError",
        "KeyNotFoundError",
        "MissingDependencyError",
        "NeardupError",
        "StorageError",
        "StorageUnavailableError",
    ),
    ".fingerprint.config": ("FingerprintConfig",),
    ".fingerprint.fingerprinter": ("EncodedBatch", "Feature", "Fingerprinter", "simhash"),
    ".fingerprint.hashing": ("HASH_NAMES", "hash_tokens"),
    ".fingerprint.idf": ("IdfModel",),
    ".fingerprint.weighting": ("WEIGHTINGS",),
    ".index.keys": ("Match",),
    ".index.simhash_index": ("SimhashIndex",),
    ".records.dedup": ("find_duplicate_records",),
    ".records.schema": ("FieldSpec", "RecordSchema"),
    ".similarity.bands": ("BandScheme",),
    ".similarity.minhash": (
        "MinHasher",
        "combined_score",
        "estimate_jaccard",
        "signature_from_bytes",
        "signature_to_bytes",
    ),
    ".similarity.verify": ("VERIFY_MODES", "Verifier"),
}
_LAZY_MODULE = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> Any:
    """Load a public name (or, as an eager import used to, a submodule) on first use and
    keep it, so later lookups are plain attribute reads."""
    if name == "__version__":
        value: Any = _version()
    elif name in _LAZY_MODULE:
        value = getattr(import_module(_LAZY_MODULE[name], __name__), name)
    elif not name.startswith("_") and find_spec(f"{__name__}.{name}") is not None:
        value = import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_MODULE) | {"__version__"})


def _version() -> str:
    """The installed distribution's version (importlib.metadata costs ~20 ms, so on demand)."""
    from importlib import metadata

    try:
        return metadata.version("neardup")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


__all__ = [
    "HASH_NAMES",
    "KEEP_POLICIES",
    "VERIFY_MODES",
    "WEIGHTINGS",
    "Assignment",
    "BandScheme",
    "BlockScheme",
    "BucketStats",
    "Clusters",
    "ConfigError",
    "DedupResult",
    "DedupSettings",
    "EncodedBatch",
    "Feature",
    "FieldSpec",
    "FingerprintConfig",
    "Fingerprinter",
    "IdfModel",
    "IncrementalDeduper",
    "IndexConfigMismatchError",
    "InputError",
    "KeyExistsError",
    "KeyNotFoundError",
    "Match",
    "MinHasher",
    "MissingDependencyError",
    "NeardupError",
    "Pairs",
    "RecordSchema",
    "SimhashIndex",
    "StorageError",
    "StorageUnavailableError",
    "Verifier",
    "__version__",
    "brute_force_pairs",
    "cluster_records",
    "combined_score",
    "dedup_documents",
    "estimate_jaccard",
    "find_all_pairs",
    "find_duplicate_records",
    "from_hex",
    "hamming",
    "hamming_many",
    "hash_tokens",
    "hex_many",
    "signature_from_bytes",
    "signature_to_bytes",
    "simhash",
    "single_pass",
    "to_array",
    "to_hex",
    "to_ints",
]
