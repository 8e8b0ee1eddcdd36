"""Progress of a typed table: its rows and the bytes read of the file, block by block, up to
the file's size; then auto's treatments, evaluate's folds, and predict's rows scored."""

from __future__ import annotations

import json

import pytest

from nbspam.cli import progress
from nbspam.core.progress import listening
from nbspam.mail import table_rows
from nbspam.text import tables
from nbspam.text.tables import read_table
from tests.helpers import cli_run


@pytest.fixture
def every_block(monkeypatch):
    """A plain line at every step, and a block of 32 bytes read at a time."""
    monkeypatch.setattr(progress, "PERIOD", 0.0)
    monkeypatch.setattr(table_rows, "TEXT_BLOCK", 32)


def table(tmp_path):
    """A header and 19 rows of 8 bytes each: 160 bytes, 5 blocks of 4 whole lines."""
    path = tmp_path / "t.csv"
    rows = [f"{i % 10},{i % 7},{i % 3},{'sh'[i % 2]}\n" for i in range(19)]
    path.write_text("a,b,c,y\n" + "".join(rows))
    assert path.stat().st_size == 160
    return path


def told(stderr: str, start: str) -> list[str]:
    """The progress lines that start so, without the time left (which the load may add)."""
    return [line.split(", about")[0] for line in stderr.splitlines() if line.startswith(start)]


READ = [f"read {4 * k - 1} rows, {32 * k} of 160 bytes ({k / 5:.0%})" for k in range(1, 6)]


def test_train_on_a_table_tells_its_rows_and_bytes(tmp_path, every_block):
    result = cli_run("train", table(tmp_path), "--label-column", "y", "-o", tmp_path / "m.nbm")
    assert result.exit_code == 0, result.stderr
    assert told(result.stderr, "read ") == READ
    assert "read 0 rows" not in result.stderr and "messages" not in result.stderr
    assert told(result.stderr, "auto: ") == [
        f"auto: treatments tried {k} of 3 ({k / 3:.0%})" for k in (1, 2, 3)
    ]


def test_predict_on_a_table_tells_its_rows_read_then_scored(tmp_path, every_block):
    path = table(tmp_path)
    assert (
        cli_run("train", "-q", path, "--label-column", "y", "-o", tmp_path / "m.nbm").exit_code == 0
    )
    result = cli_run("predict", "-m", tmp_path / "m.nbm", path)
    assert result.exit_code == 0, result.stderr
    assert told(result.stderr, "read ") == READ
    # the rows are scored a block at a time: one block of the 19 here
    assert told(result.stderr, "scored ") == ["scored 19 rows"]


def test_evaluate_on_a_table_tells_its_rows_and_folds(tmp_path, every_block):
    result = cli_run("evaluate", table(tmp_path), "--label-column", "y", "--folds", "3")
    assert result.exit_code == 0, result.stderr
    assert told(result.stderr, "read ") == READ
    assert told(result.stderr, "folds ") == [
        f"folds fitted {k} of 3 ({k / 3:.0%})" for k in (1, 2, 3)
    ]


class Heard:
    """A listener that keeps what it is told."""

    def __init__(self) -> None:
        self.told: list[tuple] = []

    def begin(self, what, total, noun=None) -> None:
        self.told.append(("begin", what, total, noun))

    def advance(self, steps, items=0) -> None:
        self.told.append((steps, items))

    def end(self) -> None:
        self.told.append(("end",))


def test_a_jsonl_table_tells_each_block_of_rows_at_the_file_position(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "BLOCK_CELLS", 4)  # a block of two rows of two cells
    path = tmp_path / "t.jsonl"
    lines = [json.dumps({"x": i, "y": "sh"[i % 2]}) + "\n" for i in range(5)]
    path.write_text("".join(lines))
    sizes = [len(line) for line in lines]  # 19 bytes each: {"x": 0, "y": "s"}
    heard = Heard()
    with listening(heard):
        assert len(read_table(str(path))) == 5
    assert heard.told == [
        ("begin", "read", sum(sizes), "rows"),
        (sum(sizes[:2]), 2),
        (sum(sizes[2:4]), 2),
        (sizes[4], 1),
        ("end",),
    ]
