"""The Simhash index: :class:`~neardup.index.simhash_index.SimhashIndex` adds, queries and
removes fingerprints by key, in memory or in a store of :mod:`neardup.storage`.

:mod:`.simhash_index` is the index (with what a query returns and how keys are checked),
:mod:`.meta` the configuration a store or file records (checked on every open), :mod:`.config`
``IndexConfig`` and :mod:`.files` the ``.npz`` file of an in-memory index. The index stores and
finds; the policies that use it (check-and-add, clusters) live above it in :mod:`neardup.dedup`.
"""
