"""Typed tables: Gaussian, categorical, Bernoulli and text columns in one model; parity with
scikit-learn, exact learning and forgetting, the model file, and the commands."""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from nbspam.core.settings import TrainConfig
from nbspam.errors import InputError, ModelFileError
from nbspam.evaluation.table_evaluation import cross_validate_table
from nbspam.fit.table_training import auto_fit, fit_with_rule
from nbspam.models import columns as col
from nbspam.models.table_model import (
    TableSettings,
    add_rows,
    bin_edges,
    column_statistics,
    explain_rows,
    fit_table,
    subset,
)
from nbspam.store.tablefile import load_table_model, save_table_model, to_header
from nbspam.text.tables import Table, read_table
from tests.helpers import SAMPLE, cli_run

SPAMBASE = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "spambase" / "spambase.csv"
needs_spambase = pytest.mark.skipif(not SPAMBASE.exists(), reason="no Spambase corpus here")


def table_of(X: np.ndarray, y, names=None) -> Table:
    names = names or [f"x{j}" for j in range(X.shape[1])]
    rows = [
        [repr(float(v)) if not isinstance(v, str) else v for v in row] + [str(label)]
        for row, label in zip(X.tolist(), y)
    ]
    return Table([*names, "label"], rows, [f"t#{i + 2}" for i in range(len(rows))])


def close(a: np.ndarray, b: np.ndarray, rel: float = 1e-10) -> bool:
    return bool((np.abs(a - b) <= rel * np.maximum(1.0, np.abs(b))).all())


def random_gaussian(seed: int = 0, n: int = 300, d: int = 5):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 100, d) + y[:, None] * rng.normal(size=d)
    X[:, 0] = 3.0  # a constant column: zero variance, floored
    return X, y


# --------------------------------------------------------------------------------------------
# The maths, against scikit-learn
# --------------------------------------------------------------------------------------------


def test_gaussian_matches_scikit_learn_on_random_data():
    from sklearn.naive_bayes import GaussianNB

    X, y = random_gaussian()
    model = fit_table(table_of(X, y), TableSettings(kinds={"*": "gaussian"}))
    ref = GaussianNB().fit(X, y)
    jll = model.joint_log_likelihood(table_of(X, y))
    assert close(jll, ref.predict_joint_log_proba(X))
    for j in range(X.shape[1]):
        mu, var = model.gaussian_params()[f"x{j}"]
        assert close(mu, ref.theta_[:, j]) and close(var, ref.var_[:, j])


def test_categorical_matches_scikit_learn_on_random_data():
    from sklearn.naive_bayes import CategoricalNB

    rng = np.random.default_rng(1)
    n = 400
    y = rng.integers(0, 3, n)
    X = rng.integers(0, 4, (n, 3)) + (y[:, None] == 2)
    cats = np.array(["a", "b", "c", "d", "e"], dtype=object)[X]
    table = table_of(cats, y)
    model = fit_table(table, TableSettings(alpha=0.5))
    assert {c.kind for c in model.columns} == {"categorical"}
    ref = CategoricalNB(alpha=0.5).fit(X, y)
    assert close(model.joint_log_likelihood(table), ref.predict_joint_log_proba(X))


def test_bernoulli_matches_scikit_learn():
    from sklearn.naive_bayes import BernoulliNB

    rng = np.random.default_rng(2)
    X = rng.exponential(size=(200, 4)) * (rng.random((200, 4)) < 0.4)
    y = rng.integers(0, 2, 200)
    table = table_of(X, y)
    model = fit_table(table, TableSettings(kinds={"*": "bernoulli"}, alpha=0.3))
    ref = BernoulliNB(alpha=0.3, binarize=0.0).fit(X, y)
    assert close(model.joint_log_likelihood(table), ref.predict_joint_log_proba(X))


@needs_spambase
def test_spambase_matches_scikit_learn_gaussian_and_categorical():
    from sklearn.naive_bayes import CategoricalNB, GaussianNB

    table = read_table(str(SPAMBASE))
    X = np.array([[float(v) for v in row[:-1]] for row in table.rows])
    y = np.array([row[-1] for row in table.rows])
    gauss = fit_table(table, TableSettings(kinds={"*": "gaussian"}))
    jll = gauss.joint_log_likelihood(table)
    ref = GaussianNB().fit(X, y).predict_joint_log_proba(X)
    assert close(jll, ref)
    assert close(jll[:, 1] - jll[:, 0], ref[:, 1] - ref[:, 0])

    binned = fit_table(table, TableSettings(bins=4, binning="quantile"))
    codes = np.zeros(X.shape, np.int64)
    for j, column in enumerate(binned.columns):
        values = [column.value(cell, "", None) for cell in table.column(column.name)]
        codes[:, j] = [column.stats.index[v] for v in values]
    ref = CategoricalNB(alpha=1.0, min_categories=codes.max(axis=0) + 1).fit(codes, y)
    # scikit-learn counts categories 0..max; a code never seen in training is all smoothing
    jll = binned.joint_log_likelihood(table)
    assert close(jll, ref.predict_joint_log_proba(codes))


def test_variance_floor_is_scikit_learns():
    X, y = random_gaussian()
    model = fit_table(table_of(X, y), TableSettings(kinds={"*": "gaussian"}))
    assert model.epsilon() == pytest.approx(1e-9 * np.var(X, axis=0).max(), rel=1e-12)
    _, var = model.gaussian_params()["x0"]  # the constant column
    assert (var == model.epsilon()).all()


