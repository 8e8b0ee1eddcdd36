"""Terms and counts: a term <-> column map, token lists -> CSR count rows, vocabulary filters.

A large vocabulary is held as arrays, not as Python strings: `Terms` (the terms' UTF-8 in
one array, the layout of the model file) and `TermTable` (a growing term -> column map
over such arrays, looked up by hash), some 20 bytes a term where a str and a dictionary
entry took some 110."""

from __future__ import annotations

import bisect
import errno
import functools
import mmap
import operator
import secrets
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice, repeat

import numpy as np

from ..core.sparse import sp
from .counting import SEED_WORD, ChunkCounts, EncodedTerms, count_tokens, encode_terms


class TermIndex:
    """A growing map term -> column, columns numbered in order of first appearance."""

    def __init__(self, terms: Iterable[str] = ()) -> None:
        self.terms: list[str] = list(terms)
        self.ids: dict[str, int] = dict(zip(self.terms, range(len(self.terms))))
        if len(self.ids) != len(self.terms):
            raise ValueError("a term index cannot hold a term twice")
        if self.terms and "\n" in "".join(self.terms):
            raise ValueError("a term cannot contain a line break")

    def __len__(self) -> int:
        return len(self.terms)

    def columns(self, terms: Sequence[str], *, grow: bool) -> np.ndarray:
        """Columns (k,) of k distinct terms: -1 for a term the index lacks, or with ``grow``
        the next free columns for the new terms, in their order. New terms are added in one
        step rather than one dictionary miss at a time."""
        cols = np.fromiter(map(self.ids.get, terms, repeat(-1)), np.int64, len(terms))
        new = np.flatnonzero(cols < 0)
        if grow and new.size:
            fresh = [terms[i] for i in new.tolist()]
            if "\n" in "".join(fresh):
                raise ValueError("a term cannot contain a line break")
            start = len(self.terms)
            self.ids.update(zip(fresh, range(start, start + len(fresh))))
            if len(self.ids) != start + len(fresh):
                raise ValueError("the terms to add to an index must be distinct")
            self.terms.extend(fresh)
            cols[new] = np.arange(start, start + len(fresh))
        return cols


class Terms(Sequence[str]):
    """Terms as one array of UTF-8 bytes, a line break between two, the layout of a model
    file's ``terms``: term i is ``blob[offsets[i] : offsets[i + 1] - 1]`` (``offsets`` (d +
    1,), the last the blob's length + 1). About 9 bytes a term beside its characters, where
    a tuple of str takes some 60; a term is decoded as it is read.

    ``ordered`` says the terms are distinct and sorted by code point (a model's
    vocabulary): ``in`` and `index` then search them (log d terms decoded). Equal to a
    tuple or list of the same terms; a slice is a tuple. ``strings``, where given, are the
    terms already decoded (a model file's, read to be checked), read in their place."""

    def __init__(
        self,
        blob: np.ndarray,
        offsets: np.ndarray,
        *,
        ordered: bool = False,
        strings: list[str] | None = None,
    ) -> None:
        self.blob, self.offsets, self.ordered = blob, offsets, ordered
        self.strings = strings
        self._hash: int | None = None

    @classmethod
    def of(cls, terms: Iterable[str], *, ordered: bool = False) -> Terms:
        """The terms (no line break in any) packed."""
        terms = terms if isinstance(terms, (list, tuple)) else list(terms)
        blob = np.frombuffer("\n".join(terms).encode(_UTF8, _LONE), np.uint8)
        offsets = np.zeros(len(terms) + 1, np.int64)
        if terms:
            breaks = np.flatnonzero(blob == _BREAK)
            if breaks.size != len(terms) - 1:
                raise ValueError("a term cannot contain a line break")
            offsets[1:-1] = breaks + 1
            offsets[-1] = blob.size + 1
        return cls(blob, offsets, ordered=ordered)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return tuple(map(self._term, range(*i.indices(len(self)))))
        i = operator.index(i)
        n = len(self)
        if not -n <= i < n:
            raise IndexError("term index out of range")
        return self._term(i + n if i < 0 else i)

    def _term(self, i: int) -> str:
        if self.strings is not None:
            return self.strings[i]
        start, end = self.offsets[i : i + 2].tolist()
        return self.blob[start : end - 1].tobytes().decode(_UTF8, _LONE)

    def __iter__(self) -> Iterator[str]:
        """The terms, decoded a few thousand at a time."""
        if self.strings is not None:
            yield from self.strings
            return
        n = len(self)
        for first in range(0, n, _DECODED_AT_ONCE):
            last = min(first + _DECODED_AT_ONCE, n)
            start, end = int(self.offsets[first]), int(self.offsets[last]) - 1
            yield from self.blob[start:end].tobytes().decode(_UTF8, _LONE).split("\n")

    def __contains__(self, term: object) -> bool:
        if not isinstance(term, str):
            return False
        if not self.ordered:
            return any(map(term.__eq__, self))
        return self._search(term) >= 0

    def index(self, term: str, start: int = 0, stop: int | None = None) -> int:  # type: ignore[override]
        if not (self.ordered and start == 0 and stop is None):
            return super().index(term, start, len(self) if stop is None else stop)
        at = self._search(term) if isinstance(term, str) else -1
        if at < 0:  # found absent in log d terms, not by reading them all
            raise ValueError(f"{term!r} is not among the terms")
        return at

    def _search(self, term: str) -> int:
        """The position of ``term`` in ordered terms, -1 if absent (binary search)."""
        at = bisect.bisect_left(self, term)
        return at if at < len(self) and self._term(at) == term else -1

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if isinstance(other, Terms):
            return len(self) == len(other) and np.array_equal(self.blob, other.blob)
        if isinstance(other, (tuple, list)):
            return len(self) == len(other) and all(map(operator.eq, self, other))
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((len(self), self.blob.tobytes()))
        return self._hash

    def __repr__(self) -> str:
        return f"<Terms: {len(self):,}>"

    def __reduce__(self):
        state = {"ordered": self.ordered, "strings": None, "_hash": None}
        return (Terms, (self.blob, self.offsets), state)

    def picked(self, columns: np.ndarray) -> tuple[str, ...]:
        """The terms of these columns, in their order, as a tuple of str."""
        if self.strings is not None:
            return tuple(map(self.strings.__getitem__, columns.tolist()))
        return tuple(self.take(columns))

    def take(self, columns: np.ndarray, *, ordered: bool | None = None) -> Terms:
        """The terms of these columns, in their order (``ordered``: by default, whether
        these are, as the columns of an ordered vocabulary in increasing order are)."""
        columns = np.asarray(columns, np.int64)
        starts, ends = self.offsets[columns], self.offsets[columns + 1]
        if ordered is None:
            ordered = self.ordered and bool((columns[1:] > columns[:-1]).all())
        return Terms(*_gathered(self.blob, starts, ends - starts - 1), ordered=ordered)


