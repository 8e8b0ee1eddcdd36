"""Filtering mail unattended: a verdict header on one message, or mail folders sorted by verdict.

One message (`filter_single`): the message comes out byte for byte as it went in, with one
header line ``X-Nbspam-Status: <verdict>; log_odds=<+n.nnn>; calibrated=<p>; version=<v>``
added as its first header (after an mbox ``From `` line). The header is left out of the
message's digest (`messages.message_digest`), so a filtered message is still the message
`learn` and `forget` know. This path is scored by `quick` where the model file allows, so a
filter started per delivery imports neither numpy nor scipy.

Folders (`filter_folders`): every message file of Maildirs (``cur/`` and ``new/``) and plain
folders is scored once and, if its verdict has a destination, moved there. A state file
(`FilterState`) records the digest of each message handled, so the next run handles only
new mail and leaves alone a message the user moved back. Moves never lose a message
(`move_message`): within a file system a hard link, then an unlink of the old name; across
file systems a copy flushed to disk and renamed into place, then the unlink. A run killed at
any point leaves each message in its folder, at its destination, or (for a moment) in both;
the next run recognises the copy by its digest and finishes the move.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import __version__
from .decision import UNSURE, Prediction
from .errors import InputError, NbspamError
from .lock import DEFAULT_TIMEOUT, model_lock
from .messages import (
    BINARY,
    MAX_MESSAGE_BYTES,
    Message,
    Problems,
    folder_entries,
    is_binary,
    message_digest,
    read_messages,
)
from .render import json_line

if TYPE_CHECKING:  # the one-message path must not import numpy
    from .quick import ModelScorer, QuickModel

STATUS_HEADER = b"X-Nbspam-Status"
SPAM, HAM = "spam", "ham"
KINDS = (SPAM, UNSURE, HAM)
TMP_PREFIX = ".nbspam-tmp."
STATE_SUFFIX = ".state"
_STATUS_LINE = re.compile(rb"x-nbspam-status[ \t]*:", re.IGNORECASE)
# hard links are not supported here: fall back to a rename after checking the name is free
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK}


class FilterError(NbspamError):
    """Mail cannot be filtered as asked: a multi-class model, an mbox, an unusable folder."""


# -- the verdict header ---------------------------------------------------------------------


def status_value(prediction: Prediction) -> str:
    """The value of the X-Nbspam-Status header: verdict, log-odds, calibrated probability
    (left out when the model has no calibration) and the nbspam version."""
    parts = [_one_line(prediction.verdict or ""), f"log_odds={prediction.log_odds:+.3f}"]
    if prediction.calibrated is not None:
        calibrated = f"{prediction.calibrated:.4f}"
        # probability= is the old name of calibrated=, kept for one release
        parts += [f"calibrated={calibrated}", f"probability={calibrated}"]
    parts.append(f"version={__version__}")
    return "; ".join(parts)


def add_status_header(data: bytes, value: str) -> bytes:
    """``data`` with ``X-Nbspam-Status: value`` as its first header line, every other byte as
    it was, except that an X-Nbspam-Status header already there is taken out.

    The line goes after an mbox ``From `` line if the message starts with one, and ends as
    the message's first line does (CRLF or LF).
    """
    start = _headers_start(data)
    first = data.find(b"\n")
    eol = b"\r\n" if first > 0 and data[first - 1 : first] == b"\r" else b"\n"
    line = STATUS_HEADER + b": " + value.encode("utf-8") + eol
    return data[:start] + line + _without_status_header(data[start:])


def _headers_start(data: bytes) -> int:
    """Where the header lines begin: after an mbox ``From `` line, else at 0."""
    if data.startswith(b"From "):
        end = data.find(b"\n")
        if end >= 0:
            return end + 1
    return 0


def _without_status_header(data: bytes) -> bytes:
    """``data`` less every X-Nbspam-Status header (with its continuation lines) found before
    the first blank line."""
    kept: list[bytes] = []
    pos, dropping = 0, False
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end + 1
        line = data[pos:end]
        if line in (b"\n", b"\r\n"):
            break
        if not (dropping and line[:1] in (b" ", b"\t")):
            dropping = _STATUS_LINE.match(line) is not None
        if not dropping:
            kept.append(line)
        pos = end
    return b"".join(kept) + data[pos:]


def _one_line(text: str) -> str:
    return " ".join(text.splitlines())


# -- verdicts ---------------------------------------------------------------------------------


def require_two_classes(labels: tuple[str, ...]) -> None:
    """Refuse a model that has no spam/ham verdicts (more than two classes)."""
    if len(labels) != 2:
        raise FilterError(
            f"filter needs a two-class model (spam and ham); this one has "
            f"{len(labels)} labels: {', '.join(labels)}"
        )


def verdict_kind(verdict: str | None, positive: str | None) -> str:
    """'spam' for the positive label, 'unsure' for unsure, 'ham' for the negative label."""
    if verdict == positive:
        return SPAM
    return UNSURE if verdict == UNSURE else HAM


#: Exit statuses of ``filter --exit-status`` (bogofilter's convention).
FILTER_EXIT = {"spam": 0, "ham": 1, "unsure": 2, "error": 3}


def filter_stdin(model_path: str, *, exit_status: bool, misuse: str | None = None) -> int:
    """Pass the message on stdin to stdout with its verdict header; return the exit status.

    Whatever fails (a bad model, a bug, a broken installation, binary data), the original
    bytes still go to stdout unchanged and the reason to stderr as one line ``Error: ...``.
    ``misuse`` is such a reason found before (an option that needs folders).

    Only the first `MAX_MESSAGE_BYTES` are read before the verdict, and scored (a note says
    so); the rest of a longer message is passed on after them a piece at a time.
    """
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    data = stdin.read(MAX_MESSAGE_BYTES + 1)
    output, kind, error = data, None, misuse
    if error is None:
        try:
            output, kind = filter_single(model_path, data)
        except Exception as exc:  # whatever it is, the message must come out
            output, error = data, _one_line_error(exc)
    stdout.write(output)
    if len(data) > MAX_MESSAGE_BYTES:
        shutil.copyfileobj(stdin, stdout, 1 << 16)
        if error is None:
            print(f"note: -: scored the first {MAX_MESSAGE_BYTES >> 20} MiB", file=sys.stderr)
    stdout.flush()
    if error is not None:
        print(f"Error: {error}", file=sys.stderr)
        return FILTER_EXIT["error"] if exit_status else NbspamError.exit_code
    return FILTER_EXIT[kind] if exit_status else 0


def _one_line_error(exc: Exception) -> str:
    text = str(exc) if isinstance(exc, NbspamError) else f"internal error: {exc!r}"
    return " ".join(text.split("\n"))


def filter_single(model_path: str, data: bytes) -> tuple[bytes, str]:
    """(the message with its verdict header, 'spam' / 'ham' / 'unsure') for one message.

    Scored from the model file's scoring table without numpy where the file has one, else
    by the batch scorer: the same verdict either way; on its first `MAX_MESSAGE_BYTES`.
    Raises on any failure (binary data too); the caller then passes ``data`` on unchanged.
    """
    if is_binary(data):
        raise InputError(f"{BINARY}: passed on unscored")
    prediction, positive = _predict_one(model_path, data[:MAX_MESSAGE_BYTES])
    return add_status_header(data, status_value(prediction)), verdict_kind(
        prediction.verdict, positive
    )


def _predict_one(model_path: str, data: bytes) -> tuple[Prediction, str | None]:
    """(the prediction for one message, the model's positive label)."""
    from .quick import load_scorer

    scorer = load_scorer(model_path)
    require_two_classes(scorer.labels)
    return scorer.predict("-", data), scorer.positive


# -- the state record -------------------------------------------------------------------------


def default_state_path(model_path: str) -> str:
    """The state file used when none is given: ``MODEL.state`` beside the model."""
    return model_path + STATE_SUFFIX


class FilterState:
    """The messages filtered before, as lines ``<hex digest>\\t<verdict>\\t<time>``.

    A line is appended and flushed to disk as each message is handled, so a run killed at
    any point loses at most the line of the message it was handling. Lines that cannot be
    read (a line cut short by a crash) are ignored: their message is handled again.
    """

    def __init__(self, path: str, *, write: bool) -> None:
        self.path = path
        self.digests = self._load(path)
        self._fd = self._open(path) if write else None

    @staticmethod
    def _load(path: str) -> set[bytes]:
        try:
            # not blocking on a FIFO, and refusing a device (/dev/zero never ends)
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return set()
        except OSError as exc:
            raise FilterError(f"cannot read state file {path}: {_reason(exc)}") from None
        try:
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    raise FilterError(f"state file {path} is not a regular file")
                lines = f.read().split(b"\n")
        except OSError as exc:
            raise FilterError(f"cannot read state file {path}: {_reason(exc)}") from None
        digests = set()
        for line in lines:
            field = line.split(b"\t", 1)[0]
            if len(field) == 32:
                try:
                    digests.add(bytes.fromhex(field.decode("ascii")))
                except (UnicodeDecodeError, ValueError):
                    continue
        return digests

    @staticmethod
    def _open(path: str) -> int:
        try:
            new = not os.path.exists(path)
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                os.write(fd, b"\n")  # end a line a crash cut short
        except OSError as exc:
            raise FilterError(f"cannot write state file {path}: {_reason(exc)}") from None
        if new:
            _fsync_dir(os.path.dirname(path) or ".")
        return fd

    def __contains__(self, digest: bytes) -> bool:
        return digest in self.digests

    def record(self, digest: bytes, verdict: str) -> None:
        """Note a message as handled: in memory, and in the file if writing."""
        self.digests.add(digest)
        if self._fd is None:
            return
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line = f"{digest.hex()}\t{_one_line(verdict)}\t{stamp}\n".encode()
        try:
            os.write(self._fd, line)
            os.fsync(self._fd)
        except OSError as exc:
            raise FilterError(f"cannot write state file {self.path}: {_reason(exc)}") from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


# -- destinations and moves -------------------------------------------------------------------


@dataclass(frozen=True)
class Destination:
    """Where messages of one verdict go: a Maildir, or a plain folder."""

    root: str
    maildir: bool

    def folder_for(self, sub: str | None) -> str:
        """The folder a message goes to: a Maildir's ``new/`` or ``cur/`` as it came from
        (``new/`` for a plain file), or the plain folder itself."""
        return os.path.join(self.root, sub or "new") if self.maildir else self.root

    @property
    def tmp(self) -> str:
        """Where copies are written before they are renamed into place."""
        return os.path.join(self.root, "tmp") if self.maildir else self.root


def open_destination(path: str, *, create: bool) -> Destination:
    """The destination at ``path``: an existing folder that is not a Maildir is used as it
    is; otherwise a Maildir, whose ``cur/ new/ tmp/`` are created if ``create``."""
    if os.path.isdir(path) and not _is_maildir(path):
        return Destination(path, maildir=False)
    if os.path.exists(path) and not os.path.isdir(path):
        raise FilterError(f"{path} is not a folder: cannot move messages there")
    if create:
        try:
            for sub in ("cur", "new", "tmp"):
                os.makedirs(os.path.join(path, sub), mode=0o700, exist_ok=True)
        except OSError as exc:
            raise FilterError(f"cannot create Maildir {path}: {_reason(exc)}") from None
    return Destination(path, maildir=True)


def move_message(source: str, sub: str | None, destination: Destination, digest: bytes) -> str:
    """Move the message file ``source`` into ``destination``; return its new path.

    ``sub`` is 'new' or 'cur' for a file of a Maildir, None for a plain file. The file keeps
    its name (with a Maildir's ``:2,`` flags); a name taken by another message gets a tag from
    the digest, and a name holding this very message (by digest) is where it already is, so
    the source is only unlinked. Nothing is ever overwritten.
    """
    folder = destination.folder_for(sub)
    for target in _target_names(folder, os.path.basename(source), digest, sub is None):
        if _place(source, target, destination.tmp, digest):
            return target
    raise AssertionError("unreachable: there are always more names")


def find_copy(
    source: str, sub: str | None, digest: bytes, destinations: Iterable[Destination]
) -> str | None:
    """A copy of the message ``source`` that an interrupted run already put in one of the
    destinations (under its own name, or its tagged name), or None."""
    name = os.path.basename(source)
    for destination in destinations:
        folder = destination.folder_for(sub)
        for target in _target_names(folder, name, digest, sub is None, limit=2):
            if os.path.lexists(target) and not _same_path(source, target):
                if _same_message(source, target, digest):
                    return target
    return None


def finish_move(source: str) -> None:
    """Unlink ``source`` now that its copy is safely at the destination."""
    _unlink_durably(source)


def holds(destination: Destination, source: str, sub: str | None) -> bool:
    """True if ``source`` already lies in the folder it would be moved to."""
    try:
        return os.path.samefile(os.path.dirname(source), destination.folder_for(sub))
    except OSError:
        return False


def remove_leftovers(destination: Destination) -> None:
    """Delete partial copies that a killed run left in the destination's temporary folder."""
    try:
        names = os.listdir(destination.tmp)
    except OSError:
        return
    for name in names:
        if name.startswith(TMP_PREFIX) and not _alive(name[len(TMP_PREFIX) :].split(".")[0]):
            try:
                os.unlink(os.path.join(destination.tmp, name))
            except OSError:
                pass


def _alive(pid_text: str) -> bool:
    """True if the process that wrote a temporary file may still be running."""
    if not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _target_names(
    folder: str, name: str, digest: bytes, plain: bool, limit: int | None = None
) -> Iterator[str]:
    """Names to try in turn: the name itself, then with a tag from the digest before a
    Maildir's ``:2,`` info (or a plain file's extension), then numbered."""
    if ":" in name:
        base, rest = name.split(":", 1)
        rest = ":" + rest
    elif plain:
        base, rest = os.path.splitext(name)
    else:
        base, rest = name, ""
    tag = digest.hex()[:12]
    yield os.path.join(folder, name)
    n = 1
    while limit is None or n < limit:
        suffix = tag if n == 1 else f"{tag}-{n}"
        yield os.path.join(folder, f"{base}.{suffix}{rest}")
        n += 1


def _place(source: str, target: str, tmp_folder: str, digest: bytes) -> bool:
    """Put the message at ``target`` and unlink ``source``; False if ``target`` is taken by
    another message."""
    if os.path.lexists(target):
        return _drop_duplicate(source, target, digest)
    try:
        _put(source, target)
    except FileExistsError:
        return _drop_duplicate(source, target, digest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        return _copy_across(source, target, tmp_folder, digest)
    return True


def _put(source: str, target: str) -> None:
    """Give the file ``source`` the name ``target`` (same file system), never overwriting
    (FileExistsError), each folder flushed to disk once its change is made."""
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target) from None
        os.rename(source, target)
        _fsync_dir(os.path.dirname(target))
        _fsync_dir(os.path.dirname(source))
        return
    _fsync_dir(os.path.dirname(target))
    _unlink_or_undo(source, target)


def _unlink_or_undo(source: str, target: str) -> None:
    """Unlink ``source`` now that ``target`` holds the message. If another program renamed
    or deleted ``source`` meanwhile (a mail server moving it from new/ to cur/), take
    ``target`` away again, so the message is not in two places, and fail."""
    try:
        _unlink_durably(source)
    except FileNotFoundError:
        _unlink_durably(target)
        raise


def _copy_across(source: str, target: str, tmp_folder: str, digest: bytes) -> bool:
    """Move to another file system: copy into ``tmp_folder``, flush, rename into place, then
    unlink the source."""
    tmp = _durable_copy(source, tmp_folder)
    try:
        _put(tmp, target)
    except FileExistsError:
        os.unlink(tmp)
        return _drop_duplicate(source, target, digest)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _unlink_or_undo(source, target)
    return True


def _durable_copy(source: str, folder: str) -> str:
    """A copy of ``source`` (bytes, mode and times) under a temporary name in ``folder``,
    flushed to disk."""
    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out)
            out.flush()
            shutil.copystat(source, tmp)  # Maildir readers take the arrival time from mtime
            os.fsync(out.fileno())
        _fsync_dir(folder)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def _drop_duplicate(source: str, target: str, digest: bytes) -> bool:
    """If ``target`` holds this message already, unlink ``source`` (unless it is ``target``
    itself) and say True; otherwise False."""
    if _same_path(source, target):
        return True
    if not _same_message(source, target, digest):
        return False
    _unlink_durably(source)
    return True


