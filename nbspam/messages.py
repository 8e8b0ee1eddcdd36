"""Where messages come from: files, folders, Maildirs, mboxes, tables and stdin, as a stream.

Every message keeps a stable identifier: the path as given (below a folder, joined to it),
``PATH#N`` for the N-th message of an mbox (from 1), ``PATH#LINE`` for a table row (or the
row's own ``id``), and ``-`` for standard input. A source that cannot be read is reported
through `Problems` as ``identifier: reason`` and the stream goes on.
"""

from __future__ import annotations

import codecs
import csv
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from .errors import InputError

LINK_AGAIN = "a symbolic link loop or a second link to it"
TABLE_SUFFIXES = (".tsv", ".csv", ".jsonl", ".ndjson")
# A second mbox separator: a blank line, then "From <sender> <weekday> <month> ..."
_MBOX_SEPARATOR = re.compile(rb"\n\r?\nFrom \S+\s+[A-Z][a-z]{2} [A-Z][a-z]{2} ")


@dataclass(frozen=True, slots=True)
class Message:
    """One message: its identifier, its raw bytes (or text, from a table), its label if known."""

    id: str
    data: bytes | str
    label: str | None = None


def message_digest(data: bytes | str) -> bytes:
    """16-byte BLAKE2b digest identifying a message by its content.

    Header lines nbspam adds itself (``X-Nbspam-*``) are left out, so a message that passed
    through `nbspam filter` has the digest it had before.
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    end = _header_end(data)
    head = data if end < 0 else data[: end + 1]
    if b"x-nbspam-" in head.lower():
        data = _OWN_HEADER.sub(b"", head) + data[len(head) :]
    import hashlib  # here: loading it (and OpenSSL) costs 3-10 ms that scoring does not need

    return hashlib.blake2b(data, digest_size=16).digest()


def _header_end(data: bytes) -> int:
    """Where the header ends: the first blank line ("\\n\\n" or "\\r\\n\\r\\n"), or -1.

    The CRLF form is looked for only before the first "\\n\\n", so a message with LF line
    ends is not read to its end twice.
    """
    end = data.find(b"\n\n")
    # a "\r\n\r\n" before ``end`` runs one byte into it at most, as in "\r\n\r\n\n"
    crlf = data.find(b"\r\n\r\n", 0, len(data) if end < 0 else end + 1)
    return end if crlf < 0 else crlf


_OWN_HEADER = re.compile(rb"(?im)^x-nbspam-[^:\n]*:[^\n]*\n(?:[ \t][^\n]*\n)*")


class Problems:
    """Collects what was skipped (``id: reason``) and notes; ``report`` sees each as it comes."""

    def __init__(self, report: Callable[[str], None] | None = None) -> None:
        self.skipped = 0
        self._report = report or (lambda line: None)

    def skip(self, where: str, reason: str) -> None:
        self.skipped += 1
        self._report(f"{where}: {reason}")

    def note(self, text: str) -> None:
        self._report(f"note: {text}")


def read_messages(
    paths: Iterable[str], problems: Problems, *, stdin: BinaryIO | None = None
) -> Iterator[Message]:
    """Messages from each path in turn: '-' (one message on stdin), a file (one message, an
    mbox, or a table by its suffix), a Maildir, or a folder (every file below it). Only table
    rows can carry a label."""
    for path in paths:
        if path == "-":
            stream = stdin if stdin is not None else sys.stdin.buffer
            yield Message("-", stream.read())
        else:
            yield from _read_path(path, problems, tables=True)


def read_labelled(specs: Iterable[str], problems: Problems) -> Iterator[Message]:
    """Labelled messages from training data specs.

    A spec is a folder with one subfolder per label (messages found recursively below each),
    a table (TSV ``label<TAB>text`` lines, CSV with ``label`` and ``text`` columns, JSON Lines
    with ``label`` and ``text`` keys), or ``LABEL=PATH`` for every message of PATH (a file,
    folder, Maildir or mbox) under one label.
    """
    for spec in specs:
        label, sep, path = spec.partition("=")
        if sep and label and not os.path.exists(spec):
            for message in read_messages([path], problems):
                yield Message(message.id, message.data, label)
        elif os.path.isdir(spec):
            yield from _read_label_folders(spec, problems)
        elif spec.lower().endswith(TABLE_SUFFIXES):
            for message in _read_table(spec, problems):
                if message.label:
                    yield message
                else:
                    problems.skip(message.id, "no label in this row")
        elif os.path.exists(spec):
            raise InputError(
                f"{spec} has no labels: give a folder with one subfolder per label, a table, "
                f"or LABEL={spec}"
            )
        else:
            problems.skip(spec, "no such file or directory")


def _read_label_folders(root: str, problems: Problems) -> Iterator[Message]:
    if _is_maildir(root):
        raise InputError(f"{root} is a Maildir, which has no labels: give LABEL={root}")
    entries = folder_entries(root, problems)
    stray = [name for name, is_folder, _ in entries if not is_folder]
    if stray:
        problems.note(
            f"{len(stray)} file(s) directly in {root} ignored (only files in label folders "
            f"count): {', '.join(stray[:3])}{' ...' if len(stray) > 3 else ''}"
        )
    for label in (name for name, is_folder, _ in entries if is_folder):
        for message in _read_path(os.path.join(root, label), problems, tables=False):
            yield Message(message.id, message.data, label)


def _read_path(path: str, problems: Problems, *, tables: bool) -> Iterator[Message]:
    if os.path.isdir(path):
        yield from _read_folder(path, problems)
    elif tables and path.lower().endswith(TABLE_SUFFIXES):
        yield from _read_table(path, problems)
    else:
        yield from _read_file(path, problems)


def _read_file(path: str, problems: Problems) -> Iterator[Message]:
    """One message, or every message of an mbox (by suffix, or by a second separator).

    An mbox's messages are read one at a time. A file named .mbox is only opened here (so
    that what cannot be read is reported as for any file); any other file is read whole to
    see whether it is one, and those bytes are dropped before an mbox's messages are read.
    """
    mbox = path.lower().endswith(".mbox")
    try:
        if mbox:
            os.close(os.open(path, os.O_RDONLY))
        else:
            data = _read_bytes(path)
    except OSError as exc:
        problems.skip(path, _reason(exc))
        return
    if not mbox:
        if not (data.startswith(b"From ") and _MBOX_SEPARATOR.search(data)):
            yield Message(path, data)
            return
        del data  # an mbox after all: not kept while its messages are read
    yield from _read_mbox(path, problems)


def _read_mbox(path: str, problems: Problems) -> Iterator[Message]:
    import mailbox  # with the email package it imports: 15 ms that folders of files do not need

    try:
        box = mailbox.mbox(path, create=False)
        keys = box.keys()
    except (OSError, mailbox.Error) as exc:
        problems.skip(path, f"cannot read as an mbox: {_reason(exc)}")
        return
    try:
        for number, key in enumerate(keys, start=1):
            try:
                yield Message(f"{path}#{number}", box.get_bytes(key))
            except (OSError, KeyError, mailbox.Error) as exc:
                problems.skip(f"{path}#{number}", _reason(exc))
    finally:
        box.close()


def _read_folder(root: str, problems: Problems) -> Iterator[Message]:
    """Every file below ``root`` in sorted order; hidden names skipped; of a Maildir only
    ``cur/`` and ``new/``.

    Symbolic links are followed, but a folder reached twice (a symlink loop) is reported
    and not entered again.
    """
    seen: set[tuple[int, int]] = set()

    def walk(folder: str) -> Iterator[Message]:
        try:
            st = os.stat(folder)
        except OSError as exc:
            problems.skip(folder, _reason(exc))
            return
        if (st.st_dev, st.st_ino) in seen:
            problems.skip(folder, f"folder already read ({LINK_AGAIN}), not entered again")
            return
        seen.add((st.st_dev, st.st_ino))
        # a Maildir's messages are in cur/ and new/; beside them lie the mail server's files
        if _is_maildir(folder):
            entries = [("cur", True, False), ("new", True, False)]
        else:
            entries = folder_entries(folder, problems)
        for name, is_folder, _ in entries:
            path = os.path.join(folder, name)
            if is_folder:
                yield from walk(path)
            else:
                yield from _read_file(path, problems)

    if not os.path.exists(root):
        problems.skip(root, "no such file or directory")
        return
    yield from walk(root)


def _read_table(path: str, problems: Problems) -> Iterator[Message]:
    """Rows of a TSV, CSV or JSON Lines table as messages with text data.

    The table is read a line at a time, never held whole. Line ends are read as universal
    newlines (CRLF and CR end a row too). A table that stops being valid UTF-8 gives the
    rows before the line with the bad bytes, then is reported.
    """
    lower = path.lower()
    try:
        with open(path, "rb") as f:
            lines = _text_lines(f)
            if lower.endswith(".tsv"):
                rows = _tsv_rows(lines)
            elif lower.endswith(".csv"):
                rows = _csv_rows(lines, path, problems)
            else:
                rows = _jsonl_rows(lines, path, problems)
            for line, row_id, label, body in rows:
                yield Message(row_id or f"{path}#{line}", body, label or None)
    except (OSError, UnicodeDecodeError) as exc:
        problems.skip(path, _reason(exc))


def _text_lines(f: BinaryIO) -> Iterator[str]:
    """The lines of a UTF-8 file (a byte order mark dropped), each ending in "\\n" as in
    universal newlines mode, decoded one at a time: bad bytes end the table at their line."""
    for number, raw in enumerate(f):
        text = (raw.removeprefix(codecs.BOM_UTF8) if number == 0 else raw).decode("utf-8")
        if "\r" in text:  # CR ends a line too, alone or before LF
            *rows, text = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            yield from (row + "\n" for row in rows)
        if text:
            yield text


def _lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(line number from 1, the line without its line end)."""
    for number, line in enumerate(lines, start=1):
        yield number, line[:-1] if line.endswith("\n") else line


