"""Mail headers: where they end, the digest that identifies a message, where the verdict header
`filter` adds goes, and the Date a chronological split orders by."""

from __future__ import annotations

import re
from datetime import timezone

STATUS_HEADER = b"X-Nbspam-Status"
_STATUS_LINE = re.compile(rb"x-nbspam-status[ \t]*:", re.IGNORECASE)


def message_digest(data: bytes | str) -> bytes:
    """16-byte BLAKE2b digest identifying a message by its content.

    Header lines nbspam adds itself (``X-Nbspam-*``) are left out, so a message that passed
    through `nbspam filter` has the digest it had before.
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    end = header_end(data)
    head = data if end < 0 else data[: end + 1]
    if b"x-nbspam-" in head.lower():
        data = _OWN_HEADER.sub(b"", head) + data[len(head) :]
    import hashlib  # here: loading it (and OpenSSL) costs 3-10 ms that scoring does not need

    return hashlib.blake2b(data, digest_size=16).digest()


def header_end(data: bytes) -> int:
    """Where the header ends: the first blank line ("\\n\\n" or "\\r\\n\\r\\n"), or -1.

    The CRLF form is looked for only before the first "\\n\\n", so a message with LF line
    ends is not read to its end twice.
    """
    end = data.find(b"\n\n")
    # a "\r\n\r\n" before ``end`` runs one byte into it at most, as in "\r\n\r\n\n"
    crlf = data.find(b"\r\n\r\n", 0, len(data) if end < 0 else end + 1)
    return end if crlf < 0 else crlf


#: Headers of other filters' styles (`--header-style`) that nbspam writes just before its own
#: X-Nbspam-Status: only those directly before it are nbspam's.
STYLE_HEADERS = (b"x-spam-flag", b"x-spam-status", b"x-bogosity")
_STYLE = rb"(?:" + b"|".join(STYLE_HEADERS) + rb")[ \t]*:[^\n]*\n(?:[ \t][^\n]*\n)*"
_OWN_HEADER = re.compile(rb"(?im)^(?:" + _STYLE + rb")*x-nbspam-[^:\n]*:[^\n]*\n(?:[ \t][^\n]*\n)*")
_STYLE_LINE = re.compile(rb"(?:" + b"|".join(STYLE_HEADERS) + rb")[ \t]*:", re.IGNORECASE)


def add_status_header(data: bytes, value: str) -> bytes:
    """``data`` with ``X-Nbspam-Status: value`` as its first header line (`add_headers`)."""
    return add_headers(data, [(STATUS_HEADER.decode(), value)])


def add_headers(data: bytes, fields: list[tuple[str, str]]) -> bytes:
    """``data`` with these (name, value) header fields as its first header lines, every
    other byte as it was, except that the fields nbspam added before are taken out: every
    X-Nbspam-Status header, with the style headers (`STYLE_HEADERS`) just before it.
    The last field must be X-Nbspam-Status, which marks the others as nbspam's.

    The lines go after an mbox ``From `` line if the message starts with one, and end as
    the message's first line does (CRLF or LF).
    """
    start = _headers_start(data)
    first = data.find(b"\n")
    eol = b"\r\n" if first > 0 and data[first - 1 : first] == b"\r" else b"\n"
    lines = b"".join(f"{name}: {value}".encode() + eol for name, value in fields)
    return data[:start] + lines + _without_status_header(data[start:])


def _headers_start(data: bytes) -> int:
    """Where the header lines begin: after an mbox ``From `` line, else at 0."""
    if data.startswith(b"From "):
        end = data.find(b"\n")
        if end >= 0:
            return end + 1
    return 0


def _without_status_header(data: bytes) -> bytes:
    """``data`` less every X-Nbspam-Status header (with its continuation lines) found before
    the first blank line, and the style headers (`STYLE_HEADERS`) right before each."""
    kept: list[bytes] = []
    style: list[bytes] = []  # style header lines not yet known to be nbspam's
    pos, field = 0, b""
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end + 1
        line = data[pos:end]
        if line in (b"\n", b"\r\n"):
            break
        if line[:1] not in (b" ", b"\t"):
            field = (
                b"own" if _STATUS_LINE.match(line) else b"style" if _STYLE_LINE.match(line) else b""
            )
            if field == b"own":
                style = []
            elif not field:
                kept += style
                style = []
        if field == b"style":
            style.append(line)
        elif not field:
            kept.append(line)
        pos = end
    return b"".join(kept + style) + data[pos:]


def one_line(text: str) -> str:
    """The text with its line breaks made spaces: one header or record field."""
    return " ".join(text.splitlines())


def message_time(data: bytes | str, mail: str = "auto") -> float | None:
    """Seconds since the epoch of a mail's Date header; None for text or a missing/bad Date.

    The header block is read as the parser reads it for the tokens: at most its first
    `mailparse.MAX_HEADER_BYTES`, to the last line break before them (the standard
    library's parser, which odd blocks are given to, takes some 0.8 seconds a megabyte).

    ``mail`` is the tokenizer's setting, read as the tokenizer reads it: 'never' takes
    nothing for mail, 'auto' only bytes that look like mail, 'always' everything. A Date
    without a time zone is taken as UTC.
    """
    if isinstance(data, str):
        if mail != "always":
            return None
        data = data.encode("utf-8", "surrogateescape")
    from .mailparse import MAX_HEADER_BYTES, looks_like_mail, skip_mbox_line

    if mail == "never" or (mail == "auto" and not looks_like_mail(data)):
        return None
    from email.utils import parsedate_to_datetime  # only chronological splits read dates

    data = skip_mbox_line(data)
    end = header_end(data)
    if end < 0:
        end = len(data)
    if end > MAX_HEADER_BYTES:  # where the parser ends a longer block: its last line break
        end = data.rfind(b"\n", 0, MAX_HEADER_BYTES) + 1 or MAX_HEADER_BYTES
    value = date_value(data[:end])
    if value is None:
        return None
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


# After a line feed: a line the standard library's header parser would not read as a header
# line (a field name of printable ASCII and a colon, or a continuation), and a Date field
# with its continuation lines. (Each starts with the line feed, which `re` looks for in C.)
_NOT_HEADER_LINE = re.compile(rb"\n(?![ \t]|[\x21-\x39\x3b-\x7e]+:)")
# The lines that parser reads as header lines all the same (`email.feedparser.headerRE`):
# an envelope "From " line, or a colon after no name.
_HEADER_ALL_THE_SAME = re.compile(rb"From |[\x21-\x39\x3b-\x7e]*:")
_DATE = re.compile(rb"\n[dD][aA][tT][eE]:([^\n]*(?:\n[ \t][^\n]*)*)")


def date_value(head: bytes) -> str | None:
    """The value of the first Date field of a header block, as the standard library's
    header parser (policy compat32) gives it, its line breaks as LF; None where there is
    none, or where it is not ASCII (that parser gives no string then).

    An ordinary header block is searched by two patterns, some 50 times quicker than
    parsing it; one that parser reads its own way (a bare CR, an envelope or nameless line,
    a first line that continues nothing) is given to it. That parser ends the header at the
    first line that is no header line (the body of a message without the blank line, as
    every message of the Enron corpus is): so is the block searched here.
    """
    plain = b"\n" + head.replace(b"\r\n", b"\n")  # every line after a line feed
    odd = _NOT_HEADER_LINE.search(plain)
    if odd is not None and not _HEADER_ALL_THE_SAME.match(plain, odd.end()):
        plain, odd = plain[: odd.start()], None
    if b"\r" in plain or plain[1:2] in (b" ", b"\t") or odd is not None:
        from email.parser import BytesHeaderParser
        from email.policy import compat32

        value = BytesHeaderParser(policy=compat32).parsebytes(head + b"\n\n").get("date")
        return value if isinstance(value, str) else None
    found = _DATE.search(plain)
    if found is None or not found.group(1).isascii():
        return None
    return found.group(1).decode("ascii").lstrip(" \t")
