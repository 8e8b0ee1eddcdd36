"""Terms and counts: a term <-> column map, token lists -> CSR count rows, vocabulary filters."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Sequence

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

    def add(self, term: str) -> int:
        """Column of ``term``, giving it the next free column if it is new."""
        col = self.ids.get(term)
        if col is None:
            if "\n" in term:
                raise ValueError(f"a term cannot contain a line break: {term!r}")
            col = self.ids[term] = len(self.terms)
            self.terms.append(term)
        return col


def count_rows(
    token_lists: Iterable[Sequence[str]], index: TermIndex, *, grow: bool = True
) -> sp.csr_matrix:
    """Count matrix of documents, one row each: X[i, a] = times term a occurs in document i.

    With ``grow`` new terms get new columns of ``index``; without, unknown terms are ignored.
    Returns a CSR matrix of shape (n_documents, len(index)) with int64 counts. Rows are built
    one document at a time, so the token lists may be a stream.
    """
    indptr = array("q", [0])
    indices = array("q")
    data = array("q")
    known = index.ids.get  # most terms are known: look them up without a method call
    for tokens in token_lists:
        for term, n in Counter(tokens).items():
            col = known(term)
            if col is None and grow:
                col = index.add(term)
            if col is not None:
                indices.append(col)
                data.append(n)
        indptr.append(len(indices))
    shape = (len(indptr) - 1, len(index))
    X = sp.csr_matrix(
        (
            np.frombuffer(data, np.int64),
            np.frombuffer(indices, np.int64),
            np.frombuffer(indptr, np.int64),
        ),
        shape=shape,
    )
    X.sort_indices()
    return X


def renumber(
    terms: Sequence[str], X: sp.csr_matrix, index: TermIndex, *, grow: bool
) -> sp.csr_matrix:
    """Count rows X (n, k) over ``terms`` as rows (n, len(index)) over the columns of ``index``.

    With ``grow`` new terms get new columns (in the order of ``terms``); without, columns of
    terms ``index`` lacks are dropped.
    """
    lookup = index.add if grow else (lambda term: index.ids.get(term, -1))
    cols = np.fromiter((lookup(t) for t in terms), np.int64, len(terms))
    known = np.flatnonzero(cols >= 0)
    if known.size < len(terms):
        X = X[:, known]
        cols = cols[known]
    X = sp.csr_matrix((X.data, cols[X.indices], X.indptr), shape=(X.shape[0], len(index)))
    X.sort_indices()
    return X


def sorted_order(terms: Sequence[str]) -> np.ndarray:
    """Permutation that sorts ``terms`` by code point: ``terms[order]`` is sorted."""
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
