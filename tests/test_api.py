"""The Python API (`nbspam.train`, `load`, `evaluate` and a model's methods): the same
models, predictions, explanations and reports as the commands, and the same errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import nbspam
from nbspam.store.modelfile import load_model
from tests.helpers import ENV, SAMPLE, assert_same_model, cli_run

SPAM = b"Subject: cheap meds\n\nBuy cheap meds now, click here, free money."
HAM = b"Subject: lunch\n\nShall we meet for lunch on Thursday with the team?"


def cli_model(tmp_path, *args):
    path = tmp_path / "cli.nbm"
    result = cli_run("train", *args, "-o", path)
    assert result.exit_code == 0, result.stderr
    return load_model(path)


def test_import_nbspam_imports_no_numpy():
    code = "import sys, nbspam; print('numpy' in sys.modules, 'nbspam.api' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], env=ENV, capture_output=True, text=True, check=True
    )
    assert out.stdout == "False False\n"


def test_the_api_is_exported_lazily():
    assert {"train", "load", "evaluate", "NbspamError", "Prediction"} <= set(dir(nbspam))
    assert nbspam.NbspamError is __import__("nbspam.errors").errors.NbspamError
    from nbspam import ConfigError, train

    assert callable(train) and issubclass(ConfigError, nbspam.NbspamError)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        nbspam.nothing  # noqa: B018


def test_nbspam_evaluate_stays_the_function_after_the_commands_ran(tmp_path):
    cli_run("evaluate", SAMPLE / "train", "--folds", "2", "--event-model", "bernoulli")
    assert callable(nbspam.evaluate)


@pytest.mark.parametrize(
    "options, settings",
    [
        (
            ["--event-model", "multinomial", "--alpha", "0.5", "--min-count", "2"],
            {"event_model": "multinomial", "alpha": 0.5, "min_count": 2},
        ),
        # YAML defaults, an option over them, the stop words resolved to their words
        (
            ["-c", "configs/bernoulli.yaml", "--alpha", "0.25", "--cutoffs=-3,4"],
            {"config": "configs/bernoulli.yaml", "alpha": 0.25, "cutoffs": "-3,4"},
        ),
        ([], {}),  # auto: the choice and the decision rule by internal cross-validation
    ],
)
def test_train_gives_the_model_the_command_writes(tmp_path, monkeypatch, options, settings):
    monkeypatch.chdir(SAMPLE.parent)
    expected = cli_model(tmp_path, "sample_data/train", *options)
    model = nbspam.train("sample_data/train", **settings)
    assert isinstance(model, nbspam.Classifier)
    assert_same_model(model.model, expected)
    assert model.model.cutoffs == expected.cutoffs
    assert model.model.calibration == expected.calibration
    assert model.model.info.get("auto") == expected.info.get("auto")


def test_pairs_train_as_the_rows_of_a_table(tmp_path):
    texts = [("buy cheap meds now", "spam"), ("lunch on thursday?", "ham")] * 3
    texts += [("free money click here", "spam"), ("the team meets at noon", "ham")]
    table = tmp_path / "t.tsv"
    table.write_text("".join(f"{label}\t{text}\n" for text, label in texts))
    expected = cli_model(tmp_path, table, "--event-model", "bernoulli", "--no-calibrate")
    model = nbspam.train(texts, event_model="bernoulli", calibrate=False)
    assert_same_model(model.model, expected)
    mixed = nbspam.train([f"spam={SAMPLE}/train/spam", *texts], event_model="bernoulli")
    assert set(mixed.labels) == {"ham", "spam"} and mixed.model.class_count.sum() > len(texts)


def test_training_data_given_as_a_generator_is_read_once():
    """A generator can be iterated once: training must not list the data a second time."""
    texts = [("buy cheap meds now", "spam"), ("lunch on thursday?", "ham")] * 3
    expected = nbspam.train(texts, event_model="bernoulli", calibrate=False)
    model = nbspam.train((pair for pair in texts), event_model="bernoulli", calibrate=False)
    assert_same_model(model.model, expected.model)


def test_predict_gives_what_the_command_prints(tmp_path, sample_model_path):
    model = nbspam.load(sample_model_path)
    result = cli_run("predict", "-m", sample_model_path, "-f", "jsonl", SAMPLE / "new")
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    got = model.predict(SAMPLE / "new")
    assert [p.id for p in got] == [line["path"] for line in printed]
    assert [p.log_odds for p in got] == [line["log_odds"] for line in printed]
    assert [p.verdict for p in got] == [line["verdict"] for line in printed]
    assert [p.calibrated for p in got] == [line["calibrated"] for line in printed]
    # bytes are a raw message, as a file holds it; text is text, as a table row holds it
    data = (SAMPLE / "new" / "001.eml").read_bytes()
    as_bytes, as_text = model.predict([data, data.decode()])
    assert (as_bytes.id, as_text.id) == ("0", "1")
    assert as_bytes.log_odds == printed[0]["log_odds"]
    assert isinstance(as_bytes, nbspam.Prediction)
    row = tmp_path / "row.tsv"
    row.write_text("ham\tLunch on Thursday?\n")
    from_table = cli_run("predict", "-m", sample_model_path, "-f", "jsonl", row).stdout
    assert model.predict("Lunch on Thursday?")[0].log_odds == json.loads(from_table)["log_odds"]


def test_explain_splits_the_log_odds_as_the_command_does(sample_model_path):
    model = nbspam.load(sample_model_path)
    path = SAMPLE / "new" / "002.eml"
    result = cli_run("explain", "-m", sample_model_path, "-f", "jsonl", path)
    printed = json.loads(result.stdout.splitlines()[0])
    e = model.explain(path)
    assert e.log_odds == printed["log_odds"] == model.predict(path)[0].log_odds
    assert e.bias + sum(c.contribution for c in e.contributions) == pytest.approx(e.log_odds)
    top = model.explain(top=3)
    assert [group.toward for group in top] == ["spam", "ham"]
    assert all(len(group.terms) == 3 for group in top)


def test_learn_and_forget_are_exact(tmp_path):
    model = nbspam.train(f"{SAMPLE}/train", event_model="multinomial", calibrate=False)
    before = model.model
    change = model.learn([SPAM, HAM], "spam")
    assert (change.learned, change.relabelled, change.unchanged) == (2, 0, 0)
    moved = model.learn(HAM, "ham")
    assert (moved.learned, moved.relabelled) == (0, 1)
    expected = nbspam.train(
        [f"{SAMPLE}/train", (SPAM, "spam"), (HAM, "ham")],
        event_model="multinomial",
        calibrate=False,
    )
    assert_same_model(model.model, expected.model)
    gone = model.forget([SPAM, HAM, b"Subject: never learned\n\nhello"])
    assert gone.forgotten == 2 and gone.unknown == ["2"]
    assert_same_model(model.model, before)


def test_learn_refuses_a_new_label_unless_asked(sample_model_path):
    model = nbspam.load(sample_model_path)
    with pytest.raises(nbspam.NbspamError) as error:
        model.learn(SPAM, "phishing")
    assert str(error.value) == (
        "the model has no label 'phishing' (its labels: ham, spam); give new_label=True to add one"
    )
    model.learn(SPAM, "phishing", new_label=True)
    assert model.labels == ("ham", "phishing", "spam")


def test_save_and_load(tmp_path, sample_model_path):
    model = nbspam.load(sample_model_path)
    model.save(tmp_path / "copy.nbm")
    again = nbspam.load(str(tmp_path / "copy.nbm"))
    assert_same_model(again.model, model.model)
    assert again.predict(SPAM)[0].log_odds == model.predict(SPAM)[0].log_odds


def test_errors_are_the_ones_the_command_prints(tmp_path):
    missing = tmp_path / "missing.nbm"
    result = cli_run("predict", "-m", missing, SAMPLE / "new")
    with pytest.raises(nbspam.ModelFileError) as error:
        nbspam.load(missing)
    assert result.stderr == f"Error: {error.value}\n" and result.exit_code == 1
    result = cli_run("train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--alpha", "-1")
    with pytest.raises(nbspam.ConfigError) as error:
        nbspam.train(SAMPLE / "train", alpha=-1)
    assert result.stderr == f"Error: {error.value}\n" and result.exit_code == 2
    with pytest.raises(nbspam.TrainingError, match="at least two labels"):
        nbspam.train([("one text", "spam")])
    with pytest.raises(nbspam.InputError, match="item 0 of the training data"):
        nbspam.train([42])


@pytest.mark.parametrize("seed", [-1, "7", 2.5, None, True])
def test_evaluate_refuses_a_seed_numpy_cannot_take(seed):
    with pytest.raises(nbspam.ConfigError, match="--seed must be a whole number >= 0"):
        nbspam.evaluate(f"{SAMPLE}/train", folds=2, seed=seed)
    with pytest.raises(nbspam.ConfigError, match="--seed must be a whole number >= 0"):
        nbspam.evaluate(f"{SAMPLE}/train", online=True, order="shuffle", seed=seed)


@pytest.mark.parametrize("jobs", [0, -1, "2", 2.0, 10**6])
def test_jobs_outside_one_to_the_most_workers_are_refused(jobs):
    """Not silently one process, nor a pool forking a million workers before any work."""
    model = nbspam.train([("cheap meds", "spam"), ("lunch at noon", "ham")], calibrate=False)
    with pytest.raises(nbspam.ConfigError, match="--jobs must be a whole number from 1 to"):
        model.predict([], jobs=jobs)
    with pytest.raises(nbspam.ConfigError, match="--jobs must be a whole number from 1 to"):
        nbspam.train([], jobs=jobs)


def test_a_skipped_input_is_a_warning_with_the_line_the_command_prints(tmp_path):
    model = nbspam.train(f"{SAMPLE}/train", event_model="bernoulli", calibrate=False)
    (tmp_path / "binary").write_bytes(b"\0\1\2 not a message")
    (tmp_path / "empty").mkdir()
    with pytest.warns(nbspam.SkippedInputWarning) as caught:
        got = model.predict([tmp_path / "binary", tmp_path / "empty", HAM])
    assert [str(w.message) for w in caught] == [
        f"{tmp_path / 'binary'}: binary data, not a message",
        f"{tmp_path / 'empty'}: no messages found",
    ]
    assert [p.id for p in got] == ["2"]


def test_evaluate_gives_the_report_the_command_prints(monkeypatch):
    monkeypatch.chdir(SAMPLE.parent)
    args = ["sample_data/train", "--folds", "3", "--seed", "7", "--event-model", "bernoulli"]
    printed = json.loads(cli_run("evaluate", *args, "-f", "json").stdout)
    report = nbspam.evaluate("sample_data/train", folds=3, seed=7, event_model="bernoulli")
    for got in (printed, report):
        got.pop("seconds")
    assert json.loads(json.dumps(report)) == printed
    held_out = nbspam.evaluate(
        "sample_data/train", test="sample_data/train", event_model="bernoulli"
    )
    assert held_out["protocol"]["method"] == "holdout" and held_out["accuracy"] == 1.0


def test_a_typed_table_trains_a_table_classifier(tmp_path):
    rng = np.random.default_rng(0)
    rows = ["x,colour,label"]
    for i in range(80):
        spam = i % 2 == 1
        rows.append(
            f"{rng.normal(3 if spam else 0):.3f},{'red' if spam else 'blue'},{'spam' if spam else 'ham'}"
        )
    table = tmp_path / "t.csv"
    table.write_text("\n".join(rows) + "\n")
    cli = cli_run("train", table, "-o", tmp_path / "t.nbm", "--no-calibrate")
    assert cli.exit_code == 0, cli.stderr
    model = nbspam.train(table, calibrate=False)
    assert isinstance(model, nbspam.TableClassifier)
    loaded = nbspam.load(tmp_path / "t.nbm")
    assert isinstance(loaded, nbspam.TableClassifier)
    printed = cli_run("predict", "-m", tmp_path / "t.nbm", "-f", "jsonl", table).stdout
    expected = [json.loads(line)["log_odds"] for line in printed.splitlines()]
    assert [p.log_odds for p in loaded.predict(table)] == expected
    assert [p.log_odds for p in model.predict(str(table))] == expected
    model.save(tmp_path / "again.nbm")
    assert [p.log_odds for p in nbspam.load(tmp_path / "again.nbm").predict(table)] == expected
    assert model.forget(table) == 80 and model.learn(table) == 80
    assert [p.log_odds for p in model.predict(table)] == pytest.approx(expected, rel=1e-12)
    rows_explained = model.explain(table)
    assert rows_explained[0]["log_odds"] == pytest.approx(expected[0], rel=1e-12)


def test_the_python_guide_runs(monkeypatch):
    """Every example of docs/python.md gives the output it shows."""
    import doctest

    root = SAMPLE.parent
    monkeypatch.chdir(root)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testfile(
        str(root / "docs" / "python.md"), module_relative=False, optionflags=flags
    )
    assert result.attempted > 20 and result.failed == 0


# --------------------------------------------------------------------------------------------
# Arguments of the wrong type or out of range: one error naming the argument, at the entry
# --------------------------------------------------------------------------------------------

PAIRS = [("cheap meds now", "spam"), ("lunch at noon", "ham")] * 3


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(a model of messages, a table model, the table's path), made once: read them only."""
    table = tmp_path_factory.mktemp("table") / "t.csv"
    rows = [f"{'red' if i % 2 else 'blue'},{'spam' if i % 2 else 'ham'}" for i in range(20)]
    table.write_text("colour,label\n" + "\n".join(rows) + "\n")
    messages = nbspam.train(PAIRS, event_model="multinomial", calibrate=False)
    return messages, nbspam.train(table, calibrate=False), table