def test_exact_sums_give_mean_and_variance_correctly_rounded():
    g = col.Gaussian.empty(1)
    values = [0.1, 0.2, 0.3, 1e-300, 5e-324, -7.5]
    for x in values:
        g.add(0, x)
    mu, var = g.mean_var()
    from fractions import Fraction

    exact_mu = sum(map(Fraction, values)) / len(values)
    exact_var = sum((Fraction(x) - exact_mu) ** 2 for x in values) / len(values)
    assert mu[0] == float(exact_mu) and var[0] == float(exact_var)


# --------------------------------------------------------------------------------------------
# Exact learning and forgetting
# --------------------------------------------------------------------------------------------


def mixed_table(seed: int = 3, n: int = 120) -> Table:
    rng = np.random.default_rng(seed)
    y = rng.choice(["ham", "spam"], n)
    rows = []
    for label in y:
        rows.append(
            [
                repr(float(rng.normal() * (3 if label == "spam" else 1))),
                rng.choice(["red", "green", "blue"]),
                str(int(rng.random() < (0.7 if label == "spam" else 0.2))),
                "win free money now" if label == "spam" else "meeting notes for the team",
                label,
            ]
        )
    return Table(["size", "colour", "flag", "body", "label"], rows, [f"m#{i}" for i in range(n)])


def test_mixed_columns_are_detected():
    model = fit_table(mixed_table(), TableSettings())
    kinds = {c.name: c.kind for c in model.columns}
    assert kinds == {
        "size": "gaussian",
        "colour": "categorical",
        "flag": "bernoulli",
        "body": "text",
    }


def test_learn_then_forget_gives_the_same_statistics_bit_for_bit():
    table = mixed_table()
    a, b = subset(table, range(70)), subset(table, range(70, 120))
    model = fit_table(a, TableSettings())
    before = json.dumps(to_header(model))
    add_rows(model, b, +1)
    assert json.dumps(to_header(model)) != before
    add_rows(model, b, -1)
    assert json.dumps(to_header(model)) == before


def test_training_on_a_then_learning_b_equals_training_on_both():
    table = mixed_table()
    a, b = subset(table, range(70)), subset(table, range(70, 120))
    model = fit_table(a, TableSettings())
    add_rows(model, b, +1)
    whole = fit_table(table, TableSettings())
    for x, y in zip(model.columns, whole.columns):
        if x.kind == "gaussian":
            assert (x.stats.n, x.stats.s1, x.stats.s2) == (y.stats.n, y.stats.s1, y.stats.s2)
    assert np.array_equal(model.joint_log_likelihood(table), whole.joint_log_likelihood(table))


# --------------------------------------------------------------------------------------------
# Scoring, explaining, the file
# --------------------------------------------------------------------------------------------


def test_unseen_category_is_left_out_and_counted():
    model = fit_table(mixed_table(), TableSettings())
    new = Table(["size", "colour", "flag", "body"], [["0.5", "purple", "1", "free money"]], ["n#1"])
    unseen: Counter = Counter()
    jll = model.joint_log_likelihood(new, unseen)
    assert np.isfinite(jll).all() and unseen == {("colour", "purple"): 1}


def test_contributions_add_up_to_the_log_odds():
    table = mixed_table()
    model = fit_table(table, TableSettings())
    jll = model.joint_log_likelihood(table)
    p = model.positive_index
    for i, e in enumerate(explain_rows(model, table)):
        total = e["bias"] + sum(v for _, v in e["contributions"])
        assert total == pytest.approx(jll[i, p] - jll[i, 1 - p], abs=1e-9)
        assert e["log_odds"] == pytest.approx(total, abs=1e-12)


def test_describe_says_linear_or_quadratic():
    rows = [[repr(x), "a"] for x in (1.0, 2.0, 3.0)] + [[repr(x), "b"] for x in (11.0, 12.0, 13.0)]
    model = fit_table(Table(["x", "label"], rows, [str(i) for i in range(6)]), TableSettings())
    (entry,) = column_statistics(model)
    assert entry["boundary"] == "linear"
    rows[0][0] = "0.0"
    model = fit_table(Table(["x", "label"], rows, [str(i) for i in range(6)]), TableSettings())
    assert column_statistics(model)[0]["boundary"] == "quadratic"


def test_model_file_round_trip(tmp_path):
    table = mixed_table()
    model = fit_table(table, TableSettings(bins=3))
    path = tmp_path / "t.nbm"
    save_table_model(model, path)
    again = load_table_model(path)
    assert to_header(again) == to_header(model)
    assert np.array_equal(again.joint_log_likelihood(table), model.joint_log_likelihood(table))


def test_a_bad_table_model_file_is_refused(tmp_path):
    from nbspam.store import container

    header = to_header(fit_table(mixed_table(), TableSettings()))
    header["table"]["class_count"] = [-1, 3]
    path = tmp_path / "bad.nbm"
    container.write(path, header, {})
    with pytest.raises(ModelFileError, match="not a valid nbspam table model"):
        load_table_model(path)


def test_bins():
    x = np.array([0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8], dtype=float)
    edges, zero = bin_edges(x, 2, "quantile")
    assert zero and edges == [4.5]
    edges, zero = bin_edges(x, 4, "uniform")
    assert not zero and edges == [2.0, 4.0, 6.0]


def test_malformed_number_names_row_and_column():
    rows = [[repr(float(i)), "a" if i % 2 else "b"] for i in range(300)]
    rows[7][0] = "1.2.3"
    ids = [f"t.csv#{i + 2}" for i in range(300)]  # line 1 is the header
    with pytest.raises(InputError, match=r"^t.csv#9, column 'x': '1.2.3' is not a number"):
        fit_table(Table(["x", "label"], rows, ids), TableSettings())


