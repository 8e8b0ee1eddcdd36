"""train --engine dask gives the model local training gives: terms, counts, digests, auto's
choice, cutoffs and calibration; on a cluster in this process, on separate scheduler and
worker processes, and when a worker is killed mid-run."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
import time

import pytest

from nbspam.config import build_settings
from nbspam.counting import LabelledCounts
from nbspam.messages import Message
from nbspam.model import Rows, fit_counted
from nbspam.modelfile import load_model
from nbspam.training import decide
from nbspam.training import train as train_locally
from tests.helpers import ENV, SAMPLE, assert_same_model, cli_run, nbspam_process

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


def test_stride_is_the_one_rows_ends_with():
    from nbspam.cluster import stride_for

    for limit in (1, 3, 7, 10):
        for n in range(0, 60):
            rows = Rows(limit)
            for start in range(0, n, 4):  # any chunking gives the same stride
                k = min(4, n - start)
                rows.seen += k
                while -(-rows.seen // rows.stride) > limit:
                    rows.stride *= 2
            assert stride_for(n, limit) == rows.stride, (n, limit)


distributed = pytest.importorskip(
    "distributed", reason="Dask is not installed: pip install 'dask[distributed]'"
)


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
    moved = dataclasses.replace(spam, id="again", label="ham")
    return [*messages[:10], moved, *messages, *messages[5:9]]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"model": "multinomial", "calibrate": False},
        {"model": "bernoulli", "cutoffs": "-3,4"},
        {"model": "fisher"},
    ],
    ids=["auto", "multinomial-no-calibrate", "bernoulli-cutoffs", "fisher"],
)
def test_dask_training_gives_the_model_of_local_training(
    client, sample_messages, monkeypatch, options
):
    from nbspam import cluster

    monkeypatch.setattr(cluster, "CHUNK", 7)  # many partitions, many additions
    settings = build_settings(options)
    messages = with_duplicates(sample_messages)
    local = train_locally(messages, settings)
    on_dask = cluster.train(messages, settings, client)
    assert_same_trained_model(on_dask, local)
    assert local.info["duplicates"] == len(messages) - len(sample_messages)


@pytest.mark.parametrize("limit", [5, 16, 17, 31])
def test_the_cross_validation_sample_is_the_one_local_training_keeps(
    client, sample_messages, monkeypatch, limit
):
    """With fewer sample rows than messages the stride doubles; the rows kept, and so the
    choice and the decision rule, are those of local training."""
    from nbspam import cluster

    monkeypatch.setattr(cluster, "CHUNK", 6)
    messages = with_duplicates(sample_messages)
    rows = Rows(limit)
    local = decide(
        fit_counted(LabelledCounts(messages, SETTINGS.tokenizer), SETTINGS, rows=rows),
        rows,
        SETTINGS,
    )
    captured = {}
    real = cluster.decide

    def spy(model, sample, settings):
        captured["rows"] = sample
        return real(model, sample, settings)

    monkeypatch.setattr(cluster, "decide", spy)
    on_dask = cluster.train(messages, SETTINGS, client, limit=limit)
    assert_same_trained_model(on_dask, local)
    mine, theirs = captured["rows"], rows
    assert mine.stride == theirs.stride and mine.labels == theirs.labels
    (X, terms), (Y, other) = mine.matrix(), theirs.matrix()
    assert terms == other
    assert (X != Y).nnz == 0 and X.dtype == Y.dtype
    assert X.indices.tolist() == Y.indices.tolist()  # each row in the same order


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


def test_predict_keeps_the_input_order_with_few_partitions_ahead(client, sample_model_path):
    from nbspam import cluster
    from nbspam.quick import load_scorer

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
    from nbspam import cluster
    from nbspam.counting import count_chunks

    items = [(i, [f"word{i} other{i % 3} common"] * (i % 4 + 1)) for i in range(40)]
    expected = list(count_chunks(items, SETTINGS.tokenizer, 1))
    assert list(cluster.count_chunks(client, items, SETTINGS.tokenizer, ahead=3)) == expected


def test_no_messages_is_refused(client):
    from nbspam import cluster
    from nbspam.errors import TrainingError

    with pytest.raises(TrainingError, match="no messages to train on"):
        cluster.train([], SETTINGS, client)


# -- a scheduler and workers in processes of their own -------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def processes():
    """A `dask scheduler` and two `dask worker` processes on 127.0.0.1 (no nanny, so that
    killing a worker's process kills the worker): (address, the worker processes, the
    scheduler process)."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = [sys.executable, "-m", "dask"]
    quiet = {"env": ENV, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    started = [
        subprocess.Popen(
            [*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            **quiet,
        )
    ]
    workers = [
        subprocess.Popen(
            [*dask, "worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard"]
            + ["--host", "127.0.0.1"],
            **quiet,
        )
        for _ in range(2)
    ]
    started += workers
    try:
        with distributed.Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address, workers, started[0]
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
    address, _, _ = processes
    local, on_dask = tmp_path / "local.nbm", tmp_path / "dask.nbm"
    assert cli_run("train", SAMPLE / "train", "-o", local).exit_code == 0
    done = nbspam_process(
        "train", SAMPLE / "train", "-o", on_dask, "--engine", "dask", "--scheduler", address
    )
    assert done.returncode == 0, done.stderr.decode()
    assert_same_trained_model(load_model(on_dask), load_model(local))


@pytest.mark.slow
def test_predicting_on_a_scheduler_and_two_worker_processes(processes, sample_model_path):
    address, _, _ = processes
    paths = (SAMPLE / "new", SAMPLE / "train")
    local = nbspam_process("predict", "-m", sample_model_path, "-f", "jsonl", *paths)
    done = nbspam_process(
        "predict",
        "-m",
        sample_model_path,
        "-f",
        "jsonl",
        *paths,
        "--scheduler",
        address,
        "--engine",
        "dask",
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == local.stdout and done.stdout


@pytest.mark.slow
def test_a_worker_killed_mid_training_costs_only_a_rerun(processes, sample_messages, monkeypatch):
    """One worker is killed after it has counted partitions and before the run ends: Dask
    counts them again on the other, and the model is the one of local training."""
    from nbspam import cluster

    address, workers, _ = processes
    monkeypatch.setattr(cluster, "CHUNK", 4)
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

    with distributed.Client(address, timeout="30s") as client:
        on_dask = cluster.train(stream(client), SETTINGS, client)
    assert_same_trained_model(on_dask, local)


@pytest.mark.slow
def test_a_scheduler_lost_mid_training_is_one_error(processes, sample_messages, monkeypatch):
    """When the run cannot finish (here the scheduler is killed half-way through the
    messages) it ends in one error, never in a model of some of the messages."""
    from nbspam import cluster
    from nbspam.errors import NbspamError

    address, workers, scheduler = processes
    monkeypatch.setattr(cluster, "CHUNK", 4)

    def stream():
        for i, message in enumerate(sample_messages):
            if i == len(sample_messages) // 2:
                scheduler.kill()
                scheduler.wait()
            yield message

    started = time.monotonic()
    with distributed.Client(address, timeout="3s") as client:
        with pytest.raises(NbspamError, match="^training on the Dask cluster failed, no model"):
            cluster.train(stream(), SETTINGS, client)
    assert time.monotonic() - started < 120


@pytest.mark.slow
def test_all_workers_lost_mid_training_is_one_error(processes, sample_messages, monkeypatch):
    from nbspam import cluster
    from nbspam.errors import NbspamError

    _, workers, _ = processes
    address = processes[0]
    monkeypatch.setattr(cluster, "CHUNK", 4)
    monkeypatch.setattr(cluster, "NO_WORKERS_TIMEOUT", 2.0)

    def stream():
        for i, message in enumerate(sample_messages):
            if i == len(sample_messages) // 2:
                for worker in workers:
                    worker.kill()
                    worker.wait()
            yield message

    with distributed.Client(address, timeout="10s") as client:
        with pytest.raises(NbspamError, match="^the Dask cluster has had no worker for 2 s"):
            cluster.train(stream(), SETTINGS, client)


def test_a_cluster_that_cannot_be_reached_is_one_line(tmp_path, monkeypatch):
    from nbspam import cluster

    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", "2s")
    result = cli_run(
        "train",
        SAMPLE / "train",
        "-o",
        tmp_path / "m.nbm",
        "--engine",
        "dask",
        "--scheduler",
        f"tcp://127.0.0.1:{free_port()}",
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: cannot reach the Dask scheduler tcp://127.0.0.1:")
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "m.nbm").exists()


def test_messages_as_text_and_bytes_alike(client):
    from nbspam import cluster

    messages = [
        Message(str(i), ("free money now " if i % 2 else "meeting notes ") * (i + 1), label)
        for i, label in enumerate(["spam", "ham"] * 12)
    ]
    settings = build_settings({"model": "multinomial"})
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
