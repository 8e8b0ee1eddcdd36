"""Where messages come from: files, folders, Maildirs, mboxes, tables and stdin, as a stream.

Every message keeps a stable identifier: the path as given (below a folder, joined to it),
``PATH#N`` for the N-th message of an mbox (from 1), ``PATH#LINE`` for a table row (or the
row's own ``id``), and ``-`` for standard input. A source that cannot be read is reported
through `Problems` as ``identifier: reason`` and the stream goes on.

Whatever the input, at most `MAX_MESSAGE_BYTES` of a message are read and kept (a cut is
noted), an mbox is read a message at a time, and binary data (`is_binary`) is reported
instead of scored: memory stays bounded whatever the bytes.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence

from ..errors import ConfigError, InputError, os_reason
from .mbox import SEPARATOR, mbox_messages
from .message import (
    MAX_MESSAGE_BYTES,
    Message,
    Problems,
    checked_message,
    read_stdin,
)
from .table_rows import TABLE_SUFFIXES, csv_rows, jsonl_values, lines_of, text_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

LINK_AGAIN = "a symbolic link loop or a second link to it"
LINK_OUT = "a symbolic link out of the folder, not followed (--follow-links follows it)"
LINK_SWAPPED = "a symbolic link where a file was, not followed"
FOLDER_SWAPPED = "its folder is not the one it was listed in: another was put in its place"
NOT_REGULAR = "not a regular file (a FIFO or a device)"
# Never entered through a link, whatever the options: their files never end or never hold mail.
SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")


def read_messages(
    paths: Iterable[str],
    problems: Problems,
    *,
    stdin: BinaryIO | None = None,
    follow_links: bool = False,
    literal: bool = False,
) -> Iterator[Message]:
    """Messages from each path in turn: '-' (one message on stdin), a file (one message, an
    mbox, or a table by its suffix), a Maildir, or a folder (every file below it), or, unless
    ``literal``, a glob or a URL that is not a file's name (`remote`). Only table rows can
    carry a label.

    Inside a folder a symbolic link is followed only where it stays in the folder, unless
    ``follow_links`` (`folder_files`); a path named here is read wherever its link leads."""
    from .remote import is_glob, is_url, local_glob, url_messages

    for path in paths:
        if path == "-":
            message = read_stdin(problems, stdin)
            if message is not None:
                yield message
        elif not literal and is_url(path):
            yield from url_messages(path, problems)
        elif not literal and is_glob(path):
            matches = local_glob(path)
            if not matches:
                problems.skip(path, "no file matches")
            for match in matches:
                yield from _read_path(match, problems, tables=True, follow_links=follow_links)
        else:
            yield from _read_path(path, problems, tables=True, follow_links=follow_links)


def label_spec(spec: str) -> tuple[str, str] | None:
    """(LABEL, PATH) of a ``LABEL=PATH`` spec, or None for a spec that is not one (no
    ``=``, or an existing file whose name holds one). A ``~`` that starts PATH is the home
    folder, as a shell makes it: /bin/sh (cron's shell) leaves ``spam=~/Maildir`` as it is."""
    label, sep, path = spec.partition("=")
    if not sep or not label or os.path.exists(spec):
        return None
    return label, os.path.expanduser(path) if path.startswith("~") else path


def read_labelled(
    specs: Iterable[str], problems: Problems, *, follow_links: bool = False, literal: bool = False
) -> Iterator[Message]:
    """Labelled messages from training data specs.

    A spec is a folder with one subfolder per label (messages found recursively below each),
    a table (TSV ``label<TAB>text`` lines, CSV with ``label`` and ``text`` columns, JSON Lines
    with ``label`` and ``text`` keys), or ``LABEL=PATH`` for every message of PATH (a file,
    folder, Maildir or mbox, a glob of them, or a URL: `remote`) under one label. Symbolic
    links in folders are followed, and ``literal`` PATHs read, as `read_messages` says.
    """
    for spec in specs:
        labelled = label_spec(spec)
        if labelled is not None:
            label, path = labelled
            found = read_messages([path], problems, follow_links=follow_links, literal=literal)
            for message in found:
                yield Message(message.id, message.data, label)
        elif os.path.isdir(spec):
            yield from _read_label_folders(spec, problems, follow_links)
        elif spec.lower().endswith(TABLE_SUFFIXES):
            for message in _read_table(spec, problems):
                if message.label:
                    yield message
                else:
                    problems.skip(message.id, "no label in this row")
        elif os.path.exists(spec):
            raise no_labels(spec)
        else:
            problems.skip(spec, "no such file or directory")


def no_labels(spec: str) -> InputError:
    """The error of training data that exists but carries no labels."""
    return InputError(
        f"{spec} has no labels: give a folder with one subfolder per label, a table, "
        f"or LABEL={spec}"
    )


def label_folders(root: str, problems: Problems, follow_links: bool) -> Iterator[tuple[str, str]]:
    """(label, folder) of each label folder of ``root``, in order; files directly in it are
    noted and left, links out of it reported and left (unless ``follow_links``)."""
    if is_maildir(root):
        raise InputError(f"{root} is a Maildir, which has no labels: give LABEL={root}")
    links = _Links(root, follow_links)
    entries = folder_entries(root, problems)
    stray = [name for name, is_folder, _, _ in entries if not is_folder]
    if stray:
        problems.note(
            f"{len(stray)} file(s) directly in {root} ignored (only files in label folders "
            f"count): {', '.join(stray[:3])}{' ...' if len(stray) > 3 else ''}"
        )
    for label, _, _, is_link in (entry for entry in entries if entry[1]):
        folder = os.path.join(root, label)
        if is_link and links.target(folder, problems) is None:
            continue
        yield label, folder


def _read_label_folders(root: str, problems: Problems, follow_links: bool) -> Iterator[Message]:
    for label, folder in label_folders(root, problems, follow_links):
        for message in _read_path(folder, problems, tables=False, follow_links=follow_links):
            yield Message(message.id, message.data, label)


def _read_path(
    path: str, problems: Problems, *, tables: bool, follow_links: bool = False
) -> Iterator[Message]:
    """The messages of a path named by the user: a folder, a table, a file. Its own link
    is followed (it was named); a link below a folder as `folder_files` says."""
    if os.path.isdir(path):
        yield from _read_folder(path, problems, follow_links)
        return
    target = os.path.realpath(path) if os.path.islink(path) else path
    if tables and path.lower().endswith(TABLE_SUFFIXES):
        yield from _read_table(path, problems, target)
    else:
        yield from read_file(path, problems, target)


class Listed(str):
    """The path of a file `listed_files` found, as a `str`, that knows the (device, inode)
    of the folder it was found in (``folder``, None if unknown): `open_listed` opens it by
    its name in that very folder. Whoever owns a folder that root's sync or filter reads
    could otherwise, between the listing and the reading, make it (or a folder above it) a
    link to a folder of root's holding files of the names she chose, and root's files were
    read, scored and learned. Sent to another process (a worker, on this host or not) it
    is a plain path again: a (device, inode) is of this host."""

    folder: tuple[int, int] | None

    def __new__(cls, path: str, folder: tuple[int, int] | None) -> Listed:
        self = super().__new__(cls, path)
        self.folder = folder
        return self

    def __reduce__(self) -> tuple:
        return str, (str(self),)


def open_listed(path: str) -> int:
    """`open_regular` of ``path``; a `Listed` path by its name in the folder it was found
    in, opened by its path and checked to be that folder (`FOLDER_SWAPPED` otherwise, as
    an OSError): a folder on the way swapped since for a link leads to another folder."""
    folder = getattr(path, "folder", None)
    if folder is None:
        return open_regular(path)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    parent = os.open(os.path.dirname(path) or ".", flags)
    try:
        info = os.fstat(parent)
        if (info.st_dev, info.st_ino) != folder:
            raise OSError(errno.ESTALE, FOLDER_SWAPPED, path)
        return open_regular(os.path.basename(path), parent)
    finally:
        os.close(parent)


def open_regular(path: str, dir_fd: int | None = None) -> int:
    """A descriptor of the regular file at ``path`` (a name in the open folder ``dir_fd``,
    if given), open for reading.

    It never blocks and never follows a symbolic link at ``path`` itself (a link met there
    was put in place of the file after it was listed): a FIFO, a socket or a device is
    opened without waiting and refused, and so is a link (`LINK_SWAPPED`, `NOT_REGULAR`,
    as an OSError with that reason)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) and (
            os.path.islink(path) if dir_fd is None else _is_link(path, dir_fd)
        ):
            raise OSError(errno.ELOOP, LINK_SWAPPED, path) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, NOT_REGULAR, path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(path: str, problems: Problems, target: str | None = None) -> Iterator[Message]:
    """One message, or every message of an mbox (by suffix, or by its first line and a
    second separator, or, past `MAX_MESSAGE_BYTES`, by its first line alone); ``target`` is
    where the file is (the file a named link leads to), if not at ``path``.

    An mbox's messages are read one at a time (`mbox_messages`). A file named .mbox is only
    opened here (so that what cannot be read is reported as for any file); any other file
    is read up to the cap to see whether it is one, and those bytes are dropped before an
    mbox's messages are read.
    """
    target = target or path
    mbox = path.lower().endswith(".mbox")
    try:
        if mbox:
            os.close(open_listed(target))
        else:
            data = read_bytes(target)
    except OSError as exc:
        problems.skip(path, os_reason(exc))
        return
    if not mbox:
        longer = len(data) > MAX_MESSAGE_BYTES
        if not (data.startswith(b"From ") and (longer or SEPARATOR.search(data))):
            # the id a plain str: a `Listed` path carries a dict, some 300 bytes a message held
            message = checked_message(str(path), data, problems, _size(target) if longer else None)
            if message is not None:
                yield message
            return
        del data  # an mbox after all: not kept while its messages are read
    try:
        with os.fdopen(open_listed(target), "rb") as f:
            for number, (data, size) in enumerate(mbox_messages(f), start=1):
                message = checked_message(f"{path}#{number}", data, problems, size)
                if message is not None:
                    yield message
    except OSError as exc:
        problems.skip(path, f"cannot read as an mbox: {os_reason(exc)}")


def _size(path: str) -> int | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _read_folder(root: str, problems: Problems, follow_links: bool) -> Iterator[Message]:
    """The messages of every file below ``root`` (`folder_files`)."""
    for path, _ in folder_files(root, problems, follow_links=follow_links):
        yield from read_file(path, problems)


def folder_files(
    root: str, problems: Problems, *, skip: Iterable[str] = (), follow_links: bool = False
) -> Iterator[tuple[str, str | None]]:
    """(path, Maildir part) of every message file below ``root``: `listed_files` without
    the folders they were listed in."""
    for path, part, _ in listed_files(root, problems, skip=skip, follow_links=follow_links):
        yield path, part


def listed_files(
    root: str, problems: Problems, *, skip: Iterable[str] = (), follow_links: bool = False
) -> Iterator[tuple[str, str | None, tuple[int, int] | None]]:
    """(path, Maildir part, folder) of every message file below ``root``, in sorted order: of a
    Maildir only ``cur/`` and ``new/`` (its other files are the mail server's, its subfolders
    other mailboxes), of a plain folder every file below it; the part is 'cur' or 'new'
    inside a Maildir, else None. Hidden names are left out, and so are the folders ``skip``
    (below the root).

    A symbolic link is followed only where it stays inside ``root`` (anywhere with
    ``follow_links``, but never into /proc, /sys or /dev), and what it leads to is given by
    its own path, with no link in it below the root: `open_regular` then opens it without
    following a link put there since (`_Links`). A folder is entered by its name in the
    open folder it was listed in, without following a link: one swapped for a link since
    is judged as that link. A link not followed is reported, and so
    is a folder reached twice (a link loop), which is not entered again, and anything that
    is neither a folder nor a regular file (a FIFO would block the reader, a device never
    end).

    The folder is the (device, inode) of the folder the file is in, as it was when the file
    was found: the open folder it was listed from, or, for a file a link leads to, the
    folder the link's path named then (None if that could not be looked at). `filter`
    moves a file only out of that very folder: one swapped for another since (a folder
    above it made a link to /etc) holds files of someone else's.
    """
    skipped = {key for key in map(_folder_key, skip) if key is not None}
    seen: set[tuple[int, int]] = set()
    links = _Links(root, follow_links)

    def walk(
        folder: str, part: str | None, name: str, parent: int | None = None
    ) -> Iterator[tuple[str, str | None, tuple[int, int] | None]]:
        """The files below ``folder``, which is reported as ``name`` (its link). A folder
        listed in the open folder ``parent`` is opened there by its name, never through a
        link: one swapped for a link since it was listed is judged as the link it now is."""
        try:
            fd = _open_folder(folder, parent, follow=folder == root)
        except OSError as exc:
            if parent is not None and exc.errno in (errno.ELOOP, errno.ENOTDIR):
                if _is_link(os.path.basename(folder), parent):  # swapped since listed
                    target = links.target(folder, problems)
                    if target is not None:
                        yield from walk(target, part, name)
                    return
            problems.skip(name, os_reason(exc))
            return
        try:
            yield from listed(fd, folder, part, name)
        finally:
            os.close(fd)

    def listed(
        fd: int, folder: str, part: str | None, name: str
    ) -> Iterator[tuple[str, str | None, tuple[int, int] | None]]:
        """The files below ``folder``, open as ``fd``."""
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        if folder != root and key in skipped:
            return
        if key in seen:
            problems.skip(name, f"folder already read ({LINK_AGAIN}), not entered again")
            return
        seen.add(key)
        if _is_folder("cur", fd) and _is_folder("new", fd):  # a Maildir
            for sub in ("cur", "new"):
                path = os.path.join(folder, sub)
                if _is_link(sub, fd):
                    target = links.target(path, problems)
                    if target is not None:
                        yield from walk(target, sub, path)
                else:
                    yield from walk(path, sub, path, fd)
            return
        for entry, is_folder, is_file, is_link in folder_entries(folder, problems, fd):
            path = os.path.join(folder, entry)
            target = links.target(path, problems) if is_link else path
            if target is None:
                continue
            if is_folder:
                yield from walk(target, part, path, None if is_link else fd)
            elif is_file:
                found = _folder_key(os.path.dirname(target)) if is_link else key
                yield Listed(target, found), part, found
            elif not os.path.exists(path):  # a dangling link
                problems.skip(path, "no such file or directory")
            else:
                problems.skip(path, NOT_REGULAR)

    if not os.path.exists(root):
        problems.skip(root, "no such file or directory")
        return
    yield from walk(root, maildir_part(root), root)


def _open_folder(folder: str, parent: int | None, follow: bool) -> int:
    """A descriptor of ``folder`` for listing: its last name opened in the open folder
    ``parent`` if given, else its path; a link there is followed only if ``follow``."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    if parent is None:
        return os.open(folder, flags)
    return os.open(os.path.basename(folder), flags, dir_fd=parent)


def _is_link(name: str, parent: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _is_folder(name: str, parent: int) -> bool:
    """Whether ``name`` in the open folder ``parent`` is a folder, as `os.path.isdir` says."""
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=parent).st_mode)
    except OSError:
        return False


