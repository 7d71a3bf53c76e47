"""neardup: near-duplicate detection for Chinese and English documents and database records.

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
    from .blocks import BitSelection, BlockScheme, BucketStats, TableStats
    from .dedup.auto import Search
    from .dedup.batch import Pairs, find_all_pairs
    from .dedup.candidates import CandidateSettings
    from .dedup.clusters import KEEP_POLICIES, Clusters, cluster_records
    from .dedup.documents import Assignment, DocumentIndex, IncrementalDeduper, Index, IndexBatch, Prepared
    from .dedup.pipeline import DedupResult, DedupSettings, dedup_documents
    from .dedup.summary import Summary
    from .distance import from_hex, hamming, hamming_many, hex_many, to_array, to_hex, to_ints
    from .errors import (
        ConfigError,
        ForeignStoreError,
        IndexConfigMismatchError,
        IndexNotFoundError,
        InputError,
        KeyExistsError,
        KeyNotFoundError,
        MissingDependencyError,
        NeardupError,
        OutputError,
        StorageBackendError,
        StorageBusyError,
        StorageConflictError,
        StorageDamagedError,
        StorageError,
        StorageFullError,
        StorageReadOnlyError,
        StorageUnavailableError,
        StorageUnsupportedError,
    )
    from .fingerprint.config import FingerprintConfig
    from .fingerprint.fingerprinter import Feature, Fingerprinter, simhash
    from .fingerprint.hashing import HASH_NAMES
    from .fingerprint.idf import IdfModel
    from .fingerprint.weighting import WEIGHTINGS
    from .index.config import IndexConfig
    from .index.simhash_index import Match, Matches, SimhashIndex
    from .io.read import read_records
    from .io.record import ErrorReport, Record
    from .records.dedup import RecordsResult, Verification, find_duplicate_records
    from .records.schema import FieldSpec, RecordSchema, ResolvedField, ResolvedSchema, RowChunk
    from .similarity.bands import BandScheme
    from .similarity.minhash import MinHasher
    from .similarity.verify import VERIFY_MODES, Explanation, Verdicts, Verifier
    from .storage.base import Candidates, PostingCounts, RecordBatch, RecordShape, Storage, StoredRecord
    from .text.normalize import Normalizer

    __version__: str

#: Public names by the module (relative to this package) that defines them.
_LAZY: dict[str, tuple[str, ...]] = {
    ".blocks": (
        "BitSelection",
        "BlockScheme",
        "BucketStats",
        "TableStats",
    ),
    ".dedup.auto": ("Search",),
    ".dedup.batch": (
        "Pairs",
        "find_all_pairs",
    ),
    ".dedup.candidates": ("CandidateSettings",),
    ".dedup.clusters": (
        "KEEP_POLICIES",
        "Clusters",
        "cluster_records",
    ),
    ".dedup.documents": (
        "Assignment",
        "DocumentIndex",
        "IncrementalDeduper",
        "Index",
        "IndexBatch",
        "Prepared",
    ),
    ".dedup.pipeline": (
        "DedupResult",
        "DedupSettings",
        "dedup_documents",
    ),
    ".dedup.summary": ("Summary",),
    ".distance": (
        "from_hex",
        "hamming",
        "hamming_many",
        "hex_many",
        "to_array",
        "to_hex",
        "to_ints",
    ),
    ".errors": (
        "ConfigError",
        "ForeignStoreError",
        "IndexConfigMismatchError",
        "IndexNotFoundError",
        "InputError",
        "KeyExistsError",
        "KeyNotFoundError",
        "MissingDependencyError",
        "NeardupError",
        "OutputError",
        "StorageBackendError",
        "StorageBusyError",
        "StorageConflictError",
        "StorageDamagedError",
        "StorageError",
        "StorageFullError",
        "StorageReadOnlyError",
        "StorageUnavailableError",
        "StorageUnsupportedError",
    ),
    ".fingerprint.config": ("FingerprintConfig",),
    ".fingerprint.fingerprinter": (
        "Feature",
        "Fingerprinter",
        "simhash",
    ),
    ".fingerprint.hashing": ("HASH_NAMES",),
    ".fingerprint.idf": ("IdfModel",),
    ".fingerprint.weighting": ("WEIGHTINGS",),
    ".index.config": ("IndexConfig",),
    ".index.simhash_index": ("Match", "Matches", "SimhashIndex"),
    ".io.read": ("read_records",),
    ".io.record": (
        "ErrorReport",
        "Record",
    ),
    ".records.dedup": (
        "RecordsResult",
        "Verification",
        "find_duplicate_records",
    ),
    ".records.schema": ("FieldSpec", "RecordSchema", "ResolvedField", "ResolvedSchema", "RowChunk"),
    ".similarity.bands": ("BandScheme",),
    ".similarity.minhash": ("MinHasher",),
    ".similarity.verify": (
        "VERIFY_MODES",
        "Explanation",
        "Verdicts",
        "Verifier",
    ),
    ".storage.base": ("Candidates", "PostingCounts", "RecordBatch", "RecordShape", "Storage", "StoredRecord"),
    ".text.normalize": ("Normalizer",),
}
_LAZY_MODULE = {name: module for module, names in _LAZY.items() for name in names}
#: Names that were public and are internal now: still found here, with a DeprecationWarning
#: naming their module, until the next version.
_DEPRECATED: dict[str, str] = {
    "single_pass": ".dedup.batch",
    "brute_force_pairs": ".dedup.batch",
    "combined_score": ".similarity.minhash",
    "estimate_jaccard": ".similarity.minhash",
}


def __getattr__(name: str) -> Any:
    """Load a public name (or, as an eager import used to, a submodule) on first use and
    keep it, so later lookups are plain attribute reads."""
    if name in _DEPRECATED:
        import warnings

        module = f"{__name__}{_DEPRECATED[name]}"
        warnings.warn(
            f"neardup.{name} is internal and leaves the top level in the next version; "
            f"import it from {module}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(import_module(module), name)
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
    "BitSelection",
    "BlockScheme",
    "BucketStats",
    "CandidateSettings",
    "Candidates",
    "Clusters",
    "ConfigError",
    "DedupResult",
    "DedupSettings",
    "DocumentIndex",
    "ErrorReport",
    "Explanation",
    "Feature",
    "FieldSpec",
    "FingerprintConfig",
    "Fingerprinter",
    "ForeignStoreError",
    "IdfModel",
    "IncrementalDeduper",
    "Index",
    "IndexBatch",
    "IndexConfig",
    "IndexConfigMismatchError",
    "IndexNotFoundError",
    "InputError",
    "KeyExistsError",
    "KeyNotFoundError",
    "Match",
    "Matches",
    "MinHasher",
    "MissingDependencyError",
    "NeardupError",
    "Normalizer",
    "OutputError",
    "Pairs",
    "PostingCounts",
    "Prepared",
    "Record",
    "RecordBatch",
    "RecordSchema",
    "RecordShape",
    "RecordsResult",
    "ResolvedField",
    "ResolvedSchema",
    "RowChunk",
    "Search",
    "SimhashIndex",
    "Storage",
    "StorageBackendError",
    "StorageBusyError",
    "StorageConflictError",
    "StorageDamagedError",
    "StorageError",
    "StorageFullError",
    "StorageReadOnlyError",
    "StorageUnavailableError",
    "StorageUnsupportedError",
    "StoredRecord",
    "Summary",
    "TableStats",
    "Verdicts",
    "Verification",
    "Verifier",
    "__version__",
    "cluster_records",
    "dedup_documents",
    "find_all_pairs",
    "find_duplicate_records",
    "from_hex",
    "hamming",
    "hamming_many",
    "hex_many",
    "read_records",
    "simhash",
    "to_array",
    "to_hex",
    "to_ints",
]
