"""Input and output files: reading documents and writing results without ever losing data.

:mod:`.record` is the :class:`~neardup.io.record.Record` every reader yields (and the checks of
its id, text and title), :mod:`.read` reads JSON Lines, CSV (:mod:`.csv_strict`) and Parquet
and cuts batches, :mod:`.output` writes JSON Lines and other files atomically. Imports only
:mod:`neardup.errors`: every layer above reads and writes through it.
"""
