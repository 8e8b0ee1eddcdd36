"""The nbspam command as a process: its exit status and output, without the teardown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"

# Runs the command as `python -m nbspam ARGS...` does, with an object that says so on
# stderr when the interpreter's teardown frees it.
PROBE = """
import runpy, sys
class Teardown:
    def __del__(self):
        sys.stderr.write("teardown\\n")
kept = Teardown()
sys.argv = ["nbspam", *sys.argv[1:]]
runpy.run_module("nbspam", run_name="__main__")
"""


@pytest.fixture(scope="module")
def model_path(sample_model_path) -> str:
    return str(sample_model_path)


def run(
    *args: str, stdin: bytes = b"", probe: str = PROBE, **options
) -> subprocess.CompletedProcess:
    options.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(
        [sys.executable, "-c", probe, *args],
        input=stdin,
        stderr=subprocess.PIPE,
        check=False,
        **options,
    )


def test_the_probe_sees_a_teardown():
    result = run(probe=PROBE.replace('runpy.run_module("nbspam", run_name="__main__")', ""))
    assert result.stderr == b"teardown\n"


def test_a_batch_is_printed_whole_with_status_0_and_no_teardown(model_path):
    files = sorted((SAMPLE / "new").iterdir())
    result = run("predict", "-m", model_path, "-f", "tsv", str(SAMPLE / "new"))
    assert (result.returncode, result.stderr) == (0, b"")
    lines = result.stdout.decode().splitlines()
    assert [line.split("\t")[0] for line in lines[1:]] == [str(f) for f in files]


def test_one_message_on_stdin_has_status_0_and_no_teardown(model_path):
    message = (SAMPLE / "new" / "002.eml").read_bytes()
    result = run("predict", "-m", model_path, stdin=message)
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout.decode().startswith("-: ")


@pytest.mark.parametrize(
    "args, status",
    [(["predict", "-m", "missing.nbm", "x"], 1), (["train"], 2), (["no-such-command"], 2)],
)
def test_errors_keep_their_status_and_message_without_teardown(args, status):
    result = run(*args)
    assert result.returncode == status
    assert b"Error: " in result.stderr and b"teardown" not in result.stderr


@pytest.mark.parametrize("stdin", [False, True], ids=["batch", "one message"])
@pytest.mark.parametrize(
    "stdout, reason",
    [("closed", "standard output is closed"), ("/dev/full", "no space left on device")],
)
def test_output_that_cannot_be_written_is_one_error_line(model_path, stdin, stdout, reason):
    # Python starts with sys.stdout None when descriptor 1 is closed
    if stdout == "/dev/full" and not os.path.exists(stdout):
        pytest.skip("no /dev/full here")
    paths = [] if stdin else [str(SAMPLE / "new")]
    with open(os.devnull if stdout == "closed" else stdout, "wb") as out:
        result = run(
            "predict",
            "-m",
            model_path,
            *paths,
            stdin=(SAMPLE / "new" / "001.eml").read_bytes() if stdin else b"",
            stdout=out,
            preexec_fn=(lambda: os.close(1)) if stdout == "closed" else None,
        )
    assert result.returncode == 1
    assert result.stderr == f"Error: cannot write output: {reason}\n".encode()


def test_a_command_that_writes_nothing_to_stdout_runs_with_it_closed(model_path, tmp_path):
    copy = tmp_path / "m.nbm"
    copy.write_bytes(Path(model_path).read_bytes())
    result = run(
        "learn",
        "-m",
        str(copy),
        "-l",
        "ham",
        str(SAMPLE / "new" / "001.eml"),
        stdout=None,
        preexec_fn=lambda: os.close(1),
    )
    assert result.returncode == 0, result.stderr


# A program that runs the command inside itself, then goes on and exits its own way.
HOST = """
import atexit, sys
from nbspam.cli.entry import main
atexit.register(lambda: sys.stderr.write("the host's exit function\\n"))
sys.argv = ["nbspam", "--version"]
try:
    main()
except SystemExit as stop:
    print("nbspam ended with", stop.code)
sys.exit(5)
"""


def test_a_program_that_calls_main_keeps_its_own_exit():
    result = run(probe=HOST)
    assert result.returncode == 5
    assert result.stdout.decode().splitlines()[-1] == "nbspam ended with 0"
    assert result.stderr == b"the host's exit function\n"
