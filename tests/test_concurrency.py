"""Concurrent updates of one model file, with real processes.

Learners that run at once all get their update in (they wait for each other on the
``flock`` of ``MODEL.lock``); a reader never sees a half-written model (files are replaced
by an atomic rename); a learner killed with SIGKILL leaves the model as it was before or
as it is after, and the lock free; a holder that keeps the lock too long makes an updater
give up with an error naming its pid. Every expected model is computed with the library
(`train` on all the messages at once), so "equal" means equal counts, vocabulary and
record of learned messages.
"""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nbspam.core.settings import Settings
from nbspam.errors import LockError
from nbspam.mail.message import Message
from nbspam.models.model import fit_messages
from nbspam.store.lock import model_lock
from nbspam.store.modelfile import load_model
from tests.helpers import ENV, assert_same_model, model_differences, nbspam_process
from tests.processes import KILL_AT_FSYNC

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "sample_data" / "train"
NBSPAM = [sys.executable, "-m", "nbspam"]
WAIT = 30.0  # seconds: the longest any single process or wait may take before the test fails

# Holds the lock of the model argv[1] until killed.
HOLD_LOCK = """
import sys, time
from nbspam.store.lock import model_lock
with model_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(600)
"""

# Loads the model argv[1] in a tight loop until the file argv[2] exists (or argv[3] seconds
# pass), then prints what it saw as JSON.
READER = """
import json, os, sys, time
from nbspam.store.modelfile import load_model, save_model
path, stop, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
deadline = time.monotonic() + limit
loads, errors, versions = 0, [], set()
print("ready", flush=True)
while not os.path.exists(stop) and time.monotonic() < deadline:
    try:
        model = load_model(path)
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
        continue
    loads += 1
    messages = int(model.class_count.sum())
    if messages != len(model.seen_labels) or len(model.seen_digests) != len(model.seen_labels):
        errors.append(f"inconsistent model: {messages} messages, {len(model.seen_labels)} learned")
    versions.add(messages)
print(json.dumps({"loads": loads, "errors": errors[:10], "versions": sorted(versions)}))
"""

# Learns each message file of the folder argv[3] under the label argv[2] into the model
# argv[1], one update (load, learn, atomic replace, under the lock) per message, exactly as
# `nbspam learn` does.
WRITER = """
import sys
from pathlib import Path
from nbspam.mail.message import Message
from nbspam.service.update import learn, update_model_file
path, label, folder = sys.argv[1:4]
for file in sorted(Path(folder).iterdir()):
    message = Message(str(file), file.read_bytes())
    update_model_file(path, lambda model, message=message: learn(model, [message], label))
"""

# `nbspam ARGS...` (argv[2:]) paused before its first fsync, with the temporary model file
# written but not yet renamed, until the file argv[1] exists.
PAUSE_AT_FSYNC = """
import os, sys, time
real_fsync, gate, paused = os.fsync, sys.argv[1], []
def fsync(fd):
    if not paused:
        paused.append(True)
        print("paused", flush=True)
        deadline = time.monotonic() + 30
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.01)
    real_fsync(fd)
os.fsync = fsync
from nbspam.cli.commands import main
sys.argv = ["nbspam", *sys.argv[2:]]
main()
"""

# `nbspam ARGS...` (argv[2:]) with a lock timeout of argv[1] seconds instead of 60.
WITH_LOCK_TIMEOUT = """
import functools, sys
import nbspam.store.lock
nbspam.store.lock.model_lock = functools.partial(nbspam.store.lock.model_lock, timeout=float(sys.argv[1]))
from nbspam.cli.commands import main
sys.argv = ["nbspam", *sys.argv[2:]]
main()
"""

SYLLABLES = "ka lo mi ne ru ta vo pe si du ga fe ri zo bu na le ho ki sa mo tu".split()
VOCABULARY = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES[:6]]


# ---------------------------------------------------------------------------------------
# processes, messages and models


def nbspam(*args, timeout: float = WAIT) -> subprocess.CompletedProcess:
    return nbspam_process(*args, stdin="", text=True, timeout=timeout)


@pytest.fixture
def spawn():
    """Start processes that are killed and reaped at the end of the test whatever happens."""
    started: list[subprocess.Popen] = []

    def start(args, **options) -> subprocess.Popen:
        proc = subprocess.Popen(
            [str(a) for a in args],
            env=ENV,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **options,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=WAIT)


def finish(proc: subprocess.Popen, timeout: float = WAIT) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def read_line(proc: subprocess.Popen, timeout: float = WAIT) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"process {proc.pid} wrote nothing within {timeout} s"
    return proc.stdout.readline().strip()


