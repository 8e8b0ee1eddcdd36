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
from nbspam.cli.fast_start import main
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


def test_a_defect_on_the_one_message_path_is_one_line_as_in_the_commands(monkeypatch, capsys):
    """Both front ends end in one boundary: an unexpected failure of the one-message path
    is the commands' one 'internal error' line, not a traceback."""
    from nbspam.cli import fast_start

    def defect(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(fast_start, "_one_message", defect)
    monkeypatch.setattr(sys, "argv", ["nbspam", "predict", "-m", "m.nbm"])
    monkeypatch.delenv("NBSPAM_TRACEBACK", raising=False)
    with pytest.raises(SystemExit) as stop:
        fast_start.main()
    assert stop.value.code == 1
    line = "Error: internal error: RuntimeError('boom') (set NBSPAM_TRACEBACK=1 to see where)\n"
    assert capsys.readouterr().err == line


@pytest.mark.parametrize("fast", [[], ["--jobs", "1"]])  # --jobs: the click command
def test_both_paths_say_a_failure_in_the_same_line(tmp_path, fast):
    message = (SAMPLE / "new" / "001.eml").read_bytes()
    result = run("predict", "-m", str(tmp_path / "none.nbm"), *fast, stdin=message)
    assert result.returncode == 1
    missing = tmp_path / "none.nbm"
    assert (
        result.stderr
        == f"Error: cannot read model file {missing}: No such file or directory\n".encode()
    )


@pytest.mark.parametrize("command", ["predict", "filter"])
def test_the_one_message_options_are_the_click_commands(command):
    """Each option the one-message path accepts is the click command's option of the
    same names and meaning, and predict's formats are the click command's choices."""
    import click

    from nbspam.cli.commands import cli
    from nbspam.cli.fast_start import FORMATS, ONE_MESSAGE_OPTIONS

    params = {p.name: p for p in cli.commands[command].params}
    for name, (param, flag) in ONE_MESSAGE_OPTIONS[command].items():
        if name == "-":  # the PATH of stdin
            assert isinstance(params[param], click.Argument)
            continue
        assert name in params[param].opts, (name, param)
        assert params[param].is_flag == flag if isinstance(params[param], click.Option) else True
    if command == "predict":
        assert tuple(params["fmt"].type.choices) == FORMATS


def test_filter_with_an_option_it_lacks_is_the_click_usage_error(model_path):
    """`filter -f` is no option of filter: refused as the click command refuses it, the
    message still passed through, never filtered as if -f were not there."""
    message = (SAMPLE / "new" / "001.eml").read_bytes()
    result = run("filter", "-m", model_path, "-f", "text", stdin=message)
    assert result.returncode == 2
    assert b"Error: No such option '-f'." in result.stderr
    assert result.stdout == message


@pytest.mark.parametrize("fmt", ["text", "jsonl", "tsv"])
def test_the_one_message_path_prints_what_the_full_scorer_prints(model_path, monkeypatch, fmt):
    """Byte for byte, for every --format: the numpy-free path of a process against the
    click command scoring with the model itself."""
    from click.testing import CliRunner

    from nbspam.cli import stdin
    from nbspam.cli.commands import cli
    from nbspam.cli.fast_start import FORMATS

    assert fmt in FORMATS
    message = (SAMPLE / "new" / "002.eml").read_bytes()
    fast = run("predict", "-m", model_path, "-f", fmt, stdin=message)
    assert fast.returncode == 0, fast.stderr
    monkeypatch.setattr(stdin, "predict_stdin", lambda *args: False)  # the full scorer
    full = CliRunner().invoke(cli, ["predict", "-m", model_path, "-f", fmt], input=message)
    assert full.exit_code == 0, full.output
    assert fast.stdout == full.stdout_bytes


def test_one_message_with_word_pairs_of_the_headers_scores_as_the_batch_does(sample_models):
    """The pairs of the subject and headers are counted by every path that tokenizes: the
    one-message path (the model file's tables, no numpy) gives the batch's log-odds to the
    bit, and the explanation holds pairs of the headers but no pair of the body."""
    import json

    from tests.helpers import cli_run

    model = str(sample_models("--word-pairs", "headers", "--event-model", "multinomial"))
    path = SAMPLE / "new" / "002.eml"
    fast = run("predict", "-m", model, "-f", "jsonl", stdin=path.read_bytes())
    assert fast.returncode == 0, fast.stderr
    batch = cli_run("predict", "-m", model, "-f", "jsonl", path)
    assert batch.exit_code == 0, batch.stderr
    assert json.loads(fast.stdout)["log_odds"] == json.loads(batch.stdout)["log_odds"]
    explained = json.loads(cli_run("explain", "-m", model, "-f", "jsonl", path).stdout)
    assert explained["log_odds"] == json.loads(batch.stdout)["log_odds"]
    terms = [c["term"] for c in explained["contributions"]]
    assert any(t.startswith("received:pair:") for t in terms)
    assert not any(t.startswith("pair:") for t in terms)