def test_train_and_predict_name_a_row_alike(tmp_path):
    data = tmp_path / "t.csv"
    lines = ["x,label"] + [f"{i}.5,{'ab'[i % 2]}" for i in range(300)]
    lines[11] = "1.2.3,a"  # line 12 of the file
    data.write_text("\n".join(lines) + "\n")
    r = cli_run("train", data, "-o", tmp_path / "m.nbm")
    assert r.exit_code == 1
    assert r.stderr.startswith(f"Error: {data}#12, column 'x': '1.2.3' is not a number")


def test_auto_and_cross_validation(tmp_path):
    X, y = random_gaussian(n=200)
    path = tmp_path / "g.csv"
    write_csv(path, X, y)
    model, chosen = auto_fit(read_table(str(path)), TableSettings())
    assert chosen["chose"] in chosen["roc_auc"] and len(chosen["roc_auc"]) == 3
    scores = cross_validate_table(
        str(path), TableSettings(), auto=False, folds=3, seed=1, cfg=TrainConfig()
    )
    assert scores.log_odds is not None and np.isfinite(scores.log_odds).all()
    assert set(scores.rules) == {0, 1, 2} and scores.verdicts is not None


def test_decision_rule_and_its_file(tmp_path):
    table = mixed_table()
    model = fit_with_rule(table, TableSettings(), auto=True, cfg=TrainConfig())
    assert model.cutoffs is not None and model.calibration is not None
    model.cutoffs = (-math.inf, 2.0)
    path = tmp_path / "r.nbm"
    save_table_model(model, path)
    again = load_table_model(path)
    assert again.cutoffs == (-math.inf, 2.0) and again.calibration == model.calibration
    first = next(again.predict(table))
    assert first.verdict in ("ham", "spam", "unsure")
    none = fit_with_rule(table, TableSettings(), auto=False, cfg=TrainConfig(calibrate=False))
    assert none.cutoffs is None and none.calibration is None


def write_csv(path, X, y, names=None):
    names = names or [f"x{j}" for j in range(X.shape[1])]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*names, "label"])
        for row, label in zip(X.tolist(), y):
            w.writerow([*map(repr, row), "spam" if label else "ham"])


# --------------------------------------------------------------------------------------------
# The commands
# --------------------------------------------------------------------------------------------


def test_commands_on_a_typed_table(tmp_path):
    X, y = random_gaussian(n=120)
    data = tmp_path / "g.csv"
    write_csv(data, X, y)
    model = tmp_path / "g.nbm"
    r = cli_run("train", data, "-o", model, "--column", "*=gaussian")
    assert r.exit_code == 0, r.output
    assert "columns gaussian: 5: x0, x1, x2, x3, x4" in r.stderr
    assert "cutoffs: ham below" in r.stderr and "calibration: Platt" in r.stderr
    train_lines = r.stderr.splitlines()
    r = cli_run("predict", "-m", model, data, "-f", "jsonl")
    assert r.exit_code == 0
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(lines) == 120 and lines[0]["path"] == f"{data}#2"
    r = cli_run("explain", "-m", model)
    assert r.exit_code == 0 and "x1: gaussian (quadratic boundary)" in r.stdout
    r = cli_run("explain", "-m", model, data, "-f", "jsonl")
    first = json.loads(r.stdout.splitlines()[0])
    assert math.isclose(first["log_odds"], lines[0]["log_odds"], abs_tol=1e-9)
    r = cli_run("evaluate", data, "--folds", "3", "--column", "*=gaussian", "-f", "json")
    assert r.exit_code == 0, r.output
    r = cli_run("info", "-m", model)
    assert r.exit_code == 0, r.stderr
    assert (
        r.stdout.splitlines()[0]
        == f"model:      {model} (a table model, {model.stat().st_size:,} bytes)"
    )
    # the cutoffs as train says them, each with the verdict it gives
    trained = next(line for line in train_lines if line.startswith("cutoffs: "))
    assert trained.endswith(" log-odds, unsure between")
    assert "cutoffs:    " + trained.removeprefix("cutoffs: ") in r.stdout.splitlines()
    shown = json.loads(cli_run("info", "-m", model, "-f", "json").stdout)
    assert shown["kind"] == "table" and shown["label_column"] == "label"
    assert {c["kind"] for c in shown["columns"]} == {"gaussian"}
    r = cli_run("dump", "-m", model)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("# nbspam table dump 1\n{\n") and r.stdout.endswith("}\nend\n")


def test_a_table_model_is_dumped_and_restored_to_the_same_file(tmp_path):
    model, dump, again = tmp_path / "m.nbm", tmp_path / "m.dump", tmp_path / "again.nbm"
    save_table_model(fit_table(mixed_table(), TableSettings()), model)
    r = cli_run("dump", "-m", model, "-o", dump)
    assert (r.exit_code, r.stderr) == (0, f"dumped {model} to {dump}\n")
    r = cli_run("restore", dump, "-o", again)
    assert (r.exit_code, r.stderr) == (
        0,
        f"restored {again}: a table model, 2 classes, 4 columns, 120 rows learned\n",
    )
    assert again.read_bytes() == model.read_bytes()
    assert cli_run("predict", "-m", again, "-f", "jsonl", tmp_path / "none.csv").exit_code == 1


