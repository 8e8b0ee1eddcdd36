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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError
from ..mail.messages import open_regular

KINDS = ("gaussian", "categorical", "binned", "bernoulli", "text", "ignore")
DEFAULT_BINS = 4
BINNINGS = ("quantile", "uniform")
TABLE_SUFFIXES = (".tsv", ".csv", ".jsonl", ".ndjson")
TABLE_KIND = "nbspam-table"


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


@dataclass
class Table:
    """A table read whole: column names (each once), rows of cells (text; '' is missing),
    and each row's identifier (PATH#LINE)."""

    names: list[str]
    rows: list[list[str]]
    ids: list[str]
    where: dict[str, int] = field(init=False, repr=False, compare=False)
    """Each name's place among the names (found in constant time, however many columns)."""
    cache: dict[Any, Any] = field(init=False, repr=False, compare=False)
    """Columns already taken out of the rows, and read as numbers (`cached`): each is read
    once however many models are fitted on the table and its parts (`subset`)."""

    def __post_init__(self) -> None:
        self.where = {name: j for j, name in enumerate(self.names)}
        self.cache = {}

    def has(self, name: str) -> bool:
        return name in self.where

    def column(self, name: str) -> list[str]:
        def take() -> list[str]:
            j = self.where[name]
            return [row[j] for row in self.rows]

        return self.cached(("column", name), take)

    def cached(self, key: Any, make: Any) -> Any:
        """``make()``, made once per key: a list or an array of one value per row."""
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def subset(self, rows: Sequence[int]) -> Table:
        """The table of these rows (places, in this order), with what was cached of them."""
        part = Table(self.names, [self.rows[i] for i in rows], [self.ids[i] for i in rows])
        index = np.asarray(rows, dtype=np.int64)
        for key, values in self.cache.items():
            if isinstance(values, np.ndarray):
                part.cache[key] = values[index]
            elif key[0] == "categories":  # of the whole table, not one per row
                part.cache[key] = values
            else:
                part.cache[key] = [values[i] for i in rows]
        return part


def _open_table(path: str) -> int:
    """A descriptor of the table the user named (its link followed), which is only ever a
    regular file: a FIFO or a device is refused, not waited on (`messages.open_regular`)."""
    return open_regular(os.path.realpath(path))


def read_table(path: str) -> Table:
    """Read a CSV, TSV or JSON Lines table with a header row (JSON Lines: the keys of the
    objects). A row with too few or too many cells is an InputError naming its line."""
    lower = path.lower()
    if not lower.endswith(TABLE_SUFFIXES):
        raise InputError(f"{path}: a table is a .csv, .tsv or .jsonl file")
    try:
        with open(_open_table(path), encoding="utf-8-sig", newline="") as f:
            if lower.endswith((".jsonl", ".ndjson")):
                return _read_jsonl(path, f)
            reader = csv.reader(f, delimiter="\t" if lower.endswith(".tsv") else ",")
            header = next(reader, None)
            if header is None:
                raise InputError(f"{path}: the table is empty")
            names = [name.strip() for name in header]
            _check_names(path, names)
            rows, ids = [], []
            start = reader.line_num + 1
            for row in reader:
                line, start = start, reader.line_num + 1
                cells = [cell.strip() for cell in row]
                if not any(cells):
                    continue
                if len(row) != len(names):
                    raise InputError(
                        f"{path}#{line}: {len(row)} cells, but the header names {len(names)}"
                    )
                rows.append(cells)
                ids.append(f"{path}#{line}")
            return Table(names, rows, ids)
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise InputError(f"{path}: not a valid table: {exc}") from None


def _read_jsonl(path: str, f: Any) -> Table:
    objects, ids = [], []
    for line, text in enumerate(f, start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}#{line}: not valid JSON: {exc.msg}") from None
        except ValueError:  # an integer of more digits than Python converts
            raise InputError(f"{path}#{line}: a number of too many digits") from None
        except RecursionError:
            raise InputError(f"{path}#{line}: not valid JSON: nested too deep") from None
        if not isinstance(obj, dict):
            raise InputError(f"{path}#{line}: a JSON line must be an object")
        objects.append(obj)
        ids.append(f"{path}#{line}")
    names: dict[str, None] = {}
    for obj in objects:
        names.update(dict.fromkeys(obj))
    rows = [[_cell(obj.get(name)) for name in names] for obj in objects]
    return Table(list(names), rows, ids)


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


def parse_numbers(cells: Sequence[str], ids: Sequence[str], name: str) -> np.ndarray:
    """The cells of a column as floats (n,), as `parse_number` reads each, in bulk: NaN where
    a cell is empty; the first cell that is not a finite number is the InputError."""
    try:
        x = np.fromiter(map(float, [c or "nan" for c in cells]), np.float64, len(cells))
    except ValueError:
        x = None
    if x is None or int(np.count_nonzero(~np.isfinite(x))) != cells.count(""):
        # a cell that is not a number, or a literal nan or inf: found and named one by one
        x = np.array([parse_number(c, w, name) for c, w in zip(cells, ids)], dtype=np.float64)
    return x


def detect_kind(cells: Sequence[str], ids: Sequence[str], name: str) -> str:
    """The kind of a column from its cells: numbers (all but none) are bernoulli where
    every value is 0 or 1, else gaussian; text where more than half of the values hold a
    space; else categorical. A column of numbers with a few (at most 1%) cells that are not
    numbers is refused, naming the first by its row's id (``PATH#LINE``, as `predict` names
    rows): a malformed number is not a category."""
    values = [c for c in cells if c != ""]
    if not values:
        return "ignore"
    bad, numbers = _not_numbers(cells)
    if not bad:
        return "bernoulli" if numbers <= {0.0, 1.0} else "gaussian"
    if len(bad) <= max(1, len(values) // 100) and len(bad) < len(values):
        i = bad[0]
        raise InputError(
            f"{ids[i]}, column {name!r}: {cells[i][:40]!r} is not a number "
            f"(the column's other values are); fix it, or give --column {name}=categorical"
        )
    spaced = sum(1 for v in values if " " in v)
    return "text" if spaced * 2 > len(values) else "categorical"


def _not_numbers(cells: Sequence[str]) -> tuple[list[int], set[float]]:
    """(the places of the cells that are not finite numbers, the numbers), empty cells
    apart. Each distinct cell is read once (a column of categories has few)."""
    numbers = set()
    wrong = set()
    for cell in set(cells) - {""}:
        try:
            x = float(cell)
        except ValueError:
            x = math.nan
        if math.isfinite(x):
            numbers.add(x)
        else:
            wrong.add(cell)
    bad = [i for i, cell in enumerate(cells) if cell in wrong] if wrong else []
    return bad, numbers


def mostly_numbers_note(cells: Sequence[str], ids: Sequence[str], name: str) -> str | None:
    """A note on a column detected as categorical although most of its values are numbers
    (a few malformed ones among many numbers make every number a category), or None."""
    bad, _ = _not_numbers(cells)
    values = sum(1 for c in cells if c != "")
    if not bad or len(bad) * 2 > values:
        return None
    i = bad[0]
    return (
        f"column {name!r} is modelled as categorical, each number a category: {len(bad):,} of "
        f"its {values:,} values are not numbers (the first: {ids[i]}, {cells[i][:40]!r}); fix "
        f"them and give --column {name}=gaussian, or give --column {name}=categorical"
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
