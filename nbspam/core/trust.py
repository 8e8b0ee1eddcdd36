"""Files that decide what a run does, refused where others than their owner and root may
write them: as OpenSSH's StrictModes refuses an ``authorized_keys`` others may write.

nbspam runs as root (`nbspam serve`, cron) and as mail users (procmail, Dovecot) on hosts
many people share. A model, its journal, a user's layer, `sync`'s and `filter`'s state and
a file of settings each decide what it does: which messages it learns or skips, how it
scores everybody's mail, which files it reads. Whoever may write one of them decides that
too, so such a file is refused in one line (`UnsafeFileError`) that names it and the fix:

- where others may write it (``o+w``), or replace it: a folder on its path that others may
  write without the sticky bit, or, where the file may belong to anyone (``owners`` None),
  a group or a user that may not write the file itself (a member of ``staff`` who may
  write ``/etc/nbspam`` could put a file of their own in place of root's settings; where
  the owners are given, the owner of such a file refuses it);
- where a group may write it, but for the group given as ``group`` (the group of a shared
  model, whose members may write the model itself), any group where ``group`` is
  `ANY_GROUP` (a model: docs/shared-host.md's group set-up), and the owner's private group
  (no other member: Debian's user groups, umask 002);
- where its POSIX access ACL lets another user write it, or a group as above: the mode's
  group bits then show the ACL's mask, not the file's group (``setfacl -m u:mallory:rw``
  on a file 0640 alice:alice shows as 0660, the group alice's own);
- where ``owners`` are given and it belongs to none of them (root and the user running
  nbspam always may own it), unless it is a file of the shared ``group`` in a folder
  others may not write: every member may write the model, so any member may own it;
- where a name on its way (the file itself where ``owners`` are None, a folder, a link)
  lies in a folder anyone may write (with the sticky bit, as /tmp) and belongs to
  another than root, the user running nbspam or that folder's owner: its owner is
  whoever made it there first, not who gave the path (root's ``-c /tmp/nbspam.yaml``).

A FIFO is judged as a regular file is: what a run reads from it is what its writer writes
then (one anyone may write, ``mkfifo -m 666``, is as a file anyone may write; a pipe of
one's own, bash's ``-c <(...)``, is read). Any other file that is not a regular file (a
terminal, /dev/null) is not judged here: nothing can be written into it for a later run
to read.

Standard library only, and none of ``dataclasses``, ``typing`` or ``pathlib``: the model
file's readers check it when one message is scored.
"""

from __future__ import annotations

import os
import stat
import struct

from ..errors import UnsafeFileError

ANY_GROUP = -2
"""``group`` of a file any group may write (a model: a shared model's group writes it)."""


def check_file(
    stats: os.stat_result,
    path: str | os.PathLike[str],
    what: str,
    *,
    owners: frozenset[int] | set[int] | None = None,
    group: int | None = None,
    fd: int | None = None,
) -> None:
    """Refuse (`UnsafeFileError`) the file at ``path``, whose `os.stat` (of the open file
    ``fd``, whose ACL is read; None: of the file at ``path``) is ``stats``, where others
    than those the module's notes allow may write it. ``what`` names it in the error ("sync
    state"); ``owners`` are the users it may belong to besides root and the user running
    nbspam (None: any user, its owner being who gave it); ``group`` the group that may
    write it besides the owner's private one (None: none, `ANY_GROUP`: any)."""
    if not (stat.S_ISREG(stats.st_mode) or stat.S_ISFIFO(stats.st_mode)):
        return
    who = _foreign_writer(stats, path if fd is None else fd, group)
    if who is not None:
        raise UnsafeFileError(f"{what} {path}: writable by {who}; {_fix(who)} {path}")
    steps = walk(path)[0]
    folders = _folders_of(steps)
    for folder, folder_stats in folders:
        if folder_stats.st_mode & stat.S_ISVTX:
            continue  # no one but its owner may rename or remove another's file there
        if owners is None:  # whoever may write the folder may put a file of theirs here
            who = _foreign_writer(folder_stats, folder, group)
        else:  # a file of theirs put in its place is refused below, by its owner
            who = "others" if folder_stats.st_mode & stat.S_IWOTH else None
        if who is not None:
            raise UnsafeFileError(
                f"{what} {path}: its folder {folder} is writable by {who} without the "
                f"sticky bit; {_fix(who)} {folder}"
            )
    _check_made(steps, dict(folders), stats, path, what, whole=owners is None)
    shared = group is not None and group in (ANY_GROUP, stats.st_gid)
    if owners is None or stats.st_uid in (0, os.geteuid()) or stats.st_uid in owners:
        return
    if shared and not (folders and folders[0][1].st_mode & stat.S_IWOTH):
        return  # made in a folder only the group may write: by a member, who may write the model
    allowed = sorted({0, os.geteuid(), *owners})
    raise UnsafeFileError(
        f"{what} {path}: owned by {user_name(stats.st_uid)}, not by "
        f"{' or '.join(user_name(uid) for uid in allowed)}: chown it if it is one of "
        "yours, else remove it"
    )


