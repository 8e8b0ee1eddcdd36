"""Rendering: exact lines of every output format, and names that round-trip."""

from __future__ import annotations

import json
import os

from nbspam.cli.prediction_lines import predictions, tsv_cell
from nbspam.core.jsonl import json_line
from nbspam.models.decision import Prediction

LABELS = ("ham", "spam")
SPAM = Prediction("a.eml", "spam", (0.25, 0.75), 1.0986, "unsure", 0.6)
THREE = Prediction("b.eml", "y", (0.2, 0.5, 0.3))


def test_predictions_as_text():
    assert list(predictions([SPAM], LABELS, "text")) == [
        "a.eml: unsure (log-odds +1.099, probability of spam 0.7500, calibrated P(spam) 0.6000)"
    ]
    assert list(predictions([THREE], ("x", "y", "z"), "text")) == ["b.eml: y (probability 0.5000)"]


def test_predictions_as_jsonl():
    (line,) = predictions([SPAM], LABELS, "jsonl")
    assert json.loads(line) == {
        "path": "a.eml",
        "label": "spam",
        "probability": 0.75,
        "probabilities": {"ham": 0.25, "spam": 0.75},
        "log_odds": 1.0986,
        "verdict": "unsure",
        "calibrated": 0.6,
    }


def test_predictions_as_tsv():
    assert list(predictions([SPAM], LABELS, "tsv")) == [
        "path\tlabel\tprobability\tlog_odds\tverdict\tcalibrated\tp_ham\tp_spam",
        "a.eml\tspam\t0.75\t1.0986\tunsure\t0.6\t0.25\t0.75",
    ]


def test_json_line_escapes_bytes_that_are_not_utf8():
    name = os.fsdecode(b"a\xff\xfeb.eml")
    line = json_line({"path": name, "word": "café"})
    assert line == '{"path": "a\\udcff\\udcfeb.eml", "word": "café"}'
    line.encode("utf-8")  # valid UTF-8
    assert os.fsencode(json.loads(line)["path"]) == b"a\xff\xfeb.eml"


def test_tsv_cells_escape_what_would_break_a_row():
    assert tsv_cell("plain") == "plain"
    assert tsv_cell("a\tb\nc\rd\\e") == "a\\tb\\nc\\rd\\\\e"
    assert tsv_cell(os.fsdecode(b"x\xffy")) == "x\\xffy"
    assert tsv_cell("\ud800") == "\\ud800"  # a lone surrogate that is no byte
