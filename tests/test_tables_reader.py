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


@pytest.mark.parametrize("rows", ["a key of its own each", "many keys, then empty objects"])
def test_a_json_lines_table_too_sparse_to_hold_is_refused_at_its_row(rows, tmp_path):
    """A table is kept whole, a cell for every row in every column: 20,000 objects of a key
    each (460 KB) made 20,000 columns of 20,000 rows, minutes and gigabytes. Refused before
    that, at the row that passes one cell a byte of its file."""
    import json

    data = tmp_path / "t.jsonl"
    with open(data, "w") as f:
        if rows == "a key of its own each":
            for i in range(3_000):
                f.write(json.dumps({"label": "ab"[i % 2], f"k{i}": 1}) + "\n")
        else:
            f.write(json.dumps({"label": "a", **{f"k{i}": 1 for i in range(3_000)}}) + "\n")
            f.write('{"label": "b"}\n' * 3_000)
    r = cli_run("train", data, "-o", tmp_path / "m.nbm")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr.startswith(f"Error: {data}#")
    assert r.stderr.endswith(" most keys are in few rows, too sparse a table to read\n")


def test_a_json_lines_table_whose_rows_give_some_of_its_keys_is_read(tmp_path):
    data = tmp_path / "t.jsonl"
    with open(data, "w") as f:
        for i in range(30_000):  # 10 columns, each row giving 3 of them
            f.write(f'{{"label": "{"ab"[i % 2]}", "k{i % 9}": {i}, "k{(i + 4) % 9}": 1}}\n')
    table = read_table(str(data))
    assert (len(table), len(table.names)) == (30_000, 10)


def test_a_json_lines_table_whose_later_rows_give_more_keys_is_read(tmp_path):
    """Records that gain keys as time goes by: 5,000 rows of 2 keys, then 1,000 of 62. At
    the first of 62 the rows so far times the keys pass the characters read so far, but
    the table holds fewer cells than its file has bytes."""
    data = tmp_path / "t.jsonl"
    with open(data, "w") as f:
        for i in range(5_000):
            f.write(f'{{"id": {i}, "label": "{"ab"[i % 2]}"}}\n')
        for i in range(5_000, 6_000):
            features = ", ".join(f'"f{j}": {(i * j) % 7}' for j in range(60))
            f.write(f'{{"id": {i}, "label": "{"ab"[i % 2]}", {features}}}\n')
    table = read_table(str(data))
    assert (len(table), len(table.names)) == (6_000, 62)
    assert len(table) * len(table.names) < data.stat().st_size


def test_one_long_number_among_short_ones_is_not_padded_into_every_cell(tmp_path):
    """A column of numbers used as categories (a label column of 0 and 1) was an array of
    fixed width, each cell padded to the longest: one label of 100 KB of digits among
    10,000 short ones (160 KB of file) took 5 GB and 15 s to train on; 8 MiB, 80 GB."""
    import tracemalloc

    data = tmp_path / "t.csv"
    long = "0" * 100_000 + "1"
    data.write_text(
        "x,label\n" + f"1.5,{long}\n" + "".join(f"{i}.5,{i % 2}\n" for i in range(2_000))
    )
    table = read_table(str(data))
    tracemalloc.start()
    try:
        names, codes = table.categories("label")
        texts = table.column("label")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000  # padded: 200 MB, and 800 MB more as str
    assert names == [long, "0", "1"] and codes.tolist()[:3] == [0, 1, 2]
    assert texts[:3] == [long, "0", "1"]


def csv_reference(path, delimiter=","):
    """(ids, rows) of a CSV table as the csv module reads it a row at a time: universal
    newlines, cells stripped, blank rows left out, every row of the header's width."""
    import csv

    text = path.read_bytes().decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    reader = csv.reader(text.splitlines(keepends=True), delimiter=delimiter)
    names = next(reader)
    ids, rows, start = [], [], 2
    for row in reader:
        line, start = start, reader.line_num + 1
        if not "".join(row).strip():
            continue
        assert len(row) == len(names)
        ids.append(f"{path}#{line}")
        rows.append([cell.strip() for cell in row])
    return ids, rows


