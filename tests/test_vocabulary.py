"""Term index, count rows and renumbering."""

from __future__ import annotations

import dataclasses
from collections import Counter
from math import log

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from nbspam.text.counting import count_tokens
from nbspam.text.vocabulary import (
    TermIndex,
    count_rows,
    mutual_information,
    renumber,
    select_terms,
    sorted_order,
    stack_in_order,
    stack_sorted,
)


def test_count_rows_counts_and_grows_in_order_of_first_appearance():
    index = TermIndex()
    X = count_rows([["b", "a", "b"], [], ["c", "a"]], index)
    assert index.terms == ["b", "a", "c"]
    np.testing.assert_array_equal(X.toarray(), [[2, 1, 0], [0, 0, 0], [0, 1, 1]])


def test_count_rows_without_growing_ignores_unknown_terms():
    index = TermIndex(["a", "b"])
    X = count_rows([["a", "z", "b", "b"]], index, grow=False)
    assert index.terms == ["a", "b"]
    np.testing.assert_array_equal(X.toarray(), [[1, 2]])


def test_count_tokens_gives_csr_parts_over_terms_in_order_of_first_appearance():
    counted = count_tokens([["b", "a", "b"], [], ["c", "a", "c", "c"]])
    assert counted.terms == ["b", "a", "c"]
    assert list(counted.sizes) == [2, 0, 2]
    assert list(counted.cols) == [0, 1, 2, 1]  # each document's terms as they first appear
    assert list(counted.counts) == [2, 1, 3, 1]


def test_renumber_maps_local_columns_into_an_index():
    counted = count_tokens([["x", "y"], ["y", "new", "new"], ["new"]])
    index = TermIndex(["y", "x"])
    grown = renumber(counted, index, grow=True)
    assert index.terms == ["y", "x", "new"]
    assert grown.indices.tolist() == [1, 0, 0, 2, 2]  # each row's terms as they first appear
    np.testing.assert_array_equal(grown.toarray(), [[1, 1, 0], [1, 0, 2], [0, 0, 1]])
    known = renumber(counted, TermIndex(["y"]), grow=False)
    np.testing.assert_array_equal(known.toarray(), [[1], [1], [0]])
    assert known.indptr.tolist() == [0, 1, 2, 2]


def test_term_index_refuses_line_breaks_and_repeats():
    with pytest.raises(ValueError, match="line break"):
        TermIndex(["a", "b\nc"])
    with pytest.raises(ValueError, match="twice"):
        TermIndex(["a", "a"])
    with pytest.raises(ValueError, match="line break"):
        TermIndex().columns(["x\ny"], grow=True)


def test_select_terms_and_sorted_order():
    df = np.array([0, 1, 5, 3, 3])
    assert list(np.flatnonzero(select_terms(df, 10, min_count=1))) == [1, 2, 3, 4]
    assert list(np.flatnonzero(select_terms(df, 10, min_count=3, max_df=0.4))) == [3, 4]
    assert list(np.flatnonzero(select_terms(df, 10, max_features=2))) == [2, 3]
    assert list(sorted_order(["b", "ä", "a", "B"])) == [3, 2, 0, 1]


def test_select_terms_by_a_rank_keeps_the_top_k_candidates_ties_in_column_order():
    df = np.array([0, 1, 5, 3, 3, 2])
    rank = np.array([9.0, 0.5, 0.1, 0.7, 0.5, 0.5])

    def kept(**options):
        return list(np.flatnonzero(select_terms(df, 10, rank=rank, **options)))

    # column 0 is in no document: never a candidate, whatever its rank
    assert kept(max_features=2) == [1, 3]
    assert kept(max_features=3) == [1, 3, 4]  # 1, 4 and 5 tie: column order
    assert kept(max_features=2, min_count=2) == [3, 4]


