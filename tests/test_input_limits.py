"""Input of any size and any bytes through the commands, as processes: bounded memory, every
byte of a filtered message passed on, one stderr line a problem and a documented status."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from nbspam.cli import cli
from nbspam.messages import MAX_MESSAGE_BYTES

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
MiB = 1 << 20
# The command's own memory (Python, numpy, the model) is well under this; the old code held
# a 200 MB input whole, several times over.
MAX_RSS = 150 * MiB


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("limits") / "m.nbm"
    result = CliRunner().invoke(cli, ["train", str(SAMPLE / "train"), "-o", str(path)])
    assert result.exit_code == 0, result.output
    return str(path)


def run_measured(
    args: list[str], *, feed=None, timeout: float = 60
) -> tuple[int, bytes, bytes, int]:
    """Run nbspam with ``feed`` (bytes, or a callable that writes to the pipe until it breaks)
    on stdin; (exit status, stdout, stderr, max RSS in bytes)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "nbspam", *args],
        stdin=subprocess.PIPE if feed is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    writer = None
    if feed is not None:
        data = feed if isinstance(feed, bytes) else None

        def write() -> None:
            try:
                if data is not None:
                    process.stdin.write(data)
                else:
                    feed(process.stdin)
                process.stdin.close()
            except (BrokenPipeError, ValueError, OSError):
                pass

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}
    readers = [
        threading.Thread(target=lambda s=s, k=k: chunks[k].append(s.read()), daemon=True)
        for s, k in ((process.stdout, "out"), (process.stderr, "err"))
    ]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(timeout)
    if any(reader.is_alive() for reader in readers):
        process.kill()
        pytest.fail(f"still running after {timeout} s")
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if writer is not None:
        writer.join(5)
    return process.returncode, chunks["out"][0], chunks["err"][0], usage.ru_maxrss * 1024


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
        "1 input(s) skipped, see above",
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
        "1 input(s) skipped, see above",
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
    result = subprocess.run(
        [sys.executable, "-m", "nbspam", "filter", "-m", model_path, *flag],
        input=data,
        capture_output=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (status, data)
    assert result.stderr.decode().splitlines() == [
        "Error: binary data, not a message: passed on unscored"
    ]
