"""Failures at the edges of a command: Ctrl-C, full disks, unwritable outputs, names that are
not UTF-8, inputs that hold nothing. Each ends in one line on stderr and a documented exit
status, and loses nothing."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import SAMPLE, cli_run, nbspam_process

FULL = "/dev/full"
needs_dev_full = pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full here")


@pytest.fixture
def model(sample_model) -> Path:
    return sample_model


# -- Ctrl-C ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """6,000 messages of 300 random words: a few seconds of work for two workers."""
    root = tmp_path_factory.mktemp("corpus")
    rng = random.Random(1)
    words = ["".join(rng.choices("abcdefghij", k=6)) for _ in range(3000)]
    for label in ("ham", "spam"):
        (root / label).mkdir()
        for i in range(3000):
            text = " ".join(rng.choices(words, k=300))
            (root / label / f"{i}.txt").write_text(f"Subject: {i}\n\n{text}")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("command", ["train", "predict"])
def test_ctrl_c_ends_with_one_line_and_status_130(corpus, model, tmp_path, command):
    output = tmp_path / "new.nbm"
    args = {
        "train": ["train", corpus, "-o", output],
        "predict": ["predict", "-m", model, corpus, corpus, corpus],
    }[command]
    process = subprocess.Popen(
        [sys.executable, "-m", "nbspam", *map(str, args), "--jobs", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's job
    )
    if command == "predict":
        process.stdout.readline()  # the workers are scoring
    else:
        time.sleep(0.8)  # the workers are counting
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C sends: to the whole group
    _, stderr = process.communicate(timeout=60)
    assert (process.returncode, stderr) == (130, b"Error: interrupted\n")
    assert not output.exists()
    assert [p.name for p in tmp_path.iterdir()] == [model.name]


class _CtrlCWhileLoading:
    def __getattr__(self, name):
        raise KeyboardInterrupt


def test_ctrl_c_while_the_commands_load_is_one_line_and_status_130(monkeypatch, capsys):
    """Ctrl-C as click and the commands are imported (half a second on a loaded machine)
    printed a traceback."""
    from nbspam.cli import fast_start

    monkeypatch.setitem(sys.modules, "nbspam.cli.commands", _CtrlCWhileLoading())
    monkeypatch.setattr(sys, "argv", ["nbspam", "train", "corpus", "-o", "new.nbm"])
    with pytest.raises(SystemExit) as stop:
        try:
            fast_start.main()
        except KeyboardInterrupt:
            pytest.fail("Ctrl-C escaped as a traceback")
    assert stop.value.code == 130
    assert capsys.readouterr() == ("", "Error: interrupted\n")


# -- full disks and outputs that cannot be written ----------------------------------------------


@needs_dev_full
def test_a_lock_file_linked_to_a_full_disk_is_one_line_and_the_model_is_untouched(model):
    # never written through the link (a neighbour's trap, see test_shared_host)
    before = model.read_bytes()
    lock = Path(f"{model}.lock")
    lock.symlink_to(FULL)
    result = cli_run("learn", "-m", model, "-l", "ham", SAMPLE / "new" / "001.eml")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: lock file {lock} is a symbolic link: refusing to write through it; remove it\n"
    )
    assert model.read_bytes() == before


@needs_dev_full
@pytest.mark.parametrize(
    "option, message",
    [
        ("--report", "cannot write report {path}: it is a device, not a regular file"),
        ("--state", "cannot write state file {path}: it is a device, not a regular file"),
    ],
)
def test_filter_records_on_a_device_are_one_line(model, tmp_path, option, message):
    folder = tmp_path / "mail"
    folder.mkdir()
    (folder / "1.eml").write_bytes((SAMPLE / "new" / "001.eml").read_bytes())
    result = cli_run("filter", "-m", model, folder, option, FULL)
    assert result.exit_code == 1
    assert result.stderr == f"Error: {message.format(path=FULL)}\n"
    assert (folder / "1.eml").is_file()


def test_a_report_line_that_fails_midway_is_cut_off_again(model, tmp_path):
    folder = tmp_path / "mail"
    folder.mkdir()
    for name in ("001.eml", "002.eml"):
        (folder / name).write_bytes((SAMPLE / "new" / name).read_bytes())
    report = tmp_path / "report.jsonl"
    old = '{"path": "an older run"}\n' * 80  # 2,000 bytes: the next line passes 2,048
    report.write_text(old)
    args = ["filter", "-j", "1", "-m", model, folder, "--report", report]
    result = nbspam_process(*args, preexec_fn=limited_file_size(2048))
    assert report.read_text() == old
    assert (result.returncode, result.stderr.decode()) == (
        1,
        f"Error: cannot write report {report}: file too large\n",
    )


@pytest.mark.parametrize("where", ["open", "write"])
def test_a_state_file_on_a_full_disk_is_one_line(model, tmp_path, monkeypatch, where):
    import errno

    import nbspam.service.mailstore

    folder = tmp_path / "mail"
    folder.mkdir()
    (folder / "1.eml").write_bytes((SAMPLE / "new" / "001.eml").read_bytes())
    state = tmp_path / "state"
    state.write_bytes(b"half a line")  # opening it writes the line end a crash cut short
    real_write = os.write

    def full(fd, data):
        if os.fstat(fd).st_ino == state.stat().st_ino:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    if where == "write":
        state.write_bytes(b"")
    monkeypatch.setattr(nbspam.service.mailstore.os, "write", full)
    result = cli_run("filter", "-m", model, folder, "--state", state)
    assert result.exit_code == 1
    assert result.stderr == f"Error: cannot write state file {state}: no space left on device\n"
    assert (folder / "1.eml").is_file()


@needs_dev_full
def test_evaluate_scores_on_a_device_are_refused_before_the_work():
    result = cli_run("evaluate", SAMPLE / "train", "--folds", "2", "--scores", FULL)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: cannot write scores file {FULL}: it is a device, not a regular file\n"
    )


def limited_file_size(size: int):
    """A child process's set-up in which no file may grow past ``size`` bytes: a write past
    it fails with EFBIG ("file too large"), as on a disk that fills up midway."""
    import resource

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails, the process lives
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


#: Outputs written whole or not at all: the command (the output's name last, {model}: the
#: model), the output's name, and what its errors call it.
WHOLE_OUTPUTS = {
    "evaluate --scores": (
        ["evaluate", SAMPLE / "train", "--folds", "2", "--scores"],
        "scores.jsonl",
        "scores file",
    ),
    "evaluate --plot": (
        ["evaluate", SAMPLE / "train", "--folds", "2", "--plot"],
        "plot.svg",
        "plot",
    ),
    "dump -o": (["dump", "-m", "{model}", "-o"], "spam.dump", "dump"),
}


@pytest.mark.parametrize("output", WHOLE_OUTPUTS)
def test_an_output_that_fails_midway_leaves_the_old_file_whole(model, tmp_path, output):
    args, name, what = WHOLE_OUTPUTS[output]
    if "--plot" in args:
        pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    out = tmp_path / "out" / name
    out.parent.mkdir()
    out.write_text("the old file\n")
    args = [str(a).format(model=model) for a in args]
    result = nbspam_process(*args, out, preexec_fn=limited_file_size(2048))
    assert out.read_text() == "the old file\n"
    assert os.listdir(out.parent) == [name]  # no temporary file left
    assert (result.returncode, result.stderr.decode()) == (
        1,
        f"Error: cannot write {what} {out}: file too large\n",
    )


@pytest.mark.parametrize(
    "option, name, message",
    [
        ("--scores", "missing/s.jsonl", "--scores {path}: no such folder {folder}"),
        ("--plot", "missing/p.svg", "--plot {path}: no such folder {folder}"),
        (
            "--plot",
            "p.pdf",
            "cannot tell the image format of {path}: give a file ending in .png or .svg",
        ),
    ],
)
def test_evaluate_refuses_an_output_it_could_not_write_before_the_work(
    tmp_path, monkeypatch, option, name, message
):
    import nbspam.evaluation.evaluation

    def never(*args, **kwargs):
        raise AssertionError("the cross-validation ran")

    monkeypatch.setattr(nbspam.evaluation.evaluation, "cross_validate", never)
    path = tmp_path / name
    result = cli_run("evaluate", SAMPLE / "train", option, path)
    assert result.exit_code == 1
    expected = message.format(path=path, folder=path.parent)
    assert result.stderr == f"Error: {expected}\n"


def test_evaluate_without_matplotlib_says_so_before_the_work(tmp_path, monkeypatch):
    import importlib.util

    import nbspam.evaluation.evaluation

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    monkeypatch.setattr(nbspam.evaluation.evaluation, "cross_validate", None)  # never reached
    result = cli_run("evaluate", SAMPLE / "train", "--plot", tmp_path / "p.svg")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: --plot needs matplotlib: pip install")


def test_an_unexpected_failure_is_one_line(model, monkeypatch):
    import nbspam.cli.prediction_lines

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a defect")

    monkeypatch.setattr(nbspam.cli.prediction_lines, "prediction_blocks", broken)
    monkeypatch.delenv("NBSPAM_TRACEBACK", raising=False)
    result = cli_run("predict", "-m", model, SAMPLE / "new")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: internal error: ZeroDivisionError('a defect') "
        "(set NBSPAM_TRACEBACK=1 to see where)\n"
    )


def test_memory_refused_is_one_line_not_an_internal_error(monkeypatch, tmp_path):
    """numpy's `MemoryError` (and the term table's, where its mapping is refused under
    ``ulimit -v``) was an 'internal error' with the array's shape and type."""
    import nbspam.models.model

    def refused(*args, **kwargs):
        raise MemoryError((2, 208639), "float64")

    monkeypatch.setattr(nbspam.models.model, "fit_counted", refused)
    monkeypatch.delenv("NBSPAM_TRACEBACK", raising=False)
    result = cli_run("train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--jobs", "1")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "Error: out of memory: the system refused this process more (its ulimit -v, or the "
        "machine)\n"
    )
    assert not (tmp_path / "m.nbm").exists()


