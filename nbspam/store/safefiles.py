"""Writing files where others write too: files beside a model, temporary files, and outputs
that must not be inputs.

A shared model lives in a folder its group may write (``2775 root:mail``), so any member can
plant a name there: a symbolic link ``MODEL.lock`` to a file of root's, a FIFO, a hard link.
The files kept beside a model (its lock ``MODEL.lock``, `filter`'s ``MODEL.state``, `sync`'s
``MODEL.sync``) are therefore opened with ``O_NOFOLLOW``, created with ``O_CREAT|O_EXCL``,
and refused in one line (`UnsafeFileError`) when they are a symbolic link, not a regular
file, or (when written in place) a file with other hard links. The model itself may be a
link to a regular file of one's own or root's: it is replaced by a rename beside its target,
never written through; a link of another user there is refused (`check_link_owners`).

Every member of the group must be able to take the lock and replace the model, so a file
made beside a model gets the model's mode (without execute bits) and group, and a replaced
model keeps its mode and group (and, when root replaces it, its owner). A new model with no
file before it gets 0666 less the umask and less every permission of others: it holds the
words of mail, addresses among them, which are not for every user of the host, while the
group keeps what the umask gives it (a shared model's users set umask 002).

A file beside a model that decides what a run does (its journal, `sync`'s and `filter`'s
state) is read only where no one but those who may write the model may write it
(`core.trust`, `model_writers`): root, the user running nbspam, the model's owner, and
the model's group where that group may write the model. A neighbour who could write
``MODEL.sync`` could make `sync` skip the messages of the Junk folder; one who could
plant ``MODEL.journal`` in a folder anyone may write (with the sticky bit) would teach
every user's scores.

An output that is one of a command's inputs (``sync --state MODEL``, ``train DATA -o
DATA/ham/1.eml``) would be destroyed by the run that reads it: `check_outputs` refuses it,
by device and inode, before any work starts.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable

from ..core.trust import check_file, check_made, user_name, walk
from ..errors import UnsafeFileError, os_reason

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

_NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def default_mode() -> int:
    """The mode of a new model with no file before it: 0666 less the umask and less every
    permission of others (the words of mail are not for everyone on the host)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask & ~0o007


def permissions_of(path: str | os.PathLike[str] | None) -> tuple[int, int, int]:
    """(mode, owner, group) that a file replacing or beside the file at ``path`` gets: its
    mode without execute bits and its group, and its owner where this process is root (-1:
    unchanged); `default_mode` and -1, -1 where there is no such file."""
    try:
        stats = os.stat(path) if path is not None else None
    except OSError:
        stats = None
    if stats is None or not stat.S_ISREG(stats.st_mode):
        return default_mode(), -1, -1
    owner = stats.st_uid if os.geteuid() == 0 else -1
    return stats.st_mode & 0o666, owner, stats.st_gid


def model_writers(model: str | os.PathLike[str] | None) -> tuple[frozenset[int], int | None]:
    """(owners, group) of a file that steers runs of the model at ``model``, as
    `trust.check_file` takes them: the model's owner, and its group where that group may
    write the model (a shared model, docs/shared-host.md); no one where there is no model."""
    try:
        stats = os.stat(model) if model is not None else None
    except OSError:
        stats = None
    if stats is None:
        return frozenset(), None
    return frozenset({stats.st_uid}), stats.st_gid if stats.st_mode & stat.S_IWGRP else None


def apply_permissions(fd: int, permissions: tuple[int, int, int]) -> None:
    """Give the open file ``fd`` the (mode, owner, group) of `permissions_of`: the owner and
    group where this process may (a user not in the group keeps the folder's), then the mode,
    which the umask does not cut here."""
    mode, owner, group = permissions
    if owner != -1 or group != -1:
        try:
            os.fchown(fd, owner, group)
        except PermissionError:
            pass
    os.fchmod(fd, mode)


