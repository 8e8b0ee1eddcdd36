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
import json
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError
from ..mail.message import Problems
from ..mail.messages import open_regular
from ..mail.table_rows import TABLE_SUFFIXES, Strict, csv_rows, jsonl_values, text_lines

KINDS = ("gaussian", "categorical", "binned", "bernoulli", "text", "ignore")
DEFAULT_BINS = 4
BINNINGS = ("quantile", "uniform")
TABLE_KIND = "nbspam-table"


# --------------------------------------------------------------------------------------------
# Columns of cells
# --------------------------------------------------------------------------------------------


class Numbers:
    """A column whose every cell is a finite number or empty: the numbers (n,) (NaN where
    empty), read once as Python's ``float`` reads them, and the cells' text, kept compactly
    as a bytes array (their categories, where a column of numbers is modelled as one). A
    part of the column (`take`) takes its text only when asked for it."""

    def __init__(self, x: np.ndarray, text: np.ndarray, index: np.ndarray | None = None) -> None:
        self.x, self._text, self._index = x, text, index
        self.words: Words | None = None

    def __len__(self) -> int:
        return len(self.x)

    @property
    def text(self) -> np.ndarray:
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


class _Columns:
    """Rows added a block at a time, kept as columns: a column is `Numbers` while every
    cell is a number (or empty), else `Words`; nothing is kept as rows of text."""

    def __init__(self, width: int, strip: bool) -> None:
        self.strip = strip
        self.parts: list[list[Any]] = [[] for _ in range(width)]
        """Per column: blocks of (numbers, text) while they are numbers, else a `_Coder`."""
        self.n = 0

    def add_column(self) -> None:
        """One more column, empty in every row added so far."""
        empty = ("",) * self.n
        self.parts.append([] if not self.n else [_numbers(empty)])

    def add(self, rows: Sequence[Sequence[str]]) -> None:
        if not rows:
            return
        for j, cells in enumerate(zip(*rows)):
            if self.strip:
                cells = tuple(map(str.strip, cells))
            part = self.parts[j]
            if part and isinstance(part[0], _Coder):
                part[0].add(cells)
                continue
            block = _numbers(cells)
            if block is not None:
                part.append(block)
                continue
            coder = _Coder()
            for _, text in part:
                coder.add(text.astype(str).tolist() if text.dtype.kind == "S" else text.tolist())
            coder.add(cells)
            self.parts[j] = [coder]
        self.n += len(rows)

    def columns(self) -> list[Cells]:
        out: list[Cells] = []
        for part in self.parts:
            if part and isinstance(part[0], _Coder):
                out.append(part[0].words())
            elif part:
                out.append(Numbers(*(np.concatenate(v) for v in zip(*part))))
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
        codes = [seen.setdefault(c, len(seen)) for c in cells]
        self.codes.append(np.array(codes, dtype=np.int64))

    def words(self) -> Words:
        return Words(list(self.seen), np.concatenate(self.codes))