# -- inputs that hold nothing --------------------------------------------------------------------


@pytest.mark.parametrize("command", ["predict", "explain", "forget"])
def test_an_empty_folder_is_reported_with_status_3(model, tmp_path, command):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = cli_run(command, "-m", model, empty, SAMPLE / "new" / "001.eml")
    assert result.exit_code == 3
    assert result.stderr.splitlines()[0] == f"{empty}: no messages found"


# -- names that are not UTF-8 --------------------------------------------------------------------


@pytest.fixture
def odd_names(tmp_path) -> tuple[Path, bytes]:
    """A folder with one message whose name holds a byte that is not UTF-8, a tab and a
    backslash."""
    folder = tmp_path / "odd"
    folder.mkdir()
    name = os.fsencode(folder) + b"/a\xff\tb\\c.eml"
    with open(name, "wb") as f:
        f.write((SAMPLE / "new" / "001.eml").read_bytes())
    return folder, name


def test_a_name_that_is_not_utf8_round_trips_through_jsonl(model, odd_names):
    folder, name = odd_names
    result = nbspam_process("predict", "-m", model, folder, "-f", "jsonl")
    assert result.returncode == 0, result.stderr
    line = result.stdout.decode("utf-8")  # valid UTF-8
    assert os.fsencode(json.loads(line)["path"]) == name


