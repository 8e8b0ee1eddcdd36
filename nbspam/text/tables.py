"""Typed tables: CSV, TSV and JSON Lines tables with any columns read as columns of cells,
and each column's kind detected or given (`table_model` models them, `table_training`
trains it).

Column kinds: ``gaussian`` (a number), ``categorical`` (a category; a continuous column
with ``--bins`` is cut into categories by edges learned in training), ``bernoulli`` (a
number, present where x > 0), ``text`` (tokenized as messages are; each token present
counts once, the multinomial of presence with smoothing alpha) and ``ignore``.
"""

from __future__ import annotations

import csv
import itertools
import math
import operator
import os
from collections.abc import Container, Iterable, Iterator, Sequence
from typing import Any, BinaryIO

import numpy as np

from ..core.progress import Step, stage
from ..errors import ConfigError, InputError
from ..mail.message import Problems
from ..mail.messages import open_table
from ..mail.table_rows import (
    TABLE_SUFFIXES,
    Strict,
    csv_rows,
    jsonl_values,
    text_blocks,
    text_lines,
)

KINDS = ("gaussian", "categorical", "binned", "bernoulli", "text", "ignore")
DEFAULT_BINS = 4
TABLE_KIND = "nbspam-table"


# --------------------------------------------------------------------------------------------
# Columns of cells
# --------------------------------------------------------------------------------------------


class Numbers:
    """A column whose every cell is a finite number or empty: the numbers (n,) (NaN where
    empty), read once as Python's ``float`` reads them, and the cells' text, kept compactly
    (`Texts`) and made an array only when asked for (their categories, where a column of
    numbers is modelled as one). A part of the column (`take`) takes its text only when
    asked for it."""

    def __init__(
        self, x: np.ndarray, text: np.ndarray | Texts | None, index: np.ndarray | None = None
    ) -> None:
        self.x, self._text, self._index = x, text, index
        self.words: Words | None = None

    def __len__(self) -> int:
        return len(self.x)

    @property
    def text(self) -> np.ndarray:
        if self._text is None:
            raise ValueError("the text of this column of numbers was not kept")
        if isinstance(self._text, Texts):
            self._text = self._text.array()
        if self._index is not None:
            self._text, self._index = self._text[self._index], None
        return self._text

    def texts(self) -> list[str]:
        if self.text.dtype.kind == "S":
            return self.text.astype(str).tolist()
        return self.text.tolist()

    def categories(self) -> Words:
        """The column as categories (made once, and kept by its parts)."""
        if self.words is None:
            distinct, first, inverse = np.unique(self.text, return_index=True, return_inverse=True)
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order))
            codes = rank[inverse.reshape(-1)]
            names = [v.decode() if isinstance(v, bytes) else v for v in distinct[order].tolist()]
            self.words = Words(names, codes)
        return self.words

    def take(self, index: np.ndarray) -> Numbers:
        if self._index is not None:
            part = Numbers(self.x[index], self._text, self._index[index])
        else:
            part = Numbers(self.x[index], self._text, index)
        if self.words is not None:
            part.words = self.words.take(index)
        return part


class Texts:
    """The text of a column of numbers as blocks of UTF-8 bytes, the cells of a block
    joined by NUL (which no number holds): a copy in a few C calls, made into an array
    (`array`, once, shared by the parts of the column) only when asked for."""

    def __init__(self) -> None:
        self.blocks: list[tuple[bytes, int]] = []
        self._array: np.ndarray | None = None

    def add(self, cells: Sequence[str]) -> None:
        self.blocks.append(("\0".join(cells).encode(), len(cells)))

    def cells(self) -> list[str]:
        return [c for b, n in self.blocks if n for c in b.decode().split("\0")]

    def array(self) -> np.ndarray:
        """Bytes (dtype S) where every cell is ASCII and `_narrow`, else str (dtype
        object)."""
        if self._array is None:
            parts = None
            if all(b.isascii() for b, _ in self.blocks):
                parts = [c for b, n in self.blocks if n for c in b.split(b"\0")]
            if parts is not None and _narrow(parts):
                self._array = np.array(parts, dtype="S") if parts else np.zeros(0, dtype="S1")
            else:  # digits of another script, which float reads too, or a long number
                self._array = np.array(self.cells(), dtype=object)
        return self._array


