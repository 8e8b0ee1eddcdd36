"""Turn raw RFC 822 message bytes into headers, subject, body text, links and attachments."""

from __future__ import annotations

import binascii
import codecs
import functools
import itertools
import re
import sys
from operator import itemgetter

from ..core.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # the email package is imported only for the mail the fast path leaves
    from email.message import Message
    from email.parser import BytesParser

__all__ = ["ParsedMail", "looks_like_mail", "parse_mail"]


class ParsedMail(Record):
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
# Compiled on first use, from re's cache: a class beyond Latin-1 takes 0.25 ms to compile,
# and only UTF-7 text needs it.
_SURROGATE = "[\ud800-\udfff]"


def _codec_name(label: str | None) -> str | None:
    """Return the Python codec for a charset label, or None if it is unknown or not a text one."""
    if not label or len(label) > _MAX_CHARSET_LABEL:
        return None
    return _lookup_codec(label.strip().strip("\"'").lower())


@functools.lru_cache(maxsize=1)
def _known_codecs() -> frozenset[str]:
    """Normalized names and aliases of the standard library's codecs: the aliases of the
    encodings package and the names of its modules."""
    import encodings.aliases
    import os

    names = set(encodings.aliases.aliases) | set(encodings.aliases.aliases.values())
    names.update(
        entry.partition(".")[0] for path in encodings.__path__ for entry in os.listdir(path)
    )
    return frozenset(names)


def _is_known_codec(label: str) -> bool:
    """Whether codecs.lookup() may find the label, normalized as the encodings package does.

    codecs.lookup() tries an import for every label it does not know and remembers each
    failure for good; checking first keeps unknown labels cheap and that memory bounded.
    """
    import encodings

    name = encodings.normalize_encoding(label)
    return name in _known_codecs() or name.replace(".", "_") in _known_codecs()


@functools.lru_cache(maxsize=256)
def _lookup_codec(label: str) -> str | None:
    """codecs.lookup() with its verdict cached, since unknown labels are slow to reject."""
    if not _is_known_codec(label):
        return None
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
                text = data.decode(encoding)
            else:
                text = codecs.getincrementaldecoder(encoding)().decode(data, final=False)
        except (UnicodeError, LookupError):
            continue
        # UTF-7 is the one text codec that decodes to lone surrogates, which no UTF-8 can hold
        return re.sub(_SURROGATE, "\ufffd", text) if encoding == "utf-7" else text
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
_MAX_ENCODED_WORDS = 1000  # per header value; any further ones stay as they are


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
    for match in itertools.islice(_ENCODED_WORD.finditer(text), _MAX_ENCODED_WORDS):
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


@functools.lru_cache(maxsize=1)
def _email_parser() -> BytesParser:
    """The email package's parser (compat32), imported on first use: a filter started per
    delivery pays some 15 ms for the import, and the fast path reads most mail without it.

    Two guards keep it bounded and whole on hostile parameters: a header value is read
    (Message.get) as its first _MAX_PARAM_CHARS characters, since the parameter splitter takes
    time quadratic in the value's length; and parameters the RFC 2231 decoder fails on (a
    TypeError or ValueError) count as no parameters, instead of failing the whole message.
    """
    from email.message import Message
    from email.parser import BytesParser
    from email.policy import Compat32

    class CappedPolicy(Compat32):
        def header_fetch_parse(self, name: str, value: str) -> str:
            return super().header_fetch_parse(name, value[:_MAX_PARAM_CHARS])

    class GuardedMessage(Message):
        def get_params(self, failobj=None, header="content-type", unquote=True):
            try:
                return super().get_params(failobj, header, unquote)
            except (TypeError, ValueError):
                return failobj

        def get_param(self, param, failobj=None, header="content-type", unquote=True):
            try:
                return super().get_param(param, failobj, header, unquote)
            except (TypeError, ValueError):
                return failobj

    return BytesParser(GuardedMessage, policy=CappedPolicy())