@pytest.mark.parametrize("seed", range(40))
def test_select_terms_keeps_what_a_stable_sort_of_the_ranks_keeps(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 400))
    df = rng.integers(0, 6, d)
    # few distinct ranks (many ties), signed zeros, or document frequencies as ranks
    kind = seed % 3
    rank = (
        rng.integers(0, 4, d) * rng.choice([-1.0, 1.0], d) * (seed % 2)
        if kind == 0
        else rng.integers(0, 5, d) / 4
        if kind == 1
        else None
    )
    for k in {0, 1, max(d // 3, 1), d - 1, d}:
        for min_count in (1, 2):
            keep = (df >= min_count) & (df <= 0.9 * 10)
            want = keep
            if keep.sum() > k:
                r = df if rank is None else rank
                candidates = np.flatnonzero(keep)
                best = candidates[np.argsort(-r[candidates], kind="stable")[:k]]
                want = np.zeros_like(keep)
                want[best] = True
            got = select_terms(df, 10, min_count=min_count, max_df=0.9, max_features=k, rank=rank)
            assert got.tolist() == want.tolist(), (k, min_count)


def test_mutual_information_by_hand():
    # 2 ham (row 0) and 2 spam (row 1); the columns: a word in both spams and no ham, in one
    # spam, in every message, in none
    mi = mutual_information(np.array([[0, 0, 2, 0], [2, 1, 2, 0]]), np.array([2, 2]))
    # presence decides the label: I = H(Y) = log 2
    assert mi[0] == pytest.approx(log(2), abs=1e-15)
    # the 2x2 table of the second word, P(b, y) over b = 1, 0 and y = ham, spam:
    # [[0, 1/4], [1/2, 1/4]]; P(b = 1) = 1/4, P(b = 0) = 3/4, P(y) = 1/2
    by_hand = (
        1 / 4 * log((1 / 4) / (1 / 4 * 1 / 2))  # b = 1, spam
        + 1 / 2 * log((1 / 2) / (3 / 4 * 1 / 2))  # b = 0, ham
        + 1 / 4 * log((1 / 4) / (3 / 4 * 1 / 2))  # b = 0, spam; (b = 1, ham) is 0 log 0 = 0
    )
    assert by_hand == pytest.approx(1.5 * log(2) - 0.75 * log(3), abs=1e-15)
    assert mi[1] == pytest.approx(by_hand, abs=1e-15)
    assert mi[2] == 0.0 and mi[3] == 0.0  # presence says nothing of the label


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_mutual_information_agrees_with_scikit_learn(seed, n_classes):
    from sklearn.feature_selection import mutual_info_classif

    from nbspam.models.naive_bayes import class_counts

    rng = np.random.default_rng(seed)
    n, d = 80, 30
    dense = rng.integers(1, 4, (n, d)) * (rng.random((n, d)) < rng.random(d))
    dense[:, 0], dense[:, 1] = 0, 2  # in no message, in every message
    y = rng.integers(0, n_classes, n)
    y[:n_classes] = np.arange(n_classes)  # every class has a message
    class_count, _, doc_count = class_counts(sp.csr_matrix(dense), y, n_classes)
    presence = (dense > 0).astype(np.int64)
    ref = mutual_info_classif(presence, y, discrete_features=True)
    np.testing.assert_allclose(mutual_information(doc_count, class_count), ref, rtol=0, atol=1e-10)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["a", "b", "c", "dd", "é", "\u4e00"]), max_size=12), max_size=40
    ),
    st.integers(1, 7),
)
def test_count_rows_equals_one_counter_per_document(docs, known):
    index = TermIndex(["dd", "a"][: known % 3])
    start = list(index.terms)
    X = count_rows(iter(docs), index)
    assert X.shape == (len(docs), len(index))
    for i, doc in enumerate(docs):  # each row's terms in the order they first appear
        assert _row_items(X, i, index.terms) == list(Counter(doc).items())
    fixed = TermIndex(start)
    Y = count_rows(docs, fixed, grow=False)
    assert fixed.terms == start and Y.shape == (len(docs), len(start))
    for i, doc in enumerate(docs):
        assert _row_items(Y, i, start) == list(Counter(t for t in doc if t in start).items())


def _row_items(X, i, terms):
    """[(term, count)] of row i of a CSR matrix, in the order its indices are stored."""
    span = slice(X.indptr[i], X.indptr[i + 1])
    return [(terms[j], int(n)) for j, n in zip(X.indices[span], X.data[span])]


def test_stack_sorted_equals_stacking_then_selecting_sorted_columns_in_the_same_row_order():
    index = TermIndex()
    blocks = [  # rows as training keeps them: indices in order of first appearance
        renumber(count_tokens(docs), index, grow=True)
        for docs in (
            [["pear", "apple"], ["fig"]],
            [["zucchini", "apple", "banana", "banana"]],
            [],
        )
    ]
    assert blocks[1].indices.tolist() == [3, 1, 4]  # not sorted
    terms = list(index.terms)
    wide = [np.pad(b.toarray(), [(0, 0), (0, len(terms) - b.shape[1])]) for b in blocks]
    order = np.argsort(terms)
    expected = np.vstack(wide)[:, order]
    stacked, sorted_terms = stack_sorted(blocks, terms)
    assert sorted_terms == sorted(terms)
    for X in (stacked, stack_in_order(blocks, sorted_order(terms))):
        np.testing.assert_array_equal(X.toarray(), expected)
        # each row keeps its terms in the order they first appear, as predict sums them
        assert _row_items(X, 2, sorted_terms) == [("zucchini", 1), ("apple", 1), ("banana", 2)]