def test_the_dump_of_any_table_model_a_file_holds_is_restored(tmp_path, monkeypatch):
    """A dump is the model file's header indented, two or three times its bytes: restore
    takes it as long as the header fits a model file, not the indented text."""
    from nbspam.store import container

    data, model, dump, again = (tmp_path / n for n in ("t.csv", "m.nbm", "m.dump", "a.nbm"))
    data.write_text(
        "subject,label\n"
        + "".join(f"{' '.join(f'w{i}x{j}' for j in range(20))},{'ab'[i % 2]}\n" for i in range(300))
    )
    assert cli_run("train", data, "-o", model, "--label-column", "label").exit_code == 0
    header = container._PREFIX.unpack_from(model.read_bytes())[2]
    monkeypatch.setattr(container, "MAX_HEADER", header + 1_000)
    assert cli_run("dump", "-m", model, "-o", dump).exit_code == 0
    assert dump.stat().st_size > 2 * container.MAX_HEADER
    r = cli_run("restore", dump, "-o", again)
    assert r.exit_code == 0, r.stderr
    assert again.read_bytes() == model.read_bytes()
    monkeypatch.setattr(container, "MAX_HEADER", header // 3)
    r = cli_run("restore", dump, "-o", tmp_path / "no.nbm")
    assert (r.exit_code, r.stderr) == (
        1,
        "Error: line 2: the dump of a table model is larger than a model file holds\n",
    )
    assert not (tmp_path / "no.nbm").exists()


def test_a_table_dump_cut_short_is_one_line(tmp_path):
    model, dump = tmp_path / "m.nbm", tmp_path / "m.dump"
    save_table_model(fit_table(mixed_table(), TableSettings()), model)
    assert cli_run("dump", "-m", model, "-o", dump).exit_code == 0
    dump.write_bytes(dump.read_bytes()[:-4])
    r = cli_run("restore", dump, "-o", tmp_path / "again.nbm")
    assert (r.exit_code, r.stderr) == (
        1,
        "Error: the dump is cut short: it must end with the line 'end'\n",
    )
    assert not (tmp_path / "again.nbm").exists()


def test_unseen_category_is_one_note(tmp_path):
    data = tmp_path / "c.jsonl"
    data.write_text(
        "".join(
            json.dumps({"colour": c, "label": lab}) + "\n"
            for c, lab in [("red", "spam"), ("blue", "ham"), ("red", "spam"), ("green", "ham")]
        )
    )
    model = tmp_path / "c.nbm"
    assert cli_run("train", data, "-o", model).exit_code == 0
    new = tmp_path / "new.jsonl"
    new.write_text('{"colour": "purple"}\n{"colour": "teal"}\n{"colour": "red"}\n')
    r = cli_run("predict", "-m", model, new)
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 3
    assert r.stderr.count("\n") == 1 and "2 value(s) in 1 column(s)" in r.stderr


def test_a_text_table_is_still_read_as_messages(tmp_path):
    data = tmp_path / "t.csv"
    data.write_text("label,text\nspam,win free money\nham,meeting at noon\n" * 3)
    r = cli_run("train", data, "-o", tmp_path / "t.nbm", "--no-calibrate")
    assert r.exit_code == 0 and "table model" not in r.stderr


def test_bad_cell_is_one_error_line(tmp_path):
    data = tmp_path / "b.csv"
    data.write_text(
        "x,label\n" + "".join(f"{i}.5,{'ab'[i % 2]}\n" for i in range(200)) + "oops,a\n"
    )
    r = cli_run("train", data, "-o", tmp_path / "b.nbm")
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: ") and "'oops' is not a number" in r.stderr


def test_learn_and_forget_commands_are_exact(tmp_path):
    X, y = random_gaussian(n=100)
    whole, part, extra = tmp_path / "whole.csv", tmp_path / "part.csv", tmp_path / "extra.csv"
    write_csv(whole, X, y)
    write_csv(part, X[:80], y[:80])
    spam = np.flatnonzero(y[80:] == 1) + 80
    write_csv(extra, X[spam], y[spam])
    model = tmp_path / "m.nbm"
    assert cli_run("train", part, "-o", model, "--column", "*=gaussian").exit_code == 0
    before = to_header(load_table_model(model))
    r = cli_run("learn", "-m", model, "--label", "spam", extra)
    assert r.exit_code == 0 and f"learned {spam.size} row(s) as spam" in r.stderr
    assert cli_run("forget", "-m", model, extra).exit_code == 0
    assert to_header(load_table_model(model)) == before
    r = cli_run("forget", "-m", model, whole)  # rows it never learned
    assert r.exit_code == 1 and "not all learned" in r.stderr
    assert to_header(load_table_model(model)) == before


def test_a_table_model_too_big_for_a_model_file_is_never_written(tmp_path, monkeypatch):
    """A table model keeps every term of a text column in its file's header, which readers
    cap: learning past the cap leaves the model as it was, readable, in one line."""
    from nbspam.store import container

    def rows(first: int, n: int) -> str:
        words = (" ".join(f"w{i}x{j}" for j in range(20)) for i in range(first, first + n))
        return "".join(f"{text},{'ab'[i % 2]}\n" for i, text in enumerate(words))

    part, more = tmp_path / "part.csv", tmp_path / "more.csv"
    part.write_text("subject,label\n" + rows(0, 10))
    more.write_text("subject,label\n" + rows(10, 400))
    model = tmp_path / "m.nbm"
    assert cli_run("train", part, "-o", model, "--label-column", "label").exit_code == 0
    before = model.read_bytes()
    monkeypatch.setattr(container, "MAX_HEADER", len(before) + 10_000)
    r = cli_run("learn", "-m", model, more)
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr.startswith(f"Error: cannot write {model}: its header would take ")
    assert r.stderr.endswith("nothing was written\n") and r.stderr.count("\n") == 1
    assert model.read_bytes() == before
    load_table_model(model)


def test_a_table_of_more_labels_than_a_model_holds_is_refused(tmp_path):
    """A categorical column's counts are labels times categories: 6,000 rows with a label
    and a category each of their own made a model of 108 MB in 750 MB of memory, and
    20,000 rows some 8 GB. Labels are capped as for messages, before any counting."""
    data = tmp_path / "ids.csv"
    data.write_text("c,label\n" + "".join(f"c{i},L{i}\n" for i in range(1_001)))
    r = cli_run("train", data, "-o", tmp_path / "m.nbm", "--label-column", "label")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr == (
        "Error: found 1,001 labels in column 'label'; a model holds at most 1,000 "
        "(is the label column another? name it with --label-column)\n"
    )
    assert not (tmp_path / "m.nbm").exists()


def test_learn_of_a_table_takes_each_rows_label_column(tmp_path):
    X, y = random_gaussian(n=100)
    whole, part, extra = tmp_path / "whole.csv", tmp_path / "part.csv", tmp_path / "extra.csv"
    write_csv(whole, X, y)
    write_csv(part, X[:80], y[:80])
    write_csv(extra, X[80:], y[80:])
    model, everything = tmp_path / "m.nbm", tmp_path / "all.nbm"
    for data, out in ((part, model), (whole, everything)):
        assert cli_run("train", data, "-o", out, "--column", "*=gaussian").exit_code == 0
    r = cli_run("learn", "-m", model, extra)  # no --label: each row under its own
    assert r.exit_code == 0, r.stderr
    assert r.stderr == "learned 20 row(s)\n"
    learned, trained = load_table_model(model), load_table_model(everything)
    assert np.array_equal(learned.class_count, trained.class_count)
    rows = read_table(str(whole))
    assert np.array_equal(learned.joint_log_likelihood(rows), trained.joint_log_likelihood(rows))


def test_learn_of_messages_still_needs_a_label(sample_model):
    r = cli_run("learn", "-m", sample_model, SAMPLE / "new" / "001.eml")
    assert r.exit_code == 2
    assert "Missing option '-l' / '--label'" in r.stderr


def test_merge_equals_training_on_all_rows(tmp_path):
    table = mixed_table()
    settings = TableSettings()
    whole = fit_table(table, settings)
    a = fit_table(subset(table, range(0, 60)), settings)
    b = fit_table(subset(table, range(60, 120)), settings)
    for path, model in (("a.nbm", a), ("b.nbm", b)):
        save_table_model(model, tmp_path / path)
    r = cli_run("merge", tmp_path / "a.nbm", tmp_path / "b.nbm", "-o", tmp_path / "all.nbm")
    assert r.exit_code == 0, r.output
    merged = load_table_model(tmp_path / "all.nbm")
    assert np.array_equal(merged.joint_log_likelihood(table), whole.joint_log_likelihood(table))
    for x, y in zip(merged.columns, whole.columns):
        if x.kind == "gaussian":
            assert (x.stats.n, x.stats.s1, x.stats.s2) == (y.stats.n, y.stats.s1, y.stats.s2)


def test_a_table_model_on_stdin_says_what_it_needs(tmp_path):
    from tests.helpers import nbspam_process

    model = tmp_path / "m.nbm"
    save_table_model(fit_table(mixed_table(), TableSettings()), model)
    done = nbspam_process("predict", "-m", model, stdin=b"hello")
    assert done.returncode == 1
    assert (
        done.stderr.decode().strip()
        == f"Error: {model} is a table model: give the tables to score as PATH"
    )


# --------------------------------------------------------------------------------------------
# Values no Gaussian can hold, and classes without values: one line, or finite scores
# --------------------------------------------------------------------------------------------


def two_class_csv(path, header, rows):
    path.write_text(",".join(header) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def test_a_value_beyond_the_gaussian_range_is_refused_in_one_line(tmp_path):
    rows = [[f"{i}.5", "ab"[i % 2]] for i in range(20)]
    rows[3][0] = "1e200"
    data = two_class_csv(tmp_path / "big.csv", ["x", "label"], rows)
    r = cli_run("train", data, "-o", tmp_path / "m.nbm", "--column", "x=gaussian")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: {data}#5, column 'x': 1e200 is beyond ±1e150, the range of a gaussian column; "
        "rescale the column (its logarithm, say) or give --column x=binned\n"
    )
    assert not (tmp_path / "m.nbm").exists()


def test_a_huge_value_at_predict_gives_finite_scores_and_valid_json(tmp_path):
    rows = [[i * (1 + 2 * (i % 2)), "ab"[i % 2]] for i in range(20)]  # b the wider
    data = two_class_csv(tmp_path / "t.csv", ["x", "label"], rows)
    model = tmp_path / "m.nbm"
    assert cli_run("train", data, "-o", model, "--column", "x=gaussian").exit_code == 0
    new = two_class_csv(tmp_path / "new.csv", ["x"], [["1e160"], ["-1e300"], ["3"]])
    r = cli_run("predict", "-m", model, new, "-f", "jsonl")
    assert r.exit_code == 0 and "nan" not in r.stdout.lower() and "inf" not in r.stdout.lower()
    rows = [
        json.loads(line, parse_constant=lambda c: pytest.fail(c)) for line in r.stdout.splitlines()
    ]
    assert len(rows) == 3 and all(math.isfinite(row["log_odds"]) for row in rows)
    # 1e160 is taken as 1e150, where b, of the larger variance, is the likelier
    loaded = load_table_model(model)
    mu, var = loaded.gaussian_params()["x"]
    expected = -0.5 * np.log(2 * np.pi * var) - 0.5 * (1e150 - mu) ** 2 / var
    assert rows[0]["log_odds"] == pytest.approx(expected[1] - expected[0], rel=1e-12)
    assert rows[0]["label"] == "b"


def test_a_constant_column_beside_a_categorical_one_trains_and_scores(tmp_path):
    # the only Gaussian column is constant: the variance floor of scikit-learn is 0
    rows = [["3.5", "ab"[i % 2], "ab"[i % 2]] for i in range(20)]
    data = two_class_csv(tmp_path / "c.csv", ["c", "kind", "label"], rows)
    model = tmp_path / "m.nbm"
    r = cli_run("train", data, "-o", model, "--column", "c=gaussian")
    assert r.exit_code == 0, r.stderr
    r = cli_run("predict", "-m", model, data, "-f", "jsonl")
    assert r.exit_code == 0
    odds = [json.loads(line)["log_odds"] for line in r.stdout.splitlines()]
    # the constant column adds the same to both classes: the log-odds are the category's,
    # log((10 + 1) / (10 + 2)) - log((0 + 1) / (10 + 2)) = log 11, and the prior is even
    assert odds[0] == pytest.approx(-math.log(11), rel=1e-12)
    assert odds[1] == pytest.approx(math.log(11), rel=1e-12)


def test_tiny_values_whose_variance_underflows_score_finitely():
    rows = [[repr(1e-300 * (1 + i % 3)), "ab"[i % 2]] for i in range(12)]
    table = Table(["x", "label"], rows, [f"t#{i}" for i in range(12)])
    model = fit_table(table, TableSettings(kinds={"x": "gaussian"}))
    jll = model.joint_log_likelihood(table)
    assert np.isfinite(jll).all()


def test_a_class_without_values_takes_the_columns_mean_and_variance(tmp_path):
    # z is empty in every row of class a: for a it has the mean and variance of all its rows
    rows = [["1", "", "a"], ["2", "", "a"], ["3", "2", "b"], ["5", "4", "b"], ["4", "6", "b"]]
    table = Table(["x", "z", "label"], rows, [f"t#{i}" for i in range(5)])
    model = fit_table(table, TableSettings())
    mu, var = model.gaussian_params()["z"]
    eps = 1e-9 * (8 / 3)  # the largest variance of a column: z's, 8/3
    assert mu.tolist() == [4.0, 4.0]
    assert var == pytest.approx([8 / 3 + eps, 8 / 3 + eps], rel=1e-15)
    assert np.isfinite(model.joint_log_likelihood(table)).all()
    data = two_class_csv(tmp_path / "e.csv", ["x", "z", "label"], rows * 4)
    r = cli_run("train", data, "-o", tmp_path / "m.nbm")
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize(
    "sums",
    [
        {"s1": [hex(1 << 5000), "0x0"]},  # a mean far beyond the range
        {"s2": ["0x0", "0x0"]},  # a variance below 0 (n S2 < S1^2)
        {"n": [0, 0]},  # sums without values
    ],
    ids=["huge mean", "negative variance", "sums without values"],
)
def test_a_table_model_with_impossible_gaussian_sums_is_refused(sums, tmp_path):
    from nbspam.store import container

    rows = [[repr(float(i)), "ab"[i % 2]] for i in range(1, 9)]
    table = Table(["x", "label"], rows, [f"t#{i}" for i in range(8)])
    header = to_header(fit_table(table, TableSettings(kinds={"x": "gaussian"})))
    header["table"]["columns"][0].update(sums)
    path = tmp_path / "bad.nbm"
    container.write(path, header, {})
    new = tmp_path / "new.csv"
    new.write_text("x\n1\n")
    r = cli_run("predict", "-m", path, new)
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: {path} is not a valid nbspam table model: "
        "ValueError(\"column 'x': sums that no values within ±1e150 give\")\n"
    )


