"""Terms and counts: a term <-> column map, token lists -> CSR count rows, vocabulary filters."""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Iterable, Sequence
from itertools import islice, repeat

import numpy as np

from ..core.sparse import sp
from .counting import ChunkCounts, count_tokens


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
    if all(map(operator.lt, terms, islice(terms, 1, None))):  # already sorted (and distinct)
        return np.arange(len(terms), dtype=np.int64)
    return np.array(sorted(range(len(terms)), key=terms.__getitem__), dtype=np.int64)


#: Tokens that name a structure, not words: a header's name, an attachment's type, a host,
#: a note of nbspam's. A stop word there ('header:to') is no stop word.
_NOT_WORDS = ("header:", "attachment:", "url:", "nbspam:", "skip:", "digits:", "pair:")


@functools.lru_cache(maxsize=2)  # the folds of a cross-validation share their terms
def stop_terms(terms: tuple[str, ...], stop_words: tuple[str, ...]) -> np.ndarray:
    """Boolean mask (d,) of the terms that are stop words: a word (``the``), a tagged word
    (``subject:the``) or an n-gram holding one (``of the``, ``subject:in time``); the
    tokens of `_NOT_WORDS` never are. The model leaves them out, so the same counts give
    the model with and without stop words."""
    stop = frozenset(stop_words)
    mask = np.zeros(len(terms), dtype=bool)
    if not stop:
        return mask
    for i, term in enumerate(terms):
        if term.startswith(_NOT_WORDS):
            continue
        words = term.rpartition(":")[2]
        if words in stop or (" " in words and not stop.isdisjoint(words.split(" "))):
            mask[i] = True
    mask.flags.writeable = False
    return mask


@functools.lru_cache(maxsize=2)
def pair_terms(terms: tuple[str, ...]) -> np.ndarray:
    """Boolean mask (d,) of the hashed word pairs (``pair:<n>``, and tagged by the header
    they come from, ``subject:pair:<n>``: `tokenizer.pair_tokens`): the model without them
    (``word_pairs`` off) leaves them out of the same counts."""
    pair = re.compile(r"(?:^|:)pair:[0-9]+\Z").search
    mask = np.fromiter((pair(t) is not None for t in terms), dtype=bool, count=len(terms))
    mask.flags.writeable = False
    return mask


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
    sorted vocabulary.
    """
    keep = (doc_freq >= max(1, min_count)) & (doc_freq <= max_df * n_docs)
    if max_features is not None and keep.sum() > max_features:
        rank = doc_freq if rank is None else rank
        candidates = np.flatnonzero(keep)
        # stable sort on -rank keeps the column order among equal ranks
        best = candidates[np.argsort(-rank[candidates], kind="stable")[:max_features]]
        keep = np.zeros_like(keep)
        keep[best] = True
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