def _narrow(cells: list[bytes]) -> bool:
    """Whether cells fit an array of fixed width (dtype S, each padded to the longest) in
    a few times their own bytes: one number of 8 MiB of digits among 10,000 short ones
    would otherwise take 80 GB."""
    width = max(map(len, cells), default=0)
    return width * len(cells) <= 4 * (sum(map(len, cells)) + len(cells))


class Words:
    """A column of categories: the distinct cells but '' in order of first appearance
    (``names``), and each row's place among them (``codes``, -1 where empty). A part of a
    table keeps the names of the whole, some perhaps in none of its rows."""

    def __init__(self, names: list[str], codes: np.ndarray) -> None:
        if "" in names:  # empty cells are missing: -1, as no category
            j = names.index("")
            names = names[:j] + names[j + 1 :]
            codes = np.where(codes == j, -1, codes - (codes > j))
        self.names, self.codes = names, np.asarray(codes, dtype=np.int64)
        self.x: np.ndarray | None = None
        """The cells as numbers, once read (`Table.numbers`)."""

    def __len__(self) -> int:
        return len(self.codes)

    def texts(self) -> list[str]:
        return np.array([*self.names, ""], dtype=object)[self.codes].tolist()

    def categories(self) -> Words:
        return self

    def take(self, index: np.ndarray) -> Words:
        part = Words(self.names, self.codes[index])
        if self.x is not None:
            part.x = self.x[index]
        return part


Cells = Numbers | Words


class RowIds(Sequence[str]):
    """The identifiers of a table file's rows, ``PATH#LINE``, made when asked for."""

    def __init__(self, path: str, lines: np.ndarray) -> None:
        self.path, self.lines = path, lines

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [f"{self.path}#{v}" for v in self.lines[i].tolist()]
        return f"{self.path}#{self.lines[i]}"

    def __iter__(self) -> Iterator[str]:
        path = self.path
        return (f"{path}#{v}" for v in self.lines.tolist())

    def take(self, index: np.ndarray) -> RowIds:
        return RowIds(self.path, self.lines[index])

    def part(self, rows: slice) -> RowIds:
        return RowIds(self.path, self.lines[rows])


class _Columns:
    """Rows added a block at a time, kept as columns: a column is `Numbers` while every
    cell is a number (or empty), else `Words`; nothing is kept as rows of text."""

    def __init__(self, width: int, strip: bool) -> None:
        self.strip = strip
        self.parts: list[list[Any]] = [[] for _ in range(width)]
        """Per column: blocks of (numbers, `Texts`) while they are numbers, else a `_Coder`."""
        self.n = 0
        self.texts: Container[str] | None = None
        """The names of the columns whose cells' text is kept (None: every one)."""
        self.textless: set[int] = set()
        """The places of the columns whose cells' text is not kept while they are numbers."""

    def add_column(self) -> None:
        """One more column, empty in every row added so far."""
        self.parts.append([] if not self.n else [_numbers([""] * self.n)])

    def add(self, rows: Sequence[Sequence[str]]) -> None:
        if rows:
            strip = self.strip
            self.add_columns([list(map(str.strip, c) if strip else c) for c in zip(*rows)])

    def add_columns(self, columns: Sequence[list[str]]) -> None:
        """A block of rows given as its columns of cells (each of the same length, white
        space already stripped where it is to be)."""
        if not columns or not columns[0]:
            return
        for j, cells in enumerate(columns):
            part = self.parts[j]
            if part and isinstance(part[0], _Coder):
                part[0].add(cells)
                continue
            block = _numbers(cells, j not in self.textless)
            if block is not None:
                part.append(block)
                continue
            coder = _Coder()
            for x, text in part:  # without their text: as the numbers read back
                coder.add(text.cells() if text is not None else _reprs(x))
            coder.add(cells)
            self.parts[j] = [coder]
        self.n += len(columns[0])

    def columns(self) -> list[Cells]:
        out: list[Cells] = []
        for part in self.parts:
            if part and isinstance(part[0], _Coder):
                out.append(part[0].words())
            elif part:
                texts: Texts | None = Texts()
                for _, text in part:
                    if text is None or texts is None:
                        texts = None
                    else:
                        texts.blocks += text.blocks
                out.append(Numbers(np.concatenate([x for x, _ in part]), texts))
            else:
                out.append(Numbers(np.zeros(0), np.zeros(0, dtype="S1")))
        return out