# --------------------------------------------------------------------------------------------
# Reading: names each once, JSON no reader can hold, and time linear in the columns
# --------------------------------------------------------------------------------------------


def test_a_column_name_given_twice_is_refused(tmp_path):
    data = two_class_csv(tmp_path / "d.csv", ["x", "y", " x", "label"], [[1, 2, 3, "a"]] * 4)
    r = cli_run("train", data, "-o", tmp_path / "m.nbm")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: {data}: columns 1 and 3 are both named 'x'; each column needs a name of its own\n"
    )


@pytest.mark.parametrize(
    "line, error",
    [
        (
            '{"x": ' + "[" * 100_000 + "]" * 100_000 + ', "label": "b"}',
            "not valid JSON: nested too deep",
        ),
        ('{"x": ' + "9" * 5000 + ', "label": "b"}', "a number of too many digits"),
    ],
    ids=["nested 100,000 deep", "an integer of 5,000 digits"],
)
def test_json_lines_no_reader_can_hold_are_one_error_line(line, error, tmp_path):
    data = tmp_path / "t.jsonl"
    data.write_text('{"x": 1, "label": "a"}\n' + line + "\n")
    r = cli_run("train", data, "-o", tmp_path / "m.nbm", "--label-column", "label")
    assert (r.exit_code, r.stdout, r.stderr) == (1, "", f"Error: {data}#2: {error}\n")


