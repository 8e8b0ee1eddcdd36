"""Turn raw RFC 822 message bytes into headers, subject, body text, links and attachments."""

from __future__ import annotations

import binascii
import codecs
import functools
import itertools
import re
from dataclasses import dataclass
from email.message import Message
from email.parser import BytesParser
from email.policy import compat32

from .htmltext import html_to_text

__all__ = ["ParsedMail", "html_to_text", "looks_like_mail", "parse_mail"]


@dataclass(frozen=True, slots=True)
class ParsedMail:
    """The parts of one message that a tokenizer needs."""

    headers: tuple[tuple[str, str], ...]
    """(lower-cased name, decoded unfolded value) of every top-level header, in order."""
    subject: str
    """Decoded Subject, '' if there is none."""
    body: str
    """Visible text of every text/plain and text/html part, parts joined by a newline."""
    links: tuple[str, ...]
    """Link targets found in the HTML parts, in order."""
    attachments: tuple[tuple[str, str], ...]
    """(content type, lower-cased file-name extension or '') of every non-body part and of
    every part with a file name."""
    truncated: bool
    """True if body text was cut because of ``max_body_chars``."""
    defects: int
    """Number of defects the email package reported (1 if the message could not be parsed)."""


# --- charsets ---------------------------------------------------------------------------------

# Codecs that are never mail charsets; punycode in particular decodes in quadratic time.
_NOT_MAIL_CHARSETS = frozenset(
    {"idna", "punycode", "undefined", "unicode-escape", "raw-unicode-escape"}
)
# Like web browsers, read text labelled Latin-1 as its superset windows-1252.
_CHARSET_UPGRADES = {"iso8859-1": "cp1252"}
_MAX_CHARSET_LABEL = 64


def _codec_name(label: str | None) -> str | None:
    """Return the Python codec for a charset label, or None if it is unknown or not a text one."""
    if not label or len(label) > _MAX_CHARSET_LABEL:
        return None
    return _lookup_codec(label.strip().strip("\"'").lower())


@functools.lru_cache(maxsize=256)
def _lookup_codec(label: str) -> str | None:
    """codecs.lookup() with its verdict cached, since unknown labels are slow to reject."""
    try:
        name = codecs.lookup(label).name
    except (LookupError, ValueError):
        return None
    try:
        b"a".decode(name)
    except LookupError:  # a bytes-to-bytes codec such as base64
        return None
    except UnicodeError:  # a text codec that cannot decode this sample (utf-16)
        pass
    if name in _NOT_MAIL_CHARSETS:
        return None
    return _CHARSET_UPGRADES.get(name, name)


def decode_bytes(data: bytes, charset: str | None = None, *, complete: bool = True) -> str:
    """Decode with the declared charset, else UTF-8, else windows-1252, else Latin-1.

    With ``complete=False`` the data may end in the middle of a character (the input was cut),
    and such a trailing fragment is dropped instead of failing the strict decoders.
    """
    for encoding in (_codec_name(charset), "utf-8", "cp1252"):
        if encoding is None:
            continue
        try:
            if complete:
                return data.decode(encoding)
            return codecs.getincrementaldecoder(encoding)().decode(data, final=False)
        except (UnicodeError, LookupError):
            continue
    return data.decode("latin-1")


def _raw_bytes(text: str) -> bytes:
    """Recover the bytes of a str the email package made with the surrogateescape handler."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


# --- headers ----------------------------------------------------------------------------------

# The encoded text may hold spaces, which broken mailers leave in, but never a "?".
_ENCODED_WORD = re.compile(r"=\?([^?]*)\?([bBqQ])\?([^?]*)\?=")


def _word_bytes(encoding: str, encoded: str) -> bytes | None:
    """The bytes of one encoded-word's text, or None if it is not valid base64."""
    data = encoded.encode("latin-1")
    if encoding in "qQ":
        return binascii.a2b_qp(data, header=True)
    try:
        return binascii.a2b_base64(data + b"==")  # surplus padding is ignored, missing is not
    except binascii.Error:
        return None


