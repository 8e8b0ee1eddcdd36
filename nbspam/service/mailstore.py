"""Mail folders written durably: moves that never lose a message, and the record of the
messages `filter` has handled.

A move (`move_message`) is, within a file system, a hard link then an unlink of the old
name; across file systems, a copy flushed to disk and renamed into place, then the unlink.
A run killed at any point leaves each message in its folder, at its destination, or (for a
moment) in both; the next run recognises the copy by its digest (`find_copy`) and finishes
the move. Each move opens the folders it touches once and checks them, and names the
message only relative to them (`_Folders`): whoever may write a folder cannot swap it for a
link to /etc while a message goes through. The state record (`FilterState`) is a file of
one line per message, appended and flushed as each is handled.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
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

NOT_A_FOLDER = "a symbolic link or a file, not a folder"
FOLDER_SWAPPED = "not the folder found before: another was put in its place"
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# opens a folder one may write and not list (a drop box), to make names in it; Linux only
_PATH_ONLY = getattr(os, "O_PATH", 0)


@dataclass(frozen=True)
class Destination:
    """Where messages of one verdict go: a Maildir, or a plain folder.

    ``found`` is the (device, inode) of its folder ('') and, of a Maildir, of each of its
    ``cur/ new/ tmp/``, as `open_destination` found them: messages go into those very
    folders or nowhere."""

    root: str
    maildir: bool
    found: tuple[tuple[str, tuple[int, int]], ...] = ()

    def folder_for(self, sub: str | None) -> str:
        """The folder a message goes to: a Maildir's ``new/`` or ``cur/`` as it came from
        (``new/`` for a plain file), or the plain folder itself."""
        return os.path.join(self.root, sub or "new") if self.maildir else self.root

    @property
    def tmp(self) -> str:
        """Where copies are written before they are renamed into place."""
        return os.path.join(self.root, "tmp") if self.maildir else self.root

    def expected(self, part: str) -> tuple[int, int] | None:
        """The (device, inode) found of the folder itself ('') or of its ``part``."""
        for name, key in self.found:
            if name == part:
                return key
        return None


def open_destination(path: str, *, create: bool) -> Destination:
    """The destination at ``path``: an existing folder that is not a Maildir is used as it
    is; otherwise a Maildir, whose ``cur/ new/ tmp/`` are created if ``create``. The folders
    are opened as a move opens them (`_Folders`), and what they are noted: one that is a
    link or a file is refused here, in one line, and so is a path whose way passes a
    symbolic link of another user (`safefiles.check_link_owners`: ``.Junk ->
    /etc/profile.d``, planted by a user whose mail a job of root's sorts)."""
    from ..store.safefiles import check_link_owners

    check_link_owners(path, "destination")
    for sub in ("cur", "new", "tmp"):  # a dangling link made it a plain folder
        if os.path.islink(os.path.join(path, sub)):
            raise FilterError(
                f"cannot move messages to {os.path.join(path, sub)}: a symbolic link or a "
                "file, not a folder"
            )
    if os.path.isdir(path) and not is_maildir(path):
        return Destination(path, maildir=False, found=_found(path, ()))
    if os.path.exists(path) and not os.path.isdir(path):
        raise FilterError(f"{path} is not a folder: cannot move messages there")
    if create:
        try:
            for sub in ("cur", "new", "tmp"):
                os.makedirs(os.path.join(path, sub), mode=0o700, exist_ok=True)
        except OSError as exc:
            raise FilterError(f"cannot create Maildir {path}: {os_reason(exc)}") from None
    if not os.path.isdir(path):
        return Destination(path, maildir=True)  # a dry run's destination, made by the real run
    return Destination(path, maildir=True, found=_found(path, ("cur", "new", "tmp")))


def _found(root: str, parts: tuple[str, ...]) -> tuple[tuple[str, tuple[int, int]], ...]:
    """('', (device, inode)) of the folder ``root``, then (part, (device, inode)) of each of
    its ``parts`` that exists; FilterError if one is a link or a file."""
    try:
        with _Folders() as folders:
            top = folders.open(root, follow=True)
            found = [("", top.key())]
            for part in parts:
                try:
                    found.append((part, folders.open(os.path.join(root, part), within=top).key()))
                except FileNotFoundError:
                    continue  # a dry run's destination, made by the real run
    except OSError as exc:
        raise FilterError(f"cannot move messages to {exc.filename}: {exc.strerror}") from None
    return tuple(found)


class _Folder:
    """A folder open as ``fd``, named ``path`` in what is said of it."""

    __slots__ = ("fd", "path")

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path

    def at(self, name: str) -> str:
        return os.path.join(self.path, name)

    def key(self) -> tuple[int, int]:
        info = os.fstat(self.fd)
        return info.st_dev, info.st_ino


class _Folders(ExitStack):
    """The folders of one move, each opened once and closed when the move ends, however it
    ends.

    The folders of a Maildir are found, not named: whoever may write the destination (a
    user whose mail a job of root's sorts into their own Junk) could make its ``new/`` a
    link to /etc/profile.d, and the messages went there under names of their choosing;
    whoever may write the messages' folder could make it (or a folder above it) a link to
    /etc, and the move took /etc's file of the message's name out of /etc. A folder is
    opened without following a link at its name and checked to be the folder found before,
    and every name is then linked, renamed, opened or unlinked relative to the open folder
    (a name, never a path): a folder swapped for a link after that changes nothing."""

    def open(
        self,
        path: str,
        expected: tuple[int, int] | None = None,
        *,
        within: _Folder | None = None,
        follow: bool = False,
    ) -> _Folder:
        """The folder ``path`` (its last name in the open folder ``within``, if given) as
        `_open_folder` opens it."""
        fd = _open_folder(path, expected, within.fd if within else None, follow)
        self.callback(os.close, fd)
        return _Folder(fd, path)

    def source(self, folder: str, listed: tuple[int, int] | None) -> _Folder:
        """The folder a message is moved out of: never through a link at its name, and, if
        ``listed``, the folder the message was found in (`listed_files`). Where the name is
        a link to that very folder (a folder of messages named by its link), nothing was
        swapped: it is followed."""
        try:
            return self.open(folder, listed)
        except OSError as exc:
            if listed is None or exc.strerror != NOT_A_FOLDER:
                raise
        return self.open(folder, listed, follow=True)

    def destination(self, destination: Destination, *parts: str) -> list[_Folder]:
        """The folders ``parts`` ('new', 'cur', 'tmp') of ``destination``, each the folder
        `open_destination` found (a plain folder's are the folder itself). Its own name is
        followed where it is a link: it was named."""
        root = self.open(destination.root, destination.expected(""), follow=True)
        if not destination.maildir:
            return [root for _ in parts]
        return [
            self.open(os.path.join(destination.root, part), destination.expected(part), within=root)
            for part in parts
        ]


def _open_folder(
    path: str, expected: tuple[int, int] | None, within: int | None, follow: bool
) -> int:
    """A descriptor of the folder ``path`` (its last name opened in the open folder
    ``within``, if given), never through a symbolic link at that name unless ``follow``,
    and the folder of (device, inode) ``expected``, if given; an OSError otherwise
    (`NOT_A_FOLDER`, `FOLDER_SWAPPED`)."""
    name = os.path.basename(path) if within is not None else path
    flags = _FOLDER | (0 if follow else os.O_NOFOLLOW)
    try:
        try:
            fd = os.open(name, flags, dir_fd=within)
        except PermissionError:
            if not _PATH_ONLY:
                raise
            fd = os.open(name, flags | _PATH_ONLY, dir_fd=within)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
            raise OSError(errno.ENOTDIR, NOT_A_FOLDER, path) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode):
            raise OSError(errno.ENOTDIR, NOT_A_FOLDER, path)
        if expected is not None and (info.st_dev, info.st_ino) != expected:
            raise OSError(errno.ESTALE, FOLDER_SWAPPED, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _split(path: str) -> tuple[str, str]:
    """(folder, name) of the file ``path``."""
    folder, name = os.path.split(path)
    return folder or ".", _one_name(name)


def _one_name(name: str) -> str:
    """``name`` if it is one name, as the calls relative to an open folder need: never a
    path (with a '/'), nor '', '.' or '..'."""
    if name in ("", ".", "..") or os.sep in name or (os.altsep and os.altsep in name):
        raise OSError(errno.EINVAL, f"not a file name: {name!r}")
    return name


def move_message(
    source: str,
    sub: str | None,
    destination: Destination,
    digest: bytes,
    *,
    listed: tuple[int, int] | None = None,
) -> str:
    """Move the message file ``source`` into ``destination``; return its new path.

    ``sub`` is 'new' or 'cur' for a file of a Maildir, None for a plain file; ``listed`` the
    (device, inode) of the folder it was found in, if known. The file keeps its name (with a
    Maildir's ``:2,`` flags); a name taken by another message gets a tag from the digest,
    and a name holding this very message (by digest) is where it already is, so the source
    is only unlinked. Nothing is ever overwritten. Each folder is opened once for the move,
    and checked (`_Folders`).
    """
    folder, name = _split(source)
    with _Folders() as folders:
        there, tmp = folders.destination(destination, sub or "new", "tmp")
        here = folders.source(folder, listed)
        for target in _target_names(name, digest, sub is None):
            if _place(here, name, there, target, tmp, digest):
                return there.at(target)
    raise AssertionError("unreachable: there are always more names")


def find_copy(
    source: str,
    sub: str | None,
    digest: bytes,
    destinations: Iterable[Destination],
    *,
    listed: tuple[int, int] | None = None,
) -> str | None:
    """A copy of the message ``source`` (found in the folder ``listed``, if known) that an
    interrupted run already put in one of the destinations (under its own name, or its
    tagged name), or None. None too if the message's folder is not the one it was found
    in: a move out of it fails and says so, a message kept there is left as it is."""
    folder, name = _split(source)
    with _Folders() as folders:
        try:
            here = folders.source(folder, listed)
        except OSError:
            return None
        for destination in destinations:
            try:
                [there] = folders.destination(destination, sub or "new")
            except OSError:  # not made yet (a dry run's), or not the folder found: no copy
                continue
            for target in _target_names(name, digest, sub is None, limit=2):
                if _exists(there, target) and not _same_entry(here, name, there, target):
                    if _same_message(here, name, there, target, digest):
                        return there.at(target)
    return None


def finish_move(source: str, *, listed: tuple[int, int] | None = None) -> None:
    """Unlink ``source`` (from the folder ``listed``, if known) now that its copy is safely
    at the destination."""
    folder, name = _split(source)
    with _Folders() as folders:
        _unlink_durably(folders.source(folder, listed), name)


def holds(destination: Destination, source: str, sub: str | None) -> bool:
    """True if ``source`` already lies in the folder it would be moved to."""
    try:
        return os.path.samefile(os.path.dirname(source), destination.folder_for(sub))
    except OSError:
        return False


def remove_leftovers(destination: Destination) -> None:
    """Delete partial copies that a killed run left in the destination's temporary folder."""
    try:
        with _Folders() as folders:
            [tmp] = folders.destination(destination, "tmp")
            for name in os.listdir(tmp.fd):
                writer = name[len(TMP_PREFIX) :].split(".")[0]
                if name.startswith(TMP_PREFIX) and not _alive(writer):
                    _unlink_quietly(tmp, name)
    except OSError:
        return


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


def _target_names(name: str, digest: bytes, plain: bool, limit: int | None = None) -> Iterator[str]:
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
    yield _one_name(name)
    n = 1
    while limit is None or n < limit:
        suffix = tag if n == 1 else f"{tag}-{n}"
        yield _one_name(f"{base}.{suffix}{rest}")
        n += 1


def _place(
    here: _Folder, name: str, there: _Folder, target: str, tmp: _Folder, digest: bytes
) -> bool:
    """Put the message ``name`` of ``here`` at ``target`` in ``there`` and unlink it from
    ``here``; False if ``target`` is taken by another message."""
    if _exists(there, target):
        return _drop_duplicate(here, name, there, target, digest)
    try:
        _put(here, name, there, target)
    except FileExistsError:
        return _drop_duplicate(here, name, there, target, digest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        return _copy_across(here, name, there, target, tmp, digest)
    return True


def _put(here: _Folder, name: str, there: _Folder, target: str) -> None:
    """Give the file ``name`` of ``here`` the name ``target`` in ``there`` (same file
    system), never overwriting (FileExistsError), each folder flushed to disk once its
    change is made. A link at ``name`` is linked as the link it is, never followed."""
    try:
        os.link(name, target, src_dir_fd=here.fd, dst_dir_fd=there.fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        if _exists(there, target):
            raise FileExistsError(
                errno.EEXIST, os.strerror(errno.EEXIST), there.at(target)
            ) from None
        os.rename(name, target, src_dir_fd=here.fd, dst_dir_fd=there.fd)
        _flush(there)
        _flush(here)
        return
    _flush(there)
    _unlink_or_undo(here, name, there, target)


def _unlink_or_undo(here: _Folder, name: str, there: _Folder, target: str) -> None:
    """Unlink ``name`` now that ``target`` holds the message. If another program renamed
    or deleted it meanwhile (a mail server moving it from new/ to cur/), take ``target``
    away again, so the message is not in two places, and fail."""
    try:
        _unlink_durably(here, name)
    except FileNotFoundError:
        _unlink_durably(there, target)
        raise


def _copy_across(
    here: _Folder, name: str, there: _Folder, target: str, tmp: _Folder, digest: bytes
) -> bool:
    """Move to another file system: copy into ``tmp``, flush, rename into place, then
    unlink the source."""
    copy = _durable_copy(here, name, tmp)
    try:
        _put(tmp, copy, there, target)
    except FileExistsError:
        os.unlink(copy, dir_fd=tmp.fd)
        return _drop_duplicate(here, name, there, target, digest)
    except BaseException:
        _unlink_quietly(tmp, copy)
        raise
    _unlink_or_undo(here, name, there, target)
    return True


def _durable_copy(here: _Folder, name: str, tmp: _Folder) -> str:
    """A copy of the file ``name`` of ``here`` (bytes, permissions and times) under a
    temporary name in ``tmp``, flushed to disk; returns that name.

    The source is opened as every message is read (`open_regular`): whoever owns its folder
    may have put a link or a FIFO in its place since it was read, and a copy through the
    link took a file of root's (or /dev/zero, without end) into the destination, and a
    FIFO hung the run. The permissions and times copied are those of the file opened, but
    never its set-user-ID, set-group-ID or sticky bits: the file's owner chose its bytes
    and its mode, and got a program of theirs that ran as root. Where this process may (a
    job of root's), the copy gets the file's owner and group, as a move within a file
    system keeps them (the same file) and as ``mv`` does: a copy of root's, 0600, was a
    message its owner could no longer read."""
    fd, copy = _new_file(tmp)
    try:
        with os.fdopen(fd, "wb") as out, os.fdopen(open_regular(name, here.fd), "rb") as src:
            shutil.copyfileobj(src, out)
            out.flush()
            made = os.fstat(src.fileno())
            if os.geteuid() == 0:  # before the mode: a chown clears set-ID bits anyway
                os.fchown(out.fileno(), made.st_uid, made.st_gid)
            os.chmod(out.fileno(), stat.S_IMODE(made.st_mode) & 0o777)
            # Maildir readers take the arrival time from mtime
            os.utime(out.fileno(), ns=(made.st_atime_ns, made.st_mtime_ns))
            os.fsync(out.fileno())
        _flush(tmp)
    except BaseException:
        _unlink_quietly(tmp, copy)
        raise
    return copy


def _new_file(folder: _Folder) -> tuple[int, str]:
    """(descriptor open to write, name) of a new empty file of mode 0600 in ``folder``,
    under a name of this process (`TMP_PREFIX`, the pid, random letters), made as
    `tempfile.mkstemp` makes one, but in the open folder."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        name = _one_name(f"{TMP_PREFIX}{os.getpid()}.{os.urandom(6).hex()}")
        try:
            return os.open(name, flags, 0o600, dir_fd=folder.fd), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no temporary name is free", folder.path)


def _drop_duplicate(here: _Folder, name: str, there: _Folder, target: str, digest: bytes) -> bool:
    """If ``target`` holds this message already, unlink ``name`` (unless it is ``target``
    itself) and say True; otherwise False."""
    if _same_entry(here, name, there, target):
        return True
    if not _same_message(here, name, there, target, digest):
        return False
    _unlink_durably(here, name)
    return True


def _same_message(here: _Folder, name: str, there: _Folder, target: str, digest: bytes) -> bool:
    """Whether the name ``target`` holds the message ``name`` (its digest ``digest``): as a
    second name of the file itself, or as a regular file of its first bytes.

    The name is judged as it is, never through a link, and read as every message is read
    (`read_bytes`: never a FIFO or a device, its first `MAX_MESSAGE_BYTES`, which the
    digest is of): whoever may write the destination may have put it there, and a FIFO
    hung the run, a link to /dev/zero filled its memory, and a link out of the folder to a
    copy of the message was taken for the message, which was then unlinked."""
    try:
        found = os.stat(target, dir_fd=there.fd, follow_symlinks=False)
        if os.path.samestat(os.stat(name, dir_fd=here.fd), found):
            return True
        return message_digest(read_bytes(target, there.fd)[:MAX_MESSAGE_BYTES]) == digest
    except OSError:
        return False


def _same_entry(here: _Folder, name: str, there: _Folder, target: str) -> bool:
    """Whether ``name`` in ``here`` and ``target`` in ``there`` are one name in one folder:
    the folders as they are open (either may be named through a link), the names not, so
    that a link planted at ``target`` that leads to ``name`` is another name, not the
    message's own."""
    return name == target and os.path.samestat(os.fstat(here.fd), os.fstat(there.fd))


def _exists(folder: _Folder, name: str) -> bool:
    """Whether ``name`` is taken in ``folder``, by anything (a dangling link too)."""
    try:
        os.stat(name, dir_fd=folder.fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _flush(folder: _Folder) -> None:
    """Make the renames and new names in ``folder`` durable (where the platform allows)."""
    try:
        os.fsync(folder.fd)
    except OSError:
        pass


def _unlink_durably(folder: _Folder, name: str) -> None:
    os.unlink(name, dir_fd=folder.fd)
    _flush(folder)


def _unlink_quietly(folder: _Folder, name: str) -> None:
    try:
        os.unlink(name, dir_fd=folder.fd)
    except OSError:
        pass
