"""The digests of `train --engine dask` (`tally`): buckets folded in input order hold 20
bytes a distinct message, and come back to the calling process as arrays."""

from __future__ import annotations

import numpy as np

from nbspam.mail.headers import message_digest
from nbspam.service import tally


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


def folded(parts: list[tally.PartCounts], buckets: int) -> list[tally.Bucket]:
    states: list = [None] * buckets
    for p in parts:
        states = [tally.fold(states[b], p, b, buckets) for b in range(buckets)]
    return states


def test_buckets_hold_20_bytes_a_distinct_message_and_find_the_copies():
    texts = [f"Subject: {i}\n\nmessage {i}\n" for i in range(200)]
    first = part(0, texts[:120], ["spam" if i % 3 == 0 else "ham" for i in range(120)])
    again = part(1, texts[100:], ["ham"] * 100)  # 20 copies of the first part's
    states = folded([first, again], 2)
    assert sum(len(s.digests) for s in states) == 200
    assert sum(s.digests.nbytes + s.codes.nbytes for s in states) == 200 * 20
    assert sorted(np.concatenate([s.losers for s in states]).tolist()) == [
        1 << tally.POSITION_BITS | i for i in range(20)
    ]


def test_a_bucket_is_fetched_a_slice_at_a_time_with_its_labels():
    digests = np.arange(5 * 16, dtype=np.uint8).reshape(5, 16)
    state = tally.Bucket(digests, np.array([1, 0, 1, 1, 0], np.int32), ("ham", "spam"))
    assert tally.bucket_labels(state) == (5, ("ham", "spam"))
    got, codes = tally.bucket_slice(state, 2, 4)
    assert np.array_equal(got, digests[2:4]) and codes.tolist() == [1, 1]
    assert got.base is None  # a copy: the slice sent is not the whole bucket
    got, codes = tally.bucket_slice(state, 4, 8)
    assert np.array_equal(got, digests[4:]) and codes.tolist() == [0]
