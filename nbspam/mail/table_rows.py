"""The one reader of table files (CSV, TSV, JSON Lines): a stream of rows, each with its line
number, read a line at a time (`text_lines`) or a block of whole lines at a time
(`text_blocks`, for typed CSV and TSV tables) and never held whole. Tables of messages (`messages`) and
typed tables (`text.tables`) both read their rows here, under the same rules:

- a line longer than `MAX_MESSAGE_BYTES` is never read into memory: it is reported as a
  bad row (``PATH#LINE: ...``) and read past, so memory per row is bounded whatever the
  bytes; a CSV cell is bounded by the same cap;
- line ends are read as universal newlines (CRLF and CR end a row too), a byte order mark is
  dropped, and bytes that are not UTF-8 end the table at their line;
- a JSON line that is not valid JSON (or one that no reader can hold: nested too deep, an
  integer of too many digits) is reported by its ``PATH#LINE`` and skipped.

What is reported goes to a `Problems`: the reader of messages skips a bad row and goes on;
a typed table is read with `Strict`, which stops at the first bad row with an `InputError`
naming it.
"""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from ..errors import InputError
from .mbox import BLOCK
from .message import MAX_MESSAGE_BYTES, Problems

TABLE_SUFFIXES = (".tsv", ".csv", ".jsonl", ".ndjson")


class Strict(Problems):
    """Problems that stop the reading: the first bad row is an `InputError` naming it."""

    def skip(self, where: str, reason: str) -> None:
        raise InputError(f"{where}: {reason}")


def text_lines(f: BinaryIO, path: str, problems: Problems) -> Iterator[str]:
    """The lines of a UTF-8 file (a byte order mark dropped), each ending in "\\n" as in
    universal newlines mode, decoded one at a time: bad bytes end the table at their line
    (a UnicodeDecodeError for the caller, after the rows before).

    A line longer than `MAX_MESSAGE_BYTES` is not read into memory: it is reported as a
    skipped row and given as an empty line (which every table reader passes over)."""
    number = 0  # lines given so far
    while raw := f.readline(MAX_MESSAGE_BYTES + 1):
        if len(raw) > MAX_MESSAGE_BYTES and not raw.endswith(b"\n"):
            size = len(raw) + _skip_line(f)
            problems.skip(
                f"{path}#{number + 1}",
                f"a row of {size / (1 << 20):,.1f} MiB, "
                f"longer than {MAX_MESSAGE_BYTES >> 20} MiB: not read",
            )
            raw = b"\n"
        text = (raw.removeprefix(codecs.BOM_UTF8) if number == 0 else raw).decode("utf-8")
        if "\r" in text:  # CR ends a line too, alone or before LF
            *rows, text = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            number += len(rows)
            yield from (row + "\n" for row in rows)
        if text:
            number += 1
            yield text


TEXT_BLOCK = 1 << 22
"""`text_blocks` reads this many bytes at a time (less than the cap of a line)."""


def text_blocks(f: BinaryIO, path: str, problems: Problems) -> Iterator[str]:
    """The text `text_lines` gives, whole lines at a time: blocks of about `TEXT_BLOCK`
    bytes, each ending at a line end (but a last line without one), under the same rules:
    the byte order mark dropped, CR and CRLF made LF, a line longer than `MAX_MESSAGE_BYTES`
    reported and given as an empty line (never read into memory past the cap plus a block),
    and bytes that are not UTF-8 a UnicodeDecodeError after the whole lines before them."""
    pending, number = b"", 0  # bytes of a line begun; lines given so far
    while True:
        raw = f.read(TEXT_BLOCK)
        buf = pending + raw if pending else raw
        if not buf:
            return
        cut = buf.rfind(b"\n") + 1 if raw else len(buf)  # at the end: the rest
        if cut == 0:  # no line end yet
            pending = b""
            if len(buf) > MAX_MESSAGE_BYTES:
                _too_long(path, number, len(buf) + _skip_line(f), problems)
                number += 1
                yield "\n"
            else:
                pending = buf
            continue
        buf, pending = buf[:cut], buf[cut:]
        first = buf.find(b"\n")
        if (first if first >= 0 else len(buf)) > MAX_MESSAGE_BYTES:  # a line carried over
            _too_long(path, number, first + 1 if first >= 0 else len(buf), problems)
            number += 1
            yield "\n"
            buf = buf[first + 1 :] if first >= 0 else b""
            if not buf:
                continue
        if number == 0:
            buf = buf.removeprefix(codecs.BOM_UTF8)
        try:
            text = buf.decode("utf-8")
        except UnicodeDecodeError as exc:
            good = buf.rfind(b"\n", 0, exc.start) + 1
            if good:
                yield _universal(buf[:good].decode("utf-8"))
            raise
        text = _universal(text)
        number += text.count("\n") + (not text.endswith("\n"))
        yield text


def _universal(text: str) -> str:
    """CR and CRLF line ends made LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _too_long(path: str, number: int, size: int, problems: Problems) -> None:
    problems.skip(
        f"{path}#{number + 1}",
        f"a row of {size / (1 << 20):,.1f} MiB, "
        f"longer than {MAX_MESSAGE_BYTES >> 20} MiB: not read",
    )


def _skip_line(f: BinaryIO) -> int:
    """Read past the rest of a line, a piece at a time; return how many bytes it had."""
    size = 0
    while piece := f.readline(BLOCK):
        size += len(piece)
        if piece.endswith(b"\n"):
            break
    return size


def lines_of(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(line number from 1, the line without its line end)."""
    for number, line in enumerate(lines, start=1):
        yield number, line[:-1] if line.endswith("\n") else line


def csv_rows(lines: Iterable[str], delimiter: str = ",") -> Iterator[tuple[int, list[str]]]:
    """(the line a row starts on, its cells) of each row of a CSV (or, with a tab
    ``delimiter``, a TSV) table, the header row first. A quoted cell that runs on past
    `MAX_MESSAGE_BYTES` is a csv.Error for the caller."""
    csv.field_size_limit(max(csv.field_size_limit(), MAX_MESSAGE_BYTES))  # default: 128 KiB
    reader = csv.reader(lines, delimiter=delimiter)
    start = 1
    for row in reader:
        line, start = start, reader.line_num + 1  # a quoted field may span lines
        yield line, row


def jsonl_values(lines: Iterable[str], path: str, problems: Problems) -> Iterator[tuple[int, Any]]:
    """(line number, the JSON value) of each line of a JSON Lines table that is not blank;
    a line that is not valid JSON, or that no reader can hold, is reported and skipped."""
    for line, text in lines_of(lines):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            problems.skip(f"{path}#{line}", f"not valid JSON: {exc.msg}")
            continue
        except ValueError:  # an integer of more digits than Python converts
            problems.skip(f"{path}#{line}", "a number of too many digits")
            continue
        except RecursionError:
            problems.skip(f"{path}#{line}", "not valid JSON: nested too deep")
            continue
        yield line, value
