"""`filter --autolearn`: only the messages scored with very high confidence are learned,
under their verdict, and the model file changes by exactly those."""

from __future__ import annotations

import json
import shutil

import pytest

from nbspam.errors import FilterError
from nbspam.mail.message import Message
from nbspam.models.decision import Prediction
from nbspam.service.filtering import Autolearn
from nbspam.service.update import learn
from nbspam.store.modelfile import load_model
from tests.helpers import SAMPLE, assert_same_model, cli_run


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "spam.nbm"
    result = cli_run("train", SAMPLE / "train", "-o", path)
    assert result.exit_code == 0, result.stderr
    return path


def run(*args, input=None):
    result = cli_run(*args, input=input)
    assert result.exit_code == 0, result.stderr
    return result


def test_thresholds():
    rule = Autolearn(0.99, 0.02)
    labels = ("ham", "spam")

    def said(p):
        return rule.label(Prediction("-", "spam", (1 - p, p), 0.0, "unsure", p), labels, "spam")

    assert said(0.99) == "spam" and said(0.995) == "spam" and said(0.98) is None
    assert said(0.02) == "ham" and said(0.021) is None and said(0.5) is None
    with pytest.raises(FilterError, match="calibrated"):
        rule.label(Prediction("-", "spam", (0.0, 1.0), 9.0, "spam", None), labels, "spam")
    with pytest.raises(FilterError):
        Autolearn(0.4, 0.001)


def test_folders_learn_exactly_the_confident_messages(tmp_path, trained):
    model_path = tmp_path / "spam.nbm"
    shutil.copy(trained, model_path)
    before = load_model(model_path)
    mail = tmp_path / "mail"
    shutil.copytree(SAMPLE / "new", mail)
    report = tmp_path / "report.jsonl"
    # thresholds inside the range of these messages, so some are sure and some are not
    result = run(
        "filter", "-m", model_path, mail, "--autolearn", "--autolearn-spam", "0.96",
        "--autolearn-ham", "0.001", "--report", report,
    )  # fmt: skip
    records = [json.loads(line) for line in report.read_text().splitlines()]
    sure = [r for r in records if r["calibrated"] >= 0.96 or r["calibrated"] <= 0.001]
    assert {r["verdict"] for r in sure} == {"spam", "ham"} and len(sure) < len(records)
    expected = before
    for r in sure:
        label = "spam" if r["calibrated"] >= 0.96 else "ham"
        message = Message(r["path"], open(r["path"], "rb").read(), label)
        expected, _ = learn(expected, [message], label)
    after = load_model(model_path)
    assert_same_model(after, expected)
    assert after.cutoffs == before.cutoffs and after.calibration == before.calibration
    assert f"autolearn: {len(sure)} learned of {len(sure)} sure enough" in result.stderr
    # filtered again: nothing new, nothing learned
    run("filter", "-m", model_path, mail, "--autolearn", "--autolearn-spam", "0.9")
    assert_same_model(load_model(model_path), expected)


def test_dry_run_and_no_autolearn_learn_nothing(tmp_path, trained):
    model_path = tmp_path / "spam.nbm"
    shutil.copy(trained, model_path)
    data = model_path.read_bytes()
    mail = tmp_path / "mail"
    shutil.copytree(SAMPLE / "new", mail)
    dry = run("filter", "-m", model_path, mail, "--autolearn", "--autolearn-spam", "0.6",
              "--dry-run")  # fmt: skip
    assert "none learned" in dry.stderr and model_path.read_bytes() == data
    run("filter", "-m", model_path, mail)
    assert model_path.read_bytes() == data


def test_stdin_learns_a_sure_message_and_not_an_unsure_one(tmp_path, trained):
    model_path = tmp_path / "spam.nbm"
    shutil.copy(trained, model_path)
    before = load_model(model_path)
    message = (SAMPLE / "new" / "001.eml").read_bytes()
    out = run("filter", "-m", model_path, input=message).stdout_bytes
    calibrated = float(out.split(b"calibrated=")[1].split(b";")[0])
    label = "spam" if calibrated >= 0.5 else "ham"
    # a threshold the message misses: nothing learned, the file untouched
    far = {"spam": ("--autolearn-spam", "1"), "ham": ("--autolearn-ham", "0")}[label]
    data = model_path.read_bytes()
    passed = run("filter", "-m", model_path, "--autolearn", *far, input=message)
    assert passed.stdout_bytes == out and model_path.read_bytes() == data
    # a threshold it meets: learned under its verdict, and nothing else changed
    near = {
        "spam": ("--autolearn-spam", str(min(calibrated, 0.9999))),
        "ham": ("--autolearn-ham", str(max(calibrated, 0.0001))),
    }[label]
    passed = run("filter", "-m", model_path, "--autolearn", *near, input=message)
    assert passed.stdout_bytes == out
    expected, _ = learn(before, [Message("-", message, label)], label)
    assert_same_model(load_model(model_path), expected)


def test_autolearn_never_relabels_what_was_learned(tmp_path, trained):
    model_path = tmp_path / "spam.nbm"
    shutil.copy(trained, model_path)
    message = (SAMPLE / "new" / "001.eml").read_bytes()
    out = run("filter", "-m", model_path, input=message).stdout_bytes
    calibrated = float(out.split(b"calibrated=")[1].split(b";")[0])
    other = "ham" if calibrated >= 0.5 else "spam"
    path = tmp_path / "001.eml"
    path.write_bytes(message)
    run("learn", "-m", model_path, "-l", other, path)
    taught = model_path.read_bytes()
    run("filter", "-m", model_path, "--autolearn", "--autolearn-spam", "0.51",
        "--autolearn-ham", "0.49", input=message)  # fmt: skip
    assert model_path.read_bytes() == taught
