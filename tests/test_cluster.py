"""train --engine dask gives the model local training gives: terms, counts, digests, auto's
choice, cutoffs and calibration; on a cluster in this process, on separate scheduler and
worker processes, and when a worker is killed mid-run."""

from __future__ import annotations

import dataclasses
import os
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nbspam.core.settings import build_settings
from nbspam.fit.training import decide
from nbspam.fit.training import train as train_locally
from nbspam.mail.message import Message
from nbspam.models.model import SampledRows, fit_counted
from nbspam.store.modelfile import load_model
from nbspam.text.counting import LabelledChunks
from tests.helpers import ENV, SAMPLE, assert_same_model, cli_run, missing, nbspam_process

SETTINGS = build_settings({})


def assert_same_trained_model(a, b) -> None:
    """The same counts and digests, and the same choice and decision rule."""
    assert_same_model(a, b)
    assert (a.cutoffs, a.calibration) == (b.cutoffs, b.calibration)
    assert a.info.get("auto") == b.info.get("auto")
    assert a.info["duplicates"] == b.info["duplicates"]


def test_without_dask_the_engine_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    result = cli_run("train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--engine", "dask")
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: --engine dask needs Dask: pip install 'dask[distributed]'"
        " (pipx inject nbspam 'dask[distributed]' under pipx)\n",
    )
    assert not (tmp_path / "m.nbm").exists()


def test_scheduler_needs_the_dask_engine(tmp_path):
    result = cli_run("train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--scheduler", "x:1")
    assert result.exit_code == 2
    assert "--scheduler is for --engine dask" in result.stderr


@pytest.mark.parametrize(
    "address", ["foo", "inproc://x", "ucx://h:1", "tls://h", "tls://h:0", "tls://h:1/x", "a\nb"]
)
def test_a_scheduler_address_other_than_tls_host_port_is_one_line(address, tmp_path):
    result = cli_run(
        *("train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--engine", "dask"),
        *("--scheduler", address),
    )
    assert (result.exit_code, result.stderr) == (
        2,
        f"Error: --scheduler must be tls://HOST:PORT, not {address!r}\n",
    )


def test_tls_files_are_for_a_scheduler(tmp_path):
    key = tmp_path / "key.pem"
    key.write_text("")
    result = cli_run("train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--tls-key", key)
    assert result.exit_code == 2
    assert "--tls-ca-file, --tls-cert and --tls-key are for --scheduler" in result.stderr


try:
    import distributed
except ImportError:
    missing("Dask is not installed: pip install 'dask[distributed]' (the test extra has it)")


def test_a_tls_scheduler_needs_a_ca_and_a_certificate(tmp_path):
    import dask

    unset = {"distributed.comm.tls.ca-file": None, "distributed.comm.tls.client.cert": None}
    with dask.config.set(unset):  # none in the Dask settings either
        result = cli_run(
            *("train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--engine", "dask"),
            *("--scheduler", "tls://127.0.0.1:8786"),
        )
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --scheduler needs --tls-ca-file (the CA that signed")
    assert result.stderr.count("\n") == 1


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, processes=False, threads_per_worker=1, dashboard_address="127.0.0.1:0"
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def with_duplicates(messages):
    """The messages with some repeated, one of them under the other label (the first
    occurrence wins), in an order that puts repeats in other partitions."""
    spam = next(m for m in messages if m.label == "spam")
    moved = spam.replace(id="again", label="ham")
    return [*messages[:10], moved, *messages, *messages[5:9]]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"event_model": "multinomial", "calibrate": False},
        {"event_model": "bernoulli", "cutoffs": "-3,4"},
        {"event_model": "fisher"},
    ],
    ids=["auto", "multinomial-no-calibrate", "bernoulli-cutoffs", "fisher"],
)
def test_dask_training_gives_the_model_of_local_training(
    client, sample_messages, monkeypatch, options
):
    from nbspam.service import cluster

    monkeypatch.setattr(cluster, "CHUNK", 7)  # many partitions, many additions
    settings = build_settings(options)
    messages = with_duplicates(sample_messages)
    local = train_locally(messages, settings)
    on_dask = cluster.train(messages, settings, client)
    assert_same_trained_model(on_dask, local)
    assert local.info["duplicates"] == len(messages) - len(sample_messages)


def sampled(rows: SampledRows, messages, limit: int) -> SampledRows:
    """The rows of all the messages (``rows``, kept whole) cut to the sample's rule: of
    the distinct messages, the ``limit`` with the smallest key (ties: by digest), in input
    order."""
    from nbspam.mail.headers import message_digest
    from nbspam.models.model import sample_key

    firsts = {}
    for message in messages:
        firsts.setdefault(message_digest(message.data), len(firsts))
    chosen = sorted(firsts, key=lambda d: (sample_key(d), d))[:limit]
    keep = {firsts[d] for d in chosen}
    cut = dataclasses.replace(rows, chunks=[])
    for X, labels, numbers in rows.chunks:
        mask = np.array([int(n) in keep for n in numbers], bool)
        if mask.any():
            cut.chunks.append((X[mask], [x for x, m in zip(labels, mask) if m], numbers[mask]))
    return cut


def test_a_cluster_whose_workers_the_client_does_not_know_yet_trains_all_the_same(
    client, sample_messages, monkeypatch
):
    """The client's view of the workers is refreshed from time to time: one taken before
    the workers joined (a cluster starting, a loaded scheduler) names none, and the buckets
    of digests are then kept wherever Dask runs them."""
    from nbspam.service import cluster

    info, calls = client.scheduler_info, []

    def stale(**kw):  # the first view of the run names no worker, the later ones do
        calls.append(1)
        return {**info(**kw), "workers": {}} if len(calls) == 1 else info(**kw)

    monkeypatch.setattr(client, "scheduler_info", stale)
    on_dask = cluster.train(sample_messages, SETTINGS, client)
    assert_same_trained_model(on_dask, train_locally(sample_messages, SETTINGS))
    assert len(calls) > 1  # the stale view was the one the buckets were placed by


