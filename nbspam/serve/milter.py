"""The milter protocol (version 6), as Postfix (``smtpd_milters``) and Sendmail speak it.

Written here, in about two hundred lines, rather than through a library: pymilter needs
the C libmilter and its threads, and a pure-Python milter package would be a dependency
for a protocol this small. Every packet is a 4-byte length, a command letter and its data;
the MTA sends the envelope (RCPT), the header fields (L), the body in pieces (B) and the end
of the message (E); the filter answers CONTINUE to each step and, at the end, its changes
and a final ACCEPT or REJECT.

At the end of a message nbspam's ``X-Nbspam-Status`` header is inserted as the first header
(any such header the message brought is deleted), as `nbspam filter` adds it; with an
action for the verdict, a spam (or unsure) message is also rejected with 550 5.7.1 or put in
the MTA's quarantine (Postfix: the hold queue). The recipients choose the user model: the
user each is delivered to (`mailbox`), where every recipient has the same one; else the
site model.

A message over the size limit is scored on its first ``max_size`` bytes; the rest is read
and dropped, never held. Nothing is scored here: `scoring` does it.
"""

from __future__ import annotations

import asyncio
import re
import struct
import time

from ..errors import NbspamError, ServeError
from ..mail.headers import STATUS_HEADER
from ..service.filtering import status_value
from . import scoring
from .models import check_user
from .scoring import Service

VERSION = 6
MAX_PACKET = 1 << 20  # a milter packet carries at most a 64 KiB piece of body

# actions the filter may take (SMFIF_*) and steps it can do without (SMFIP_*)
ADD_HEADERS, CHANGE_HEADERS, QUARANTINE = 0x01, 0x10, 0x20
NO_CONNECT, NO_HELO, NO_MAIL, NO_UNKNOWN, NO_DATA = 0x01, 0x02, 0x04, 0x100, 0x200
NO_REPLY = {  # no-reply flags: a step the MTA sends without waiting for an answer
    b"L": 0x80,
    b"R": 0x8000,
    b"N": 0x40000,
    b"B": 0x80000,
}
ANSWERED = b"CHMRTLNBU"  # steps answered with CONTINUE unless told not to

# a queue id as the log shows it: Postfix's and Sendmail's are letters and digits
QUEUE_ID = re.compile("[!-~]{1,64}")

ACTIONS = ("header", "reject", "quarantine")
VERDICTS = ("spam", "unsure", "ham")


def check_actions(actions: dict[str, str]) -> dict[str, str]:
    """Refuse an unknown verdict or action (``--milter-action spam=reject``)."""
    for verdict, action in actions.items():
        if verdict not in VERDICTS or action not in ACTIONS:
            raise ServeError(
                f"bad --milter-action {verdict}={action}: VERDICT is spam, unsure or ham, "
                f"ACTION header, reject or quarantine"
            )
    return actions


def packet(command: bytes, data: bytes = b"") -> bytes:
    return struct.pack(">I", len(data) + 1) + command + data


def _strings(data: bytes) -> list[bytes]:
    return data.split(b"\0")[:-1] if data.endswith(b"\0") else data.split(b"\0")


def _queue_id(value: str) -> str | None:
    """The MTA's queue id, if it is one word of printable ASCII: it goes into the log line
    of the message, and whoever reaches the socket sends it (a line break in it wrote a
    second log line of their making). None for anything else: the message is then logged
    under a number of the server's."""
    return value if QUEUE_ID.fullmatch(value) else None


class Message:
    """The message of one SMTP transaction, as the MTA passes it."""

    def __init__(self, max_size: int, delimiter: str = "") -> None:
        self.max_size = max_size
        self.delimiter = delimiter  # the recipient delimiter (`mailbox`)
        self.users: set[str] = set()  # the recipients' mailboxes: two at most (`recipient`)
        self.parts: list[bytes] = []
        self.size = 0
        self.status_headers = 0  # X-Nbspam-Status fields the message brought

    def add(self, data: bytes) -> None:
        room = self.max_size - self.size
        if room > 0:
            self.parts.append(data[:room])
        self.size += len(data)

    def header(self, name: bytes, value: bytes) -> None:
        if name.lower() == STATUS_HEADER.lower():
            self.status_headers += 1
        self.add(name + b": " + value + b"\r\n")

    def recipient(self, address: str, mailer: str | None = None) -> None:
        """Note a recipient's mailbox. Only whether they all share one matters (`user`), so
        two are kept at most: a client may send recipients without end. A recipient the MTA
        sends on (``mailer``, its ``{rcpt_mailer}``: `leaves`) is no user of this host's:
        the message then gets the site model alone."""
        if len(self.users) < 2:
            self.users.add("" if leaves(mailer) else mailbox(address, self.delimiter))

    def user(self) -> str | None:
        """The mailbox shared by every recipient, if it is a valid user name."""
        if len(self.users) != 1:
            return None
        try:
            return check_user(next(iter(self.users)))
        except ServeError:
            return None