class _Links:
    """Where the symbolic links below a folder the user named may lead: inside it, or, with
    ``follow``, anywhere but `SYSTEM_FOLDERS`. A link is judged by the real path it resolves
    to, so a chain of links or ``..`` in one cannot lead out unseen."""

    def __init__(self, root: str, follow: bool) -> None:
        self.root = root
        self.real = os.path.realpath(root)
        self.follow = follow
        # the real path of each folder links led into, and the folder it was (device, inode)
        self._folders: dict[str, tuple[str, tuple[int, int]]] = {}

    def target(self, link: str, problems: Problems) -> str | None:
        """The path to go on with in place of ``link``: where it leads, named below the root
        if it is inside it; None, reported, if it may not be followed."""
        real = self.realpath(link)
        for system in SYSTEM_FOLDERS:
            if _within(real, system):
                problems.skip(link, f"a symbolic link into {system}, never followed")
                return None
        if _within(real, self.real):
            inside = os.path.relpath(real, self.real)
            return self.root if inside == "." else os.path.join(self.root, inside)
        if not self.follow:
            problems.skip(link, LINK_OUT)
            return None
        return real

    def realpath(self, link: str) -> str:
        """``os.path.realpath(link)``, with the real path of the folder the link leads into
        remembered: a folder of links into one other folder (a corpus linked file by file)
        costs a ``readlink``, an ``lstat`` and a ``stat`` a link, where `os.path.realpath`
        looks at every part of both paths again (nine system calls a link on a typical
        tree). The ``stat`` tells whether the folder is still the one remembered: a folder
        swapped since for a link elsewhere is resolved again, as `os.path.realpath` would.

        The link's target, joined to the link's folder, names the same file as the link:
        `os.path.realpath` resolves a ``..`` after the links before it, as the kernel does.
        That path is its folder's real path and its name when the name is an entry that is
        no link; anything else (a chain of links, a dangling link, ``..`` at the end) is
        left to `os.path.realpath`."""
        try:
            to = os.readlink(link)
        except OSError:
            return os.path.realpath(link)
        folder, name = os.path.split(os.path.join(os.path.dirname(link), to))
        if name in ("", ".", ".."):
            return os.path.realpath(link)
        try:
            if stat.S_ISLNK(os.lstat(os.path.join(folder, name)).st_mode):
                return os.path.realpath(link)
        except OSError:
            return os.path.realpath(link)
        try:
            here = os.stat(folder)
        except OSError:
            return os.path.realpath(link)
        known = self._folders.get(folder)
        if known is None or known[1] != (here.st_dev, here.st_ino):  # new, or swapped since
            known = self._folders[folder] = os.path.realpath(folder), (here.st_dev, here.st_ino)
        return os.path.join(known[0], name)