def check_made(path: str | os.PathLike[str], what: str) -> None:
    """Refuse (`UnsafeFileError`) writing the file at ``path``, which may not exist yet,
    where a name on its way (the file itself among them) lies in a folder anyone may write
    and belongs to another than root, the user running nbspam or that folder's owner: an
    output replaced there keeps the owner and mode of the file it replaces, and one
    appended to is theirs, so root's ``dump -o /tmp/dump.txt`` went to whoever made the
    name first."""
    steps = walk(path)[0]
    _check_made(steps, dict(_folders_of(steps)), None, path, what, whole=True)


def _check_made(
    steps: list[tuple[str, str, os.stat_result]],
    folders: dict[str, os.stat_result],
    stats: os.stat_result | None,
    path: str | os.PathLike[str],
    what: str,
    *,
    whole: bool,
) -> None:
    """Refuse the file at ``path`` (its `os.stat` ``stats``, None: its `os.lstat` on the
    way; its way ``steps`` through ``folders``) where a name on its way lies in a folder
    anyone may write (with the sticky
    bit, as /tmp) and belongs to another than root, the user running nbspam or the folder's
    owner: anyone could have made it there before the one who gave the path (a folder, a
    symbolic link, and, where ``whole``, the file itself: a file of given owners is judged
    by them)."""
    for at, (folder, name, found) in enumerate(steps):
        last = at == len(steps) - 1
        holder = folders.get(folder)
        if holder is None or not holder.st_mode & stat.S_IWOTH or (last and not whole):
            continue
        owner = stats.st_uid if last and stats is not None else found.st_uid
        if owner not in (0, os.geteuid(), holder.st_uid):
            raise UnsafeFileError(
                f"{what} {path}: {os.path.join(folder, name)} belongs to {user_name(owner)}, "
                f"in {folder}, which anyone may write: anyone could have put it there; "
                "remove it"
            )


def check_folder(stats: os.stat_result, folder: str, what: str) -> None:
    """Refuse (`UnsafeFileError`) ``folder`` (its `os.stat` ``stats``), which holds files of
    several users (`layers`), where a group, others or a user its ACL names may write it
    without the sticky bit, but for its owner's private group: one user could then rename
    another's file away and put one of their own in its place."""
    who = None if stats.st_mode & stat.S_ISVTX else _foreign_writer(stats, folder)
    if who is not None:
        raise UnsafeFileError(
            f"{what} {folder} is writable by {who} without the sticky bit: one user could "
            f"replace another's file; chmod +t {folder}"
        )


def _foreign_writer(
    stats: os.stat_result, file: int | str | os.PathLike[str], group: int | None = None
) -> str | None:
    """Who may write the file or folder ``file`` (an open descriptor or a name; its
    `os.stat` ``stats``) besides its owner, root, the user running nbspam, the group
    ``group`` (`ANY_GROUP`: any) and the owner's private group, in the words of an error:
    "others", "user mallory (its ACL)", "group mail"; None where no one."""
    if stats.st_mode & stat.S_IWOTH:
        return "others"
    users, groups = _writers(stats, file)
    for uid in users:
        if uid not in (0, os.geteuid(), stats.st_uid):
            return f"user {user_name(uid)} (its ACL)"
    for gid in groups:
        if group not in (ANY_GROUP, gid) and not private_group(gid, stats.st_uid):
            return f"group {group_name(gid)}"
    return None


def _fix(who: str) -> str:
    """The chmod that takes away what `_foreign_writer` found (an ACL's through its mask)."""
    return "chmod o-w" if who == "others" else "chmod g-w"


_ACL = "system.posix_acl_access"
_ACL_USER, _ACL_GROUP_OBJ, _ACL_GROUP, _ACL_MASK = 0x02, 0x04, 0x08, 0x10
_ACL_ENTRY = struct.Struct("<HHI")  # tag, permissions, id: Linux's posix_acl_xattr_entry


def _writers(
    stats: os.stat_result, file: int | str | os.PathLike[str]
) -> tuple[list[int], list[int]]:
    """(users, groups) who may write the file or folder ``file`` (an open descriptor or a
    name; its `os.stat` ``stats``) besides its owner, root and others: its group where the
    mode lets it, and the users and groups its POSIX access ACL names with write permission
    that its mask lets through. Where it has an ACL the mode's group bits are that mask,
    which is all they tell; without one, or where the platform keeps none, they are the
    group's. An ACL is read only where those bits let a group write: else its mask lets no
    one."""
    if not stats.st_mode & stat.S_IWGRP:
        return [], []
    try:
        data = os.getxattr(file, _ACL)  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):  # no ACL (ENODATA), or none kept here
        return [], [stats.st_gid]
    entries = [_ACL_ENTRY.unpack_from(data, at) for at in range(4, len(data) - 7, 8)]
    mask = next((perms for tag, perms, _ in entries if tag == _ACL_MASK), 7)
    can = [(tag, who) for tag, perms, who in entries if perms & mask & 2]
    users = [who for tag, who in can if tag == _ACL_USER]
    groups = [
        stats.st_gid if tag == _ACL_GROUP_OBJ else who
        for tag, who in can
        if tag in (_ACL_GROUP_OBJ, _ACL_GROUP)
    ]
    return users, groups