def _tsv_rows(lines: Iterable[str]) -> Iterator[tuple[int, str | None, str | None, str]]:
    for line, row in _lines(lines):
        if row.strip():
            label, sep, body = row.partition("\t")
            yield (line, None, label.strip(), body) if sep else (line, None, None, row)


def _csv_rows(
    lines: Iterable[str], path: str, problems: Problems
) -> Iterator[tuple[int, str | None, str | None, str]]:
    reader = csv.DictReader(lines)
    if reader.fieldnames is None:
        return
    reader.fieldnames = [name.strip().lower() for name in reader.fieldnames]
    if "text" not in reader.fieldnames:
        raise InputError(f"{path}: a CSV table needs a header row with a 'text' column")
    start = reader.line_num + 1
    for row in reader:
        line, start = start, reader.line_num + 1  # a quoted field may span lines
        if not any((value or "").strip() for value in row.values() if isinstance(value, str)):
            continue
        if row["text"] is None:
            problems.skip(f"{path}#{line}", "this row has no text field")
            continue
        label = (row.get("label") or "").strip()
        yield line, row.get("id") or None, label, row["text"]


def _jsonl_rows(
    lines: Iterable[str], path: str, problems: Problems
) -> Iterator[tuple[int, str | None, str | None, str]]:
    for line, row in _lines(lines):
        if not row.strip():
            continue
        try:
            obj = json.loads(row)
        except json.JSONDecodeError as exc:
            problems.skip(f"{path}#{line}", f"not valid JSON: {exc.msg}")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            problems.skip(f"{path}#{line}", "a JSON line needs an object with a 'text' string")
            continue
        label, row_id = obj.get("label"), obj.get("id")
        yield (
            line,
            None if row_id is None else str(row_id),
            None if label is None else str(label),
            obj["text"],
        )