def refused(function, *args, error=nbspam.ConfigError, **kwargs) -> str:
    """The message of the error ``function(*args, **kwargs)`` raises, of class ``error``."""
    with pytest.raises(nbspam.NbspamError) as raised:
        function(*args, **kwargs)
    assert type(raised.value) is error
    return str(raised.value)


@pytest.mark.parametrize(
    "given, message",
    [
        ({"max_terms": "3"}, "max_terms must be a whole number >= 1, not '3'"),
        ({"max_terms": 2.5}, "max_terms must be a whole number >= 1, not 2.5"),
        ({"max_terms": 0}, "max_terms must be a whole number >= 1, not 0"),
        ({"max_terms": True}, "max_terms must be a whole number >= 1, not True"),
        ({"min_docs": "3"}, "min_docs must be a whole number >= 1, not '3'"),
        ({"min_docs": -1}, "min_docs must be a whole number >= 1, not -1"),
        ({"min_docs": 1.5}, "min_docs must be a whole number >= 1, not 1.5"),
        ({"config": 3}, "config must be a str or os.PathLike, not 3"),
        ({"config": b"s.yaml"}, "config must be a str or os.PathLike, not b's.yaml'"),
        ({"label_column": 3}, "label_column must be text, not 3"),
        ({"columns": None}, "columns must be text or a list of texts, not None"),
        ({"columns": [3]}, "columns must be text or a list of texts, not [3]"),
        ({"bins": "4"}, "bins must be a whole number from 1 to 1,000, not '4'"),
        ({"bins": True}, "bins must be a whole number from 1 to 1,000, not True"),
        # 10**6 bins of 40 rows: a 13 MB model in 10 s; 10**20 was an internal error
        ({"bins": 1001}, "bins must be a whole number from 1 to 1,000, not 1001"),
        ({"bins": 10**20}, f"bins must be a whole number from 1 to 1,000, not {10**20}"),
        ({"binning": None}, "binning must be one of quantile, uniform, not None"),
        ({"reading": 3}, "reading must be an nbspam.api.Reading, not 3"),
        ({"engine": "dask"}, "engine must be an nbspam.service.engine.Engine, not 'dask'"),
        ({"alpha": True}, "setting alpha must be a number, not True"),
    ],
)
def test_train_refuses_an_argument_of_the_wrong_type(models, given, message):
    """Each was a TypeError or AttributeError from deep inside, or taken for another value
    (max_terms=True kept one term, alpha=True was 1)."""
    table = models[2]
    assert refused(nbspam.train, PAIRS, **given) == message
    assert refused(nbspam.train, table, **given) == message


