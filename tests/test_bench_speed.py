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
    assert speed.regressions(now, last) == [
        "train / bogofilter 1.45x, the recent median 1.20x (+21%)"
    ]
    assert speed.regressions(now, {}) == []  # nothing recorded: nothing to compare
    assert speed.regressions({"train / bogofilter": 1.33}, last) == [
        "train / bogofilter 1.33x, the recent median 1.20x (+11%)"
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
        "spamassassin: train / bogofilter 1.50x, the recent median 1.20x (+25%)"
    ]
    rows = speed.history_rows(results.read_text())
    assert [r["verdict"] for r in rows] == [
        "ok",
        "regression: train / bogofilter 1.50x, the recent median 1.20x (+25%)",
    ]
    # the reference is each ratio's median over the corpus's last five rows, flagged or not
    assert speed.recent_median(rows, "spamassassin") == {
        "train / bogofilter": 1.35,
        "score / bogofilter": 1.0,
    }
    assert speed.recent_median(rows, "enron1") == {}


def test_one_quick_run_of_the_other_tool_is_not_the_bar_of_every_run_after_it(tmp_path):
    """A row whose bogofilter ran quickly (score 1.54x where the runs around it gave some
    1.75x) does not flag the next runs at their usual ratio; a ratio that jumps is flagged,
    and one that stays up becomes the median three runs later."""
    results = tmp_path / "RESULTS.md"

    def run(ratio: float) -> list[str]:
        row = {"corpus": "spamassassin", "ratios": {"score / bogofilter": ratio}}
        return speed.append_history(results, "2026-11-28", "abc1234", [row])

    for ratio in (1.76, 1.74, 1.54, 1.78, 1.70):
        assert run(ratio) == []
    assert run(1.83) == []  # the median of 1.76, 1.74, 1.54, 1.78, 1.70 is 1.74: +5%
    assert run(2.20) == ["spamassassin: score / bogofilter 2.20x, the recent median 1.74x (+26%)"]
    assert run(2.20) == ["spamassassin: score / bogofilter 2.20x, the recent median 1.78x (+24%)"]
    assert run(2.20) == ["spamassassin: score / bogofilter 2.20x, the recent median 1.83x (+20%)"]
    assert run(2.20) == []  # three of the last five: the median now
