"""`predict` on a typed table writes its rows a block at a time (`decision.Predictions`,
`prediction_lines.prediction_blocks`): the same values and the same bytes as scoring and writing each
row by itself (`decision.prediction`, `prediction_lines.predictions`)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from nbspam.cli import prediction_lines
from nbspam.models import table_model
from nbspam.models.decision import prediction
from nbspam.store.tablefile import load_table_model
from nbspam.text.tables import read_table
from tests.helpers import cli_run


def write_table(path, labels, rows=60, seed=0, far=True):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, len(labels), rows)
    x = rng.normal(size=rows) + 0.5 * y
    c = rng.integers(0, 3, rows) + (rng.random(rows) < 0.3) * y
    lines = ["x,c,label"]
    for xi, ci, yi in zip(x.tolist(), c.tolist(), y.tolist()):
        label = labels[yi].replace('"', '""')
        lines.append(f'{xi!r},v{ci},"{label}"')
    if far:  # a log-odds of thousands, and a category never seen
        lines.append(f'{1e140!r},never seen,"{labels[0]}"')
    path.write_text("\n".join(lines) + "\n")


CASES = {
    "two labels, calibrated": (['h"am é', "%s spam"], []),
    "two labels, no calibration": (["ham", "spam"], ["--no-calibrate"]),
    "two labels, fixed cutoffs": (["ham", "spam"], ["--no-calibrate", "--cutoffs", "-1,2"]),
    "three labels": (["a", "b\\c", "c\td"], []),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fmt", ["text", "tsv", "jsonl"])
def test_predict_writes_a_tables_rows_as_row_by_row_scoring_would(tmp_path, case, fmt):
    labels, options = CASES[case]
    data = tmp_path / "ro%ws 50% #1.csv"
    write_table(data, labels)
    write_table(tmp_path / "train.csv", labels, seed=1, far=False)
    model_path = tmp_path / "m.nbm"
    r = cli_run(
        "train", tmp_path / "train.csv", "-o", model_path, "--column", "x=gaussian", *options
    )
    assert r.exit_code == 0, r.stderr
    model = load_table_model(model_path)
    table = read_table(str(data))
    jll = model.joint_log_likelihood(table, Counter())
    positive = model.positive_index if model.is_binary else None
    log_post, log_odds = table_model.posteriors(jll, positive)
    expected = [
        prediction(
            row_id,
            model.labels,
            log_post[i].tolist(),
            None if log_odds is None else float(log_odds[i]),
            positive=model.positive if model.is_binary else None,
            cutoffs=model.cutoffs,
            calibration=model.calibration,
        )
        for i, row_id in enumerate(table.ids)
    ]
    assert list(model.predict(table)) == expected  # values: the blocks' arrays, row by row
    lines = list(prediction_lines.predictions(expected, model.labels, fmt))
    r = cli_run("predict", "-m", model_path, data, "-f", fmt)
    assert r.stdout == "\n".join(lines) + "\n"  # bytes: one format per block


def test_a_table_longer_than_a_block_is_written_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(table_model, "PREDICT_ROWS", 7)
    data = tmp_path / "t.csv"
    write_table(data, ["ham", "spam"])
    r = cli_run("train", data, "-o", tmp_path / "m.nbm", "--column", "x=gaussian")
    assert r.exit_code == 0, r.stderr
    r = cli_run("predict", "-m", tmp_path / "m.nbm", data)
    got = [line.split(":")[0] for line in r.stdout.splitlines()]
    assert got == [f"{data}#{n}" for n in range(2, 63)]


@pytest.mark.parametrize("cutoffs", [None, (0.0, 0.0), (-1.0, 2.0), (-np.inf, 3.0), (0.5, np.inf)])
@pytest.mark.parametrize("calibration", [(0.7, 0.3), (-0.2, 1.5), (2.0, -4.0)])
def test_verdicts_and_calibrated_probabilities_of_a_block_are_those_of_each_row(
    cutoffs, calibration
):
    """Where the Platt curve and the cutoffs disagree, the probability is held on the side
    of the verdict, bit for bit as `decision.calibrated_probability` holds it."""
    from nbspam.models.decision import calibrated_probability, verdict

    s = np.concatenate([np.linspace(-8, 8, 401), [0.0, -0.0, 1e300, -1e300, 2.0, -1.0]])
    side = table_model._sides(s, cutoffs)
    names = {-1: "-", 0: "unsure", 1: "+"}
    assert [names[v] for v in side.tolist()] == [verdict(v, cutoffs, "+", "-") for v in s.tolist()]
    got = table_model._calibrated(s, side, calibration)
    want = [calibrated_probability(calibration, v, cutoffs) for v in s.tolist()]
    assert [v.hex() for v in got] == [v.hex() for v in want]


@pytest.mark.parametrize("block", [16, 1 << 22])
def test_predict_reads_only_the_text_it_scores_as_text(tmp_path, monkeypatch, block):
    """predict keeps the cells' text of the columns it scores as categories ('01' and '1'
    stay two categories), not of those it scores as numbers; a cell of those that is not a
    number, after blocks of numbers, is named as before."""
    from nbspam.mail import table_rows

    monkeypatch.setattr(table_rows, "TEXT_BLOCK", block)
    train = tmp_path / "train.csv"
    rows = [("1.5", "01", "a"), ("2.5", "1", "b"), ("1.0", "01", "a"), ("3.0", "1", "b")]
    train.write_text("x,c,label\n" + "".join(",".join(r) + "\n" for r in rows * 3))
    r = cli_run("train", train, "-o", tmp_path / "m.nbm", "--column", "c=categorical")
    assert r.exit_code == 0, r.stderr
    model = load_table_model(tmp_path / "m.nbm")
    assert model.text_columns() == {"c"}
    test = tmp_path / "test.csv"
    test.write_text("x,c\n1.5,01\n2.5,1\n")
    table = read_table(str(test), texts=model.text_columns())
    names, codes = table.categories("c")
    assert (names, codes.tolist()) == (["01", "1"], [0, 1])
    with pytest.raises(ValueError, match="not kept"):
        table.column("x")
    assert list(model.predict(table)) == list(model.predict(read_table(str(test))))
    test.write_text("x,c\n" + "1.5,01\n" * 5 + "abc,1\n")
    r = cli_run("predict", "-m", tmp_path / "m.nbm", test)
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr == f"Error: {test}#7, column 'x': 'abc' is not a finite number\n"