def test_a_name_that_is_not_utf8_round_trips_through_tsv(model, odd_names):
    folder, name = odd_names
    result = nbspam_process("predict", "-m", model, folder, "-f", "tsv")
    assert result.returncode == 0, result.stderr
    rows = result.stdout.decode("utf-8").splitlines()
    assert len(rows) == 2  # the header and one message: the tab did not split the row
    cell = rows[1].split("\t")[0]
    assert cell == os.fsdecode(folder) + "/a\\xff\\tb\\\\c.eml"
    unescaped = cell.encode().decode("unicode_escape").encode("latin-1")
    assert unescaped == name


def test_a_name_that_is_not_utf8_is_written_as_its_bytes_in_text(model, odd_names):
    folder, name = odd_names
    result = nbspam_process("predict", "-m", model, folder)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(name + b": ")


# -- one name per meaning ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["missing/m.nbm", "folder"])
def test_train_refuses_an_output_it_could_not_write_before_the_work(tmp_path, monkeypatch, name):
    import nbspam.fit.training

    def never(*args, **kwargs):
        raise AssertionError("training ran")

    monkeypatch.setattr(nbspam.fit.training, "train", never)
    (tmp_path / "folder").mkdir()
    path = tmp_path / name
    result = cli_run("train", SAMPLE / "train", "-o", path)
    assert result.exit_code == 1
    expected = {
        "missing/m.nbm": f"-o {path}: no such folder {path.parent}",
        "folder": f"cannot write {path}: it is a folder, not a regular file",
    }[name]
    assert result.stderr == f"Error: {expected}\n"


def test_a_fifo_in_a_folder_is_reported_not_read(sample_model_path, tmp_path):
    folder = tmp_path / "mail"
    folder.mkdir()
    (folder / "1.eml").write_bytes((SAMPLE / "new" / "001.eml").read_bytes())
    os.mkfifo(folder / "pipe")  # opening it to read would wait for a writer forever
    result = nbspam_process("predict", "-m", sample_model_path, folder, timeout=30)
    assert result.returncode == 3
    assert result.stderr.decode() == f"{folder / 'pipe'}: not a regular file (a FIFO or a device)\n"
    assert result.stdout.decode().startswith(f"{folder / '1.eml'}: ")
