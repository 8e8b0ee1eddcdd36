"""What many test modules share: running the command (in this process or as a child process)
and comparing two models."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from nbspam.cli.commands import cli

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"
#: The environment of a child process: it imports this checkout's nbspam.
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
}


def cli_run(*args, input: str | bytes | None = None) -> Result:
    """`nbspam ARGS` run in this process; stdout and stderr apart (result.stdout, .stderr).

    An exception the command does not turn into an exit status fails the test where it
    happened, with its traceback."""
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


def nbspam_process(*args, stdin: bytes | str = b"", **options) -> subprocess.CompletedProcess:
    """`python -m nbspam ARGS` in a child process with ``stdin`` as its input; stdout and
    stderr are captured unless ``options`` say otherwise (they go to `subprocess.run`)."""
    options.setdefault("stdout", subprocess.PIPE)
    options.setdefault("stderr", subprocess.PIPE)
    return subprocess.run(
        [sys.executable, "-m", "nbspam", *map(str, args)],
        input=stdin,
        env=ENV,
        check=False,
        **options,
    )


def called_path(path: str | os.PathLike[str], dir_fd: int | None = None) -> str:
    """The real path a system call was given: ``path`` itself (its folder resolved), or a
    name in the open folder ``dir_fd`` (Linux's /proc/self/fd names the folder). For a
    test's stand-in for ``os.link`` or ``os.rename`` that acts on some paths only."""
    if dir_fd is None:
        folder, name = os.path.split(os.fspath(path))
        return os.path.join(os.path.realpath(folder), name)
    return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), os.fspath(path))


#: The arrays that make a model's counts: the messages learned are part of them.
COUNTS = ("class_count", "term_count", "doc_count", "seen_digests", "seen_labels")


def model_differences(a, b) -> list[str]:
    """The parts in which two models differ: labels, terms, counts, digests of the messages
    learned and their labels, and the settings they were trained with."""
    out = [
        name
        for name in ("labels", "terms", "tokenizer", "training")
        if getattr(a, name) != getattr(b, name)
    ]
    out += [name for name in COUNTS if not np.array_equal(getattr(a, name), getattr(b, name))]
    return out


def assert_same_model(a, b) -> None:
    """Two models hold the same labels, terms, counts, learned messages and settings."""
    assert model_differences(a, b) == []


def missing(reason: str) -> None:
    """Skip a test whose real component (Dovecot, spamc, Postfix, Dask, a corpus) is not on
    this machine, saying why; under CI (``CI`` set), where .ci/run installs them all, fail
    instead: CI must not skip them."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must not skip this test: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


NEIGHBOUR = 4321
"""A user with no name on the host: a neighbour who may write a shared folder, or a user
whose mail a job of root's handles."""


def neighbours(path: Path) -> Path:
    """``path`` (a link, or a file) given to the user `NEIGHBOUR`, as if they had made it;
    the test is skipped where that needs root."""
    try:
        os.lchown(path, NEIGHBOUR, NEIGHBOUR)
    except PermissionError:
        pytest.skip("giving a file to another user needs root")
    return path