def _decode_words(text: str) -> str:
    """Decode the RFC 2047 encoded-words of a header value whose bytes are Latin-1 characters.

    White space between two encoded-words is dropped, and adjacent words in one charset are
    decoded together, since a character may be split across them. Unlike
    email.header.decode_header this takes linear time and keeps a malformed word as it is.
    """
    segments: list[tuple[bytes, str | None]] = []  # (bytes, charset); None for plain text
    position = 0
    for match in _ENCODED_WORD.finditer(text):
        data = _word_bytes(match.group(2), match.group(3))
        if data is None:
            continue  # left in the plain text before the next word
        plain = text[position : match.start()]
        if plain and not (plain.isspace() and segments and segments[-1][1] is not None):
            segments.append((plain.encode("latin-1"), None))
        segments.append((data, match.group(1).split("*")[0].lower()))  # drop RFC 2231 *lang
        position = match.end()
    segments.append((text[position:].encode("latin-1"), None))
    return "".join(
        decode_bytes(b"".join(data for data, _ in run), charset)
        for charset, run in itertools.groupby(segments, key=lambda segment: segment[1])
    )


def _decode_header(raw: str) -> str:
    """Unfold a raw header value, decode its RFC 2047 encoded-words and its 8-bit bytes."""
    text = raw.replace("\r", "").replace("\n", "")
    if text.isascii() and "=?" not in text:
        return text.strip()
    data = _raw_bytes(text)
    if b"=?" not in data:
        return decode_bytes(data).strip()
    return _decode_words(data.decode("latin-1")).strip()


# --- message detection ------------------------------------------------------------------------

_SNIFF_BYTES = 16 * 1024
_SNIFF_LINES = 64
_HEADER_LINE = re.compile(rb"([\x21-\x39\x3b-\x7e]+):(?!//)")
_WELL_KNOWN_HEADERS = frozenset(
    b"received from to cc subject date return-path message-id mime-version content-type "
    b"delivered-to reply-to sender".split()
)


def skip_mbox_line(data: bytes) -> bytes:
    """Drop an mbox ``From `` separator line at the start."""
    if data.startswith(b"From "):
        end = data.find(b"\n")
        return b"" if end < 0 else data[end + 1 :]
    return data


def looks_like_mail(data: bytes) -> bool:
    """Tell whether data starts like an RFC 822 message rather than plain text.

    After an optional mbox ``From `` line the first line must be a header line, and the header
    block must hold a well-known header (Received, From, Subject, X-..., ...) or two header lines.
    """
    lines = skip_mbox_line(data[:_SNIFF_BYTES]).splitlines()[:_SNIFF_LINES]
    seen = 0
    for index, line in enumerate(lines):
        if index and line[:1] in (b" ", b"\t"):
            continue  # folded continuation of the previous header
        match = _HEADER_LINE.match(line)
        if match is None:
            return False
        name = match.group(1).lower()
        seen += 1
        if seen >= 2 or name in _WELL_KNOWN_HEADERS or name.startswith(b"x-"):
            return True
    return False


# --- message parsing --------------------------------------------------------------------------

_PARSER = BytesParser(policy=compat32)
# With max_body_chars the raw input is cut this far past the headers before parsing.
_RAW_BYTES_PER_CHAR = 16
_RAW_SLACK = 64 * 1024
_MAX_HEADER_BYTES = 1024 * 1024
_BLANK_LINE = re.compile(rb"\r?\n\r?\n")
_EXTENSION = re.compile(r"[a-z0-9]{1,10}")


