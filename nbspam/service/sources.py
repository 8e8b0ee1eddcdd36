"""Training data as partitions that workers read themselves (`train --engine dask`).

The calling process lists the data specs into `Part`s (`list_parts`) as `read_labelled`
reads them: the same files in the same order, with the same labels and the same rules for
symbolic links; it never opens a message. A part is up to `PART_FILES` files (each one
message, or an mbox by its content), a byte range of `RANGE_BYTES` of an mbox named
``.mbox``, a table, or one file of an fsspec URL. A worker reads a part (`read_part`) and
gets the messages `read_labelled` gives for it, in the same order.

A byte range of an mbox holds the messages whose ``From`` separator line (after a blank
line, as `mbox.SEPARATOR` finds it) starts in it, the first range also the text before the
first separator: the ranges of a file give its messages as reading it whole does. (A
Content-Length body, mboxcl2's, that holds a separator line across a range's end is the
one exception: it would be split there.) A message of a range is named ``PATH@BYTE#N``: the
N-th message from byte BYTE of the file.

Messages given to the Python API rather than as files travel inside their parts
(`inline_parts`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from ..mail.mbox import BLOCK, SEPARATOR, mbox_messages
from ..mail.message import MAX_MESSAGE_BYTES, Message, Problems, checked_message
from ..mail.messages import (
    TABLE_SUFFIXES,
    _read_table,
    folder_files,
    label_folders,
    label_spec,
    no_labels,
    open_regular,
    read_file,
    read_stdin,
)
from ..mail.remote import check_url, is_glob, is_url, local_glob, url_files

PART_FILES = 1000
"""The most files in one part (a worker reads them a few hundred at a time)."""
RANGE_BYTES = 2 << 20
"""An mbox is split into byte ranges of this size, each a part."""
_LOOKAHEAD = 4096  # more than a separator can span (as mbox reads)
_NO_LABEL = "no label in this row"


@dataclass(frozen=True, slots=True)
class Item:
    """What a worker reads: ``kind`` 'file' (one message, or an mbox by its content),
    'mbox' (the byte range ``start``-``end`` of a file named .mbox, -1: to its end),
    'table' (rows, labelled by ``label`` or by their own), or 'url' (an fsspec URL's file).
    ``path`` names it in reports, ``target`` is where it is read."""

    kind: str
    path: str
    target: str
    label: str | None
    start: int = 0
    end: int = -1


@dataclass(frozen=True, slots=True)
class Part:
    """A partition of the training data: items to read, or messages given in memory
    (``inline``: (data, label) pairs)."""

    items: tuple[Item, ...] = ()
    inline: tuple[tuple[bytes | str, str], ...] = ()


def inline_parts(messages: Iterable[Message], size: int) -> Iterator[Part]:
    """Parts of ``size`` messages given in memory (the Python API's, stdin's)."""
    batch: list[tuple[bytes | str, str]] = []
    for message in messages:
        batch.append((message.data, message.label or ""))
        if len(batch) == size:
            yield Part(inline=tuple(batch))
            batch = []
    if batch:
        yield Part(inline=tuple(batch))


def list_parts(
    specs: Iterable[str], problems: Problems, *, follow_links: bool = False, literal: bool = False
) -> Iterator[Part]:
    """The parts of training data specs, in the order `messages.read_labelled` reads them
    (it says what a spec may be); what cannot be listed is reported to ``problems``."""
    files: list[Item] = []
    for item in _items(specs, problems, follow_links, literal):
        if isinstance(item, Part):  # stdin, read here
            yield from _flush(files)
            yield item
        elif item.kind == "file":
            files.append(item)
            if len(files) == PART_FILES:
                yield from _flush(files)
        else:
            yield from _flush(files)
            yield Part((item,))
    yield from _flush(files)


def _flush(files: list[Item]) -> Iterator[Part]:
    if files:
        yield Part(tuple(files))
        files.clear()


def _items(
    specs: Iterable[str], problems: Problems, follow_links: bool, literal: bool
) -> Iterator[Item | Part]:
    for spec in specs:
        labelled = label_spec(spec)
        if labelled is not None:
            label, path = labelled
            yield from _path_items(path, label, problems, follow_links, literal)
        elif os.path.isdir(spec):
            yield from _label_folders(spec, problems, follow_links)
        elif spec.lower().endswith(TABLE_SUFFIXES):
            yield Item("table", spec, spec, None)
        elif os.path.exists(spec):
            raise no_labels(spec)
        else:
            problems.skip(spec, "no such file or directory")


def _path_items(
    path: str, label: str, problems: Problems, follow_links: bool, literal: bool
) -> Iterator[Item | Part]:
    """As `messages.read_messages` reads one path: '-', a URL, a glob, a path."""
    if path == "-":
        message = read_stdin(problems)
        if message is not None:
            yield Part(inline=((message.data, label),))
    elif not literal and is_url(path):
        yield from _url_items(path, label, problems)
    elif not literal and is_glob(path):
        matches = local_glob(path)
        if not matches:
            problems.skip(path, "no file matches")
        for match in matches:
            yield from _named(match, label, problems, tables=True, follow_links=follow_links)
    else:
        yield from _named(path, label, problems, tables=True, follow_links=follow_links)


def _label_folders(root: str, problems: Problems, follow_links: bool) -> Iterator[Item]:
    """As `messages.read_labelled` reads a folder of label folders."""
    for label, folder in label_folders(root, problems, follow_links):
        yield from _named(folder, label, problems, tables=False, follow_links=follow_links)


def _named(
    path: str, label: str, problems: Problems, *, tables: bool, follow_links: bool
) -> Iterator[Item]:
    """As `messages._read_path` reads a path named by the user."""
    if os.path.isdir(path):
        for file, _ in folder_files(path, problems, follow_links=follow_links):
            yield from _file_items(file, file, label)
        return
    target = os.path.realpath(path) if os.path.islink(path) else path
    if tables and path.lower().endswith(TABLE_SUFFIXES):
        yield Item("table", path, target, label)
    else:
        yield from _file_items(path, target, label)


def _file_items(path: str, target: str, label: str) -> Iterator[Item]:
    """A file as one item, or, named .mbox, as byte ranges of `RANGE_BYTES` (by its size:
    nothing of it is read here)."""
    if not path.lower().endswith(".mbox"):
        yield Item("file", path, target, label)
        return
    try:
        size = os.stat(target).st_size
    except OSError:
        size = 0  # the worker reports why it cannot be read
    starts = list(range(0, size, RANGE_BYTES)) or [0]
    for i, start in enumerate(starts):
        end = -1 if i == len(starts) - 1 else starts[i + 1]
        yield Item("mbox", path, target, label, start, end)


def _url_items(url: str, label: str, problems: Problems) -> Iterator[Item]:
    """The files of a URL (a pattern or one file), listed by fsspec, in sorted order: only
    the schemes `remote.URL_SCHEMES` allows, as `remote.url_messages` reads them."""
    files = url_files(url)
    if not files:
        problems.skip(url, "no file matches")
    for handle in files:
        name = handle.fs.unstrip_protocol(handle.path)
        yield Item("url", name, name, label)


# -- on a worker -----------------------------------------------------------------------------


def read_part(part: Part, problems: Problems) -> Iterator[tuple[bytes | str, str]]:
    """(data, label) of each message of a part, in order; what cannot be read is reported
    to ``problems``, as `read_labelled` reports it."""
    yield from part.inline
    for item in part.items:
        if item.kind == "file":
            for message in read_file(item.path, problems, item.target):
                yield message.data, item.label or ""
        elif item.kind == "mbox":
            yield from ((data, item.label or "") for data in _mbox_range(item, problems))
        elif item.kind == "table":
            for message in _read_table(item.path, problems, item.target):
                if item.label or message.label:
                    yield message.data, item.label or message.label or ""
                else:
                    problems.skip(message.id, _NO_LABEL)
        else:
            yield from ((data, item.label or "") for data in _url_file(item, problems))


def _mbox_range(item: Item, problems: Problems) -> Iterator[bytes]:
    """The messages of a byte range of an mbox (`Item`)."""
    try:
        with os.fdopen(open_regular(item.target), "rb") as f:
            begin = 0 if item.start == 0 else _separator_from(f, item.start)
            stop = None if item.end < 0 else _separator_from(f, item.end)
            if begin is None or (stop is not None and stop <= begin):
                return
            name = item.path if begin == 0 else f"{item.path}@{begin}"
            region = _Region(f, begin, stop)
            for number, (data, size) in enumerate(mbox_messages(region), start=1):
                message = checked_message(f"{name}#{number}", data, problems, size)
                if message is not None:
                    yield message.data
    except OSError as exc:
        from ..errors import os_reason

        problems.skip(item.path, f"cannot read as an mbox: {os_reason(exc)}")


def _separator_from(f: BinaryIO, pos: int) -> int | None:
    """Where the first separator line that starts at or after ``pos`` starts; None if
    none does. Read forward a block at a time, a few bytes before ``pos`` for the blank
    line that must come before it."""
    base = max(0, pos - 3)
    f.seek(base)
    buf, eof = b"", False
    while True:
        block = f.read(BLOCK)
        eof = not block
        buf += block
        found = SEPARATOR.search(buf, pos - base)
        # a match that starts in the last bytes could be beaten by an earlier one the next
        # block completes
        if found is not None and (eof or found.start() <= len(buf) - _LOOKAHEAD):
            return base + found.start()
        if eof:
            return None
        drop = max(0, len(buf) - _LOOKAHEAD - 3)  # none of it starts a separator
        buf, base = buf[drop:], base + drop
        pos = max(pos, base + 3)


class _Region:
    """The bytes ``start``-``stop`` of a file (to its end for None) as a file of their own,
    for `mbox.mbox_messages` (which reads, seeks and tells)."""

    def __init__(self, f: BinaryIO, start: int, stop: int | None) -> None:
        self.f, self.start, self.stop = f, start, stop
        f.seek(start)

    def _end(self) -> int:
        return self.stop if self.stop is not None else self.f.seek(0, os.SEEK_END)

    def tell(self) -> int:
        return self.f.tell() - self.start

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        here = self.f.tell()
        base = {os.SEEK_SET: self.start, os.SEEK_CUR: here, os.SEEK_END: self._end()}[whence]
        return self.f.seek(base + offset) - self.start

    def read(self, n: int = -1) -> bytes:
        if self.stop is None:
            return self.f.read(n)
        left = self.stop - self.f.tell()
        if left <= 0:
            return b""
        return self.f.read(left if n < 0 else min(n, left))


def _url_file(item: Item, problems: Problems) -> Iterator[bytes]:
    """The messages of one file of a URL, read as `remote.url_messages` reads it."""
    check_url(item.target)
    import fsspec

    try:
        with fsspec.open(item.target, mode="rb") as f:
            if item.path.lower().endswith(".mbox"):
                for number, (data, size) in enumerate(mbox_messages(f), start=1):
                    message = checked_message(f"{item.path}#{number}", data, problems, size)
                    if message is not None:
                        yield message.data
                return
            data = f.read(MAX_MESSAGE_BYTES + 1)
    except OSError as exc:
        problems.skip(item.path, str(exc) or type(exc).__name__)
        return
    message = checked_message(item.path, data, problems)
    if message is not None:
        yield message.data
