"""The short texts of a batch run: their shingle sets, kept until the candidates are checked,
the exact prefix search over them, and the exact Jaccard of their pairs.

Short texts (titles, complaints, reviews) are searched by their shingle sets themselves
(:func:`~.prefix_search.prefix_pairs`), so the sets are kept whole: 16 bytes a shingle (its
40-bit key and its document). A collection of such texts grows past any memory, so past their
share of the run's budget the sets go to a file a batch to a block, in document order, and
the prefix search runs in partitions, each held in memory:

1. by shingle key (key mod P): each shingle's document frequency, exact, since all of a
   key's occurrences are in one partition;
2. by span of documents: each document's shingles ordered by (frequency, key), and its
   prefix with each token's rank (:func:`~.prefix_search.prefix_entries`);
3. by prefix key: the buckets, paired as the search over everything pairs them
   (:func:`~.prefix_search.shared_prefix_pairs`; members in document order, so the hub rule
   picks the same heads).

Each step sees whole keys, whole documents or whole buckets, so the pairs are exactly those of
the search over all the sets at once, whatever the budget. The exact Jaccard of a pair reads
the two sets from their blocks (a cache of blocks as large as the share), not a matrix of all
of them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ..arrays import unique_inverse
from ..similarity.shingles import Shingles
from .pair_tiles import PairTiles
from .prefix_search import prefix_entries, prefix_pairs, shared_prefix_pairs
from .workspace import Workspace, unbounded

IntArray = npt.NDArray[np.int64]
UInt64Array = npt.NDArray[np.uint64]
FloatArray = npt.NDArray[np.float64]

#: A shingle of a short text: its key and its document.
ENTRY = np.dtype([("key", "<u8"), ("document", "<i8")])
#: An entry with its key's document frequency (step 1 to step 2).
COUNTED = np.dtype([("key", "<u8"), ("document", "<i8"), ("frequency", "<i8")])
#: A prefix token: key, document, the document's size and the token's rank (step 2 to 3).
PREFIX = np.dtype([("key", "<u8"), ("document", "<i8"), ("size", "<i8"), ("rank", "<i8")])
#: Bytes a step of the partitioned search takes per entry of its partition (the rows, their
#: sorts and the pairs' temporaries), which sets how many partitions fit the share.
WORKING_BYTES = 192
#: Bits of a shingle key (:func:`~neardup.similarity.shingles.shingles_of`).
KEY_BITS = 40
#: Pairs whose sets are gathered at once by :meth:`ShortTexts.jaccard`.
PAIR_CHUNK = 1 << 18


class ShortTexts:
    """The shingle sets of the short texts, appended batch by batch in document order."""

    def __init__(self, workspace: Workspace | None = None) -> None:
        self.workspace = workspace or unbounded()
        self.entries = 0
        #: Each block's entries, or (offset, entries) in the file once written there.
        self._blocks: list[npt.NDArray[np.void] | tuple[int, int]] = []
        self._block_starts: list[int] = []  # first entry of each block
        self._documents: list[IntArray] = []  # each block's documents, ascending
        self._document_starts: list[IntArray] = []  # where each of them starts (entries)
        self._held = 0
        self._file: Path | None = None
        self._written = 0
        self._cache: OrderedDict[int, npt.NDArray[np.void]] = OrderedDict()
        self._cached = 0
        self._index: tuple[IntArray, IntArray] | None = None
        self._sets: Shingles | None = None

    @property
    def spilled(self) -> bool:
        return self._file is not None

    def append(self, keys: UInt64Array, documents: IntArray) -> None:
        """The shingle keys of whole short documents (global numbers, ascending, after every
        earlier batch's; each document's keys ascending)."""
        if not keys.size:
            return
        block = np.empty(keys.size, dtype=ENTRY)
        block["key"], block["document"] = keys, documents
        first = np.flatnonzero(np.concatenate([[True], documents[1:] != documents[:-1]]))
        self._documents.append(np.asarray(documents[first], dtype=np.int64))
        self._document_starts.append(first.astype(np.int64) + self.entries)
        self._block_starts.append(self.entries)
        self._blocks.append(block)
        self.entries += keys.size
        self._held += block.nbytes
        self._index, self._sets = None, None
        if self._held > self.workspace.share("short_texts"):
            self._spill()

    def _spill(self) -> None:
        if self._file is None:
            self._file = self.workspace.file("short-texts")
        with open(self._file, "ab") as out:
            for number, block in enumerate(self._blocks):
                if isinstance(block, np.ndarray):
                    out.write(block.data)
                    self._blocks[number] = (self._written, block.size)
                    self._written += block.nbytes
        self._held = 0

    def _block(self, number: int) -> npt.NDArray[np.void]:
        block = self._blocks[number]
        if isinstance(block, np.ndarray):
            return block
        cached = self._cache.get(number)
        if cached is None:
            assert self._file is not None
            cached = np.fromfile(self._file, dtype=ENTRY, count=block[1], offset=block[0])
            self._cache[number] = cached
            self._cached += cached.nbytes
            while self._cached > self.workspace.share("short_texts") and len(self._cache) > 1:
                self._cached -= self._cache.popitem(last=False)[1].nbytes
        self._cache.move_to_end(number)
        return cached

    def documents(self) -> IntArray:
        """Every short document, ascending."""
        return self._lookup()[0]

    def _lookup(self) -> tuple[IntArray, IntArray]:
        """(documents, where each starts among the entries), built once per appended state."""
        if self._index is None:
            none = np.zeros(0, dtype=np.int64)
            documents = np.concatenate([none, *self._documents])
            starts = np.concatenate([none, *self._document_starts])
            self._documents, self._document_starts = [documents], [starts]
            self._index = (documents, np.append(starts, self.entries))
        return self._index

    def _entries_of(self, wanted: IntArray) -> tuple[UInt64Array, IntArray]:
        """The keys of documents ``wanted`` (short, ascending, distinct) and each key's row in
        ``wanted``, in document order."""
        documents, starts = self._lookup()
        at = np.searchsorted(documents, wanted)
        first, stop = starts[at], starts[at + 1]
        sizes = stop - first
        rows = np.repeat(np.arange(wanted.size, dtype=np.int64), sizes)
        positions = np.repeat(first, sizes) + (
            np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        )
        # Ascending (``wanted`` is), so each block's positions are one stretch.
        block_of = np.searchsorted(np.asarray(self._block_starts), positions, side="right") - 1
        keys = np.empty(positions.size, dtype=np.uint64)
        cuts = (np.flatnonzero(np.diff(block_of)) + 1).tolist()
        for low, high in zip([0, *cuts], [*cuts, positions.size], strict=True):
            if low == high:
                continue
            number = int(block_of[low])
            keys[low:high] = self._block(number)["key"][positions[low:high] - self._block_starts[number]]
        return keys, rows

    def prepare(self) -> None:
        """Build what :meth:`jaccard` reads, once (before forking workers that share it)."""
        self._lookup()
        if not self.spilled:
            self._held_sets().matrix()

    def _held_sets(self) -> Shingles:
        """Every set, held: their matrix answers a chunk of pairs 2x faster than gathering
        the pairs' sets does."""
        if self._sets is None:
            held = self._all_held()
            count = int(held["document"][-1]) + 1 if held.size else 0
            self._sets = Shingles(held["key"], held["document"], count)
        return self._sets

    def jaccard(self, left: IntArray, right: IntArray) -> FloatArray:
        """The exact Jaccard of the sets of short documents left[t] and right[t] (two empty
        sets count as equal, 1.0). Held sets: :meth:`Shingles.jaccard` of them all; spilled:
        the pairs' sets gathered from their blocks, each pair's smaller set looked up among
        the larger's keys, tagged by document."""
        left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
        if not self.spilled:
            return self._held_sets().jaccard(left, right)
        result = np.ones(left.size, dtype=np.float64)
        for low in range(0, left.size, PAIR_CHUNK):
            a, b = left[low : low + PAIR_CHUNK], right[low : low + PAIR_CHUNK]
            wanted, inverse = unique_inverse(np.concatenate([a, b]))
            keys, rows = self._entries_of(np.asarray(wanted, dtype=np.int64))
            tags = (rows.astype(np.uint64) << np.uint64(KEY_BITS)) | keys  # ascending
            sizes = np.bincount(rows, minlength=wanted.size)
            starts = np.concatenate([[0], np.cumsum(sizes)])
            row_a, row_b = inverse[: a.size], inverse[a.size :]
            swap = sizes[row_a] > sizes[row_b]
            query, target = np.where(swap, row_b, row_a), np.where(swap, row_a, row_b)
            # Pairs in the order of the set looked into, so the probes ascend and each stretch
            # of lookups reads one stretch of the tags (random probes cost 4x).
            order = np.argsort(target, kind="stable")
            query, target = query[order], target[order]
            lengths = sizes[query]
            pair = np.repeat(order, lengths)
            offset = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            within = np.repeat(np.arange(a.size), lengths)
            probes = (target[within].astype(np.uint64) << np.uint64(KEY_BITS)) | keys[
                starts[query][within] + offset
            ]
            found = np.minimum(np.searchsorted(tags, probes), max(tags.size - 1, 0))
            hit = tags[found] == probes if tags.size else np.zeros(probes.size, dtype=bool)
            common = np.bincount(pair[hit], minlength=a.size)
            union = sizes[row_a] + sizes[row_b] - common
            np.divide(common, union, out=result[low : low + a.size], where=union > 0)
        return result

    def add_pairs(self, found: PairTiles, threshold: float, max_bucket: int, hub: int) -> None:
        """Add the pairs of the exact prefix search over every set to ``found`` (as sure
        candidates): at once when the search's working memory fits the share (the sets held
        take 16 bytes an entry, the search over them about :data:`WORKING_BYTES`), else in
        partitions (module docstring), whether the sets were spilled or not."""
        share = max(1, self.workspace.share("short_texts"))
        if not self.spilled and self.entries * WORKING_BYTES <= share:
            entries = self._all_held()
            found.add(
                prefix_pairs(entries["key"], entries["document"], threshold, max_bucket, hub), sure=True
            )
            return
        parts = max(2, -(-self.entries * WORKING_BYTES // share))
        by_key = _Spool(self.workspace, "short-keys", parts, ENTRY)
        for number in range(len(self._blocks)):
            block = self._block(number)
            by_key.add(block, block["key"] % np.uint64(parts))
        documents = self.documents()
        first, span = int(documents[0]), -(-(int(documents[-1]) + 1 - int(documents[0])) // parts)
        by_document = _Spool(self.workspace, "short-documents", parts, COUNTED)
        for rows in by_key.read():
            _, token = unique_inverse(rows["key"])
            counted = np.empty(rows.size, dtype=COUNTED)
            counted["key"], counted["document"] = rows["key"], rows["document"]
            counted["frequency"] = np.bincount(token)[token]
            by_document.add(counted, (counted["document"] - first) // span)
        by_prefix = _Spool(self.workspace, "short-prefixes", parts, PREFIX)
        for rows in by_document.read():
            key, document, size, rank = prefix_entries(
                rows["key"], rows["document"], rows["frequency"], threshold
            )
            prefixes = np.empty(key.size, dtype=PREFIX)
            prefixes["key"], prefixes["document"], prefixes["size"], prefixes["rank"] = (
                key,
                document,
                size,
                rank,
            )
            by_prefix.add(prefixes, key % np.uint64(parts))
        for rows in by_prefix.read():
            rows = rows[np.argsort(rows["document"], kind="stable")]
            found.add(
                shared_prefix_pairs(
                    rows["key"], rows["document"], rows["size"], rows["rank"], threshold, max_bucket, hub
                ),
                sure=True,
            )

    def _all_held(self) -> npt.NDArray[np.void]:
        blocks = [block for block in self._blocks if isinstance(block, np.ndarray)]
        return np.concatenate([np.empty(0, dtype=ENTRY), *blocks])


class _Spool:
    """Rows of one dtype split into ``parts`` partition files, each read back whole in
    partition order (rows in the order they were added)."""

    def __init__(self, workspace: Workspace, stem: str, parts: int, dtype: np.dtype[np.void]) -> None:
        self.workspace, self.stem, self.parts, self.dtype = workspace, stem, parts, dtype
        self._files: dict[int, Path] = {}

    def add(self, rows: npt.NDArray[np.void], part: npt.ArrayLike) -> None:
        part = np.asarray(part, dtype=np.int64)
        order = np.argsort(part, kind="stable")
        counts = np.bincount(part, minlength=self.parts)
        start = 0
        for number in np.flatnonzero(counts).tolist():
            stop = start + int(counts[number])
            if number not in self._files:
                self._files[number] = self.workspace.file(f"{self.stem}-{number}")
            with open(self._files[number], "ab") as out:
                out.write(rows[order[start:stop]].data)
            start = stop

    def read(self) -> Iterator[npt.NDArray[np.void]]:
        """Each partition's rows, in partition order; a partition's file goes once read."""
        for number in sorted(self._files):
            path = self._files.pop(number)
            rows = np.fromfile(path, dtype=self.dtype)
            path.unlink()
            yield rows
