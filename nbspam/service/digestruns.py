"""A bucket of digests on a worker's disk (`train --engine dask`): sorted runs of 20-byte
records (a message's 16-byte digest and its label's code) in unnamed temporary files.

A checkpoint's bucket (`keep`) is the runs of the checkpoint before, shared, and one new
run of the digests found since; the two last runs are merged while the older is at most
twice the newer, so a bucket holds at most about log2 of its size runs and each record
is rewritten about as many times: O(n log n) in all, never a whole bucket copied per part.
A lookup (`contains`) reads, for each digest, one block of `FENCE` records of each run
(`os.pread`; not a mapping, whose pages count in resident memory), found by the first
digest of every block kept in memory (16 bytes per `FENCE` messages). A merge reads and
writes `CHUNK` records at a time. The files have no name (`tempfile.TemporaryFile`: made
with O_TMPFILE, or O_EXCL and unlinked at once, mode 0600, in ``TMPDIR``): no other user
can open, pre-create or swap them, and they are gone when their run is let go or the worker
process ends, however it ends.

The bases live in this module's registry, by token, in the worker process; `drop` lets
them go.
"""

from __future__ import annotations

import os
import tempfile
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

RECORD = np.dtype([("d", "S16"), ("c", "<i4")])
"""A record: a digest (its 16 bytes, compared as bytes) and its label's code."""
FENCE = 256
"""Records per block: a lookup reads one block (5 KiB) of each run."""
CHUNK = 1 << 13
"""Records a merge holds of each run at a time (160 KiB): with its scratch, a merge holds
about 1 MB at its peak once the runs are this long (from some 2 * 10^4 messages on). It
was 65,536 (1.25 MiB): the peak was then 0.6, 5.7 and 8.2 MB for runs of 10^4, 10^5 and
10^6 messages, and a worker's peak grew with them up to 10^6."""


class LostCheckpoint(Exception):
    """A checkpoint lost with every worker that kept it."""


class NotHere(LostCheckpoint):
    """A bucket not kept by this worker process; ``holders`` are the workers that keep it
    (`cluster` has the task run again on one of them, if any is left)."""

    def __init__(self, holders: tuple[str, ...]) -> None:
        super().__init__("a checkpoint was lost with the workers that kept it")
        self.holders = holders


class DigestDiskError(Exception):
    """A worker's disk could not take the digests."""


def _disk_error(error: OSError) -> DigestDiskError:
    return DigestDiskError(
        f"a worker cannot keep the digests in a temporary file in {tempfile.gettempdir()}: "
        f"{error.strerror or error}"
    )


def _close(file: Any) -> None:
    try:
        file.close()
    except OSError:  # what it could not write: already said
        pass


class Run:
    """Sorted, distinct records in an unnamed file, and the first digest of each block."""

    def __init__(self) -> None:
        try:
            self.file: Any = tempfile.TemporaryFile(buffering=0, prefix="nbspam-digests-")
        except OSError as error:
            raise _disk_error(error) from None
        weakref.finalize(self, _close, self.file)  # its space given back with the run
        self.count = 0
        self._fences: list[np.ndarray] = []
        self.fences = np.zeros(0, "S16")

    def write(self, records: np.ndarray) -> None:
        first = (-self.count) % FENCE
        self._fences.append(records["d"][first::FENCE].copy())
        try:
            self.file.write(np.ascontiguousarray(records, RECORD).tobytes())
        except OSError as error:
            raise _disk_error(error) from None
        self.count += len(records)

    def done(self) -> Run:
        try:
            self.file.flush()
        except OSError as error:
            raise _disk_error(error) from None
        self.fences = np.concatenate([self.fences, *self._fences])
        self._fences = []
        return self

    def read(self, start: int, stop: int) -> np.ndarray:
        """Records ``start`` to ``stop``."""
        stop = min(stop, self.count)
        if stop <= start:
            return np.zeros(0, RECORD)
        size = (stop - start) * RECORD.itemsize
        data = os.pread(self.file.fileno(), size, start * RECORD.itemsize)
        if len(data) != size:
            raise OSError(f"short read of a run of digests ({len(data)} of {size} bytes)")
        return np.frombuffer(data, RECORD)

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """Whether each digest of ``keys`` (S16) is in the run."""
        found = np.zeros(len(keys), bool)
        if not self.count or not len(keys):
            return found
        block = np.searchsorted(self.fences, keys, "right") - 1
        for b in np.unique(block[block >= 0]).tolist():
            asked = np.flatnonzero(block == b)
            digests = self.read(b * FENCE, (b + 1) * FENCE)["d"]
            at = np.minimum(np.searchsorted(digests, keys[asked]), len(digests) - 1)
            found[asked] = digests[at] == keys[asked]
        return found


