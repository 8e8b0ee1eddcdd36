"""The spamd protocol (SPAMC/1.5), as SpamAssassin's spamc and Exim's ``spam =`` speak it.

A request is a line ``VERB SPAMC/1.5``, header lines (``Content-length``, ``User``, for
TELL ``Message-class`` and ``Set`` or ``Remove``), a blank line and the message; the answer
is ``SPAMD/1.1 0 EX_OK``, header lines (``Spam: True ; SCORE / THRESHOLD``,
``Content-length``), a blank line and a body. One request a connection, as spamc sends.

The score is the message's log-odds of spam, the threshold the model's spam cutoff (0 for a
model without cutoffs); ``Spam: True`` means nbspam's verdict is spam. An unsure message is
not spam for this yes/no protocol: ``Spam: False``, and its header says unsure.

Nothing is scored here: `scoring` does it, with the library functions the commands use.
"""

from __future__ import annotations

import asyncio
import time

from ..core.digits import ascii_number
from ..errors import InputError, NbspamError, ServeError
from ..mail.headers import header_end
from ..service.filtering import HAM, SPAM
from . import scoring
from .models import check_user
from .scoring import Outcome, Service

VERBS = (
    "CHECK",
    "SYMBOLS",
    "REPORT",
    "REPORT_IFSPAM",
    "PROCESS",
    "HEADERS",
    "PING",
    "TELL",
    "SKIP",
)
MAX_LINE = 8192  # a request line or header line longer than this is refused
MAX_HEADERS = 32

# the sysexits codes spamd answers with
EX_OK, EX_USAGE, EX_DATAERR, EX_NOUSER = 0, 64, 65, 67
EX_UNAVAILABLE, EX_SOFTWARE, EX_TEMPFAIL, EX_PROTOCOL, EX_NOPERM, EX_TOOBIG = 69, 70, 75, 76, 77, 98
_NAMES = {
    EX_OK: "EX_OK",
    EX_USAGE: "EX_USAGE",
    EX_DATAERR: "EX_DATAERR",
    EX_NOUSER: "EX_NOUSER",
    EX_UNAVAILABLE: "EX_UNAVAILABLE",
    EX_SOFTWARE: "EX_SOFTWARE",
    EX_TEMPFAIL: "EX_TEMPFAIL",
    EX_PROTOCOL: "EX_PROTOCOL",
    EX_NOPERM: "EX_NOPERM",
    EX_TOOBIG: "EX_TOOBIG",
}


