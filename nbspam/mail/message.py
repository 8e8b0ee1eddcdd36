"""One message as every reader hands it on: its identifier, its bytes, its label, and the
checks each read applies (a size cap, empty and binary data); `Problems` collects what was
skipped and noted; `read_stdin`, the one message on standard input."""

from __future__ import annotations

import sys

from ..core.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import BinaryIO

EMPTY = "empty, not a message"
# The most of one message that is read: a longer one is scored on its first bytes, which
# hold its headers and text (the mail parser itself looks at no more than ~3.3 MB of them
# with the default max-body-chars, so this cut changes no score of theirs).
MAX_MESSAGE_BYTES = 8 << 20
# Binary data, as grep and git tell it: a NUL byte among the first bytes.
BINARY_SNIFF_BYTES = 8 << 10
BINARY = "binary data, not a message"


class Message(Record):
    """One message: its identifier, its raw bytes (or text, from a table), its label if known."""

    id: str
    data: bytes | str
    label: str | None = None


class Problems:
    """Collects what was skipped (``id: reason``) and notes; ``report`` sees each as it comes."""

    def __init__(self, report: Callable[[str], None] | None = None) -> None:
        self.skipped = 0
        self._report = report or (lambda line: None)

    def skip(self, where: str, reason: str) -> None:
        self.skipped += 1
        self._report(f"{where}: {reason}")

    def note(self, text: str) -> None:
        self._report(f"note: {text}")


def is_empty(data: bytes) -> bool:
    """No message at all: no bytes, or only white space (``learn - < /dev/null``)."""
    return not data.strip()


def is_binary(data: bytes) -> bool:
    """Binary data, not a message: a NUL byte in the first `BINARY_SNIFF_BYTES` (the rule of
    grep and git), unless the data starts as mail does (a header block), as broken mail with
    NUL bytes in it can."""
    if b"\0" not in data[:BINARY_SNIFF_BYTES]:
        return False
    from .mailparse import looks_like_mail

    return not looks_like_mail(data)


def checked_message(
    where: str, data: bytes, problems: Problems, size: int | None = None
) -> Message | None:
    """The message ``where`` of these bytes, cut to `MAX_MESSAGE_BYTES` (noted), or None
    (reported as skipped) if they are empty (`is_empty`) or binary. ``size`` is the whole
    message's length where known; more bytes than the cap are enough to tell that it was
    cut."""
    if is_empty(data):
        problems.skip(where, EMPTY)
        return None
    if is_binary(data):
        problems.skip(where, BINARY)
        return None
    if len(data) > MAX_MESSAGE_BYTES:
        problems.note(f"{where}: {cut_text(size)}")
        data = data[:MAX_MESSAGE_BYTES]
    return Message(where, data)


def read_stdin(problems: Problems, stdin: BinaryIO | None = None) -> Message | None:
    """The message on standard input, its first `MAX_MESSAGE_BYTES` (reading stops there:
    the rest is never read); None, reported, for binary data. (Here, not in `messages`, so
    that scoring one message imports none of the readers of files, folders and tables.)"""
    stream = stdin if stdin is not None else sys.stdin.buffer
    return checked_message("-", stream.read(MAX_MESSAGE_BYTES + 1), problems)


def cut_text(size: int | None) -> str:
    """What a note says of a message cut to `MAX_MESSAGE_BYTES` of ``size`` bytes (None: not
    known, as on a pipe)."""
    whole = f"{size / (1 << 20):,.1f} MiB" if size is not None else "a longer message"
    return f"read the first {MAX_MESSAGE_BYTES >> 20} MiB of {whole}, the rest left out"