def test_columns_adds_new_terms_in_one_step_and_refuses_repeats():
    index = TermIndex(["a", "b"])
    np.testing.assert_array_equal(index.columns(["b", "x", "a", "y"], grow=False), [1, -1, 0, -1])
    assert index.terms == ["a", "b"]
    np.testing.assert_array_equal(index.columns(["b", "x", "a", "y"], grow=True), [1, 2, 0, 3])
    assert index.terms == ["a", "b", "x", "y"] and index.ids["y"] == 3
    with pytest.raises(ValueError):
        index.columns(["bad\nterm"], grow=True)


# -- a vocabulary in arrays: Terms and TermTable -------------------------------------------------

_PIECES = ["a", "b", "ab", "abcdefg", "abcdefgh", "abcdefghi", "\x00", "é", "\u4e00", "\U0001f600"]


@settings(max_examples=300, deadline=None)
@given(st.sets(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=6).map("".join)))
def test_terms_hold_and_sort_what_a_tuple_of_str_would(distinct):
    from nbspam.text.vocabulary import Terms

    terms = list(distinct)
    packed = Terms.of(terms)
    assert len(packed) == len(terms) and list(packed) == terms and packed == tuple(terms)
    assert [packed[i] for i in range(-len(terms), len(terms))] == terms + terms
    assert packed[1:4] == tuple(terms[1:4])
    order = sorted_order(packed)  # by the bytes (`byte_order`), no str made
    ordered = packed.take(order, ordered=True)
    assert list(ordered) == sorted(terms)  # byte order of UTF-8 is code point order
    assert [terms[i] for i in order.tolist()] == sorted(terms)
    assert sorted_order(packed).tolist() == sorted_order(terms).tolist()
    for term in terms:
        assert term in ordered and ordered.index(term) == sorted(terms).index(term)
    assert "q" not in ordered and "aq" not in ordered and 3 not in ordered


def test_terms_are_packed_as_a_model_file_holds_them():
    from nbspam.text.vocabulary import Terms

    packed = Terms.of(["straße", "", "東京"])
    assert packed.blob.tobytes() == "straße\n\n東京".encode()
    assert packed.offsets.tolist() == [0, 8, 9, 16]
    assert list(packed.take(np.array([2, 0]))) == ["東京", "straße"]
    assert Terms.of([]).offsets.tolist() == [0] and list(Terms.of([])) == []
    with pytest.raises(ValueError, match="line break"):
        Terms.of(["a\nb", "c"])


def _same_as_a_dictionary(chunks):
    from nbspam.text.vocabulary import TermTable

    table, ids = TermTable(), {}
    for chunk in chunks:
        expected = [ids.setdefault(term, len(ids)) for term in chunk]
        assert table.columns(chunk).tolist() == expected
    assert len(table) == len(ids) and list(table.terms()) == list(ids)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sets(st.text(st.characters(blacklist_characters="\n"), max_size=9))))
def test_a_term_table_numbers_terms_as_a_dictionary_would(chunks):
    _same_as_a_dictionary([list(chunk) for chunk in chunks])


def test_a_term_table_tells_apart_terms_that_share_a_hash(monkeypatch):
    from nbspam.text import vocabulary

    # every term of a length shares one hash: each must be told apart by its bytes
    monkeypatch.setattr(vocabulary, "_hash", len)
    words = [f"w{i}" for i in range(3000)]
    _same_as_a_dictionary([words[:5], words[3:700], ["x", "w1", "yy"], words[::-1], ["w2999"]])
    monkeypatch.setattr(vocabulary, "_hash", lambda term: 7)
    _same_as_a_dictionary([["a", "b"], ["b", "c", "a"], ["d"]])


def test_a_term_table_merges_encoded_terms_without_hashing_or_making_a_str_each(monkeypatch):
    from nbspam.text import vocabulary
    from nbspam.text.counting import encode_terms

    hashed = []
    monkeypatch.setattr(vocabulary, "_hash", lambda term: hashed.append(term) or hash(term))
    chunks = [["a", "straße", "", "東京"], ["東京", "b", "a"], ["c", "straße"]]
    coded = [encode_terms(chunk) for chunk in chunks]  # as a worker sends them
    assert coded[0].text == "a\nstraße\n\n東京\n".encode()
    assert coded[0].hashes.tolist() == [hash(t) for t in chunks[0]]
    assert coded[0].seed == hash("nbspam")
    table = vocabulary.TermTable()
    assert [table.columns(c).tolist() for c in coded] == [[0, 1, 2, 3], [3, 4, 0], [5, 1]]
    assert hashed == []  # the worker's hashes taken as they are
    assert list(table.terms()) == ["a", "straße", "", "東京", "b", "c"]


