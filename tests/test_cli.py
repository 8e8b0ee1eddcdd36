"""The command line: exact output, messages and exit statuses."""

from __future__ import annotations

import json
import math
import re

import pytest

from tests.helpers import cli_run

HAM = [
    "Meeting moved to Thursday, agenda attached",
    "Lunch on Friday with the project team",
    "Notes from the project meeting and next steps",
    "Quarterly report draft for the team review",
]
SPAM = [
    "Win a free prize now, click here to claim",
    "Cheap pills, free shipping, click now",
    "You won the lottery, claim your free prize",
    "Free money, act now, limited offer",
]


@pytest.fixture
def data(tmp_path):
    for label, texts in (("ham", HAM), ("spam", SPAM)):
        folder = tmp_path / "data" / label
        folder.mkdir(parents=True)
        for i, text in enumerate(texts):
            (folder / f"{i}.txt").write_text(text)
    return tmp_path / "data"


@pytest.fixture
def model(data, tmp_path):
    path = tmp_path / "m.nbm"
    result = cli_run("train", data, "-o", path, "--min-count", "1")
    assert result.exit_code == 0, result.output
    return path


def test_train_prints_a_summary(data, tmp_path):
    out = tmp_path / "m.nbm"
    result = cli_run("train", data, "-o", out, "--min-count", "1", "--event-model", "multinomial")
    assert result.exit_code == 0
    lines = result.stderr.splitlines()
    assert re.fullmatch(r"read 8 messages \(ham 4, spam 4\) in \d+\.\d s", lines[0])
    assert lines[1] == "model: the multinomial model (how often each word occurs)"
    # 0 of the 4 ham out of fold: at most 1 - 0.2^(1/4) = 33.13% with 80% confidence
    assert lines[2] == (
        "expected false positives: 0.00% of ham (0 of 4 out of fold), at most 33.13% at 80% "
        "confidence; 0.0% unsure"
    )
    assert re.fullmatch(rf"wrote {re.escape(str(out))} \(0\.\d MB\)", lines[3])
    assert lines[4] == f"next: nbspam predict -m {out} MESSAGE"
    assert len(lines) == 5
    assert result.stdout == ""


def test_train_verbose_adds_the_details(data, tmp_path):
    out = tmp_path / "m.nbm"
    result = cli_run(
        "train", data, "-o", out, "--min-count", "1", "--event-model", "multinomial", "-v"
    )
    assert result.exit_code == 0
    lines = result.stderr.splitlines()
    assert lines[2].startswith("vocabulary: ") and lines[2].endswith("seen (min-count 1)")
    assert lines[3] == "positive class: spam (log-odds > 0 point to it)"
    assert lines[4].startswith("cutoffs: ham below ") and lines[4].endswith(
        " log-odds, unsure between"
    )
    assert lines[5].startswith("expected false positives: ")
    assert lines[6] == "calibration: Platt scaling fitted by internal cross-validation"
    # the messages carry no Date: the fixed drift margin
    assert lines[7] == (
        "drift: spam cutoff raised by 4.0% of the ham's spread (fixed: too few training "
        "messages carry a date to measure it)"
    )
    assert lines[8].startswith(f"wrote {out} (")


def test_predict_jsonl_keys_and_invariants(model, tmp_path):
    msg = tmp_path / "new.txt"
    msg.write_text("claim your free prize now")
    result = cli_run("predict", "-m", model, "-f", "jsonl", msg)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert set(record) == {
        "path",
        "label",
        "probability",
        "probabilities",
        "log_odds",
        "verdict",
        "calibrated",
    }
    assert record["verdict"] in ("ham", "unsure", "spam")
    assert record["path"] == str(msg) and record["label"] == "spam"
    assert sum(record["probabilities"].values()) == pytest.approx(1.0, abs=1e-12)
    assert record["probability"] == record["probabilities"]["spam"]
    p = record["probabilities"]
    assert record["log_odds"] == pytest.approx(math.log(p["spam"]) - math.log(p["ham"]), abs=1e-9)