@pytest.mark.parametrize(
    "given, message",
    [
        ({"folds": "3"}, "--folds must be a whole number >= 2, not '3'"),
        ({"folds": 2.0}, "--folds must be a whole number >= 2, not 2.0"),
        ({"folds": True}, "--folds must be a whole number >= 2, not True"),
        ({"chronological": "0.5"}, "chronological must be a number in (0, 1), not '0.5'"),
        ({"chronological": 1}, "chronological must be a number in (0, 1), not 1"),
        ({"online": "no"}, "online must be True or False, not 'no'"),
        ({"order": 3}, "--order must be one of date, input, shuffle, not 3"),
        (
            {"learn": "some"},
            "--learn must be one of all, errors, unsure, autolearn, errors+autolearn, not 'some'",
        ),
        ({"warmup": "3"}, "warmup must be a whole number >= 1, not '3'"),
        ({"warmup": 1.5}, "warmup must be a whole number >= 1, not 1.5"),
        ({"warmup": 0}, "warmup must be a whole number >= 1, not 0"),
        ({"autolearn_spam": "x"}, "autolearn_spam must be a number in (0.5, 1], not 'x'"),
        ({"autolearn_spam": 0.5}, "autolearn_spam must be a number in (0.5, 1], not 0.5"),
        ({"autolearn_ham": None}, "autolearn_ham must be a number in [0, 0.5), not None"),
        ({"scores": 3}, "scores must be a str or os.PathLike, not 3"),
        ({"plot": b"roc.svg"}, "plot must be a str or os.PathLike, not b'roc.svg'"),
        ({"config": 3}, "config must be a str or os.PathLike, not 3"),
        ({"columns": 3}, "columns must be text or a list of texts, not 3"),
    ],
)
def test_evaluate_refuses_an_argument_of_the_wrong_type(models, given, message):
    """Before anything is read; online, warmup and the autolearn thresholds as well."""
    table = models[2]
    assert refused(nbspam.evaluate, PAIRS, **{"online": True, **given}) == message
    assert refused(nbspam.evaluate, table, **given) == message


