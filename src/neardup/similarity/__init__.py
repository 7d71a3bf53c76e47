"""The one similarity core: every mode (batch dedup, the index, the service, Spark) shingles,
sketches, estimates and bands texts with these functions, one definition each
(``tests/test_one_definition.py`` fails on a second):

- :mod:`.shingles`: the shingler (:func:`~.shingles.shingles_of`) and exact shingle Jaccard;
- :mod:`.sketches`: the one-permutation MinHash sketch, its one-byte bins and their Jaccard
  estimate, the batch search's band keys, the text sketch a band index stores, classic
  MinHash of shingle sets;
- :mod:`.minhash`: MinHash signatures of sets (:class:`~.minhash.MinHasher`);
- :mod:`.bands`: the band index's keys;
- :mod:`.verify`: the verifiers that confirm a candidate pair.

Builds on :mod:`neardup.fingerprint` and :mod:`neardup.text`; below the index, the stores and
the dedup pipelines, which all use it. The public names (``MinHasher``, ``Verifier``,
``BandScheme``, ...) are exported by :mod:`neardup` itself.
"""
