"""Training keeps one copy of what it must keep and makes no temporaries the size of the
vocabulary where a chunk or a fold is smaller (docs/speed.md, "Memory")."""

from __future__ import annotations

import tracemalloc
from array import array

import numpy as np

from nbspam.core.settings import build_settings
from nbspam.models.model import ClassCountsBuilder, SampledRows, fit_counted
from nbspam.text.counting import ChunkCounts, LabelledChunks
from nbspam.text.counts import ClassCounts

SETTINGS = build_settings({})


def chunk(terms: list[str]) -> ChunkCounts:
    """One message holding each of ``terms`` once."""
    n = len(terms)
    return ChunkCounts(terms, array("i", range(n)), array("i", [1] * n), array("i", [n]))


def test_adding_a_small_chunk_to_a_large_vocabulary_makes_no_vocabulary_sized_arrays():
    builder = ClassCountsBuilder()
    builder.add_counts(chunk([f"t{i}" for i in range(200_000)]), ["ham"])
    builder.add_counts(chunk(["t1", "new"]), ["spam"])
    tracemalloc.start()
    try:
        builder.add_counts(chunk(["t2", "t3", "newer"]), ["spam"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # a copy of the totals (2 labels x 200,000 terms x 8 bytes) would be 3.2 MB an array
    assert peak < 200_000
    totals = builder.totals()
    assert totals.labels == ("ham", "spam") and len(totals.terms) == 200_002
    assert totals.class_count.tolist() == [1, 2]
    column = {t: j for j, t in enumerate(totals.terms)}
    for term, counts in (("t1", [1, 1]), ("t2", [1, 1]), ("t5", [1, 0]), ("newer", [0, 1])):
        assert totals.term_count[:, column[term]].tolist() == counts, term
        assert totals.doc_count[:, column[term]].tolist() == counts, term


def test_counts_in_the_order_they_have_are_not_copied():
    counts = ClassCounts(
        ("ham", "spam"),
        ("a", "b"),
        np.array([1, 1]),
        np.ones((2, 2), np.int64),
        np.ones((2, 2), np.int64),
    )
    assert counts.in_order([0, 1], None) is counts
    assert counts.in_order(None, np.arange(2)) is counts
    swapped = counts.in_order([1, 0], [1, 0])
    assert swapped.labels == ("spam", "ham") and swapped.terms == ("b", "a")
    assert swapped.term_count.flags.c_contiguous


def test_the_model_and_the_sample_share_one_copy_of_the_counts(sample_messages):
    rows = SampledRows(10)
    model = fit_counted(LabelledChunks(sample_messages, SETTINGS.tokenizer), SETTINGS, rows=rows)
    assert rows.totals is not None
    assert rows.totals.term_count is model.term_count
    assert rows.totals.doc_count is model.doc_count


def test_the_sample_rows_are_kept_once_after_they_are_stacked(sample_messages):
    rows = SampledRows(len(sample_messages))
    fit_counted(LabelledChunks(sample_messages[:30], SETTINGS.tokenizer), SETTINGS, rows=rows)
    numbers, labels = rows.numbers().tolist(), rows.labels
    X, terms = rows.matrix()
    assert len(rows.chunks) == 1 and rows.chunks[0][0] is X  # not the chunks and X
    assert X.indices.dtype == np.int32
    assert rows.numbers().tolist() == numbers and rows.labels == labels
    Y, again = rows.matrix()  # the same rows again
    assert again == terms and (X != Y).nnz == 0 and X.indices.tolist() == Y.indices.tolist()


def test_a_folds_sums_are_made_over_its_own_terms():
    from nbspam.core.sparse import sp
    from nbspam.fit.crossval import Folds, Tokenized

    d = 200_000  # terms; each of 10 messages holds 3 of them
    indices = np.array([[i, i + 1, d - 1 - i] for i in range(10)]).ravel()
    X = sp.csr_matrix((np.arange(1, 31), indices, np.arange(0, 31, 3)), shape=(10, d))
    labels = ["ham", "spam"] * 5
    fold = np.arange(10) % 5
    shared = Folds(
        Tokenized([str(i) for i in range(10)], labels, X, [f"t{j:06d}" for j in range(d)]),
        fold,
        None,
    )
    tracemalloc.start()
    try:
        rest = shared.rest(0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the model's two count arrays (2 labels x 200,000 terms x 8 bytes each) must be copied:
    # 6.4 MB; the fold's sums over the whole vocabulary would be as much again
    assert peak < 8_000_000
    others = fold != 0
    dense = X.toarray()
    for c, label in enumerate(("ham", "spam")):
        mine = others & (np.array(labels) == label)
        assert rest.term_count[c].tolist() == dense[mine].sum(axis=0).tolist()
        assert rest.doc_count[c].tolist() == (dense[mine] > 0).sum(axis=0).tolist()
    assert rest.class_count.tolist() == [4, 4]