def leaves(mailer: str | None) -> bool:
    """Whether the MTA's delivery agent ``mailer`` (the macro ``{rcpt_mailer}``, which
    Postfix and Sendmail send with each recipient by default: local, virtual, lmtp, smtp,
    relay, esmtp) sends the message off this host, or nowhere (error, discard). Such a
    recipient's local part names no user here: mail from a local sender to
    ``alice@elsewhere.example``, scored with local alice's layer, would carry in its
    X-Nbspam-Status what alice taught her layer to anyone outside. Where the MTA sends no
    such macro (None), every recipient is taken for a local one."""
    if mailer is None:
        return False
    mailer = mailer.lower()
    return "smtp" in mailer or mailer in ("relay", "error", "discard")  # not lmtp: no "smtp"


def mailbox(address: str, delimiter: str = "") -> str:
    """The user a recipient ``address`` is delivered to, as Postfix's local delivery and
    Dovecot (``auth_username_format = %Lu``) find it: its local part in lower case, without
    its extension, which starts at the first of the ``delimiter`` characters (Postfix's
    ``recipient_delimiter``) that follows a name. ``<Alice+lists@example.com>`` is alice
    with the delimiter +, alice+lists without one."""
    address = address.strip("<>")
    local = (address.rpartition("@")[0] or address).lower()
    cut = min((i for i in map(local.find, delimiter) if i > 0), default=-1)
    return local[:cut] if cut > 0 else local


def check_delimiter(delimiter: str) -> str:
    """Refuse a recipient delimiter of other characters than ``+ - = _ .`` (a letter would
    cut names, an @ or a / is never one)."""
    if delimiter.strip("+-=_.") or len(delimiter) > 5:
        raise ServeError(f"bad --recipient-delimiter {delimiter[:16]!r}: up to five of + - = _ .")
    return delimiter


async def serve_connection(
    service: Service,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    connection=None,
    *,
    timeout: float,
    idle_timeout: float,
    actions: dict[str, str],
    delimiter: str = "",
) -> None:
    """One MTA connection: its messages one after another, until QUIT or a time-out (a
    packet must begin within ``idle_timeout`` seconds and arrive whole within ``timeout``);
    ``delimiter``: the recipient delimiter (`mailbox`)."""
    session = _Session(service, writer, actions, delimiter)
    try:
        while True:
            try:
                head = await asyncio.wait_for(reader.readexactly(4), idle_timeout)
                if connection is not None:
                    connection.busy = True
                (length,) = struct.unpack(">I", head)
                if not 0 < length <= MAX_PACKET:
                    service.log(f"milter: refused a packet of {length:,} bytes")
                    return
                data = await asyncio.wait_for(reader.readexactly(length), timeout)
            except (TimeoutError, asyncio.TimeoutError):
                service.log("milter: cut off, the MTA sent nothing in time")
                return
            except asyncio.IncompleteReadError:
                return
            if not await session.step(data[:1], data[1:]):
                return
            if connection is not None and session.message is None:
                connection.busy = False
            await asyncio.wait_for(writer.drain(), timeout)
    except (ConnectionError, TimeoutError, asyncio.TimeoutError):
        pass