class _Coder:
    """Cells as places among the distinct cells in order of first appearance."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.codes: list[np.ndarray] = []

    def add(self, cells: Sequence[str]) -> None:
        seen = self.seen
        for cell in dict.fromkeys(cells):  # the distinct cells, in order
            if cell not in seen:
                seen[cell] = len(seen)
        self.codes.append(np.fromiter(map(seen.__getitem__, cells), np.int64, len(cells)))

    def words(self) -> Words:
        return Words(list(self.seen), np.concatenate(self.codes))


def _numbers(cells: list[str], keep_text: bool = True) -> tuple[np.ndarray, Texts | None] | None:
    """(numbers, text or None unless ``keep_text``) of cells every one of which Python's
    ``float`` reads as a finite number (numpy reads each with it, in one call), or is empty
    (NaN); None where one is not."""
    empty = cells.count("")
    try:
        x = np.array([c or "nan" for c in cells] if empty else cells, dtype=np.float64)
    except ValueError:
        return None
    if np.count_nonzero(np.isfinite(x)) != len(cells) - empty:
        return None  # a literal nan or inf
    if not keep_text:
        return x.reshape(-1), None
    text = Texts()
    text.add(cells)
    return x.reshape(-1), text


def _reprs(x: np.ndarray) -> list[str]:
    """Numbers as text that reads back as the same numbers ('' for NaN, a missing cell)."""
    return [repr(v) if v == v else "" for v in x.tolist()]


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------


class Table:
    """A table read as columns: column names (each once), each column's cells (`Numbers`
    or `Words`; '' is missing), and each row's identifier (PATH#LINE).

    ``Table(names, rows, ids)`` makes one of rows of cells (text, as given)."""

    def __init__(
        self,
        names: list[str],
        rows: Sequence[Sequence[str]] | None = None,
        ids: Sequence[str] = (),
        *,
        cells: list[Cells] | None = None,
    ) -> None:
        self.names = list(names)
        self.where = {name: j for j, name in enumerate(self.names)}
        """Each name's place among the names (found in constant time, however many columns)."""
        if cells is None:
            built = _Columns(len(self.names), strip=False)
            built.add(rows or [])
            cells = built.columns()
        self.cells = cells
        self.ids = ids if isinstance(ids, RowIds) else list(ids)
        self._texts: dict[str, list[str]] = {}
        self._rows: list[list[str]] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def rows(self) -> list[list[str]]:
        """The rows of cells as text (made once, when asked for: a table is kept as
        columns)."""
        if self._rows is None:
            columns = [self.column(name) for name in self.names]
            self._rows = [list(row) for row in zip(*columns)] if columns else []
        return self._rows

    def has(self, name: str) -> bool:
        return name in self.where

    def column(self, name: str) -> list[str]:
        """A column's cells as text (made once)."""
        if name not in self._texts:
            self._texts[name] = self.cells[self.where[name]].texts()
        return self._texts[name]

    def cell(self, i: int, name: str) -> str:
        cells = self.cells[self.where[name]]
        if isinstance(cells, Numbers):
            v = cells.text[i]
            return v.decode() if isinstance(v, bytes) else str(v)
        k = int(cells.codes[i])
        return "" if k < 0 else cells.names[k]

    def numbers(self, name: str) -> np.ndarray:
        """A column's cells as floats (n,), as `parse_number` reads each: NaN where a cell
        is empty; the first cell (in row order) that is not a finite number is the
        InputError. Each distinct cell of a column of categories is read once."""
        cells = self.cells[self.where[name]]
        if isinstance(cells, Numbers):
            return cells.x
        if cells.x is None:
            values = np.array([_number_or_none(v) for v in cells.names] + [math.nan])
            bad = np.flatnonzero(np.isinf(values))  # inf marks a cell that is not a number
            if bad.size:
                rows = np.flatnonzero(np.isin(cells.codes, bad))
                i = int(rows[0])
                parse_number(self.cell(i, name), self.ids[i], name)  # raises, naming it
            cells.x = values[cells.codes]
        return cells.x

    def categories(self, name: str) -> tuple[list[str], np.ndarray]:
        """The distinct cells of a column but '' in order of first appearance, and each row's
        place among them (-1 where empty)."""
        words = self.cells[self.where[name]].categories()
        return words.names, words.codes

    def subset(self, rows: Sequence[int]) -> Table:
        """The table of these rows (places, in this order), with what was read of them."""
        index = np.asarray(rows, dtype=np.int64)
        ids = self.ids.take(index) if isinstance(self.ids, RowIds) else [self.ids[i] for i in rows]
        return Table(self.names, ids=ids, cells=[c.take(index) for c in self.cells])


