"""The ``.npz`` file of an in-memory index (:meth:`~neardup.index.simhash_index.SimhashIndex.save`): a JSON
header, the fingerprint words and the keys, written atomically."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt


def write_index_file(
    path: str | Path, header: dict[str, Any], words: npt.NDArray[Any], keys: npt.NDArray[Any]
) -> None:
    """Write one ``.npz`` index file: to a temporary file beside it, then renamed onto it."""
    arrays: dict[str, npt.NDArray[Any]] = {
        "header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
        "words": words,
    }
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
