"""Terms and counts: a term <-> column map, token lists -> CSR count rows, vocabulary filters."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from itertools import chain, islice, repeat

import numpy as np
import scipy.sparse as sp


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


_ROWS_AT_ONCE = 512


def count_rows(
    token_lists: Iterable[Sequence[str]], index: TermIndex, *, grow: bool = True
) -> sp.csr_matrix:
    """Count matrix of documents, one row each: X[i, a] = times term a occurs in document i.

    With ``grow`` new terms get new columns of ``index``; without, unknown terms are ignored.
    Returns a CSR matrix of shape (n_documents, len(index)) with int64 counts and sorted
    indices. Documents are read a few hundred at a time, so the token lists may be a stream.
    Each batch's tokens are mapped to columns in one pass, and the (row, column) pairs are
    counted with a sort (`numpy.unique`) instead of one dictionary per document.
    """
    ids = index.ids
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    it = iter(token_lists)
    while batch := list(islice(it, _ROWS_AT_ONCE)):
        tokens = list(chain.from_iterable(batch))
        if grow:  # the new terms first, in order of first appearance, then every lookup hits
            index.columns(list(dict.fromkeys(tokens)), grow=True)
            found = map(ids.__getitem__, tokens)
        else:
            found = map(ids.get, tokens, repeat(-1))
        cols = np.fromiter(found, np.int64, len(tokens))
        rows = np.repeat(np.arange(len(batch), dtype=np.int64), [len(t) for t in batch])
        if not grow:
            rows, cols = rows[cols >= 0], cols[cols >= 0]
        parts.append(_count_pairs(rows, cols, len(batch)))
    d = len(index)
    if not parts:
        return sp.csr_matrix((0, d), dtype=np.int64)
    data = np.concatenate([p[0] for p in parts])
    indices = np.concatenate([p[1] for p in parts])
    row_sizes = np.concatenate([p[2] for p in parts])
    indptr = np.concatenate([[0], np.cumsum(row_sizes)])
    return sp.csr_matrix((data, indices, indptr), shape=(len(row_sizes), d))


def _count_pairs(
    rows: np.ndarray, cols: np.ndarray, n_rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(counts, columns, entries per row) of the distinct (row, column) pairs, in row then
    column order."""
    width = int(cols.max()) + 1 if cols.size else 1
    pairs, counts = np.unique(rows * width + cols, return_counts=True)
    return counts, pairs % width, np.bincount(pairs // width, minlength=n_rows)


def renumber(
    terms: Sequence[str], X: sp.csr_matrix, index: TermIndex, *, grow: bool
) -> sp.csr_matrix:
    """Count rows X (n, k) over ``terms`` as rows (n, len(index)) over the columns of ``index``.

    With ``grow`` new terms get new columns (in the order of ``terms``); without, columns of
    terms ``index`` lacks are dropped.
    """
    cols = index.columns(terms, grow=grow)
    known = np.flatnonzero(cols >= 0)
    if known.size < len(terms):
        X = X[:, known]
        cols = cols[known]
    X = sp.csr_matrix((X.data, cols[X.indices], X.indptr), shape=(X.shape[0], len(index)))
    X.sort_indices()
    return X


def stack_sorted(
    blocks: Sequence[sp.csr_matrix], terms: Sequence[str], order: np.ndarray | None = None
) -> tuple[sp.csr_matrix, list[str]]:
    """Stack blocks of count rows over ``terms`` (a block may have fewer columns: the terms
    it knew), with the columns reordered so that the terms are sorted by code point.

    Returns (X (n, d), the sorted terms). ``order``, the permutation that sorts the terms
    (`sorted_order`), saves sorting them again. The columns are renamed through its inverse
    and each row's indices sorted, which is cheaper than a column selection.
    """
    if order is None:
        order = sorted_order(terms)
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    index_type = np.int32 if len(terms) < 2**31 else np.int64
    sizes = [np.diff(b.indptr) for b in blocks]
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(sizes))]) if blocks else np.zeros(1)
    if indptr[-1] >= 2**31:
        index_type = np.int64
    X = sp.csr_matrix(
        (
            np.concatenate([b.data for b in blocks]) if blocks else np.zeros(0, np.int64),
            rank[np.concatenate([b.indices for b in blocks])].astype(index_type)
            if blocks
            else np.zeros(0, index_type),
            indptr.astype(index_type),
        ),
        shape=(sum(b.shape[0] for b in blocks), len(terms)),
    )
    X.sort_indices()
    return X, [terms[i] for i in order.tolist()]


def sorted_order(terms: Sequence[str]) -> np.ndarray:
    """Permutation that sorts ``terms`` by code point: ``terms[order]`` is sorted."""
    if all(map(operator.lt, terms, islice(terms, 1, None))):  # already sorted (and distinct)
        return np.arange(len(terms), dtype=np.int64)
    return np.array(sorted(range(len(terms)), key=terms.__getitem__), dtype=np.int64)


def select_terms(
    doc_freq: np.ndarray,
    n_docs: int,
    *,
    min_count: int = 1,
    max_df: float = 1.0,
    max_features: int | None = None,
) -> np.ndarray:
    """Boolean mask (n_terms,) of the terms a model scores with.

    Keeps term a when min_count <= df_a <= max_df * n_docs, where df_a is the number of
    training documents containing it (terms never seen, df_a = 0, are always dropped). With
    ``max_features`` only the k terms of highest df survive; ties are broken by column order,
    which is code-point order in a sorted vocabulary.
    """
    keep = (doc_freq >= max(1, min_count)) & (doc_freq <= max_df * n_docs)
    if max_features is not None and keep.sum() > max_features:
        candidates = np.flatnonzero(keep)
        # stable sort on -df keeps the column order among equal frequencies
        best = candidates[np.argsort(-doc_freq[candidates], kind="stable")[:max_features]]
        keep = np.zeros_like(keep)
        keep[best] = True
    return keep
