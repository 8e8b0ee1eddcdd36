"""bench/speed.py's ratio history: what makes `make bench` fail (the comparison is pure)."""

from __future__ import annotations

import importlib.util

from tests.helpers import ROOT

_spec = importlib.util.spec_from_file_location("bench_speed", ROOT / "bench" / "speed.py")
speed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(speed)


def test_a_ratio_more_than_a_tenth_worse_is_a_regression():
    last = {"train / bogofilter": 1.20, "score / bogofilter": 1.00, "score / scikit-learn": 0.5}
    now = {"train / bogofilter": 1.45, "score / bogofilter": 1.10, "score / scikit-learn": 0.3}
    assert speed.regressions(now, last) == ["train / bogofilter 1.45x, was 1.20x (+21%)"]
    assert speed.regressions(now, {}) == []  # nothing recorded: nothing to compare
    assert speed.regressions({"train / bogofilter": 1.33}, last) == [
        "train / bogofilter 1.33x, was 1.20x (+11%)"
    ]


def test_the_history_is_appended_and_compared_with_the_last_good_row(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# Results\n\nearlier runs\n")
    run = {
        "corpus": "spamassassin",
        "ratios": {"train / bogofilter": 1.2, "score / bogofilter": 1.0},
    }
    assert speed.append_history(results, "2026-11-27", "abc1234", [run]) == []
    text = results.read_text()
    assert text.startswith("# Results\n\nearlier runs\n\n## Ratio history\n\n")
    assert text.endswith(
        "| 2026-11-27 | abc1234 | spamassassin | 1.20x | 1.00x | - | - | - | ok |\n"
    )
    slower = {
        "corpus": "spamassassin",
        "ratios": {"train / bogofilter": 1.5, "score / bogofilter": 1.0},
    }
    assert speed.append_history(results, "2026-11-28", "def5678", [slower]) == [
        "spamassassin: train / bogofilter 1.50x, was 1.20x (+25%)"
    ]
    rows = speed.history_rows(results.read_text())
    assert [r["verdict"] for r in rows] == [
        "ok",
        "regression: train / bogofilter 1.50x, was 1.20x (+25%)",
    ]
    # a regressed row is no new reference: the next run is compared with the last good one
    assert speed.last_recorded(rows, "spamassassin") == run["ratios"]
    assert speed.last_recorded(rows, "enron1") == {}