def _within(path: str, folder: str) -> bool:
    """Whether the real path ``path`` is the real path ``folder`` or below it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def maildir_part(folder: str) -> str | None:
    """'new' or 'cur' if ``folder`` is that part of a Maildir, else None."""
    name = os.path.basename(os.path.normpath(folder))
    parent = os.path.dirname(os.path.normpath(folder))
    return name if name in ("new", "cur") and is_maildir(parent or ".") else None


def _folder_key(folder: str) -> tuple[int, int] | None:
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def open_table(path: str) -> int:
    """A descriptor of the table the user named (its link followed), which is only ever a
    regular file: a FIFO or a device is refused, not waited on (`open_regular`)."""
    return open_regular(os.path.realpath(path))


def typed_table(specs: Sequence[str], forced: bool) -> str | None:
    """The path of the typed table that DATA names, or None where DATA holds messages.

    With a table option (``forced``: --label-column, --column, --bins) DATA must be one table.
    Without one, a single CSV table without a 'text' column, or a JSON Lines table whose
    first object has no 'text' string, is a typed table (a table with text is read as
    messages, as always). Here, not in `text.tables`, which imports numpy: training on
    messages tells them from a table before its workers start, and numpy waits till then."""
    one = len(specs) == 1 and specs[0].lower().endswith(TABLE_SUFFIXES) and os.path.isfile(specs[0])
    if forced:
        if not one:
            raise ConfigError("--label-column, --column and --bins take one table as DATA")
        return specs[0]
    if not one:
        return None
    path, lower = specs[0], specs[0].lower()
    try:
        with open(open_table(path), encoding="utf-8-sig", newline="") as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError):
        return None
    if lower.endswith(".csv"):
        names = next(csv.reader([first]), [])
        return path if names and "text" not in [n.strip().lower() for n in names] else None
    if lower.endswith((".jsonl", ".ndjson")):
        try:
            obj = json.loads(first)
        except json.JSONDecodeError:
            return None
        return path if isinstance(obj, dict) and not isinstance(obj.get("text"), str) else None
    return None


def _read_table(path: str, problems: Problems, target: str | None = None) -> Iterator[Message]:
    """Rows of a TSV, CSV or JSON Lines table as messages with text data.

    The table is read a line at a time, never held whole. Line ends are read as universal
    newlines (CRLF and CR end a row too). A table that stops being valid UTF-8 gives the
    rows before the line with the bad bytes, then is reported. ``target`` is where the file
    is, if not at ``path`` (the file a named link leads to).
    """
    lower = path.lower()
    try:
        with os.fdopen(open_regular(target or path), "rb") as f:
            lines = text_lines(f, path, problems)
            if lower.endswith(".tsv"):
                rows = _tsv_rows(lines)
            elif lower.endswith(".csv"):
                rows = _csv_rows(lines, path, problems)
            else:
                rows = _jsonl_rows(lines, path, problems)
            for line, row_id, label, body in rows:
                yield Message(row_id or f"{path}#{line}", body, label or None)
    except (OSError, UnicodeDecodeError) as exc:
        problems.skip(path, os_reason(exc))
    except csv.Error as exc:  # a quoted field that runs on past the cap
        problems.skip(path, f"not a valid CSV table: {exc}")


def _tsv_rows(lines: Iterable[str]) -> Iterator[tuple[int, str | None, str | None, str]]:
    for line, row in lines_of(lines):
        if row.strip():
            label, sep, body = row.partition("\t")
            yield (line, None, label.strip(), body) if sep else (line, None, None, row)


def _csv_rows(
    lines: Iterable[str], path: str, problems: Problems
) -> Iterator[tuple[int, str | None, str | None, str]]:
    rows = csv_rows(lines)
    _, header = next(rows, (0, None))
    if header is None:
        return
    names = [name.strip().lower() for name in header]
    if "text" not in names:
        raise InputError(f"{path}: a CSV table needs a header row with a 'text' column")
    place = {name: j for j, name in enumerate(names)}  # a name given twice: the last
    text, label, row_id = place["text"], place.get("label"), place.get("id")
    for line, row in rows:
        if not any(value.strip() for value in row):
            continue
        if len(row) <= text:
            problems.skip(f"{path}#{line}", "this row has no text field")
            continue
        yield (
            line,
            (row[row_id] if row_id is not None and row_id < len(row) else "") or None,
            (row[label] if label is not None and label < len(row) else "").strip(),
            row[text],
        )


def _jsonl_rows(
    lines: Iterable[str], path: str, problems: Problems
) -> Iterator[tuple[int, str | None, str | None, str]]:
    for line, obj in jsonl_values(lines, path, problems):
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            problems.skip(f"{path}#{line}", "a JSON line needs an object with a 'text' string")
            continue
        label, row_id = obj.get("label"), obj.get("id")
        yield (
            line,
            None if row_id is None else str(row_id),
            None if label is None else str(label),
            _LONE_SURROGATE.sub("\ufffd", obj["text"]),
        )


# JSON can escape a lone surrogate ("\ud800"), which no UTF-8 holds (nor a digest, a term
# of a model file): it is read as U+FFFD, as the mail parser reads UTF-7's
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def is_maildir(folder: str) -> bool:
    """Whether ``folder`` is a Maildir: it has both ``cur/`` and ``new/``."""
    return os.path.isdir(os.path.join(folder, "cur")) and os.path.isdir(os.path.join(folder, "new"))


def read_bytes(path: str, dir_fd: int | None = None) -> bytes:
    """The first `MAX_MESSAGE_BYTES` + 1 bytes of a file (all of a smaller one) by plain
    system calls: for a small message about a quarter less time than ``open().read()``,
    which also makes a buffer and asks for the terminal mode.

    Only a regular file is read, opened by `open_regular` (never a FIFO, a device or a link
    at ``path``; ``path`` is a name in the open folder ``dir_fd``, if given; a `Listed`
    path only in the folder it was found in, `open_listed`). It is read at
    once into a buffer of its size + 1 (capped); when that read gives exactly its size, it
    has reached the file's end. A file that grew or shrank is read on until a read gives
    nothing or the cap is passed.
    """
    limit = MAX_MESSAGE_BYTES + 1
    fd = open_regular(path, dir_fd) if dir_fd is not None else open_listed(path)
    try:
        info = os.fstat(fd)
        parts = [os.read(fd, min(info.st_size + 1, limit))]
        if len(parts[0]) == info.st_size and stat.S_ISREG(info.st_mode):
            return parts[0]  # a regular file that ended where its size said
        got = len(parts[0])
        while parts[-1] and got < limit:
            parts.append(os.read(fd, min(1 << 16, limit - got)))
            got += len(parts[-1])
    finally:
        os.close(fd)
    return parts[0] if len(parts) <= 2 else b"".join(parts)


def folder_entries(
    folder: str, problems: Problems, fd: int | None = None
) -> list[tuple[str, bool, bool, bool]]:
    """(name, whether it is a folder, whether it is a file, as `os.path.isdir` and
    `os.path.isfile` say, whether it is a symbolic link) of each entry of ``folder`` (read
    from its descriptor ``fd`` if given) in sorted order, hidden names left out; a folder
    that cannot be listed is reported.

    The file system's directory listing tells a file from a folder, so most entries cost no
    `stat` call (symbolic links do: they are followed). A FIFO, a socket or a dangling link
    is neither a folder nor a file.
    """
    try:
        with os.scandir(folder if fd is None else fd) as entries:
            found = [(e.name, *_kind(e)) for e in entries if not e.name.startswith(".")]
    except OSError as exc:
        problems.skip(folder, os_reason(exc))
        return []
    return sorted(found)


def _kind(entry: os.DirEntry) -> tuple[bool, bool, bool]:
    try:
        link = entry.is_symlink()
        return entry.is_dir(), entry.is_file(), link
    except OSError:  # as os.path.isdir and isfile: what cannot be looked at is neither
        return False, False, False