MAX_LINKS = 40
"""The symbolic links the system follows in one path before it says ELOOP (Linux's)."""


def walk(
    path: str | os.PathLike[str],
) -> tuple[list[tuple[str, str, os.stat_result]], str | None]:
    """(each name the system looks up to reach ``path``, in turn, as (the folder it is
    looked up in, the name, its `os.lstat`); the real path reached, None where the walk
    ended before). The folders are real paths (no link in them): a symbolic link is
    followed as the system follows it, its target in its place and ``..`` climbing from
    where it led, not from its name (``link/../x`` is not ``x``, as os.path.abspath would
    have it). The walk ends at a name that is missing or cannot be looked at, and after
    `MAX_LINKS` links: what is made there, or the error, is the caller's own system
    call's."""
    path = os.fspath(path)
    if not os.path.isabs(path):
        path = os.path.join(os.getcwd(), path)
    names = path.split(os.sep)[::-1]  # the names still to walk, the next last
    folder, links, steps = os.sep, 0, []
    while names:
        name = names.pop()
        if name in ("", "."):
            continue
        if name == "..":
            folder = os.path.dirname(folder)
            continue
        here = os.path.join(folder, name)
        try:
            found = os.lstat(here)
        except OSError:
            return steps, None
        steps.append((folder, name, found))
        if not stat.S_ISLNK(found.st_mode):
            folder = here
            continue
        links += 1
        if links > MAX_LINKS:
            return steps, None
        try:
            target = os.readlink(here)
        except OSError:
            return steps, None
        if os.path.isabs(target):
            folder = os.sep
        names.extend(target.split(os.sep)[::-1])
    return steps, folder


def _folders_of(
    steps: list[tuple[str, str, os.stat_result]],
) -> list[tuple[str, os.stat_result]]:
    """(folder, its `os.stat`) of each folder a name is looked up in on a way (`walk`'s
    ``steps``), the nearest first: the folder of the file, of each link on the way, and
    those above them; folders that cannot be looked at are left out."""
    known = {os.path.join(folder, name): found for folder, name, found in steps}
    out, seen = [], set()
    for folder, _, _ in reversed(steps):
        if folder in seen:
            continue
        seen.add(folder)
        try:
            out.append((folder, known.get(folder) or os.stat(folder)))
        except OSError:
            pass
    return out


PRIVATE_FOR = 60.0
"""Seconds an answer of `private_group` is kept: it lists every user of the host."""
_PRIVATE: dict[tuple[int, int], tuple[float, bool]] = {}  # (gid, uid): (when, answer)


def private_group(gid: int, uid: int) -> bool:
    """Whether the group ``gid`` is the private group of the user ``uid``: that user's
    primary group, of which no other user is a member (supplementary or primary). Where
    the group or the user is unknown, False.

    The answer lists every user of the host (pwd.getpwall: all of /etc/passwd, and of
    LDAP where it enumerates), some 4 µs a user, so it is kept `PRIVATE_FOR` seconds: a
    server that scores each message with a layer from a folder its owner's group may
    write (0770 nbspam:nbspam) looked the host's users up for every message. A member
    added to the group is seen within that time."""
    import time

    now = time.monotonic()
    kept = _PRIVATE.get((gid, uid))
    if kept is not None and now - kept[0] < PRIVATE_FOR:
        return kept[1]
    answer = _private_group(gid, uid)
    if len(_PRIVATE) >= 4096:  # the pairs a long-running server meets: bounded all the same
        _PRIVATE.clear()
    _PRIVATE[(gid, uid)] = (now, answer)
    return answer


def _private_group(gid: int, uid: int) -> bool:
    import grp
    import pwd

    try:
        user, group = pwd.getpwuid(uid), grp.getgrgid(gid)
    except KeyError:
        return False
    if user.pw_gid != gid or any(name != user.pw_name for name in group.gr_mem):
        return False
    return all(other.pw_uid == uid for other in pwd.getpwall() if other.pw_gid == gid)


def user_name(uid: int) -> str:
    """The name of the user ``uid``, or the number where there is none."""
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def user_id(name: str) -> int | None:
    """The user id of the user called ``name`` on this host, None where there is none."""
    import pwd

    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def group_name(gid: int) -> str:
    """The name of the group ``gid``, or the number where there is none."""
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)
