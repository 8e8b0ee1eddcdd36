"""Training keeps one copy of what it must keep and makes no temporaries the size of the
vocabulary where a chunk or a fold is smaller (docs/speed.md, "Memory")."""

from __future__ import annotations

import dataclasses
import os
import platform
import subprocess
import sys
import tracemalloc
from array import array

import numpy as np
import pytest

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
    rest, peak = _rest_and_peak(shared, 0)
    # the model's two count arrays (2 labels x 200,000 terms x 8 bytes each) must be copied:
    # 6.4 MB; the fold's sums over the whole vocabulary would be as much again
    assert peak < 8_000_000
    _assert_the_rest_sums(rest, X, labels, fold != 0)
    assert rest.class_count.tolist() == [4, 4]


def _rows(n: int, per: int, d: int, seed: int = 0):
    """n count rows of ``per`` distinct terms each (counts 1 to 4) over d terms (7 * per at
    most), int32 as the sample keeps them."""
    from nbspam.core.sparse import sp

    rng = np.random.default_rng(seed)
    indices = ((rng.integers(0, d, n)[:, None] + 7 * np.arange(per)) % d).ravel()
    indices = indices.astype(np.int32)
    data = rng.integers(1, 5, n * per).astype(np.int32)
    return sp.csr_matrix((data, indices, np.arange(0, n * per + 1, per)), shape=(n, d))


