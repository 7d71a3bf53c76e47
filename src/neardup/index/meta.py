"""What an index is, as stored: the meta written when a store or file is created and checked
on every open, the block scheme an :class:`~neardup.index.config.IndexConfig` resolves to, and
the shape of its records a store is told (:func:`record_shape`).

Kept apart from :mod:`neardup.index` so the index module is only about adding, querying and
removing; the checks here are what make a stored index refuse fingerprints made otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..blocks import BlockScheme
from ..errors import (
    ConfigError,
    IndexConfigMismatchError,
    IndexNotFoundError,
    InputError,
    StorageDamagedError,
)
from ..fingerprint.config import IDF_CHOICES, FingerprintConfig
from ..similarity.bands import Scheme, scheme_from_dict
from ..similarity.verify import stored_settings
from ..storage.base import RecordShape, Storage
from .config import IndexConfig

FORMAT = "neardup-index"
#: The version of ``.npz`` index files (Simhash block indexes only).
FORMAT_VERSION = 1
#: The version of stored indexes. 2: the meta may record a band scheme and text-sketch
#: verification (issue 17); stores of version 1 were made when every index searched Simhash
#: blocks at k = 3 and are refused with the command that rebuilds them.
STORE_FORMAT_VERSION = 2
#: Bytes per entry that do not depend on the number of tables (fingerprint, key, alive flag,
#: sorted key hash and its slot) and per entry per table (slot and 32-bit filter).
FIXED_BYTES_PER_ENTRY = 29
TABLE_BYTES_PER_ENTRY = 8
DEFAULT_MEMORY_BUDGET = 64
#: Meta keys every stored index has; one missing means the meta was damaged or edited.
REQUIRED_KEYS = ("bits", "max_distance", "scheme", "mu", "fingerprint_config")
#: The meta entry of a records index (``neardup.records.index_model.META_KEY``; the index layer
#: may not import records, and only names it to refuse such a store with the right command).
RECORDS_META_KEY = "records_model"


def tables_within(budget: int, bits: int = 64) -> int:
    """How many tables fit ``budget`` bytes per indexed fingerprint (approximately)."""
    fixed = FIXED_BYTES_PER_ENTRY + (8 if bits == 128 else 0)
    return max(0, (budget - fixed) // TABLE_BYTES_PER_ENTRY)


def resolve_scheme(config: IndexConfig) -> Scheme:
    """The config's scheme, or the block scheme chosen for its expected size and budget."""
    if config.scheme is not None:
        return config.scheme
    if config.expected_size is None:
        return BlockScheme(config.bits, config.max_distance)
    limit = max(config.max_distance + 1, tables_within(config.memory_budget, config.bits))
    return BlockScheme.auto(config.expected_size, config.bits, config.max_distance, max_tables=limit)


def config_meta(config: IndexConfig, scheme: Scheme) -> dict[str, Any]:
    return {
        "bits": config.bits,
        "max_distance": config.max_distance,
        "scheme": scheme.to_dict(),
        "mu": config.mu,
        "fingerprint_config": None if config.fingerprint is None else config.fingerprint.to_dict(),
        "verification": None if config.verification is None else dict(config.verification),
        "files": file_hashes(config.fingerprint),
    }


def file_hashes(fingerprint: FingerprintConfig | None) -> list[dict[str, str]]:
    """The sha256 of every file setting's bytes (idf, user dictionary, stopword files), with
    the absolute path for messages: a path says nothing about what the file holds now."""
    if fingerprint is None:
        return []
    return [
        {"setting": name, "path": os.path.abspath(path), "sha256": _sha256(name, path)}
        for name, path in fingerprint.files()
    ]


def _sha256(setting: str, path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the {setting} file {path!r} ({exc.strerror}); give the path of an existing file"
        ) from exc


def check_files(fingerprint: FingerprintConfig | None, meta: dict[str, Any], url: str) -> None:
    """Refuse files whose content differs from the files the index was built with. Indexes
    made before contents were recorded have nothing to compare and open as before."""
    if "files" not in meta:
        return
    current, stored = file_hashes(fingerprint), meta["files"]
    for now, then in zip(current, stored, strict=False):
        if now["setting"] != then["setting"] or now["sha256"] != then["sha256"]:
            raise IndexConfigMismatchError(
                f"the index at {url} was built with the {then['setting']} file {then['path']} "
                f"(sha256 {then['sha256'][:12]}), but {now['path']} has sha256 {now['sha256'][:12]}, "
                "so its fingerprints would not match the stored ones; use the file the index "
                "was built with, or rebuild the index with this one"
            )
    if len(current) != len(stored):
        raise IndexConfigMismatchError(
            f"the index at {url} was built with {len(stored)} setting file(s), not {len(current)}; "
            "use the files the index was built with, or rebuild the index"
        )


def check_meta_keys(meta: dict[str, Any], url: str) -> None:
    """A meta without the keys every index has is damaged, not a different index."""
    missing = [name for name in REQUIRED_KEYS if name not in meta]
    if missing:
        raise StorageDamagedError(
            f"the index meta at {url} lacks {', '.join(missing)}: the store is damaged; "
            "restore it from a backup or rebuild the index with `neardup index add`"
        )


#: Verification fields of a sketch index that record how the store was made.
MADE_WITH = ("sketch_version", "check_texts")


