"""The digests of `train --engine dask` (`tally`): buckets folded in input order find the
copies of earlier parts' messages, hold 20 bytes a distinct message on the disk of the
workers that keep their checkpoint, and come back to the calling process in order."""

from __future__ import annotations

import os
import tracemalloc

import numpy as np

from nbspam.mail.headers import message_digest
from nbspam.service import digestruns, tally


def traced_peak(call, *args):
    """``call(*args)`` and the peak of the memory tracemalloc traced while it ran."""
    tracemalloc.start()
    try:
        return call(*args), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def part(number: int, texts: list[str], labels: list[str]) -> tally.PartCounts:
    digests = [message_digest(t.encode()) for t in texts]
    return tally.PartCounts(
        np.frombuffer(b"".join(digests), np.uint8).reshape(-1, 16),
        np.array([number << tally.POSITION_BITS | i for i in range(len(texts))], np.int64),
        np.full(len(texts), np.nan),
        labels,
        [],
        len(texts),
        [],
    )


def checkpoint(state: tally.Bucket, token: str) -> tally.Bucket:
    """The bucket kept on disk under ``token``, as `cluster._keep` and `_kept` do."""
    digestruns.keep(token, state.base, state.fresh, state.labels, state.size)
    return tally.Bucket(token, [], state.labels, state.size)


def test_buckets_hold_20_bytes_a_distinct_message_on_disk_and_find_the_copies():
    texts = [f"Subject: {i}\n\nmessage {i}\n" for i in range(200)]
    first = part(0, texts[:120], ["spam" if i % 3 == 0 else "ham" for i in range(120)])
    again = part(1, texts[100:], ["ham"] * 100)  # 20 copies of the first part's
    states = [tally.fold(None, first, b, 2) for b in range(2)]
    states = [checkpoint(s, f"t{b}") for b, s in enumerate(states)]  # on disk from here
    try:
        states = [tally.fold(s, again, b, 2) for b, s in enumerate(states)]
        assert sorted(np.concatenate([s.losers for s in states]).tolist()) == [
            1 << tally.POSITION_BITS | i for i in range(20)
        ]
        assert sum(len(r) for s in states for r in s.fresh) == 80  # in memory: the new ones
        states = [checkpoint(s, f"u{b}") for b, s in enumerate(states)]
        runs = [r for b in range(2) for r in digestruns.BASES[f"u{b}"].runs]
        assert sum(os.fstat(r.file.fileno()).st_size for r in runs) == 200 * 20
        assert sum(s.size for s in states) == 200
    finally:
        digestruns.drop(["t0", "t1", "u0", "u1"])


def test_a_bucket_is_fetched_a_slice_at_a_time_in_order_with_its_labels():
    texts = [f"message {i}" for i in range(50)]
    labels = ["spam" if i % 4 == 0 else "ham" for i in range(50)]
    state = None
    try:
        for n in range(5):  # five checkpoints: runs merged as they go
            state = tally.fold(state, part(n, texts[n * 10 : n * 10 + 10], labels[n * 10 :]), 0, 1)
            state = checkpoint(state, f"c{n}")
        assert tally.bucket_labels(state) == (50, ("spam", "ham"))  # in order of arrival
        expected = sorted(
            (message_digest(t.encode()), "spam" if i % 4 == 0 else "ham")
            for i, t in enumerate(texts)
        )
        got = [tally.bucket_slice(state, start, start + 8) for start in range(0, 56, 8)]
        digests = np.concatenate([g[0] for g in got])
        codes = np.concatenate([g[1] for g in got])
        assert [bytes(d) for d in digests] == [d for d, _ in expected]
        assert [state.labels[c] for c in codes.tolist()] == [x for _, x in expected]
    finally:
        digestruns.drop([f"c{n}" for n in range(5)])