TRICKY = (
    "\ufeffx, c ,label\r\n"
    "1.5,u,a\n"
    "2,v,b\n"
    "\n"
    ",,\n"
    "  ,\t, \n"
    " 3e0 , w ,a\r"
    "4,u,b\n"
    '5,"two\nlines",a\n'
    "6,u,b\n"
    "7,,a\n"
    "-0.0,x y,b\n"
)


@pytest.mark.parametrize("block", [8, 16, 64, 1 << 22])
def test_a_csv_table_read_in_blocks_of_whole_lines_is_the_csv_modules_row_by_row(
    tmp_path, monkeypatch, block
):
    """Blocks that end anywhere (a few bytes, or the whole file): quoted cells over two
    lines, blank rows and rows of empty cells, white space, CR and CRLF, a byte order mark,
    and the row numbers across blocks, as the csv module reads the table row by row."""
    from nbspam.mail import table_rows

    monkeypatch.setattr(table_rows, "TEXT_BLOCK", block)
    data = tmp_path / "t.csv"
    data.write_bytes(TRICKY.encode())
    table = read_table(str(data))
    ids, rows = csv_reference(data)
    assert table.names == ["x", "c", "label"]
    assert list(table.ids) == ids
    assert table.rows == rows
    assert table.numbers("x").tolist() == [1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, -0.0]


@pytest.mark.parametrize("block", [8, 1 << 22])
def test_a_bad_row_after_plain_blocks_is_named_by_its_line(tmp_path, monkeypatch, block):
    from nbspam.mail import table_rows

    monkeypatch.setattr(table_rows, "TEXT_BLOCK", block)
    data = tmp_path / "t.csv"
    data.write_text("x,label\n1,a\n2,b\n\n3,a\n4\n5,b\n")
    problems, lines = collector()
    table = read_table(str(data), problems)
    assert lines == [f"{data}#6: 1 cells, but the header names 2"]
    assert list(table.ids) == [f"{data}#{n}" for n in (2, 3, 5, 7)]
    with pytest.raises(InputError, match=rf"^{data}#6: 1 cells, but the header names 2$"):
        read_table(str(data))


def test_bytes_that_are_not_utf8_stop_a_table_read_in_blocks_after_a_bad_row_before(tmp_path):
    data = tmp_path / "t.csv"
    data.write_bytes(b"x,label\n1,a\n2\n3,b\xff\n")
    with pytest.raises(InputError, match=rf"^{data}#3: 1 cells, but the header names 2$"):
        read_table(str(data))  # the bad row comes first, as it did line by line
    data.write_bytes(b"x,label\n1,a\n3,b\xff\n")
    with pytest.raises(InputError, match=r": not UTF-8 text$"):
        read_table(str(data))


def test_numbers_are_read_in_bulk_as_pythons_float_reads_each_cell(tmp_path):
    """One numpy call per column parses as ``float`` does: underscores, digits of other
    scripts, signs, subnormals and the last digit of rounding; inf and nan are not numbers."""
    cells = [
        "1_000",
        "\u0661\u0662",
        "+.5",
        "-0",
        "4.9e-324",
        "2.2250738585072011e-308",
        "0.1000000000000000055511151231257827",
        "1e22",
        "9007199254740993",
        "-1E-5",
    ]
    data = tmp_path / "t.csv"
    data.write_text("x,label\n" + "".join(f"{c},{'ab'[i % 2]}\n" for i, c in enumerate(cells)))
    table = read_table(str(data))
    got = table.numbers("x")
    assert [v.hex() for v in got.tolist()] == [float(c).hex() for c in cells]
    assert table.column("x") == cells  # the cells' own text
    from nbspam.text.tables import Words

    for other in ("inf", "nan", "-Infinity", "1e400", "0x10", "1.5e", "1,5"):
        data.write_text(f'x,label\n1,a\n"{other}",b\n2,a\n')  # quoted: read row by row
        assert isinstance(read_table(str(data)).cells[0], Words), other
        data.write_text(f"x,label\n1,a\n{other},b\n2,a\n")  # plain: split in bulk
        if "," not in other:
            assert isinstance(read_table(str(data)).cells[0], Words), other
