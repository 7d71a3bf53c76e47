"""Similarity of texts beyond their fingerprints: MinHash signatures, shingle sets and their
sketches, the band keys a band index is searched by, and the verifiers that confirm a
candidate pair (:mod:`.verify`).

Builds on :mod:`neardup.fingerprint` and :mod:`neardup.text`; below the index, the stores and
the dedup pipelines, which all use it. The public names (``MinHasher``, ``Verifier``,
``BandScheme``, ...) are exported by :mod:`neardup` itself.
"""
