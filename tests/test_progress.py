"""Progress on stderr: a bar with its total on a terminal, a plain line now and then
elsewhere, nothing with -q; the total read from the listing alone."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import tracemalloc

import pytest

from nbspam.cli import progress
from nbspam.cli.progress import Meter
from nbspam.mail import extent
from nbspam.mail.extent import input_bytes
from tests.helpers import ENV, SAMPLE, cli_run
from tests.test_sync import mailbox

TRAIN_BYTES = sum(p.stat().st_size for p in (SAMPLE / "train").rglob("*") if p.is_file())


def on_terminal(*args: str) -> tuple[int, str]:
    """(exit status, stderr) of `python -m nbspam ARGS` with its stderr a terminal."""
    master, slave = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "nbspam", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=ENV,
    )
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return child.wait(timeout=60), out.decode()


def test_train_on_a_terminal_shows_a_bar_with_its_total(tmp_path):
    status, err = on_terminal("train", str(SAMPLE / "train"), "-o", str(tmp_path / "m.nbm"))
    assert status == 0
    total = f"of {TRAIN_BYTES / 1e3:.1f} kB"
    drawn = [part for part in err.split("\r") if part.startswith("read ") and total in part]
    assert drawn, err
    assert "read 0 messages, 0.0 " + total + "   0% [" + " " * 20 + "]" in err
    # auto's internal cross-validation has its own bar: 4 event models on two labels
    assert "\rauto: event models tried 0 of 4   0% [" + " " * 20 + "]\x1b[K" in err
    assert err.endswith("next: nbspam predict -m " + str(tmp_path / "m.nbm") + " MESSAGE\r\n")


def test_quiet_on_a_terminal_shows_nothing(tmp_path):
    status, err = on_terminal("train", "-q", str(SAMPLE / "train"), "-o", str(tmp_path / "m.nbm"))
    assert (status, err) == (0, "")


@pytest.fixture
def every_step(monkeypatch):
    """Plain lines at every step, not every 10 s."""
    monkeypatch.setattr(progress, "PERIOD", 0.0)


def test_off_a_terminal_plain_lines_say_how_far(tmp_path, every_step):
    result = cli_run("train", SAMPLE / "train", "-o", tmp_path / "m.nbm")
    assert result.exit_code == 0
    lines = result.stderr.splitlines()
    assert "\r" not in result.stderr and "\x1b" not in result.stderr
    read = [line for line in lines if line.startswith("read ") and " of " in line]
    assert len(read) == 48  # a line for each message read here, as PERIOD is 0
    assert read[-1].startswith(f"read 48 messages, {TRAIN_BYTES / 1e3:.1f} of ")
    assert "auto: event models tried 2 of 4 (50%)" in lines


def test_quiet_off_a_terminal_prints_nothing(tmp_path, every_step):
    result = cli_run("train", "-q", SAMPLE / "train", "-o", tmp_path / "m.nbm")
    assert (result.exit_code, result.stderr) == (0, "")
    result = cli_run("predict", "-q", "-m", tmp_path / "m.nbm", SAMPLE / "train")
    assert (result.exit_code, result.stderr) == (0, "")


def test_no_line_before_the_period_off_a_terminal(tmp_path):
    """A job shorter than 10 s prints no progress (cron mails what it prints)."""
    result = cli_run("train", SAMPLE / "train", "-o", tmp_path / "m.nbm")
    assert result.exit_code == 0
    assert result.stderr.startswith("read 48 messages (ham 24, spam 24) in ")
    assert " of 4" not in result.stderr and "%)" not in result.stderr


def test_evaluate_tells_each_fold(every_step):
    result = cli_run("evaluate", SAMPLE / "train", "--folds", "4", "--event-model", "bernoulli")
    assert result.exit_code == 0
    folds = [line for line in result.stderr.splitlines() if line.startswith("folds fitted")]
    assert folds == [f"folds fitted {k} of 4 ({k / 4:.0%})" for k in range(1, 5)]


def test_predict_of_a_folder_and_sync_tell_their_total(tmp_path, every_step):
    model, inbox, junk = mailbox(tmp_path)
    result = cli_run("predict", "-m", model, SAMPLE / "train")
    assert result.exit_code == 0
    assert f"scored 48 messages, {TRAIN_BYTES / 1e3:.1f} of {TRAIN_BYTES / 1e3:.1f} kB (100%)" in (
        result.stderr.splitlines()
    )
    result = cli_run("sync", "-m", model, f"spam={junk}", f"ham={inbox}")
    assert result.exit_code == 0
    assert "messages synced 48 of 48 (100%)" in result.stderr.splitlines()


def test_learn_of_many_tells_its_total(tmp_path, every_step):
    model, _, _ = mailbox(tmp_path)
    new = SAMPLE / "new"
    size = sum(p.stat().st_size for p in new.iterdir())
    result = cli_run("learn", "-m", model, "--label", "spam", new)
    assert result.exit_code == 0
    assert (
        f"learned {len(list(new.iterdir()))} messages, {size / 1e3:.1f} of {size / 1e3:.1f} kB (100%)"
        in (result.stderr.splitlines())
    )


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_bar_gives_share_and_time_left():
    clock, out = Clock(), io.StringIO()
    meter = Meter(out, terminal=True, clock=clock)
    meter.begin("read", 800, noun="messages")
    clock.now += 2.0
    meter.advance(250, 1)
    # 31.25% in 2 s: 4.4 s left
    assert meter.text() == "read 1 messages, 250 of 800 bytes  31% [######              ] 0:04 left"
    assert meter.text(plain=True) == "read 1 messages, 250 of 800 bytes (31%), about 0:04 left"
    meter.end()
    assert out.getvalue().endswith("\r\x1b[K")


def test_a_stage_without_total_counts_only():
    meter = Meter(io.StringIO(), terminal=False, clock=Clock())
    meter.begin("scored", None, noun="messages")
    meter.advance(0, 3)
    assert meter.text(plain=True) == "scored 3 messages"


class Listing:
    """A total given as a function, counting its calls."""

    def __init__(self, total: int) -> None:
        self.total, self.calls = total, 0

    def __call__(self) -> int:
        self.calls += 1
        return self.total


def test_the_total_is_listed_only_when_first_shown():
    # off a terminal: a job that ends before its first line never lists its inputs
    clock, out = Clock(), io.StringIO()
    meter, listing = Meter(out, terminal=False, clock=clock), Listing(800)
    meter.begin("read", listing, noun="messages")
    meter.advance(100, 1)
    assert (listing.calls, out.getvalue()) == (0, "")
    clock.now += progress.PERIOD
    meter.advance(100, 1)  # the first line: the listing, once
    clock.now += progress.PERIOD
    meter.advance(200, 1)
    meter.end()
    assert listing.calls == 1
    first = "read 2 messages, 200 of 800 bytes (25%), about 0:30 left"  # 10 s for a quarter
    assert out.getvalue().splitlines()[0] == first
    # on a terminal the bar shows it at once; with -q nothing is ever shown
    listing = Listing(800)
    Meter(io.StringIO(), terminal=True, clock=Clock()).begin("read", listing, noun="messages")
    assert listing.calls == 1
    quiet, listing = Meter(io.StringIO(), terminal=False, quiet=True, clock=clock), Listing(800)
    quiet.begin("read", listing, noun="messages")
    clock.now += progress.PERIOD
    quiet.advance(800, 3)
    quiet.end()
    assert listing.calls == 0


def test_quiet_commands_list_no_folder_for_a_total(tmp_path, monkeypatch, every_step):
    listed = []
    monkeypatch.setattr(extent, "input_bytes", lambda paths, **_: listed.append(paths) or 0)
    model = tmp_path / "m.nbm"
    assert cli_run("train", "-q", SAMPLE / "train", "-o", model).exit_code == 0
    assert cli_run("predict", "-q", "-m", model, SAMPLE / "new").exit_code == 0
    assert listed == []
    assert cli_run("predict", "-m", model, SAMPLE / "new").exit_code == 0  # lines: listed
    assert listed == [[str(SAMPLE / "new")]]


def test_the_listing_holds_one_entry_at_a_time(tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(3000):
        (folder / f"{i:05}").write_bytes(b"x")
    tracemalloc.start()
    try:
        assert input_bytes([str(folder)]) == 3000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200_000  # a listing held whole took some 900 bytes a file, 2.7 MB


def test_the_total_comes_from_the_listing(tmp_path):
    box = tmp_path / "Maildir"
    for sub, size in (("cur", 10), ("new", 20), ("tmp", 400)):
        (box / sub).mkdir(parents=True)
        (box / sub / "m").write_bytes(b"x" * size)
    (box / ".Junk" / "cur").mkdir(parents=True)  # another mailbox, read only when named
    (box / ".Junk" / "cur" / "m").write_bytes(b"x" * 800)
    mbox = tmp_path / "a.mbox"
    mbox.write_bytes(b"From a\n\nx\n" * 5)  # 50 bytes, however many messages
    outside = tmp_path / "outside"
    outside.write_bytes(b"x" * 3000)
    (box / "cur" / "link").symlink_to(outside)  # never followed out of the folder
    assert input_bytes([str(box)]) == 30
    assert input_bytes([str(box), str(mbox)]) == 80
    assert input_bytes([f"spam={box}", f"ham={mbox}"], labelled=True) == 80
    assert input_bytes(["-"]) is None
    assert input_bytes([str(tmp_path / "*.mbox")]) is None
    assert input_bytes([str(tmp_path / "missing")]) == 0


def test_prune_tells_its_steps(tmp_path, every_step):
    model, _, _ = mailbox(tmp_path)
    result = cli_run("prune", "-m", model, "--min-count", "2")
    assert result.exit_code == 0
    steps = [line for line in result.stderr.splitlines() if line.startswith(f"{model}: ")]
    assert steps == [f"{model}: read, changed, written {k} of 3 ({k / 3:.0%})" for k in (1, 2, 3)]
    quiet = cli_run("prune", "-q", "-m", model, "--min-count", "2")
    assert (quiet.exit_code, quiet.stderr) == (0, "")


def test_the_dask_engine_tells_its_reading_too(tmp_path, every_step):
    pytest.importorskip("distributed")
    result = cli_run(
        "train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--engine", "dask", "-j", "1"
    )
    assert result.exit_code == 0, result.stderr
    read = [line for line in result.stderr.splitlines() if line.startswith("read 48 messages, ")]
    assert read == [
        f"read 48 messages, {TRAIN_BYTES / 1e3:.1f} of {TRAIN_BYTES / 1e3:.1f} kB (100%)"
    ]
