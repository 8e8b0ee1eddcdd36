"""The nbspam command's fast start: one message on stdin is served before click loads.

A mail filter started for every delivery (`nbspam predict -m MODEL` or `nbspam filter -m
MODEL` with the message on stdin) pays for every import, and click alone costs more than
scoring the message. So these two exact forms, with no other options, are recognised here
and served by the numpy-free scorer; everything else goes to the click commands in `cli`.
"""

from __future__ import annotations

import atexit
import os
import sys

from .boundary import failure
from .output import ClosedOutput, flush_output, output_error

_STATUS: list[int] = []  # the exit status that the command ended with


def run() -> None:
    """The ``nbspam`` command and ``python -m nbspam``: `main`, then a quick exit.

    The process ends without the interpreter's teardown, which frees every object one by
    one: with numpy and scipy loaded it takes about 0.08 s, an eighth of training on short
    texts, and 20 ms of scoring one message. A program that calls `main` itself keeps its
    usual exit.
    """
    atexit.register(_leave_quickly)  # registered first, so it runs after all the others
    try:
        main()
    except SystemExit as stop:
        _STATUS.append(_exit_status(stop.code))
        raise
    _STATUS.append(0)


def _leave_quickly() -> None:
    """Flush the output and end the process with the command's status, untorn.

    Nothing of nbspam's waits for the teardown: files are closed and renamed in place,
    worker processes are gone, and the other exit functions have run by now (they run in
    reverse order of registration), but for any registered before `run` started (a coverage
    tool's, say). Output that cannot be written (a full disk) is one line on stderr and
    status 1; a reader that went away ends the process quietly, as it ran.
    """
    if not _STATUS:
        return
    status = _STATUS[-1]
    try:
        flush_output()
    except BrokenPipeError:
        pass
    except OSError as exc:
        print(f"Error: {output_error(exc)}", file=sys.stderr)
        status = status or 1
    os._exit(status)


def _exit_status(code: object) -> int:
    """The status of sys.exit(code), as the interpreter makes it."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def main() -> None:
    """The nbspam command on ``sys.argv``; ends with SystemExit, as click commands do.

    The one-message forms end in `boundary.failure`, as the click commands do.
    """
    args = sys.argv[1:]
    if sys.stdout is None:  # started with its standard output closed
        sys.stdout = ClosedOutput()
    # the error status of a command: for filter --exit-status, 3 (its 1 would read as "ham")
    failed = 3 if args[:1] == ["filter"] and "--exit-status" in args else 1
    try:
        status = _one_message(args)
        if status is not None:
            sys.stdout.flush()
    except BaseException as error:  # filter passes its message through and says it itself
        status = failure(error, failed=failed, stdout=True)
        if status is None:
            raise
        sys.exit(status)
    if status is None:
        try:
            from .commands import main as cli_main
        except KeyboardInterrupt as error:  # Ctrl-C while click and the commands load
            sys.exit(failure(error))
        cli_main()  # click itself stops quietly with status 1 when the reader goes away
    else:
        sys.exit(status)


# What the one-message path accepts, by command: each option (by every name the click
# command gives it) and the click parameter it sets, True for a flag; a bare "-" is the
# PATH of stdin. tests/test_entry.py checks that the click commands define each alike.
ONE_MESSAGE_OPTIONS: dict[str, dict[str, tuple[str, bool]]] = {
    "predict": {
        "-m": ("model_path", False),
        "--model": ("model_path", False),
        "-f": ("fmt", False),
        "--format": ("fmt", False),
        "-": ("paths", True),
    },
    "filter": {
        "-m": ("model_path", False),
        "--model": ("model_path", False),
        "--exit-status": ("exit_status", True),
        "--header-style": ("header_style", False),
        "-c": ("config_file", False),
        "--config": ("config_file", False),
    },
}
# filter's --header-style choices (settings.HEADER_STYLES, which would load more; the click
# command's too)
HEADER_STYLES = ("nbspam", "spamassassin", "bogofilter")
# predict's -f choices (the click command's too, which tests/test_entry.py checks)
FORMATS = ("text", "jsonl", "tsv")


def _one_message(args: list[str]) -> int | None:
    """The exit status of ``predict -m MODEL [-f FORMAT] [-]`` or ``filter -m MODEL
    [--exit-status]`` on stdin, or None when ``args`` are anything else."""
    if not args or args[0] not in ONE_MESSAGE_OPTIONS:
        return None
    options = _options(args[1:], ONE_MESSAGE_OPTIONS[args[0]])
    if options is None:
        return None
    if "model_path" not in options:  # the default model, if there is one (else click says why)
        from ..store.home import default_model_path

        options["model_path"] = default_model_path()
        if not os.path.isfile(options["model_path"]):
            return None
    if args[0] == "filter":
        from ..service.filtering import filter_stdin

        style = options.get("header_style")
        if style is not None and style not in HEADER_STYLES:
            return None  # click says why
        return filter_stdin(
            options["model_path"],
            exit_status="exit_status" in options,
            style=style,
            config=options.get("config_file"),
        )
    fmt = options.get("fmt", "text")
    if fmt not in FORMATS:
        return None
    from .stdin import hint_on_terminal, predict_stdin

    if "paths" not in options:
        hint_on_terminal()
    return 0 if predict_stdin(options["model_path"], fmt) else None


def _options(args: list[str], accepted: dict[str, tuple[str, bool]]) -> dict[str, str] | None:
    """The ``accepted`` options in ``args``, by parameter, with their values ("" for a
    flag); None for anything else (which the full parser then handles, errors included)."""
    found: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        param, flag = accepted.get(name, ("", False))
        if param and flag and not eq:
            found[param] = ""
        elif param and not flag and eq and name.startswith("--"):
            found[param] = value
        elif param and not flag and not eq and i + 1 < len(args):
            found[param] = args[i + 1]
            i += 1
        else:
            return None
        i += 1
    return found