def sample_of(seed: int, rows: int, vocab: tally.Vocab) -> tally.Sample:
    rng, width = np.random.default_rng(seed), len(vocab)
    sizes = rng.integers(50, 150, rows)
    indptr = np.zeros(rows + 1, np.int64)
    np.cumsum(sizes, out=indptr[1:])
    indices = np.concatenate([np.sort(rng.choice(width, n, replace=False)) for n in sizes])
    digests = rng.integers(0, 256, (rows, 16), dtype=np.uint8)
    return tally.Sample(
        rng.integers(0, 1 << 63, rows, dtype=np.uint64),
        digests,
        np.sort(rng.choice(1 << 40, rows, replace=False)).astype(np.int64),
        rng.random(rows),
        ["spam" if x else "ham" for x in rng.integers(0, 2, rows).tolist()],
        vocab,
        indptr,
        indices.astype(np.int64),
        rng.integers(1, 5, indptr[-1]).astype(np.int32),
    )


def test_two_full_samples_merge_into_the_rows_of_smallest_key_without_joining_them(
    monkeypatch,
):
    """A merge of two samples keeps the ``limit`` rows of smallest key, in order of
    position, each row's terms as they were; it gathers the rows it keeps from each side,
    a slice of rows at a time, into 32-bit columns (before, both samples' rows were joined,
    then the kept ones copied: 80 MB for two samples of 10,000 rows of mail, the peak of a
    worker; then the rows kept gathered at once: 28 bytes an entry kept, the result's 64-bit
    columns and the scratch of its gathering, some 60 MB for 10,000 rows of mail)."""
    monkeypatch.setattr(tally, "GATHER_ROWS", 256, raising=False)

    words = tally.Vocab.of([f"w{i}" for i in range(3000)])[0]
    a = sample_of(1, 4000, words.take(np.arange(0, 3000, 2)))
    b = sample_of(2, 4000, words.take(np.arange(1500, 3000)))
    a_terms, b_terms = (s.vocab.terms()[0] for s in (a, b))
    rows = {}  # position -> (key, label, terms and counts)
    for s, terms in ((a, a_terms), (b, b_terms)):
        for i in range(len(s.keys)):
            cells = range(s.indptr[i], s.indptr[i + 1])
            row = sorted((terms[s.indices[j]], int(s.data[j])) for j in cells)
            rows[int(s.positions[i])] = (int(s.keys[i]), s.labels[i], row)
    limit = 4000
    merged, peak = traced_peak(tally._merge_samples, a, b, limit)
    expected = sorted(sorted(rows, key=lambda p: rows[p][0])[:limit])
    assert merged.positions.tolist() == expected
    assert merged.labels == [rows[p][1] for p in expected]
    terms = merged.vocab.terms()[0]
    for i, p in enumerate(expected):
        cells = range(merged.indptr[i], merged.indptr[i + 1])
        assert sorted((terms[merged.indices[j]], int(merged.data[j])) for j in cells) == rows[p][2]
    entries = len(merged.indices)
    assert merged.indices.nbytes + merged.data.nbytes == 8 * entries
    assert peak < 16 * entries, (peak, entries)  # 28 bytes an entry before, 3.9 * 12 first


def test_a_part_joins_the_sample_so_far_and_a_part_that_cannot_win_is_left_out():
    """`add_sample`: parts added one at a time give the rows of smallest key of them all,
    as one merge of all does; once the sample is full, a part whose keys are all larger
    gives the sample back as it is, without a copy."""
    words = tally.Vocab.of([f"w{i}" for i in range(400)])[0]
    parts = [sample_of(10 + n, 60, words.take(np.arange(n * 50, n * 50 + 200))) for n in range(5)]
    for n, rows in enumerate(parts):  # parts in input order, keys of every size
        rows.positions = (n << tally.POSITION_BITS) + np.arange(len(rows.keys), dtype=np.int64)
    limit = 50
    state = None
    for rows in parts:
        state = tally.add_sample(state, as_tally(rows), limit)
    every = parts[0]
    for rows in parts[1:]:
        every = tally._merge_samples(every, rows, 10**6)
    expected = tally._merge_samples(every, tally.Sample(), limit)
    assert_same_sample(state.sample(), expected)
    losing = sample_of(99, 30, words)
    losing.keys[:] = state.keys.max() + 1
    assert tally.add_sample(state, as_tally(losing), limit) is state
    assert_same_sample(state.sample(), expected)


