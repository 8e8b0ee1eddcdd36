"""Robinson–Fisher combining against MATH.md: hand-computed values and scipy as an oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2

from nbspam.fisher import (
    BACKGROUND,
    STRENGTH,
    fisher_log_odds,
    is_clue,
    log_chi2_cdf,
    log_chi2_sf,
    word_probabilities,
)


def test_word_probabilities_by_hand():
    # rows: ham (0), spam (1); 20 ham and 10 spam messages
    doc_count = np.array([[1, 0, 5, 0], [3, 2, 0, 0]])
    class_count = np.array([20, 10])
    f = word_probabilities(doc_count, class_count, positive=1)
    s, x = STRENGTH, BACKGROUND
    p = (3 / 10) / (3 / 10 + 1 / 20)  # the first word: in 3 of 10 spam, 1 of 20 ham
    assert f[0] == pytest.approx((s * x + 4 * p) / (s + 4))
    assert f[1] == pytest.approx((s * x + 2 * 1.0) / (s + 2))  # spam only
    assert f[2] == pytest.approx((s * x + 5 * 0.0) / (s + 5))  # ham only
    assert f[3] == pytest.approx(x)  # in no message: the background
    # the positive class's row decides the direction
    flipped = word_probabilities(doc_count[::-1], class_count[::-1], positive=0)
    np.testing.assert_array_equal(flipped, f)


def test_clues_are_the_words_far_from_one_half():
    assert is_clue(0.875) and is_clue(0.125) and not is_clue(0.87) and not is_clue(0.52)
    assert is_clue(0.5, min_dev=0.0)


@pytest.mark.parametrize("m", [0.01, 0.5, 3.0, 40.0, 300.0])
@pytest.mark.parametrize("k", [1, 2, 5, 40])
def test_the_tails_agree_with_scipy(m, k):
    sf = chi2.sf(2 * m, 2 * k)
    if sf > 1e-300:
        assert log_chi2_sf(m, k) == pytest.approx(math.log(sf), rel=1e-9, abs=1e-12)
    cdf = chi2.cdf(2 * m, 2 * k)
    if cdf > 1e-300:
        assert log_chi2_cdf(m, k) == pytest.approx(math.log(cdf), rel=1e-9, abs=1e-12)


def test_the_tails_by_hand_for_two_and_four_degrees():
    # Q(2m, 2) = e^-m and Q(2m, 4) = e^-m (1 + m)
    assert log_chi2_sf(3.0, 1) == pytest.approx(-3.0)
    assert log_chi2_sf(3.0, 2) == pytest.approx(-3.0 + math.log(4.0))
    # far beyond float64 the log is still exact
    assert log_chi2_sf(5000.0, 1) == pytest.approx(-5000.0)
    assert math.isfinite(log_chi2_cdf(0.001, 300)) and log_chi2_cdf(0.001, 300) < -1000


@pytest.mark.parametrize("f", [0.01, 0.2, 0.5, 0.9, 0.999])
def test_one_clue_scores_its_own_probability(f):
    # with k = 1: H = f, S = 1 - f, so I = f and logit(I) = logit(f)
    assert fisher_log_odds(math.log(f), math.log1p(-f), 1) == pytest.approx(
        math.log(f / (1 - f)), abs=1e-12
    )


def test_no_clue_is_one_half_and_swapping_the_classes_negates():
    assert fisher_log_odds(0.0, 0.0, 0) == 0.0
    fs = [0.99, 0.95, 0.02, 0.97]
    spam = sum(map(math.log, fs)), sum(math.log1p(-f) for f in fs)
    assert fisher_log_odds(*spam, 4) == pytest.approx(-fisher_log_odds(spam[1], spam[0], 4))


def test_the_score_keeps_its_order_where_I_saturates():
    # 60 and 80 clues of f = 0.999: I rounds to 1.0 for both, logit(I) still ranks them
    scores = []
    for k in (60, 80):
        sums = k * math.log(0.999), k * math.log1p(-0.999)
        h, s = chi2.sf(-2 * sums[0], 2 * k), chi2.sf(-2 * sums[1], 2 * k)
        assert (1 + h - s) / 2 == 1.0
        scores.append(fisher_log_odds(*sums, k))
    assert math.isfinite(scores[1]) and scores[1] > scores[0] > 30


def test_logit_i_matches_the_direct_formula_where_it_does_not_saturate():
    fs = [0.9, 0.2, 0.95, 0.7, 0.99, 0.05]
    k = len(fs)
    sum_f, sum_not = sum(map(math.log, fs)), sum(math.log1p(-f) for f in fs)
    h, s = chi2.sf(-2 * sum_f, 2 * k), chi2.sf(-2 * sum_not, 2 * k)
    i = (1 + h - s) / 2
    assert fisher_log_odds(sum_f, sum_not, k) == pytest.approx(math.log(i / (1 - i)), rel=1e-9)