def write_run(records: np.ndarray) -> Run:
    """A run of ``records`` (sorted by digest, distinct)."""
    run = Run()
    for start in range(0, len(records), CHUNK):
        run.write(records[start : start + CHUNK])
    return run.done()


def merge(a: Run, b: Run) -> Run:
    """One run of the records of two (distinct digests), `CHUNK` of each at a time."""
    out = Run()
    at = {id(a): 0, id(b): 0}
    held = {id(a): np.zeros(0, RECORD), id(b): np.zeros(0, RECORD)}

    def fill(run: Run) -> np.ndarray:
        if not len(held[id(run)]) and at[id(run)] < run.count:
            held[id(run)] = run.read(at[id(run)], at[id(run)] + CHUNK)
            at[id(run)] += len(held[id(run)])
        return held[id(run)]

    while True:
        x, y = fill(a), fill(b)
        if not len(x) and not len(y):
            return out.done()
        if len(x) and len(y):  # what sorts before both ends held may go out
            limit = min(x["d"][-1], y["d"][-1])
            nx, ny = (
                np.searchsorted(x["d"], limit, "right"),
                np.searchsorted(y["d"], limit, "right"),
            )
        else:
            nx, ny = len(x), len(y)
        both = np.concatenate([x[:nx], y[:ny]])
        out.write(both[np.argsort(both["d"], kind="stable")])
        held[id(a)], held[id(b)] = x[nx:], y[ny:]


@dataclass
class Base:
    """A bucket at a checkpoint: its runs (largest first), labels and size."""

    runs: list[Run] = field(default_factory=list)
    labels: tuple[str, ...] = ()
    size: int = 0

    def contains(self, keys: np.ndarray) -> np.ndarray:
        found = np.zeros(len(keys), bool)
        for run in self.runs:
            found |= run.contains(keys)
        return found

    def compact(self) -> Run:
        """The bucket as one run (its runs merged, once)."""
        while len(self.runs) > 1:
            self.runs[-2:] = [merge(self.runs[-2], self.runs[-1])]
        if not self.runs:
            self.runs.append(Run().done())
        return self.runs[0]


BASES: dict[str, Base] = {}
"""In a worker: the buckets of the checkpoints it keeps, by token."""


def base(token: str, holders: tuple[str, ...] = ()) -> Base:
    """The bucket kept here under ``token`` by the workers ``holders`` (`NotHere`: not in
    this process)."""
    try:
        return BASES[token]
    except KeyError:
        raise NotHere(holders) from None


def keep(token: str, before: str | None, fresh: list[np.ndarray], labels: tuple, size: int) -> None:
    """Keep under ``token`` the bucket of checkpoint ``before`` (kept here; None: empty)
    with the records ``fresh`` (each sorted) added as a run, runs merged as the module says."""
    if token in BASES:  # a task run again
        return
    runs = list(base(before).runs) if before is not None else []
    if fresh:
        records = np.concatenate(fresh)
        runs.append(write_run(records[np.argsort(records["d"], kind="stable")]))
        del records
    while len(runs) > 1 and runs[-2].count <= 2 * runs[-1].count:
        runs[-2:] = [merge(runs[-2], runs[-1])]
    BASES[token] = Base(runs, labels, size)


def drop(tokens: list[str]) -> None:
    """Let the buckets kept under ``tokens`` go (their files with the last of them)."""
    for token in tokens:
        BASES.pop(token, None)