class Refusal(Exception):
    """A request answered with an error code and closed."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code


class Request:
    """A parsed request: its verb, its headers (names in lower case) and its message."""

    def __init__(self, verb: str, headers: dict[str, str], body: bytes) -> None:
        self.verb = verb
        self.headers = headers
        self.body = body

    @property
    def user(self) -> str | None:
        return self.headers.get("user") or None


async def read_request(reader: asyncio.StreamReader, max_size: int, connection=None) -> Request:
    """Read one request; Refusal for a malformed one or one whose message is over
    ``max_size`` bytes (refused from its Content-length, before a byte of it is read).
    ``connection.busy`` is set once the request line is in (SIGTERM lets it finish)."""
    line = await _line(reader)
    if connection is not None:
        connection.busy = True
    verb, _, version = line.partition(" ")
    if verb not in VERBS or not version.startswith("SPAMC/"):
        raise Refusal(EX_PROTOCOL, f"bad request line {line[:80]!r}")
    headers: dict[str, str] = {}
    while True:
        line = await _line(reader)
        if not line:
            break
        name, colon, value = line.partition(":")
        if not colon or len(headers) >= MAX_HEADERS:
            raise Refusal(EX_PROTOCOL, f"bad header line {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    if "compress" in headers:
        raise Refusal(EX_PROTOCOL, "compressed messages are not supported: call spamc without -z")
    if verb in ("PING", "SKIP"):
        return Request(verb, headers, b"")
    length = headers.get("content-length")
    if length is None:  # an old client: the message runs to the end of the connection
        return Request(verb, headers, await _to_the_end(reader, max_size))
    size = ascii_number(length, 18)
    if size is None:
        raise Refusal(EX_PROTOCOL, f"bad Content-length {length[:40]!r}")
    if size > max_size:
        raise Refusal(EX_TOOBIG, f"message of {size:,} bytes, over the limit of {max_size:,}")
    try:
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise Refusal(EX_PROTOCOL, "the message ended before its Content-length") from None
    return Request(verb, headers, body)


async def _to_the_end(reader: asyncio.StreamReader, max_size: int) -> bytes:
    """The rest of the connection, a message sent without Content-length; Refusal past
    ``max_size`` bytes. Its pieces are joined once at the end: a client that sends a piece
    at a time had each added to a copy of all the pieces before it, time that grew with the
    square of the message (8 MiB in 1 KiB pieces, 16 s of the event loop)."""
    pieces, size = [], 0
    while size <= max_size:
        piece = await reader.read(max_size + 1 - size)
        if not piece:
            break
        pieces.append(piece)
        size += len(piece)
    if size > max_size:
        raise Refusal(EX_TOOBIG, f"message over the limit of {max_size:,} bytes")
    return b"".join(pieces)


async def _line(reader: asyncio.StreamReader) -> str:
    try:
        raw = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        raise Refusal(EX_PROTOCOL, "the request ended early" if exc.partial else "") from None
    except asyncio.LimitOverrunError:
        raise Refusal(EX_PROTOCOL, "a line of the request is too long") from None
    return raw.decode("latin-1").rstrip("\r\n")


def response(code: int, headers: list[tuple[str, str]] = (), body: bytes | None = None) -> bytes:
    """An answer: status line, headers (Content-length added for a body), blank line, body."""
    lines = [f"SPAMD/1.1 {code} {_NAMES.get(code, 'EX_OK')}"]
    if body is not None:
        lines.append(f"Content-length: {len(body)}")
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def refusal(error: Refusal) -> bytes:
    return response(error.code)


async def answer(service: Service, request: Request) -> bytes:
    """The answer to a request, scored or learned through `scoring`; one log line for each
    message."""
    if request.verb == "PING":
        return b"SPAMD/1.5 0 PONG\r\n"
    if request.verb == "SKIP":
        return b""
    start = time.perf_counter()
    message_id = service.next_id()
    user = request.user
    if user is not None:
        try:
            check_user(user)
        except ServeError as error:
            raise Refusal(EX_NOUSER, str(error)) from None
    try:
        if request.verb == "TELL":
            return await _tell(service, request, message_id, start)
        outcome = scoring.score(service.models, user, request.body, message_id)
        body = await _body(service, request, outcome)
    except NbspamError as error:
        service.logged(message_id, user, f"error: {error}", None, start)
        return response(_code(error))
    service.logged(message_id, user, outcome.kind, outcome.log_odds, start)
    spam = "True" if outcome.is_spam else "False"
    verdict = f"{spam} ; {scoring.shown(outcome.log_odds)} / {scoring.shown(outcome.threshold)}"
    return response(EX_OK, [("Spam", verdict)], body)


async def _body(service: Service, request: Request, outcome: Outcome) -> bytes | None:
    verb = request.verb
    if verb == "CHECK":
        return None
    if verb == "PROCESS":
        return outcome.output
    if verb == "HEADERS":
        end = header_end(outcome.output)
        return (
            outcome.output if end < 0 else outcome.output[: end + 1].rstrip(b"\r\n") + b"\r\n\r\n"
        )
    if verb == "SYMBOLS":
        return f"NBSPAM_{outcome.kind.upper()}".encode()
    if verb == "REPORT_IFSPAM" and not outcome.is_spam:
        return None
    async with service.reporting:  # one at a time (`Service.reporting`)
        text = await asyncio.to_thread(scoring.report, service.models, outcome, request.body)
    return text.encode("utf-8")


async def _tell(service: Service, request: Request, message_id: str, start: float) -> bytes:
    """TELL: ``Set: local`` with ``Message-class: spam|ham`` learns, ``Remove: local``
    forgets; answered ``DidSet: local`` / ``DidRemove: local`` when the model changed."""
    if not service.allow_tell:
        raise Refusal(EX_NOPERM, "TELL is not enabled: start the server with --allow-tell")
    headers = request.headers
    wanted = headers.get("message-class", "").lower()
    sets = "local" in headers.get("set", "").lower()
    removes = "local" in headers.get("remove", "").lower()
    if sets == removes or (sets and wanted not in (SPAM, HAM)):
        raise Refusal(
            EX_PROTOCOL, "TELL needs Set: local with Message-class: spam|ham, or Remove: local"
        )
    learn_as = wanted if sets else None
    changed = await asyncio.to_thread(
        scoring.tell, service.models, request.user, request.body, learn_as
    )
    what = f"learned {learn_as}" if sets else "forgot"
    service.logged(message_id, request.user, what if changed else f"{what}: unchanged", None, start)
    done = [("DidSet" if sets else "DidRemove", "local")] if changed else []
    return response(EX_OK, done)


_TIMEOUT = getattr(asyncio, "timeout", None)  # Python 3.11 on


async def within(awaitable, seconds: float):
    """``await awaitable``, TimeoutError after ``seconds``: by `asyncio.timeout` where there
    is one (a timer, where `asyncio.wait_for` of Python 3.11 makes a task each call)."""
    if _TIMEOUT is None:
        return await asyncio.wait_for(awaitable, seconds)
    async with _TIMEOUT(seconds):
        return await awaitable


def _code(error: NbspamError) -> int:
    """The sysexits code for a failure: bad data (binary), else a temporary failure (a
    model that cannot be read now), so that a mail server tries again."""
    return EX_DATAERR if isinstance(error, InputError) else EX_TEMPFAIL


async def serve_connection(
    service: Service,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    timeout: float,
    connection=None,
) -> None:
    """One connection: one request read within ``timeout`` seconds (a client that sends
    slowly or not at all is cut off), answered, closed."""
    try:
        try:
            request = await within(read_request(reader, service.max_size, connection), timeout)
        except Refusal as error:
            if str(error):
                service.log(f"refused: {error}")
            if error.code != EX_PROTOCOL or str(error):
                writer.write(refusal(error))
            return
        except (TimeoutError, asyncio.TimeoutError):
            service.log(f"cut off: no whole request within {timeout:g} s")
            return
        try:
            writer.write(await answer(service, request))
        except Refusal as error:
            service.log(f"refused: {error}")
            writer.write(refusal(error))
        if writer.transport.get_write_buffer_size():
            await within(writer.drain(), timeout)
    except (ConnectionError, TimeoutError, asyncio.TimeoutError):
        pass