def test_a_table_of_100000_columns_trains_in_linear_time(tmp_path):
    from tests.helpers import nbspam_process

    rng = np.random.default_rng(5)
    n, d = 40, 100_000
    X = rng.integers(0, 2, (n, d))  # Bernoulli: its model fits a model file's header
    data = tmp_path / "wide.csv"
    with open(data, "w") as f:
        f.write(",".join([*(f"c{j}" for j in range(d)), "label"]) + "\n")
        for i in range(n):
            f.write(",".join(map(str, X[i].tolist())) + "," + "ab"[i % 2] + "\n")
    # one --column per column, and a pattern: each name is looked up, not matched against all
    given = [a for j in range(0, d, 2) for a in ("--column", f"c{j}=bernoulli")]
    done = nbspam_process(
        "train",
        data,
        "-o",
        tmp_path / "m.nbm",
        "--column",
        "c1*=categorical",
        "--no-calibrate",
        "--event-model",
        "multinomial",
        *given,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # c1, c11, c13, ... c19999: the odd names that start with c1 (1 + 5 + 50 + 500 + 5000)
    assert b"columns bernoulli: 94444: c0, c2, c3, c4, c5, c6, ..." in done.stderr
    assert b"columns categorical: 5556: c1, c11, c13, c15, c17, c19, ..." in done.stderr
    assert len(load_table_model(tmp_path / "m.nbm").columns) == d


# --------------------------------------------------------------------------------------------
# Notes: a sound model that may not be the one meant says so in one line
# --------------------------------------------------------------------------------------------


def train_notes(tmp_path, rows, header=("x", "label"), *options):
    data = two_class_csv(tmp_path / "t.csv", header, rows)
    r = cli_run("train", data, "-o", tmp_path / "m.nbm", "--label-column", "label", *options)
    assert r.exit_code == 0, r.stderr
    return data, [line for line in r.stderr.splitlines() if line.startswith("note: ")]


def test_a_column_of_numbers_with_a_few_words_is_noted(tmp_path):
    rows = [[f"{i}.25", "ab"[i % 2]] for i in range(100)]
    for i in (1, 5, 9):
        rows[i][0] = "n/a"
    data, notes = train_notes(tmp_path, rows)
    assert notes == [
        "note: column 'x' is modelled as categorical, each number a category: 3 of its 100 "
        f"values are not numbers (the first: {data}#3, 'n/a'); fix them and give "
        "--column x=gaussian, or give --column x=categorical"
    ]
    _, notes = train_notes(tmp_path, rows, ("x", "label"), "--column", "x=categorical")
    assert notes == []


def test_rows_without_a_label_are_noted(tmp_path):
    rows = [[f"{i}.5", "ab"[i % 2]] for i in range(20)]
    rows[6][1] = ""
    data, notes = train_notes(tmp_path, rows)
    assert notes == [f"note: 1 row(s) with an empty 'label' were left out (the first: {data}#8)"]


def test_a_label_of_too_few_rows_is_noted(tmp_path):
    rows = [[f"{i}.5", "b" if i < 2 else "a"] for i in range(20)]
    _, notes = train_notes(tmp_path, rows, ("x", "label"), "--event-model", "multinomial")
    assert notes == [
        "note: label 'b' has 2 row(s), too few for the internal 5-fold cross-validation: "
        "no cutoffs or calibration were fitted (the Bayes decision)"
    ]


@pytest.mark.parametrize("binning", ["uniform", "quantile"])
def test_bins_of_values_near_the_largest_float_are_finite(binning, tmp_path):
    x = np.array([-1.7e308, 1.7e308, -1.7e308, 1.7e308])  # quartiles between the two
    edges, _ = bin_edges(x, 4, binning)
    assert edges and all(math.isfinite(e) for e in edges)
    rows = [[repr(v), "ab"[i % 2]] for i, v in enumerate(x.tolist() * 4)]
    data = two_class_csv(tmp_path / "h.csv", ["x", "label"], rows)
    model = tmp_path / "m.nbm"
    r = cli_run("train", data, "-o", model, "--bins", "4", "--binning", binning)
    assert r.exit_code == 0, r.stderr
    assert cli_run("predict", "-m", model, data).exit_code == 0


def test_a_table_weighs_its_errors_alike_unless_told():
    """A target false-positive rate and 15 per false positive are mail settings: a table's
    default rule is the cutoffs of least cost, 1 for either error and 1/3 for an unsure
    verdict; the settings that are given are used."""
    from nbspam.core.settings import build_settings
    from nbspam.fit.table_training import table_rule

    X, y = random_gaussian(seed=1, n=400)
    table = table_of(X, y)

    def cutoffs(**given):
        cfg = table_rule(build_settings(given))
        return fit_with_rule(table, TableSettings(), auto=False, cfg=cfg).cutoffs

    default = cutoffs()
    assert default == cutoffs(target_fpr=None, cost_fp=1.0, cost_unsure=1 / 3)
    assert default != cutoffs(target_fpr=None, cost_fp=15.0, cost_unsure=0.2)
    assert cutoffs(cost_fp=15.0) == cutoffs(target_fpr=None, cost_fp=15.0, cost_unsure=1 / 3)
    given = TrainConfig(target_fpr=0.001, cost_fp=1.0, cost_unsure=1 / 3)
    assert (
        cutoffs(target_fpr=0.001)
        == fit_with_rule(table, TableSettings(), auto=False, cfg=given).cutoffs
    )


def test_auto_chooses_by_log_loss_for_any_number_of_labels():
    rng = np.random.default_rng(5)
    y = rng.choice(["a", "b", "c"], 300)
    shift = {"a": 0.0, "b": 2.0, "c": 4.0}
    X = np.array([[rng.exponential(1 + shift[v]), rng.normal(shift[v])] for v in y])
    table = table_of(X, y)
    model, chosen = auto_fit(table, TableSettings())
    assert chosen["criterion"] == "pooled out-of-fold log-loss"
    losses = chosen["log_loss"]
    assert len(losses) == 3 and chosen["chose"] == min(losses, key=losses.get)
    assert all(0 < loss < math.log(3) for loss in losses.values())  # better than a guess
    assert "roc_auc" not in chosen  # one log-odds is for two labels
    assert model.labels == ("a", "b", "c")


def test_a_table_of_200000_rows_trains_with_its_rule_in_seconds():
    # cell by cell (a big-integer square per value, every fold refitted from the text) this
    # took minutes; in bulk, a few seconds: the bound only proves it is no longer cell by cell
    import time

    rng = np.random.default_rng(11)
    n = 200_000
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, 5)) + y[:, None]
    colour = np.array(["red", "green", "blue"])[rng.integers(0, 3, n)]
    rows = [[*map(repr, x), c, "ab"[v]] for x, c, v in zip(X.tolist(), colour.tolist(), y)]
    names = [*(f"x{j}" for j in range(5)), "colour", "label"]
    table = Table(names, rows, [f"t#{i + 2}" for i in range(n)])
    started = time.perf_counter()
    model = fit_with_rule(
        table, TableSettings(kinds={"x*": "gaussian"}), auto=True, cfg=TrainConfig()
    )
    assert time.perf_counter() - started < 25
    assert model.class_count == np.bincount(y).tolist() and model.calibration is not None


