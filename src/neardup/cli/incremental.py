"""``neardup dedup INPUT --index URL``: dedup new records against a stored index and add them.

Seed 002's incremental mode on the command line: each batch of INPUT is checked against what
the store holds (and against the batch's earlier records), given a stable cluster id and
added, in one locked transaction per batch (:mod:`neardup.dedup.incremental`). The outputs
are those of ``neardup dedup``: pairs name the earlier record as ``a``, once (a re-run over
stored records repeats no pair reversed, :class:`PairLog`); clusters
name the record that started the cluster, which may be a record stored by an earlier run;
``--emit kept`` writes the records that started a cluster (``--keep first`` semantics).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from ..dedup.documents import digests_of, fingerprinter_of, signatures_of, stored_verifier
from ..dedup.incremental import Assignment, IncrementalDeduper
from ..errors import ConfigError
from ..io.output import JsonlWriter, jsonl_writer
from ..io.read import batches
from ..io.record import ErrorReport, record_row
from ..storage.base import Key
from ..storage.urls import redacted
from .common import open_records, progress_bar, report_skipped
from .index import TYPED, open_index, requested_config, storable_ids

if TYPE_CHECKING:
    from ..fingerprint.fingerprinter import Fingerprinter
    from ..index.keys import Match
    from ..index.simhash_index import SimhashIndex
    from ..io.record import Record
    from ..similarity.verify import Verifier


def run_incremental(
    ctx: click.Context,
    *,
    url: str,
    input_path: str,
    pairs_path: str | None,
    clusters_path: str | None,
    emit: str | None,
    output: str,
    keep: str,
    batch_size: int,
    progress: bool | None,
) -> None:
    """The adapter behind ``dedup --index``: stream INPUT through check-and-add."""
    if keep != "first":
        raise ConfigError(
            f"--keep {keep} needs the whole input at once; with --index each record is decided "
            "when it arrives (the earliest record keeps its cluster): drop --keep or --index"
        )
    fields = (ctx.params["id_field"], ctx.params["text_field"], ctx.params["title_field"])
    counts = {"records": 0, "added": 0, "replaced": 0, "duplicates": 0, "pairs": 0, "stored": 0}
    report = ErrorReport()
    typed = ctx.get_parameter_source("max_distance") in TYPED
    with open_index(url, requested_config(ctx, ctx.params["max_distance"] if typed else None)) as index:
        fingerprinter = fingerprinter_of(index)
        verifier = stored_verifier(index)
        records = storable_ids(open_records(ctx, input_path, report), ctx.params["on_error"], report)
        with contextlib.ExitStack() as outputs, progress_bar(progress, "dedup --index") as bar:
            sinks = {
                name: outputs.enter_context(jsonl_writer(path))
                for name, path in (("pairs", pairs_path), ("clusters", clusters_path), ("emit", output))
                if path is not None and (name != "emit" or emit is not None)
            }
            pairs = PairLog(sinks.get("pairs"))
            deduper, existing = _deduper(index, verifier), ctx.params.get("existing") or "skip"
            for group in batches(records, batch_size):
                results = _check_and_add(deduper, fingerprinter, group, existing)
                for record, result in zip(group, results, strict=True):
                    counts["records"] += 1
                    counts["added"] += result.added and not result.replaced
                    counts["replaced"] += result.replaced
                    counts["duplicates"] += result.duplicate
                    if "clusters" in sinks:
                        sinks["clusters"].write({"id": record.id, "cluster": result.cluster})
                    pairs.note(record.id, result.added, result.cluster, result.matches)
                    started_cluster = result.cluster == record.id
                    if "emit" in sinks and started_cluster == (emit == "kept"):
                        sinks["emit"].write(record_row(record, fields))
                bar.update(len(group))
            counts["pairs"] = pairs.finish()
        counts["stored"] = len(index)
    click.echo(
        f"neardup: {counts['records']} records, {counts['duplicates']} with a near-duplicate, "
        f"{counts['pairs']} pairs; added {counts['added']} to {redacted(url)}{_replaced(counts['replaced'])} "
        f"(it holds {counts['stored']}); {report.count} skipped",
        err=True,
    )
    report_skipped(report)


def _deduper(index: SimhashIndex, verifier: Verifier | None) -> IncrementalDeduper:
    """Check-and-add over the index, its changed-text errors naming this command's flag."""
    deduper = IncrementalDeduper(index, verifier)
    deduper.replace_hint = "--existing replace"
    return deduper


def _replaced(count: int) -> str:
    return f", replaced {count}" if count else ""


def _check_and_add(
    deduper: IncrementalDeduper, fingerprinter: Fingerprinter, group: list[Record], existing: str
) -> list[Assignment]:
    """Check-and-add one batch of records: fingerprints, text digests (what tells a retry from
    another text) and signatures when the index verifies."""
    values = fingerprinter.fingerprint_many([record.text for record in group])
    signatures = signatures_of(deduper.verifier, group, fingerprinter)
    keys = [record.id for record in group]
    locations = [record.location for record in group]  # errors name file:line
    return deduper.check_and_add_many(
        keys,
        values,
        signatures=signatures,
        locations=locations,
        digests=digests_of(deduper.verifier, group),
        existing=existing,
    )


class PairLog:
    """Writes each near-duplicate pair of a run once, the earlier-stored record as ``a``.

    A record this run adds lists only records stored before it (or earlier in its batch), so
    its matches are ``a``. A record stored before the run (a re-run, a repeated id) also lists
    records stored after it, which would repeat a pair reversed. Such a pair is ordered by
    what is known: the record whose id is the other's cluster came first; else the one read
    first in this input; a stored record absent from the input is taken as the earlier one
    (those pairs are written at the end, once it is clear the other record never came).
    """

    def __init__(self, sink: JsonlWriter | None) -> None:
        self.sink = sink
        self.count = 0
        self._read: set[Key] = set()  # ids read so far in this run
        self._clusters: dict[Key, Key] = {}  # clusters of the records stored before this run
        self._done: set[frozenset[Key]] = set()
        self._waiting: dict[frozenset[Key], tuple[Key, Key, int]] = {}

    def note(self, key: Key, added: bool, cluster: Key, matches: Sequence[Match]) -> None:
        """Record one check-and-add outcome, writing the pairs that are new and decidable."""
        if key not in self._read:
            self._read.add(key)
            if not added:
                self._clusters[key] = cluster
        for match in matches:
            pair = frozenset((key, match.key))
            if pair in self._done:
                continue
            if added or cluster == match.key:
                self._write(pair, match.key, key, match.distance)
            elif match.key in self._read:  # read earlier in this run: it came first, unless it
                # was added by this run or joined this record's cluster
                later = match.key not in self._clusters or self._clusters[match.key] == key
                a, b = (key, match.key) if later else (match.key, key)
                self._write(pair, a, b, match.distance)
            else:
                self._waiting.setdefault(pair, (match.key, key, match.distance))

    def finish(self) -> int:
        """Write the pairs still waiting (their stored record was not in the input); the count."""
        for pair, (a, b, distance) in list(self._waiting.items()):
            self._write(pair, a, b, distance)
        return self.count

    def _write(self, pair: frozenset[Key], a: Key, b: Key, distance: int) -> None:
        self._done.add(pair)
        self._waiting.pop(pair, None)
        self.count += 1
        if self.sink is not None:
            self.sink.write({"a": a, "b": b, "distance": distance})
