"""Mail folders written durably: moves that never lose a message, and the record of the
messages `filter` has handled.

A move (`move_message`) is, within a file system, a hard link then an unlink of the old
name; across file systems, a copy flushed to disk and renamed into place, then the unlink.
A run killed at any point leaves each message in its folder, at its destination, or (for a
moment) in both; the next run recognises the copy by its digest (`find_copy`) and finishes
the move. The state record (`FilterState`) is a file of one line per message, appended and
flushed as each is handled.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..core.digits import ascii_number
from ..errors import FilterError, os_reason
from ..mail.headers import message_digest, one_line
from ..mail.message import MAX_MESSAGE_BYTES
from ..mail.messages import is_maildir, open_regular, read_bytes
from ..store.container import fsync_folder
from ..store.safefiles import model_writers, open_side_file

TMP_PREFIX = ".nbspam-tmp."
STATE_SUFFIX = ".state"
# hard links are not supported here: fall back to a rename after checking the name is free
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK}
_MAX_PID = 2**31 - 1  # the largest pid_t


def default_state_path(model_path: str) -> str:
    """The state file used when none is given: ``MODEL.state`` beside the model."""
    return model_path + STATE_SUFFIX


class FilterState:
    """The messages filtered before, as lines ``<hex digest>\\t<verdict>\\t<time>``.

    A line is appended and flushed to disk as each message is handled, so a run killed at
    any point loses at most the line of the message it was handling. Lines that cannot be
    read (a line cut short by a crash) are ignored: their message is handled again.
    """

    def __init__(self, path: str, *, write: bool, beside: str | None = None) -> None:
        self.path = path
        self.digests = self._load(path, beside)
        self._fd = self._open(path, beside) if write else None

    @staticmethod
    def _load(path: str, beside: str | None) -> set[bytes]:
        try:
            # never through a link, not blocking on a FIFO, refusing a device (/dev/zero);
            # whoever may write it decides which messages are filtered: no one but those who
            # may write the model (`safefiles.model_writers`)
            writers = model_writers(beside or path)
            fd = open_side_file(path, os.O_RDONLY, what="state file", writers=writers)
        except FileNotFoundError:
            return set()
        except OSError as exc:
            raise FilterError(f"cannot read state file {path}: {os_reason(exc)}") from None
        try:
            with os.fdopen(fd, "rb") as f:
                lines = f.read().split(b"\n")
        except OSError as exc:
            raise FilterError(f"cannot read state file {path}: {os_reason(exc)}") from None
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
    def _open(path: str, beside: str | None) -> int:
        """The state open to append to, made (with the model's permissions, see
        `safefiles`) if missing; never through a link."""
        try:
            new = not os.path.lexists(path)
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT
            writers = model_writers(beside or path)
            fd = open_side_file(path, flags, what="state file", like=beside, writers=writers)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                os.write(fd, b"\n")  # end a line a crash cut short
        except OSError as exc:
            raise FilterError(f"cannot write state file {path}: {os_reason(exc)}") from None
        if new:
            fsync_folder(os.path.dirname(path) or ".")
        return fd

    def __contains__(self, digest: bytes) -> bool:
        return digest in self.digests

    def record(self, digest: bytes, verdict: str) -> None:
        """Note a message as handled: in memory, and in the file if writing."""
        self.digests.add(digest)
        if self._fd is None:
            return
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line = f"{digest.hex()}\t{one_line(verdict)}\t{stamp}\n".encode()
        try:
            os.write(self._fd, line)
            os.fsync(self._fd)
        except OSError as exc:
            raise FilterError(f"cannot write state file {self.path}: {os_reason(exc)}") from None

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
    if os.path.isdir(path) and not is_maildir(path):
        return Destination(path, maildir=False)
    if os.path.exists(path) and not os.path.isdir(path):
        raise FilterError(f"{path} is not a folder: cannot move messages there")
    if create:
        try:
            for sub in ("cur", "new", "tmp"):
                os.makedirs(os.path.join(path, sub), mode=0o700, exist_ok=True)
        except OSError as exc:
            raise FilterError(f"cannot create Maildir {path}: {os_reason(exc)}") from None
    destination = Destination(path, maildir=True)
    for sub in ("cur", "new", "tmp") if os.path.isdir(path) else ():
        try:
            _own_folder(os.path.join(path, sub))
        except FileNotFoundError:
            continue  # a dry run's destination, made by the real run
        except OSError as exc:
            raise FilterError(f"cannot move messages to {exc.filename}: {exc.strerror}") from None
    return destination


def _own_folder(folder: str) -> str:
    """``folder`` if it is a folder itself, not a symbolic link (OSError otherwise).

    The folders of a Maildir are found, not named: whoever owns the Maildir (a user whose
    mail a job of root's sorts) could make its ``new/`` a link to /etc/profile.d, and the
    messages went there under names of their choosing. They are checked when the
    destination is opened and again before each move into them."""
    if not stat.S_ISDIR(os.lstat(folder).st_mode):
        raise OSError(errno.ENOTDIR, "a symbolic link or a file, not a folder", folder)
    return folder


def move_message(source: str, sub: str | None, destination: Destination, digest: bytes) -> str:
    """Move the message file ``source`` into ``destination``; return its new path.

    ``sub`` is 'new' or 'cur' for a file of a Maildir, None for a plain file. The file keeps
    its name (with a Maildir's ``:2,`` flags); a name taken by another message gets a tag from
    the digest, and a name holding this very message (by digest) is where it already is, so
    the source is only unlinked. Nothing is ever overwritten.
    """
    folder = destination.folder_for(sub)
    if destination.maildir:
        _own_folder(folder)
        _own_folder(destination.tmp)
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
    """True if the process that wrote a temporary file may still be running. Anyone who
    may write the folder may have named a file so: a name whose number is no process id
    (digits beyond ASCII, which int() refuses, or more than a pid_t holds, which os.kill
    refuses) is no writer's, where it stopped every run with an internal error."""
    pid = ascii_number(pid_text, 10)
    if pid is None or pid == os.getpid() or pid > _MAX_PID:
        return False
    try:
        os.kill(pid, 0)
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
        fsync_folder(os.path.dirname(target))
        fsync_folder(os.path.dirname(source))
        return
    fsync_folder(os.path.dirname(target))
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
    flushed to disk.

    The source is opened as every message is read (`open_regular`): whoever owns its folder
    may have put a link or a FIFO in its place since it was read, and a copy through the
    link took a file of root's (or /dev/zero, without end) into the destination, and a
    FIFO hung the run. The mode and times copied are those of the file opened."""
    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out, os.fdopen(open_regular(source), "rb") as src:
            shutil.copyfileobj(src, out)
            out.flush()
            made = os.fstat(src.fileno())
            os.chmod(out.fileno(), stat.S_IMODE(made.st_mode))
            # Maildir readers take the arrival time from mtime
            os.utime(out.fileno(), ns=(made.st_atime_ns, made.st_mtime_ns))
            os.fsync(out.fileno())
        fsync_folder(folder)
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
    """Whether the name ``target`` holds the message of ``source`` (its digest ``digest``):
    as a second name of the file itself, or as a regular file of its first bytes.

    The name is judged as it is, never through a link, and read as every message is read
    (`read_bytes`: never a FIFO or a device, its first `MAX_MESSAGE_BYTES`, which the
    digest is of): whoever may write the destination may have put it there, and a FIFO
    hung the run, a link to /dev/zero filled its memory, and a link out of the folder to a
    copy of the message was taken for the message, which was then unlinked."""
    try:
        if os.path.samestat(os.stat(source), os.lstat(target)):
            return True
        return message_digest(read_bytes(target)[:MAX_MESSAGE_BYTES]) == digest
    except OSError:
        return False


def _same_path(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are one name in one folder: the folders resolved (either may
    be given through a link), the names not, so that a link planted at ``b`` that leads to
    ``a`` is another name, not the message's own."""
    return _entry(a) == _entry(b)


def _entry(path: str) -> str:
    folder, name = os.path.split(path)
    return os.path.join(os.path.realpath(folder), name)


def _unlink_durably(path: str) -> None:
    os.unlink(path)
    fsync_folder(os.path.dirname(path))


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
