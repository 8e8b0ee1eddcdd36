"""What the workers of `train --engine dask` make of the training data, as numpy arrays:
the counts of a part, the digests that find duplicates, the cross-validation sample, and
how they add up (`cluster` runs these as tasks).

- `read_counts` (a part): read, digest, tokenize and count each distinct message of it
  (the first copy in the part wins), the rows kept until the part's duplicates of earlier
  parts are known.
- `fold` (a digest bucket): the digests of the distinct messages whose digest starts in
  the bucket (16 bytes and a label each: on the disk of the workers that keep the last
  checkpoint, `digestruns`, and in memory since), folded in with each part in input
  order, so that a digest already there marks the part's copy as a duplicate: the first
  copy in the input wins, as in local training.
- `finish` (a part): its per-class counts without those duplicates, and its candidates for
  the sample; `merge` adds two such tallies up (in any order, any grouping: the sum is the
  same), and `add_sample` adds a part's candidates to the sample so far, in place
  (`Reservoir`; a checkpoint's copy on disk: `StoredSample`).

Terms are kept as sorted arrays of their UTF-8 bytes (`Vocab`), not as Python objects, and
the per-class counts as int64 arrays beside them; two tallies add up by a merge of sorted
arrays.

The cross-validation sample is drawn without knowing how many messages there are: of the
distinct messages, the ``limit`` whose `sample_key` (a keyed hash of the digest) is
smallest, in input order. It depends on the messages alone, not on their partitions nor on
the order of the additions: local training keeps the same sample by the same rule.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.parallel import CHUNK, chunks
from ..core.settings import TokenizerConfig
from ..mail.headers import message_digest, message_time
from ..mail.message import Problems
from ..models.model import digest_halves, sample_key, sample_order
from ..text.counting import ChunkCounts, count_chunk
from .sources import Part, read_part

_halves = digest_halves

SHORT = 64
"""Terms of at most this many UTF-8 bytes (and no NUL byte) sit in a fixed-width array;
the rare longer ones in an array of their own."""
POSITION_BITS = 32
"""A message's position in the input: its part's number << 32 | its number in the part."""


def _encode(term: str) -> bytes:
    return term.encode("utf-8", "surrogatepass")


def _decode(term: bytes) -> str:
    return term.decode("utf-8", "surrogatepass")


# -- terms as sorted arrays -------------------------------------------------------------------


@dataclass(frozen=True)
class Vocab:
    """Distinct terms as UTF-8 bytes, each array sorted (byte order is code point order):
    ``short`` (fixed width) then ``long``; a term's column is its place in that order."""

    short: np.ndarray = field(default_factory=lambda: np.zeros(0, "S1"))
    long: np.ndarray = field(default_factory=lambda: np.zeros(0, object))

    def __len__(self) -> int:
        return len(self.short) + len(self.long)

    @classmethod
    def of(cls, terms: Sequence[str]) -> tuple[Vocab, np.ndarray]:
        """The vocabulary of distinct ``terms`` and the column of each."""
        raw = [_encode(t) for t in terms]
        is_long = np.fromiter(map(len, raw), np.int64, len(raw)) > SHORT
        if b"\0" in b"".join(raw):  # a NUL byte would be lost at the end of a fixed-width one
            is_long |= np.fromiter((b"\0" in t for t in raw), bool, len(raw))
        short_at, long_at = np.flatnonzero(~is_long), np.flatnonzero(is_long)
        short = np.array([raw[i] for i in short_at.tolist()], "S") if short_at.size else None
        long = np.array([raw[i] for i in long_at.tolist()] + [None], object)[:-1]
        if short is None:
            short = np.zeros(0, "S1")
        s_order, l_order = np.argsort(short, kind="stable"), np.argsort(long, kind="stable")
        vocab = cls(short[s_order], long[l_order])
        column = np.empty(len(raw), np.int64)
        column[short_at[s_order]] = np.arange(short_at.size)
        column[long_at[l_order]] = short_at.size + np.arange(long_at.size)
        return vocab, column

    def union(self, other: Vocab) -> tuple[Vocab, np.ndarray, np.ndarray]:
        """The union, and the columns in it of this one's terms and of the other's."""
        short, short_a, short_b = _merged(self.short, other.short)
        long = _union_objects(self.long, other.long)
        maps = [
            np.concatenate([at, len(short) + _positions(long, v.long)]).astype(np.int64)
            for v, at in ((self, short_a), (other, short_b))
        ]
        return Vocab(short, long), maps[0], maps[1]

    def take(self, columns: np.ndarray) -> Vocab:
        """The terms of these sorted columns."""
        n = len(self.short)
        return Vocab(self.short[columns[columns < n]], self.long[columns[columns >= n] - n])

    def columns_in(self, other: Vocab) -> tuple[np.ndarray, np.ndarray]:
        """The column in ``other`` of each of these terms, and whether it is there."""
        short = np.searchsorted(other.short, self.short)
        long = _positions(other.long, self.long)
        found = np.concatenate(
            [
                other.short[np.minimum(short, len(other.short) - 1)] == self.short
                if len(other.short)
                else np.zeros(len(self.short), bool),
                np.array(
                    [p < len(other.long) and other.long[p] == t for p, t in zip(long, self.long)],
                    bool,
                ),
            ]
        )
        return np.concatenate([short, len(other.short) + long]).astype(np.int64), found

    def terms(self) -> tuple[list[str], np.ndarray]:
        """The terms as text sorted by code point, and the column of each in that order."""
        short = [_decode(t) for t in self.short.tolist()]
        long = [_decode(t) for t in self.long.tolist()]
        if not long:
            return short, np.arange(len(short), dtype=np.int64)
        at = np.array([bisect.bisect_left(short, t) for t in long], np.int64)
        # short term i is preceded by the long terms that sort before it
        place = np.arange(len(short)) + np.searchsorted(at, np.arange(len(short)), side="right")
        long_place = at + np.arange(len(long))
        merged: list[str] = [""] * (len(short) + len(long))
        for i, p in enumerate(place.tolist()):
            merged[p] = short[i]
        for i, p in enumerate(long_place.tolist()):
            merged[p] = long[i]
        return merged, np.concatenate([place, long_place]).astype(np.int64)


