"""A bucket of digests on a worker's disk (`digestruns`): sorted runs in unnamed files of
the worker alone, merged so that the work is O(n log n), looked up a block at a time."""

from __future__ import annotations

import gc
import hashlib
import os
import stat
import weakref

import numpy as np
import pytest

from nbspam.service import digestruns


def records(numbers) -> np.ndarray:
    out = np.empty(len(numbers), digestruns.RECORD)
    out["d"] = [hashlib.blake2b(b"%d" % n, digest_size=16).digest() for n in numbers]
    out["c"] = [n % 3 for n in numbers]
    return out[np.argsort(out["d"], kind="stable")]


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(digestruns, "FENCE", 4)
    monkeypatch.setattr(digestruns, "CHUNK", 8)


def test_lookups_find_exactly_the_digests_of_the_runs(small_blocks):
    run = digestruns.write_run(records(range(0, 300, 2)))
    asked = records(range(300))
    found = run.contains(asked["d"])
    assert found.sum() == 150
    assert set(asked["c"][found].tolist()) <= {0, 1, 2}
    expected = {bytes(d) for d in records(range(0, 300, 2))["d"]}
    assert [bytes(d) in expected for d in asked["d"]] == found.tolist()


def test_a_merge_keeps_every_record_in_order(small_blocks):
    a, b = records(range(0, 100, 3)), records([n for n in range(100) if n % 3])
    merged = digestruns.merge(digestruns.write_run(a), digestruns.write_run(b))
    both = np.concatenate([a, b])
    assert merged.read(0, 1000).tolist() == both[np.argsort(both["d"])].tolist()
    assert merged.contains(both["d"]).all()


def test_runs_are_merged_so_that_each_record_is_written_log_n_times(small_blocks, monkeypatch):
    """A run per checkpoint, the two last merged while the older is at most twice the
    newer: few runs, and each record rewritten about log2(checkpoints) times, where a
    bucket copied whole at each checkpoint writes n^2 / 2 records."""
    written = []
    real = digestruns.Run.write
    monkeypatch.setattr(
        digestruns.Run, "write", lambda self, r: written.append(len(r)) or real(self, r)
    )
    before, checkpoints, each = None, 64, 10
    try:
        for n in range(checkpoints):
            fresh = [records(range(n * each, n * each + each))]
            digestruns.keep(f"k{n}", before, fresh, ("ham",), (n + 1) * each)
            before = f"k{n}"
        runs = digestruns.BASES[before].runs
        counts = [r.count for r in runs]
        assert sum(counts) == checkpoints * each
        assert all(x > 2 * y for x, y in zip(counts, counts[1:])) and len(runs) <= 7
        assert sum(written) <= checkpoints * each * 8  # log2(64) + 2; whole copies: 32x
        every = records(range(checkpoints * each))
        assert digestruns.BASES[before].contains(every["d"]).all()
    finally:
        digestruns.drop([f"k{n}" for n in range(checkpoints)])


def test_the_files_have_no_name_are_the_workers_alone_and_go_with_their_bucket():
    digestruns.keep("private", None, [records(range(100))], ("ham",), 100)
    run = digestruns.BASES["private"].runs[0]
    info = os.fstat(run.file.fileno())
    assert info.st_nlink == 0  # no name another user could open, pre-create or swap
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_size == 100 * 20
    file, gone = run.file, weakref.ref(run)
    del run
    digestruns.drop(["private"])
    gc.collect()
    assert gone() is None and file.closed  # its disk space given back


def test_a_lost_checkpoint_is_said():
    with pytest.raises(digestruns.LostCheckpoint):
        digestruns.keep("next", "never-kept", [], (), 0)


def test_a_merge_holds_a_bounded_slice_of_its_runs_whatever_their_length():
    """A merge holds `CHUNK` records of each run at a time and its scratch: about 1 MB at
    its peak for runs of 200,000 and 100,000 digests (8 MB before, with chunks of 65,536
    records: a worker's peak grew with the runs up to 10^6 messages)."""
    import tracemalloc

    rng = np.random.default_rng(0)

    def run(n: int) -> digestruns.Run:
        made = np.empty(n, digestruns.RECORD)
        made["d"] = np.sort(np.frombuffer(rng.bytes(16 * n), "S16"))
        made["c"] = 1
        return digestruns.write_run(made)

    a, b = run(200_000), run(100_000)
    tracemalloc.start()
    try:
        merged = digestruns.merge(a, b)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert merged.count == 300_000
    assert merged.read(0, 300_000)["d"].tolist() == sorted(
        a.read(0, 200_000)["d"].tolist() + b.read(0, 100_000)["d"].tolist()
    )
    assert peak < 1.5 * 2**20, peak
