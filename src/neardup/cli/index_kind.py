"""``--index-kind``: which index a command creates (``index add``, ``serve``, ``dedup --index``).

Apart from :mod:`neardup.cli.index` so that ``dedup`` can take the option without loading a
store (batch dedup loads none).
"""

from __future__ import annotations

from typing import Any

import click

#: The kinds of index ``--index-kind`` creates.
INDEX_KINDS = ("band", "compact")


def index_kind_option(function: Any) -> Any:
    return click.option(
        "--index-kind",
        type=click.Choice(INDEX_KINDS),
        default=None,
        help="When creating the index: band (the default) keeps a 512-byte text sketch per record "
        "and the texts; compact keeps 64 bytes a record (the fingerprint and a compact sketch: "
        "for billions of documents) and no texts, a little less exact near the threshold. The "
        "kind is stored: an existing index of another kind is refused.",
    )(function)