def _merged(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The union of two sorted arrays of distinct terms, and where each term of either is
    in it: a stable sort of the two runs (a merge, in linear time), then the repeats out."""
    both = np.concatenate([a, b])
    order = np.argsort(both, kind="stable")
    ranked = both[order]
    new = np.ones(len(ranked), bool)
    new[1:] = ranked[1:] != ranked[:-1]
    where = np.empty(len(both), np.int64)
    where[order] = np.cumsum(new) - 1
    return ranked[new], where[: len(a)], where[len(a) :]


def _union_objects(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not len(b):
        return a
    if not len(a):
        return b
    out = np.array(sorted(set(a.tolist()) | set(b.tolist())) + [None], object)
    return out[:-1]


def _positions(sorted_terms: np.ndarray, terms: np.ndarray) -> np.ndarray:
    if not len(terms):
        return np.zeros(0, np.int64)
    listed = sorted_terms.tolist()
    return np.array([bisect.bisect_left(listed, t) for t in terms.tolist()], np.int64)


# -- a part read and counted ------------------------------------------------------------------


class Recorded(Problems):
    """Problems met on a worker, kept to be reported by the calling process."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[str, str | None]] = []

    def skip(self, where: str, reason: str) -> None:
        super().skip(where, reason)
        self.lines.append((where, reason))

    def note(self, text: str) -> None:
        self.lines.append((text, None))


@dataclass
class PartCounts:
    """A part read (`read_counts`): its distinct messages' digests (n, 16), positions,
    dates (`headers.message_time`, NaN where none), labels and count rows (chunks of `counting.ChunkCounts`), how many messages were read, and
    the problems met, and the bytes of the messages read."""

    digests: np.ndarray
    positions: np.ndarray
    times: np.ndarray
    labels: list[str]
    counted: list[ChunkCounts]
    read: int
    problems: list[tuple[str, str | None]]
    size: int = 0


def read_counts(tokenizer: TokenizerConfig, part: Part, number: int) -> PartCounts:
    """On a worker: read part ``number``, digest, tokenize and count its distinct messages."""
    problems = Recorded()
    seen: set[bytes] = set()
    digests, positions, times, labels, counted = [], [], [], [], []
    read = size = 0
    for batch in chunks(read_part(part, problems), CHUNK):
        datas = []
        for data, label in batch:
            size += len(data)
            digest = message_digest(data)
            if digest not in seen:
                seen.add(digest)
                digests.append(digest)
                positions.append(number << POSITION_BITS | read)
                moment = message_time(data, tokenizer.mail)  # as local training reads it
                times.append(math.nan if moment is None else moment)
                labels.append(label)
                datas.append(data)
            read += 1
        if datas:
            counted.append(count_chunk(tokenizer, datas))
    return PartCounts(
        np.frombuffer(b"".join(digests), np.uint8).reshape(-1, 16),
        np.array(positions, np.int64),
        np.array(times, np.float64),
        labels,
        counted,
        read,
        problems.lines,
        size,
    )


def report(part: PartCounts) -> tuple[int, int, list[tuple[str, str | None]]]:
    """What the calling process reports of a part: messages read, their bytes, problems."""
    return part.read, part.size, part.problems


# -- duplicates: digest buckets folded in input order ------------------------------------------


@dataclass
class Bucket:
    """The distinct messages seen so far whose digest falls in one bucket: those of the
    last checkpoint on the disk of the workers that keep it (`digestruns`, under the token
    ``base``; None: none), and those found since, in memory (``fresh``: a sorted array of
    `digestruns.RECORD` a part, 20 bytes a message, at most `cluster.CHECKPOINT_PARTS`
    parts' worth). ``labels`` are what the records' codes index (in order of first
    appearance: the codes on disk never change), ``size`` how many digests there are,
    ``losers`` the positions of the last part's messages found to be copies, ``holders``
    the workers that keep ``base``."""

    base: str | None = None
    fresh: list[np.ndarray] = field(default_factory=list)
    labels: tuple[str, ...] = ()
    size: int = 0
    losers: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    holders: tuple[str, ...] = ()


def bucket_of(digests: np.ndarray, buckets: int) -> np.ndarray:
    """The bucket of each digest (by its first two bytes: the buckets are ranges of the
    sorted digests)."""
    head = digests[:, 0].astype(np.int64) << 8 | digests[:, 1]
    return head * buckets >> 16


def _keys(digests: np.ndarray) -> np.ndarray:
    """The digests (n, 16) as 16-byte strings, which compare as their bytes."""
    return np.ascontiguousarray(digests, np.uint8).view("S16").ravel()


def fold(state: Bucket | None, part: PartCounts, bucket: int, buckets: int) -> Bucket:
    """On a worker (one that keeps the bucket's checkpoint): the bucket with the part's
    messages of it added; those already there (an earlier part's copy) become ``losers``.
    Parts are folded in input order. Nothing is changed in place: the result shares the
    arrays of ``state``."""
    from .digestruns import RECORD, base

    state = state or Bucket()
    mine = np.flatnonzero(bucket_of(part.digests, buckets) == bucket)
    keys = _keys(part.digests[mine])
    found = np.zeros(len(keys), bool)
    if state.base is not None:
        found = base(state.base, state.holders).contains(keys)
    for records in state.fresh:
        at = np.minimum(np.searchsorted(records["d"], keys), len(records) - 1)
        found |= records["d"][at] == keys
    labels = list(state.labels)
    for i in mine[~found].tolist():
        if part.labels[i] not in labels:
            labels.append(part.labels[i])
    new = np.flatnonzero(~found)
    records = np.empty(len(new), RECORD)
    records["d"] = keys[new]
    records["c"] = [labels.index(part.labels[i]) for i in mine[new].tolist()]
    records = records[np.argsort(records["d"], kind="stable")]
    return Bucket(
        state.base,
        [*state.fresh, records] if len(records) else list(state.fresh),
        tuple(labels),
        state.size + len(records),
        part.positions[mine][found],
        state.holders,
    )


def losers(state: Bucket) -> np.ndarray:
    return state.losers


def bucket_labels(state: Bucket) -> tuple[int, tuple[str, ...]]:
    """How many digests a bucket (at a checkpoint) holds, and the labels its codes index."""
    return state.size, state.labels


def bucket_slice(state: Bucket, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Digests ``start`` to ``stop`` of a bucket at a checkpoint, in order, and their
    labels' codes: what the calling process fetches at a time to write them (the bucket's
    runs merged into one first, once)."""
    from .digestruns import base

    if state.base is None:
        return np.zeros((0, 16), np.uint8), np.zeros(0, np.int32)
    records = base(state.base, state.holders).compact().read(start, stop)
    return (
        np.frombuffer(records["d"].tobytes(), np.uint8).reshape(-1, 16),
        records["c"].astype(np.int32),
    )


# -- the counts of parts, added up -------------------------------------------------------------


@dataclass
class Sample:
    """Candidate rows of the cross-validation sample: keys, digests, positions, dates, labels, and
    the rows (CSR: indptr, indices into ``vocab``, data), in order of position."""

    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    digests: np.ndarray = field(default_factory=lambda: np.zeros((0, 16), np.uint8))
    positions: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    times: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    labels: list[str] = field(default_factory=list)
    vocab: Vocab = field(default_factory=Vocab)
    indptr: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    indices: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    data: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))

    def rows(self, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indptr, indices, data) of the rows ``keep``, in that order."""
        starts, ends = self.indptr[keep], self.indptr[keep + 1]
        sizes = ends - starts
        indptr = np.zeros(len(keep) + 1, np.int64)
        np.cumsum(sizes, out=indptr[1:])
        take = np.repeat(starts - indptr[:-1], sizes) + np.arange(indptr[-1])
        return indptr, self.indices[take], self.data[take]


@dataclass
class Tally:
    """Per-class counts of distinct messages over ``vocab`` (labels sorted), the first
    position of each label, the sample's candidates, the messages read and dropped as
    duplicates, and the terms pruned (`prune_terms`)."""

    labels: tuple[str, ...]
    vocab: Vocab
    class_count: np.ndarray
    term_count: np.ndarray
    doc_count: np.ndarray
    first: np.ndarray
    sample: Sample
    read: int = 0
    duplicates: int = 0
    pruned: int = 0


def finish(part: PartCounts, lost: Sequence[np.ndarray], limit: int) -> Tally:
    """On a worker: the tally of a part without its copies of earlier parts' messages
    (``lost``: their positions, from each bucket), with at most ``limit`` sample rows."""
    from ..models import naive_bayes as nb
    from ..text.vocabulary import TermIndex, renumber

    gone = set(np.concatenate([np.zeros(0, np.int64), *lost]).tolist())
    keep = np.array([p not in gone for p in part.positions.tolist()], bool)
    labels = tuple(sorted({x for x, k in zip(part.labels, keep.tolist()) if k}))
    index = TermIndex()
    blocks = [renumber(c, index, grow=True) for c in part.counted]
    X = _stack(blocks, len(index))
    X = X[np.flatnonzero(keep)] if not keep.all() else X
    y = np.array([labels.index(x) for x, k in zip(part.labels, keep.tolist()) if k], np.int64)
    class_count, term_count, doc_count = nb.class_counts(X, y, len(labels))
    every, column = Vocab.of(index.terms)
    used = np.flatnonzero(doc_count.sum(axis=0) > 0)  # terms of copies alone go
    order = np.argsort(column[used], kind="stable")
    used = used[order]
    vocab = every.take(np.sort(column[used]))
    positions, times = part.positions[keep], part.times[keep]
    first = np.array([positions[y == c].min() for c in range(len(labels))], np.int64)
    digests = part.digests[keep]
    keys = np.array([sample_key(d.tobytes()) for d in digests], np.uint64)
    chosen = (
        np.sort(np.lexsort((*_halves(digests)[::-1], keys))[:limit])
        if limit
        else np.zeros(0, np.int64)
    )
    rows = X[chosen]
    sample = Sample(
        keys[chosen],
        digests[chosen],
        positions[chosen],
        times[chosen],
        [labels[c] for c in y[chosen].tolist()],
        every,
        rows.indptr.astype(np.int64),
        column[rows.indices].astype(np.int32),
        rows.data.astype(np.int32),
    )
    return Tally(
        labels,
        vocab,
        class_count,
        term_count[:, used],
        doc_count[:, used],
        first,
        _compact(sample),
        part.read,
        part.read - int(keep.sum()),
    )


def _stack(blocks: list, width: int) -> Any:
    """CSR blocks of rows over the first columns of ``width``, stacked (each row's columns
    in their order)."""
    import scipy.sparse as sp

    sizes = np.concatenate([np.zeros(0, np.int64), *(np.diff(b.indptr) for b in blocks)])
    indptr = np.zeros(sizes.size + 1, np.int64)
    np.cumsum(sizes, out=indptr[1:])
    data = np.concatenate([np.zeros(0, np.int64), *(b.data for b in blocks)])
    indices = np.concatenate([np.zeros(0, np.int64), *(b.indices for b in blocks)])
    return sp.csr_matrix((data, indices, indptr), shape=(sizes.size, width))


def _compact(sample: Sample) -> Sample:
    """The sample with only the terms its rows use."""
    present = np.zeros(len(sample.vocab), bool)
    present[sample.indices] = True
    used = np.flatnonzero(present)
    remap = np.full(len(sample.vocab), -1, np.int32)
    remap[used] = np.arange(len(used))
    sample.vocab, sample.indices = sample.vocab.take(used), remap[sample.indices]
    return sample


def merge(a: Tally, b: Tally, limit: int) -> Tally:
    """On a worker: the sum of two tallies of different messages, with the ``limit`` sample
    rows of smallest key of both (none for 0: `cluster` keeps the sample apart, in
    `add_sample`'s chain)."""
    labels = tuple(sorted(set(a.labels) | set(b.labels)))
    vocab, map_a, map_b = a.vocab.union(b.vocab)
    shape = (len(labels), len(vocab))
    term_count, doc_count = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
    class_count = np.zeros(len(labels), np.int64)
    first = np.full(len(labels), np.iinfo(np.int64).max, np.int64)
    for t, columns in ((a, map_a), (b, map_b)):
        rows = np.array([labels.index(x) for x in t.labels], np.int64)
        class_count[rows] += t.class_count
        first[rows] = np.minimum(first[rows], t.first)
        if len(columns):
            term_count[np.ix_(rows, columns)] += t.term_count
            doc_count[np.ix_(rows, columns)] += t.doc_count
    return Tally(
        labels,
        vocab,
        class_count,
        term_count,
        doc_count,
        first,
        _merge_samples(a.sample, b.sample, limit) if limit else Sample(),
        a.read + b.read,
        a.duplicates + b.duplicates,
    )


POOL_SLACK = 8
"""A `Reservoir`'s pool of entries holds 1/POOL_SLACK more than its rows need, so that the
holes rows leave are compacted once every so many parts, not at every one."""


RENUMBER = 1 << 16
"""Entries of a `Reservoir`'s pool renumbered at a time (their scratch: 0.5 MB)."""


class Reservoir:
    """The cross-validation sample being drawn (`add_sample`), changed in place: at most
    ``limit`` rows in arrays of ``limit`` slots (key, digest, position, date, label, and
    where the row's entries are), the rows' entries (term, count) in a pool where a row
    that loses its place leaves a hole, the pool compacted in place when it is full. Taking
    in n candidates costs memory of the order of n (and of the keys of the rows, 40 bytes
    a row), never a copy of the sample's entries. Taking in rows it holds already (same
    positions: a task run again) changes nothing, so a task run again after a lost worker
    leaves the same sample."""

    def __init__(self, limit: int) -> None:
        self.limit, self.n, self.end = limit, 0, 0
        self.keys = np.zeros(limit, np.uint64)
        self.digests = np.zeros((limit, 16), np.uint8)
        self.positions = np.zeros(limit, np.int64)
        self.times = np.zeros(limit, np.float64)
        self.codes = np.zeros(limit, np.int32)
        self.start = np.zeros(limit, np.int64)
        self.size = np.zeros(limit, np.int64)
        self.labels: list[str] = []
        self.vocab = Vocab()
        self.indices = np.zeros(0, np.int32)  # the pool: every entry a column of ``vocab``
        self.data = np.zeros(0, np.int32)

    def __len__(self) -> int:
        return self.n

    def take_in(self, rows: Sample) -> None:
        """The ``limit`` rows of smallest key of the sample and ``rows`` kept."""
        n = self.n
        cand = np.arange(len(rows.keys))
        if n:
            cand = cand[~np.isin(rows.positions, self.positions[:n])]
        if n >= self.limit and n:
            cand = cand[rows.keys[cand] <= self.keys[:n].max()]
        if not len(cand):
            return
        order = sample_order(
            np.concatenate([self.keys[:n], rows.keys[cand]]),
            np.concatenate([self.digests[:n], rows.digests[cand]]),
        )
        won = np.zeros(n + len(cand), bool)
        won[order[: self.limit]] = True
        del order
        lost = np.flatnonzero(~won[:n])
        new = cand[won[n:]]
        if not len(new):
            return
        indptr, indices, data = rows.rows(new)
        self.size[lost] = 0  # their entries are holes from now on
        self._room(len(indices), n + len(new) - len(lost))
        used = np.unique(indices)
        terms = rows.vocab.take(used)
        columns, found = terms.columns_in(self.vocab)
        if not found.all():
            vocab, old, columns = self.vocab.union(terms)
            self._renumber(old)
            self.vocab = vocab
        indices = columns[np.searchsorted(used, indices)].astype(np.int32)
        slots = np.concatenate([lost, n + np.arange(len(new) - len(lost))])
        self.n = n + len(new) - len(lost)
        self.indices[self.end : self.end + len(indices)] = indices
        self.data[self.end : self.end + len(indices)] = data
        self.start[slots] = self.end + indptr[:-1]
        self.size[slots] = np.diff(indptr)
        self.end += len(indices)
        self.keys[slots] = rows.keys[new]
        self.digests[slots] = rows.digests[new]
        self.positions[slots] = rows.positions[new]
        self.times[slots] = rows.times[new]
        for label in dict.fromkeys(rows.labels[i] for i in new.tolist()):
            if label not in self.labels:
                self.labels.append(label)
        self.codes[slots] = [self.labels.index(rows.labels[i]) for i in new.tolist()]

    def _renumber(self, columns: np.ndarray) -> None:
        """The pool's columns renumbered in place (``columns[old]``), a slice at a time."""
        for at in range(0, self.end, RENUMBER):
            part = slice(at, min(at + RENUMBER, self.end))
            self.indices[part] = columns[self.indices[part]]

    def _room(self, entries: int, rows: int) -> None:
        """Room for ``entries`` more at the end of the pool, for ``rows`` rows in all: the
        holes compacted out (in place), or, where the rows need more, a larger pool
        (`POOL_SLACK`; while the sample is not full, for ``limit`` rows of this size)."""
        if self.end + entries <= len(self.indices):
            return
        self._pack()
        need = self.end + entries
        if need <= len(self.indices):
            return
        if rows < self.limit:
            need = need * self.limit // max(rows, 1)
        size = need + need // POOL_SLACK
        for name in ("indices", "data"):
            grown = np.empty(size, np.int32)
            grown[: self.end] = getattr(self, name)[: self.end]
            setattr(self, name, grown)

    def _pack(self) -> None:
        """The rows' entries moved to the start of the pool in their order there, a slice
        of rows at a time (each slice gathered, then written where it goes, never past
        the entries not yet moved), and the terms no row uses dropped."""
        order = np.argsort(self.start[: self.n], kind="stable")
        end = 0
        for at in range(0, len(order), GATHER_ROWS):
            slots = order[at : at + GATHER_ROWS]
            indptr = np.zeros(len(slots) + 1, np.int64)
            np.cumsum(self.size[slots], out=indptr[1:])
            take = np.repeat(self.start[slots] - indptr[:-1], self.size[slots])
            take += np.arange(indptr[-1])
            moved = self.indices[take], self.data[take]
            self.indices[end : end + indptr[-1]], self.data[end : end + indptr[-1]] = moved
            self.start[slots] = end + indptr[:-1]
            end += int(indptr[-1])
        self.end = end
        present = np.zeros(len(self.vocab), bool)
        for at in range(0, end, RENUMBER):
            present[self.indices[at : min(at + RENUMBER, end)]] = True
        if not present.all():
            used = np.flatnonzero(present)
            columns = np.zeros(len(self.vocab), np.int32)
            columns[used] = np.arange(len(used))
            self._renumber(columns)
            self.vocab = self.vocab.take(used)

    def sample(self) -> Sample:
        """The rows as a `Sample`, in order of position."""
        chosen = np.argsort(self.positions[: self.n], kind="stable")
        indptr = np.zeros(len(chosen) + 1, np.int64)
        np.cumsum(self.size[chosen], out=indptr[1:])
        indices = np.empty(indptr[-1], np.int32)
        data = np.empty(indptr[-1], np.int32)
        for at in range(0, len(chosen), GATHER_ROWS):
            slots = chosen[at : at + GATHER_ROWS]
            out = slice(indptr[at], indptr[min(at + GATHER_ROWS, len(chosen))])
            take = np.repeat(self.start[slots] - indptr[at : at + len(slots)], self.size[slots])
            take += np.arange(out.start, out.stop)
            indices[out], data[out] = self.indices[take], self.data[take]
        return _compact(
            Sample(
                self.keys[chosen],
                self.digests[chosen],
                self.positions[chosen],
                self.times[chosen],
                [self.labels[c] for c in self.codes[chosen].tolist()],
                self.vocab,
                indptr,
                indices,
                data,
            )
        )


_STORED = ("keys", "digests", "positions", "times", "codes", "start", "size")


class StoredSample:
    """A checkpoint's `Reservoir` kept on this worker's disk, in an unnamed temporary file
    (as `digestruns` keeps digests: no other user can open or swap it, gone with the
    object or the process), not in its memory: `get` gives back the sample itself while
    the worker still holds it (the chain goes on from it, changing it in place, which a
    rerun of the chain's tasks from there cannot tell: `Reservoir.take_in`), or else makes
    it again from the file, its pool as large as it was."""

    def __init__(self, sample: Reservoir) -> None:
        import tempfile
        import weakref

        self.held = weakref.ref(sample)
        self.file = tempfile.TemporaryFile(prefix="nbspam-sample-")
        self.limit, self.n, self.end = sample.limit, sample.n, sample.end
        self.labels, self.long = list(sample.labels), sample.vocab.long
        self.short = (len(sample.vocab.short), sample.vocab.short.dtype)
        self.pool = len(sample.indices)
        for array in (
            *(getattr(sample, name) for name in _STORED),
            sample.vocab.short,
            sample.indices[: sample.end],
            sample.data[: sample.end],
        ):
            self.file.write(memoryview(np.ascontiguousarray(array)).cast("B"))
        self.file.flush()

    def get(self) -> Reservoir:
        held = self.held()
        if held is not None:
            return held
        sample = Reservoir(self.limit)
        sample.n, sample.end, sample.labels = self.n, self.end, list(self.labels)
        short = np.empty(self.short[0], self.short[1])
        sample.indices = np.empty(self.pool, np.int32)
        sample.data = np.empty(self.pool, np.int32)
        self.file.seek(0)
        for array in (
            *(getattr(sample, name) for name in _STORED),
            short,
            sample.indices[: self.end],
            sample.data[: self.end],
        ):
            view = memoryview(array).cast("B")
            if self.file.readinto(view) != len(view):
                raise OSError("a sample kept on disk was cut short")
        sample.vocab = Vocab(short, self.long)
        return sample


def add_sample(state: Reservoir | None, part: Tally, limit: int) -> Reservoir:
    """On a worker: the sample so far (None: none yet) with a part's candidates taken in,
    the ``limit`` rows of smallest key of both: ``state`` itself, changed in place
    (`Reservoir`)."""
    state = Reservoir(limit) if state is None else state
    state.take_in(part.sample)
    return state


def with_sample(total: Tally, sample: Reservoir) -> Tally:
    """On a worker: the tally with the sample ``sample`` (`add_sample`'s)."""
    import dataclasses

    return dataclasses.replace(total, sample=sample.sample())


GATHER_ROWS = 1024
"""Rows a merge of samples gathers at a time: its scratch arrays stay a few MB, not some
three times the sample (four arrays of the whole sample's entries)."""


def _merge_samples(a: Sample, b: Sample, limit: int) -> Sample:
    """The ``limit`` rows of smallest key of two samples, in order of position: the rows
    chosen are gathered from each side alone, `GATHER_ROWS` at a time (never both samples'
    rows joined, which made a merge of two full samples take some 80 MB)."""
    vocab, map_a, map_b = a.vocab.union(b.vocab)
    keys = np.concatenate([a.keys, b.keys])
    digests = np.concatenate([a.digests, b.digests])
    hi, lo = _halves(digests)
    chosen = np.lexsort((lo, hi, keys))[:limit]
    del hi, lo
    positions = np.concatenate([a.positions, b.positions])
    chosen = chosen[np.argsort(positions[chosen], kind="stable")]
    times = np.concatenate([a.times, b.times])
    labels = [*a.labels, *b.labels]
    in_a = chosen < len(a.keys)
    sizes = np.empty(len(chosen), np.int64)
    sizes[in_a] = np.diff(a.indptr)[chosen[in_a]]
    sizes[~in_a] = np.diff(b.indptr)[chosen[~in_a] - len(a.keys)]
    indptr = np.zeros(len(chosen) + 1, np.int64)
    np.cumsum(sizes, out=indptr[1:])
    indices = np.empty(indptr[-1], np.int32)
    data = np.empty(indptr[-1], np.int32)
    for start in range(0, len(chosen), GATHER_ROWS):  # a slice at a time: bounded scratch
        block = slice(start, start + GATHER_ROWS)
        for side, sample, offset, columns in ((in_a, a, 0, map_a), (~in_a, b, len(a.keys), map_b)):
            out = start + np.flatnonzero(side[block])
            if not len(out):
                continue
            part_indptr, part_indices, part_data = sample.rows(chosen[out] - offset)
            # where each entry of these rows goes among the rows chosen
            to = np.repeat(indptr[out] - part_indptr[:-1], np.diff(part_indptr))
            to += np.arange(part_indptr[-1])
            indices[to] = columns[part_indices]
            data[to] = part_data
    return _compact(
        Sample(
            keys[chosen],
            digests[chosen],
            positions[chosen],
            times[chosen],
            [labels[i] for i in chosen.tolist()],
            vocab,
            indptr,
            indices,
            data,
        )
    )


def prune_terms(total: Tally, min_docs: int | None, max_terms: int | None) -> Tally:
    """On a worker: the tally with `update.prune`'s rules for terms: those in fewer than
    ``min_docs`` messages go, then of the rest only the ``max_terms`` in most messages are
    kept (ties: in term order)."""
    docs = total.doc_count.sum(axis=0)
    keep = np.flatnonzero(docs >= (min_docs or 1))
    if max_terms is not None and len(keep) > max_terms:
        _, rank = total.vocab.terms()  # term order is code point order
        top = np.lexsort((rank[keep], -docs[keep]))[:max_terms]
        keep = np.sort(keep[top])
    if len(keep) == len(total.vocab):
        return total
    return Tally(
        total.labels,
        total.vocab.take(keep),
        total.class_count,
        total.term_count[:, keep],
        total.doc_count[:, keep],
        total.first,
        total.sample,
        total.read,
        total.duplicates,
        len(total.vocab) - len(keep),
    )