def open_side_file(
    path: str | os.PathLike[str],
    flags: int,
    *,
    what: str,
    like: str | os.PathLike[str] | None = None,
    writers: tuple[frozenset[int] | None, int | None] | None = None,
) -> int:
    """Open the file ``path`` beside a model, never through a symbolic link: ``flags`` are
    os.O_RDONLY, or os.O_RDWR (with O_APPEND, say) to write it in place, with O_CREAT to
    create it if missing (exclusively, with the permissions of the file ``like``).

    Refuses (`UnsafeFileError`, naming the file as ``what``) a symbolic link, a file that is
    not a regular file, and, to write, one with other hard links. With ``writers`` (owners,
    group: `model_writers`), a file that steers a run, it refuses one that others may write
    (`trust.check_file`), and a new one is made writable by no group but that one. Other
    failures are the OSError of the system call (FileNotFoundError where it is missing and
    not created).
    """
    create = bool(flags & os.O_CREAT)
    flags = (flags & ~os.O_CREAT) | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(100):  # another process may create or remove it meanwhile
        try:
            fd = os.open(path, flags)
            break
        except FileNotFoundError:
            if not create:
                raise
        except OSError as exc:
            raise _refusal(path, what, exc) from None
        permissions = permissions_of(like)
        if writers is not None and writers[1] is None:  # no group may write it
            permissions = (permissions[0] & ~stat.S_IWGRP, *permissions[1:])
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, permissions[0])
        except FileExistsError:
            continue
        except OSError as exc:
            raise _refusal(path, what, exc) from None
        try:
            apply_permissions(fd, permissions)
        except BaseException:
            os.close(fd)
            raise
        break
    else:
        raise OSError(errno.EAGAIN, "created and removed again and again", str(path))
    try:
        check_regular(fd, path, what, writing=flags & (os.O_WRONLY | os.O_RDWR) != 0)
        if writers is not None:
            check_file(os.fstat(fd), path, what, owners=writers[0], group=writers[1], fd=fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_regular(fd: int, path: str | os.PathLike[str], what: str, *, writing: bool) -> None:
    """Refuse the open file ``fd`` unless it is a regular file (with no other hard link, if
    it is to be written in place)."""
    stats = os.fstat(fd)
    if not stat.S_ISREG(stats.st_mode):
        raise UnsafeFileError(
            f"cannot write {what} {path}: {file_kind(stats.st_mode)}, not a regular file"
        )
    if writing and stats.st_nlink > 1:
        raise UnsafeFileError(
            f"{what} {path} has {stats.st_nlink} hard links: refusing to write through them; "
            "remove it"
        )


def check_side_path(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` itself, after refusing a symbolic link or an existing file that is not a
    regular file there, and a symbolic link of another user on its way (`foreign_link`: a
    user's folder that root writes a report or a state into, made a link to /etc): where a
    file beside a model, or an output, is written (replaced by a rename)."""
    from pathlib import Path  # not at import: scoring one message never writes

    check_link_owners(path, what)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return Path(path)
    except OSError as exc:
        raise UnsafeFileError(f"cannot write {what} {path}: {os_reason(exc)}") from None
    if stat.S_ISLNK(mode):
        raise _link(path, what)
    if not stat.S_ISREG(mode):
        raise UnsafeFileError(f"cannot write {what} {path}: {file_kind(mode)}, not a regular file")
    return Path(path)


def check_link_owners(path: str | os.PathLike[str], what: str = "model file") -> None:
    """Refuse (`UnsafeFileError`, naming ``what``) a ``path`` whose way passes a symbolic
    link that belongs neither to the user running nbspam nor to root (`foreign_link`)."""
    found = foreign_link(path)
    if found is not None:
        raise UnsafeFileError(f"{what} {path}: {found}")


def check_output_path(path: str | os.PathLike[str], what: str) -> Path:
    """`check_side_path` of an output that is no model (a scores file, a plot, a dump, a
    report), refusing as well a name another user made first in a folder anyone may write
    (`trust.check_made`): the output replacing her /tmp/dump.txt kept her as its owner,
    with her mode, and a report was appended to her file. (A file beside a model is judged
    by who may write the model instead: a layer in /var/lib/nbspam/users, 1777, is its
    user's.)"""
    check_made(path, what)
    return check_side_path(path, what)


def check_model_path(path: str | os.PathLike[str]) -> None:
    """Refuse (`UnsafeFileError`) writing a model at ``path`` where a symbolic link of
    another user lies on its way (`check_link_owners`), or a name another user made first
    in a folder anyone may write (`trust.check_made`: a model replacing her /tmp/spam.nbm
    kept her as its owner, with her mode, and so did its lock)."""
    check_link_owners(path)
    check_made(path, "model file")


def foreign_link(path: str | os.PathLike[str]) -> str | None:
    """What is wrong with ``path``, where its way passes a symbolic link that belongs neither
    to the user running nbspam nor to root: at its name, at a name such a link leads to, or
    in place of one of its folders ("LINK is a symbolic link of another user ..."); else
    None. A link of one's own (or one root made) is followed; one of another user is what a
    neighbour who may write a folder on the way plants, ``spam.nbm -> /etc/passwd`` or
    ``Maildir/.Junk -> /etc/profile.d``, for a run of root's to replace, or move mail into,
    what it names.

    The path is walked a name at a time as the system walks it (`trust.walk`: a link's
    target in place of the link, ``..`` from where a link led); a name that does not
    exist ends the walk: what is made there is made by the caller, who refuses what it
    must.
    """
    for folder, name, found in walk(path)[0]:
        if stat.S_ISLNK(found.st_mode) and found.st_uid not in (0, os.geteuid()):
            owner = user_name(found.st_uid)
            owner = f"uid {owner}" if owner == str(found.st_uid) else owner
            return (
                f"{os.path.join(folder, name)} is a symbolic link of another user "
                f"({owner}): refusing to follow it; remove it"
            )
    return None


def create_temporary(folder: str | os.PathLike[str], name: str) -> tuple[int, str]:
    """A new, empty temporary file ``.NAME.<8 random>.tmp`` in ``folder``, mode 0600, made
    with O_CREAT|O_EXCL|O_NOFOLLOW: never a file or link that was there before. Returns its
    descriptor and path."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        # os.urandom, not secrets: that imports hashlib, which scoring one message avoids
        tag = "".join(_NAME_CHARS[byte % len(_NAME_CHARS)] for byte in os.urandom(8))
        tmp = os.path.join(folder, f".{name}.{tag}.tmp")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(folder))


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, for an error message."""
    kinds = [
        (stat.S_ISLNK, "it is a symbolic link"),
        (stat.S_ISDIR, "it is a folder"),
        (stat.S_ISFIFO, "it is a FIFO"),
        (stat.S_ISSOCK, "it is a socket"),
        (stat.S_ISCHR, "it is a device"),
        (stat.S_ISBLK, "it is a device"),
    ]
    return next((text for test, text in kinds if test(mode)), "it is a special file")


# -- outputs that are inputs ------------------------------------------------------------------


def check_outputs(
    outputs: Iterable[tuple[str, str | None, str]],
    inputs: Iterable[tuple[str | None, str]],
) -> None:
    """Refuse, before any work, an output that is one of the command's inputs or another of
    its outputs: the run would replace or append to what it reads.

    ``outputs`` are (option, path, what it is) for each file the command writes (path None
    or '-': none); ``inputs`` are (path, what it is) for each file or folder it reads (None
    or '-': stdin). Files are compared by device and inode (through links, as they are
    written and read), or by real path where they do not exist yet; an existing output
    inside an input folder is one of its files. The one-line error (`UnsafeFileError`)
    says "OPTION PATH is WHAT; give another file".
    """
    files: dict[object, str] = {}
    folders: dict[object, str] = {}
    for path, what in inputs:
        if path is None or path == "-":
            continue
        identity, is_folder = _identity(path)
        (folders if is_folder else files).setdefault(identity, what)
    written: dict[object, str] = {}
    for option, path, what in outputs:
        if path is None or path == "-":
            continue
        identity, exists = _identity(path)[0], os.path.lexists(path)
        clash = written.get(identity) or files.get(identity) or folders.get(identity)
        if clash is None and exists:
            clash = next((f"in {folders[d]}" for d in _folders_above(path) if d in folders), None)
        if clash is not None:
            raise UnsafeFileError(f"{option} {path} is {clash}; give another file")
        written[identity] = what


def _identity(path: str) -> tuple[object, bool]:
    """(device and inode through links, or the real path where there is no such file;
    whether it is a folder)."""
    try:
        stats = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path)), False
    return (stats.st_dev, stats.st_ino), stat.S_ISDIR(stats.st_mode)


def _folders_above(path: str) -> Iterable[object]:
    """The device and inode of every folder that holds ``path``: by the folders of its
    name and by those of its target where it is a link."""
    seen = set()
    for start in (os.path.dirname(os.path.abspath(path)), os.path.dirname(os.path.realpath(path))):
        folder = os.path.realpath(start)
        while folder not in seen:
            seen.add(folder)
            try:
                stats = os.stat(folder)
            except OSError:
                break
            yield stats.st_dev, stats.st_ino
            folder = os.path.dirname(folder)


# -- one-line errors ----------------------------------------------------------------------------


def _link(path: str | os.PathLike[str], what: str) -> UnsafeFileError:
    return UnsafeFileError(
        f"{what} {path} is a symbolic link: refusing to write through it; remove it"
    )


def _refusal(path: str | os.PathLike[str], what: str, exc: OSError) -> OSError | UnsafeFileError:
    """A symbolic link (ELOOP under O_NOFOLLOW) as its refusal; any other failure as it is."""
    if exc.errno == errno.ELOOP:
        return _link(path, what)
    return exc
