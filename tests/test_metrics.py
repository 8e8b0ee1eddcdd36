"""Tests of nbspam.fit.metrics: hand-computed values, scikit-learn agreement, calibration, cutoffs."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from nbspam.fit import metrics as m

# --------------------------------------------------------------------------------------------
# Hand-computed values
# --------------------------------------------------------------------------------------------


def test_auc_hand_computed():
    # positives 0.35, 0.8; negatives 0.1, 0.4.
    # pairs (pos, neg): (0.35, 0.1) win, (0.35, 0.4) loss, (0.8, 0.1) win, (0.8, 0.4) win
    # -> 3 / 4
    assert m.roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75


def test_auc_and_roc_with_a_tie():
    scores = [0.5, 0.5, 0.2, 0.9]
    labels = [1, 0, 0, 1]
    # positives 0.5, 0.9; negatives 0.5, 0.2.
    # (0.5, 0.5) tie -> 1/2, (0.5, 0.2) 1, (0.9, 0.5) 1, (0.9, 0.2) 1 -> 3.5 / 4
    assert m.roc_auc(scores, labels) == 0.875
    fpr, tpr, thr = m.roc_curve(scores, labels)
    # threshold +inf: nothing positive; 0.9: one spam; 0.5: the tied pair moves together
    np.testing.assert_array_equal(thr, [np.inf, 0.9, 0.5, 0.2])
    np.testing.assert_array_equal(tpr, [0.0, 0.5, 1.0, 1.0])
    np.testing.assert_array_equal(fpr, [0.0, 0.0, 0.5, 1.0])


def test_roc_auc_extremes():
    assert m.roc_auc([1, 2, 3, 4], [0, 0, 1, 1]) == 1.0
    assert m.roc_auc([4, 3, 2, 1], [0, 0, 1, 1]) == 0.0
    assert m.roc_auc([7, 7, 7, 7], [0, 1, 0, 1]) == 0.5  # all tied: every pair counts 1/2


def test_recall_at_fpr_keeps_ties_together():
    # descending: 0.9 s | 0.7 s, 0.7 s, 0.7 h | 0.5 s | 0.3 h | 0.2 h | 0.1 h   (4 spam, 4 ham)
    scores = [0.9, 0.7, 0.7, 0.7, 0.5, 0.3, 0.2, 0.1]
    spam = [True, True, True, False, True, False, False, False]
    # fpr 0: the 0.7 group holds a ham, so it cannot be admitted partly -> threshold 0.9,
    # recall 1/4 (an optimistic split would claim 3/4)
    assert m.recall_at_fpr(scores, spam, 0.0) == (0.25, 0.9)
    # fpr <= 1/4 admits one ham: threshold 0.5 gives TP = 4, FP = 1 -> recall 1
    assert m.recall_at_fpr(scores, spam, 0.25) == (1.0, 0.5)
    assert m.recall_at_fpr(scores, spam, 0.24) == (0.25, 0.9)
    # nothing admissible but the empty prediction
    assert m.recall_at_fpr([1.0, 2.0], [1, 0], 0.0) == (0.0, math.inf)


def test_recall_at_fpr_returns_the_highest_threshold_of_best_recall():
    # descending: 3 s | 2 h | 1 h ; fpr <= 1: recall 1 already at threshold 3 (fpr 0)
    assert m.recall_at_fpr([3.0, 2.0, 1.0], [1, 0, 0], 1.0) == (1.0, 3.0)


def test_mcc_2x2_hand_computed():
    # TP = 3, TN = 4, FP = 1, FN = 2 (spam positive)
    y_true = ["spam"] * 3 + ["ham"] * 4 + ["ham"] * 1 + ["spam"] * 2
    y_pred = ["spam"] * 3 + ["ham"] * 4 + ["spam"] * 1 + ["ham"] * 2
    # (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (12 - 2) / sqrt(4*5*5*6)
    expected = 10 / math.sqrt(600)
    assert m.matthews_corrcoef(y_true, y_pred, ["ham", "spam"]) == pytest.approx(expected, 1e-15)
    np.testing.assert_array_equal(
        m.confusion_matrix(y_true, y_pred, ["ham", "spam"]), [[4, 1], [2, 3]]
    )


def _from_matrix(cm, labels):
    y_true, y_pred = [], []
    for i, row in enumerate(cm):
        for j, count in enumerate(row):
            y_true += [labels[i]] * count
            y_pred += [labels[j]] * count
    return y_true, y_pred


def test_mcc_3x3_hand_computed():
    cm = [[3, 1, 0], [1, 2, 1], [0, 0, 2]]
    labels = ["a", "b", "c"]
    y_true, y_pred = _from_matrix(cm, labels)
    # s = 10, c = trace = 7, true counts t = (4, 4, 2), predicted counts p = (4, 3, 3)
    # numerator   = c s - sum p t = 70 - (16 + 12 + 6) = 36
    # denominator = sqrt((s^2 - sum p^2)(s^2 - sum t^2)) = sqrt((100 - 34)(100 - 36))
    expected = 36 / math.sqrt(66 * 64)
    assert m.matthews_corrcoef(y_true, y_pred, labels) == pytest.approx(expected, 1e-15)
    np.testing.assert_array_equal(m.confusion_matrix(y_true, y_pred, labels), cm)
    # a label without items changes nothing
    assert m.matthews_corrcoef(y_true, y_pred, [*labels, "d"]) == pytest.approx(expected, 1e-15)


def test_mcc_undefined_is_zero():
    # every prediction the same: s^2 - sum p^2 = 0
    assert m.matthews_corrcoef(["a", "b", "a"], ["a", "a", "a"], ["a", "b"]) == 0.0


def test_brier_and_log_loss_hand_computed():
    p = [0.9, 0.2, 0.6]
    y = [1, 0, 0]
    # Brier: ((0.9 - 1)^2 + 0.2^2 + 0.6^2) / 3 = (0.01 + 0.04 + 0.36) / 3 = 0.41 / 3
    assert m.brier_score(p, y) == pytest.approx(0.41 / 3, 1e-14)
    # log loss: -(ln 0.9 + ln 0.8 + ln 0.4) / 3 = -ln(0.288) / 3
    assert m.log_loss(p, y) == pytest.approx(-math.log(0.288) / 3, 1e-14)


def test_log_loss_clips():
    # a certain mistake costs -ln(eps)
    assert m.log_loss([0.0], [1], eps=1e-15) == pytest.approx(-math.log(1e-15), 1e-12)
    assert m.log_loss([1.0], [1]) == pytest.approx(-math.log(1 - 1e-15), 1e-6)


def test_accuracy_and_prf_hand_computed():
    y_true = ["spam", "spam", "ham", "ham", "spam"]
    y_pred = ["spam", "unsure", "ham", "spam", "ham"]
    assert m.accuracy(y_true, y_pred) == 0.4  # 2 of 5 agree
    out = m.precision_recall_f1(y_true, y_pred, ["ham", "spam"])
    # spam: TP 1, predicted 2, true 3 -> P 1/2, R 1/3, F1 2*1/(2+3) = 0.4
    assert out["spam"] == {"precision": 0.5, "recall": 1 / 3, "f1": 0.4, "support": 3}
    # ham: TP 1, predicted 2, true 2 -> 1/2 each
    assert out["ham"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2}
    # a label never predicted nor present: zero division gives 0.0
    out = m.precision_recall_f1(y_true, y_pred, ["other"])
    assert out["other"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}


def test_confusion_matrix_with_unsure_column():
    y_true = ["ham", "spam", "spam", "ham"]
    y_pred = ["ham", "unsure", "spam", "unsure"]
    cm = m.confusion_matrix(y_true, y_pred, ["ham", "spam"], pred_labels=["ham", "spam", "unsure"])
    assert cm.dtype == np.int64
    np.testing.assert_array_equal(cm, [[1, 0, 1], [0, 1, 1]])
    with pytest.raises(ValueError, match="unsure"):
        m.confusion_matrix(y_true, y_pred, ["ham", "spam"])


def test_reliability_table_hand_computed():
    rows = m.reliability_table([0.0, 0.1, 0.55, 1.0, 0.25], [0, 0, 1, 1, 1], n_bins=4)
    assert [r["count"] for r in rows] == [2, 1, 1, 1]  # 0.25 opens bin 1; 1.0 is in the last
    assert rows[0]["lower"] == 0.0 and rows[0]["upper"] == 0.25
    assert rows[0]["mean_predicted"] == pytest.approx(0.05)
    assert rows[0]["fraction_positive"] == 0.0
    assert rows[3]["mean_predicted"] == 1.0 and rows[3]["fraction_positive"] == 1.0
    rows = m.reliability_table([0.05, 0.95], [0, 1], n_bins=10)
    assert len(rows) == 10
    assert rows[5] == {
        "lower": 0.5,
        "upper": 0.6,
        "count": 0,
        "mean_predicted": None,
        "fraction_positive": None,
    }
    assert sum(r["count"] for r in rows) == 2


# --------------------------------------------------------------------------------------------
# Agreement with scikit-learn
# --------------------------------------------------------------------------------------------

SEEDS = [0, 1, 2, 3, 4]


def _random_scored(seed, n=300):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    # rounding makes many ties, within and across classes
    scores = np.round(rng.normal(size=n) + 1.2 * y, 1)
    return scores, y


@pytest.mark.parametrize("seed", SEEDS)
def test_roc_agrees_with_sklearn(seed):
    scores, y = _random_scored(seed)
    assert m.roc_auc(scores, y) == pytest.approx(skm.roc_auc_score(y, scores), abs=1e-12)
    fpr, tpr, thr = m.roc_curve(scores, y)
    sk_fpr, sk_tpr, sk_thr = skm.roc_curve(y, scores, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr, atol=1e-12)
    np.testing.assert_allclose(tpr, sk_tpr, atol=1e-12)
    np.testing.assert_array_equal(thr, sk_thr)
    # list input and 0/1 labels give the same answer
    assert m.roc_auc(scores.tolist(), y.astype(int).tolist()) == m.roc_auc(scores, y)


@pytest.mark.parametrize("seed", SEEDS)
def test_recall_at_fpr_agrees_with_brute_force(seed):
    scores, y = _random_scored(seed, n=80)
    n_neg = np.count_nonzero(~y)
    for max_fpr in (0.0, 0.01, 0.05, 0.1, 0.5, 1.0):
        best = (0.0, math.inf)
        for t in sorted(set(scores.tolist()), reverse=True):
            fp = np.count_nonzero((scores >= t) & ~y)
            tp = np.count_nonzero((scores >= t) & y)
            if fp / n_neg <= max_fpr and tp / np.count_nonzero(y) > best[0]:
                best = (tp / np.count_nonzero(y), t)
        assert m.recall_at_fpr(scores, y, max_fpr) == best


def _random_labels(seed, n=250):
    rng = np.random.default_rng(seed)
    labels = ["ham", "spam", "other"]
    y_true = rng.choice(labels, size=n, p=[0.5, 0.35, 0.15])
    noise = rng.random(n) < 0.3
    y_pred = np.where(noise, rng.choice(labels, size=n), y_true)
    return labels, y_true, y_pred


@pytest.mark.parametrize("seed", SEEDS)
def test_label_metrics_agree_with_sklearn(seed):
    labels, y_true, y_pred = _random_labels(seed)
    np.testing.assert_array_equal(
        m.confusion_matrix(y_true, y_pred, labels),
        skm.confusion_matrix(y_true, y_pred, labels=labels),
    )
    p, r, f, s = skm.precision_recall_fscore_support(
        y_true, y_pred, labels=labels, zero_division=0.0
    )
    out = m.precision_recall_f1(y_true, y_pred, labels)
    for i, lab in enumerate(labels):
        assert out[lab]["precision"] == pytest.approx(p[i], abs=1e-12)
        assert out[lab]["recall"] == pytest.approx(r[i], abs=1e-12)
        assert out[lab]["f1"] == pytest.approx(f[i], abs=1e-12)
        assert out[lab]["support"] == s[i]
    assert m.accuracy(y_true, y_pred) == pytest.approx(
        skm.accuracy_score(y_true, y_pred), abs=1e-12
    )
    assert m.accuracy(list(y_true), list(y_pred)) == m.accuracy(y_true, y_pred)
    assert m.matthews_corrcoef(y_true, y_pred, labels) == pytest.approx(
        skm.matthews_corrcoef(y_true, y_pred), abs=1e-12
    )
    # the binary case, spam against the rest
    bt, bp = y_true == "spam", y_pred == "spam"
    assert m.matthews_corrcoef(bt, bp, [False, True]) == pytest.approx(
        skm.matthews_corrcoef(bt, bp), abs=1e-12
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_probability_metrics_agree_with_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = 200
    prob = rng.uniform(0.001, 0.999, size=n)
    y = rng.random(n) < prob
    assert m.brier_score(prob, y) == pytest.approx(skm.brier_score_loss(y, prob), abs=1e-12)
    assert m.log_loss(prob, y) == pytest.approx(skm.log_loss(y, prob), abs=1e-12)


# --------------------------------------------------------------------------------------------
# Platt scaling
# --------------------------------------------------------------------------------------------


def _logistic_data(seed, n, a, b, spread):
    rng = np.random.default_rng(seed)
    s = rng.normal(scale=spread, size=n)
    y = rng.random(n) < 1.0 / (1.0 + np.exp(-(a * s + b)))
    return s, y


def test_platt_recovers_known_parameters():
    s, y = _logistic_data(0, 20_000, a=1.5, b=-0.5, spread=2.0)
    a, b = m.fit_platt(s, y)
    assert a == pytest.approx(1.5, abs=0.1)
    assert b == pytest.approx(-0.5, abs=0.1)


def test_platt_on_huge_scores_is_finite_and_quiet():
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        # not separable: a logistic model on the scale of thousands
        s, y = _logistic_data(1, 5_000, a=0.002, b=0.3, spread=2_000.0)
        s = np.clip(s, -5_000.0, 5_000.0)
        a, b = m.fit_platt(s, y)
        assert a == pytest.approx(0.002, abs=0.0005)
        assert b == pytest.approx(0.3, abs=0.15)
        # perfectly separated at +-5000: the regularised targets keep (a, b) finite
        s = np.r_[np.full(50, -5_000.0), np.full(50, 5_000.0)]
        y = np.r_[np.zeros(50, bool), np.ones(50, bool)]
        a, b = m.fit_platt(s, y)
        assert math.isfinite(a) and math.isfinite(b) and a > 0
        p = m.apply_platt(s, a, b)
        assert np.all(np.isfinite(p))
        # the fit reproduces the targets t+ = 51/52 and t- = 1/52
        assert p[-1] == pytest.approx(51 / 52, abs=1e-6)
        assert p[0] == pytest.approx(1 / 52, abs=1e-6)


def test_apply_platt_does_not_overflow():
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        p = m.apply_platt(np.array([-1e308, -1e4, 0.0, 1e4, 1e308]), 1e3, 0.0)
    np.testing.assert_array_equal(p, [0.0, 0.0, 0.5, 1.0, 1.0])
    assert m.apply_platt([0.0], 2.0, math.log(3.0))[0] == pytest.approx(0.75)


def test_platt_improves_log_loss_of_overconfident_scores():
    rng = np.random.default_rng(7)
    n = 8_000
    z = rng.normal(scale=1.5, size=n)  # true log-odds
    y = rng.random(n) < 1.0 / (1.0 + np.exp(-z))
    s = 40.0 * z  # naive Bayes style overconfidence
    train, test = slice(0, n // 2), slice(n // 2, n)
    a, b = m.fit_platt(s[train], y[train])
    saturated = m.log_loss(m.apply_platt(s[test], 1.0, 0.0), y[test])
    calibrated = m.log_loss(m.apply_platt(s[test], a, b), y[test])
    oracle = m.log_loss(1.0 / (1.0 + np.exp(-z[test])), y[test])
    assert calibrated < saturated
    assert calibrated == pytest.approx(oracle, abs=0.01)
    assert a == pytest.approx(1 / 40, rel=0.15)


def test_platt_with_constant_scores_or_one_class():
    a, b = m.fit_platt([2.0, 2.0, 2.0, 2.0], [1, 1, 1, 0])
    # targets: 3 spam at 4/5, 1 ham at 1/3 -> mean 0.6833..., a = 0, b = its logit
    t = (3 * 0.8 + 1 / 3) / 4
    assert a == 0.0 and b == pytest.approx(math.log(t / (1 - t)))
    a, b = m.fit_platt([1.0, 2.0, 3.0], [1, 1, 1])
    assert math.isfinite(a) and math.isfinite(b)


# --------------------------------------------------------------------------------------------
# Cutoff choice
# --------------------------------------------------------------------------------------------

# ham -3, -2, -1, 0.5, 0.6; spam 0, 1, 2, 3.
# sorted: -3h -2h -1h 0s 0.5h 0.6h 1s 2s 3s
# candidate cutoffs: -inf, -2.5, -1.5, -0.5, 0.25, 0.55, 0.8, 1.5, 2.5, +inf
HAND_SCORES = [-3.0, -2.0, -1.0, 0.5, 0.6, 0.0, 1.0, 2.0, 3.0]
HAND_SPAM = [False] * 5 + [True] * 4


def test_fpr_upper_bound_by_hand():
    # k = 0: (1 - p)^n = 1 - confidence; k = n: 1; k = 1 of 2 at 80%: 1 - p^2 = 0.2
    assert m.fpr_upper_bound(0, 10, 0.8) == pytest.approx(1 - 0.2**0.1)
    assert m.fpr_upper_bound([0, 2], 2, 0.8).tolist() == [pytest.approx(1 - 0.2**0.5), 1.0]
    assert m.fpr_upper_bound(1, 2, 0.8) == pytest.approx(math.sqrt(0.8))


def test_bound_cutoff_holds_where_the_point_estimate_does_not():
    # 2,000 ham scored 0 ... 1999 and 100 spam at 5000, a target of 0.1%: the point estimate
    # lets the top 2 ham through (2 / 2000 = 0.1%), but 2 of 2,000 bound the rate at 0.21%
    # with 80% confidence and 1 at 0.15%: only none (0.08%) holds: above the top ham, 1999.
    scores = np.r_[np.arange(2000.0), np.full(100, 5000.0)]
    spam = np.r_[np.zeros(2000, bool), np.ones(100, bool)]
    assert m.choose_cutoffs_for_fpr(scores, spam, 0.001) == 1997.5
    ham_cut, spam_cut = m.choose_cutoffs_for_bound(scores, spam, 0.001, confidence=0.8)
    assert spam_cut == 3499.5  # the midpoint between 1999 and 5000
    assert ham_cut == spam_cut  # no spam below: an unsure band would only cost
    # a margin raises the spam cutoff; the ham below it may then be unsure or ham
    assert m.choose_cutoffs_for_bound(scores, spam, 0.001, confidence=0.8, margin=1.0)[1] == 3500.5


def test_fpr_cutoff_hand_computed():
    # fpr 0: the cutoff must exceed the top ham 0.6 -> 0.8
    assert m.choose_cutoffs_for_fpr(HAND_SCORES, HAND_SPAM, 0.0) == 0.8
    # fpr <= 1/5: ham 0.6 may pass -> 0.55 (0.25 would let 0.5 through too: 2/5)
    assert m.choose_cutoffs_for_fpr(HAND_SCORES, HAND_SPAM, 0.2) == 0.55
    # fpr <= 2/5: 0.5 and 0.6 may pass; -0.5 is the lowest with FP = 2 (-1.5 has FP = 3)
    assert m.choose_cutoffs_for_fpr(HAND_SCORES, HAND_SPAM, 0.4) == -0.5
    assert m.choose_cutoffs_for_fpr(HAND_SCORES, HAND_SPAM, 1.0) == -math.inf
    # the top group holds ham: only +inf has fpr 0
    assert m.choose_cutoffs_for_fpr([1.0, 1.0, 0.0], [1, 0, 1], 0.0) == math.inf


def test_cost_cutoffs_hand_computed():
    # no FP needs spam cutoff >= 0.8, no FN needs ham cutoff <= -0.5.
    # (-0.5, 0.8): 3 unsure (0, 0.5, 0.6)        -> 3 * 0.2          = 0.6
    # (0.8, 0.8):  1 FN (0), no unsure            -> 1 * 1            = 1.0
    # (0.25, 0.8): 1 FN, 2 unsure                 -> 1 + 0.4          = 1.4
    # any FP costs >= 10
    assert m.choose_cutoffs_by_cost(HAND_SCORES, HAND_SPAM) == (-0.5, 0.8)
    # unsure at 0.6 each: (-0.5, 0.8) costs 1.8 > 1.0
    assert m.choose_cutoffs_by_cost(HAND_SCORES, HAND_SPAM, cost_unsure=0.6) == (0.8, 0.8)
    # a tie: 3 * 0.7 = 2.1 = 1 * 2.1 (in floats 0.7 * 3 = 2.0999999999999996 < 2.1);
    # the narrowest band wins
    assert m.choose_cutoffs_by_cost(HAND_SCORES, HAND_SPAM, cost_fn=2.1, cost_unsure=0.7) == (
        0.8,
        0.8,
    )
    # free abstention: widest band is not preferred, the narrowest zero-cost band is
    # (-0.5, 0.8) costs 0; so does (-inf, +inf) but it is wider
    assert m.choose_cutoffs_by_cost(HAND_SCORES, HAND_SPAM, cost_unsure=0.0) == (-0.5, 0.8)
    # everything free: no band, lowest spam cutoff
    assert m.choose_cutoffs_by_cost(
        HAND_SCORES, HAND_SPAM, cost_fp=0, cost_fn=0, cost_unsure=0
    ) == (-math.inf, -math.inf)


def _brute_force_cutoffs(scores, spam, cost_fp, cost_fn, cost_unsure):
    """All pairs of candidate cutoffs, exact rational costs, the documented tie-breaking."""
    v = sorted(set(scores))
    cands = [-math.inf] + [(a + b) / 2 for a, b in zip(v[:-1], v[1:], strict=True)] + [math.inf]
    cf, cn, cu = (Fraction(str(c)) for c in (cost_fp, cost_fn, cost_unsure))
    best = None
    for i, h in enumerate(cands):
        for j in range(i, len(cands)):
            c = cands[j]
            fp = sum(1 for s, y in zip(scores, spam, strict=True) if s >= c and not y)
            fn = sum(1 for s, y in zip(scores, spam, strict=True) if s < h and y)
            un = sum(1 for s in scores if h <= s < c)
            key = (cf * fp + cn * fn + cu * un, un, j)
            if best is None or key < best[0]:
                best = (key, (h, c))
    return best


def _cost_of(scores, spam, cutoffs, cost_fp, cost_fn, cost_unsure):
    h, c = cutoffs
    fp = sum(1 for s, y in zip(scores, spam, strict=True) if s >= c and not y)
    fn = sum(1 for s, y in zip(scores, spam, strict=True) if s < h and y)
    un = sum(1 for s in scores if h <= s < c)
    cf, cn, cu = (Fraction(str(x)) for x in (cost_fp, cost_fn, cost_unsure))
    return cf * fp + cn * fn + cu * un


COSTS = st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 2.1, 3.0, 10.0])


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.integers(-6, 6), st.booleans()),
        min_size=1,
        max_size=14,
    ),
    cost_fp=COSTS,
    cost_fn=COSTS,
    cost_unsure=COSTS,
)
def test_cost_cutoffs_match_brute_force(data, cost_fp, cost_fn, cost_unsure):
    scores = [s / 2 for s, _ in data]  # half-integers: plenty of ties
    spam = [y for _, y in data]
    got = m.choose_cutoffs_by_cost(
        scores, spam, cost_fp=cost_fp, cost_fn=cost_fn, cost_unsure=cost_unsure
    )
    (best_cost, _, _), expected = _brute_force_cutoffs(scores, spam, cost_fp, cost_fn, cost_unsure)
    assert got[0] <= got[1]
    assert _cost_of(scores, spam, got, cost_fp, cost_fn, cost_unsure) <= best_cost
    assert got == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_cost_cutoffs_beat_brute_force_with_awkward_costs(seed):
    # costs with many decimals are compared in floating point: still optimal up to rounding
    rng = np.random.default_rng(seed)
    scores = np.round(rng.normal(size=25), 1).tolist()
    spam = (rng.random(25) < 0.5).tolist()
    costs = dict(cost_fp=1 / 3, cost_fn=math.pi / 10, cost_unsure=math.e / 50)
    got = m.choose_cutoffs_by_cost(scores, spam, **costs)
    (best_cost, _, _), _ = _brute_force_cutoffs(scores, spam, *costs.values())
    assert float(_cost_of(scores, spam, got, *costs.values())) <= float(best_cost) + 1e-12


@pytest.mark.parametrize("seed", SEEDS)
def test_fpr_cutoff_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.normal(size=40), 1)
    spam = rng.random(40) < 0.5
    n_neg = np.count_nonzero(~spam)
    v = sorted(set(scores.tolist()))
    cands = [-math.inf] + [(a + b) / 2 for a, b in zip(v[:-1], v[1:], strict=True)] + [math.inf]
    for target in (0.0, 0.05, 0.1, 0.3, 1.0):
        ok = [c for c in cands if np.count_nonzero((scores >= c) & ~spam) / n_neg <= target]
        assert m.choose_cutoffs_for_fpr(scores, spam, target) == min(ok)


# --------------------------------------------------------------------------------------------
# Stratified folds
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_a", "n_b", "n_c", "k"), [(37, 11, 0, 5), (10, 10, 3, 3), (7, 2, 1, 10)]
)
def test_stratified_folds_keep_proportions(n_a, n_b, n_c, k):
    labels = ["spam"] * n_a + ["ham"] * n_b + ["other"] * n_c
    folds = m.stratified_folds(labels, k, seed=3)
    assert folds.shape == (len(labels),) and folds.dtype == np.int64
    assert set(folds.tolist()) <= set(range(k))
    arr = np.array(labels)
    for lab, n_lab in (("spam", n_a), ("ham", n_b), ("other", n_c)):
        counts = np.bincount(folds[arr == lab], minlength=k)
        assert np.all(np.abs(counts - n_lab / k) < 1)  # floor or ceil of the k-th share
    sizes = np.bincount(folds, minlength=k)
    assert sizes.max() - sizes.min() <= 1


def test_stratified_folds_deterministic_and_seeded():
    labels = np.array([0, 1] * 50)
    a = m.stratified_folds(labels, 4, seed=11)
    b = m.stratified_folds(labels.tolist(), 4, seed=11)
    c = m.stratified_folds(labels, 4, seed=12)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # every item exactly once: the folds partition the indices
    parts = [np.flatnonzero(a == f) for f in range(4)]
    assert sorted(np.concatenate(parts).tolist()) == list(range(100))


def test_stratified_folds_rejects_bad_k():
    with pytest.raises(ValueError, match="k must be between 2"):
        m.stratified_folds(["a", "b", "a"], 1, seed=0)
    with pytest.raises(ValueError, match="k must be between 2"):
        m.stratified_folds(["a", "b", "a"], 4, seed=0)
    with pytest.raises(ValueError, match="integer"):
        m.stratified_folds(["a", "b", "a"], 2.0, seed=0)


# --------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------


def test_validation_messages():
    with pytest.raises(ValueError, match="both classes"):
        m.roc_auc([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="length mismatch"):
        m.roc_auc([0.1, 0.2, 0.3], [1, 0])
    with pytest.raises(ValueError, match="empty"):
        m.roc_curve([], [])
    with pytest.raises(ValueError, match="finite"):
        m.roc_auc([0.1, float("nan")], [1, 0])
    with pytest.raises(ValueError, match="0/1"):
        m.roc_auc([0.1, 0.2], ["spam", "ham"])
    with pytest.raises(ValueError, match="length mismatch"):
        m.accuracy(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="empty"):
        m.accuracy([], [])
    with pytest.raises(ValueError, match="length mismatch"):
        m.confusion_matrix(["a", "b"], ["a"], ["a", "b"])
    with pytest.raises(ValueError, match="twice"):
        m.confusion_matrix(["a"], ["a"], ["a", "a"])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        m.brier_score([1.5], [1])
    with pytest.raises(ValueError, match="max_fpr"):
        m.recall_at_fpr([0.1, 0.2], [0, 1], 1.5)
    with pytest.raises(ValueError, match="ham"):
        m.choose_cutoffs_for_fpr([0.1, 0.2], [1, 1], 0.1)
    with pytest.raises(ValueError, match="non-negative"):
        m.choose_cutoffs_by_cost([0.1, 0.2], [0, 1], cost_fp=-1.0)
    with pytest.raises(ValueError, match="n_bins"):
        m.reliability_table([0.1], [0], n_bins=0)