def _number_or_none(cell: str) -> float:
    """A category's number: NaN where empty, inf where it is not a finite number."""
    if cell == "":
        return math.nan
    try:
        x = float(cell)
    except ValueError:
        return math.inf
    return x if math.isfinite(x) else math.inf


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------

BLOCK_CELLS = 1 << 18
"""Rows are taken into columns a block of about this many cells at a time."""


def read_table(
    path: str, problems: Problems | None = None, texts: Container[str] | None = None
) -> Table:
    """Read a CSV, TSV or JSON Lines table with a header row (JSON Lines: the keys of the
    objects) as columns, streaming through the one reader of table files (`table_rows`):
    a block of whole lines at a time (JSON Lines: a line at a time), each line capped,
    taken into typed columns a block of rows at a time.

    A bad row (too few or too many cells, a JSON line that is not an object or not valid
    JSON, a line past the cap) is reported to ``problems`` by its ``PATH#LINE`` and left
    out; without ``problems`` (`Strict`) the first one is the InputError.

    ``texts``: the columns of a CSV or TSV table whose cells' text is kept where they are
    numbers (None: every column); a column of numbers read without is only numbers (its
    text cannot be asked for: `predict` reads the columns it scores as numbers so).

    The reading is a stage of progress (`core.progress`): the bytes read of the file's
    size, and the rows, told a block at a time."""
    lower = path.lower()
    if not lower.endswith(TABLE_SUFFIXES):
        raise InputError(f"{path}: a table is a .csv, .tsv or .jsonl file")
    problems = problems or Strict()
    try:
        with os.fdopen(open_table(path), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            with stage("read", size, noun="rows") as step:
                told = _Told(f, step)
                if lower.endswith((".jsonl", ".ndjson")):
                    lines = text_lines(f, path, problems)
                    table = _read_jsonl(path, lines, problems, told, size)
                else:
                    blocks = text_blocks(f, path, problems)
                    delimiter = "\t" if lower.endswith(".tsv") else ","
                    table = _read_csv(path, blocks, problems, delimiter, texts, told)
                told(len(table))
                return table
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise InputError(f"{path}: not a valid table: {exc}") from None


class _Told:
    """How much of a table file is read, told to its stage of progress: the bytes (the
    file's position, not the length of the text decoded) and the rows taken so far."""

    def __init__(self, f: BinaryIO, step: Step) -> None:
        self.f, self.step = f, step
        self.at = self.rows = 0

    def __call__(self, rows: int) -> None:
        at = self.f.tell()
        if at != self.at or rows != self.rows:
            self.step(at - self.at, rows - self.rows)
            self.at, self.rows = at, rows

    def blocks(self, blocks: Iterable[str], columns: _Columns) -> Iterator[str]:
        """The ``blocks``, each told once its rows are taken into ``columns``."""
        for text in blocks:
            yield text
            self(columns.n)


def _read_csv(
    path: str,
    blocks: Iterator[str],
    problems: Problems,
    delimiter: str,
    texts: Container[str] | None = None,
    told: _Told | None = None,
) -> Table:
    """The table of blocks of whole lines (`table_rows.text_blocks`): the header row, then
    each block split into columns at once (`_split_block`) while its rows are plain (no
    quote, each of the header's width); from the first block that is not, every row
    through the csv module (`_read_rows`)."""
    columns = _Columns(0, strip=True)
    columns.texts = texts
    blocks = told.blocks(blocks, columns) if told else iter(blocks)
    text = next(blocks, "")
    head, _, rest = text.partition("\n")
    if not text:
        raise InputError(f"{path}: the table is empty")
    lines: list[np.ndarray] = []
    if '"' in head:  # a quoted header, perhaps over several lines
        names = _read_rows(path, _lines_of([text], blocks), 1, problems, delimiter, columns, lines)
    else:
        names = _header(path, next(csv.reader([head], delimiter=delimiter), []), columns)
        line, later = 2, itertools.chain([rest], blocks)
        for text in later:
            done = _split_block(text, line, len(names), delimiter, columns, lines)
            if done is None:
                lines_left = _lines_of([text], later)
                _read_rows(path, lines_left, line, problems, delimiter, columns, lines, names)
                break
            line += done
    ids = np.concatenate(lines) if lines else np.zeros(0, dtype=np.int64)
    return Table(names, ids=RowIds(path, ids), cells=columns.columns())


def _header(path: str, first: list[str], columns: _Columns) -> list[str]:
    names = [name.strip() for name in first]
    _check_names(path, names)
    for j, name in enumerate(names):
        columns.add_column()
        if columns.texts is not None and name not in columns.texts:
            columns.textless.add(j)
    return names


def _lines_of(first: Iterable[str], blocks: Iterable[str]) -> Iterator[str]:
    """The lines of blocks of text, each with its line end (a last one perhaps without)."""
    for text in itertools.chain(first, blocks):
        lines = text.split("\n")
        last = lines.pop()
        yield from (line + "\n" for line in lines)
        if last:
            yield last


def _split_block(
    text: str, line: int, width: int, delimiter: str, columns: _Columns, lines: list[np.ndarray]
) -> int | None:
    """Add a block of whole lines (the first numbered ``line``) to ``columns`` by splitting
    it at once, and return how many lines it had; None (nothing added) where a row is not
    plain: a quote (the csv module's), a row of another width (a bad row) than the
    header's (of at least two cells). Blank rows are left out, as the csv reading does."""
    body = text[:-1] if text.endswith("\n") else text
    if '"' in body or width < 2:
        return None
    if not body:
        return 1 if text else 0
    rows = body.split("\n")
    n = len(rows)
    counts = list(map(str.count, rows, itertools.repeat(delimiter, n)))
    numbers = np.arange(line, line + n, dtype=np.int64)
    if counts.count(width - 1) != n:
        keep = [i for i, c in enumerate(counts) if c == width - 1]
        if any(
            rows[i].replace(delimiter, "").strip() for i, c in enumerate(counts) if c != width - 1
        ):
            return None  # a bad row: the csv reading reports it, in order
        rows, numbers = [rows[i] for i in keep], numbers[keep]
        if not rows:
            return n
        body = "\n".join(rows)
    flat = body.replace("\n", delimiter).split(delimiter)
    cells = [flat[j::width] for j in range(width)]
    if _spaced(body, delimiter):
        cells = [list(map(str.strip, column)) for column in cells]
    if "" in cells[0]:  # rows of empty cells only are blank rows
        blank = np.ones(len(rows), dtype=bool)
        for column in cells:
            blank &= np.fromiter(map(operator.not_, column), bool, len(rows))
        if blank.any():
            keep = np.flatnonzero(~blank)
            cells = [[column[i] for i in keep.tolist()] for column in cells]
            numbers = numbers[keep]
    columns.add_columns(cells)
    lines.append(numbers)
    return n


def _spaced(text: str, delimiter: str) -> bool:
    """Whether text may hold a cell with white space to strip (Python's, as ``str.strip``)."""
    if not text.isascii():
        return True
    return any(c in text for c in " \t\x0b\x0c\x1c\x1d\x1e\x1f" if c != delimiter)


def _read_rows(
    path: str,
    lines: Iterator[str],
    first_line: int,
    problems: Problems,
    delimiter: str,
    columns: _Columns,
    numbers: list[np.ndarray],
    names: list[str] | None = None,
) -> list[str]:
    """Read the rows of ``lines`` (the first numbered ``first_line``) through the csv
    module into ``columns``, a block of rows at a time; without ``names``, the first row is
    the header. Returns the names."""
    rows = csv_rows(lines, delimiter)
    if names is None:
        first = next(rows, None)
        if first is None:
            raise InputError(f"{path}: the table is empty")
        names = _header(path, first[1], columns)
    width = len(names)
    block: list[list[str]] = []
    found: list[int] = []
    size = max(1, BLOCK_CELLS // max(width, 1))
    offset = first_line - 1
    for line, row in rows:
        if len(row) != width or not any(row) or "".join(row).isspace():
            if not "".join(row).strip():
                continue  # a blank row
            if len(row) != width:
                problems.skip(
                    f"{path}#{line + offset}", f"{len(row)} cells, but the header names {width}"
                )
                continue
        block.append(row)
        found.append(line + offset)
        if len(block) >= size:
            columns.add(block)
            block = []
    columns.add(block)
    numbers.append(np.array(found, dtype=np.int64))
    return names


def _read_jsonl(
    path: str,
    lines: Iterator[str],
    problems: Problems,
    told: _Told | None = None,
    size: int = 0,
) -> Table:
    """The table of a JSON Lines file of ``size`` bytes (0 where not known: a pipe)."""
    names: dict[str, int] = {}
    columns = _Columns(0, strip=True)
    block: list[list[str]] = []
    numbers: list[int] = []
    read = _Counted(lines)
    for line, obj in jsonl_values(read, path, problems):
        if not isinstance(obj, dict):
            problems.skip(f"{path}#{line}", "a JSON line must be an object")
            continue
        for name in obj:
            if name not in names:
                names[name] = len(names)
                columns.add_column()
        _check_sparse(path, line, len(numbers) + 1, len(names), max(read.chars, size))
        row = [""] * len(names)
        for name, value in obj.items():
            row[names[name]] = _cell(value)
        block.append(row)
        numbers.append(line)
        if len(block) * max(len(names), 1) >= BLOCK_CELLS:
            columns.add([r + [""] * (len(names) - len(r)) for r in block])
            block = []
            if told:
                told(columns.n)
    columns.add([r + [""] * (len(names) - len(r)) for r in block])
    return Table(
        list(names), ids=RowIds(path, np.array(numbers, dtype=np.int64)), cells=columns.columns()
    )


SPARSE_CELLS = BLOCK_CELLS
"""A JSON Lines table of up to this many cells (rows times columns) is read however few of
its keys each object gives (`_check_sparse`)."""


class _Counted:
    """Lines, with the characters of those given so far counted (``chars``)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines, self.chars = lines, 0

    def __iter__(self) -> Iterator[str]:
        for text in self.lines:
            self.chars += len(text)
            yield text


def _check_sparse(path: str, line: int, rows: int, columns: int, size: int) -> None:
    """Refuse a JSON Lines table that would hold more cells than its file has bytes
    (``size``: the file's, or the characters read where that is not known; past
    `SPARSE_CELLS`), at the row that makes it so. A table is kept whole, a cell for every
    row in every column, so objects that each bring a key of their own (or one object of
    many keys, then many empty ones) would take memory and time quadratic in the file's
    size. A cell given takes at least 5 characters (``"k":1,``): rows that give a fifth of
    the columns are still read, and so are rows of a few keys followed by rows of many
    (keys added to records as time goes by), as long as the whole table holds no more
    cells than its file has bytes."""
    if rows * columns > max(size, SPARSE_CELLS):
        raise InputError(
            f"{path}#{line}: {rows:,} rows of {columns:,} columns, more cells than the table's "
            f"{size:,} bytes: most keys are in few rows, too sparse a table to read"
        )


def _check_names(path: str, names: list[str]) -> None:
    """Every column name once: a name given twice is an InputError naming both columns."""
    first: dict[str, int] = {}
    for j, name in enumerate(names):
        if name in first:
            raise InputError(
                f"{path}: columns {first[name] + 1} and {j + 1} are both named {name[:40]!r}; "
                "each column needs a name of its own"
            )
        first[name] = j


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(value).strip()


def parse_number(cell: str, where: str, name: str) -> float:
    """A cell as a float (NaN where it is empty); anything else that is not a finite number
    is an InputError naming the row and the column."""
    if cell == "":
        return math.nan
    try:
        x = float(cell)
    except ValueError:
        x = math.nan
    if not math.isfinite(x):
        raise InputError(f"{where}, column {name!r}: {cell[:40]!r} is not a finite number")
    return x


def detect_kind(table: Table, name: str) -> str:
    """The kind of a column from its cells: numbers (all but none) are bernoulli where
    every value is 0 or 1, else gaussian; text where more than half of the values hold a
    space; else categorical. A column of numbers with a few (at most 1%) cells that are not
    numbers is refused, naming the first by its row's id (``PATH#LINE``, as `predict` names
    rows): a malformed number is not a category."""
    cells = table.cells[table.where[name]]
    if isinstance(cells, Numbers):  # every cell a number, or empty
        x = cells.x[~np.isnan(cells.x)]
        if not x.size:
            return "ignore"
        return "bernoulli" if bool(np.all((x == 0) | (x == 1))) else "gaussian"
    counts = np.bincount(cells.codes[cells.codes >= 0], minlength=len(cells.names))
    values = int(counts.sum())
    if not values:
        return "ignore"
    bad = [j for j in _not_numbers(cells) if counts[j]]  # of this table's rows (of a part)
    if not bad:
        present = [v for v, n in zip(cells.names, counts.tolist()) if n]
        return "bernoulli" if set(map(float, present)) <= {0.0, 1.0} else "gaussian"
    wrong = int(counts[bad].sum())
    if wrong <= max(1, values // 100) and wrong < values:
        i = int(np.flatnonzero(np.isin(cells.codes, bad))[0])
        raise InputError(
            f"{table.ids[i]}, column {name!r}: {table.cell(i, name)[:40]!r} is not a number "
            f"(the column's other values are); fix it, or give --column {name}=categorical"
        )
    spaced = sum(int(n) for v, n in zip(cells.names, counts.tolist()) if " " in v)
    return "text" if spaced * 2 > values else "categorical"


def _not_numbers(cells: Words) -> list[int]:
    """The places of the categories that are not finite numbers."""
    return [j for j, v in enumerate(cells.names) if math.isinf(_number_or_none(v))]


def mostly_numbers_note(table: Table, name: str) -> str | None:
    """A note on a column detected as categorical although most of its values are numbers
    (a few malformed ones among many numbers make every number a category), or None."""
    cells = table.cells[table.where[name]]
    if isinstance(cells, Numbers):
        return None
    bad = _not_numbers(cells)
    counts = np.bincount(cells.codes[cells.codes >= 0], minlength=len(cells.names))
    values, wrong = int(counts.sum()), int(counts[bad].sum()) if bad else 0
    if not wrong or wrong * 2 > values:
        return None
    i = int(np.flatnonzero(np.isin(cells.codes, bad))[0])
    return (
        f"column {name!r} is modelled as categorical, each number a category: {wrong:,} of "
        f"its {values:,} values are not numbers (the first: {table.ids[i]}, "
        f"{table.cell(i, name)[:40]!r}); fix them and give --column {name}=gaussian, or give "
        f"--column {name}=categorical"
    )


def parse_column_options(options: Iterable[str]) -> dict[str, str]:
    """--column NAME=KIND options as a mapping in the order given; NAME may be a shell
    pattern ('*' for every column but the label's). A bad one is a ConfigError."""
    kinds = {}
    for option in options:
        name, sep, kind = option.rpartition("=")
        if not sep or not name or kind not in KINDS:
            raise ConfigError(f"--column {option!r}: give NAME={'|'.join(KINDS)}")
        kinds[name] = kind
    return kinds