def has_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (Linux /proc)."""
    target = str(path.resolve())
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:
            continue
    return False


def wait_until_waiting_for_lock(procs: list[subprocess.Popen], model: Path) -> None:
    """Return once every process has opened the model's lock file: it is polling for the
    lock. Without /proc, give them time to start."""
    lock = model.with_name(model.name + ".lock")
    if not Path("/proc/self/fd").is_dir():
        time.sleep(3)
        return
    deadline = time.monotonic() + WAIT
    while not all(has_open(p.pid, lock) for p in procs):
        assert all(p.poll() is None for p in procs), "a learner ended while the lock was held"
        assert time.monotonic() < deadline, "the learners never reached the lock"
        time.sleep(0.02)


def write_message(path: Path, subject: str, body: str, sender: str = "someone") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"From: {sender}@example.org\n"
        f"To: user@example.com\n"
        f"Subject: {subject}\n"
        f"Message-ID: <{path.stem}.{sender}@example.org>\n"
        f"Date: Mon, 3 Jun 2024 10:00:00 +0000\n"
        f"\n"
        f"{body}\n"
    )
    return path


def write_messages(folder: Path, count: int, tag: str, seed: int) -> list[Path]:
    """``count`` new messages of made-up words in ``folder``, all different."""
    rng = random.Random(seed)
    paths = []
    for i in range(count):
        words = [rng.choice(VOCABULARY) for _ in range(rng.randint(20, 150))]
        subject = f"{tag} {i} " + " ".join(words[:4])
        paths.append(write_message(folder / f"{i:04d}.eml", subject, " ".join(words), tag))
    return paths


def labelled(paths: list[Path], label: str) -> list[Message]:
    return [Message(str(p), p.read_bytes(), label) for p in paths]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def copy_model(source: Path, folder: Path, name: str = "spam.nbm") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(source, folder / name))


@pytest.fixture(scope="module")
def base_messages(sample_messages) -> list[Message]:
    return sample_messages


@pytest.fixture(scope="module")
def base_model(sample_model_path) -> Path:
    """The sample model, as `nbspam train` writes it (copy it before changing it)."""
    return sample_model_path


@pytest.fixture(scope="module")
def settings(base_model) -> Settings:
    """The settings the sample model was trained with."""
    model = load_model(base_model)
    return Settings(tokenizer=model.tokenizer, training=model.training)


def expected(settings: Settings, *messages: list[Message]) -> object:
    return fit_messages([m for part in messages for m in part], settings)


# ---------------------------------------------------------------------------------------
# learners at once


def test_base_model_equals_the_library_model(base_model, base_messages, settings):
    assert_same_model(load_model(base_model), expected(settings, base_messages))


def test_learners_started_at_once_all_get_their_update_in(
    base_model, base_messages, settings, tmp_path, spawn
):
    model = copy_model(base_model, tmp_path)
    batches = [
        ("spam", write_messages(tmp_path / "a", 2, "alpha", seed=1)),
        ("ham", write_messages(tmp_path / "b", 3, "bravo", seed=2)),
        ("spam", write_messages(tmp_path / "c", 2, "charlie", seed=3)),
    ]
    procs = [
        spawn([*NBSPAM, "learn", "-m", model, "--label", label, paths[0].parent])
        for label, paths in batches
    ]
    for proc, (label, paths) in zip(procs, batches):
        status, _, err = finish(proc)
        assert status == 0, err
        assert f"learned {len(paths)} message(s) as {label}" in err
    want = expected(settings, base_messages, *(labelled(p, label) for label, p in batches))
    assert_same_model(load_model(model), want)
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_learners_waiting_for_the_lock_all_get_in_once_it_is_released(
    base_model, base_messages, settings, tmp_path, spawn
):
    model = copy_model(base_model, tmp_path)
    batches = [
        ("ham", write_messages(tmp_path / "a", 2, "delta", seed=4)),
        ("spam", write_messages(tmp_path / "b", 2, "echo", seed=5)),
        ("phish", write_messages(tmp_path / "c", 2, "foxtrot", seed=6)),  # a new label
    ]
    with model_lock(model, timeout=0):
        original = model.read_bytes()
        procs = [
            spawn([*NBSPAM, "learn", "-m", model, "--new-label", "--label", label, paths[0].parent])
            for label, paths in batches
        ]
        wait_until_waiting_for_lock(procs, model)
        time.sleep(0.2)
        assert all(p.poll() is None for p in procs)
        assert model.read_bytes() == original  # nobody wrote while the lock was held
    for proc in procs:
        status, _, err = finish(proc)
        assert status == 0, err
    want = expected(settings, base_messages, *(labelled(p, label) for label, p in batches))
    assert_same_model(load_model(model), want)
    assert load_model(model).labels == ("ham", "phish", "spam")


# ---------------------------------------------------------------------------------------
# readers


@pytest.mark.slow
def test_a_reader_never_sees_a_half_written_model(
    base_model, base_messages, settings, tmp_path, spawn
):
    model = copy_model(base_model, tmp_path / "models")
    spam = write_messages(tmp_path / "spam", 15, "golf", seed=7)
    ham = write_messages(tmp_path / "ham", 15, "hotel", seed=8)
    stop = tmp_path / "stop"
    reader = spawn([sys.executable, "-c", READER, model, stop, WAIT])
    assert read_line(reader) == "ready"
    writers = [
        spawn([sys.executable, "-c", WRITER, model, "spam", tmp_path / "spam"]),
        spawn([sys.executable, "-c", WRITER, model, "ham", tmp_path / "ham"]),
    ]
    # `nbspam predict` reads the model too while it is being replaced
    predictions = 0
    deadline = time.monotonic() + WAIT
    while any(w.poll() is None for w in writers) or not predictions:
        assert time.monotonic() < deadline, "the writers did not finish in time"
        result = nbspam("predict", "-m", model, "-f", "jsonl", ROOT / "sample_data" / "new")
        assert result.returncode == 0, result.stderr
        assert len(result.stdout.splitlines()) == 8
        predictions += 1
    for writer in writers:
        status, _, err = finish(writer)
        assert status == 0, err
    stop.touch()
    status, out, err = finish(reader)
    assert status == 0, err
    seen = json.loads(out.splitlines()[-1])
    assert seen["errors"] == []
    assert seen["loads"] >= 20
    assert len(seen["versions"]) >= 3, "the reader did not see the model being replaced"
    assert set(seen["versions"]) <= set(range(48, 48 + 30 + 1))
    want = expected(settings, base_messages, labelled(spam, "spam"), labelled(ham, "ham"))
    assert_same_model(load_model(model), want)
    assert leftovers(model.parent) == []


# ---------------------------------------------------------------------------------------
# SIGKILL


@pytest.mark.parametrize(
    ("fsync_call", "name", "state", "left"),
    [
        # learn appends its records and their commit to the journal, then fsyncs it (1),
        # then the folder of a new journal (2): a kill at either leaves the batch whole
        pytest.param(1, "spam.nbm", "after", 0, id="at-journal-fsync"),
        pytest.param(2, "spam.nbm", "after", 0, id="at-folder-fsync"),
        pytest.param(1, "spam[1].nbm", "after", 0, id="at-journal-fsync-glob-characters-in-name"),
    ],
)
def test_learn_killed_while_writing_leaves_old_or_new_model_and_a_free_lock(
    base_model, base_messages, settings, tmp_path, fsync_call, name, state, left
):
    model = copy_model(base_model, tmp_path / "models", name)
    batch = write_messages(tmp_path / "batch", 20, "india", seed=9)
    extra = write_message(tmp_path / "extra" / "1.eml", "lunch on friday", "see you at noon")
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AT_FSYNC, str(fsync_call)]
        + ["learn", "-m", str(model), "--label", "spam", str(tmp_path / "batch")],
        capture_output=True,
        timeout=WAIT,
        env=ENV,
    )
    assert killed.returncode == -signal.SIGKILL
    learned = labelled(batch, "spam")
    states = {"before": [], "after": learned}
    assert_same_model(load_model(model), expected(settings, base_messages, states[state]))
    assert len(leftovers(model.parent)) == left
    with model_lock(model, timeout=0):  # the dead learner's lock is free at once
        pass
    result = nbspam("learn", "-m", model, "--label", "ham", extra)
    assert result.returncode == 0, result.stderr
    assert leftovers(model.parent) == []
    want = expected(settings, base_messages, states[state], labelled([extra], "ham"))
    assert_same_model(load_model(model), want)


@pytest.mark.slow
def test_learn_killed_at_random_moments_leaves_old_or_new_model_and_a_free_lock(
    base_model, base_messages, settings, tmp_path
):
    batch = write_messages(tmp_path / "batch", 400, "juliet", seed=10)
    extra = write_message(tmp_path / "extra" / "1.eml", "minutes of the meeting", "attached")
    before = expected(settings, base_messages)
    after = expected(settings, base_messages, labelled(batch, "spam"))
    then = {
        "before": expected(settings, base_messages, labelled([extra], "ham")),
        "after": expected(
            settings, base_messages, labelled(batch, "spam"), labelled([extra], "ham")
        ),
    }
    command = ["learn", "--label", "spam", tmp_path / "batch", "-m"]

    # an uninterrupted learn, to spread the kills over the time it takes
    model = copy_model(base_model, tmp_path / "whole")
    started = time.monotonic()
    result = nbspam(*command, model)
    duration = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert_same_model(load_model(model), after)

    rng = random.Random(20240603)
    outcomes = []
    for i in range(5):
        moment = rng.uniform(0.25 * duration, 1.05 * duration)
        model = copy_model(base_model, tmp_path / f"kill{i}")
        proc = subprocess.Popen(
            [*NBSPAM, *map(str, command), str(model)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=ENV,
        )
        try:
            proc.wait(timeout=moment)
        except subprocess.TimeoutExpired:
            proc.kill()
        finally:
            proc.wait(timeout=WAIT)
        assert proc.returncode in (0, -signal.SIGKILL)

        loaded = load_model(model)  # loads: never a half-written file
        state = next(
            (
                s
                for s, m in (("before", before), ("after", after))
                if not model_differences(loaded, m)
            ),
            None,
        )
        assert state is not None, f"after a kill at {moment:.3f} s the model is neither state"
        left = leftovers(model.parent)
        with model_lock(model, timeout=0):  # the lock is free at once
            pass
        result = nbspam("learn", "-m", model, "--label", "ham", extra)
        assert result.returncode == 0, result.stderr
        assert leftovers(model.parent) == []
        assert_same_model(load_model(model), then[state])
        outcomes.append((round(moment, 3), proc.returncode, state, len(left)))
    assert any(status == -signal.SIGKILL for _, status, _, _ in outcomes), outcomes


# ---------------------------------------------------------------------------------------
# lock timeout and stale locks


@pytest.mark.slow
def test_a_held_lock_times_out_naming_its_holder_and_sigkill_frees_it(
    base_model, base_messages, settings, tmp_path, spawn
):
    model = copy_model(base_model, tmp_path)
    message = write_message(tmp_path / "new" / "1.eml", "cheap pills", "buy now, free shipping")
    original = model.read_bytes()

    holder = spawn([sys.executable, "-c", HOLD_LOCK, model])
    assert read_line(holder) == "locked"
    started = time.monotonic()
    with pytest.raises(LockError, match=rf"\(pid {holder.pid}\); gave up after 0\.3 s"):
        with model_lock(model, timeout=0.3):
            pass
    assert 0.3 <= time.monotonic() - started < 5
    result = subprocess.run(
        [sys.executable, "-c", WITH_LOCK_TIMEOUT, "0.5"]
        + ["learn", "-m", str(model), "--label", "spam", str(message)],
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=ENV,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"Error: {model} is being updated by another process (pid {holder.pid}); "
        "gave up after 0.5 s"
    ]
    assert model.read_bytes() == original

    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=WAIT)
    assert model.with_name(model.name + ".lock").exists()  # the file stays; its lock does not
    with model_lock(model, timeout=0):
        pass

    # an updater waiting for the lock gets it as soon as its holder is killed
    holder = spawn([sys.executable, "-c", HOLD_LOCK, model])
    assert read_line(holder) == "locked"
    learner = spawn([*NBSPAM, "learn", "-m", model, "--label", "spam", message])
    wait_until_waiting_for_lock([learner], model)
    time.sleep(0.2)
    assert learner.poll() is None
    holder.send_signal(signal.SIGKILL)
    status, _, err = finish(learner, timeout=10)
    assert status == 0, err
    assert_same_model(
        load_model(model), expected(settings, base_messages, labelled([message], "spam"))
    )


# ---------------------------------------------------------------------------------------
# neighbours


def test_updating_a_model_leaves_the_temporary_file_of_another_model_alone(
    base_model, tmp_path, spawn
):
    model = copy_model(base_model, tmp_path / "models")
    other = model.with_name(model.name + ".new")
    gate = tmp_path / "go"
    message = write_message(tmp_path / "new" / "1.eml", "team lunch", "on friday")
    writer = spawn([sys.executable, "-c", PAUSE_AT_FSYNC, gate, "train", TRAIN, "-o", other])
    assert read_line(writer) == "paused"
    assert len(leftovers(model.parent)) == 1  # the writer's temporary file, not yet renamed
    result = nbspam("learn", "-m", model, "--label", "ham", message)
    assert result.returncode == 0, result.stderr
    gate.touch()
    status, _, err = finish(writer)
    assert status == 0, err
    load_model(other)