class _Body:
    """Body text collected part by part, cut at an optional character limit."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.pieces: list[str] = []
        self.size = 0
        self.truncated = False

    @property
    def full(self) -> bool:
        """Whether the limit is reached, so that further parts need not be decoded."""
        return self.limit is not None and self.size >= self.limit

    def add(self, text: str) -> None:
        """Append the text of one part after a newline, cut at the limit; skip blank text."""
        if not text or text.isspace():
            return
        if self.pieces:
            text = "\n" + text
        if self.limit is not None and self.size + len(text) > self.limit:
            text = text[: self.limit - self.size]
            self.truncated = True
        self.pieces.append(text)
        self.size += len(text)

    def text(self) -> str:
        """The collected body text."""
        return "".join(self.pieces)


def _precut(data: bytes, max_body_chars: int) -> tuple[bytes, bool]:
    """Cut the raw input well past what max_body_chars needs, keeping headers up to 1 MiB."""
    budget = max_body_chars * _RAW_BYTES_PER_CHAR + _RAW_SLACK
    if len(data) <= budget:
        return data, False
    blank = _BLANK_LINE.search(data, 0, _MAX_HEADER_BYTES)
    keep = (blank.end() if blank else 0) + budget
    return (data[:keep], True) if keep < len(data) else (data, False)


def _param(params: list[tuple[str, str | tuple[str, str, str]]], name: str) -> str:
    """The first value of a MIME parameter, RFC 2231 encoding undone; '' if it is absent."""
    for key, value in params:
        if key != name:
            continue
        if isinstance(value, tuple):  # RFC 2231: (charset, language, text with bytes as Latin-1)
            charset, _, text = value
            return decode_bytes(text.encode("latin-1", "replace"), charset)
        return value
    return ""


def _describe(part: Message) -> tuple[str, str, str, bool]:
    """Content type, charset and file name of a leaf part, and whether its text is body text.

    Reads the parameters once instead of through get_filename() and get_content_charset(),
    which parse the Content-Type header again each.
    """
    ctype = part.get_content_type().split()[0]  # tolerate "text/plain charset=us-ascii"
    if ctype.startswith(("multipart/", "message/")):
        ctype = "text/plain"  # no boundary or no message inside: the parser left it as text
    type_params = part.get_params([])
    disposition = part.get_params([], header="content-disposition")
    filename = _param(disposition, "filename") or _param(type_params, "name")
    attached = bool(filename and disposition) and disposition[0][0].lower() == "attachment"
    is_body = ctype in ("text/plain", "text/html") and not attached
    return ctype, _param(type_params, "charset"), filename, is_body


def _extension(filename: str) -> str:
    """The lower-cased file-name extension without the dot, '' if there is no plausible one."""
    stem, dot, ext = _decode_header(filename).lower().rpartition(".")
    return ext if dot and stem and _EXTENSION.fullmatch(ext) else ""


def _part_text(
    part: Message, ctype: str, charset: str, complete: bool
) -> tuple[str, tuple[str, ...]]:
    """Decode a text/plain or text/html part to visible text and link targets."""
    data = part.get_payload(decode=True) or b""
    text = decode_bytes(data, charset, complete=complete)
    if ctype == "text/html":
        return html_to_text(text)
    return text.replace("\r\n", "\n").replace("\r", "\n"), ()


def _has_text(part: Message) -> bool:
    """Whether a part's payload holds anything but white space."""
    data = part.get_payload(decode=True)
    return bool(data) and not data.isspace()


def _parse(data: bytes, max_body_chars: int | None, complete: bool) -> ParsedMail:
    """Parse with the email package; exceptions are the caller's business."""
    msg = _PARSER.parsebytes(data)
    # raw_items() gives the values as parsed; items() would replace 8-bit bytes by U+FFFD.
    headers = tuple((name.lower(), _decode_header(value)) for name, value in msg.raw_items())
    body = _Body(max_body_chars)
    links: list[str] = []
    attachments: list[tuple[str, str]] = []
    parts = list(msg.walk())
    last_is_body = False
    for part in parts:
        if part.is_multipart():
            continue
        ctype, charset, filename, last_is_body = _describe(part)
        if filename or not last_is_body:
            attachments.append((ctype, _extension(filename)))
        if not last_is_body:
            continue
        if body.full:
            body.truncated = body.truncated or _has_text(part)
            continue
        text, part_links = _part_text(part, ctype, charset, complete)
        body.add(text)
        links.extend(part_links)
    return ParsedMail(
        headers=headers,
        subject=next((value for name, value in headers if name == "subject"), ""),
        body=body.text(),
        links=tuple(links),
        attachments=tuple(attachments),
        truncated=body.truncated or (not complete and last_is_body),
        defects=sum(len(part.defects) for part in parts),
    )


def _unparsed(data: bytes, max_body_chars: int | None, complete: bool) -> ParsedMail:
    """Treat the whole input as one text body, for input the email package failed on."""
    body = _Body(max_body_chars)
    body.add(decode_bytes(data, complete=complete))
    return ParsedMail((), "", body.text(), (), (), body.truncated or not complete, 1)


def parse_mail(data: bytes, *, max_body_chars: int | None = None) -> ParsedMail:
    """Parse raw message bytes into a ParsedMail; never raises.

    With ``max_body_chars`` at most that many body characters are kept, and the raw input is
    cut before parsing so that huge messages stay cheap.
    """
    data = skip_mbox_line(bytes(data))
    complete = True
    if max_body_chars is not None:
        data, cut = _precut(data, max_body_chars)
        complete = not cut
    try:
        return _parse(data, max_body_chars, complete)
    except Exception:  # the email package failed unexpectedly: fall back to plain text
        return _unparsed(data, max_body_chars, complete)