def test_class_counts_make_no_temporaries_of_16_bytes_an_entry():
    from nbspam.models import naive_bayes as nb

    X = _rows(4000, 250, 2000)  # 1,000,000 entries, small sums
    y = np.arange(4000) % 2
    tracemalloc.start()
    try:
        class_count, term_count, doc_count = nb.class_counts(X, y, 2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # an int64 key and float64 weights for bincount took 16 bytes an entry (21 MB here);
    # the product with the one-hot labels takes the presence of each entry (int32)
    assert peak < 6 * X.nnz
    dense = X.toarray()
    for c in (0, 1):
        assert class_count[c] == 2000
        assert term_count[c].tolist() == dense[y == c].sum(axis=0).tolist()
        assert doc_count[c].tolist() == (dense[y == c] > 0).sum(axis=0).tolist()
    assert term_count.dtype == doc_count.dtype == np.int64


def test_class_counts_past_int32_are_exact():
    from nbspam.core.sparse import sp
    from nbspam.models import naive_bayes as nb

    X = sp.csr_matrix(np.array([[2**30, 1], [2**30, 0], [5, 2**30]], np.int32))
    _, term_count, doc_count = nb.class_counts(X, np.array([0, 0, 1]), 2)
    assert term_count.tolist() == [[2**31, 1], [5, 2**30]]
    assert doc_count.tolist() == [[2, 1], [1, 1]]


def test_the_folds_of_every_setting_reuse_one_pair_of_count_arrays():
    from nbspam.fit.crossval import Folds, Tokenized

    d = 200_000
    X = _rows(20, 3, d)
    labels = ["ham", "spam"] * 10
    data = Tokenized([str(i) for i in range(20)], labels, X, [f"t{j:06d}" for j in range(d)])
    shared = Folds(data, np.arange(20) % 5, None)
    by_date = Folds(data, np.where(np.arange(20) < 10, -1, 0), None, like=shared)
    first = shared.rest(0).term_count
    assert shared.rest(1).term_count is first  # written into again
    tracemalloc.start()
    try:
        rest = by_date.rest(0)  # its first call: the fold's sums, and no new count arrays
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # a copy of the counts is 3.2 MB an array
    assert rest.term_count is first
    dense = X.toarray()
    for c, label in enumerate(("ham", "spam")):
        mine = (np.arange(20) < 10) & (np.array(labels) == label)
        assert rest.term_count[c].tolist() == dense[mine].sum(axis=0).tolist()
        assert rest.doc_count[c].tolist() == (dense[mine] > 0).sum(axis=0).tolist()


def test_a_folds_rows_are_scored_a_block_at_a_time_without_a_copy_by_column():
    from nbspam.fit.crossval import Folds, Tokenized, score_split
    from nbspam.models.model import from_counts, predict_matrix

    d, n = 20_000, 4096  # four blocks of `crossval.SCORED_ROWS`
    X = _rows(n, 100, d)  # the fold scored holds n / 2 rows, 204,800 entries
    labels = ["ham", "spam"] * (n // 2)
    data = Tokenized([str(i) for i in range(n)], labels, X, [f"t{j:06d}" for j in range(d)])
    fold = np.where(np.arange(n) < n // 2, -1, 0)
    shared = Folds(data, fold, None)
    for event_model in ("multinomial", "bernoulli", "fisher"):
        settings = build_settings({"event_model": event_model, "min_count": 2})
        score_split(data, fold, settings, protocol={}, shared=shared)  # the fold's sums
        tracemalloc.start()
        try:
            scores = score_split(data, fold, settings, protocol={}, shared=shared)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # the model (2 x 20,000 terms: 1.3 MB) and a block's rows (SCORED_ROWS x 100
        # entries, and their values as floats: 1.6 MB); the whole fold's rows copied, then
        # their kept columns copied again, with scipy's temporaries, took 7 MB
        assert peak < 3_500_000, (event_model, peak)
        # the same scores, to the bit, as the model's scores of the kept columns
        model = from_counts(shared.rest(0), settings, sorted_terms=True)
        test = shared.test(0)
        log_post, log_odds = predict_matrix(model, X[test][:, model.form.kept])
        assert scores.log_odds[test].tobytes() == log_odds.tobytes()
        assert scores.log_posterior[test].tobytes() == log_post.tobytes()


def test_scores_over_the_whole_vocabulary_are_the_kept_columns_scores_to_the_bit():
    from nbspam.fit.crossval import predict_rows
    from nbspam.models.model import fit, predict_matrix

    X = _rows(300, 30, 500, seed=1)
    y = [("a", "b", "c")[i % 3] for i in range(300)]
    terms = [f"t{j:03d}" for j in range(500)]
    for event_model in ("multinomial", "bernoulli", "complement"):
        settings = build_settings({"event_model": event_model, "max_features": 300})
        model = fit(X, y, terms, settings, sorted_terms=True)
        assert model.form.kept.size < 500
        log_post, _ = predict_matrix(model, X[:, model.form.kept])
        wide, odds = predict_rows(model.form, X)
        assert odds is None and wide.tobytes() == log_post.tobytes(), event_model


def test_training_holds_the_dates_of_the_sample_not_one_a_message(monkeypatch):
    from nbspam.core.parallel import chunks
    from nbspam.fit.training import Dates
    from nbspam.mail.message import Message

    def mail(i: int) -> bytes:
        return b"Date: Mon, %d Jan 2024 10:00:00 +0000\nSubject: m%d\n\nword%d body\n" % (
            i % 28 + 1,
            i,
            i,
        )

    # 40 distinct messages, each read twice, the copy 30 messages after the first
    order = [i for i in range(40)] + [i for i in range(10)]
    order = order[:30] + order[40:] + order[30:40]
    messages = [Message(f"m{n}", mail(i), ("ham", "spam")[i % 2]) for n, i in enumerate(order)]
    monkeypatch.setattr("nbspam.text.counting.chunks", lambda items: chunks(items, 7))
    dates = Dates(SETTINGS.tokenizer.mail)
    counted = LabelledChunks(messages, SETTINGS.tokenizer, noted=dates.note)
    rows = SampledRows(7, dated=dates.take)
    fit_counted(counted, SETTINGS, rows=rows)
    # each date handed to the sample as its message was counted, and a copy read after
    # its first was counted not noted again
    assert dates.times == {}
    assert len(rows.times()) == 7
    day = {i: 86400.0 * (i % 28) + 1704103200.0 for i in range(40)}
    first = list(dict.fromkeys(order))  # the distinct messages in the order counted
    assert rows.times() == [day[first[n]] for n in rows.numbers().tolist()]


def test_the_sample_keeps_its_counts_in_the_smallest_integers(sample_messages):
    rows = SampledRows(len(sample_messages))
    model = fit_counted(LabelledChunks(sample_messages, SETTINGS.tokenizer), SETTINGS, rows=rows)
    X, terms = rows.matrix()
    assert X.data.dtype == np.uint8 and X.indices.dtype == np.int32
    assert terms == list(model.terms)
    # every message is in the sample: its rows add up to the model's counts
    assert np.asarray(X.sum(axis=0)).ravel().tolist() == model.term_count.sum(axis=0).tolist()


def test_the_sample_is_stacked_into_one_matrix_letting_go_of_each_chunk():
    rows = SampledRows(10**6)
    d, chunk_rows = 10_000, 250
    for c in range(40):  # 1,000,000 entries in 40 chunks of 250 rows
        X, labels, _ = _sample_chunk(c, chunk_rows, 100, d)
        rows.chunks.append((X, labels, np.arange(c * chunk_rows, (c + 1) * chunk_rows)))
    rows.terms, rows.order = tuple(f"t{j:06d}" for j in range(d)), np.arange(d)
    tracemalloc.start()
    try:
        X, _ = rows.matrix()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the stacked rows (5 bytes an entry: 5 MB) and a chunk over; concatenated beside the
    # chunks, and their indices then renamed into another copy, they took 9 MB more
    assert peak < 6_000_000
    assert X.shape == (10_000, d) and X.nnz == 1_000_000 and len(rows.chunks) == 1
    assert X.indices[:3].tolist() == [0, 7, 14] and X.indptr[-1] == 1_000_000


def test_the_fitted_models_form_is_not_kept_through_the_cross_validation(sample_messages):
    from nbspam.fit.training import decide

    rows = SampledRows(len(sample_messages))
    model = fit_counted(LabelledChunks(sample_messages, SETTINGS.tokenizer), SETTINGS, rows=rows)
    assert "form" in vars(model)  # made while fitting, to check that terms survive
    decided = decide(model, rows, SETTINGS)
    assert "form" not in vars(model)  # let go of before the folds were fitted
    assert decided.form.kept.size  # the model decided makes its own


def test_the_set_of_digests_counted_is_let_go_of_before_the_cross_validation(
    sample_messages, monkeypatch
):
    import gc

    from nbspam.fit import training

    alive = {}
    real = training.decide

    def spy(model, rows, settings, times=None):
        gc.collect()
        alive["counted"] = [o for o in gc.get_objects() if isinstance(o, LabelledChunks)]
        alive["dates"] = [o for o in gc.get_objects() if isinstance(o, training.Dates)]
        return real(model, rows, settings, times)

    monkeypatch.setattr(training, "decide", spy)
    model = training.train(sample_messages, SETTINGS)
    assert alive == {"counted": [], "dates": []}  # nor their digests (the model has them)
    assert len(model.seen_digests) == int(model.class_count.sum())


def _traced(work) -> int:
    """The bytes that ``work()``'s result holds, as tracemalloc counts them (what it
    allocated and did not free)."""
    import gc

    gc.collect()
    tracemalloc.start()
    try:
        kept = work()
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del kept
    return held


def test_counting_holds_its_vocabulary_in_arrays_not_python_strings():
    n, per = 100_000, 10_000

    def count():
        builder = ClassCountsBuilder()
        for start in range(0, n, per):  # each chunk's terms new str, as from a worker
            terms = [f"w{i:07d}" for i in range(start, start + per)]
            builder.add_counts(chunk(terms), [("ham", "spam")[start // per % 2]])
        return builder

    # a str, a dictionary entry and an int a term took some 150 bytes beside the counts
    # (2 labels x 2 arrays x 8 bytes, room for a quarter more: 40); now some 45
    assert _traced(count) < 100 * n
    builder = count()
    totals = builder.totals()
    assert len(totals.terms) == n and totals.terms[12_345] == "w0012345"
    assert totals.term_count[:, 12_345].tolist() == [0, 1]


def test_the_models_terms_are_one_array_of_utf8_as_its_file_holds_them(sample_messages, tmp_path):
    from nbspam.store.modelfile import load_model, save_model
    from nbspam.text.vocabulary import Terms

    model = fit_counted(LabelledChunks(sample_messages, SETTINGS.tokenizer), SETTINGS)
    terms = list(model.terms)
    assert terms == sorted(set(terms)) and len(terms) > 100
    assert isinstance(model.terms, Terms) and model.terms.ordered  # not a tuple of str
    assert model.terms.blob.tobytes() == "\n".join(terms).encode()
    save_model(model, tmp_path / "m.nbm")
    again = load_model(tmp_path / "m.nbm")
    assert isinstance(again.terms, Terms) and again.terms == model.terms


def test_the_digests_counted_take_some_20_bytes_a_message_not_a_dictionary_entry():
    from nbspam.mail.message import Message

    n = 20_000
    messages = [Message(str(i), b"Subject: s\n\nword %d\n" % i, "ham") for i in range(n)]
    list(LabelledChunks(messages[:1], SETTINGS.tokenizer))  # the analyzer made beforehand

    def count():
        counted = LabelledChunks(messages, SETTINGS.tokenizer)
        for _ in counted:
            pass
        return counted

    # a 16-byte bytes and a dictionary entry took some 110 bytes a message
    assert _traced(count) < 50 * n
    counted = count()
    assert len(counted.seen) == n and counted.duplicates == 0


def test_the_digests_counted_find_a_copy_however_long_ago_it_was_counted(monkeypatch):
    from nbspam.mail.message import Message
    from nbspam.text.counting import Seen

    monkeypatch.setattr(Seen, "MERGED_AT", 16)
    mail = [b"Subject: %d\n\nword %d\n" % (i, i) for i in range(300)]
    order = list(range(300)) + list(range(0, 300, 7)) + [299, 0]
    messages = [Message(str(n), mail[i], ("ham", "spam")[i % 3 == 0]) for n, i in enumerate(order)]
    counted = LabelledChunks(messages, SETTINGS.tokenizer)
    model = fit_counted(counted, SETTINGS)
    assert counted.duplicates == len(order) - 300 and len(counted.seen) == 300
    monkeypatch.setattr(Seen, "MERGED_AT", 10**9)  # every digest in the dictionary
    whole = fit_counted(LabelledChunks(messages, SETTINGS.tokenizer), SETTINGS)
    assert model.seen_digests.tobytes() == whole.seen_digests.tobytes()
    assert model.seen_labels.tolist() == whole.seen_labels.tolist()
    assert model.term_count.tolist() == whole.term_count.tolist()
    from nbspam.mail.headers import message_digest

    expected = sorted((message_digest(m), ("ham", "spam")[i % 3 == 0]) for i, m in enumerate(mail))
    assert [bytes(d) for d in model.seen_digests] == [d for d, _ in expected]
    assert [model.labels[k] for k in model.seen_labels] == [x for _, x in expected]


def test_the_split_by_dates_counts_share_the_models_terms_not_a_tuple_of_them():
    from nbspam.core.sparse import sp
    from nbspam.fit.crossval import Folds, Tokenized
    from nbspam.text.vocabulary import Terms

    terms = Terms.of([f"t{j:06d}" for j in range(1000)], ordered=True)
    X = sp.csr_matrix((np.ones(10, np.int64), np.arange(10), np.arange(11)), shape=(10, 1000))
    data = Tokenized([str(i) for i in range(10)], ["ham", "spam"] * 5, X, terms)
    shared = Folds(data, np.arange(10) % 5, None)  # without totals: the split by date's
    # a tuple of the vocabulary decoded (13.6 MB at 10,000 messages) was made here
    assert shared.counts.terms is terms
    assert shared.rest(0).terms is terms


def test_a_models_kept_terms_are_picked_without_decoding_one_term_at_a_time(
    sample_messages, tmp_path
):
    from nbspam.models.scoring_forms import pick
    from nbspam.store.modelfile import load_model, save_model

    model = fit_counted(LabelledChunks(sample_messages, SETTINGS.tokenizer), SETTINGS)
    save_model(model, tmp_path / "m.nbm")
    loaded = load_model(tmp_path / "m.nbm")
    assert loaded.terms.strings == list(model.terms)  # the file's check decoded them
    kept = model.form.kept
    expected = tuple(list(model.terms)[k] for k in kept.tolist())
    assert pick(model.terms, kept) == expected == pick(loaded.terms, kept)
    assert model.form.terms == expected == loaded.form.terms


def test_each_candidates_model_is_let_go_of_before_the_next_is_made(monkeypatch):
    """A fold's model holds its scoring form (the size of the model): the candidates of a
    fold are scored one after another, and only one of their models is alive at a time."""
    import weakref

    from nbspam.fit import crossval

    data, shared = _four_folds_of_400_rows(seed=2)
    trials = [
        build_settings({"event_model": name, "calibrate": False})
        for name in ("multinomial", "bernoulli", "fisher", "complement")
    ]
    made: list[weakref.ref] = []
    alive_at_each: list[int] = []
    model = crossval.FoldModels.model

    def noted(self, settings):
        alive_at_each.append(sum(ref() is not None for ref in made))
        made.append(weakref.ref(fitted := model(self, settings)))
        return fitted

    monkeypatch.setattr(crossval.FoldModels, "model", noted)
    scores = crossval.score_candidates(data, shared, trials)
    assert len(made) == 4 * 4 and alive_at_each == [0] * 16
    assert all(isinstance(s, crossval.Scores) and s.evaluated.all() for s in scores)


def test_the_folds_counts_are_uint16_and_the_rests_int32_where_they_fit():
    from nbspam.fit.crossval import Folds, Tokenized

    d = 200_000
    X = _rows(20, 3, d)
    labels = ["ham", "spam"] * 10
    data = Tokenized([str(i) for i in range(20)], labels, X, [f"t{j:06d}" for j in range(d)])
    tracemalloc.start()
    try:
        shared = Folds(data, np.arange(20) % 5, None)
        rest = shared.rest(0)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the rows' sums, a pair of (2 labels x 200,000 terms) arrays of uint16 (1.6 MB; 3.2 MB
    # as int32), and the rest's of int32 (3.2 MB)
    assert held < 5_500_000
    assert shared.counts.term_count.dtype == shared.counts.doc_count.dtype == np.uint16
    assert rest.term_count.dtype == rest.doc_count.dtype == np.int32
    dense = X.toarray()
    for c, label in enumerate(("ham", "spam")):
        mine = (np.arange(20) % 5 != 0) & (np.array(labels) == label)
        assert rest.term_count[c].tolist() == dense[mine].sum(axis=0).tolist()
        assert rest.doc_count[c].tolist() == (dense[mine] > 0).sum(axis=0).tolist()


def test_the_fold_models_of_int32_counts_score_as_those_of_int64_to_the_bit():
    from nbspam.fit.crossval import Folds, Tokenized, score_split
    from nbspam.models.model import from_counts, predict_matrix

    d, n = 3000, 400
    X = _rows(n, 20, d, seed=3)
    labels = ["ham", "spam"] * (n // 2)
    data = Tokenized([str(i) for i in range(n)], labels, X, [f"t{j:05d}" for j in range(d)])
    fold = np.arange(n) % 4
    shared = Folds(data, fold, None)
    for changes in (
        {"event_model": "multinomial", "alpha": 0.1},
        {"event_model": "bernoulli", "alpha": 0.5},
        {"event_model": "complement", "complement_norm": True},
        {"event_model": "fisher"},
        {"event_model": "multinomial", "select": "mi", "max_features": 1000},
    ):
        settings = build_settings({**changes, "calibrate": False})
        scores = score_split(data, fold, settings, protocol={}, shared=shared)
        for k in range(4):
            rest = shared.rest(k)
            assert rest.term_count.dtype == np.int32
            wide = ClassCounts(
                rest.labels,
                rest.terms,
                rest.class_count,
                rest.term_count.astype(np.int64),
                rest.doc_count.astype(np.int64),
            )
            model = from_counts(wide, settings, sorted_terms=True)
            test = shared.test(k)
            log_post, log_odds = predict_matrix(model, X[test][:, model.form.kept])
            assert scores.log_odds[test].tobytes() == log_odds.tobytes(), changes
            assert scores.log_posterior[test].tobytes() == log_post.tobytes(), changes


def test_a_folds_sums_are_kept_in_12_bytes_a_column_for_every_setting():
    from nbspam.fit.crossval import Folds, Tokenized

    d, n = 200_000, 50
    X = _rows(n, 4000, d, seed=4)  # each fold's 10 rows hold some 40,000 columns
    labels = ["ham", "spam"] * (n // 2)
    data = Tokenized([str(i) for i in range(n)], labels, X, [f"t{j:06d}" for j in range(d)])
    fold = np.arange(n) % 5
    shared = Folds(data, fold, None)
    shared.rest(0)  # the rest's arrays, made once
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for k in range(1, 5):
            shared.rest(k)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    columns = sum(np.unique(X[fold == k].indices).size for k in range(1, 5))
    assert columns > 100_000
    # each column a fold's rows hold: its number (int32) and 2 labels' sums of occurrences
    # and of documents, each in 2 bytes where they fit (20 bytes as int32)
    assert held < 12 * columns + 20_000


def test_the_scores_of_two_class_settings_are_kept_as_log_odds_between_folds():
    from nbspam.fit.crossval import Folds, Tokenized, score_candidates

    n, d = 40_000, 50
    X = _rows(n, 3, d, seed=5)
    labels = ["ham", "spam"] * (n // 2)
    data = Tokenized([str(i) for i in range(n)], labels, X, [f"t{j:02d}" for j in range(d)])
    shared = Folds(data, np.arange(n) // 2 % 2, None)
    trials = [
        build_settings({"event_model": "multinomial", "alpha": a, "calibrate": False})
        for a in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
    ]
    held = []
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        scores = score_candidates(
            data,
            shared,
            trials,
            done=lambda fits: held.append(tracemalloc.get_traced_memory()[0] - start),
        )
    finally:
        tracemalloc.stop()
    # after the first fold: 8 settings' log-odds of 40,000 rows, 8 bytes a row (2.6 MB),
    # and the rows' labels (0.3 MB); with the log posteriors too, 24 bytes a row (7.7 MB)
    assert held[0] < 3_500_000
    for s in scores:
        assert s.log_posterior.shape == (n, 2) and s.evaluated.all()
        expected = -np.logaddexp(0.0, -s.log_odds)  # log P(spam | x), spam the second class
        assert s.log_posterior[:, 1].tobytes() == expected.tobytes()


def test_class_counts_sum_a_block_of_entries_at_a_time():
    from nbspam.models import naive_bayes as nb

    X = _rows(4000, 250, 2000).astype(np.uint16)  # 1,000,000 entries, a sample's counts
    y = np.arange(4000) % 2
    for narrow in (False, True):
        tracemalloc.start()
        try:
            if narrow:  # the sums in the integers they were summed in (int32 here)
                class_count, term_count, doc_count = nb.class_counts(X, y, 2, narrow=True)
            else:
                class_count, term_count, doc_count = nb.class_counts(X, y, 2)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # the product's copy of all the counts as int32, and the presence of each entry as
        # int32 and as bool, took 9 bytes an entry at once (5 MB here)
        assert peak < 3_500_000
        assert term_count.dtype == doc_count.dtype == (np.int32 if narrow else np.int64)
        dense = X.toarray()
        for c in (0, 1):
            assert class_count[c] == 2000
            assert term_count[c].tolist() == dense[y == c].sum(axis=0).tolist()
            assert doc_count[c].tolist() == (dense[y == c] > 0).sum(axis=0).tolist()


def test_class_counts_of_rows_in_blocks_count_every_row(monkeypatch):
    from nbspam.models import naive_bayes as nb

    monkeypatch.setattr(nb, "SUMMED", 7)
    X = _rows(30, 3, 50, seed=6).tolil()
    X[0, :] = 0  # empty rows first and last, and a row longer than a block
    X[29, :] = 0
    X[5, :] = np.arange(50) % 3
    X = X.tocsr()
    y = np.arange(30) % 3
    _, term_count, doc_count = nb.class_counts(X, y, 3)
    dense = X.toarray()
    for c in range(3):
        assert term_count[c].tolist() == dense[y == c].sum(axis=0).tolist()
        assert doc_count[c].tolist() == (dense[y == c] > 0).sum(axis=0).tolist()


def _fisher_model(d: int, seed: int = 7):
    """A two-class model of d terms, most of them seen in one class alone (clues)."""
    from nbspam.models.model import Model

    rng = np.random.default_rng(seed)
    doc_count = rng.integers(0, 3, (2, d)) * rng.integers(0, 2, (2, d))
    settings = build_settings({"event_model": "fisher"})
    return Model(
        labels=("ham", "spam"),
        terms=[f"t{j:06d}" for j in range(d)],
        class_count=np.array([500, 400]),
        term_count=doc_count * 2,
        doc_count=doc_count,
        tokenizer=settings.tokenizer,
        training=settings.training.replace(positive="spam"),
    )


def test_fishers_form_takes_a_block_of_terms_at_a_time_for_the_same_values():
    from nbspam.models.event_models import Fisher
    from nbspam.models.fisher import word_probabilities

    d = 200_000
    model = _fisher_model(d)
    kept = np.flatnonzero(model.doc_count.sum(axis=0) > 0)
    tracemalloc.start()
    try:
        form = Fisher().form(model, kept)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    clues = form.kept.size
    assert clues > 80_000
    # the form's three arrays of the clues (24 bytes a clue), and a block's temporaries
    # (some 3 MB); f of every kept term and its temporaries, some 10 arrays of the kept
    # terms at once, took 10 MB more
    assert peak < 24 * clues + 3_000_000
    # the same values, to the bit, as of the whole arrays at once
    cfg = model.training
    f = word_probabilities(
        model.doc_count[:, kept], model.class_count, positive=1, strength=cfg.strength
    )
    chosen = np.abs(f - 0.5) >= cfg.min_dev
    assert form.kept.tobytes() == kept[chosen].tobytes()
    assert form.log_f.tobytes() == np.log(f[chosen]).tobytes()
    assert form.log_not_f.tobytes() == np.log1p(-f[chosen]).tobytes()


def test_the_fold_models_write_fishers_probabilities_into_one_array():
    from nbspam.fit.crossval import Folds, Tokenized, score_candidates

    d, n = 20_000, 400
    X = _rows(n, 20, d, seed=8)
    labels = ["ham", "spam"] * (n // 2)
    data = Tokenized([str(i) for i in range(n)], labels, X, [f"t{j:05d}" for j in range(d)])
    shared = Folds(data, np.arange(n) % 4, None)
    trials = [
        build_settings({"event_model": "multinomial", "calibrate": False}),
        build_settings({"event_model": "fisher", "strength": 0.2, "calibrate": False}),
        build_settings({"event_model": "fisher", "strength": 0.5, "calibrate": False}),
    ]
    arrays = []
    score_candidates(data, shared, trials, done=lambda _: arrays.append(shared.memo["fisher"][1]))
    assert len(arrays) == 4 and all(a is arrays[0] for a in arrays)  # made once for all


def test_the_terms_of_highest_rank_are_chosen_with_one_copy_of_their_ranks():
    from nbspam.text.vocabulary import select_terms

    d = 200_000
    rng = np.random.default_rng(14)
    doc_freq = rng.integers(1, 50, d)
    rank = np.round(rng.random(d), 3)  # ties among the ranks
    tracemalloc.start()
    try:
        keep = select_terms(doc_freq, 100, max_features=50_000, rank=rank)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the candidates' ranks (1.6 MB) and masks of the vocabulary; a stable sort of the
    # candidates took their columns, their ranks negated, their order and its buffer
    assert peak < 2_500_000
    best = np.argsort(-rank, kind="stable")[:50_000]
    assert np.flatnonzero(keep).tolist() == np.sort(best).tolist()


def test_mutual_information_is_taken_a_block_of_terms_at_a_time_for_the_same_columns():
    from nbspam.models.model import kept_columns
    from nbspam.text.vocabulary import mutual_information, select_terms

    d = 200_000
    model = _fisher_model(d, seed=9)
    model = dataclasses.replace(
        model, training=model.training.replace(select="mi", max_features=50_000)
    )
    tracemalloc.start()
    try:
        kept = kept_columns(model)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the ranks, the selection's temporaries of the terms (some 5 arrays of the vocabulary,
    # 8 MB); mutual information over the whole vocabulary took some 4 (C, d) arrays more
    assert peak < 10_000_000
    doc_freq = model.doc_count.sum(axis=0)
    rank = mutual_information(model.doc_count, model.class_count)
    keep = select_terms(doc_freq, 900, max_features=50_000, rank=rank)
    assert kept.size == 50_000 and kept.tobytes() == np.flatnonzero(keep).tobytes()


def test_a_fold_models_form_is_let_go_of_before_its_rows_are_scored(monkeypatch):
    import weakref

    from nbspam.fit import crossval

    data, shared = _four_folds_of_400_rows(seed=10)
    trials = [
        build_settings({"event_model": name, "calibrate": False})
        for name in ("multinomial", "fisher", "complement")
    ]
    forms: list[weakref.ref] = []
    alive: list[tuple[str, bool]] = []
    model, predict = crossval.FoldModels.model, crossval.predict_wide

    def noted(self, settings):
        fitted = model(self, settings)
        forms.append(weakref.ref(fitted.form))
        return fitted

    def scored(form, wide, F):
        alive.append((type(form).__name__, forms[-1]() is not None))
        return predict(form, wide, F)

    monkeypatch.setattr(crossval.FoldModels, "model", noted)
    monkeypatch.setattr(crossval, "predict_wide", scored)
    scores = crossval.score_candidates(data, shared, trials)
    # a linear form's weights over the vocabulary score the rows, not the form of the kept
    # terms too; a Fisher form scores them itself, with its clues' places (4 bytes a term)
    assert len(forms) == 12 and len(alive) == 12
    assert set(alive) == {("LinearForm", False), ("FisherForm", True)}
    for trial, got in zip(trials, scores):
        assert (
            got.log_odds.tobytes()
            == crossval.score_split(data, shared.fold, trial, protocol={}).log_odds.tobytes()
        )


def test_a_fisher_forms_rows_are_scored_over_the_vocabulary_with_4_bytes_a_term():
    from nbspam.core.sparse import sp
    from nbspam.fit.crossval import predict_wide, widened
    from nbspam.models.scoring_forms import FisherForm

    d = 400_000
    rng = np.random.default_rng(13)
    kept = np.flatnonzero(rng.random(d) < 0.7).astype(np.int32)
    f = rng.uniform(0.001, 0.999, kept.size)
    form = FisherForm(kept, (), np.log(f), np.log1p(-f), 1)
    X = _rows(256, 50, d, seed=13)
    F = sp.csr_matrix((np.ones(X.nnz, np.uint8), X.indices, X.indptr), shape=X.shape)
    tracemalloc.start()
    try:
        log_post, log_odds = predict_wide(*widened(form, d), F)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # ln f, ln(1 - f) and 1 of every clue over the vocabulary took 9.6 MB
    assert peak < 3_000_000
    # the form's own scores of the kept columns, to the bit, and of rows with no clue
    want_post, want_odds = form.predict(F[:, kept])
    assert log_odds.tobytes() == want_odds.tobytes()
    assert log_post.tobytes() == want_post.tobytes()
    empty = sp.csr_matrix((2, d), dtype=np.uint8)
    got = predict_wide(*widened(form, d), empty)[1]
    assert got.tobytes() == form.predict(empty[:, kept])[1].tobytes()
    with pytest.raises(ValueError, match="rows of 399999 terms scored by clues of 400000"):
        predict_wide(*widened(form, d), F[:, : d - 1])


def _two_class_rows(n: int, d: int, seed: int):
    """n count rows over d terms, ham and spam in turns, the ham's terms mostly among the
    first 3/4 of the columns and the spam's among the last 3/4."""
    from nbspam.core.sparse import sp

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        start = 0 if i % 2 == 0 else d // 4
        rows.append(np.unique(rng.integers(start, start + 3 * d // 4, 30)))
    indices = np.concatenate(rows).astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])])
    data = rng.integers(1, 4, indices.size).astype(np.uint16)
    return sp.csr_matrix((data, indices, indptr), shape=(n, d))


@pytest.mark.parametrize("copied", [False, True], ids=["distinct", "copies"])
@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli", "complement", "fisher"])
def test_rows_left_out_of_a_split_score_the_others_as_a_copy_of_them_does(event_model, copied):
    from nbspam.fit.crossval import LEFT_OUT, Folds, Tokenized, score_split, subset

    n, d = 600, 400
    X = _two_class_rows(n, d, seed=16)
    labels = ["ham", "spam"] * (n // 2)
    labels[5::50] = ["other"] * len(labels[5::50])  # a label of rows left out alone
    data = Tokenized([str(i) for i in range(n)], labels, X, [f"t{j:04d}" for j in range(d)])
    rng = np.random.default_rng(17)
    rows = np.sort(rng.choice(np.flatnonzero(np.array(labels) != "other"), 350, replace=False))
    part_fold = np.arange(rows.size) % 4 - 1  # -1 (trained on only) and three test folds
    fold = np.full(n, LEFT_OUT)
    fold[rows] = part_fold
    settings = build_settings({"event_model": event_model, "calibrate": False})
    part = subset(data, rows)
    if copied:  # 40 rows of the split whose first copy is a row left out: first in the split
        copies = np.arange(n)
        copies[rows[-40:]] = np.setdiff1d(np.arange(n), rows)[:40]
        data, part = data._replace(copies=copies), part._replace(copies=copies[rows])
    got = score_split(data, fold, settings, protocol={})
    want = score_split(part, part_fold, settings, protocol={})
    assert got.classes == want.classes == ("ham", "spam")
    assert got.evaluated.tolist() == [i in set(rows[part_fold >= 0].tolist()) for i in range(n)]
    assert got.log_odds[got.evaluated].tobytes() == want.log_odds[want.evaluated].tobytes()
    assert (
        got.log_posterior[got.evaluated].tobytes() == want.log_posterior[want.evaluated].tobytes()
    )
    with pytest.raises(ValueError, match="left out"):
        Folds(data, fold, Folds(subset(data, rows), part_fold, None).counts)


def test_the_drift_check_scores_its_splits_by_date_without_a_copy_of_the_rows():
    from nbspam.fit.calibration import drift_from_dates
    from nbspam.fit.crossval import Tokenized

    n, d = 4000, 2000
    X = _rows(n, 200, d, seed=15).astype(np.uint16)  # 800,000 entries: 4.8 MB
    labels = ["ham", "spam"] * (n // 2)
    data = Tokenized([str(i) for i in range(n)], labels, X, [f"t{j:05d}" for j in range(d)])
    times = np.arange(n, dtype=np.float64)  # every row dated: the newer half is the last
    tracemalloc.start()
    try:
        record = drift_from_dates(data, times, build_settings({"event_model": "bernoulli"}), 5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # a fold's sums and a block of its test rows at a time; the older half's rows copied
    # for its cross-validation, then every dated row for the newer half's scores, took 8.5
    assert peak < 5_000_000
    assert record is not None and (record["dated"], record["newer_ham"]) == (4000, 1000)


def test_the_drift_check_scores_the_older_half_and_then_the_newer_as_copies_of_them_would(
    monkeypatch,
):
    from nbspam.fit import calibration
    from nbspam.fit.crossval import Tokenized, cross_validate_matrix, score_split, subset

    n, d = 600, 400
    X = _two_class_rows(n, d, seed=18)
    labels = ["ham", "spam"] * (n // 2)
    data = Tokenized([str(i) for i in range(n)], labels, X, [f"t{j:04d}" for j in range(d)])
    times = np.where(np.arange(n) % 7 == 3, np.nan, np.arange(n, dtype=np.float64))
    scored = []

    def noted(*args, **kwargs):
        scored.append(score_split(*args, **kwargs))
        return scored[-1]

    monkeypatch.setattr(calibration, "score_split", noted)
    settings = build_settings({"event_model": "bernoulli"})
    assert calibration.drift_from_dates(data, times, settings, 5) is not None
    # each label's dated rows in order of date: the older half, then the newer
    dated = ~np.isnan(times)
    halves = [np.flatnonzero(dated & (np.array(labels) == label)) for label in ("ham", "spam")]
    older = np.sort(np.concatenate([h[: h.size // 2] for h in halves]))
    newer = np.sort(np.concatenate([h[h.size // 2 :] for h in halves]))
    rows = np.sort(np.concatenate([older, newer]))
    want = [
        cross_validate_matrix(subset(data, older), settings, folds=5),
        score_split(subset(data, rows), np.isin(rows, newer) - 1, settings, protocol={}),
    ]
    assert len(scored) == 2
    for got, copy in zip(scored, want):
        assert got.log_odds[got.evaluated].tobytes() == copy.log_odds[copy.evaluated].tobytes()


def test_an_internal_cross_validation_of_a_large_vocabulary_holds_few_arrays_of_it():
    from nbspam.core.sparse import sp
    from nbspam.fit.crossval import Tokenized
    from nbspam.fit.selection import internal_cv

    d, n, per = 200_000, 2000, 60
    rng = np.random.default_rng(11)
    X = sp.csr_matrix(
        (
            np.ones(n * per, np.uint16),
            np.sort(rng.choice(d, size=(n, per)), axis=1).ravel().astype(np.int32),
            np.arange(0, n * per + 1, per),
        ),
        shape=(n, d),
    )
    X.sum_duplicates()
    labels = ["ham", "spam"] * (n // 2)
    data = Tokenized([str(i) for i in range(n)], labels, X, [f"t{j:06d}" for j in range(d)])
    tracemalloc.start()
    try:
        choice = internal_cv(data, SETTINGS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # auto's candidates on 5 folds: the rest's counts, the folds', the candidates' weights
    # over the vocabulary, a candidate's temporaries (1.6 MB an array of the vocabulary);
    # the event models' and the selection's temporaries of the whole vocabulary at once
    # took 30 MB
    assert peak < 24_000_000
    assert choice.scores is not None and len(choice.tried) >= 5


def test_a_folds_sums_take_a_block_of_its_rows_at_a_time():
    from nbspam.fit.crossval import Folds, Tokenized

    d, n = 20_000, 4000
    X = _rows(n, 200, d, seed=12).astype(np.uint16)  # the fold held: 400,000 entries
    labels = ["ham", "spam"] * (n // 2)
    data = Tokenized([str(i) for i in range(n)], labels, X, [f"t{j:05d}" for j in range(d)])
    fold = np.arange(n) // 2 % 2
    shared = Folds(data, fold, None)
    rest, peak = _rest_and_peak(shared, 0)
    # the fold's rows copied (6 bytes an entry), their columns renamed (4), and the
    # product's copy of their counts and presence (9) at once took 7.4 MB here
    assert peak < 3_000_000
    _assert_the_rest_sums(rest, X, labels, fold == 1)
    assert rest.class_count.tolist() == [1000, 1000]


def _rest_and_peak(shared, k):
    """(the counts of every fold but ``k``, the traced peak of making them)."""
    tracemalloc.start()
    try:
        rest = shared.rest(k)
        return rest, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _assert_the_rest_sums(rest, X, labels, others):
    """``rest`` holds each class's sums of the rows ``others`` of ``X``, counts and presence."""
    dense = X.toarray()
    for c, label in enumerate(("ham", "spam")):
        mine = others & (np.array(labels) == label)
        assert rest.term_count[c].tolist() == dense[mine].sum(axis=0).tolist()
        assert rest.doc_count[c].tolist() == (dense[mine] > 0).sum(axis=0).tolist()


def _four_folds_of_400_rows(seed):
    """(400 generated rows over 3,000 terms, ham and spam in turns; their four `Folds`)."""
    from nbspam.fit import crossval

    X = _rows(400, 20, 3000, seed=seed)
    data = crossval.Tokenized(
        [str(i) for i in range(400)], ["ham", "spam"] * 200, X, [f"t{j:05d}" for j in range(3000)]
    )
    return data, crossval.Folds(data, np.arange(400) % 4, None)


def _sample_chunk(c: int, rows: int = 250, per: int = 100, d: int = 10_000):
    """Chunk ``c`` of a stream: ``rows`` rows of ``per`` counts of 1 over d columns, and
    distinct digests."""
    from nbspam.core.sparse import sp

    indices = (np.arange(rows * per) * 7 + c) % d
    X = sp.csr_matrix(
        (
            np.ones(indices.size, np.uint8),
            indices.astype(np.int32),
            np.arange(0, indices.size + 1, per, dtype=np.int32),
        ),
        shape=(rows, d),
    )
    digests = [(c * rows + i).to_bytes(16, "big") for i in range(rows)]
    return X, ["ham"] * rows, digests


def test_a_full_sample_lets_go_of_each_chunk_as_its_rows_are_copied():
    from nbspam.models.model import sample_key

    rows = SampledRows(4_000)
    tracemalloc.start()
    try:
        for c in range(16):  # 4,000 rows: the sample is full (4,000 rows of 100: 2 MB)
            rows.add(*_sample_chunk(c))
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for c in range(16, 22):  # rows dropped at least once
            rows.add(*_sample_chunk(c))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the rows held past the limit (an eighth of it: 250 kB) and a chunk's copy over
    # (125 kB); the new copies beside the old took 2 MB more
    assert peak - before < 1_000_000
    # the 4,000 rows of the smallest keys of the 5,500, in the order counted
    keys = [sample_key(n.to_bytes(16, "big")) for n in range(5_500)]
    assert rows.numbers().tolist() == sorted(sorted(range(5_500), key=keys.__getitem__)[:4_000])
    assert sum(X.shape[0] for X, _, _ in rows.chunks) == len(rows.labels) == 4_000


def test_a_full_sample_copies_its_rows_every_few_chunks_not_every_chunk():
    from nbspam.models.model import sample_key

    rows = SampledRows(8_000)
    copied = 0
    for c in range(52):  # full at 32 chunks of 250 rows, then 20 more
        held = [X for X, _, _ in rows.chunks]
        rows.add(*_sample_chunk(c, per=10))
        copied += sum(X.shape[0] for X, _, _ in rows.chunks[:-1] if not any(X is Y for Y in held))
    # an eighth of the limit (1,000 rows, 4 chunks) held past it: a drop every 5th chunk,
    # some 8,000 rows copied each time; dropped at every chunk, 20 times
    assert copied < 60_000
    keys = [sample_key(n.to_bytes(16, "big")) for n in range(13_000)]
    assert rows.numbers().tolist() == sorted(sorted(range(13_000), key=keys.__getitem__)[:8_000])


def test_a_dated_sample_keeps_a_date_a_row_past_chunks_of_messages_counted_before():
    """A chunk of messages all counted before (a Maildir and its copy) has no row: it was
    kept as an empty chunk without dates, the dates fell out of step with the rows, and
    the next drop past the limit raised IndexError (`nbspam train` ended in an internal
    error). The stream ends between two drops: what is read then is the sample, trimmed."""
    from nbspam.core.sparse import sp
    from nbspam.models.model import sample_key

    rows = SampledRows(1_000, dated=lambda digests: [float(d[-1]) for d in digests])
    empty = sp.csr_matrix((0, 10_000), dtype=np.uint8)
    for c in range(7):  # 1,750 rows: full after 4 chunks, a drop after the 5th
        rows.add(*_sample_chunk(c))
        rows.add(empty, [], [])
    numbers = rows.numbers().tolist()
    keys = [sample_key(n.to_bytes(16, "big")) for n in range(1_750)]
    assert numbers == sorted(sorted(range(1_750), key=keys.__getitem__)[:1_000])
    assert rows.times() == [float(n % 256) for n in numbers]
    assert len(rows.labels) == 1_000


def test_the_growing_term_table_and_totals_are_kept_out_of_mallocs_heap():
    n, per = 200_000, 10_000

    def count():
        builder = ClassCountsBuilder()
        for start in range(0, n, per):
            terms = [f"w{i:07d}" for i in range(start, start + per)]
            builder.add_counts(chunk(terms), [("ham", "spam")[start // per % 2]])
        return builder

    # on the heap, the table's arrays (its terms' UTF-8, offsets, hashes and slots) and the
    # totals held some 75 bytes a term, each old copy of them as they grew a hole, and the
    # traced peak was 21 MB (the slots doubled: every column placed again at once)
    tracemalloc.start()
    try:
        builder = count()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 5 * n and peak < 8_000_000
    totals = builder.totals()
    assert len(totals.terms) == n and totals.terms[123_456] == "w0123456"
    assert totals.term_count[:, 123_456].tolist() == [1, 0]
    assert builder.index.columns(["w0199999", "w0000000", "new"]).tolist() == [n - 1, 0, n]


def test_zeros_apart_are_zeros_of_the_shape_and_type_asked_for():
    from nbspam.text.vocabulary import zeros_apart

    small, large = zeros_apart(10, np.int64), zeros_apart((3, 100_000), np.int32)
    assert small.tolist() == [0] * 10 and large.shape == (3, 100_000)
    assert large.dtype == np.int32 and not large.any() and large.flags.writeable
    large[2, 5] = 7
    assert int(large.sum()) == 7 and large[2, 5] == 7


def test_the_growing_term_table_and_totals_double_their_room(monkeypatch):
    from nbspam.text import vocabulary

    made, real = [], vocabulary.zeros_apart

    def counted(shape, dtype):
        made.append(shape)
        return real(shape, dtype)

    monkeypatch.setattr(vocabulary, "zeros_apart", counted)
    builder = ClassCountsBuilder()
    n, per = 200_000, 2_000
    for start in range(0, n, per):
        terms = [f"w{i:07d}" for i in range(start, start + per)]
        builder.add_counts(chunk(terms), ["ham"])
    # from 1,024 terms of room to 200,000, 8 doublings of each array (the terms' UTF-8
    # from 64 KiB: 5; the totals 3 arrays): 53 copies; an eighth at a time took 113, of
    # twice as many items (14.2 million; each a fresh page's bytes in a mapping)
    assert len(made) <= 60
    assert builder.totals().term_count.shape == (1, n)
    assert builder.index.columns(["w0123456"]).tolist() == [123_456]


def test_zeros_apart_refused_a_mapping_is_out_of_memory_as_numpy_says_it(monkeypatch):
    import errno
    import mmap

    from nbspam.text.vocabulary import APART, zeros_apart

    def refused(*args, **kwargs):
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(mmap, "mmap", refused)
    with pytest.raises(MemoryError):
        zeros_apart(APART, np.uint8)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_zeros_apart_written_in_a_forked_child_stay_as_they_are_here():
    """The mappings of `zeros_apart` are private: a child forked after them writes its
    own copy. A shared mapping, `mmap`'s default, let the child's writes reach this
    process's arrays."""
    from nbspam.text.vocabulary import APART, zeros_apart

    array = zeros_apart(APART // 8, np.int64)  # large enough for a mapping of its own
    pid = os.fork()
    if pid == 0:  # the child: write, and leave without running anything of pytest's
        array[:] = 7
        os._exit(0)
    os.waitpid(pid, 0)
    assert not array.any()


ARENAS_PROBE = """
import atexit, ctypes, sys
# malloc_stats prints one "Arena N:" block a heap of malloc's, on stderr, as the program ends
atexit.register(lambda: (sys.stderr.flush(), ctypes.CDLL(None).malloc_stats()))
folder, model, asked = sys.argv[1:]
sys.argv = ["nbspam", "train", folder, "-o", model, "--jobs", "2"]
import nbspam.cli.commands as commands
if asked == "no":  # the control: the command as it was
    commands._one_malloc_arena = lambda: None
commands.main()
"""


@pytest.mark.skipif(
    not (sys.platform.startswith("linux") and "glibc" in " ".join(platform.libc_ver())),
    reason="malloc's arenas are glibc's",
)
def test_train_serves_every_thread_from_one_malloc_heap(tmp_path, sample_messages):
    """The worker pool's threads read the results of a training's workers: each thread's
    heap of its own (glibc's arenas) kept the chunks freed there. `train` asks malloc for
    one heap."""
    for label in ("ham", "spam"):
        (tmp_path / "mail" / label).mkdir(parents=True)
    for n in range(6):  # the sample's messages 6 times over: chunks the pool's threads read
        for i, m in enumerate(sample_messages):
            (tmp_path / "mail" / m.label / f"{n}-{i}").write_bytes(b"X-Copy: %d\n" % n + m.data)

    def arenas(asked: str) -> list[str]:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                ARENAS_PROBE,
                str(tmp_path / "mail"),
                str(tmp_path / "m.nbm"),
                asked,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return [line for line in done.stderr.splitlines() if line.startswith("Arena ")]

    assert arenas("yes") == ["Arena 0:"]
    assert len(arenas("no")) > 1  # the pool's threads did make heaps of their own