def _numbers(cells: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """(numbers, text) of cells every one of which Python's ``float`` reads as a finite
    number, or is empty (NaN); None where one is not."""
    empty = cells.count("")
    try:
        x = np.fromiter(map(float, [c or "nan" for c in cells] if empty else cells), np.float64)
    except ValueError:
        return None
    if np.count_nonzero(np.isfinite(x)) != len(cells) - empty:
        return None  # a literal nan or inf
    try:
        text = np.array(cells, dtype="S") if cells else np.zeros(0, dtype="S1")
    except UnicodeEncodeError:  # digits of another script, which float reads too
        text = np.array(cells, dtype=object)
    return x, text


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


def _open_table(path: str) -> int:
    """A descriptor of the table the user named (its link followed), which is only ever a
    regular file: a FIFO or a device is refused, not waited on (`messages.open_regular`)."""
    return open_regular(os.path.realpath(path))


def read_table(path: str, problems: Problems | None = None) -> Table:
    """Read a CSV, TSV or JSON Lines table with a header row (JSON Lines: the keys of the
    objects) as columns, streaming through the one reader of table files (`table_rows`):
    a line at a time, each line capped, taken into typed columns a block of rows at a time.

    A bad row (too few or too many cells, a JSON line that is not an object or not valid
    JSON, a line past the cap) is reported to ``problems`` by its ``PATH#LINE`` and left
    out; without ``problems`` (`Strict`) the first one is the InputError."""
    lower = path.lower()
    if not lower.endswith(TABLE_SUFFIXES):
        raise InputError(f"{path}: a table is a .csv, .tsv or .jsonl file")
    problems = problems or Strict()
    try:
        with os.fdopen(_open_table(path), "rb") as f:
            lines = text_lines(f, path, problems)
            if lower.endswith((".jsonl", ".ndjson")):
                return _read_jsonl(path, lines, problems)
            return _read_csv(path, lines, problems, "\t" if lower.endswith(".tsv") else ",")
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise InputError(f"{path}: not a valid table: {exc}") from None


def _read_csv(path: str, lines: Iterator[str], problems: Problems, delimiter: str) -> Table:
    rows = csv_rows(lines, delimiter)
    first = next(rows, None)
    if first is None:
        raise InputError(f"{path}: the table is empty")
    names = [name.strip() for name in first[1]]
    _check_names(path, names)
    width = len(names)
    columns = _Columns(width, strip=True)
    block: list[list[str]] = []
    numbers: list[int] = []
    size = max(1, BLOCK_CELLS // max(width, 1))
    for line, row in rows:
        if len(row) != width or not any(row) or "".join(row).isspace():
            if not "".join(row).strip():
                continue  # a blank row
            if len(row) != width:
                problems.skip(f"{path}#{line}", f"{len(row)} cells, but the header names {width}")
                continue
        block.append(row)
        numbers.append(line)
        if len(block) >= size:
            columns.add(block)
            block = []
    columns.add(block)
    return Table(
        names, ids=RowIds(path, np.array(numbers, dtype=np.int64)), cells=columns.columns()
    )


def _read_jsonl(path: str, lines: Iterator[str], problems: Problems) -> Table:
    names: dict[str, int] = {}
    columns = _Columns(0, strip=True)
    block: list[list[str]] = []
    numbers: list[int] = []
    for line, obj in jsonl_values(lines, path, problems):
        if not isinstance(obj, dict):
            problems.skip(f"{path}#{line}", "a JSON line must be an object")
            continue
        for name in obj:
            if name not in names:
                names[name] = len(names)
                columns.add_column()
        row = [""] * len(names)
        for name, value in obj.items():
            row[names[name]] = _cell(value)
        block.append(row)
        numbers.append(line)
        if len(block) * max(len(names), 1) >= BLOCK_CELLS:
            columns.add([r + [""] * (len(names) - len(r)) for r in block])
            block = []
    columns.add([r + [""] * (len(names) - len(r)) for r in block])
    return Table(
        list(names), ids=RowIds(path, np.array(numbers, dtype=np.int64)), cells=columns.columns()
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


def typed_table(specs: Sequence[str], forced: bool) -> str | None:
    """The path of the typed table that DATA names, or None where DATA holds messages.

    With a table option (``forced``: --label-column, --column, --bins) DATA must be one table.
    Without one, a single CSV table without a 'text' column, or a JSON Lines table whose
    first object has no 'text' string, is a typed table (a table with text is read as
    messages, as always)."""
    one = len(specs) == 1 and specs[0].lower().endswith(TABLE_SUFFIXES) and os.path.isfile(specs[0])
    if forced:
        if not one:
            raise ConfigError("--label-column, --column and --bins take one table as DATA")
        return specs[0]
    if not one:
        return None
    path, lower = specs[0], specs[0].lower()
    try:
        with open(_open_table(path), encoding="utf-8-sig", newline="") as f:
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