def test_predict_reads_stdin_and_dash(model):
    for args in ([], ["-"]):
        result = cli_run("predict", "-m", model, *args, input="project meeting notes")
        assert result.exit_code == 0
        assert result.stdout.startswith("-: ham (log-odds -")


def test_predict_text_and_tsv_formats(model, data):
    text = cli_run("predict", "-m", model, data / "spam" / "0.txt")
    assert text.stdout.startswith(f"{data / 'spam' / '0.txt'}: spam (log-odds +")
    assert ", probability of spam " in text.stdout
    tsv = cli_run("predict", "-m", model, "-f", "tsv", data)
    rows = [line.split("\t") for line in tsv.stdout.splitlines()]
    assert rows[0] == [
        "path",
        "label",
        "probability",
        "log_odds",
        "verdict",
        "calibrated",
        "p_ham",
        "p_spam",
    ]
    assert [r[1] for r in rows[1:]] == ["ham"] * 4 + ["spam"] * 4


def test_explain_contributions_add_up_to_predicted_log_odds(model, data):
    path = data / "spam" / "2.txt"
    pred = json.loads(cli_run("predict", "-m", model, "-f", "jsonl", path).stdout)
    result = cli_run("explain", "-m", model, "-f", "jsonl", path)
    assert result.exit_code == 0
    e = json.loads(result.stdout)
    total = e["bias"] + sum(c["contribution"] for c in e["contributions"])
    assert total == pytest.approx(pred["log_odds"], abs=1e-9)
    assert e["log_odds"] == pred["log_odds"]
    sizes = [abs(c["contribution"]) for c in e["contributions"]]
    assert sizes == sorted(sizes, reverse=True)


def test_explain_global_lists_each_class(model):
    result = cli_run("explain", "-m", model, "--top", "3")
    lines = result.stdout.splitlines()
    assert lines[0] == "toward spam (against ham): log-odds weight, documents per label"
    assert lines[1].split() == ["weight", "ham", "spam", "term"]
    assert len(lines) == 2 * (2 + 3 + 1)
    assert lines[6] == "toward ham (against spam): log-odds weight, documents per label"
    assert lines[2].split()[-1] == "free"  # in all four spams, in no ham


def test_explain_tsv_global(model):
    result = cli_run("explain", "-m", model, "--top", "1", "-f", "tsv")
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert rows[0] == ["toward", "against", "term", "weight", "documents_ham", "documents_spam"]
    assert rows[1][:3] == ["spam", "ham", "free"] and rows[1][4:] == ["0", "4"]


def test_missing_path_is_reported_and_the_rest_is_scored(model, data, tmp_path):
    result = cli_run("predict", "-m", model, tmp_path / "nope.eml", data / "ham" / "0.txt")
    assert result.exit_code == 3
    assert result.stderr.splitlines() == [f"{tmp_path / 'nope.eml'}: no such file or directory"]
    assert result.stdout.count("\n") == 1


def test_corrupt_model_is_one_line_error(model, tmp_path):
    model.write_bytes(model.read_bytes()[:-10])
    result = cli_run("predict", "-m", model, input="x")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {model} is truncated\n"


def test_not_a_model_is_one_line_error(data):
    result = cli_run("explain", "-m", data / "ham" / "0.txt")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {data / 'ham' / '0.txt'} is not an nbspam model file\n"


def test_the_event_model_option(data, tmp_path):
    path = tmp_path / "m.nbm"
    result = cli_run("train", data, "-o", path, "--event-model", "bernoulli")
    assert result.exit_code == 0, result.stderr
    assert "\nmodel: the Bernoulli model (which words occur)\n" in result.stderr
    help_text = cli_run("train", "--help").stdout
    assert "--event-model" in help_text and "--model " not in help_text


