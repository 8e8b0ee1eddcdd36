"""Splitting an mbox into its messages, a block at a time: at most `MAX_MESSAGE_BYTES` of
each message kept, whatever the file holds."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from .message import MAX_MESSAGE_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

BLOCK = 1 << 20  # an mbox is read this much at a time
_LOOKAHEAD = 4096  # more than a match of SEPARATOR can span
# A "From " line after a blank line starts a message if it looks like a separator, which
# ends in a date with the time of day: "From alice@example.com Mon Jan  1 00:00:00 2024".
# Such a line after a blank line (LF or CRLF), found by its literal start "From ": bounded,
# so that it is decided within the bytes kept from one block to the next.
SEPARATOR = re.compile(
    rb"From (?:(?<=\n\nFrom )|(?<=\n\r\nFrom ))\S{1,1000}[ \t][^\n]{0,2000}?\d:\d\d"
)
_CONTENT_LENGTH = re.compile(rb"^content-length[ \t]*:[ \t]*(\d{1,18})[ \t]*\r?$", re.I | re.M)


class _Kept:
    """The bytes of one message as they are read: the first `MAX_MESSAGE_BYTES` + 1 kept,
    all counted."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.kept = 0
        self.size = 0

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        room = MAX_MESSAGE_BYTES + 1 - self.kept
        if room > 0 and piece:
            piece = piece[:room]
            self.parts.append(piece)
            self.kept += len(piece)

    def data(self) -> bytes:
        return b"".join(self.parts)


class _Window:
    """A file read forward a block at a time. ``buf[pos]`` is the last byte dealt with (a
    line end at the start of a message), the bytes after it those still to read."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.buf = b"\n"
        self.pos = 0
        self.eof = False

    def more(self) -> bool:
        """Read the next block onto ``buf`` (dropping what was dealt with); False at the end
        of the file."""
        block = b"" if self.eof else self.f.read(BLOCK)
        self.eof = not block
        self.buf = self.buf[self.pos :] + block
        self.pos = 0
        return not self.eof

    def fill(self, n: int) -> None:
        """Read until ``buf`` holds ``n`` bytes after ``pos`` or the file ends."""
        while len(self.buf) - self.pos <= n and self.more():
            pass

    def take(self, end: int, message: _Kept) -> None:
        """Add the bytes after ``pos`` up to ``end`` to the message; ``end - 1`` becomes
        ``pos``."""
        message.add(self.buf[self.pos + 1 : end])
        self.pos = end - 1

    def past_line(self) -> None:
        """Drop the line that starts after ``pos`` (a From line, maybe a long one)."""
        while True:
            end = self.buf.find(b"\n", self.pos + 1)
            if end >= 0:
                self.pos = end
                return
            self.buf, self.pos = b"\n", 0
            if not self.more():
                return

    def header_end(self) -> int:
        """Where the header block after ``pos`` ends (after its blank line), or -1."""
        lf = self.buf.find(b"\n\n", self.pos)
        crlf = self.buf.find(b"\n\r\n", self.pos, None if lf < 0 else lf)
        return crlf + 3 if crlf >= 0 else lf + 2 if lf >= 0 else -1


def mbox_messages(f: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """(the first `MAX_MESSAGE_BYTES` + 1 bytes, the whole length) of each message of an mbox,
    read a block at a time, never whole.

    A message is what follows its ``From `` line up to the blank line before the next one
    (the ``From `` line and that blank line are left out, as the standard library's
    `mailbox.mbox` gives it; ``>From `` quoting is left as it is). A ``From `` line starts a
    message at the start of the file, or after a blank line if it looks like a separator
    (a sender, then a date with a time of day); any other is a line of the message (mboxo
    left it unquoted). Where the headers give a Content-Length whose end lands on the end of
    the file or on a blank line and a ``From `` line (mboxcl2), the body is that many bytes,
    whatever lines it holds. Text before the first ``From `` line is a message too.
    """
    w = _Window(f)
    w.fill(6)
    started = w.buf.startswith(b"\nFrom ")
    if started:
        w.past_line()
    while True:
        message = _Kept()
        body, length = _content_length(w)
        if length is not None and _length_fits(f, w, body + length):
            ended = _body_of_length(w, body, length, message)
        else:
            ended = _body_to_separator(w, message)
        if started or message.size:
            yield message.data(), message.size
        if not ended:
            return
        w.past_line()
        started = True


def _content_length(w: _Window) -> tuple[int, int | None]:
    """(where the body starts in ``buf``, the Content-Length of the headers) if the headers
    end in a blank line within `MAX_MESSAGE_BYTES`; (-1, None) if not."""
    end = w.header_end()
    while end < 0 and not w.eof and len(w.buf) - w.pos <= MAX_MESSAGE_BYTES:
        w.more()
        end = w.header_end()
    if end < 0:
        return -1, None
    found = _CONTENT_LENGTH.search(w.buf, w.pos + 1, end)
    return end, int(found.group(1)) if found else None


def _length_fits(f: BinaryIO, w: _Window, end: int) -> bool:
    """Whether ``buf[end]`` (past what was read) is the end of the file or where a blank
    line and a ``From `` line begin."""
    try:
        here = f.tell()
        target = here - len(w.buf) + end
        size = f.seek(0, os.SEEK_END)
        f.seek(min(target, size) - 1)
        after = f.read(9) if target <= size else None
        f.seek(here)
    except (OSError, ValueError):  # a pipe has no length to check
        return False
    if after is None or not after.startswith(b"\n"):  # the body ends its last line
        return False
    after = after[1:]
    return after in (b"", b"\n", b"\r\n") or after.startswith((b"\nFrom ", b"\r\nFrom "))


def _body_of_length(w: _Window, body: int, length: int, message: _Kept) -> bool:
    """Read the headers and a body of ``length`` bytes from ``body``, then the blank line
    after it; True if a From line follows, False at the end of the file."""
    w.take(body, message)
    while len(w.buf) - w.pos - 1 < length:
        length -= len(w.buf) - w.pos - 1
        w.take(len(w.buf), message)
        if not w.more():
            return False
    w.take(w.pos + 1 + length, message)
    w.fill(8)
    for blank in (b"\n", b"\r\n"):
        if w.buf.startswith(blank + b"From ", w.pos + 1):
            if blank == b"\r\n":  # kept, as mailbox.mbox keeps it: only LF is its blank line
                message.add(blank)
            w.pos += len(blank)
            return True
    return _body_to_separator(w, message)  # the file changed since: read on as mboxo


def _body_to_separator(w: _Window, message: _Kept) -> bool:
    """Read the message on to the blank line before the next separator; True if one was
    found (its From line then after ``pos``), False at the end of the file."""
    while True:
        found = SEPARATOR.search(w.buf, w.pos + 1)
        if found is not None:
            start = found.start()  # an LF blank line is left out, a CRLF one kept (as mailbox)
            lf = w.buf[start - 2 : start] == b"\n\n"
            message.add(w.buf[w.pos + 1 : start - 1 if lf else start])
            w.pos = start - 1
            return True
        if w.eof:  # a last blank line is left out, as mailbox.mbox leaves it out
            message.add(w.buf[w.pos + 1 : -1 if w.buf.endswith(b"\n\n") else None])
            return False
        # a separator that starts in the last bytes read may need the next ones to be seen
        keep = len(w.buf) - _LOOKAHEAD
        if keep > w.pos + 1:
            w.take(keep, message)
        w.more()
