"""Standard output that can fail: closed at start, a full disk, a reader gone away.

The one-message path (`fast_start`) and the click commands (`commands`) both end with output
written to stdout; what a failed write becomes, one line and nothing more at exit, is here.
"""

from __future__ import annotations

import errno
import io
import os
import sys

from ..errors import os_error_message


class ClosedOutput(io.TextIOBase):
    """Standard output for a process started without one: writing to it fails with one
    clear error, and commands that write nothing there run as usual."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")

    @property
    def buffer(self) -> ClosedOutput:
        return self


def flush_output() -> None:
    """Flush stdout and stderr (either may be None, where its descriptor was closed)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def output_error(exc: OSError, *, stdout: bool = False) -> str:
    """The line for a failed system call. Where it was a write to stdout (``stdout``, or
    stdout cannot be flushed), stdout is pointed at /dev/null, so that nothing more fails
    at exit, and the line names it."""
    if stdout or (exc.filename is None and _stdout_failed()):
        quiet_stdout()
        return "cannot write output: " + os_error_message(exc)
    return os_error_message(exc)


def _stdout_failed() -> bool:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        return True
    return isinstance(sys.stdout, ClosedOutput)


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so that flushing at exit raises nothing more."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # closed at start, or not a file at all
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    try:
        sys.stdout.flush()  # what was buffered goes to /dev/null now
    except OSError:
        pass