def test_a_term_table_tells_apart_encoded_terms_that_share_a_hash(monkeypatch):
    from nbspam.text import vocabulary
    from nbspam.text.counting import encode_terms

    monkeypatch.setattr(vocabulary, "_hash", len)
    words = [f"w{i}" for i in range(3000)]
    table, ids = vocabulary.TermTable(), {}
    for chunk in [words[:5], words[3:700], ["x", "w1", "yy"], words[::-1], ["w2999"]]:
        expected = [ids.setdefault(term, len(ids)) for term in chunk]
        assert table.columns(encode_terms(chunk, len)).tolist() == expected
    assert list(table.terms()) == list(ids)


def test_a_term_table_hashes_again_terms_hashed_under_another_seed():
    from nbspam.text.counting import EncodedTerms, encode_terms
    from nbspam.text.vocabulary import TermTable

    table = TermTable()
    assert table.columns(["a", "b"]).tolist() == [0, 1]
    elsewhere = dataclasses.replace(
        encode_terms(["c", "b", "a"], lambda term: 1), seed=hash("nbspam") + 1
    )
    assert isinstance(elsewhere, EncodedTerms)
    assert table.columns(elsewhere).tolist() == [2, 1, 0]
    assert table.columns(["a", "c", "d"]).tolist() == [0, 2, 3]


def test_a_workers_chunk_comes_with_its_terms_encoded_and_no_str_a_term():
    import pickle
    import pickletools

    from nbspam.core.settings import TokenizerConfig
    from nbspam.mail.message import Message
    from nbspam.text.counting import EncodedTerms, LabelledChunks, count_chunk

    datas = [b"Subject: hello %d\n\nstrasse caf\xc3\xa9 word%d\n" % (i, i) for i in range(600)]
    messages = [Message(str(i), data, ("ham", "spam")[i % 2]) for i, data in enumerate(datas)]
    for jobs in (1, 2):  # the main process, or forked workers (the same hash seed)
        got = list(LabelledChunks(messages, TokenizerConfig(), jobs=jobs))
        assert len(got) == 3
        for k, (labels, counted) in enumerate(got):
            assert labels == [m.label for m in messages[250 * k : 250 * (k + 1)]]
            plain = count_chunk(TokenizerConfig(), datas[250 * k : 250 * (k + 1)])
            terms = counted.terms
            assert isinstance(terms, EncodedTerms) and terms.seed == hash("nbspam")
            assert terms.text.decode().split("\n") == plain.terms + [""]
            assert terms.hashes.tolist() == [hash(t) for t in plain.terms]
            assert counted[1:] == plain[1:]
            strings = [
                op for op, _, _ in pickletools.genops(pickle.dumps(counted)) if "UNICODE" in op.name
            ]
            assert len(plain.terms) > 250 and len(strings) < 10  # names of classes only


def test_a_term_table_refuses_line_breaks():
    from nbspam.text.vocabulary import TermTable

    with pytest.raises(ValueError, match="line break"):
        TermTable().columns(["a", "b\nc"])


def test_a_term_table_spreads_hashes_that_share_their_low_bits(monkeypatch):
    import time

    from nbspam.text import vocabulary

    # hashes that differ only above bit 32 (mail can make such terms where the hash seed is
    # known): taken as their low bits, every term would probe one run of slots, and adding
    # them took time growing with the square of their number (25 s for these)
    monkeypatch.setattr(vocabulary, "_hash", lambda term: (int(term[1:]) + 1) << 32)
    words = [f"w{i}" for i in range(30_000)]
    started = time.monotonic()
    _same_as_a_dictionary([words[i : i + 1000] for i in range(0, len(words), 1000)] + [words])
    assert time.monotonic() - started < 15  # does not hang: some 0.2 s


def test_ordered_terms_find_an_absent_term_by_binary_search_not_by_reading_all(monkeypatch):
    from nbspam.text.vocabulary import Terms

    ordered = Terms.of([f"t{i:06d}" for i in range(50_000)], ordered=True)
    read = []
    decode = Terms._term
    monkeypatch.setattr(Terms, "_term", lambda self, i: read.append(i) or decode(self, i))
    assert ordered.index("t012345") == 12_345
    with pytest.raises(ValueError) as absent:
        ordered.index("t0123455")
    assert len(read) < 50  # log2(50,000) each; a Sequence's index read all 50,000
    assert str(absent.value) == "'t0123455' is not among the terms"
    with pytest.raises(ValueError):
        ordered.index(5)
    assert "t0123455" not in ordered and "t049999" in ordered
    assert Terms.of(["b", "a"]).index("a") == 1  # not ordered: read in turn
