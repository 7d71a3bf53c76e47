"""Validated, frozen configuration of an index: its bits, distance, scheme and what it verifies."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..blocks import DEFAULT_MU, BlockScheme
from ..distance import check_bits
from ..errors import ConfigError
from ..fingerprint.config import FingerprintConfig
from ..similarity.bands import BandScheme
from ..similarity.compact import CompactScheme
from ..similarity.verify import Verifier


@dataclass(frozen=True)
class IndexConfig:
    """What an index is, written as its meta when a store is created and checked on open.

    ``scheme`` a :class:`~neardup.similarity.bands.BandScheme` makes an index searched by the LSH bands
    of text sketches (stored as signatures; ``verification={"mode": "sketch"}``), which is what
    the command line and the service create by default. ``scheme`` None means the pigeonhole
    scheme, or with ``expected_size`` the scheme
    ``BlockScheme.auto`` picks within ``memory_budget`` bytes per fingerprint (the budget only
    bounds the number of tables; persistent stores are not in memory). ``fingerprint`` records
    how texts become fingerprints, so texts added later are fingerprinted the same way.
    ``verification`` (the fields of a :class:`~neardup.Verifier` with mode minhash or
    combined) makes the command line store MinHash signatures beside the fingerprints and
    verify every match with them.
    """

    bits: int = 64
    max_distance: int = 3
    scheme: BlockScheme | BandScheme | None = None
    expected_size: int | None = None
    mu: float = DEFAULT_MU
    memory_budget: int = 64
    fingerprint: FingerprintConfig | None = None
    verification: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        check_bits(self.bits)
        if isinstance(self.max_distance, bool) or not isinstance(self.max_distance, int):
            raise ConfigError(f"max_distance must be an integer; got {self.max_distance!r}")
        if isinstance(self.scheme, BandScheme):
            # A band index returns every candidate sharing a band; its sketch decides.
            object.__setattr__(self, "max_distance", self.bits)
        elif not 0 <= self.max_distance < self.bits:
            raise ConfigError(f"max_distance must be from 0 to {self.bits - 1}; got {self.max_distance}")
        if not isinstance(self.mu, int | float) or self.mu < 0:
            raise ConfigError(f"mu must be a number >= 0; got {self.mu!r}")
        if self.fingerprint is not None and self.fingerprint.bits != self.bits:
            raise ConfigError(
                f"the fingerprint config makes {self.fingerprint.bits}-bit fingerprints "
                f"but the index is for {self.bits}-bit ones; pass bits={self.fingerprint.bits}"
            )
        if self.scheme is not None and (
            self.scheme.bits != self.bits or self.scheme.max_distance != self.max_distance
        ):
            raise ConfigError(
                f"the block scheme is for bits={self.scheme.bits}, max_distance={self.scheme.max_distance}; "
                f"the index for bits={self.bits}, max_distance={self.max_distance}"
            )

    @classmethod
    def band_index(
        cls, fingerprint: FingerprintConfig | None = None, *, keep_texts: bool = True
    ) -> IndexConfig:
        """The index :meth:`neardup.Index.open`, ``neardup index add``, ``dedup --index`` and
        ``neardup serve`` create by default: band postings of each text's sketch, the sketch
        deciding, and the exact Jaccard of the kept texts near the threshold
        (``Verifier("sketch", check_texts=True)``), with ``fingerprint`` (default
        :class:`FingerprintConfig()`) recorded for the texts. ``keep_texts=False`` stores no
        texts and decides on the sketch alone (smaller, a little less exact near the
        threshold). ``IndexConfig()`` itself is a Simhash block index (k = 3), the explicit
        choice for fingerprints."""
        fingerprint = FingerprintConfig() if fingerprint is None else fingerprint
        return cls(
            bits=fingerprint.bits,
            scheme=BandScheme(fingerprint.bits),
            fingerprint=fingerprint,
            verification=Verifier("sketch", check_texts=keep_texts).settings(),
        )

    @classmethod
    def compact(cls, fingerprint: FingerprintConfig | None = None) -> IndexConfig:
        """The compact index, for stores that must hold billions of documents: 64 bytes a
        record (the 64-bit fingerprint, the band bins of the text sketch and a 1-bit tail of
        it, :class:`~neardup.similarity.compact.CompactScheme`) plus the band index's
        postings, and no texts. Candidates are found by the same bands and decided by the
        records' estimate at the sketch threshold (0.5). ``fingerprint`` (default
        :class:`FingerprintConfig()`) must make 64-bit fingerprints."""
        fingerprint = FingerprintConfig() if fingerprint is None else fingerprint
        if fingerprint.bits != 64:
            raise ConfigError(
                f"a compact index keeps 64-bit fingerprints; got {fingerprint.bits}-bit settings"
            )
        return cls(
            bits=fingerprint.bits,
            scheme=CompactScheme(fingerprint.bits),
            fingerprint=fingerprint,
            verification=Verifier("sketch").settings(),
        )

    @property
    def kind(self) -> str:
        """What the index is: :func:`scheme_kind` of its scheme."""
        return scheme_kind(self.scheme)

    def replace(self, **changes: Any) -> IndexConfig:
        return dataclasses.replace(self, **changes)


def scheme_kind(scheme: BlockScheme | BandScheme | None) -> str:
    """What an index of ``scheme`` is: ``compact`` (64-byte records), ``band`` (the default,
    512-byte sketches) or ``block`` (a Simhash block index)."""
    if isinstance(scheme, CompactScheme):
        return "compact"
    return "band" if isinstance(scheme, BandScheme) else "block"