def test_a_settings_file_sets_a_tables_alpha_and_positive_as_the_options_do(tmp_path):
    """`-c` gives a table what the options give (alpha, positive), under the options; it gave
    none: the table was trained with alpha 1 and its positive label by default."""
    rng = np.random.default_rng(5)
    data = tmp_path / "t.csv"
    with open(data, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["colour", "flag", "label"])
        for i in range(60):
            spam = i % 2 == 1
            flag = int(rng.random() < (0.7 if spam else 0.2))
            w.writerow([rng.choice(["red", "green", "blue"]), flag, "spam" if spam else "ham"])
    settings = tmp_path / "s.yaml"
    settings.write_text("alpha: 5\npositive: ham\n")
    models = {}
    for name, options in {
        "file": ["-c", settings],
        "options": ["--alpha", "5", "--positive", "ham"],
        "both": ["-c", settings, "--alpha", "2"],
        "default": [],
    }.items():
        r = cli_run("train", data, "-o", tmp_path / f"{name}.nbm", *options)
        assert r.exit_code == 0, r.stderr
        models[name] = load_table_model(tmp_path / f"{name}.nbm")
    rows = read_table(str(data))
    file, options, both, default = models.values()
    assert (file.alpha, file.positive) == (options.alpha, options.positive) == (5.0, "ham")
    assert (both.alpha, both.positive) == (2.0, "ham")
    assert (default.alpha, default.positive) == (1.0, "spam")
    scores = {name: m.joint_log_likelihood(rows) for name, m in models.items()}
    assert np.array_equal(scores["file"], scores["options"])
    assert not np.array_equal(scores["file"], scores["default"])
    assert not np.array_equal(scores["file"], scores["both"])
    import nbspam  # the library alike, with alpha as the file and the options give it

    for given in ({"config": settings}, {"alpha": 5, "positive": "ham"}, {"alpha": "5"}):
        model = nbspam.train(data, **given).model
        assert type(model.alpha) is float and model.alpha == 5.0
        assert np.array_equal(model.joint_log_likelihood(rows), scores["file"])
    reports = [
        json.loads(cli_run("evaluate", data, *options, "-f", "json").stdout)
        for options in (["-c", settings], ["--alpha", "5", "--positive", "ham"], [])
    ]
    for report in reports:
        report.pop("seconds")
    assert reports[0] == reports[1] != reports[2]


