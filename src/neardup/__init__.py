"""neardup: near-duplicate detection with Simhash fingerprints, for Chinese and English.

The public surface is what ``__all__`` lists; everything else is internal.
"""

from importlib import metadata

from .blocks import BlockScheme
from .config import FingerprintConfig
from .dedup.batch import BucketStats, Pairs, brute_force_pairs, find_all_pairs, single_pass
from .dedup.clusters import KEEP_POLICIES, Clusters, cluster_records
from .dedup.pipeline import DedupResult, DedupSettings, dedup_documents
from .dedup.verify import VERIFY_MODES, Verifier
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
from .record_dedup import find_duplicate_records
from .records import FieldSpec, RecordSchema
from .weighting import WEIGHTINGS

try:
    __version__ = metadata.version("neardup")
except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "HASH_NAMES",
    "KEEP_POLICIES",
    "VERIFY_MODES",
    "WEIGHTINGS",
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