def check_same(config: IndexConfig, meta: dict[str, Any], url: str) -> None:
    """Refuse to open a stored index with settings that disagree with the stored ones. File
    settings are compared by content where the meta records it (a path may differ)."""
    wanted = config_meta(config, config.scheme or scheme_from_dict(meta["scheme"]))
    stored = {name: meta.get(name) for name in wanted}
    if stored["verification"] is not None:
        stored["verification"] = stored_settings(stored["verification"])
        wanted["verification"] = _as_made(wanted["verification"], stored["verification"])
    if "files" in meta:
        wanted["fingerprint_config"] = _without_paths(wanted["fingerprint_config"])
        stored["fingerprint_config"] = _without_paths(stored["fingerprint_config"])
    names = ["bits", "max_distance", "fingerprint_config", "verification"]
    names += ["scheme"] if config.scheme else []
    differ = [name for name in names if wanted[name] != stored[name]]
    if differ:
        raise IndexConfigMismatchError(
            f"the index at {url} was made with other settings ({', '.join(differ)} differ).\n"
            f"  stored:    {json.dumps({name: stored[name] for name in names}, sort_keys=True)}\n"
            f"  requested: {json.dumps({name: wanted[name] for name in names}, sort_keys=True)}\n"
            "Open it without settings to use the stored ones, or use another store for the new settings."
        )
    check_files(config.fingerprint, meta, url)


def _as_made(wanted: dict[str, Any] | None, stored: dict[str, Any]) -> dict[str, Any] | None:
    """The requested verification with what the stored sketch index was made with (its
    sketch version, whether it keeps texts): facts of the store, not settings to compare."""
    if wanted is None or wanted.get("mode") != "sketch" or stored.get("mode") != "sketch":
        return wanted
    return {**wanted, **{name: stored[name] for name in MADE_WITH if name in stored}}


def _without_paths(fingerprint: dict[str, Any] | None) -> dict[str, Any] | None:
    """Fingerprint settings with file paths blanked: where they are is not what they hold."""
    if fingerprint is None:
        return None
    blanked = dict(fingerprint)
    if blanked.get("idf") not in IDF_CHOICES:
        blanked["idf"] = "<file>"
    if blanked.get("user_dictionary"):
        blanked["user_dictionary"] = "<file>"
    blanked["stopword_files"] = ["<file>"] * len(blanked.get("stopword_files") or [])
    return blanked


def check_header(header: dict[str, Any], path: str | Path) -> None:
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InputError(f"{str(path)!r} is not a neardup index file")
    if header.get("version") != FORMAT_VERSION:
        raise InputError(
            f"{str(path)!r} is a neardup index of format version {header.get('version')}; "
            f"this neardup reads version {FORMAT_VERSION}: rebuild the index"
        )


def check_store_version(meta: dict[str, Any], url: str) -> None:
    """Refuse a store that is not an index, or one made by another version of neardup."""
    if isinstance(meta, dict) and RECORDS_META_KEY in meta:
        raise InputError(
            f"{url!r} is a records index (made by `neardup records SOURCE --index URL`), not a document "
            "index; check rows against it with `neardup records SOURCE --key KEY --index URL --mode any`"
        )
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(f"{url!r} is not a neardup index; use another store or table prefix")
    version = meta.get("version")
    if version == 1:
        raise IndexConfigMismatchError(
            f"the index at {url} was made by an earlier neardup (index format 1), which found only "
            "near-identical texts (Simhash within 3 bits); rebuild it from its texts with the full-recall "
            f"search, keeping its ids and cluster ids: `neardup index rebuild {url} NEW_URL TEXTS.jsonl`"
        )
    if version != STORE_FORMAT_VERSION:
        raise IndexConfigMismatchError(
            f"the index at {url} has format version {version!r}; this neardup reads version "
            f"{STORE_FORMAT_VERSION}: use the neardup that made it, or rebuild it (`neardup index rebuild`)"
        )


def settle_meta(
    storage: Storage, config: IndexConfig | None, create: bool, url: str, files: bool = True
) -> tuple[dict[str, Any], FingerprintConfig | None]:
    """The meta of the index in ``storage`` (written from ``config`` into an empty store,
    checked against it otherwise) and the fingerprint settings to use: the requested ones
    where they passed the check (their paths are the ones valid here), else the stored ones,
    whose files must still hold what they held (unless ``files`` is False: no fingerprints)."""
    meta = storage.read_meta()
    if meta is None:
        if not create:
            storage.discard()
            raise IndexNotFoundError(
                f"there is no neardup index at {url!r}; create one with `neardup index add`"
            )
        config = config or IndexConfig()
        settings = config_meta(config, resolve_scheme(config))
        meta = {"format": FORMAT, "version": STORE_FORMAT_VERSION, **settings}
        storage.write_meta(meta)
        return meta, config.fingerprint
    check_store_version(meta, url)
    check_meta_keys(meta, url)
    recorded = meta["fingerprint_config"]
    stored = FingerprintConfig.from_dict(recorded) if recorded else None
    if config is not None:
        check_same(config, meta, url)
        if "files" in meta and config.fingerprint is not None:
            return meta, config.fingerprint
    elif files:
        check_files(stored, meta, url)
    return meta, stored


def record_shape(scheme: Scheme) -> RecordShape:
    """What a store must know of the records of an index of ``scheme``."""
    return RecordShape(
        words=scheme.words,
        fingerprint_words=scheme.fingerprint_words,
        columns=scheme.table_count,
        posting_bits=max(table.bit_count for table in scheme.tables),
        postings_of=scheme.keys,
    )