def test_the_event_model_in_a_config_file(data, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("event-model: bernoulli\n")
    result = cli_run("train", data, "-o", tmp_path / "m.nbm", "-c", config)
    assert result.exit_code == 0, result.stderr
    assert "\nmodel: the Bernoulli model (which words occur)\n" in result.stderr


def test_usage_errors_exit_2(data, tmp_path):
    assert cli_run("train", data, "-o", tmp_path / "m", "--model", "gauss").exit_code == 2
    assert cli_run("frobnicate").exit_code == 2


def test_config_file_and_unknown_keys(data, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("event-model: bernoulli\nmin-count: 1\nalpha: 0.5\n")
    out = tmp_path / "m.nbm"
    result = cli_run("train", data, "-o", out, "-c", cfg, "--alpha", "0.25")
    assert result.exit_code == 0, result.output
    from nbspam.store.modelfile import load_model

    m = load_model(out)
    assert (m.training.event_model, m.training.min_count, m.training.alpha) == (
        "bernoulli",
        1,
        0.25,
    )
    cfg.write_text("modle: bernoulli\n")
    result = cli_run("train", data, "-o", out, "-c", cfg)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: unknown setting 'modle' in {cfg}; known settings: ")


def test_training_errors(data, tmp_path):
    out = tmp_path / "m.nbm"
    result = cli_run("train", f"ham={data / 'ham'}", "-o", out)
    assert result.exit_code == 1
    assert result.stderr == "Error: need messages of at least two labels to train, found only ham\n"
    result = cli_run("train", data, "-o", out, "--min-count", "50")
    assert result.exit_code == 1
    assert "no terms survive --min-count 50" in result.stderr
    assert not out.exists()


def test_label_equals_path_and_positive(data, tmp_path):
    out = tmp_path / "m.nbm"
    result = cli_run(
        "train",
        f"good={data / 'ham'}",
        f"bad={data / 'spam'}",
        "-o",
        out,
        "--min-count",
        "1",
        "--positive",
        "bad",
        "-v",
    )
    assert result.exit_code == 0, result.output
    assert "positive class: bad" in result.stderr
    pred = json.loads(cli_run("predict", "-m", out, "-f", "jsonl", input="free prize now").stdout)
    assert pred["label"] == "bad" and pred["log_odds"] > 0


def test_every_command_has_help_with_an_example():
    for command in ("train", "predict", "explain"):
        result = cli_run(command, "--help")
        assert result.exit_code == 0
        assert "Example:" in result.stdout
    assert "Exit status: 0 success; 1 an error in the input" in cli_run("--help").stdout


def test_files_from_for_train_predict_and_explain(data, tmp_path):
    specs = tmp_path / "specs.txt"
    specs.write_text(f"ham={data / 'ham'}\nspam={data / 'spam'}\n")
    out = tmp_path / "ff.nbm"
    result = cli_run("train", "-o", out, "--files-from", specs, "--min-count", "1")
    assert result.exit_code == 0, result.output
    assert "read 8 messages (ham 4, spam 4)" in result.stderr
    listed = "\0".join(str(p) for p in sorted((data / "spam").iterdir())) + "\0"
    result = cli_run("predict", "-m", out, "--files-from", "-", "-0", "-f", "tsv", input=listed)
    assert result.exit_code == 0
    assert [row.split("\t")[1] for row in result.stdout.splitlines()[1:]] == ["spam"] * 4
    result = cli_run(
        "explain", "-m", out, "--files-from", "-", "-f", "jsonl", input=str(data / "ham" / "0.txt")
    )
    assert json.loads(result.stdout)["path"] == str(data / "ham" / "0.txt")
    assert cli_run("train", "-o", out).exit_code == 2  # neither DATA nor --files-from


def test_train_and_info_name_the_classes_by_their_labels(tmp_path):
    # not "of ham" and "spam cutoff" where the labels are others (text, not mail)
    good, bad = "great superb lovely fine".split(), "awful poor dull sad".split()
    rows = [f"pos\t{' '.join(good[i % 4 :] + good[: i % 4])} film{i}" for i in range(20)]
    rows += [f"neg\t{' '.join(bad[i % 4 :] + bad[: i % 4])} film{i}" for i in range(20)]
    table, model = tmp_path / "reviews.tsv", tmp_path / "m.nbm"
    table.write_text("\n".join(rows) + "\n")
    trained = cli_run("train", table, "-o", model, "-v")
    assert trained.exit_code == 0, trained.stderr
    info = cli_run("info", "-m", model).stdout
    for text in (trained.stderr, info):
        assert "% of neg (0 of 20 out of fold), at most " in text
        assert "pos cutoff raised by 4.0% of the neg's spread (fixed: " in text
        assert not re.search(r"\b(ham|spam)\b", text.replace("nbspam ", ""))


def test_info_shows_what_is_in_the_model(model):
    result = cli_run("info", "-m", model)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"model:      {model} (format 1, written by nbspam 0.1.0)"
    assert lines[1] == "labels:     ham 4, spam 4 (positive: spam)"
    assert any(line.startswith("cutoffs:    ") for line in lines)
    info = json.loads(cli_run("info", "-m", model, "-f", "json").stdout)
    assert info["labels"] == {"ham": 4, "spam": 4} and info["messages"] == 8
    assert info["settings"]["train"]["min_count"] == 1


def test_info_writes_the_journal_it_folded_in_words_not_as_a_python_dict(model, data):
    assert cli_run("learn", "-m", model, "--label", "ham", data / "spam" / "0.txt").exit_code == 0
    assert cli_run("compact", "-m", model).exit_code == 0
    lines = cli_run("info", "-m", model).stdout.splitlines()
    [line] = [line for line in lines if line.startswith("journal:")]
    assert sorted(line.removeprefix("journal:    ").split(", "))[1] == "records 1", line
    assert re.search(r"\bid [0-9a-f]{16}\b", line), line
    assert not any("{" in line for line in lines)


def test_learn_refuses_an_unknown_label_unless_asked(model, data):
    message = data / "spam" / "0.txt"
    result = cli_run("learn", "-m", model, "--label", "Spam", message)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {model} has no label 'Spam' (its labels: ham, spam); give --new-label to add one\n"
    )
    result = cli_run("learn", "-m", model, "--label", "phish", "--new-label", message)
    assert result.exit_code == 0
    assert json.loads(cli_run("info", "-m", model, "-f", "json").stdout)["labels"]["phish"] == 1


def test_explain_against_an_unknown_label_is_an_error(model, data):
    for args in ([], [data / "ham" / "0.txt"]):
        result = cli_run("explain", "-m", model, "--against", "zzz", *args)
        assert result.exit_code == 1
        assert result.stderr == "Error: --against 'zzz' is not one of the labels ['ham', 'spam']\n"


def test_merge_needs_two_models(model, tmp_path):
    result = cli_run("merge", model, "-o", tmp_path / "out.nbm")
    assert result.exit_code == 2 and "merge needs two or more models" in result.stderr


def _log_odds(model, *paths):
    result = cli_run("predict", "-m", model, "-f", "jsonl", *paths)
    assert result.exit_code == 0, result.stderr
    return [json.loads(line)["log_odds"] for line in result.stdout.splitlines()]


def test_a_complement_model_is_the_multinomial_one_without_its_prior(data, tmp_path):
    complement, multinomial = tmp_path / "c.nbm", tmp_path / "m.nbm"
    result = cli_run("train", data, "-o", complement, "--event-model", "complement", "--counts")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("read 8 messages (ham 4, spam 4) in ")
    assert (
        "\nmodel: the complement model (word counts against the other classes)\n" in result.stderr
    )
    result = cli_run("train", data, "-o", multinomial, "--prior", "uniform", "--counts")
    assert result.exit_code == 0, result.stderr
    messages = sorted((data / "spam").iterdir()) + sorted((data / "ham").iterdir())
    assert _log_odds(complement, *messages) == pytest.approx(
        _log_odds(multinomial, *messages), abs=1e-12
    )
    info = cli_run("info", "-m", complement).stdout.splitlines()
    assert "settings:   complement, alpha 0.1, min-count 1" in info


def test_a_complement_model_predicts_explains_learns_and_forgets(data, tmp_path):
    path = tmp_path / "c.nbm"
    result = cli_run("train", data, "-o", path, "--event-model", "complement", "--complement-norm")
    assert result.exit_code == 0, result.stderr
    info = cli_run("info", "-m", path)
    assert (
        "settings:   complement on word presence, alpha 0.1, weights normalised, min-count 1"
        in (info.stdout.splitlines())
    )
    assert json.loads(cli_run("info", "-m", path, "-f", "json").stdout)["settings"]["train"][
        "complement_norm"
    ]
    message = data / "spam" / "2.txt"
    (batch,) = _log_odds(path, message)
    one = cli_run("predict", "-m", path, "-f", "jsonl", input=message.read_bytes())
    assert json.loads(one.stdout)["log_odds"] == batch  # the table without numpy: to the bit
    e = json.loads(cli_run("explain", "-m", path, "-f", "jsonl", message).stdout)
    assert e["log_odds"] == batch and e["bias"] == 0.0
    assert sum(c["contribution"] for c in e["contributions"]) == pytest.approx(batch, abs=1e-12)
    before = path.read_bytes()
    new = tmp_path / "new.txt"
    new.write_text("claim the free lottery prize on Thursday")
    assert cli_run("learn", "-m", path, "-l", "spam", new).exit_code == 0
    assert _log_odds(path, message) != [batch]
    assert cli_run("forget", "-m", path, new).exit_code == 0
    assert _log_odds(path, message) == [batch]
    from nbspam.store.modelfile import load_model
    from tests.helpers import assert_same_model

    (tmp_path / "before.nbm").write_bytes(before)
    assert_same_model(load_model(path), load_model(tmp_path / "before.nbm"))


def test_complement_settings_in_a_config_file_and_bad_values(data, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("event-model: complement\ncomplement-norm: true\n")
    out = tmp_path / "m.nbm"
    result = cli_run("train", data, "-o", out, "-c", config)
    assert result.exit_code == 0, result.stderr
    from nbspam.store.modelfile import load_model

    training = load_model(out).training
    assert (training.event_model, training.complement_norm) == ("complement", True)
    config.write_text("event-model: complement\ncomplement-norm: maybe\n")
    result = cli_run("train", data, "-o", out, "-c", config)
    assert result.exit_code == 2
    assert result.stderr == "Error: setting complement_norm must be true or false, not 'maybe'\n"


def test_select_mi_keeps_the_words_that_tell_the_labels_apart(tmp_path):
    texts = {"ham": ["hello lunch", "hello meeting"], "spam": ["hello prize", "hello prize"]}
    for label, bodies in texts.items():
        (tmp_path / label).mkdir()
        for i, body in enumerate(bodies):
            (tmp_path / label / f"{i}.txt").write_text(body)
    data = [f"{label}={tmp_path / label}" for label in texts]

    def kept(*options):
        out = tmp_path / "m.nbm"
        result = cli_run("train", *data, "-o", out, "--no-calibrate", *options)
        assert result.exit_code == 0, result.stderr
        top = cli_run("explain", "-m", out, "-f", "tsv").stdout.splitlines()
        return sorted({row.split("\t")[2] for row in top[1:]}), cli_run("info", "-m", out)

    # hello is in every message, so in the most; prize in both spams and no ham, so its
    # presence tells the labels apart: I = H(Y) = log 2
    assert kept("--max-features", "1")[0] == ["hello"]
    terms, info = kept("--select", "mi", "--max-features", "1")
    assert terms == ["prize"]
    assert info.stdout.splitlines()[3] == (
        "settings:   multinomial on word presence, alpha 0.1, prior fitted, min-count 1, "
        "max-features 1 by mutual information"
    )
    assert (
        kept("--max-features", "1")[1]
        .stdout.splitlines()[3]
        .endswith(", max-features 1 by document frequency")
    )
    config = tmp_path / "c.yaml"
    config.write_text("select: mi\nmax-features: 1\n")
    assert kept("-c", config)[0] == ["prize"]


def test_select_mi_needs_max_features_and_select_a_known_name(data, tmp_path):
    out = tmp_path / "m.nbm"
    result = cli_run("train", data, "-o", out, "--select", "mi")
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: setting select mi needs max_features, the number of terms to keep\n"
    )
    result = cli_run("train", data, "-o", out, "--select", "chi2", "--max-features", "5")
    assert result.exit_code == 2 and "'chi2' is not one of 'frequency', 'mi'" in result.stderr
    assert not out.exists()


def test_old_names_are_gone(data, tmp_path):
    """--event-model is the only name of the event model (--model names the model file),
    and evaluate's -f has no unlisted 'table'."""
    result = cli_run("train", data, "-o", tmp_path / "m", "--model", "bernoulli")
    assert result.exit_code == 2
    assert "No such option '--model'" in result.stderr
    result = cli_run("evaluate", data, "-f", "table")
    assert result.exit_code == 2
    assert "'table' is not one of 'text', 'json', 'markdown'" in result.stderr


def test_merge_of_models_trained_with_the_defaults(tmp_path):
    """The README's merge example: two shards trained with the defaults merge, whatever
    event model auto chose for each."""
    import shutil
    from pathlib import Path

    sample = Path(__file__).resolve().parents[1] / "sample_data" / "train"
    for label in ("ham", "spam"):
        for i, path in enumerate(sorted((sample / label).iterdir())):
            part = tmp_path / ("a" if i % 3 else "b") / label
            part.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, part / path.name)
    for part in ("a", "b"):
        assert cli_run("train", tmp_path / part, "-o", tmp_path / f"{part}.nbm").exit_code == 0
    result = cli_run("merge", tmp_path / "a.nbm", tmp_path / "b.nbm", "-o", tmp_path / "all.nbm")
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == f"merged 2 models into {tmp_path / 'all.nbm'}"
    assert lines[1].startswith("note: the 2 parts had ")
    assert "the largest part (" in lines[1] and " of the 48 messages)" in lines[1]
    assert len(lines) == 2


