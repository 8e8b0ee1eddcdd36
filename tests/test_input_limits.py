"""Input of any size and any bytes through the commands, as processes: bounded memory, every
byte of a filtered message passed on, one stderr line a problem and a documented status."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from nbspam.mail.message import MAX_MESSAGE_BYTES
from tests.helpers import nbspam_process

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
MiB = 1 << 20
# The command's own peak memory (Python, numpy, the model, 8 MiB of input a few times) is
# well under this; the old code held a 200 MB input whole, several times over.
MAX_RSS = 150 * MiB


@pytest.fixture(scope="module")
def model_path(sample_models) -> str:
    """The sample model with the cutoffs training chooses (a little "free money" is spam)."""
    return str(sample_models())


# Runs `nbspam ARGS...` (argv[2:]) and writes its peak memory (VmHWM) to the file argv[1]
# as it ends. The kernel's ru_maxrss of a child would count the parent's memory at the fork.
PEAK = """
import atexit, os, runpy, sys
out = sys.argv[1]
def record():
    with open("/proc/self/status") as status, open(out, "w") as f:
        f.write(next(line for line in status if line.startswith("VmHWM:")))
real_exit = os._exit
def _exit(code):
    record()
    real_exit(code)
os._exit = _exit
atexit.register(record)
sys.argv = ["nbspam", *sys.argv[2:]]
runpy.run_module("nbspam", run_name="__main__")
"""


def run_measured(
    args: list[str], *, feed=None, timeout: float = 60
) -> tuple[int, bytes, bytes, int]:
    """Run nbspam with ``feed`` (bytes, or a callable that writes to the pipe until it breaks)
    on stdin; (exit status, stdout, stderr, peak memory in bytes)."""
    with tempfile.TemporaryDirectory() as folder:
        peak = os.path.join(folder, "peak")
        process = subprocess.Popen(
            [sys.executable, "-c", PEAK, peak, *args],
            stdin=subprocess.PIPE if feed is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        if feed is not None:

            def write() -> None:
                try:
                    if isinstance(feed, bytes):
                        process.stdin.write(feed)
                    else:
                        feed(process.stdin)
                    process.stdin.close()
                except (BrokenPipeError, ValueError, OSError):
                    pass

            threading.Thread(target=write, daemon=True).start()
        output: dict[str, bytes] = {}
        readers = [
            threading.Thread(target=lambda s=s, k=k: output.update({k: s.read()}), daemon=True)
            for s, k in ((process.stdout, "out"), (process.stderr, "err"))
        ]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(timeout)
        if any(reader.is_alive() for reader in readers):
            process.kill()
            pytest.fail(f"still running after {timeout} s")
        status = process.wait(timeout)
        with open(peak) as f:
            kib = int(f.read().split()[1])
    return status, output["out"], output["err"], kib * 1024


def endless(block: bytes):
    def feed(pipe) -> None:
        while True:  # until the reader goes away
            pipe.write(block)

    return feed


def test_predict_stops_reading_an_endless_binary_stdin(model_path):
    status, out, err, rss = run_measured(
        ["predict", "-m", model_path], feed=endless(bytes(range(256)) * 256)
    )
    assert (status, out) == (3, b"")
    assert err.decode().splitlines() == [
        "-: binary data, not a message",
    ]
    assert rss < MAX_RSS


def test_predict_scores_the_first_bytes_of_an_endless_text_stdin(model_path):
    status, out, err, rss = run_measured(
        ["predict", "-m", model_path, "-f", "tsv"], feed=endless(b"free money now " * 4096)
    )
    assert status == 0
    assert out.splitlines()[1].startswith(b"-\tspam\t")
    assert err.decode().splitlines() == [
        "note: -: read the first 8 MiB of a longer message, the rest left out"
    ]
    assert rss < MAX_RSS


def test_a_200_mb_sparse_binary_file_is_reported_in_bounded_memory(model_path, tmp_path):
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(200 * MiB)  # NUL bytes, stored as a hole
    status, out, err, rss = run_measured(["predict", "-m", model_path, str(big)])
    assert (status, out) == (3, b"")
    assert err.decode().splitlines() == [
        f"{big}: binary data, not a message",
    ]
    assert rss < MAX_RSS


def test_a_200_mb_message_is_scored_on_its_first_8_mib(model_path, tmp_path):
    big = tmp_path / "big.eml"
    with open(big, "wb") as f:
        f.write(b"Subject: win money\nFrom: a@example.com\n\nfree money now\n")
        f.truncate(200 * MiB)
    status, out, err, rss = run_measured(["predict", "-m", model_path, "-f", "tsv", str(big)])
    assert status == 0
    assert out.decode().splitlines()[1].startswith(f"{big}\tspam\t")
    assert err.decode().splitlines() == [
        f"note: {big}: read the first 8 MiB of 200.0 MiB, the rest left out"
    ]
    assert rss < MAX_RSS


def test_filter_passes_a_message_longer_than_the_cap_byte_for_byte(model_path):
    message = (
        b"Subject: win money\nFrom: a@example.com\n\nfree money now\n"
        + b"attachment data line\n" * ((MAX_MESSAGE_BYTES + 3 * MiB) // 21)
    )
    status, out, err, rss = run_measured(["filter", "-m", model_path], feed=message)
    assert status == 0
    header, _, rest = out.partition(b"\n")
    assert header.startswith(b"X-Nbspam-Status: spam; ")
    assert rest == message
    assert err.decode().splitlines() == ["note: -: scored the first 8 MiB"]
    assert rss < MAX_RSS


@pytest.mark.parametrize(("flag", "status"), [((), 1), (("--exit-status",), 3)])
def test_filter_passes_binary_data_on_unscored(model_path, flag, status):
    data = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 100
    result = nbspam_process("filter", "-m", model_path, *flag, stdin=data)
    assert (result.returncode, result.stdout) == (status, data)
    assert result.stderr.decode().splitlines() == [
        "Error: binary data, not a message: passed on unscored"
    ]
