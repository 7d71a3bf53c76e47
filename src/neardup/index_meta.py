"""What an index is, as stored: the meta written when a store or file is created and checked
on every open, and the block scheme an :class:`~neardup.config.IndexConfig` resolves to.

Kept apart from :mod:`neardup.index` so the index module is only about adding, querying and
removing; the checks here are what make a stored index refuse fingerprints made otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .blocks import BlockScheme
from .config import IndexConfig
from .errors import IndexConfigMismatchError, InputError

FORMAT = "neardup-index"
FORMAT_VERSION = 1
#: Bytes per entry that do not depend on the number of tables (fingerprint, key, alive flag,
#: sorted key hash and its slot) and per entry per table (slot and 32-bit filter).
FIXED_BYTES_PER_ENTRY = 29
TABLE_BYTES_PER_ENTRY = 8
DEFAULT_MEMORY_BUDGET = 64


def tables_within(budget: int, bits: int = 64) -> int:
    """How many tables fit ``budget`` bytes per indexed fingerprint (approximately)."""
    fixed = FIXED_BYTES_PER_ENTRY + (8 if bits == 128 else 0)
    return max(0, (budget - fixed) // TABLE_BYTES_PER_ENTRY)


def resolve_scheme(config: IndexConfig) -> BlockScheme:
    """The config's block scheme, or the one chosen for its expected size and budget."""
    if config.scheme is not None:
        return config.scheme
    if config.expected_size is None:
        return BlockScheme(config.bits, config.max_distance)
    limit = max(config.max_distance + 1, tables_within(config.memory_budget, config.bits))
    return BlockScheme.auto(config.expected_size, config.bits, config.max_distance, max_tables=limit)


def config_meta(config: IndexConfig, scheme: BlockScheme) -> dict[str, Any]:
    return {
        "bits": config.bits,
        "max_distance": config.max_distance,
        "scheme": scheme.to_dict(),
        "mu": config.mu,
        "fingerprint_config": None if config.fingerprint is None else config.fingerprint.to_dict(),
        "verification": None if config.verification is None else dict(config.verification),
    }


def check_same(config: IndexConfig, meta: dict[str, Any], url: str) -> None:
    """Refuse to open a stored index with settings that disagree with the stored ones."""
    wanted = config_meta(config, config.scheme or BlockScheme.from_dict(meta["scheme"]))
    stored = {name: meta.get(name) for name in wanted}
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


def check_header(header: dict[str, Any], path: str | Path) -> None:
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InputError(f"{str(path)!r} is not a neardup index file")
    if header.get("version") != FORMAT_VERSION:
        raise InputError(
            f"{str(path)!r} is a neardup index of format version {header.get('version')}; "
            f"this neardup reads version {FORMAT_VERSION}: rebuild the index"
        )
