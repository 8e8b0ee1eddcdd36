"""The decision: verdicts by cutoffs, Platt calibration and the two-class posteriors, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nbspam.models import naive_bayes as nb
from nbspam.models.decision import (
    UNSURE,
    calibrated_probability,
    log_posterior_two,
    prediction,
    verdict,
)


@pytest.mark.parametrize(
    "log_odds, cutoffs, expected",
    [
        (0.0, None, "ham"),  # exactly 0 is the negative class: + iff w.x + b > 0
        (1e-300, None, "spam"),
        (0.0, (0.0, 0.0), "ham"),  # (0, 0) is the Bayes decision, not a spam cutoff at 0
        (-2.0, (-2.0, 3.0), UNSURE),  # ham strictly below the ham cutoff
        (-2.0000001, (-2.0, 3.0), "ham"),
        (3.0, (-2.0, 3.0), "spam"),  # spam from the spam cutoff on
        (2.9999999, (-2.0, 3.0), UNSURE),
        (math.inf, (-math.inf, math.inf), "spam"),
        (-1e308, (-math.inf, math.inf), UNSURE),
    ],
)
def test_verdict_at_the_edges(log_odds, cutoffs, expected):
    assert verdict(log_odds, cutoffs, "spam", "ham") == expected


def test_calibrated_probability_by_hand():
    assert calibrated_probability(None, 5.0) is None
    # a = 0.5, b = -1: z = 0.5 * 4 - 1 = 1, 1 / (1 + e^-1)
    assert calibrated_probability((0.5, -1.0), 4.0) == pytest.approx(1 / (1 + math.exp(-1)))
    assert calibrated_probability((0.5, -1.0), 2.0) == 0.5
    # no overflow far out on either side
    assert calibrated_probability((1.0, 0.0), 1e6) == 1.0
    assert calibrated_probability((1.0, 0.0), -1e6) == 0.0


@pytest.mark.parametrize("s", [-800.0, -30.0, -1.5, 0.0, 1e-12, 2.0, 40.0, 800.0])
@pytest.mark.parametrize("positive", [0, 1])
def test_two_class_posteriors_sum_to_one_and_match_numpy(s, positive):
    logs = log_posterior_two(s, positive)
    assert logs[positive] - logs[1 - positive] == pytest.approx(s, abs=1e-9)
    assert math.fsum(map(math.exp, logs)) == pytest.approx(1.0)
    batch = nb.log_posterior_two(np.array([s]), positive)[0]
    assert logs == batch.tolist()  # the same floats as the batch scorer's


def test_prediction_of_two_classes():
    p = prediction(
        "m",
        ("ham", "spam"),
        log_posterior_two(2.0, 1),
        2.0,
        positive="spam",
        cutoffs=(-1.0, 1.5),
        calibration=(1.0, 0.0),
    )
    assert (p.label, p.verdict, p.log_odds) == ("spam", "spam", 2.0)
    assert p.calibrated == pytest.approx(1 / (1 + math.exp(-2.0)))
    assert p.probabilities[1] == pytest.approx(1 / (1 + math.exp(-2.0)))


def test_prediction_of_three_classes_takes_the_most_probable():
    logs = [math.log(0.2), math.log(0.5), math.log(0.3)]
    p = prediction("m", ("a", "b", "c"), logs, None, positive=None, cutoffs=None, calibration=None)
    assert (p.label, p.log_odds, p.verdict, p.calibrated) == ("b", None, None, None)
    assert sum(p.probabilities) == pytest.approx(1.0)


def test_calibrated_probability_is_held_on_the_side_of_its_verdict():
    # Platt 1/2 at log-odds 2 (a = 0.5, b = -1); cutoffs ham below 5, spam from 6
    cal, cut = (0.5, -1.0), (5.0, 6.0)
    # the spam verdict from 6: Platt gives more than 1/2 there, unchanged
    assert calibrated_probability(cal, 6.0, cut) == pytest.approx(1 / (1 + math.exp(-2)))
    # unsure between: the Platt value itself
    assert calibrated_probability(cal, 5.5, cut) == pytest.approx(1 / (1 + math.exp(-1.75)))
    # the ham verdict at 4.9, where Platt says 0.81: no more than 1/2
    assert calibrated_probability(cal, 4.9, cut) == 0.5
    # cutoffs above Platt's 1/2 the other way: a spam verdict at -4 where Platt says 0.05
    assert calibrated_probability(cal, -4.0, (-5.0, -4.0)) == 0.5
    # without cutoffs, the Bayes decision: ham at 0 (Platt 0.27), spam above
    assert calibrated_probability((1.0, 1.0), -0.5, None) == 0.5
    assert calibrated_probability((1.0, -1.0), 0.5, None) == 0.5


@given(
    a=st.floats(0.0, 10.0),
    b=st.floats(-50.0, 50.0),
    cuts=st.tuples(st.floats(-100, 100), st.floats(-100, 100)).map(sorted),
    xs=st.lists(st.floats(-200, 200), min_size=2, max_size=20),
)
def test_calibrated_probability_is_monotone_and_agrees_with_the_verdict(a, b, cuts, xs):
    cutoffs = tuple(cuts)
    xs = sorted(xs)
    ps = [calibrated_probability((a, b), x, cutoffs) for x in xs]
    assert all(p <= q for p, q in zip(ps, ps[1:]))
    for x, p in zip(xs, ps):
        said = verdict(x, cutoffs, "spam", "ham")
        assert p >= 0.5 if said == "spam" else True
        assert p <= 0.5 if said == "ham" else True
