"""The nbspam command: one message on stdin is handled before the command-line parser loads.

A mail filter started for every delivery (`nbspam predict -m MODEL` or `nbspam filter -m
MODEL` with the message on stdin) pays for every import, and click alone costs more than
scoring the message. So these two exact forms, with no other options, are recognised here
and served by the numpy-free scorer; everything else goes to the click commands in `cli`.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Entry point of the ``nbspam`` command and ``python -m nbspam``."""
    try:
        status = _one_message(sys.argv[1:])
    except BrokenPipeError:
        _quiet_stdout()
        sys.exit(_BROKEN_PIPE_STATUS.get(sys.argv[1:2][0] if sys.argv[1:] else "", 1))
    if status is None:
        from .cli import main as cli_main

        cli_main()  # click itself stops quietly with status 1 when the reader goes away
    else:
        sys.exit(status)


# The reader of the output went away (``nbspam predict ... | head``): status 1, as click
# gives; for filter, the error status of --exit-status (its 1 would read as "ham").
_BROKEN_PIPE_STATUS = {"filter": 3}


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that flushing at exit raises nothing more."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _one_message(args: list[str]) -> int | None:
    """The exit status of ``predict -m MODEL [-f FORMAT] [-]`` or ``filter -m MODEL
    [--exit-status]`` on stdin, or None when ``args`` are anything else."""
    if not args or args[0] not in ("predict", "filter"):
        return None
    options = _options(args[1:], flags={"--exit-status"} if args[0] == "filter" else {"-"})
    if options is None or "model" not in options:
        return None
    if args[0] == "filter":
        from .filtering import filter_stdin

        return filter_stdin(options["model"], exit_status="--exit-status" in options)
    if options.get("format", "text") not in ("text", "jsonl", "tsv"):
        return None
    from .errors import NbspamError
    from .quick import predict_stdin

    try:
        return 0 if predict_stdin(options["model"], options.get("format", "text")) else None
    except NbspamError as error:
        print(f"Error: {error}", file=sys.stderr)
        return error.exit_code


def _options(args: list[str], *, flags: set[str]) -> dict[str, str] | None:
    """-m/--model and -f/--format with their values, and the given bare flags; None for
    anything else (which the full parser then handles, errors included)."""
    names = {"-m": "model", "--model": "model", "-f": "format", "--format": "format"}
    found: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg in flags:
            found[arg] = ""
        elif eq and name.startswith("--") and name in names:
            found[names[name]] = value
        elif arg in names and i + 1 < len(args):
            found[names[arg]] = args[i + 1]
            i += 1
        else:
            return None
        i += 1
    return found
