"""The one reader of table files (`mail.table_rows`), for tables of messages and typed tables
alike: streamed, each line capped, bad rows reported by PATH#LINE; typed tables kept as
columns (numbers once parsed, categories coded), never as rows of text."""

from __future__ import annotations

import numpy as np
import pytest

from nbspam.errors import InputError
from nbspam.mail.message import Problems
from nbspam.mail.messages import read_labelled
from nbspam.models.table_model import TableSettings, fit_table
from nbspam.text.tables import read_table
from tests.helpers import cli_run


def collector() -> tuple[Problems, list[str]]:
    lines: list[str] = []
    return Problems(lines.append), lines


DEEP = '{"x": ' + "[" * 100_000 + "]" * 100_000 + ', "label": "b", "text": "t"}'


def test_a_json_line_of_messages_nested_too_deep_is_a_skipped_row(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text(
        '{"label": "spam", "text": "buy"}\n' + DEEP + "\n" + '{"label": "ham", "text": "hi"}\n'
    )
    problems, lines = collector()
    got = [(m.id, m.data, m.label) for m in read_labelled([str(data)], problems)]
    assert got == [(f"{data}#1", "buy", "spam"), (f"{data}#3", "hi", "ham")]
    assert lines == [f"{data}#2: not valid JSON: nested too deep"]


def test_a_typed_table_row_longer_than_the_cap_is_named_not_read(tmp_path):
    data = tmp_path / "t.csv"  # the cap: 8 MiB a line
    data.write_text("x,label\n1.5,a\n" + "2" * (9 << 20) + ",b\n2.5,b\n")
    r = cli_run("train", data, "-o", tmp_path / "m.nbm")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr == f"Error: {data}#3: a row of 9.0 MiB, longer than 8 MiB: not read\n"


def test_a_typed_table_read_with_problems_skips_bad_rows_and_names_each(tmp_path):
    data = tmp_path / "t.csv"
    data.write_text("x,c,label\n1.5,u,a\n2.5,v\n\n3.5,u,b,extra\n4.5,w,b\n")
    problems, lines = collector()
    table = read_table(str(data), problems)
    assert lines == [
        f"{data}#3: 2 cells, but the header names 3",
        f"{data}#5: 4 cells, but the header names 3",
    ]
    assert list(table.ids) == [f"{data}#2", f"{data}#6"]
    assert table.rows == [["1.5", "u", "a"], ["4.5", "w", "b"]]
    with pytest.raises(InputError, match=rf"^{data}#3: 2 cells, but the header names 3$"):
        read_table(str(data))  # without problems: the first bad row stops it


def test_a_typed_table_is_kept_as_columns_not_rows_of_text(tmp_path):
    data = tmp_path / "t.csv"
    from nbspam.text.tables import Numbers, Words

    data.write_text("x,c,label\n 1.5 ,u,a\n,v,b\n-2e3,,a\n0.25,u,b\n")
    table = read_table(str(data))
    x, c, label = table.cells
    assert isinstance(x, Numbers) and isinstance(c, Words) and isinstance(label, Words)
    np.testing.assert_array_equal(x.x, [1.5, np.nan, -2000.0, 0.25])
    assert (c.names, c.codes.tolist()) == (["u", "v"], [0, 1, -1, 0])
    model = fit_table(table, TableSettings())
    assert [(col.name, col.kind) for col in model.columns] == [
        ("x", "gaussian"),
        ("c", "categorical"),
    ]
    assert model.class_count == [2, 2]
    assert table._rows is None  # no row of text was made to fit it
    assert table.column("x") == ["1.5", "", "-2e3", "0.25"]  # the cells' own text


def test_json_lines_columns_that_appear_late_are_empty_before(tmp_path):
    data = tmp_path / "t.jsonl"
    from nbspam.text.tables import Numbers, Words

    data.write_text('{"x": 1, "label": "a"}\n{"x": 2.5, "label": "b", "c": "red"}\n')
    table = read_table(str(data))
    assert table.names == ["x", "label", "c"]
    assert table.rows == [["1", "a", ""], ["2.5", "b", "red"]]
    assert isinstance(table.cells[0], Numbers) and isinstance(table.cells[2], Words)
