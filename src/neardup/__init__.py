"""neardup: near-duplicate detection with Simhash fingerprints, for Chinese and English.

The public surface is what ``__all__`` lists; everything else is internal. The names of
:mod:`neardup.dedup` (the policy layer, above the index) load on first use, so ``import
neardup.index`` or a store stays free of them (the layers import downwards only).
"""

from importlib import import_module, metadata
from typing import TYPE_CHECKING, Any

from .bands import BandScheme
from .blocks import BlockScheme
from .buckets import BucketStats
from .config import FingerprintConfig
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
from .fingerprint import EncodedBatch, Feature, Fingerprinter, simhash
from .hashing import HASH_NAMES, hash_tokens
from .idf import IdfModel
from .index import Match, SimhashIndex
from .minhash import MinHasher, combined_score, estimate_jaccard, signature_from_bytes, signature_to_bytes
from .records import FieldSpec, RecordSchema
from .weighting import WEIGHTINGS

if TYPE_CHECKING:
    from .dedup.batch import Pairs, brute_force_pairs, find_all_pairs, single_pass
    from .dedup.clusters import KEEP_POLICIES, Clusters, cluster_records
    from .dedup.incremental import Assignment, IncrementalDeduper
    from .dedup.pipeline import DedupResult, DedupSettings, dedup_documents
    from .dedup.verify import VERIFY_MODES, Verifier
    from .record_dedup import find_duplicate_records

#: Public names loaded on first use, by module (relative to this package).
_LAZY: dict[str, tuple[str, ...]] = {
    ".dedup.batch": ("Pairs", "brute_force_pairs", "find_all_pairs", "single_pass"),
    ".dedup.clusters": ("KEEP_POLICIES", "Clusters", "cluster_records"),
    ".dedup.incremental": ("Assignment", "IncrementalDeduper"),
    ".dedup.pipeline": ("DedupResult", "DedupSettings", "dedup_documents"),
    ".dedup.verify": ("VERIFY_MODES", "Verifier"),
    ".record_dedup": ("find_duplicate_records",),
}
_LAZY_MODULE = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> Any:
    """Load a lazy public name (PEP 562) and keep it, so later lookups are plain."""
    module = _LAZY_MODULE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_MODULE))


try:
    __version__ = metadata.version("neardup")
except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

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
