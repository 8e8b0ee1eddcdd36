"""Per-class counts of a set of messages: what a model is made of, and what learn, forget,
merge and the cross-validation folds add and subtract.

A model is a sum over its messages, so these counts of two sets of messages add up to the
counts of their union, and subtracting the counts of a subset leaves those of the rest:
integer arithmetic, exact. (`counting` is where messages are tokenized and counted.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class ClassCounts:
    """The per-class count sums of a set of messages, a value (unlike `ChunkCounts`, which
    are per message, and `model.ClassCountsBuilder`, which adds chunks up into one).

    labels (C,) and terms (d,), in any order; class_count (C,) messages per class;
    term_count (C, d) occurrences of each term per class; doc_count (C, d) messages per
    class that contain the term. Integers (int64)."""

    labels: tuple[str, ...]
    terms: Sequence[str]
    class_count: np.ndarray
    term_count: np.ndarray
    doc_count: np.ndarray

    def plus(self, other: ClassCounts, sign: int = 1) -> ClassCounts:
        """self + sign * other over the union of their labels and terms (both sorted)."""
        labels = sorted(set(self.labels) | set(other.labels))
        terms = sorted(set(self.terms) | set(other.terms))
        where = {t: i for i, t in enumerate(terms)}
        class_count = np.zeros(len(labels), np.int64)
        term_count = np.zeros((len(labels), len(terms)), np.int64)
        doc_count = term_count.copy()
        for counts, s in ((self, 1), (other, sign)):
            rows = np.array([labels.index(x) for x in counts.labels], np.int64)
            cols = np.array([where[t] for t in counts.terms], np.int64)
            class_count[rows] += s * counts.class_count
            if cols.size:
                term_count[np.ix_(rows, cols)] += s * counts.term_count
                doc_count[np.ix_(rows, cols)] += s * counts.doc_count
        return ClassCounts(tuple(labels), tuple(terms), class_count, term_count, doc_count)

    def minus(self, other: ClassCounts) -> ClassCounts:
        """self - other over the union of their labels and terms."""
        return self.plus(other, -1)

    def is_negative(self) -> bool:
        """Whether any count is below zero (more was taken away than was ever added)."""
        return any((a < 0).any() for a in (self.class_count, self.term_count, self.doc_count))

    def pruned(self) -> ClassCounts:
        """Without labels that have no messages and terms no message contains."""
        rows = np.flatnonzero(self.class_count > 0)
        cols = np.flatnonzero(self.doc_count.sum(axis=0) > 0)
        return ClassCounts(
            tuple(self.labels[i] for i in rows),
            _take(self.terms, cols),
            self.class_count[rows],
            self.term_count[np.ix_(rows, cols)],
            self.doc_count[np.ix_(rows, cols)],
        )

    def without_empty_classes(self) -> ClassCounts:
        """Without the labels that have no messages; the terms stay."""
        rows = np.flatnonzero(self.class_count > 0)
        if rows.size == len(self.labels):
            return self
        return ClassCounts(
            tuple(self.labels[i] for i in rows),
            self.terms,
            self.class_count[rows],
            self.term_count[rows],
            self.doc_count[rows],
        )

    def in_order(
        self, labels: Sequence[int] | None = None, terms: Sequence[int] | np.ndarray | None = None
    ) -> ClassCounts:
        """The counts with their labels, and their terms, taken in the given orders
        (positions; None keeps an axis as it is): the same value where neither order
        changes anything, else new arrays."""
        if _same(labels, len(self.labels)) and _same(terms, len(self.terms)):
            return self
        rows = np.arange(len(self.labels)) if labels is None else np.asarray(labels, np.int64)
        cols = np.arange(len(self.terms)) if terms is None else np.asarray(terms, np.int64)
        return ClassCounts(
            tuple(self.labels[i] for i in rows.tolist()),
            self.terms if terms is None else _take(self.terms, cols),
            self.class_count[rows],
            _picked(self.term_count, rows, cols),
            _picked(self.doc_count, rows, cols),
        )


def _picked(counts: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """counts[rows][:, cols] as a new array, taken a row at a time into it: no temporary
    the size of the counts (an indexing by both axes at once made three)."""
    out = np.empty((rows.size, cols.size), counts.dtype)
    for i, row in enumerate(rows.tolist()):
        np.take(counts[row], cols, out=out[i])
    return out


def _take(terms: Sequence[str], cols: np.ndarray) -> Sequence[str]:
    """The terms of the columns ``cols``, in their order: packed (`vocabulary.Terms`) where
    they are, else a tuple."""
    if hasattr(terms, "take"):  # Terms (not imported here: it brings scipy along)
        return terms.take(cols)
    return tuple(map(terms.__getitem__, cols.tolist()))


def _same(order: Sequence[int] | np.ndarray | None, n: int) -> bool:
    """Whether the positions ``order`` (None: all, as they are) leave n items as they are."""
    if order is None:
        return True
    order = np.asarray(order, np.int64)
    return order.shape == (n,) and bool((order == np.arange(n)).all())