def _same_message(source: str, target: str, digest: bytes) -> bool:
    try:
        if os.path.samefile(source, target):
            return True
        with open(target, "rb") as f:
            return message_digest(f.read()) == digest
    except OSError:
        return False


def _same_path(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _unlink_durably(path: str) -> None:
    os.unlink(path)
    _fsync_dir(os.path.dirname(path))


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _fsync_dir(folder: str) -> None:
    """Flush a folder's entries to disk (where the file system allows it)."""
    try:
        fd = os.open(folder or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- finding the messages ---------------------------------------------------------------------


@dataclass(frozen=True)
class MessageFile:
    """A message file to filter; ``sub`` is 'new' or 'cur' inside a Maildir, else None."""

    path: str
    sub: str | None


def message_files(
    paths: Iterable[str], problems: Problems, *, skip: Iterable[str] = ()
) -> Iterator[MessageFile]:
    """The message files of each path: a Maildir's ``cur/`` and ``new/``, every file below a
    folder (hidden names and Maildir ``tmp/`` left out, and the folders ``skip`` below a
    path), or a single message file. An mbox is refused: its messages cannot be moved one by
    one safely."""
    skipped = {_folder_key(folder) for folder in skip} - {None}
    for path in paths:
        if os.path.isdir(path):
            yield from _walk(path, skipped, problems)
        elif os.path.isfile(path):
            if _holds_several(path):
                raise FilterError(
                    f"{path} holds several messages (an mbox or a table): filter moves whole "
                    f"message files, so give Maildirs or folders of message files"
                )
            yield MessageFile(path, _maildir_sub(os.path.dirname(path)))
        else:
            problems.skip(path, "no such file or directory")


def _walk(root: str, skipped: set[Any], problems: Problems) -> Iterator[MessageFile]:
    """The message files below ``root``: of a Maildir only ``cur/`` and ``new/`` (its other
    files are the mail server's indexes, its subfolders other mailboxes); of a plain folder
    every file below it. Folders in ``skipped`` (below the root) and folders already walked
    (a symbolic link loop) are left out."""
    seen: set[Any] = set()

    def walk(folder: str) -> Iterator[MessageFile]:
        key = _folder_key(folder)
        if key is None or key in seen or (folder != root and key in skipped):
            return
        seen.add(key)
        if _is_maildir(folder):
            for sub in ("cur", "new"):
                for path, _, is_file in _entries(os.path.join(folder, sub), problems):
                    if is_file:
                        yield MessageFile(path, sub)
            return
        sub = _maildir_sub(folder)
        for path, is_folder, is_file in _entries(folder, problems):
            if is_folder:
                yield from walk(path)
            elif is_file:
                yield MessageFile(path, sub)

    yield from walk(root)


def _entries(folder: str, problems: Problems) -> list[tuple[str, bool, bool]]:
    """(path, whether it is a folder, whether it is a file) of each entry of ``folder``
    (`messages.folder_entries`), in sorted order, hidden names left out."""
    return [
        (os.path.join(folder, name), is_folder, is_file)
        for name, is_folder, is_file in folder_entries(folder, problems)
    ]


def _folder_key(folder: str) -> tuple[int, int] | None:
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _maildir_sub(folder: str) -> str | None:
    """'new' or 'cur' if ``folder`` is that part of a Maildir, else None."""
    name = os.path.basename(os.path.normpath(folder))
    parent = os.path.dirname(os.path.normpath(folder))
    return name if name in ("new", "cur") and _is_maildir(parent or ".") else None


def _is_maildir(folder: str) -> bool:
    return os.path.isdir(os.path.join(folder, "cur")) and os.path.isdir(os.path.join(folder, "new"))


def _holds_several(path: str) -> bool:
    """True if the file ``path`` is read as several messages (an mbox or a table)."""
    first = next(iter(read_messages([path], Problems())), None)
    return first is not None and first.id != path


def _read_message(path: str, problems: Problems) -> Message | None:
    """The message in the file ``path``; None (reported) if it cannot be read or holds
    several messages."""
    found = read_messages([path], problems)
    message = next(found, None)
    found.close()
    if message is not None and message.id != path:
        problems.skip(path, "holds several messages (an mbox?): not filtered, left where it is")
        return None
    return message


# -- a run over folders -----------------------------------------------------------------------


@dataclass
class Summary:
    """What a run did: messages new to it, skipped as filtered before, moved, kept, failed."""

    new: int = 0
    skipped: int = 0
    moved: int = 0
    kept: int = 0
    errors: int = 0

    def line(self, *, dry_run: bool = False) -> str:
        moved = "would be moved" if dry_run else "moved"
        return (
            f"filter: {self.new:,} new, {self.skipped:,} skipped (filtered before), "
            f"{self.moved:,} {moved}, {self.kept:,} kept, {self.errors:,} error(s)"
        )


Report = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Plan:
    """How to filter: a destination per verdict kind (spam / unsure / ham), dry run or not."""

    destinations: Mapping[str, Destination]
    dry_run: bool = False


def filter_folders(
    scorer: QuickModel | ModelScorer,
    paths: Iterable[str],
    moves: Mapping[str, str | None],
    *,
    state_path: str,
    dry_run: bool = False,
    problems: Problems | None = None,
    report: Report | None = None,
    progress: Callable[[int], None] | None = None,
    lock_timeout: float = DEFAULT_TIMEOUT,
    jobs: int = 1,
) -> Summary:
    """Filter the message files of Maildirs and folders; see the module docstring.

    ``moves`` maps 'spam', 'unsure' and 'ham' to a destination folder (or None: keep).
    Messages whose digest the state file lists are skipped. Each new message is scored,
    moved if its verdict has a destination, and recorded in the state file; ``report`` gets
    one record per new message (path, verdict, log_odds, probability, action, destination).
    Unreadable or unmovable messages are reported through ``problems`` and left where they
    are. A dry run moves nothing and writes no state. The state file's lock is held for the
    whole run, so two runs never handle the same message.
    """
    require_two_classes(scorer.labels)
    unknown = set(moves) - set(KINDS)
    if unknown:
        raise FilterError(f"unknown verdict {sorted(unknown)[0]!r}: use one of {KINDS}")
    destinations = {
        kind: open_destination(path, create=not dry_run) for kind, path in moves.items() if path
    }
    run = _Run(scorer, Plan(destinations, dry_run), problems or Problems(), report, progress)
    with nullcontext() if dry_run else model_lock(state_path, timeout=lock_timeout):
        state = FilterState(state_path, write=not dry_run)
        try:
            if not dry_run:
                for destination in destinations.values():
                    remove_leftovers(destination)
            skip = [d.root for d in destinations.values()]
            run.filter(message_files(paths, run.problems, skip=skip), state, jobs)
        finally:
            state.close()
    return run.summary


class _Run:
    """One pass over the message files: read, skip what the state knows, score, act, record."""

    def __init__(
        self,
        scorer: QuickModel | ModelScorer,
        plan: Plan,
        problems: Problems,
        report: Report | None,
        progress: Callable[[int], None] | None,
    ) -> None:
        self.scorer = scorer
        self.plan = plan
        self.report = report or (lambda record: None)
        self.progress = progress or (lambda n: None)
        self.summary = Summary()
        self.problems = _ReportedProblems(problems, self._failed)
        self.pending: deque[tuple[MessageFile, bytes]] = deque()  # read, not yet scored
        self.queued: set[bytes] = set()  # their digests

    def filter(self, files: Iterable[MessageFile], state: FilterState, jobs: int = 1) -> None:
        """Score the new messages a chunk at a time (by ``jobs`` workers, in order) and act
        on each as soon as it is scored."""
        new = self._new_messages(files, state)
        for prediction in self.scorer.predict_messages(new, jobs=jobs):
            file, digest = self.pending.popleft()
            self.queued.discard(digest)
            self._act(file, digest, prediction, state)
            self.progress(1)

    def _new_messages(self, files: Iterable[MessageFile], state: FilterState) -> Iterator[Message]:
        """The messages not filtered before (nor waiting in this run's chunk), each noted in
        ``pending`` with its file and digest."""
        for file in files:
            message = _read_message(file.path, self.problems)
            if message is None:
                continue
            digest = message_digest(message.data)
            if digest in state or digest in self.queued:
                self.summary.skipped += 1
                continue
            self.summary.new += 1
            self.pending.append((file, digest))
            self.queued.add(digest)
            yield message

    def _act(
        self, file: MessageFile, digest: bytes, prediction: Prediction, state: FilterState
    ) -> None:
        kind = verdict_kind(prediction.verdict, self.scorer.positive)
        destination = self.plan.destinations.get(kind)
        try:
            action, where = self._move(file, digest, destination)
        except OSError as exc:  # left where it is, not recorded: the next run tries again
            self.summary.errors += 1
            to = f" to {destination.root}" if destination else ""
            self.problems.parent.skip(file.path, f"not moved{to}: {_reason(exc)}")
            self._record(file.path, prediction, "error", None)
            return
        if action == "kept":
            self.summary.kept += 1
        else:
            self.summary.moved += 1
        state.record(digest, prediction.verdict)
        self._record(file.path, prediction, action, where)

    def _move(
        self, file: MessageFile, digest: bytes, destination: Destination | None
    ) -> tuple[str, str | None]:
        """(action, where the message is or would be) for one scored message."""
        copy = find_copy(file.path, file.sub, digest, self.plan.destinations.values())
        if copy is not None:  # an interrupted run got this far: finish its move
            if not self.plan.dry_run:
                finish_move(file.path)
            return ("would move" if self.plan.dry_run else "moved"), copy
        if destination is None or holds(destination, file.path, file.sub):
            return "kept", None
        if self.plan.dry_run:
            return "would move", destination.folder_for(file.sub)
        return "moved", move_message(file.path, file.sub, destination, digest)

    def _record(
        self, path: str, prediction: Prediction | None, action: str, where: str | None
    ) -> None:
        self.report(
            {
                "path": path,
                "verdict": prediction.verdict if prediction else None,
                "log_odds": prediction.log_odds if prediction else None,
                "calibrated": prediction.calibrated if prediction else None,
                # the old name of "calibrated", kept for one release
                "probability": prediction.calibrated if prediction else None,
                "action": action,
                "destination": where,
            }
        )

    def _failed(self, where: str) -> None:
        """A file could not be read: count it and give it a report line."""
        self.summary.errors += 1
        self._record(where, None, "error", None)


class _ReportedProblems(Problems):
    """Problems passed on to the caller's, each skipped input also counted as an error."""

    def __init__(self, parent: Problems, failed: Callable[[str], None]) -> None:
        super().__init__()
        self.parent = parent
        self._failed = failed

    def skip(self, where: str, reason: str) -> None:
        self.parent.skip(where, reason)
        self._failed(where)

    def note(self, text: str) -> None:
        self.parent.note(text)


def _reason(exc: OSError) -> str:
    if exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__


@contextmanager
def report_writer(path: str | None, *, stdout: Callable[[str], None]) -> Iterator[Report | None]:
    """A `Report` writing each record as a JSON line: appended to the file ``path`` (flushed
    line by line, so a killed run keeps what it reported), or passed to ``stdout`` for
    '-'; None without a path."""
    if path is None:
        yield None
        return
    if path == "-":
        yield lambda record: stdout(json_line(record))
        return
    try:
        out = open(path, "ab", buffering=0)  # a line a write: nothing is left to flush
    except OSError as exc:
        raise FilterError(f"cannot write report {path}: {_reason(exc)}") from None

    def write(record: dict[str, Any]) -> None:
        try:
            out.write(json_line(record).encode() + b"\n")
        except OSError as exc:
            raise FilterError(f"cannot write report {path}: {_reason(exc)}") from None

    with out:
        yield write