@pytest.mark.parametrize(
    "path, message",
    [
        (None, "path must be a str or os.PathLike, not None"),
        (3, "path must be a str or os.PathLike, not 3"),
        (b"spam.nbm", "path must be a str or os.PathLike, not b'spam.nbm'"),
    ],
)
def test_load_and_save_refuse_a_path_of_the_wrong_type(models, path, message):
    assert refused(nbspam.load, path) == message
    for model in models[:2]:
        assert refused(model.save, path) == message


@pytest.mark.parametrize(
    "others, message, error",
    [
        ((3,), "others must be nbspam.Classifier models, not 3", nbspam.ConfigError),
        ((None,), "others must be nbspam.Classifier models, not None", nbspam.ConfigError),
        (
            ("table",),
            "cannot merge a model of messages with a model of a typed table",
            nbspam.NbspamError,
        ),
    ],
)
def test_merge_refuses_what_is_not_a_model_of_its_kind(models, others, message, error):
    messages, table, _ = models
    others = [table if other == "table" else other for other in others]
    assert refused(messages.merge, *others, error=error) == message
    if others[0] is table:
        assert refused(table.merge, messages, error=error) == message


@pytest.mark.parametrize(
    "inputs, jobs, message, error",
    [
        ("rows", 0, "--jobs must be a whole number from 1 to 1,024, not 0", nbspam.ConfigError),
        (None, 1, "tables must be paths or tables.Table values, not None", nbspam.InputError),
        (3, 1, "tables must be paths or tables.Table values, not 3", nbspam.InputError),
        ([3], 1, "table 0 is not a path or a tables.Table: 3", nbspam.InputError),
    ],
)
def test_a_table_models_predict_refuses_what_is_not_a_table(models, inputs, jobs, message, error):
    """As a model of messages refuses what is not a message (they were TypeErrors); forget,
    learn and explain take tables alike. jobs was ignored for a table, where a model of
    messages checks it."""
    _, table, path = models
    inputs = path if inputs == "rows" else inputs
    assert refused(table.predict, inputs, jobs=jobs, error=error) == message
    if jobs == 1:
        for call in (table.forget, table.learn, table.explain):
            if inputs is not None or call != table.explain:  # explain(None): the columns
                assert refused(call, inputs, error=error) == message


