"""The one exception family of nbspam, each kind with the exit status the CLI gives it."""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_SKIPPED = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C


class NbspamError(Exception):
    """An expected failure: bad input, a bad model file or a bad setting.

    The CLI prints it as one line ``Error: <message>`` and exits with ``exit_code``.
    """

    exit_code = EXIT_ERROR


class ConfigError(NbspamError):
    """A setting is unknown, of the wrong type or out of range."""

    exit_code = EXIT_USAGE


class InputError(NbspamError):
    """A message, a folder or a table cannot be read or makes no sense."""


class ModelFileError(NbspamError):
    """A model file is missing, truncated, corrupt, foreign or of a newer format."""


class TrainingError(NbspamError):
    """The data cannot give a model (no messages, one class, no terms left)."""


class PlotError(NbspamError):
    """A plot cannot be drawn: matplotlib is missing, or the file cannot be written."""


class LockError(NbspamError):
    """Another process held a model's (or a state file's) lock for longer than the timeout,
    or the lock file cannot be written."""


class UnsafeFileError(NbspamError):
    """A file nbspam would write is a symbolic link, a hard link or not a regular file where
    it must be one (`safefiles`), an output of a command is one of its inputs, or a file
    that decides what a run does (a model, its journal, a layer, a state, settings) may be
    written by others than its owner and root (`core.trust`): refused before anything is
    written."""


class ServeError(NbspamError):
    """`nbspam serve` refuses a configuration or a request: a bad user name, a listener it
    cannot open, a model that cannot serve."""


class FilterError(NbspamError):
    """Mail cannot be filtered as asked: a multi-class model, an mbox, an unusable folder."""


def os_error_message(exc: OSError) -> str:
    """One line for a failed system call: ``FILE: reason``, or the reason alone where the
    call named no file."""
    reason = os_reason(exc)
    return reason if exc.filename is None else f"{exc.filename}: {reason}"


def os_reason(exc: BaseException) -> str:
    """Why a system call failed, as the system says it, in lower case ("no such file or
    directory"); for any other exception, its text."""
    reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
    reason = reason or type(exc).__name__
    return reason[:1].lower() + reason[1:]
