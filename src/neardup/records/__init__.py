"""Structured records: duplicates among rows of fields (``neardup records``).

:mod:`.schema` declares the fields and their kinds, :mod:`.values` parses values,
:mod:`.candidates` blocks rows into candidate pairs, :mod:`.compare` and :mod:`.weights` score a
pair, :mod:`.learned` fits weights from labelled pairs, :mod:`.dedup` runs the whole search, and
:mod:`.sources` (with :mod:`.sql_guard`) reads rows from CSV files and SQL databases. The public
names (``RecordSchema``, ``FieldSpec``, ``find_duplicate_records``) are exported by
:mod:`neardup` itself.
"""
