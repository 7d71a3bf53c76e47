"""Deduplication policies over texts: batch all-pairs search (:mod:`.batch`), the default
candidate search and its LSH stage (:mod:`.candidates`, :mod:`.lsh`), the whole pipeline
(:mod:`.pipeline`), clusters (:mod:`.clusters`), check-and-add over a stored index
(:mod:`.incremental`, :mod:`.documents`) and index rebuilds (:mod:`.rebuild`).

Above :mod:`neardup.index` and :mod:`neardup.similarity`, whose mechanisms it uses; the
command line, the service and the Spark job are thin adapters over it.
"""