def assert_same_sample(got: tally.Sample, expected: tally.Sample) -> None:
    assert got.positions.tolist() == expected.positions.tolist()
    assert got.keys.tolist() == expected.keys.tolist()
    assert got.digests.tolist() == expected.digests.tolist()
    assert np.array_equal(got.times, expected.times)
    assert got.labels == expected.labels
    assert got.vocab.terms()[0] == expected.vocab.terms()[0]
    assert got.indptr.tolist() == expected.indptr.tolist()
    assert got.indices.tolist() == expected.indices.tolist()
    assert got.data.tolist() == expected.data.tolist()


def as_tally(rows: tally.Sample) -> tally.Tally:
    none = np.zeros(0, np.int64)
    return tally.Tally((), tally.Vocab(), none, none, none, none, rows)


def test_the_sample_takes_in_a_part_in_place_at_the_cost_of_the_part(monkeypatch):
    """`add_sample` changes the sample in place: taking a part's candidates into a full
    sample holds memory of the order of the candidates' (and 40 bytes a row of keys), not a
    new sample beside the old one (before, each part made a whole new sample, 14 MB for
    10,000 rows of mail, on top of the one it replaced); parts whose rows replace others
    over and over (holes compacted in place, terms renumbered) give the rows of smallest
    key of them all, as one merge of all does; a part taken in twice (a task run again)
    changes nothing."""
    monkeypatch.setattr(tally, "GATHER_ROWS", 64, raising=False)  # scratch: 64 rows
    monkeypatch.setattr(tally, "RENUMBER", 4096, raising=False)
    words = tally.Vocab.of([f"w{i:04d}" for i in range(3000)])[0]
    limit = 2000
    parts = [
        sample_of(100 + n, 300, words.take(np.arange(n * 37 % 2000, n * 37 % 2000 + 900)))
        for n in range(40)
    ]
    for n, rows in enumerate(parts):
        rows.positions = (n << tally.POSITION_BITS) + np.arange(300, dtype=np.int64)
    state = None
    peaks = []
    for rows in parts:
        full = state is not None and len(state) == limit
        candidates = as_tally(rows)
        state, peak = traced_peak(tally.add_sample, state, candidates, limit)
        if full:
            peaks.append((peak, rows.indices.nbytes + rows.data.nbytes))
    entries = len(state.sample().indices)  # some 200,000: 1.6 MB a copy
    assert len(peaks) == 33
    for peak, candidates in peaks:  # twice the candidates' bytes (some 360 KB), 40 a row
        assert peak < 2 * candidates + 40 * limit + (1 << 16), (peak, candidates, entries)
    every = parts[0]
    for rows in parts[1:]:
        every = tally._merge_samples(every, rows, 10**6)
    expected = tally._merge_samples(every, tally.Sample(), limit)
    assert_same_sample(state.sample(), expected)
    for rows in parts[5:9]:  # again: nothing changes
        assert tally.add_sample(state, as_tally(rows), limit) is state
    assert_same_sample(state.sample(), expected)


def test_a_checkpoints_sample_on_disk_is_the_sample_held_or_the_same_made_again():
    """A checkpoint keeps the sample in an unnamed file (`tally.StoredSample`), not a
    second copy in memory: while the worker holds the sample, it is given back itself;
    once let go, it is read back from the file (a term of more than `tally.SHORT` bytes
    too), and takes in the next parts as the one held did."""
    import gc

    words = tally.Vocab.of([f"w{i:04d}" for i in range(3000)] + ["x" * 80])[0]
    parts = []
    for n in range(20):
        columns = np.array([*range(n * 37 % 2000, n * 37 % 2000 + 900), 3000])
        rows = sample_of(200 + n, 300, words.take(columns))
        rows.positions = (n << tally.POSITION_BITS) + np.arange(300, dtype=np.int64)
        parts.append(rows)
    state = None
    for rows in parts[:10]:
        state = tally.add_sample(state, as_tally(rows), 2000)
    stored = tally.StoredSample(state)
    assert stored.get() is state
    assert os.fstat(stored.file.fileno()).st_size >= 8 * state.end  # the entries on disk
    expected = state.sample()
    for rows in parts[10:]:
        state = tally.add_sample(state, as_tally(rows), 2000)
    later = state.sample()
    del state
    gc.collect()
    again = stored.get()
    assert_same_sample(again.sample(), expected)
    for rows in parts[10:]:
        again = tally.add_sample(again, as_tally(rows), 2000)
    assert_same_sample(again.sample(), later)