def _is_maildir(folder: str) -> bool:
    return os.path.isdir(os.path.join(folder, "cur")) and os.path.isdir(os.path.join(folder, "new"))


def _read_bytes(path: str) -> bytes:
    """The bytes of a file by plain system calls: for a small message about a quarter less
    time than ``open().read()``, which also makes a buffer and asks for the terminal mode.

    A regular file is read at once into a buffer of its size + 1 (so a large file is held
    once, not twice); when that read gives exactly its size, it has reached the file's end.
    Anything else is read on until a read gives nothing: a pipe, a file that grew or shrank,
    or one larger than a single read returns (about 2 GiB on Linux).
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        info = os.fstat(fd)
        parts = [os.read(fd, info.st_size + 1)]
        if len(parts[0]) == info.st_size and stat.S_ISREG(info.st_mode):
            return parts[0]  # a regular file that ended where its size said
        while parts[-1]:
            parts.append(os.read(fd, 1 << 16))
    finally:
        os.close(fd)
    return parts[0] if len(parts) <= 2 else b"".join(parts)


def folder_entries(folder: str, problems: Problems) -> list[tuple[str, bool, bool]]:
    """(name, whether it is a folder, whether it is a file, as `os.path.isdir` and
    `os.path.isfile` say) of each entry of ``folder`` in sorted order, hidden names left
    out; a folder that cannot be listed is reported.

    The file system's directory listing tells a file from a folder, so most entries cost no
    `stat` call (symbolic links do: they are followed). A FIFO, a socket or a dangling link
    is neither a folder nor a file.
    """
    try:
        with os.scandir(folder) as entries:
            found = [(e.name, *_kind(e)) for e in entries if not e.name.startswith(".")]
    except OSError as exc:
        problems.skip(folder, _reason(exc))
        return []
    return sorted(found)


def _kind(entry: os.DirEntry) -> tuple[bool, bool]:
    try:
        return entry.is_dir(), entry.is_file()
    except OSError:  # as os.path.isdir and isfile: what cannot be looked at is neither
        return False, False


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__