def test_bins_past_the_most_are_a_usage_error(tmp_path):
    """--bins 10**20 was an internal error (numpy's arange), 10**9 ran out of memory."""
    X, y = random_gaussian(n=40)
    data = tmp_path / "g.csv"
    write_csv(data, X, y)
    for command in (["train", data, "-o", tmp_path / "m.nbm"], ["evaluate", data]):
        r = cli_run(*command, "--bins", 10**20)
        assert r.exit_code == 2, r.stderr
        assert r.stderr.endswith(
            f"Error: Invalid value for '--bins': {10**20} is not in the range 1<=x<=1000.\n"
        )


def test_the_folds_setting_is_a_tables_internal_cross_validations(tmp_path):
    """`folds` in the -c file (or to nbspam.train) sets the folds of a table's internal
    cross-validation, as it does for messages; a table used 5 whatever it said."""
    rng = np.random.default_rng(7)
    y = np.array([0] * 30 + [1] * 4)  # 4 spam rows: too few for 5 folds, enough for 3
    write_csv(tmp_path / "t.csv", rng.normal(size=(34, 2)) + 2 * y[:, None], y)
    (tmp_path / "s.yaml").write_text("folds: 3\n")
    r = cli_run("train", tmp_path / "t.csv", "-o", tmp_path / "d.nbm")
    assert r.exit_code == 0, r.stderr
    note = "label 'spam' has 4 row(s), too few for the internal 5-fold cross-validation"
    assert note in r.stderr
    default = load_table_model(tmp_path / "d.nbm")
    assert default.cutoffs is None and "auto" not in default.info
    r = cli_run("train", tmp_path / "t.csv", "-o", tmp_path / "f.nbm", "-c", tmp_path / "s.yaml")
    assert r.exit_code == 0, r.stderr
    assert "too few" not in r.stderr
    assert "(internal 3-fold log-loss: " in r.stderr
    three = load_table_model(tmp_path / "f.nbm")
    assert three.info["auto"]["folds"] == 3 and three.cutoffs is not None
    import nbspam

    model = nbspam.train(tmp_path / "t.csv", folds=3).model
    assert (model.info["auto"], model.cutoffs) == (three.info["auto"], three.cutoffs)
