"""The ``.npz`` file of an in-memory index (:meth:`~neardup.index.simhash_index.SimhashIndex.save`): a JSON
header, the fingerprint words, the keys and the text digests, written atomically."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..storage.base import DIGEST_BYTES


def write_index_file(
    path: str | Path,
    header: dict[str, Any],
    words: npt.NDArray[Any],
    keys: npt.NDArray[Any],
    digests: Sequence[bytes | None] = (),
) -> None:
    """Write one ``.npz`` index file: to a temporary file beside it, then renamed onto it.
    ``digests`` (one per record, or none) keep what tells a retry from another text after a
    reload: an (n, 16) array, with ``has_digest`` marking the records that had one."""
    arrays: dict[str, npt.NDArray[Any]] = {
        "header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
        "words": words,
    }
    if any(digest is not None for digest in digests):
        arrays["has_digest"] = np.array([digest is not None for digest in digests], dtype=bool)
        arrays["digests"] = np.frombuffer(
            b"".join(digest or bytes(DIGEST_BYTES) for digest in digests), np.uint8
        ).reshape(-1, DIGEST_BYTES)
    if keys.dtype == object:
        texts = [json.dumps(key) for key in keys.tolist()]
        arrays["key_json"] = np.frombuffer("\n".join(texts).encode("utf-8", "surrogatepass"), np.uint8)
    else:
        arrays["keys"] = keys
    target = Path(path)
    temporary = target.with_name(target.name + ".tmp")
    try:
        with open(temporary, "wb") as stream:
            np.savez(stream, **arrays)  # type: ignore[arg-type]
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read_digests(data: Any) -> list[bytes | None] | None:
    """The digests :func:`write_index_file` kept, from the open ``.npz`` ``data`` (None for a
    file without any: made before digests, or of bare fingerprints)."""
    if "digests" not in data:
        return None
    rows, marks = data["digests"], data["has_digest"]
    return [row.tobytes() if mark else None for row, mark in zip(rows, marks.tolist(), strict=True)]