@pytest.mark.parametrize(
    "top, message",
    [
        ("3", "top must be a whole number >= 1, not '3'"),
        (2.5, "top must be a whole number >= 1, not 2.5"),
        (0, "top must be a whole number >= 1, not 0"),
        (-1, "top must be a whole number >= 1, not -1"),
        (None, "top must be a whole number >= 1, not None"),
        (True, "top must be a whole number >= 1, not True"),
    ],
)
def test_explain_refuses_a_top_that_is_no_count(models, top, message):
    """top="3" was a TypeError in a slice; -1 silently left out the last term."""
    messages, table, path = models
    assert refused(messages.explain, top=top) == message
    assert refused(messages.explain, "cheap meds", top=top) == message
    assert refused(table.explain, path, top=top) == message


@pytest.mark.parametrize(
    "label, new_label, message",
    [
        (3, True, "label must be text, not 3"),
        (b"ham", True, "label must be text, not b'ham'"),
        (3, False, "label must be text, not 3"),
        ("ham", "no", "new_label must be True or False, not 'no'"),
        ("ham", 1, "new_label must be True or False, not 1"),
    ],
)
def test_learn_refuses_a_label_that_is_not_text(models, label, new_label, message):
    """A label of bytes or a number was a TypeError in sorting the labels; new_label="no"
    added a label."""
    messages, table, path = models
    before = messages.labels
    assert refused(messages.learn, "hi", label, new_label=new_label) == message
    assert messages.labels == before
    assert refused(table.learn, path, label, new_label=new_label) == message