_BREAK = ord("\n")
_UTF8, _LONE = "utf-8", "surrogatepass"  # a lone surrogate (no model file holds one) kept
_DECODED_AT_ONCE = 4096


def _gathered(
    blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(blob, offsets) of `Terms` holding the byte strings ``blob[starts[i] : starts[i] +
    lengths[i]]`` in their order, gathered `_GATHERED_AT_ONCE` terms at a time: the byte
    positions computed on the way are 8 bytes a byte of those terms, not of all."""
    offsets = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths + 1, out=offsets[1:])
    out = np.full(max(int(offsets[-1]) - 1, 0), _BREAK, np.uint8)
    for first in range(0, lengths.size, _GATHERED_AT_ONCE):
        sizes = lengths[first : first + _GATHERED_AT_ONCE]
        inner = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        to = np.repeat(offsets[first : first + sizes.size], sizes) + inner
        out[to] = blob[np.repeat(starts[first : first + sizes.size], sizes) + inner]
    return out, offsets


_GATHERED_AT_ONCE = 1 << 12


def byte_order(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The permutation that sorts the terms of a `Terms` (``blob``, ``offsets``) by their
    bytes, which for UTF-8 is by code point (as `sorted_order` sorts str).

    By 8 bytes at a time, each read as a big-endian integer (zeros past a term's end) with
    how many of them the term holds: first all the terms by their first 8 bytes, then, at
    each further 8, only the runs of terms still equal so far, within each run. Arrays of a
    few integers a term; no str is made."""
    n = offsets.size - 1
    order = np.arange(n, dtype=np.int64)
    padded = np.concatenate([blob, np.zeros(8, np.uint8)])
    live = order.copy()  # positions of ``order`` not settled yet
    run = None  # the run of terms equal so far that each is in (depth 0: one run)
    depth = 0
    while live.size > 1:
        items = order[live]
        at = offsets[items]
        held = offsets[items + 1]
        held -= at + depth + 1  # the bytes left from this depth on, at most 9: more follow
        np.clip(held, 0, 9, out=held)
        held = held.astype(np.int8)
        at += depth
        word = np.zeros(items.size, np.uint64)
        for k in range(8):
            byte = padded[at]
            byte[held <= k] = 0
            word <<= np.uint64(8)
            word |= byte
            at += 1
        del at, byte
        sub = np.lexsort((held, word) if run is None else (held, word, run))
        order[live] = items[sub]
        del items
        word, held = word[sub], held[sub]
        same = (word[1:] == word[:-1]) & (held[1:] == 9) & (held[:-1] == 9)
        if run is not None:
            run = run[sub]
            same &= run[1:] == run[:-1]
        del word, held, sub
        tied = np.zeros(live.size, bool)
        tied[1:] = same
        tied[:-1] |= same
        first = np.ones(live.size, bool)
        first[1:] = ~same
        run = np.cumsum(first)[tied]
        live = live[tied]
        depth += 8
    return order


class TermTable:
    """A growing map term -> column, columns numbered in order of first appearance, held in
    arrays (what training counts with: a `TermIndex` holds a str and a dictionary entry a
    term, some 110 bytes; this some 30).

    The terms' UTF-8 in one growing array (the layout of `Terms`), the Python `hash` of
    each, and a hash table of their columns (open addressing, at most half full), looked up
    for a whole chunk of terms at once. A hash's first slot is the top bits of the hash
    times an odd number drawn for each table (multiply-shift, `_home`): every bit of the
    hash counts, so hashes alike in their low bits (which a known hash seed lets mail make)
    do not pile into one run of slots. A hit is checked byte for byte, so two terms that
    share a hash are never confused (the second of them, a rare case, is kept in a small
    dictionary, by its UTF-8). A chunk's terms come as `counting.EncodedTerms` (their UTF-8
    and hashes, as training's workers send them: no str is made here) or as str. Adding a
    chunk's terms costs in proportion to the chunk, not the table, but when the table
    doubles."""

    def __init__(self) -> None:
        self._blob = np.zeros(1 << 16, np.uint8)  # each term followed by a line break
        self._offsets = np.zeros(1 << 10, np.int64)
        self._keys = np.zeros(1 << 10, np.int64)  # the hash of each column's term
        self._n = 0
        self._slots = np.full(1 << 11, -1, np.int32)  # a column, or -1: free
        self._mix = np.uint64(secrets.randbits(64) | 1)  # `_home`'s multiplier
        self._shared: dict[bytes, int] = {}  # terms (UTF-8) whose hash an earlier term has

    def __len__(self) -> int:
        return self._n

    def terms(self) -> Terms:
        """The terms in order of their columns (views of the table's arrays)."""
        end = int(self._offsets[self._n])
        return Terms(self._blob[: max(end - 1, 0)], self._offsets[: self._n + 1])

    def columns(self, terms: Sequence[str] | EncodedTerms) -> np.ndarray:
        """Columns (k,) of k distinct terms, the terms new to the table given the next free
        ones, in their order. Terms hashed under another hash seed (`EncodedTerms.seed`: by
        another interpreter) are hashed again here."""
        coded = terms if isinstance(terms, EncodedTerms) else encode_terms(terms, _hash)
        k = len(coded)
        if not k:
            return np.zeros(0, np.int64)
        text = np.frombuffer(coded.text, np.uint8)
        ends = np.flatnonzero(text == _BREAK)
        if ends.size != k or text[-1] != _BREAK:
            raise ValueError(
                "a chunk's terms hold no line break and end each with one, a hash each"
            )
        starts = np.zeros(k, np.int64)
        starts[1:] = ends[:-1] + 1
        if coded.seed == hash(SEED_WORD):
            keys = np.frombuffer(coded.hashes, np.int64)
        else:
            strings = coded.text.decode(_UTF8, _LONE).split("\n")[:-1]
            keys = np.fromiter(map(_hash, strings), np.int64, k)
        cols = self._find(keys)
        hit = np.flatnonzero(cols >= 0)
        if hit.size:
            same = self._same(text, starts, ends, hit, cols[hit])
            for i in hit[~same].tolist():  # a hash shared by two terms
                cols[i] = self._shared.get(coded.text[starts[i] : ends[i]], -1)
        new = np.flatnonzero(cols < 0)
        if new.size:
            cols[new] = self._add(text, starts, ends, keys, new)
        return cols

    def _find(self, keys: np.ndarray) -> np.ndarray:
        """The column whose hash is each of ``keys``, -1 where none is."""
        mask = self._slots.size - 1
        cols = np.full(keys.size, -1, np.int64)
        todo = np.arange(keys.size)
        at = self._home(keys)
        while todo.size:
            col = self._slots[at]
            used = col >= 0
            match = used & (self._keys[np.maximum(col, 0)] == keys[todo])
            cols[todo[match]] = col[match]
            more = used & ~match
            todo, at = todo[more], (at[more] + 1) & mask
        return cols

    def _place(self, keys: np.ndarray, cols: np.ndarray) -> None:
        """Put the columns ``cols`` of the distinct hashes ``keys``, none in the table yet,
        into free slots (the first free one from the hash's own on)."""
        mask = self._slots.size - 1
        at = self._home(keys)
        while cols.size:
            free = self._slots[at] < 0
            # of the columns that found the same free slot, the first takes it
            _, first = np.unique(at[free], return_index=True)
            taken = np.flatnonzero(free)[first]
            self._slots[at[taken]] = cols[taken]
            left = np.ones(cols.size, bool)
            left[taken] = False
            cols, at = cols[left], (at[left] + 1) & mask

    def _home(self, keys: np.ndarray) -> np.ndarray:
        """The first slot to try for each hash: the top log2(slots) bits of hash x
        `_mix` (mod 2**64)."""
        shift = np.uint64(65 - self._slots.size.bit_length())
        return ((keys.astype(np.uint64) * self._mix) >> shift).astype(np.int64)

    def _same(
        self,
        text: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        hit: np.ndarray,
        found: np.ndarray,
    ) -> np.ndarray:
        """Whether each term ``hit`` of a chunk (its UTF-8 ``text``, each term from
        ``starts`` to ``ends``) has the bytes of the table's term ``found``."""
        starts = starts[hit]
        sizes = ends[hit] - starts
        mine = self._offsets[found]
        same = self._offsets[found + 1] - mine - 1 == sizes
        check = np.flatnonzero(same)
        sizes = sizes[check]
        inner = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        a = text[np.repeat(starts[check], sizes) + inner]
        b = self._blob[np.repeat(mine[check], sizes) + inner]
        del inner
        differ = np.repeat(np.arange(check.size), sizes)[a != b]
        same[check[differ]] = False
        return same

    def _add(
        self,
        text: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        keys: np.ndarray,
        new: np.ndarray,
    ) -> np.ndarray:
        """Append the terms ``new`` (positions among a chunk's terms, its UTF-8 ``text``,
        each term from ``starts`` to ``ends``, whose hashes are ``keys``); their columns."""
        added = text  # the new terms' bytes, each followed by a line break
        if new.size != starts.size:
            apart, _ = _gathered(text, starts[new], ends[new] - starts[new])
            added = np.append(apart, np.uint8(_BREAK))
        start, size = self._n, int(self._offsets[self._n])
        cols = np.arange(start, start + new.size)
        self._blob = _room(self._blob, size + added.size)
        self._blob[size : size + added.size] = added
        self._offsets = _room(self._offsets, start + new.size + 1)
        self._offsets[start + 1 : start + new.size + 1] = np.flatnonzero(added == _BREAK) + size + 1
        # the first term of each hash the table lacks takes a slot, the others go aside
        fresh, first = np.unique(keys[new], return_index=True)
        known = self._find(fresh) >= 0
        self._keys = _room(self._keys, start + new.size)
        self._keys[start : start + new.size] = keys[new]
        self._n += new.size
        if 2 * self._n > self._slots.size:  # more than half full: twice (or more) the slots
            slots = self._slots.size
            while 2 * self._n > slots:
                slots *= 2
            self._slots = zeros_apart(slots, np.int32 if slots < 2**31 else np.int64)
            self._slots.fill(-1)
            placed = self._slots_of(start)
            for at in range(0, placed.size, _PLACED_AT_ONCE):  # a block's temporaries
                block = placed[at : at + _PLACED_AT_ONCE]
                self._place(self._keys[block], block)
        aside = np.ones(new.size, bool)
        aside[first[~known]] = False
        for j in np.flatnonzero(aside).tolist():
            i = int(new[j])
            self._shared[text[starts[i] : ends[i]].tobytes()] = int(cols[j])
        self._place(fresh[~known], cols[first[~known]])
        return cols

    def _slots_of(self, n: int) -> np.ndarray:
        """The columns of the first ``n`` that hold a slot (not set aside)."""
        aside = np.fromiter(self._shared.values(), np.int64, len(self._shared))
        return np.setdiff1d(np.arange(n), aside, assume_unique=True)


_PLACED_AT_ONCE = 1 << 15  # columns placed at once in a table's new slots

# what a TermTable hashes str terms by, and terms hashed under another seed (a test makes
# terms share one); a worker's `EncodedTerms` come hashed by the built-in `hash`
_hash = hash


def _room(array: np.ndarray, size: int) -> np.ndarray:
    """``array``, or a copy with room for ``size`` items and at least twice as many as
    before (`zeros_apart`: in a mapping of its own, the room not yet written takes no
    memory; grown an eighth at a time, the copies of 20 MB of arrays faulted in some 180 MB
    of fresh pages, where doubling faults in some 40)."""
    if size <= array.size:
        return array
    return grown_apart(array, (max(size, 2 * array.size),))


def grown_apart(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``array`` padded with zeros at the end of each axis to ``shape``, in `zeros_apart`."""
    grown = zeros_apart(shape, array.dtype)
    grown[tuple(map(slice, array.shape))] = array
    return grown


def zeros_apart(shape: int | tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
    """Zeros, in a memory mapping of their own where they take `APART` bytes or more.

    For storage that grows and lives through a training (the term table, the totals): each
    step of its growth is a copy a size larger, the old one let go of. Made by malloc (whose
    threshold for a mapping of its own rises to the largest freed one), every old copy left
    a hole in the heap that later arrays rarely fit and that the heap never gave back; a
    mapping is given back whole as it is let go of. (An anonymous mapping's pages are
    zeros, written only where the array is.) The mapping is private, as malloc's memory
    is: a process forked later that writes to it gets its own copy of the page, where a
    shared mapping, Python's default, would write this process's array."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    if size < APART:
        return np.zeros(shape, dtype)
    private = {"flags": mmap.MAP_PRIVATE} if hasattr(mmap, "MAP_PRIVATE") else {}  # not Windows
    try:
        mapping = mmap.mmap(-1, size, **private)
    except OSError as exc:  # no room (ulimit -v, strict overcommit): as numpy says it
        if exc.errno == errno.ENOMEM:
            raise MemoryError(f"cannot allocate {size:,} bytes for an array") from None
        raise
    return np.frombuffer(mapping, dtype).reshape(shape)


APART = 1 << 18


_ROWS_AT_ONCE = 512


def count_rows(
    token_lists: Iterable[Sequence[str]], index: TermIndex, *, grow: bool = True
) -> sp.csr_matrix:
    """Count matrix of documents, one row each: X[i, a] = times term a occurs in document i.

    With ``grow`` new terms get new columns of ``index``, in order of first appearance;
    without, unknown terms are ignored. Returns a CSR matrix of shape (n_documents,
    len(index)) with int64 counts; a row's indices are in the order its terms first appear,
    the order in which `model.score` and the scoring table sum weights. Documents are
    counted a few hundred at a time (`counting.count_tokens`), so the token lists may be a
    stream.
    """
    blocks = []
    it = iter(token_lists)
    while batch := list(islice(it, _ROWS_AT_ONCE)):
        blocks.append(renumber(count_tokens(batch), index, grow=grow))
    return _stack(blocks, len(index))


def renumber(counted: ChunkCounts, index: TermIndex, *, grow: bool) -> sp.csr_matrix:
    """The counts of a chunk (over its own terms) as CSR rows (n, len(index)) over the
    columns of ``index``, with int64 counts. A row's indices are in the order its terms
    first appear, not sorted: sums and products do not need it, and summing in that order
    gives the scoring table's sums to the bit.

    With ``grow`` new terms get new columns (in the order of ``counted.terms``); without,
    the counts of terms ``index`` lacks are dropped.
    """
    return rows_over(counted, index.columns(counted.terms, grow=grow), len(index))


def rows_over(counted: ChunkCounts, cols: np.ndarray, width: int) -> sp.csr_matrix:
    """`renumber`'s rows, the chunk's terms being the columns ``cols`` (-1: dropped) of
    ``width``."""
    indices = cols[np.frombuffer(counted.cols, np.int32)]
    data = np.frombuffer(counted.counts, np.int32).astype(np.int64)
    sizes = np.frombuffer(counted.sizes, np.int32)
    if (indices < 0).any():
        known = indices >= 0
        rows = np.repeat(np.arange(sizes.size), sizes)
        sizes = np.bincount(rows[known], minlength=sizes.size)
        indices, data = indices[known], data[known]
    indptr = np.zeros(sizes.size + 1, np.int64)
    np.cumsum(sizes, out=indptr[1:])
    return sp.csr_matrix((data, indices, indptr), shape=(sizes.size, width))


def _stack(blocks: Sequence[sp.csr_matrix], width: int) -> sp.csr_matrix:
    """Blocks of rows over the first columns of an index, stacked as rows over ``width``."""
    if not blocks:
        return sp.csr_matrix((0, width), dtype=np.int64)
    sizes = np.concatenate([np.diff(b.indptr) for b in blocks])
    indptr = np.zeros(sizes.size + 1, np.int64)
    np.cumsum(sizes, out=indptr[1:])
    return sp.csr_matrix(
        (
            np.concatenate([b.data for b in blocks]),
            np.concatenate([b.indices for b in blocks]),
            indptr,
        ),
        shape=(sizes.size, width),
    )


def stack_sorted(
    blocks: Sequence[sp.csr_matrix], terms: Sequence[str]
) -> tuple[sp.csr_matrix, list[str]]:
    """Stack blocks of count rows over ``terms`` (a block may have fewer columns: the terms
    it knew), with the columns reordered so that the terms are sorted by code point.

    Returns (X (n, d), the sorted terms). Where the permutation that sorts the terms is
    already known, `stack_in_order` does the same without sorting them again.
    """
    order = sorted_order(terms)
    return stack_in_order(blocks, order), [terms[i] for i in order.tolist()]


def stack_in_order(
    blocks: list[sp.csr_matrix],
    order: np.ndarray,
    *,
    release: bool = False,
    dtype: type | None = None,
) -> sp.csr_matrix:
    """Blocks of count rows over the first columns of an index of len(order) terms, stacked
    with column j holding term order[j]. The columns are renamed through the inverse of
    ``order``, which is cheaper than a column selection; each row keeps its indices in the
    order of its blocks (for `renumber`'s rows, the order in which its terms first appear),
    so that a product sums a row in the order `model.score` and the scoring table do.

    The rows are copied into arrays made once for all of them, block after block; with
    ``release`` each block is let go of (its place in ``blocks`` set to None) once copied,
    so that the rows are held once and a block over, not twice. The counts are of
    ``dtype`` (which must hold them), by default of a type that holds every block's."""
    if not blocks:
        return sp.csr_matrix((0, len(order)), dtype=np.int64)
    n = sum(b.shape[0] for b in blocks)
    size = sum(int(b.indptr[-1]) for b in blocks)
    # int32 where they fit, as scipy stores them: no int64 copy of every index on the way
    kind = np.int32 if max(size, len(order)) < 2**31 else np.int64
    rank = np.empty(len(order), kind)
    rank[order] = np.arange(len(order))
    data = np.empty(size, dtype or np.result_type(*(b.dtype for b in blocks)))
    indices = np.empty(size, kind)
    indptr = np.zeros(n + 1, kind)
    row = at = 0
    for i, block in enumerate(blocks):
        rows, stored = block.shape[0], int(block.indptr[-1])
        data[at : at + stored] = block.data[:stored]
        np.take(rank, block.indices[:stored], out=indices[at : at + stored])
        indptr[row + 1 : row + rows + 1] = block.indptr[1:] + at
        row, at = row + rows, at + stored
        if release:
            blocks[i] = None
    return sp.csr_matrix((data, indices, indptr), shape=(n, len(order)))


def sorted_order(terms: Sequence[str]) -> np.ndarray:
    """Permutation that sorts ``terms`` by code point: ``terms[order]`` is sorted."""
    if isinstance(terms, Terms):
        return np.arange(len(terms)) if terms.ordered else byte_order(terms.blob, terms.offsets)
    if all(map(operator.lt, terms, islice(terms, 1, None))):  # already sorted (and distinct)
        return np.arange(len(terms), dtype=np.int64)
    return np.array(sorted(range(len(terms)), key=terms.__getitem__), dtype=np.int64)


#: Tokens that name a structure, not words: a header's name, an attachment's type, a host,
#: a note of nbspam's. A stop word there ('header:to') is no stop word.
_NOT_WORDS = ("header:", "attachment:", "url:", "nbspam:", "skip:", "digits:", "pair:")
#: The terms a vocabulary mask reads at a time: its temporaries are a few bytes a byte of
#: those terms, not of all.
_MASKED_AT_ONCE = 1 << 13


@functools.lru_cache(maxsize=2)  # the folds of a cross-validation share their terms
def stop_terms(terms: Sequence[str], stop_words: tuple[str, ...]) -> np.ndarray:
    """Boolean mask (d,) of the terms that are stop words: a word (``the``), a tagged word
    (``subject:the``) or an n-gram holding one (``of the``, ``subject:in time``); the
    tokens of `_NOT_WORDS` never are. The model leaves them out, so the same counts give
    the model with and without stop words.

    A term is one if, after its last colon, its words (or one of them, split at each
    space) are a stop word (`_stop_term`). Found on the terms' UTF-8 (`Terms`) with
    numpy, not term by term: each run of bytes between colons, spaces and line breaks that
    may be such a word is looked up among the stop words' bytes. (A stop word holding a
    space, or empty, is looked for by the rule, a term at a time, among the terms with a
    space, ending in a colon, or empty.)"""
    stop = frozenset(stop_words)
    mask = np.zeros(len(terms), dtype=bool)
    if not stop:
        return mask
    words = sorted({w.encode(_UTF8, _LONE) for w in stop if w and not set(w) & set(": \n")})
    rare = any(w == "" or " " in w for w in stop)
    packed = _packed(terms)
    for first, last, blob, starts, ends in _term_chunks(packed):
        if words:  # a word of the term is a stop word: a stop term unless a tag's
            hit = _word_runs(blob, starts, ends, words)
            mask[first + hit] = ~_tagged(blob, starts[hit], ends[hit])
        if rare:  # by the rule, where it may find what the words did not
            maybe = np.zeros(last - first, bool)
            maybe[np.searchsorted(ends, np.flatnonzero(blob == _SPACE))] = True
            maybe |= (ends == starts) | (blob[np.maximum(ends - 1, 0)] == _COLON)
            for i in np.flatnonzero(maybe & ~mask[first:last]).tolist():
                mask[first + i] = _stop_term(packed[first + i], stop)
    mask.flags.writeable = False
    return mask


def _tagged(blob: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each term (``blob[starts[i] : ends[i]]``, followed by a line break) starts
    with a tag of `_NOT_WORDS`."""
    tagged = np.zeros(starts.size, bool)
    for prefix in _NOT_WORDS:
        same = ends - starts >= len(prefix)
        for i, byte in enumerate(prefix.encode()):
            same &= blob[np.minimum(starts + i, ends)] == byte
        tagged |= same
    return tagged


def _stop_term(term: str, stop: frozenset[str]) -> bool:
    """The rule of `stop_terms` for one term."""
    if term.startswith(_NOT_WORDS):
        return False
    words = term.rpartition(":")[2]
    return words in stop or (" " in words and not stop.isdisjoint(words.split(" ")))


def _word_runs(
    blob: np.ndarray, starts: np.ndarray, ends: np.ndarray, words: list[bytes]
) -> np.ndarray:
    """The terms (of a chunk: `_term_chunks`) with a run of bytes that is one of ``words``
    (none with a colon, space or line break) and may be one of its words: a run between
    colons, spaces and line breaks that ends the term, or is followed by a space with no
    colon after it in the term."""
    apart = (blob == _COLON) | (blob == _SPACE) | (blob == _BREAK)
    edge = np.flatnonzero(apart[1:] != apart[:-1]) + 1  # where runs start and end
    edge = edge if apart[0] else np.append(0, edge)  # (blob ends in a line break)
    begin, end = edge[0::2], edge[1::2]
    after = blob[end]
    keep = (after != _COLON) & np.isin(end - begin, sorted(set(map(len, words))))
    begin, end, after = begin[keep], end[keep], after[keep]
    spaced = np.flatnonzero(after == _SPACE)
    if spaced.size:  # a word before a space: is there a colon after it, before the term ends?
        colons = np.flatnonzero(blob == _COLON)
        term_end = ends[np.searchsorted(ends, end[spaced])]
        later = colons[np.minimum(np.searchsorted(colons, end[spaced]), colons.size - 1)]
        tagged = (later > end[spaced]) & (later < term_end) if colons.size else False
        ok = np.ones(begin.size, bool)
        ok[spaced[tagged]] = False
        begin, end = begin[ok], end[ok]
    hit = _among(blob, begin, end - begin, words)
    return np.searchsorted(ends, begin[hit])


@functools.lru_cache(maxsize=2)
def pair_terms(terms: Sequence[str]) -> np.ndarray:
    """Boolean mask (d,) of the hashed word pairs (``pair:<n>``, and tagged by the header
    they come from, ``subject:pair:<n>``: `tokenizer.pair_tokens`): the model without them
    (``word_pairs`` off) leaves them out of the same counts.

    A term is one if it ends in ASCII digits after ``pair:``, itself at the start or after
    a colon: found on the terms' UTF-8 with numpy, from where ``pair:`` is."""
    mask = np.zeros(len(terms), dtype=bool)
    tag = np.frombuffer(b"pair:", np.uint8)
    for first, _, blob, _, ends in _term_chunks(_packed(terms)):
        if blob.size <= tag.size:
            continue
        at = np.ones(blob.size - tag.size, bool)
        for i, byte in enumerate(tag):
            at &= blob[i : i + at.size] == byte
        at = np.flatnonzero(at)
        before = blob[np.maximum(at - 1, 0)]
        at = at[(at == 0) | (before == _COLON) | (before == _BREAK)]
        digits = (blob >= ord("0")) & (blob <= ord("9"))
        other = np.flatnonzero(~digits)  # the first byte after the tag that is no digit
        stop = other[np.searchsorted(other, at + tag.size)]  # (the blob ends in one)
        at = at[(stop > at + tag.size) & (blob[stop] == _BREAK)]
        mask[first + np.searchsorted(ends, at)] = True
    mask.flags.writeable = False
    return mask


_COLON, _SPACE = ord(":"), ord(" ")


def _packed(terms: Sequence[str]) -> Terms:
    """The terms as `Terms` (packed UTF-8), as they are where they already are."""
    return terms if isinstance(terms, Terms) else Terms.of(list(terms))


def _term_chunks(terms: Terms) -> Iterator[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
    """The terms `_MASKED_AT_ONCE` at a time: (first, last) term numbers, the chunk's
    UTF-8 (each term followed by a line break) and where each term starts and ends in it."""
    n = len(terms)
    for first in range(0, n, _MASKED_AT_ONCE):
        last = min(first + _MASKED_AT_ONCE, n)
        base = int(terms.offsets[first])
        blob = np.append(terms.blob[base : int(terms.offsets[last]) - 1], np.uint8(_BREAK))
        starts = terms.offsets[first:last] - base
        yield first, last, blob, starts, terms.offsets[first + 1 : last + 1] - base - 1


def _among(
    blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, words: list[bytes]
) -> np.ndarray:
    """Whether each byte string ``blob[starts[i] : starts[i] + sizes[i]]`` is one of
    ``words``: for each size of a word, the strings of that size read as fixed-width keys
    (a byte 1 after each, so that a zero byte at the end counts) and looked up among the
    words of that size by binary search. Memory: a few bytes a byte of those strings."""
    out = np.zeros(starts.size, bool)
    by_size: dict[int, list[bytes]] = {}
    for word in words:
        by_size.setdefault(len(word), []).append(word + b"\x01")
    for size, group in by_size.items():
        rows = np.flatnonzero(sizes == size)
        if not rows.size:
            continue
        keys = np.sort(np.array(group, dtype=f"S{size + 1}"))
        table = np.ones((rows.size, size + 1), np.uint8)
        if size:
            table[:, :size] = blob[starts[rows, None] + np.arange(size)]
        found = table.view(f"S{size + 1}").ravel()
        place = np.minimum(np.searchsorted(keys, found), keys.size - 1)
        out[rows] = keys[place] == found
    return out


def select_terms(
    doc_freq: np.ndarray,
    n_docs: int,
    *,
    min_count: int = 1,
    max_df: float = 1.0,
    max_features: int | None = None,
    rank: np.ndarray | None = None,
) -> np.ndarray:
    """Boolean mask (n_terms,) of the terms a model scores with.

    Keeps term a when min_count <= df_a <= max_df * n_docs, where df_a is the number of
    training documents containing it (terms never seen, df_a = 0, are always dropped). With
    ``max_features`` only the k of these terms of highest ``rank`` (n_terms,) survive, by
    default of highest df; ties are broken by column order, which is code-point order in a
    sorted vocabulary (the ranks are numbers, never NaN).

    The k best are found without sorting: t, the k-th highest rank of the candidates, is
    found by `np.partition` of their ranks (one copy of them, where a sort took four arrays
    of them at once); every candidate ranked above t is kept, and of those ranked t the
    first in column order, as many as are left to take.
    """
    keep = (doc_freq >= max(1, min_count)) & (doc_freq <= max_df * n_docs)
    if max_features is not None and max_features < 1:
        return np.zeros_like(keep)
    if max_features is not None and keep.sum() > max_features:
        rank = doc_freq if rank is None else rank
        ranks = rank[keep]
        at = ranks.size - max_features
        ranks.partition(at)
        t = ranks[at]
        del ranks
        above = keep & (rank > t)
        tied = np.flatnonzero(keep & (rank == t))
        keep = above
        keep[tied[: max_features - int(np.count_nonzero(above))]] = True
    return keep


def mutual_information(doc_count: np.ndarray, class_count: np.ndarray) -> np.ndarray:
    """I(a; Y) (d,) in nats, between the presence of each term and the label, from the
    document counts doc_count (C, d) = df_ac and class_count (C,) = N_c:

        I(a; Y) = sum_{v in {0, 1}} sum_c P(b_a = v, y = c) log[P(b_a = v, y = c) / (P(b_a = v) P(y = c))]

    with P(b_a = 1, y = c) = df_ac / N, P(b_a = 0, y = c) = (N_c - df_ac) / N, P(y = c) = N_c / N
    and P(b_a = v) = sum_c P(b_a = v, y = c); 0 log 0 = 0 (docs/math.md, "Mutual information"). A term in every message
    of some classes and in none of the others tells the label apart best; a term as frequent
    in every class has I = 0.
    """
    n_c = class_count.astype(np.float64)[:, None]
    n = n_c.sum()
    total = np.zeros(doc_count.shape[1])
    for presence in (1, 0):  # b_a = 1, then b_a = 0
        joint = doc_count.astype(np.float64) if presence else n_c - doc_count
        marginal = joint.sum(axis=0)
        # joint / n * log(joint * n / (marginal * n_c)), operation by operation as written,
        # in two (C, d) arrays beside ``joint`` rather than one per operation
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.multiply(marginal, n_c)
            np.divide(joint * n, ratio, out=ratio)
            np.log(ratio, out=ratio)
            parts = np.divide(joint, n)
            parts *= ratio
        del ratio
        parts[~(joint > 0)] = 0.0
        total += parts.sum(axis=0)
        del joint, parts
    return total