@pytest.mark.parametrize("limit", [5, 16, 17, 31])
def test_the_cross_validation_sample_is_drawn_by_its_rule(
    client, sample_messages, monkeypatch, limit
):
    """With fewer sample rows than messages, the rows kept are the ``limit`` distinct
    messages of smallest `tally.sample_key`, in input order, whatever the partitions: the
    model is local training's with that sample."""
    from nbspam.mail.headers import message_digest, message_time
    from nbspam.service import cluster

    messages = with_duplicates(sample_messages)
    every = SampledRows(len(messages))
    fit_counted(LabelledChunks(messages, SETTINGS.tokenizer), SETTINGS, rows=every)
    expected = sampled(every, messages, limit)
    from nbspam.core.parallel import chunks

    # local training draws it so too, chunk by chunk
    monkeypatch.setattr("nbspam.text.counting.chunks", lambda items: chunks(items, 7))
    rows = SampledRows(limit)
    fitted = fit_counted(LabelledChunks(messages, SETTINGS.tokenizer), SETTINGS, rows=rows)
    assert rows.labels == expected.labels and rows.numbers().tolist() == expected.numbers().tolist()
    firsts = {}  # the dates of the distinct messages, in the order counted
    for message in messages:
        if message_digest(message.data) not in firsts:
            moment = message_time(message.data, SETTINGS.tokenizer.mail)
            firsts[message_digest(message.data)] = np.nan if moment is None else moment
    times = [list(firsts.values())[n] for n in rows.numbers().tolist()]
    assert not np.isnan(times).all()  # the drift is measured on them
    local = decide(fitted, rows, SETTINGS, times)
    captured = {}
    real = cluster.decide

    def spy(model, sample, settings, times=None):
        captured["rows"], captured["times"] = sample, times
        return real(model, sample, settings, times)

    monkeypatch.setattr(cluster, "decide", spy)
    for chunk in (6, 11):  # other partitions, the same sample
        monkeypatch.setattr(cluster, "CHUNK", chunk)
        on_dask = cluster.train(messages, SETTINGS, client, limit=limit)
        assert_same_trained_model(on_dask, local)
        mine = captured["rows"]
        assert mine.labels == rows.labels and len(mine.labels) == limit
        assert np.array_equal(captured["times"], times, equal_nan=True)  # the rows' dates
        (X, terms), (Y, other) = mine.matrix(), rows.matrix()
        assert terms == other
        assert (X != Y).nnz == 0 and X.dtype == Y.dtype
        assert X.indices.tolist() == Y.indices.tolist()  # each row in the same order


_SPIED: dict[str, Any] = {}  # the real functions, and what the spies saw in the workers


def _merge_spy(a, b, limit):  # at module level: a task's function travels by its name
    made = _SPIED["real merge"](a, b, limit)
    _SPIED["merge"].append(len(made.sample.keys))
    return made


def _add_sample_spy(state, part, limit):
    made = _SPIED["real add_sample"](state, part, limit)
    _SPIED["add_sample"].append(len(made))
    return made