class _Session:
    def __init__(
        self,
        service: Service,
        writer: asyncio.StreamWriter,
        actions: dict[str, str],
        delimiter: str = "",
    ):
        self.service = service
        self.writer = writer
        self.actions = actions
        self.delimiter = delimiter
        self.no_reply = 0
        self.can = 0  # the actions the MTA allows
        self.queue_id: str | None = None  # the MTA's macro "i"
        self.rcpt_mailer: str | None = None  # the next recipient's delivery agent (`leaves`)
        self.message: Message | None = None

    def send(self, command: bytes, data: bytes = b"") -> None:
        self.writer.write(packet(command, data))

    async def step(self, command: bytes, data: bytes) -> bool:
        """Handle one packet; False to end the connection."""
        if command == b"O":
            if len(data) < 12:  # version, actions, steps: the MTA's is no milter's
                self.service.log("milter: refused a negotiation cut short")
                return False
            self._negotiate(data)
            return True
        if command == b"D":  # "i" and a recipient's "rcpt_mailer" are kept, no other macro:
            fields = _strings(data[1:])  # a client may send macros of new names without end
            for name, value in zip(fields[::2], fields[1::2]):
                if name.strip(b"{}") == b"i":
                    self.queue_id = _queue_id(value.decode("latin-1"))
                elif data[:1] == b"R" and name.strip(b"{}") == b"rcpt_mailer":
                    self.rcpt_mailer = value[:64].decode("latin-1")
            return True
        if command == b"Q":
            return False
        if command in (b"A", b"K"):  # abort this message; or a new connection on this one
            self.message = None
            return True
        if command == b"M":
            self.message = Message(self.service.max_size, self.delimiter)
        elif command in b"RLNB" and self.message is None:  # a message the MTA did not start
            self.message = Message(self.service.max_size, self.delimiter)
        if command == b"R":
            first = _strings(data)[:1]
            address = first[0].decode("utf-8", "replace") if first else ""
            self.message.recipient(address, self.rcpt_mailer)
            self.rcpt_mailer = None  # each recipient's macros come before it
        elif command == b"L":
            fields = _strings(data)
            if len(fields) >= 2:
                self.message.header(fields[0], fields[1])
        elif command == b"N":
            self.message.add(b"\r\n")
        elif command == b"B":
            self.message.add(data)
        elif command == b"E":
            if self.message is None:
                self.message = Message(self.service.max_size, self.delimiter)
            if data:
                self.message.add(data)
            self._end()
            self.message = None
            return True
        if command in ANSWERED and not self.no_reply & NO_REPLY.get(command, 0):
            self.send(b"c")
        return True

    def _negotiate(self, data: bytes) -> None:
        version, actions, protocol = struct.unpack(">III", data[:12])
        self.can = actions & (ADD_HEADERS | CHANGE_HEADERS | QUARANTINE)
        skip = protocol & (NO_CONNECT | NO_HELO | NO_UNKNOWN | NO_DATA)
        self.no_reply = protocol & sum(NO_REPLY.values())
        self.send(b"O", struct.pack(">III", min(version, VERSION), self.can, skip | self.no_reply))

    def _end(self) -> None:
        """Score the message; send the header changes and the final answer."""
        message = self.message
        start = time.perf_counter()
        message_id = self.queue_id or self.service.next_id()
        user = message.user()
        data = b"".join(message.parts)
        try:
            outcome = scoring.score(self.service.models, user, data, message_id)
        except NbspamError as error:  # passed on unchanged: the mail is not held up
            self.service.logged(message_id, user, f"error: {error}", None, start)
            self.send(b"a")
            return
        kept = "" if message.size <= message.max_size else f" (first {message.max_size:,} bytes)"
        self.service.logged(message_id, user, outcome.kind + kept, outcome.log_odds, start)
        action = self.actions.get(outcome.kind, "header")
        if action == "reject":
            self.send(
                b"y", f"550 5.7.1 Message refused: nbspam verdict {outcome.kind}".encode() + b"\0"
            )
            return
        if self.can & CHANGE_HEADERS:
            for index in range(message.status_headers, 0, -1):
                self.send(b"m", struct.pack(">I", index) + STATUS_HEADER + b"\0\0")
        if self.can & ADD_HEADERS:
            value = status_value(outcome.prediction).encode("utf-8")
            self.send(b"i", struct.pack(">I", 0) + STATUS_HEADER + b"\0" + value + b"\0")
        if action == "quarantine" and self.can & QUARANTINE:
            self.send(b"q", f"nbspam verdict {outcome.kind}".encode() + b"\0")
        self.send(b"a")
