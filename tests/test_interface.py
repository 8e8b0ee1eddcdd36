"""The one model interface: a model of messages and a table model are used alike, and
`store.kinds` is the one place that tells them apart."""

from __future__ import annotations

import io

import numpy as np
import pytest

import nbspam
from nbspam.models.interface import NaiveBayesModel
from nbspam.models.table_model import TableSettings, fit_table
from nbspam.store import kinds
from nbspam.store.tablefile import save_table_model, to_header
from tests.helpers import SAMPLE, cli_run
from tests.test_tables import mixed_table


@pytest.fixture
def table_model_path(tmp_path):
    path = tmp_path / "t.nbm"
    save_table_model(fit_table(mixed_table(), TableSettings()), path)
    return path


def test_both_kinds_implement_the_interface_and_load_reads_either(sample_model, table_model_path):
    messages, table = kinds.load(sample_model), kinds.load(table_model_path)
    assert isinstance(messages, NaiveBayesModel) and isinstance(table, NaiveBayesModel)
    assert (messages.kind, table.kind) == ("messages", "table")
    assert kinds.kind_of(sample_model) is kinds.MESSAGES
    assert kinds.kind_of(table_model_path) is kinds.TABLES
    for model in (messages, table):
        assert model.labels == ("ham", "spam") and model.positive == "spam"
        assert model.describe()["labels"].keys() == {"ham", "spam"}


def test_one_classifier_serves_both_kinds(sample_model, table_model_path, tmp_path):
    assert nbspam.TableClassifier is nbspam.Classifier
    table = nbspam.load(table_model_path)
    assert type(table) is nbspam.Classifier and table.kind == "table"
    merged = table.merge(nbspam.load(table_model_path))
    assert sum(merged.describe()["labels"].values()) == 2 * 120
    assert kinds.restore(io.BytesIO(table.dump())).labels == table.labels
    messages = nbspam.load(sample_model)
    assert messages.kind == "messages" and messages.dump().startswith(b"# nbspam dump 1\n")
    table.save(tmp_path / "again.nbm")
    assert to_header(kinds.load(tmp_path / "again.nbm")) == to_header(table.model)


def test_a_table_dump_restores_the_same_model(table_model_path):
    model = kinds.load(table_model_path)
    again = kinds.restore(io.BytesIO(b"".join(kinds.dump(model))))
    assert to_header(again) == to_header(model)


@pytest.mark.parametrize(
    "args, line",
    [
        (("--test", "DATA"), "a typed table is evaluated by cross-validation only (--folds)"),
        (
            ("--chronological", "0.2"),
            "a typed table is evaluated by cross-validation only (--folds)",
        ),
        (("--online",), "a typed table is evaluated by cross-validation only (--folds)"),
    ],
)
def test_what_a_typed_table_cannot_be_evaluated_by_is_one_line(tmp_path, args, line):
    from tests.test_tables import write_csv

    data = tmp_path / "g.csv"

    rng = np.random.default_rng(1)
    write_csv(data, rng.normal(size=(40, 2)), np.arange(40) % 2)
    args = tuple(str(data) if a == "DATA" else a for a in args)
    r = cli_run("evaluate", data, *args)
    assert (r.exit_code, r.stderr) == (1, f"Error: {line}\n")


def test_a_user_layer_of_a_table_model_is_one_line(table_model_path, tmp_path):
    template = str(tmp_path / "users" / "%u.nbj")
    (tmp_path / "users").mkdir()
    refusals = {
        "learn": "--user is for models of messages, not of typed tables",
        "forget": "--user is for models of messages, not of typed tables",
        "predict": "--user scores messages, not rows of a typed table",
    }
    for command, refusal in refusals.items():
        r = cli_run(
            command,
            "-m",
            table_model_path,
            "--user",
            "joe",
            "--user-models",
            template,
            SAMPLE / "new" / "001.eml",
        )
        assert (r.exit_code, r.stderr) == (1, f"Error: {refusal}\n")


def test_a_table_model_takes_prior_as_a_model_of_messages_does(tmp_path):
    """--prior uniform moves every row's log-odds by exactly the log of the fitted prior
    ratio (30 spam to 10 ham rows: log 3), and is kept in the model file."""
    from tests.test_tables import write_csv

    rng = np.random.default_rng(5)
    data = tmp_path / "u.csv"
    write_csv(data, rng.normal(size=(40, 2)), np.arange(40) % 4 != 0)
    fitted, uniform = tmp_path / "fitted.nbm", tmp_path / "uniform.nbm"
    common = ("--column", "*=gaussian", "--no-calibrate")
    assert cli_run("train", data, "-o", fitted, *common).exit_code == 0
    r = cli_run("train", data, "-o", uniform, *common, "--prior", "uniform")
    assert r.exit_code == 0, r.stderr
    a = kinds.load(fitted).predict(nbspam.api._tables(str(data)))
    b = kinds.load(uniform).predict(nbspam.api._tables(str(data)))
    shift = [x.log_odds - y.log_odds for x, y in zip(a, b)]
    assert shift == pytest.approx([np.log(3)] * 40, abs=1e-9)
    r = cli_run("info", "-m", uniform)
    assert "settings:   alpha 1 (categorical columns), prior uniform" in r.stdout
    r = cli_run("train", data, "-o", tmp_path / "w.nbm", *common, "--prior", "spam=1,junk=2")
    assert (r.exit_code, r.stderr) == (
        1,
        "Error: the prior names labels ['junk', 'spam'] but the model has labels ['ham', 'spam']\n",
    )
    weighted = tmp_path / "weighted.nbm"
    assert cli_run("train", data, "-o", weighted, *common, "--prior", "spam=1,ham=3").exit_code == 0
    assert kinds.load(weighted).prior == (("ham", 3.0), ("spam", 1.0))
    assert kinds.load(weighted).log_prior().tolist() == pytest.approx([np.log(0.75), np.log(0.25)])