def test_the_sums_carry_no_sample_rows_the_sample_is_one_chain(
    client, sample_messages, monkeypatch
):
    """The cross-validation sample is kept apart from the sums, one sample added to part
    after part (`tally.add_sample`): a partial sum of the tree carries no sample rows (before,
    each carried its own full sample, some 21 MB for 10,000 rows of mail, and a worker held
    up to four of them at its worst moment, a peak that rose with the length of the run);
    the model is local training's."""
    from nbspam.service import cluster, tally

    monkeypatch.setattr(cluster, "CHUNK", 7)
    monkeypatch.setattr(cluster, "CHECKPOINT_PARTS", 4)
    _SPIED.update({"real merge": tally.merge, "real add_sample": getattr(tally, "add_sample", 0)})
    merged, added = _SPIED["merge"], _SPIED["add_sample"] = [], []
    monkeypatch.setattr(tally, "merge", _merge_spy)
    monkeypatch.setattr(tally, "add_sample", _add_sample_spy, raising=False)
    messages = with_duplicates(sample_messages)
    on_dask = cluster.train(messages, SETTINGS, client)
    assert_same_trained_model(on_dask, train_locally(messages, SETTINGS))
    parts = -(-len(messages) // 7)
    assert len(merged) == parts - 1 and set(merged) == {0}
    assert len(added) == parts and added[-1] == len(sample_messages)  # the distinct ones


def _slow_add_sample(state, part, limit):
    time.sleep(0.15)  # a chain slower than the parts: their tallies would queue behind it
    return _SPIED["real add_sample"](state, part, limit)


def test_the_parts_in_flight_wait_for_the_sample_chain(client, sample_messages, monkeypatch):
    """The window of parts in flight counts the sample chain's merges not yet done: with a
    chain slower than the parts, no more than the window's merges wait (each holding its
    part's tally on a worker, some 2.5 MB of mail; before, the window counted the parts read
    alone, and tallies queued behind the chain up to the next checkpoint, here all 32); the
    sample is taken in place, one sample a run whatever its length, and the model is local
    training's."""
    from nbspam.service import cluster, tally

    monkeypatch.setattr(cluster, "CHUNK", 2)  # 32 parts, no checkpoint before the end
    monkeypatch.setattr(cluster, "CHECKPOINT_PARTS", 1000)
    _SPIED["real add_sample"] = tally.add_sample
    monkeypatch.setattr(tally, "add_sample", _slow_add_sample)
    scheduler = client.cluster.scheduler
    waiting = []  # merges of the chain not done, as each part's report comes

    def progress(read, size):
        waiting.append(
            sum(
                1
                for key, task in list(scheduler.tasks.items())
                if str(key).startswith("nbspam-sample-")
                and task.state not in ("memory", "released")
            )
        )

    messages = with_duplicates(sample_messages)
    on_dask = cluster.train(messages, SETTINGS, client, progress=progress)
    assert_same_trained_model(on_dask, train_locally(messages, SETTINGS))
    assert len(waiting) == 32
    window = cluster.WINDOW_PER_WORKER * 2
    assert max(waiting) <= window, waiting


def test_a_checkpoint_keeps_the_sample_on_disk_not_a_second_copy(
    client, sample_messages, monkeypatch
):
    """A checkpoint's sample is kept on the disk of the workers that keep it
    (`tally.StoredSample`), and the chain goes on from the sample in memory: no worker holds
    a checkpoint's copy of the sample beside the chain's (before, each of two workers held
    one from the first checkpoint on, 14 MB for 10,000 rows of mail); the model is local
    training's."""
    from nbspam.service import cluster

    monkeypatch.setattr(cluster, "CHUNK", 2)
    monkeypatch.setattr(cluster, "CHECKPOINT_PARTS", 4)
    kept = []  # what the workers (in this process) keep of the checkpoints

    def progress(read, size):
        kept.extend(type(value).__name__ for value in list(cluster._KEPT.values()))

    messages = with_duplicates(sample_messages)
    on_dask = cluster.train(messages, SETTINGS, client, progress=progress)
    assert_same_trained_model(on_dask, train_locally(messages, SETTINGS))
    assert "StoredSample" in kept and set(kept) <= {"StoredSample", "Tally"}, set(kept)


def test_the_scheduler_forgets_the_parts_already_added_up(client, sample_messages, monkeypatch):
    """At each checkpoint the sum so far and the buckets of digests are fetched and sent
    back as tasks of their own: the scheduler then holds the tasks of the parts since the
    last checkpoint, not of every part (which it did before, to make any result again), so
    the number of its tasks does not grow with the parts; the model is local training's."""
    from nbspam.service import cluster

    monkeypatch.setattr(cluster, "CHUNK", 2)  # 32 parts
    monkeypatch.setattr(cluster, "CHECKPOINT_PARTS", 4, raising=False)
    scheduler = client.cluster.scheduler
    messages = with_duplicates(sample_messages)
    held = []  # the tasks the scheduler holds as each part is done

    def progress(read, size):
        held.append(len(scheduler.tasks))

    on_dask = cluster.train(messages, SETTINGS, client, progress=progress)
    assert_same_trained_model(on_dask, train_locally(messages, SETTINGS))
    assert len(held) == 32
    assert max(held) <= 80, held  # 8 parts at most (4 in flight, 4 since the checkpoint)


def test_the_scheduler_holds_no_digests(client, sample_messages, monkeypatch):
    """A checkpoint's sum and buckets of digests stay on the workers: no task the scheduler
    holds carries a message's digest, as the whole run goes (before, each checkpoint was
    sent back inside its task, which the scheduler kept)."""
    import cloudpickle

    from nbspam.mail.headers import message_digest
    from nbspam.service import cluster

    monkeypatch.setattr(cluster, "CHUNK", 2)
    monkeypatch.setattr(cluster, "CHECKPOINT_PARTS", 4)
    scheduler = client.cluster.scheduler
    messages = with_duplicates(sample_messages)
    digests = {message_digest(m.data) for m in messages}
    found = []

    def progress(read, size):
        for task in list(scheduler.tasks.values()):
            spec = cloudpickle.dumps(task.run_spec)
            found.extend(task.key for d in digests if d in spec)

    on_dask = cluster.train(messages, SETTINGS, client, progress=progress)
    assert_same_trained_model(on_dask, train_locally(messages, SETTINGS))
    assert found == []


def test_a_workers_buckets_of_digests_live_on_its_disk(client, sample_messages, monkeypatch):
    """Each bucket of digests is kept on the disk of the workers that keep its checkpoint
    (unnamed files of 20 bytes a digest): the workers' memory holds the digests of the
    parts since the last checkpoint alone (before, each bucket whole, copied at every
    part), the files are there while the run goes and gone after it."""
    import gc
    import importlib
    import weakref

    from nbspam.service import cluster, tally

    try:
        digestruns = importlib.import_module("nbspam.service.digestruns")
    except ImportError:  # before buckets were kept on disk
        digestruns = None
    monkeypatch.setattr(cluster, "CHUNK", 1)  # a part a message
    monkeypatch.setattr(cluster, "CHECKPOINT_PARTS", 2)
    workers = list(client.cluster.workers.values())
    messages = with_duplicates(sample_messages)
    in_memory, on_disk, runs = [], [], []

    def progress(read, size):
        held = 0
        for worker in workers:
            for value in list(worker.data.values()):
                if isinstance(value, tally.Bucket):
                    fresh = sum(len(r) for r in getattr(value, "fresh", ()))
                    held = max(held, len(getattr(value, "digests", ())) + fresh)
        in_memory.append(held)
        kept = list(getattr(digestruns, "BASES", {}).values())
        runs.extend(weakref.ref(r) for base in kept for r in base.runs)
        on_disk.append(sum(os.fstat(r.file.fileno()).st_size for b in kept for r in b.runs))

    on_dask = cluster.train(messages, SETTINGS, client, progress=progress)
    local = train_locally(messages, SETTINGS)
    assert_same_trained_model(on_dask, local)
    distinct = len(local.seen_digests)
    assert max(in_memory) <= 6 < distinct // 4  # 2 parts since the checkpoint, 4 in flight
    # 20 bytes a digest (the two workers share one process and its copy here)
    assert 20 * (distinct - 6) <= max(on_disk) <= 20 * distinct
    gc.collect()
    assert digestruns.BASES == {} and not any(ref() for ref in runs)


def test_a_task_moved_off_the_workers_that_keep_its_bucket_goes_back_to_them(monkeypatch):
    """A bucket of digests is on the disks of the workers that keep it: a fold or a slice
    that Dask ran elsewhere (work stealing moves a task to an idle worker) is given back to
    the scheduler, which runs it on one of them (Dask's `Reschedule`); with none of them
    left, the checkpoint is lost (one line, as before)."""
    from nbspam.mail.headers import message_digest
    from nbspam.service import cluster, digestruns, tally

    digest = np.frombuffer(message_digest(b"Subject: x\n\nx\n"), np.uint8).reshape(1, 16)
    part = tally.PartCounts(digest, np.zeros(1, np.int64), np.full(1, np.nan), ["ham"], [], 1, [])
    state = tally.Bucket("kept-elsewhere", holders=("tls://10.0.0.1:1", "tls://10.0.0.2:2"))
    monkeypatch.setattr(cluster, "_workers", lambda: {"tls://10.0.0.2:2", "tls://10.0.0.3:3"})
    with pytest.raises(distributed.Reschedule):
        cluster._here(tally.fold, state, part, 0, 1)
    with pytest.raises(distributed.Reschedule):
        cluster._here(tally.bucket_slice, state, 0, 10)
    with pytest.raises(distributed.Reschedule):
        cluster._kept("kept-elsewhere", state.holders)
    monkeypatch.setattr(cluster, "_workers", lambda: {"tls://10.0.0.3:3"})
    with pytest.raises(digestruns.LostCheckpoint):
        cluster._here(tally.fold, state, part, 0, 1)


def test_a_checkpoint_that_fails_half_way_leaves_nothing_on_the_workers(
    client, sample_messages, monkeypatch
):
    """A run that fails while its buckets are being kept (here the second bucket's disk)
    lets go what that checkpoint had kept already: no worker is left with files no run
    will ever let go."""
    import gc

    from nbspam.errors import NbspamError
    from nbspam.service import cluster, digestruns

    monkeypatch.setattr(cluster, "CHUNK", 2)
    monkeypatch.setattr(cluster, "CHECKPOINT_PARTS", 4)
    real, calls = digestruns.keep, []

    def keep(token, *args):
        calls.append(token)
        if len(set(calls)) > 1:
            raise digestruns.DigestDiskError("a worker cannot keep the digests: full")
        return real(token, *args)

    monkeypatch.setattr(digestruns, "keep", keep)
    with pytest.raises(NbspamError, match="DigestDiskError"):
        cluster.train(sample_messages, SETTINGS, client)
    gc.collect()
    assert len(set(calls)) == 2 and digestruns.BASES == {}


def test_the_workers_profiler_is_paused_for_the_length_of_a_run(client, sample_messages):
    """Dask's statistical profiler keeps a tree of samples a second, for 1,000 s (40 MB of
    nbspam's tasks): paused while a run goes, so that a worker's memory does not grow with
    the length of the run, and started again after it."""
    from nbspam.service import cluster

    workers = list(client.cluster.workers.values())
    running = []

    def progress(read, size):
        running.extend(
            w.periodic_callbacks[name].is_running()
            for w in workers
            for name in ("profile", "profile-cycle")
        )

    assert all(w.periodic_callbacks["profile"].is_running() for w in workers)
    cluster.train(sample_messages, SETTINGS, client, progress=progress)
    assert running and not any(running)
    assert all(
        w.periodic_callbacks[name].is_running()
        for w in workers
        for name in ("profile", "profile-cycle")
    )


def test_the_scheduler_keeps_one_span_and_one_task_group_of_each_kind_a_run(
    client, sample_messages, monkeypatch
):
    """Dask's scheduler keeps, for good, a record of every span it opens (it opened one
    each time it had been idle, some 40 a run here) with every task group of it (the group
    of a kind of task was made anew each time its tasks were all done) and a description
    of every submission (ten a part): a run's tasks are now of one span that keeps one
    description, with one group of each kind of task, whatever the number of parts."""
    from nbspam.service import cluster

    monkeypatch.setattr(cluster, "CHUNK", 1)  # 63 parts
    monkeypatch.setattr(cluster, "CHECKPOINT_PARTS", 4)
    scheduler = client.cluster.scheduler
    spans = scheduler.extensions["spans"].spans
    before = set(spans)
    groups: list[Any] = []  # the task groups the scheduler held as the parts were done

    def progress(read, size):
        groups.extend(scheduler.task_groups.values())

    messages = with_duplicates(sample_messages)
    on_dask = cluster.train(messages, SETTINGS, client, progress=progress)
    assert_same_trained_model(on_dask, train_locally(messages, SETTINGS))
    made = [span for key, span in spans.items() if key not in before]
    assert [span.name for span in made] == [("nbspam-train",)]
    # a group still alive from a run before keeps its own span (Dask's rule), so the
    # run's span has those of the kinds that were not
    names = [group.name for group in made[0].groups]
    assert len(names) == len(set(names)) and set(names) <= {f"nbspam-{k}" for k in cluster.KINDS}
    assert len({id(group) for group in groups}) == len({group.name for group in groups}) > 5
    assert made[0]._metadata["collections"] == [{"type": "Future"}]


def test_dasks_cache_of_task_keys_is_emptied_at_each_checkpoint(
    client, sample_messages, monkeypatch
):
    """Dask caches the group name of every task key it sees (`dask.utils.key_split`, up to
    100,000 keys, in the scheduler, the workers and the client): about ten keys a part, so
    it grew with the parts (up to some 17 MB at 10^7 messages). Emptied at each
    checkpoint, it holds the keys of the parts since the last one."""
    from dask.utils import key_split

    from nbspam.service import cluster

    monkeypatch.setattr(cluster, "CHUNK", 1)  # 63 parts
    monkeypatch.setattr(cluster, "CHECKPOINT_PARTS", 4)
    cached = []

    def progress(read, size):
        cached.append(key_split.cache_info().currsize)

    messages = with_duplicates(sample_messages)
    on_dask = cluster.train(messages, SETTINGS, client, progress=progress)
    assert_same_trained_model(on_dask, train_locally(messages, SETTINGS))
    assert len(cached) == len(messages) and max(cached) <= 100, cached  # 600 before


def dask_logs(client) -> dict[str, Any]:
    """Dask's low-level logs in the client, the scheduler and the workers of a cluster in
    this process, by name."""
    scheduler = client.cluster.scheduler
    logs = {"client sent": client.scheduler_comm.recent_message_log}
    logs["scheduler transitions"] = scheduler.transition_log
    logs.update({f"events {k}": t.events for k, t in scheduler._broker._topics.items()})
    for name, comms in (
        ("to worker", scheduler.stream_comms),
        ("to client", scheduler.client_comms),
    ):
        logs.update({f"{name} {k}": c.recent_message_log for k, c in comms.items()})
    for w in client.cluster.workers.values():
        logs.update(
            {
                f"{w.address} stimuli": w.state.stimulus_log,
                f"{w.address} transitions": w.state.log,
                f"{w.address} transfers in": w.transfer_incoming_log,
                f"{w.address} transfers out": w.transfer_outgoing_log,
                f"{w.address} sent": w.batched_stream.recent_message_log,
            }
        )
    return logs


def test_dasks_logs_stay_short_for_the_length_of_a_run(client, sample_messages, monkeypatch):
    """Dask keeps its last 1,000 messages sent, events, transitions and stimuli in every
    process (a batch of tasks sent to a worker is some 9 KB of nbspam's): they filled up
    over the first 4 * 10^5 messages, and each process's peak grew with them (to some 19
    MB on the scheduler, 6 in the calling process). For a run they keep `LOG_LENGTH`
    entries, and Dask's own length again after it."""
    import dask

    from nbspam.service import cluster

    monkeypatch.setattr(cluster, "CHUNK", 1)  # 63 parts, some 600 tasks
    monkeypatch.setattr(cluster, "LOG_LENGTH", 20, raising=False)
    longest: dict[str, int] = {}

    def progress(read, size):
        for name, log in dask_logs(client).items():
            longest[name] = max(longest.get(name, 0), len(log))

    messages = with_duplicates(sample_messages)
    on_dask = cluster.train(messages, SETTINGS, client, progress=progress)
    assert_same_trained_model(on_dask, train_locally(messages, SETTINGS))
    assert len(longest) >= 13 and max(longest.values()) <= 20, longest
    assert longest["client sent"] == longest["scheduler transitions"] == 20
    full = dask.config.get("distributed.admin.low-level-log-length")
    assert full == 1000
    assert {log.maxlen for log in dask_logs(client).values()} == {full}
    cluster.train(messages, SETTINGS, client)  # a second run: cut again, then given back
    assert {log.maxlen for log in dask_logs(client).values()} == {full}


def test_the_digests_reach_the_model_file_a_slice_at_a_time(
    client, sample_messages, monkeypatch, tmp_path
):
    """The calling process fetches the digests `SLICE` at a time, lets each go before the
    next (here: no digests it fetched before are alive when more come), and the model's
    digests are mapped from a temporary file, written into the model file from there: the
    same bytes as the model held in memory."""
    import weakref

    from nbspam.service import cluster, tally
    from nbspam.store.modelfile import save_model

    monkeypatch.setattr(cluster, "CHUNK", 2)
    monkeypatch.setattr(cluster, "CHECKPOINT_PARTS", 4)
    monkeypatch.setattr(cluster, "SLICE", 8, raising=False)
    fetched, alive = [], []
    real = cluster._result

    def spy(client, future):
        value = real(client, future)
        blocks = [value] if isinstance(value, tally.Bucket) else []
        if isinstance(value, tuple):  # a slice: (digests, codes)
            blocks = [v for v in value if isinstance(v, np.ndarray) and v.shape[1:] == (16,)]
        for block in blocks:
            held = block.digests if isinstance(block, tally.Bucket) else block
            alive.append(sum(ref() is not None for ref in fetched))
            fetched.append(weakref.ref(block))
            assert len(held) <= 8
        return value

    monkeypatch.setattr(cluster, "_result", spy)
    messages = with_duplicates(sample_messages)
    on_dask = cluster.train(messages, SETTINGS, client)
    local = train_locally(messages, SETTINGS)
    assert_same_trained_model(on_dask, local)
    assert len(fetched) >= len(local.seen_digests) / 8 and not any(alive)
    assert isinstance(on_dask.seen_digests, np.memmap)
    spooled, held = tmp_path / "spooled.nbm", tmp_path / "held.nbm"
    save_model(on_dask, spooled)
    in_memory = {k: np.array(getattr(on_dask, k)) for k in ("seen_digests", "seen_times")}
    in_memory["seen_labels"] = np.array(on_dask.seen_labels, np.int64)
    save_model(dataclasses.replace(on_dask, **in_memory), held)
    assert spooled.read_bytes() == held.read_bytes()


def test_a_full_disk_for_the_digests_is_one_error(client, sample_messages, monkeypatch):
    """The digests wait in temporary files for the model file: a disk too full for them
    says so (not that the cluster was lost), and nothing is written."""
    import tempfile

    from nbspam.errors import TrainingError
    from nbspam.service import cluster

    real = tempfile.TemporaryFile

    def full(*args, **kwargs):  # the calling process's files alone (the workers name theirs)
        return real(*args, **kwargs) if kwargs else open("/dev/full", "wb")

    monkeypatch.setattr(tempfile, "TemporaryFile", full)
    with pytest.raises(TrainingError) as caught:
        cluster.train(sample_messages, SETTINGS, client)
    assert str(caught.value) == (
        f"cannot keep the {len(sample_messages):,} digests in a temporary file in "
        f"{tempfile.gettempdir()}: No space left on device; nothing was written"
    )


def test_a_full_disk_on_a_worker_is_one_error(client, sample_messages, monkeypatch):
    """A worker keeps its buckets of digests on its disk: a disk too full for them is one
    line that says so, and nothing is written."""
    import tempfile

    from nbspam.errors import NbspamError
    from nbspam.service import cluster

    real = tempfile.TemporaryFile

    def full(*args, **kwargs):  # the workers' files alone
        return (
            open("/dev/full", "wb", buffering=0) if kwargs.get("prefix") else real(*args, **kwargs)
        )

    monkeypatch.setattr(tempfile, "TemporaryFile", full)
    with pytest.raises(NbspamError) as caught:
        cluster.train(sample_messages, SETTINGS, client)
    assert str(caught.value) == (
        "training on the Dask cluster failed, no model was written: DigestDiskError: a worker "
        f"cannot keep the digests in a temporary file in {tempfile.gettempdir()}: "
        "No space left on device"
    )


ALLOCATOR = """
import sys
import numpy as np
from nbspam.service import cluster

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) >> 10

cluster._allocator()
big = np.ones(8 << 20, np.uint8)
del big  # by default glibc now serves blocks up to 8 MiB from its heap
before = rss()
held = [np.ones(512 << 10, np.uint8) for _ in range(200)]  # 100 MiB in blocks of 512 KiB
last = held[-1]
del held  # all freed but the last, which pins the heap's top
print(rss() - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_worker_gives_back_the_arrays_it_freed():
    """Each worker's malloc serves blocks from 64 KiB on from mappings of their own, given
    back when freed: with glibc's default a freed array raises that threshold, and the
    arrays of later parts, carved from its heap, kept a worker's memory high (here 100 MiB
    freed and kept)."""
    done = subprocess.run(
        [sys.executable, "-c", ALLOCATOR], env=ENV, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 20  # MiB still held of the 100 freed


def test_results_are_fetched_from_the_workers_not_through_the_scheduler(sample_messages):
    """The clients nbspam makes fetch results (the checkpoints, the total, the digests) from
    the workers themselves: the scheduler is never asked to gather them, so they never sit
    in its memory. (Dask falls back to its scheduler for a worker it cannot reach.)"""
    from nbspam.service import cluster

    asked = []
    with cluster.dask_client(None, 1) as client:
        scheduler = client.cluster.scheduler
        real = scheduler.handlers["gather"]

        async def gather(*args, **kwargs):
            asked.append(kwargs.get("keys"))
            return await real(*args, **kwargs)

        scheduler.handlers["gather"] = gather
        on_dask = cluster.train(sample_messages, SETTINGS, client)
    assert asked == []
    assert_same_trained_model(on_dask, train_locally(sample_messages, SETTINGS))


def test_the_command_with_a_local_cluster(tmp_path):
    local, on_dask = tmp_path / "local.nbm", tmp_path / "dask.nbm"
    assert cli_run("train", SAMPLE / "train", "-o", local).exit_code == 0
    result = cli_run("train", SAMPLE / "train", "-o", on_dask, "--engine", "dask", "-j", "1")
    assert result.exit_code == 0, result.stderr
    assert_same_trained_model(load_model(on_dask), load_model(local))


@pytest.mark.parametrize("fmt", ["jsonl", "text"])
def test_predict_on_a_local_cluster_prints_what_local_predict_prints(sample_model_path, fmt):
    paths = (SAMPLE / "new", SAMPLE / "train")
    local = cli_run("predict", "-m", sample_model_path, "-f", fmt, *paths)
    result = cli_run(
        "predict", "-m", sample_model_path, "-f", fmt, *paths, "--engine", "dask", "-j", "1"
    )
    assert (result.exit_code, result.stdout, result.stderr) == (0, local.stdout, local.stderr)


def test_predict_on_a_local_cluster_scores_with_what_the_model_learned(sample_model):
    """The workers score with the model as every reader has it: its file and its journal
    (what `learn` taught since), not with the file alone."""
    message = SAMPLE / "new" / "001.eml"
    learned = cli_run("learn", "-m", sample_model, "-l", "ham", message)
    assert learned.exit_code == 0 and Path(f"{sample_model}.journal").exists()
    local = cli_run("predict", "-m", sample_model, "-f", "jsonl", message)
    result = cli_run(
        "predict", "-m", sample_model, "-f", "jsonl", message, "--engine", "dask", "-j", "1"
    )
    assert (result.exit_code, result.stdout) == (0, local.stdout)


def test_predict_keeps_the_input_order_with_few_partitions_ahead(client, sample_model_path):
    from nbspam.service import cluster
    from nbspam.service.array_scoring import load_scorer

    messages = [
        Message(f"m{i}", ("free money " if i % 3 else "see you at lunch ") * (i % 7 + 1))
        for i in range(300)
    ]
    expected = list(load_scorer(sample_model_path).predict_messages(messages))
    got = list(cluster.predict(str(sample_model_path), messages, client, ahead=2))
    assert [(p.id, p.log_odds, p.label) for p in got] == [
        (p.id, p.log_odds, p.label) for p in expected
    ]


@pytest.mark.parametrize(
    "split",
    [("--folds", "4"), ("--test", str(SAMPLE / "train")), ("--chronological", "0.25")],
    ids=["folds", "test", "chronological"],
)
def test_evaluate_on_a_local_cluster_reports_what_local_evaluate_reports(split, tmp_path):
    import json

    reports = []
    for engine in (("--engine", "local"), ("--engine", "dask", "-j", "1")):
        scores = tmp_path / f"{engine[1]}.jsonl"
        result = cli_run(
            "evaluate", SAMPLE / "train", *split, "-f", "json", "--scores", scores, *engine
        )
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)
        del report["seconds"]
        reports.append((report, scores.read_text()))
    assert reports[0] == reports[1]


def test_counting_keeps_the_order_with_few_chunks_ahead(client):
    from nbspam.service import cluster
    from nbspam.text.counting import count_chunks

    items = [(i, [f"word{i} other{i % 3} common"] * (i % 4 + 1)) for i in range(40)]
    expected = list(count_chunks(items, SETTINGS.tokenizer, 1))
    assert list(cluster.count_chunks(client, items, SETTINGS.tokenizer, ahead=3)) == expected


def test_no_messages_is_refused(client):
    from nbspam.errors import TrainingError
    from nbspam.service import cluster

    with pytest.raises(TrainingError, match="no messages to train on"):
        cluster.train([], SETTINGS, client)


# -- a scheduler and workers in processes of their own -------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclasses.dataclass
class TLS:
    """A certificate made for one test, its own CA, and its key, as files; ``options`` are
    nbspam's for them, ``security`` Dask's."""

    ca: Path
    key: Path

    @classmethod
    def made_in(cls, folder: Path) -> TLS:
        made = distributed.security.Security.temporary()
        ca, key = folder / "ca.pem", folder / "key.pem"
        ca.write_text(made.tls_ca_file)
        key.write_text(made.tls_client_key)
        return cls(ca, key)

    @property
    def options(self) -> tuple[str, ...]:
        return (
            "--tls-ca-file",
            str(self.ca),
            "--tls-cert",
            str(self.ca),
            "--tls-key",
            str(self.key),
        )

    @property
    def security(self):
        return distributed.security.Security(
            require_encryption=True,
            tls_ca_file=str(self.ca),
            tls_client_cert=str(self.ca),
            tls_client_key=str(self.key),
        )


@dataclasses.dataclass
class Processes:
    address: str
    workers: list
    scheduler: subprocess.Popen
    tls: TLS


@pytest.fixture
def processes(tmp_path):
    """A `dask scheduler` and two `dask worker` processes on 127.0.0.1 talking TLS with a
    certificate made for the test (no nanny, so that killing a worker's process kills the
    worker)."""
    port = free_port()
    address = f"tls://127.0.0.1:{port}"
    tls = TLS.made_in(tmp_path)
    files = ["--tls-ca-file", tls.ca, "--tls-cert", tls.ca, "--tls-key", tls.key]
    dask = [sys.executable, "-m", "dask"]
    quiet = {"env": ENV, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    started = [
        subprocess.Popen(
            [*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]
            + ["--protocol", "tls", *files],
            **quiet,
        )
    ]
    workers = [
        subprocess.Popen(
            [*dask, "worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard"]
            + ["--host", "127.0.0.1", *files],
            **quiet,
        )
        for _ in range(2)
    ]
    started += workers
    try:
        with distributed.Client(address, timeout="30s", security=tls.security) as client:
            client.wait_for_workers(2, timeout=60)
        yield Processes(address, workers, started[0], tls)
    finally:
        for process in workers:  # they hold nothing to keep: stopped at once
            process.kill()
        started[0].terminate()
        for process in started:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.mark.slow
def test_training_on_a_scheduler_and_two_worker_processes(processes, tmp_path):
    local, on_dask = tmp_path / "local.nbm", tmp_path / "dask.nbm"
    assert cli_run("train", SAMPLE / "train", "-o", local).exit_code == 0
    done = nbspam_process(
        *("train", SAMPLE / "train", "-o", on_dask, "--engine", "dask"),
        *("--scheduler", processes.address, *processes.tls.options),
    )
    assert done.returncode == 0, done.stderr.decode()
    assert_same_trained_model(load_model(on_dask), load_model(local))


@pytest.mark.slow
def test_predicting_on_a_scheduler_and_two_worker_processes(processes, sample_model_path):
    paths = (SAMPLE / "new", SAMPLE / "train")
    local = nbspam_process("predict", "-m", sample_model_path, "-f", "jsonl", *paths)
    done = nbspam_process(
        *("predict", "-m", sample_model_path, "-f", "jsonl", *paths, "--engine", "dask"),
        *("--scheduler", processes.address, *processes.tls.options),
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == local.stdout and done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint", [32, 2])
def test_a_worker_killed_mid_training_costs_only_a_rerun(
    processes, sample_messages, monkeypatch, checkpoint
):
    """One worker is killed after it has counted partitions and before the run ends: Dask
    counts them again on the other (and runs again the checkpoints it held, from the data
    they were sent), and the model is the one of local training."""
    from nbspam.service import cluster

    workers = processes.workers
    monkeypatch.setattr(cluster, "CHUNK", 4)
    monkeypatch.setattr(cluster, "CHECKPOINT_PARTS", checkpoint)
    messages = with_duplicates(sample_messages)
    local = train_locally(messages, SETTINGS)

    def stream(client):
        for i, message in enumerate(messages):
            if i == len(messages) // 2:
                # both workers have counted partitions by now: kill one of them
                deadline = time.monotonic() + 30
                while len(client.has_what()) < 2 or not all(client.has_what().values()):
                    assert time.monotonic() < deadline, "the workers hold no results"
                    time.sleep(0.05)
                workers[0].kill()
                workers[0].wait()
            yield message

    with distributed.Client(
        processes.address, timeout="30s", security=processes.tls.security
    ) as client:
        on_dask = cluster.train(stream(client), SETTINGS, client)
    assert_same_trained_model(on_dask, local)


@pytest.mark.slow
def test_a_scheduler_lost_mid_training_is_one_error(processes, sample_messages, monkeypatch):
    """When the run cannot finish (here the scheduler is killed half-way through the
    messages) it ends in one error, never in a model of some of the messages."""
    from nbspam.errors import NbspamError
    from nbspam.service import cluster

    scheduler = processes.scheduler
    monkeypatch.setattr(cluster, "CHUNK", 4)

    def stream():
        for i, message in enumerate(sample_messages):
            if i == len(sample_messages) // 2:
                scheduler.kill()
                scheduler.wait()
            yield message

    started = time.monotonic()
    with pytest.raises(NbspamError, match="^training on the Dask cluster failed, no model"):
        with _client_of(processes) as client:  # closed as nbspam closes it
            cluster.train(stream(), SETTINGS, client)
    assert time.monotonic() - started < 120


def _client_of(processes):
    """`cluster.dask_client` of the scheduler and workers started by `processes`."""
    from nbspam.service import cluster

    tls = processes.tls
    return cluster.dask_client(
        processes.address, 0, ca_file=str(tls.ca), cert=str(tls.ca), key=str(tls.key)
    )


def test_a_client_that_fails_to_close_leaves_the_runs_outcome(monkeypatch):
    """Closing a client whose scheduler went away tries to connect again, which can fail
    (tornado's ValueError over TLS): the run's own error, or its success, stands."""
    from nbspam.errors import NbspamError
    from nbspam.service import cluster

    class Unclosable:
        closed = 0

        def close(self):
            Unclosable.closed += 1
            raise ValueError("IOStream is not idle; cannot convert to SSL")

    monkeypatch.setattr(cluster, "_connect", lambda address, security: Unclosable())
    monkeypatch.setattr(cluster, "_security", lambda *files: None)
    with pytest.raises(NbspamError, match="^the scheduler went away$"):
        with cluster.dask_client("tls://127.0.0.1:8786", 0):
            raise NbspamError("the scheduler went away")
    with cluster.dask_client("tls://127.0.0.1:8786", 0) as client:
        assert isinstance(client, Unclosable)
    assert Unclosable.closed == 2


@pytest.mark.slow
def test_all_workers_lost_mid_training_is_one_error(processes, sample_messages, monkeypatch):
    from nbspam.errors import NbspamError
    from nbspam.service import cluster

    monkeypatch.setattr(cluster, "CHUNK", 4)
    monkeypatch.setattr(cluster, "NO_WORKERS_TIMEOUT", 2.0)

    def stream():
        for i, message in enumerate(sample_messages):
            if i == len(sample_messages) // 2:
                for worker in processes.workers:
                    worker.kill()
                    worker.wait()
            yield message

    with pytest.raises(NbspamError, match="^the Dask cluster has had no worker for 2 s"):
        with _client_of(processes) as client:
            cluster.train(stream(), SETTINGS, client)


#: `nbspam ARGS` (argv[3:]) in a child process that gives a scheduler argv[1] seconds to
#: answer and, unless argv[2] is 0, kills the process argv[2] (a scheduler) as the third
#: partition is listed.
CHILD = """
import os, signal, sys
from nbspam.service import cluster, sources
cluster.CONNECT_TIMEOUT, victim = float(sys.argv[1]), int(sys.argv[2])
sources.PART_FILES = 4
real = sources.list_parts
def list_parts(*args, **kwargs):
    for number, part in enumerate(real(*args, **kwargs)):
        if number == 2 and victim:
            os.kill(victim, signal.SIGKILL)
        yield part
sources.list_parts = list_parts
from nbspam.cli.commands import main
sys.argv = ["nbspam", *sys.argv[3:]]
main()
"""


def nbspam_child(*args, timeout: float = 2, kill: int = 0) -> subprocess.CompletedProcess:
    """`nbspam ARGS` run by `CHILD`, stopped (a failure) if still running after 60 s."""
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(timeout), str(kill), *map(str, args)],
        env=ENV,
        capture_output=True,
        timeout=60,
        check=False,
    )


class Payload:
    """Unpickled, it makes the folder ``path``: code run by whoever sent it."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (os.mkdir, (self.path,))


class FakeScheduler:
    """A listener on 127.0.0.1 that sends each connection, first thing, a Dask message
    whose unpickling makes the folder ``marker`` (with ``answer``; or else sends nothing and
    holds the connection open); over TLS with ``tls``'s certificate where given."""

    def __init__(self, marker: Path, *, tls: TLS | None = None, answer: bool = True):
        from distributed.protocol import dumps
        from distributed.protocol.serialize import ToPickle
        from distributed.protocol.utils import pack_frames

        frames = pack_frames(dumps({"op": "stream-start", "x": ToPickle(Payload(marker))}))
        self.wire = struct.pack("Q", len(frames)) + frames if answer else b""
        self.context = None
        if tls is not None:
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.context.load_cert_chain(tls.ca, tls.key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed
                return
            self.accepted.append(connection)
            try:
                if self.context is not None:
                    connection = self.context.wrap_socket(connection, server_side=True)
                    self.accepted.append(connection)
                connection.sendall(self.wire)
            except OSError:  # the client gave up
                pass

    def close(self) -> None:
        self.listener.close()
        for connection in self.accepted:
            connection.close()


@pytest.fixture
def fake_scheduler(tmp_path):
    made = []

    def make(**options) -> FakeScheduler:
        made.append(FakeScheduler(tmp_path / "marker", **options))
        return made[-1]

    yield make
    for scheduler in made:
        scheduler.close()


def test_plain_tcp_is_refused_and_never_sent_a_byte(fake_scheduler, tmp_path):
    """A plain tcp:// scheduler, even on 127.0.0.1, could be anyone's listener: nbspam
    does not connect to it (it used to, and ran the code the listener sent)."""
    fake = fake_scheduler()
    address = f"tcp://127.0.0.1:{fake.port}"
    done = nbspam_process(
        "train",
        SAMPLE / "train",
        "-o",
        tmp_path / "m.nbm",
        "--engine",
        "dask",
        "--scheduler",
        address,
    )
    assert (done.returncode, done.stderr.decode()) == (
        2,
        f"Error: --scheduler '{address}' is plain TCP, neither encrypted nor authenticated, "
        "and whoever listens there can run code as you: give tls://HOST:PORT\n",
    )
    assert not (tmp_path / "marker").exists()
    assert fake.accepted == []
    assert not (tmp_path / "m.nbm").exists()


@pytest.mark.parametrize("listener", ["plain", "stranger's certificate"])
def test_a_scheduler_that_cannot_prove_itself_is_not_heard(fake_scheduler, tmp_path, listener):
    """A listener on the tls:// address that speaks plain Dask, or TLS with a certificate
    the CA given did not sign, is never read from: one line, status 1, its code not run."""
    ours = TLS.made_in(tmp_path)
    (tmp_path / "stranger").mkdir()
    stranger = TLS.made_in(tmp_path / "stranger") if listener != "plain" else None
    fake = fake_scheduler(tls=stranger)
    address = f"tls://127.0.0.1:{fake.port}"
    done = nbspam_child(
        *("train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--engine", "dask"),
        *("--scheduler", address, *ours.options),
    )
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert stderr.startswith(f"Error: cannot reach the Dask scheduler {address}: ")
    assert stderr.count("\n") == 1
    assert fake.accepted  # it was reached, and not believed
    assert not (tmp_path / "marker").exists()


def test_a_scheduler_that_never_answers_is_an_error_in_time(fake_scheduler, tmp_path):
    """A listener that completes the TLS handshake with a trusted certificate and then
    says nothing: nbspam gives up after the connect timeout (it used to wait for ever)."""
    tls = TLS.made_in(tmp_path)
    fake = fake_scheduler(tls=tls, answer=False)
    address = f"tls://127.0.0.1:{fake.port}"
    started = time.monotonic()
    done = nbspam_child(
        *("train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--engine", "dask"),
        *("--scheduler", address, *tls.options),
    )
    assert time.monotonic() - started < 30  # the timeout is 2 s; a child starts in ~2 s
    assert (done.returncode, done.stderr.decode()) == (
        1,
        f"Error: cannot reach the Dask scheduler {address}: no answer in 2 s\n",
    )
    assert fake.accepted
    assert not (tmp_path / "m.nbm").exists()


def test_a_cluster_that_cannot_be_reached_is_one_line(tmp_path):
    tls = TLS.made_in(tmp_path)
    address = f"tls://127.0.0.1:{free_port()}"
    done = nbspam_child(
        *("train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--engine", "dask"),
        *("--scheduler", address, *tls.options),
    )
    stderr = done.stderr.decode()
    assert done.returncode == 1
    assert stderr.startswith(f"Error: cannot reach the Dask scheduler {address}: ")
    assert stderr.count("\n") == 1
    assert not (tmp_path / "m.nbm").exists()


@pytest.mark.slow
def test_a_scheduler_killed_mid_training_is_one_line(processes, tmp_path):
    done = nbspam_child(
        *("train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--engine", "dask"),
        *("--scheduler", processes.address, *processes.tls.options),
        timeout=5,
        kill=processes.scheduler.pid,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert stderr == (
        "Error: training on the Dask cluster failed, no model was written: "
        "the connection to the Dask scheduler was lost\n"
    )
    assert not (tmp_path / "m.nbm").exists()


def test_without_cryptography_a_local_cluster_of_processes_says_how_to_install_it(monkeypatch):
    from nbspam.errors import NbspamError
    from nbspam.service import cluster

    monkeypatch.setitem(sys.modules, "cryptography", None)  # import cryptography fails
    with pytest.raises(NbspamError, match=r"^--engine dask needs the cryptography package"):
        with cluster.dask_client(None, 2):
            pass


def listening(process) -> set:
    """The addresses where ``process`` and its children listen."""
    found = set()
    for each in [process, *process.children(recursive=True)]:
        connections = getattr(each, "net_connections", None) or each.connections
        found |= {c.laddr for c in connections(kind="inet") if c.status == "LISTEN"}
    return found


@pytest.mark.parametrize("workers", [1, 2])
def test_the_local_cluster_listens_only_on_loopback_with_tls(workers):
    """One worker: in this process, its transport in memory. More: processes that talk
    TLS on 127.0.0.1, with a certificate made for the run; a plain client is refused."""
    import psutil

    from nbspam.service import cluster

    me = psutil.Process()
    before = listening(me)
    with cluster.dask_client(None, workers) as client:
        address = client.scheduler.address
        assert client.submit(sum, [1, 2]).result() == 3
        opened = listening(me) - before
        assert opened and {host for host, _ in opened} == {"127.0.0.1"}
        if workers == 1:
            assert address.startswith("inproc://")
        else:
            assert address.startswith("tls://127.0.0.1:")
            with pytest.raises(OSError):
                distributed.Client(address.replace("tls://", "tcp://"), timeout=2)


def test_messages_as_text_and_bytes_alike(client):
    from nbspam.service import cluster

    messages = [
        Message(str(i), ("free money now " if i % 2 else "meeting notes ") * (i + 1), label)
        for i, label in enumerate(["spam", "ham"] * 12)
    ]
    settings = build_settings({"event_model": "multinomial"})
    assert_same_trained_model(
        cluster.train(messages, settings, client), train_locally(messages, settings)
    )


def test_a_typed_table_is_refused_by_the_dask_engine(tmp_path):
    from tests.test_tables import random_gaussian, write_csv

    X, y = random_gaussian(n=60)
    data, model = tmp_path / "g.csv", tmp_path / "g.nbm"
    write_csv(data, X, y)
    table = ("--column", "*=gaussian")
    for command, expected in (
        (("train", data, "-o", model), "trains on messages, not on a typed table"),
        (("evaluate", data, "--folds", "3"), "evaluates messages, not a typed table"),
    ):
        result = cli_run(*command, *table, "--engine", "dask")
        assert (result.exit_code, result.stderr) == (1, f"Error: --engine dask {expected}\n")
    assert cli_run("train", data, "-o", model, *table).exit_code == 0
    result = cli_run("predict", "-m", model, data, "--engine", "dask")
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: --engine dask scores messages, not rows of a typed table\n",
    )
    result = cli_run("prune", "-m", model, "--min-docs", "2")
    assert result.exit_code == 1 and "a model of a typed table" in result.stderr


def test_online_evaluation_is_refused_by_the_dask_engine():
    result = cli_run("evaluate", SAMPLE / "train", "--online", "--engine", "dask")
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: --online learns one message at a time here: not with --engine dask\n",
    )