def test_predict_writes_its_lines_a_batch_at_a_time(model, tmp_path, monkeypatch):
    # click.echo flushes and asks isatty for every line: on short texts that was more than
    # scoring them. 150 messages are written in 3 writes (64 lines at a time), the same text.
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(150):
        (folder / f"{i:03d}.txt").write_text((HAM + SPAM)[i % 8])
    import click

    writes = []
    echo = click.echo
    monkeypatch.setattr(click, "echo", lambda *a, **k: writes.append(a) or echo(*a, **k))
    result = cli_run("predict", "-m", model, folder, "-f", "tsv")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == 151 and result.stdout.endswith("\n")
    assert [line.split("\t")[0] for line in lines[1:]] == [
        str(folder / f"{i:03d}.txt") for i in range(150)
    ]
    assert [line.split("\t")[1] for line in lines[1:]] == [
        ("ham", "spam")[i % 8 >= 4] for i in range(150)
    ]
    assert len(writes) == 3


def test_lines_made_before_an_error_are_written(capsys):
    from nbspam.cli.commands import emit_lines

    def lines():
        yield "one", 1
        yield "two", 1
        yield "three\nfour", 2  # a block of lines (a table's rows), written at once
        yield "five", 1
        raise RuntimeError("stop")

    counted = []
    with pytest.raises(RuntimeError):
        emit_lines(lines(), counted.append)
    assert capsys.readouterr().out == "one\ntwo\nthree\nfour\nfive\n"
    assert counted == [1, 1, 2, 1]


def test_jobs_above_the_most_workers_is_a_usage_error(tmp_path):
    """The pool forks every worker at once: --jobs 100000 is refused before any is forked."""
    result = cli_run("train", tmp_path, "-o", tmp_path / "m.nbm", "--jobs", "100000")
    assert result.exit_code == 2
    assert "'--jobs': 100000 is not in the range 1<=x<=1024" in result.stderr
