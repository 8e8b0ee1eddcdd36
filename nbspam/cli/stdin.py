"""`predict` of the one message on stdin, without click, numpy or scipy.

A mail filter started for every delivery pays for every import: `fast_start` (before click
loads) and the `predict` command both hand this case here, where the model file's scoring
table (`array_scoring`) scores the message and `prediction_lines` prints it.
"""

from __future__ import annotations

import functools
import sys

from ..errors import EXIT_SKIPPED
from ..mail.message import Problems, read_stdin
from ..service.array_scoring import load_array_scorer
from .prediction_lines import predictions

#: What `predict` says when it would wait for a message typed on a terminal.
TERMINAL_HINT = "reading a message from standard input (end with Ctrl-D)"


def hint_on_terminal() -> None:
    """Say on stderr that the message is read from stdin, where stdin is a terminal: else
    `predict` with no PATH would wait for it in silence."""
    if sys.stdin is not None and sys.stdin.isatty():
        print(TERMINAL_HINT, file=sys.stderr, flush=True)


def predict_stdin(model_path: str, fmt: str) -> bool:
    """Score the one message on stdin and print it as `predict` does; False (nothing read,
    nothing printed) where this path cannot be used and the full scorer must.

    As `predict` reads it: its first `messages.MAX_MESSAGE_BYTES` (a note says if there was
    more); binary data is reported on stderr and ends the command with status 3.
    """
    scorer = load_array_scorer(model_path)  # None for a table model, which scores rows of tables
    if scorer is None:
        return False
    problems = Problems(functools.partial(print, file=sys.stderr))
    message = read_stdin(problems)
    if message is None:  # reported, as one skipped input is: one line
        raise SystemExit(EXIT_SKIPPED)
    result = scorer.predict("-", message.data)
    for line in predictions([result], scorer.labels, fmt):  # type: ignore[arg-type]
        print(line)
    return True