# With max_body_chars the raw input is cut this far past the headers before parsing.
_RAW_BYTES_PER_CHAR = 16
_RAW_SLACK = 64 * 1024
# Caps on the top-level header block (real mail needs some 16 KB, 130 fields): a longer block
# ends at its last line break before the cap, and what follows is read as body; only the first
# _MAX_FIELDS fields are kept, each value cut at _MAX_VALUE_CHARS characters.
MAX_HEADER_BYTES = 64 * 1024
_MAX_FIELDS = 1000
_MAX_VALUE_CHARS = 16 * 1024
# MIME header values as the email package and the fast path read them for their parameters.
_MAX_PARAM_CHARS = 16 * 1024
# The email package reads some 1 MB/s on hostile mail (tiny parts, deep nesting), and checks
# each line against every open boundary: it reads at most this much, and only up to the
# multipart or message header after the first _MAX_NESTED.
_EMAIL_PACKAGE_BYTES = 256 * 1024
_MAX_NESTED = 32
_NESTING_FIELD = re.compile(
    rb"^content-type:\s*(?:multipart|message)/", re.IGNORECASE | re.MULTILINE
)
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


def _end_header_block(data: bytes) -> bytes:
    """End a header block longer than MAX_HEADER_BYTES with a blank line after its last line
    break before that; what follows becomes body."""
    limit = MAX_HEADER_BYTES
    if len(data) <= limit or _HEADER_BLOCK.match(data, 0, limit).end() < limit:
        return data
    cut = data.rfind(b"\n", 0, limit) + 1
    if not cut:  # one long line: end it too
        return data[:limit] + b"\n\n" + data[limit:]
    return data[:cut] + (b"\r\n" if data.startswith(b"\r\n", cut - 2) else b"\n") + data[cut:]


def _for_email_package(data: bytes) -> tuple[bytes, bool]:
    """The start of data that the email package reads in well under a second, and whether it
    is all of data (see _EMAIL_PACKAGE_BYTES)."""
    end = min(len(data), _EMAIL_PACKAGE_BYTES)
    nesting = itertools.islice(_NESTING_FIELD.finditer(data, 0, end), _MAX_NESTED, None)
    end = next((match.start() for match in nesting), end)
    return data[:end], end == len(data)


