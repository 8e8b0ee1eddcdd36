"""evaluate reproduces train + predict fold by fold; cutoffs and calibration from the CLI."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from nbspam.store.modelfile import load_model
from tests.helpers import cli_run

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"


def run(*args):
    result = cli_run(*args)
    assert result.exit_code == 0, result.output + result.stderr
    return result


@pytest.mark.parametrize("repeated", [0, 4], ids=["distinct", "with repeated messages"])
def test_evaluate_scores_are_what_train_and_predict_give(tmp_path, repeated):
    data = tmp_path / "data"
    shutil.copytree(SAMPLE / "train", data)
    for label in ("ham", "spam"):  # copies under other names: train counts each once
        for path in sorted((data / label).iterdir())[:repeated]:
            shutil.copy(path, data / label / f"copy-{path.name}")
    scores_file = tmp_path / "scores.jsonl"
    report = json.loads(
        run("evaluate", data, "--folds", "3", "--scores", scores_file, "-f", "json").stdout
    )
    rows = [json.loads(line) for line in scores_file.read_text().splitlines()]
    assert len(rows) == 48 + 2 * repeated and {r["fold"] for r in rows} == {0, 1, 2}
    for fold in (0, 2):
        # the training part of this fold, in the order evaluate read it: label folders sorted
        for r in rows:
            if r["fold"] != fold:
                link = tmp_path / f"fold{fold}" / r["label"] / Path(r["path"]).name
                link.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(r["path"], link)
        model = tmp_path / f"fold{fold}.nbm"
        run("train", tmp_path / f"fold{fold}", "-o", model, "--follow-links")  # links out
        # the report's choice of auto in this fold is train's on its training part
        chosen = load_model(model).info["auto"]["chosen"]
        assert report["protocol"]["auto_by_fold"][str(fold)] == chosen
        tested = [r for r in rows if r["fold"] == fold]
        out = run("predict", "-m", model, "-f", "jsonl", *[r["path"] for r in tested]).stdout
        for r, line in zip(tested, out.splitlines()):
            p = json.loads(line)
            assert p["path"] == r["path"]
            assert p["log_odds"] == pytest.approx(r["log_odds"], abs=1e-9)
            assert p["verdict"] == r["verdict"]
            assert p["calibrated"] == pytest.approx(r["calibrated"], abs=1e-9)


def test_the_text_report_states_auto_s_choice_in_each_fold():
    text = run("evaluate", SAMPLE / "train", "--folds", "4").stdout.splitlines()
    by_fold = json.loads(run("evaluate", SAMPLE / "train", "--folds", "4", "-f", "json").stdout)[
        "protocol"
    ]["auto_by_fold"]
    assert sorted(by_fold) == ["0", "1", "2", "3"]
    choices = "; ".join(f"fold {k}: {by_fold[k]}" for k in "0123")
    assert text[3] == f"  auto chose, in each fold's training part: {choices}"
    held = run("evaluate", SAMPLE / "train", "--chronological", "0.3").stdout.splitlines()
    assert held[4].startswith("  auto chose, on the training part: ")
    fixed = run("evaluate", SAMPLE / "train", "--folds", "4", "--event-model", "bernoulli")
    assert "auto chose" not in fixed.stdout


def test_evaluate_json_report_keys():
    result = run("evaluate", SAMPLE / "train", "--folds", "4", "-f", "json")
    report = json.loads(result.stdout)
    assert report["counts"]["evaluated"] == 48
    assert 0.9 <= report["ranking"]["roc_auc"] <= 1.0
    assert set(report["cutoffs"]) >= {"false_positives", "false_negatives", "unsure", "per_fold"}


def test_train_fits_cutoffs_and_calibration_unless_given(tmp_path):
    run("train", SAMPLE / "train", "-o", tmp_path / "a.nbm")
    fitted = load_model(tmp_path / "a.nbm")
    assert fitted.cutoffs is not None and fitted.cutoffs[0] <= fitted.cutoffs[1]
    assert fitted.calibration is not None and fitted.calibration[0] > 0
    run("train", SAMPLE / "train", "-o", tmp_path / "b.nbm", "--cutoffs=-20,20")
    assert load_model(tmp_path / "b.nbm").cutoffs == (-20.0, 20.0)
    run("train", SAMPLE / "train", "-o", tmp_path / "c.nbm", "--no-calibrate")
    plain = load_model(tmp_path / "c.nbm")
    assert plain.cutoffs is None and plain.calibration is None
    # the default holds 0.1% of ham out of sample; none: the cutoffs of least cost
    assert load_model(tmp_path / "a.nbm").info["cutoffs"]["fpr_upper"] > 0
    run("train", SAMPLE / "train", "-o", tmp_path / "d.nbm", "--target-fpr", "none")
    ham_cut, spam_cut = load_model(tmp_path / "d.nbm").cutoffs
    assert ham_cut == spam_cut


def test_unsure_band_in_predict(tmp_path):
    model = tmp_path / "m.nbm"
    run("train", SAMPLE / "train", "-o", model, "--cutoffs=-1000,1000")
    out = run("predict", "-m", model, "-f", "jsonl", SAMPLE / "new").stdout
    records = [json.loads(line) for line in out.splitlines()]
    assert {r["verdict"] for r in records} == {"unsure"}
    assert {r["label"] for r in records} == {"ham", "spam"}
    text = run("predict", "-m", model, SAMPLE / "new" / "001.eml").stdout
    assert text.startswith(f"{SAMPLE / 'new' / '001.eml'}: unsure (log-odds -")


def test_bad_cutoffs_are_a_usage_error():
    result = cli_run("train", SAMPLE / "train", "-o", "x.nbm", "--cutoffs", "5,-5")
    assert result.exit_code == 2
    assert result.stderr == "Error: the ham cutoff 5 must not be above the spam cutoff -5\n"


def test_a_negative_seed_is_a_usage_error():
    """numpy takes no negative seed: the command says so, not 'internal error'."""
    result = cli_run("evaluate", SAMPLE / "train", "--seed", "-1")
    assert result.exit_code == 2
    assert result.stderr == "Error: --seed must be a whole number >= 0, not -1\n"
