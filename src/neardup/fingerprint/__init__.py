"""Fingerprints: text in, one Simhash fingerprint out.

Owns the :class:`~neardup.fingerprint.fingerprinter.Fingerprinter` (tokens → weighted feature
hashes → Simhash), its validated settings (:mod:`.config`, ``FingerprintConfig``), the feature
hashes by name (:mod:`.hashing`), token weights (:mod:`.weighting`, :mod:`.idf`) and the
per-fingerprinter token cache (:mod:`.token_cache`). Builds on :mod:`neardup.text` and
:mod:`neardup.distance`; knows nothing of indexes, stores or dedup policy.

The public names are exported by :mod:`neardup` itself; import the rest from the submodules.
"""