def _capped(headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The first _MAX_FIELDS header fields, each value cut at _MAX_VALUE_CHARS characters."""
    if len(headers) <= _MAX_FIELDS and all(len(value) <= _MAX_VALUE_CHARS for _, value in headers):
        return headers
    return tuple((name, value[:_MAX_VALUE_CHARS]) for name, value in headers[:_MAX_FIELDS])


def _precut(data: bytes, max_body_chars: int) -> tuple[bytes, bool]:
    """Cut the raw input well past what max_body_chars needs, keeping the headers."""
    budget = max_body_chars * _RAW_BYTES_PER_CHAR + _RAW_SLACK
    if len(data) <= budget:
        return data, False
    blank = _BLANK_LINE.search(data, 0, MAX_HEADER_BYTES)
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
    type_params = part.get_params([])  # [] too for parameters the email package fails on
    disposition = part.get_params([], header="content-disposition")
    filename = _param(disposition, "filename") or _param(type_params, "name")
    attached = bool(filename and disposition) and disposition[0][0].lower() == "attachment"
    is_body = ctype in ("text/plain", "text/html") and not attached
    return ctype, _param(type_params, "charset"), filename, is_body


def _extension(filename: str) -> str:
    """The lower-cased file-name extension without the dot, '' if there is no plausible one."""
    stem, dot, ext = _decode_header(filename).lower().rpartition(".")
    return ext if dot and stem and _EXTENSION.fullmatch(ext) else ""


def _payload_text(
    payload: bytes, ctype: str, charset: str, complete: bool, html_parsed: int = 0
) -> tuple[str, tuple[str, ...], int]:
    """The visible text and link targets of a decoded text/plain or text/html payload, and
    the characters of HTML it had parsed. The HTML parts of one message share the
    characters `htmltext` parses (``html_parsed``: those the parts before took): parsing
    takes time that grows faster than the HTML, and a message of a hundred parts, each as
    long as one may be, took a hundred times as long as one part (3 MB, 9 s)."""
    text = decode_bytes(payload, charset, complete=complete)
    if ctype == "text/html":
        from .htmltext import MAX_HTML_CHARS, html_to_text  # imported for HTML only

        parse = max(0, MAX_HTML_CHARS - html_parsed)
        return (*html_to_text(text, parse), min(len(text), parse))
    return text.replace("\r\n", "\n").replace("\r", "\n"), (), 0


# A leaf part for _assemble: content type, charset, file name, whether it is body text, and
# its decoded payload (b"" for parts that are not body text, which are never decoded).
_Part = tuple[str, str, str, bool, bytes]


def _assemble(
    headers: tuple[tuple[str, str], ...],
    parts: list[_Part],
    max_body_chars: int | None,
    complete: bool,
    defects: int,
) -> ParsedMail:
    """The ParsedMail of a message's headers and leaf parts, in the order of a walk."""
    body = _Body(max_body_chars)
    links: list[str] = []
    attachments: list[tuple[str, str]] = []
    html_parsed = 0  # characters of HTML parsed so far (see _payload_text)
    for ctype, charset, filename, is_body, payload in parts:
        if filename or not is_body:
            attachments.append((ctype, _extension(filename)))
        if not is_body:
            continue
        if body.full:
            body.truncated = body.truncated or (bool(payload) and not payload.isspace())
            continue
        text, part_links, parsed = _payload_text(payload, ctype, charset, complete, html_parsed)
        html_parsed += parsed
        body.add(text)
        links.extend(part_links)
    headers = _capped(headers)
    return ParsedMail(
        headers=headers,
        subject=next((value for name, value in headers if name == "subject"), ""),
        body=body.text(),
        links=tuple(links),
        attachments=tuple(attachments),
        truncated=body.truncated or (not complete and bool(parts) and parts[-1][3]),
        defects=defects,
    )


def _parse(data: bytes, max_body_chars: int | None, complete: bool) -> ParsedMail:
    """Parse with the email package; exceptions are the caller's business."""
    msg = _email_parser().parsebytes(data)
    # raw_items() gives the values as parsed; items() would replace 8-bit bytes by U+FFFD.
    headers = tuple((name.lower(), _decode_header(value)) for name, value in msg.raw_items())
    walked = list(msg.walk())
    parts: list[_Part] = []
    for part in walked:
        if not part.is_multipart():
            ctype, charset, filename, is_body = _describe(part)
            payload = (part.get_payload(decode=True) or b"") if is_body else b""
            parts.append((ctype, charset, filename, is_body, payload))
    defects = sum(len(part.defects) for part in walked)  # after decoding, which adds some
    return _assemble(headers, parts, max_body_chars, complete, defects)


def _unparsed(data: bytes, max_body_chars: int | None, complete: bool) -> ParsedMail:
    """Treat the whole input as one text body, for input the email package failed on."""
    body = _Body(max_body_chars)
    body.add(decode_bytes(data, complete=complete))
    return ParsedMail((), "", body.text(), (), (), body.truncated or not complete, 1)


# --- fast path --------------------------------------------------------------------------------
#
# Most mail has a plain structure: header lines, a blank line, and one body or MIME parts
# between boundary lines. For such mail _fast_parse gives exactly the ParsedMail that _parse
# gives, but reads the bytes with compiled patterns and bytes methods instead of the email
# package's line-by-line feed parser and message objects. It follows the email package (compat32)
# rule by rule where that is cheap and gives up, raising _Unsupported, on everything else: input
# in which the email package would find a defect, bare CR line ends, nested messages, digests,
# uuencoded text, RFC 2231 parameters, MIME headers with 8-bit bytes, deep nesting and more than
# _MAX_PARTS parts. Then parse_mail falls back to _parse, on at most _EMAIL_PACKAGE_BYTES.


class _Unsupported(Exception):
    """Input that the fast path leaves to the email package; the argument says why."""


# One header field as the feed parser reads it: a name of printable characters other than the
# colon (an empty name is a defect), the colon, the rest of the line, and any continuation
# lines, which start with a blank. A header block is a run of them, not starting with a
# continuation line (also a defect).
_FIELD_PATTERN = rb"[\x21-\x39\x3b-\x7e]+:[^\n]*(?:\n|\Z)(?:[ \t][^\n]*(?:\n|\Z))*"
_HEADER_BLOCK = re.compile(rb"(?:" + _FIELD_PATTERN + rb")*")
# Name and value of each field of a checked block, decoded like the email package decodes it
# (ASCII with 8-bit bytes as surrogate escapes); the value as compat32 keeps it: blanks after
# the colon dropped, the line breaks of continuation lines kept.
_FIELD = re.compile(r"^([\x21-\x39\x3b-\x7e]+):[ \t]*([^\n]*(?:\n[ \t][^\n]*)*)", re.MULTILINE)
_LINE_FIELD = re.compile(r"^([^:\n]*):?([^\n]*)", re.MULTILINE)
# The same for the three MIME fields only, whatever the case of their names.
_MIME_FIELD = re.compile(
    r"(content-(?:type|transfer-encoding|disposition)):[ \t]*([^\n]*(?:\n[ \t][^\n]*)*)",
    re.IGNORECASE | re.ASCII,
)
# What may follow "--boundary" on a delimiter line: "--" on the closing one, then blanks.
_DELIMITER_TAIL = re.compile(rb"(--)?[ \t]*\r?(?:\n|\Z)")
_UUENCODE = frozenset({"x-uuencode", "uuencode", "uue", "x-uue"})
_MAX_DEPTH = 8  # multipart nesting; real mail needs three or four levels
_MAX_PARTS = 1000  # parts of a message; more are left to the email package, which reads less


class _Leaf(Record):
    """A non-multipart part as _describe sees it, with its still encoded payload."""

    ctype: str
    charset: str
    filename: str
    is_body: bool
    payload: bytes
    encoding: str
    """The Content-Transfer-Encoding value as get_payload() compares it (lower-cased, '' if
    absent)."""


def _header_block(data: bytes, start: int, end: int) -> tuple[str, int]:
    """The header block of the entity in data[start:end] as text, and where its body starts.

    The block ends at a blank line, which is skipped, or at the end. Its text is what the email
    package reads: ASCII, with 8-bit bytes as surrogate escapes.
    """
    block_end = _HEADER_BLOCK.match(data, start, end).end()
    if block_end == end:
        body = end
    elif data.startswith(b"\n", block_end, end):
        body = block_end + 1
    elif data.startswith(b"\r\n", block_end, end):
        body = block_end + 2
    else:  # not a header line, or a "From " line: the email package records a defect
        raise _Unsupported("header block not ended by a blank line")
    return data[start:block_end].decode("ascii", "surrogateescape"), body


def _headers(block: str) -> tuple[tuple[str, str], ...]:
    """(lower-cased name, _decode_header(value)) of every field, as _parse makes them.

    For a block of plain ASCII without encoded-words _decode_header only drops the line breaks
    and strips the value; since strip() also drops the blanks that compat32 took off after the
    colon, it is enough to unfold the block and strip what follows each colon.
    """
    if block.isascii() and "=?" not in block:
        unfolded = block.replace("\r", "").replace("\n ", " ").replace("\n\t", "\t")
        if not unfolded:
            return ()
        # each line's name (to the first colon, or the whole line) and value; lines end at
        # \n only, as split("\n") ends them (not splitlines(), which also ends them at \f...)
        fields = _LINE_FIELD.findall(unfolded)
        if unfolded.endswith("\n"):
            fields.pop()  # the empty line after the final line break
        names = map(str.lower, map(itemgetter(0), fields))
        return tuple(zip(names, map(str.strip, map(itemgetter(1), fields))))
    return tuple((name.lower(), _decode_header(value)) for name, value in _FIELD.findall(block))


def _mime_fields(block: str) -> dict[str, str]:
    """The first value of each MIME field, as Message.get() finds it; ASCII only.

    Values are what compat32 stores (header_source_parse): the rest of the first line without
    leading blanks, the continuation lines with their line breaks, trailing CR and LF dropped.
    With 8-bit bytes Message.get() would return an email.header.Header instead of the text.
    """
    found: dict[str, str] = {}
    lowered = block.lower()  # as long as the block: it holds ASCII and surrogate escapes only
    at = lowered.find("content-")
    while at >= 0:
        match = _MIME_FIELD.match(block, at) if at == 0 or block[at - 1] == "\n" else None
        if match and match.group(1).lower() not in found:
            key, value = match.group(1).lower(), match.group(2)
            if not value.isascii():
                raise _Unsupported(f"8-bit {key}")
            found[key] = value.rstrip("\r\n")[:_MAX_PARAM_CHARS]  # as the parser's get() does
        at = lowered.find("content-", at + 1)
    return found


def _content_type(mime: dict[str, str]) -> str:
    """Message.get_content_type(): lower-cased type before the first ';', else text/plain."""
    value = mime.get("content-type")
    if value is None:
        return "text/plain"  # the default outside multipart/digest, which is not taken here
    ctype = value.partition(";")[0].strip().lower()
    return ctype if ctype.count("/") == 1 else "text/plain"


def _quote(text: str) -> str:
    """email.utils.quote: backslashes and double quotes escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _unquote(text: str) -> str:
    """email.utils.unquote: one pair of double quotes (unescaping inside) or angle brackets
    taken off. Written out because importing email.utils costs a cold start some 12 ms."""
    if len(text) > 1:
        if text.startswith('"') and text.endswith('"'):
            return text[1:-1].replace("\\\\", "\\").replace('\\"', '"')
        if text.startswith("<") and text.endswith(">"):
            return text[1:-1]
    return text


def _params(value: str) -> list[tuple[str, str]]:
    """What Message.get_params() returns for a header value without RFC 2231 parameters.

    Like email.message._parseparam, the value is split at semicolons outside double quotes
    (an odd count of quotes, backslash-escaped ones not counted, continues a parameter), names
    before an '=' are lower-cased, and names and values are stripped. Like decode_params and
    get_params, the first item's value is unquoted once and every other value unquoted, quoted
    and unquoted again.
    """
    pieces: list[str] = []
    chunks: list[str] = []  # of the piece being read, with its running count of quotes
    quotes = 0
    for chunk in value.split(";"):
        chunks.append(chunk)
        quotes += chunk.count('"') - chunk.count('\\"')
        if quotes % 2 == 0:
            pieces.append(";".join(chunks))
            chunks, quotes = [], 0
    if chunks:
        pieces.append(";".join(chunks))
    params = []
    for index, piece in enumerate(pieces):
        name, equals, text = piece.partition("=")
        name, text = (name.strip().lower(), text.strip()) if equals else (piece.strip(), "")
        if index == 0:
            params.append((name, _unquote(text)))
        elif "*" in name:
            raise _Unsupported("RFC 2231 parameter")
        elif '"' in text or "<" in text or "\\" in text:
            params.append((name, _unquote(f'"{_quote(_unquote(text))}"')))
        else:  # nothing to unquote or quote
            params.append((name, text))
    return params


def _boundary(mime: dict[str, str]) -> bytes:
    """Message.get_boundary(): the first boundary parameter, unquoted again, right-stripped."""
    for name, value in _params(mime["content-type"]):
        if name.lower() == "boundary":
            return _unquote(value).rstrip().encode("ascii")
    raise _Unsupported("multipart without boundary")


def _delimiter(data: bytes, marker: bytes, pos: int, end: int) -> tuple[int, int, bool] | None:
    """The first delimiter line in data[pos:end], pos being a line start.

    A delimiter line is ``marker`` (``--boundary``), an optional ``--`` that makes it the
    closing one, blanks and the line break, as the feed parser's boundary pattern has it.
    Returns where the line starts and ends and whether it closes the multipart.
    """
    nl_marker = b"\n" + marker
    line = pos
    while True:
        if data.startswith(marker, line, end):
            tail = _DELIMITER_TAIL.match(data, line + len(marker), end)
            if tail:
                return line, tail.end(), tail.group(1) is not None
        found = data.find(nl_marker, line, end)
        if found < 0:
            return None
        line = found + 1


def _multipart_parts(data: bytes, start: int, end: int, boundary: bytes) -> list[tuple[int, int]]:
    """The (start, end) of each part of the multipart body data[start:end].

    The part ends where its closing delimiter line starts; the line break before that belongs to
    the delimiter, which the caller strips. Text before the first delimiter (preamble) and after
    the closing one (epilogue) is not needed. A missing first or closing delimiter is a defect,
    and two delimiter lines in a row make the feed parser skip the second one: both are left to
    the email package.
    """
    marker = b"--" + boundary
    first = _delimiter(data, marker, start, end)
    if first is None or first[2]:
        raise _Unsupported("start boundary not found")
    parts = []
    pos = first[1]
    while True:
        found = _delimiter(data, marker, pos, end)
        if found is None:
            raise _Unsupported("close boundary not found")
        line_start, line_end, closing = found
        if line_start == pos:
            raise _Unsupported("delimiter lines in a row")
        parts.append((pos, line_start))
        if len(parts) > _MAX_PARTS:
            raise _Unsupported("too many parts")
        if closing:
            return parts
        pos = line_end


def _strip_line_end(payload: bytes) -> bytes:
    """Drop the line break that belongs to the delimiter line after a part."""
    if payload.endswith(b"\r\n"):
        return payload[:-2]
    if payload.endswith(b"\n"):
        return payload[:-1]
    return payload


def _leaf(mime: dict[str, str], ctype: str, payload: bytes) -> _Leaf:
    """Describe a non-multipart part like _describe does, from its MIME header values."""
    ctype = ctype.split()[0]
    if ctype.startswith(("multipart/", "message/")):
        ctype = "text/plain"
    content_type = mime.get("content-type")
    disposition_value = mime.get("content-disposition")
    type_params = [] if content_type is None else _params(content_type)
    disposition = [] if disposition_value is None else _params(disposition_value)
    filename = _param(disposition, "filename") or _param(type_params, "name")
    attached = bool(filename and disposition) and disposition[0][0].lower() == "attachment"
    is_body = ctype in ("text/plain", "text/html") and not attached
    encoding = mime.get("content-transfer-encoding", "").lower()
    return _Leaf(ctype, _param(type_params, "charset"), filename, is_body, payload, encoding)


def _collect(
    data: bytes,
    block: str,
    body: tuple[int, int],
    in_multipart: bool,
    depth: int,
    leaves: list[_Leaf],
) -> None:
    """Append the leaves of the entity with this header block and body data[body[0]:body[1]]
    to leaves, depth first like Message.walk()."""
    mime = _mime_fields(block)
    ctype = _content_type(mime)
    maintype = ctype.split("/")[0]
    if maintype == "message":
        raise _Unsupported("nested message")
    if maintype != "multipart":
        if len(leaves) >= _MAX_PARTS:
            raise _Unsupported("too many parts")
        payload = data[body[0] : body[1]]
        leaves.append(_leaf(mime, ctype, _strip_line_end(payload) if in_multipart else payload))
        return
    if ctype == "multipart/digest":  # its parts default to message/rfc822
        raise _Unsupported("multipart/digest")
    if depth >= _MAX_DEPTH:
        raise _Unsupported("deep nesting")
    if mime.get("content-transfer-encoding", "8bit").lower() not in ("7bit", "8bit", "binary"):
        raise _Unsupported("encoded multipart")
    for start, end in _multipart_parts(data, body[0], body[1], _boundary(mime)):
        part_block, part_body = _header_block(data, start, end)
        _collect(data, part_block, (part_body, end), True, depth + 1, leaves)


def _decoded(leaf: _Leaf) -> bytes:
    """Message.get_payload(decode=True) of a leaf; base64 the email package finds defective
    and uuencoded text are left to it."""
    if leaf.encoding == "quoted-printable":
        return binascii.a2b_qp(leaf.payload)
    if leaf.encoding == "base64":
        encoded = b"".join(leaf.payload.splitlines())
        if len(encoded) % 4:
            raise _Unsupported("base64 padding")
        try:
            return _strict_base64(encoded)
        except binascii.Error:
            raise _Unsupported("base64 characters") from None
    if leaf.encoding in _UUENCODE:
        raise _Unsupported("uuencoded body")
    return leaf.payload


def _strict_base64(encoded: bytes) -> bytes:
    """``base64.b64decode(encoded, validate=True)``, which is this call from Python 3.11 on,
    without importing `base64` (a one-message run's 0.3 ms); Python 3.10's binascii has no
    strict mode."""
    if sys.version_info >= (3, 11):
        return binascii.a2b_base64(encoded, strict_mode=True)
    import base64

    return base64.b64decode(encoded, validate=True)


def _read_fast(data: bytes, max_body_chars: int | None, complete: bool) -> ParsedMail:
    """The fast path proper: what _parse returns, or _Unsupported."""
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        raise _Unsupported("bare CR line end")  # a line break for the email package
    block, body_start = _header_block(data, 0, len(data))
    leaves: list[_Leaf] = []
    _collect(data, block, (body_start, len(data)), False, 0, leaves)
    # Decode every body part: the email package does so too, and may find defects.
    parts = [
        (
            leaf.ctype,
            leaf.charset,
            leaf.filename,
            leaf.is_body,
            _decoded(leaf) if leaf.is_body else b"",
        )
        for leaf in leaves
    ]
    return _assemble(_headers(block), parts, max_body_chars, complete, 0)


def _fast_parse(data: bytes, max_body_chars: int | None, complete: bool) -> ParsedMail | None:
    """Exactly what _parse returns, or None for input that the fast path leaves to it."""
    try:
        return _read_fast(data, max_body_chars, complete)
    except _Unsupported:
        return None


def _prepare(data: bytes, max_body_chars: int | None) -> tuple[bytes, bool]:
    """The input as both parsers read it, and whether it is complete (not cut by _precut)."""
    data = _end_header_block(skip_mbox_line(bytes(data)))
    if max_body_chars is None:
        return data, True
    data, cut = _precut(data, max_body_chars)
    return data, not cut


def parse_mail(data: bytes, *, max_body_chars: int | None = None) -> ParsedMail:
    """Parse raw message bytes into a ParsedMail; never raises.

    With ``max_body_chars`` at most that many body characters are kept, and the raw input is
    cut before parsing so that huge messages stay cheap. The fast path reads most mail; what it
    leaves is read with the email package.
    """
    data, complete = _prepare(data, max_body_chars)
    try:
        parsed = _fast_parse(data, max_body_chars, complete)
    except Exception:  # a case the fast path did not foresee: the email package decides
        parsed = None
    if parsed is not None:
        return parsed
    data, whole = _for_email_package(data)
    complete = complete and whole
    try:
        return _parse(data, max_body_chars, complete)
    except Exception:  # the email package failed unexpectedly: fall back to plain text
        return _unparsed(data, max_body_chars, complete)