@pytest.mark.parametrize(
    "given, message",
    [
        ({"follow_links": "no"}, "follow_links must be True or False, not 'no'"),
        ({"literal": 1}, "literal must be True or False, not 1"),
        ({"problems": 3}, "problems must be a mail.message.Problems, not 3"),
        ({"progress": 3}, "progress must be a function, not 3"),
        ({"watch": "bar"}, "watch must be a function, not 'bar'"),
        ({"listed": [3]}, "listed must be text or a list of texts, not [3]"),
    ],
)
def test_a_reading_refuses_a_field_of_the_wrong_type(given, message):
    """follow_links="no" followed links; the others failed while reading."""
    from nbspam.api import Reading

    assert refused(Reading, **given) == message


@pytest.mark.parametrize(
    "given, message",
    [
        ({"name": "Dask"}, "--engine must be one of local, dask, not 'Dask'"),
        ({"name": None}, "--engine must be one of local, dask, not None"),
        ({"name": "dask", "scheduler": 8786}, "--scheduler must be text, not 8786"),
        ({"tls_cert": b"c.pem"}, "--tls-cert must be text, not b'c.pem'"),
        ({"jobs": "2"}, "--jobs must be a whole number from 1 to 1,024, not '2'"),
    ],
)
def test_an_engine_refuses_a_field_of_the_wrong_type(given, message):
    """Any name but dask ran the local engine, "Dask" too."""
    from nbspam.service.engine import Engine

    assert refused(Engine, **given) == message


@pytest.mark.parametrize("model", [3, None, "spam.nbm"])
def test_a_classifier_is_made_of_a_model(models, model):
    """Classifier(3) was made, and failed at its first use."""
    message = f"model must be a model of messages or of a table (nbspam.load), not {model!r}"
    assert refused(nbspam.Classifier, model) == message
    assert nbspam.Classifier(models[1].model).kind == "table"
