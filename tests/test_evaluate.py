"""Tests of nbspam.evaluation.evaluation and nbspam.evaluation.plot: splits, hand-computed report values, rendering."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from nbspam.cli.render import render_report
from nbspam.core.settings import build_settings
from nbspam.errors import ConfigError, InputError
from nbspam.evaluation.evaluation import (
    chronological,
    chronological_order,
    cross_validate,
    holdout,
    nested_scores,
    tokenize_all,
)
from nbspam.evaluation.report import report
from nbspam.fit import metrics
from nbspam.fit.calibration import calibrate, choose_cutoffs
from nbspam.fit.crossval import Scores, Tokenized, stratified_split
from nbspam.mail.headers import message_time
from nbspam.mail.message import Message
from nbspam.models.decision import verdict
from nbspam.models.model import fit_messages, score

SETTINGS = build_settings({})

# --------------------------------------------------------------------------------------------
# Constructed data
# --------------------------------------------------------------------------------------------


def texts(label: str, bodies: list[str]) -> list[Message]:
    return [Message(f"{label}/{i}", body, label) for i, body in enumerate(bodies)]


def small_corpus() -> list[Message]:
    """13 ham and 8 spam short texts, interleaved, with a little overlap between the classes."""
    ham = texts(
        "ham",
        [f"meeting notes agenda lunch item{i} project {'offer' * (i % 4 == 0)}" for i in range(13)],
    )
    spam = texts(
        "spam",
        [f"free offer money winner item{i} click {'lunch' * (i % 3 == 0)}" for i in range(8)],
    )
    return [m for pair in zip(ham, spam + [None] * 5, strict=True) for m in pair if m is not None]


def binary_scores(
    log_odds: list[float],
    labels: list[str],
    *,
    calibrated: list[float] | None = None,
    fold: list[int] | None = None,
) -> Scores:
    """Two-class Scores with the posteriors that belong to the given log-odds of spam."""
    odds = np.array(log_odds, dtype=np.float64)
    log_post = np.column_stack([-np.logaddexp(0.0, odds), -np.logaddexp(0.0, -odds)])
    return Scores(
        ids=tuple(f"m{i}" for i in range(len(odds))),
        labels=tuple(labels),
        classes=("ham", "spam"),
        log_posterior=log_post,
        log_odds=odds,
        positive="spam",
        fold=np.array(fold if fold is not None else [i % 2 for i in range(len(odds))]),
        seconds={"tokenize": 2.0, "train": 1.5, "score": 0.3},
        calibrated=None if calibrated is None else np.array(calibrated),
        protocol={
            "method": "cross-validation",
            "folds": 2,
            "seed": 42,
            "description": "stratified 2-fold cross-validation (seed 42)",
        },
    )


#: ham -3, -1, 0.5 (a false positive at 0); spam -0.5 (a false negative), 1, 4
HAND_ODDS = [-3.0, -1.0, 0.5, -0.5, 1.0, 4.0]
HAND_LABELS = ["ham"] * 3 + ["spam"] * 3
HAND_CALIBRATED = [0.15, 0.25, 0.35, 0.55, 0.75, 0.85]


@pytest.fixture
def hand_report() -> dict:
    scores = binary_scores(HAND_ODDS, HAND_LABELS, calibrated=HAND_CALIBRATED)
    return report(scores, cutoffs=(-2.0, 2.0), calibration=(0.5, -0.25))


def multi_class_scores() -> Scores:
    """Five messages of classes a, a, b, c, c predicted (highest posterior) a, b, b, c, a."""
    probs = np.array(
        [[0.7, 0.2, 0.1], [0.3, 0.6, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.5, 0.2, 0.3]]
    )
    return Scores(
        ids=("1", "2", "3", "4", "5"),
        labels=("a", "a", "b", "c", "c"),
        classes=("a", "b", "c"),
        log_posterior=np.log(probs),
        log_odds=None,
        positive=None,
        fold=np.array([0, 1, 0, 1, 0]),
        seconds={"train": 0.5},
        protocol={"description": "stratified 2-fold cross-validation (seed 7)"},
    )


# --------------------------------------------------------------------------------------------
# Tokenizing and splits
# --------------------------------------------------------------------------------------------


def test_tokenize_all_counts_over_sorted_terms_and_numbers_the_copies():
    ids, labels, X, terms, copies, times = tokenize_all(
        [
            Message("1", "zebra apple apple", "ham"),
            Message("2", "mango zebra", "spam"),
            Message("3", "zebra apple apple", "ham"),
        ],
        SETTINGS.tokenizer,
    )
    assert (ids, labels, terms) == (
        ["1", "2", "3"],
        ["ham", "spam", "ham"],
        ["apple", "mango", "zebra"],
    )
    np.testing.assert_array_equal(X.toarray(), [[2, 0, 1], [0, 1, 1], [2, 0, 1]])
    np.testing.assert_array_equal(copies, [0, 1, 0])
    assert np.isnan(times).all() and len(times) == 3  # text: no Date to read
    with pytest.raises(InputError, match="3: no label"):
        tokenize_all([Message("3", "no label here")], SETTINGS.tokenizer)
    with pytest.raises(InputError, match="no messages"):
        tokenize_all([], SETTINGS.tokenizer)


def test_holdout_log_odds_by_hand():
    # multinomial on word presence, alpha 0.1, fitted prior 1/2 : 1/2; four kept words.
    # theta(aa | ham) = (1 + 0.1) / (2 + 4 * 0.1), theta(aa | spam) = (0 + 0.1) / 2.4, so the
    # log-odds of spam for "aa" is log(0.1 / 1.1) = -log 11, and +log 11 for "cc".
    train_set = [Message("h", "aa bb", "ham"), Message("s", "cc dd", "spam")]
    test_set = [Message("t1", "aa", "ham"), Message("t2", "cc", "spam")]
    scores = holdout(train_set, test_set, SETTINGS)
    assert scores.ids == ("h", "s", "t1", "t2") and scores.classes == ("ham", "spam")
    np.testing.assert_array_equal(scores.fold, [-1, -1, 0, 0])
    assert np.isnan(scores.log_odds[:2]).all()
    np.testing.assert_allclose(scores.log_odds[2:], [-math.log(11), math.log(11)], rtol=1e-12)
    np.testing.assert_allclose(np.exp(scores.log_posterior[2:, 1]), [1 / 12, 11 / 12], rtol=1e-12)
    assert scores.calibrated is None  # one message per class: no inner cross-validation
    counts = report(scores, cutoffs=None, calibration=None)["counts"]
    assert counts["by_class"]["ham"] == {"evaluated": 1, "train_only": 1}
    with pytest.raises(InputError, match=r"label\(s\) \['eggs'\] that the training messages lack"):
        holdout(train_set, [Message("t3", "aa", "eggs")], SETTINGS)


def test_cross_validate_is_stratified_deterministic_and_scores_each_message_once():
    messages = small_corpus()
    labels = [m.label for m in messages]
    scores = cross_validate(messages, SETTINGS, folds=4, seed=3)
    again = cross_validate(messages, SETTINGS, folds=4, seed=3)
    assert scores.ids == tuple(m.id for m in messages) and len(set(scores.ids)) == 21
    np.testing.assert_array_equal(scores.fold, again.fold)
    np.testing.assert_array_equal(scores.log_odds, again.log_odds)
    np.testing.assert_array_equal(scores.fold, metrics.stratified_folds(labels, 4, 3))
    assert not np.array_equal(scores.fold, cross_validate(messages, SETTINGS, folds=4).fold)
    assert set(scores.fold.tolist()) == {0, 1, 2, 3} and scores.evaluated.all()
    for label, n in (("ham", 13), ("spam", 8)):
        per_fold = np.bincount(scores.fold[np.array(labels) == label], minlength=4)
        assert set(per_fold.tolist()) <= {n // 4, -(-n // 4)}
    assert np.isfinite(scores.log_odds).all() and np.isfinite(scores.log_posterior).all()
    assert ((scores.calibrated > 0) & (scores.calibrated < 1)).all()
    # each message is scored by the model trained, from scratch, on the other folds: the
    # same log-odds to the bit, since both add a row's weights in the order its terms appear
    for k in range(4):
        held_out = [m for m, f in zip(messages, scores.fold, strict=True) if f == k]
        rest = [m for m, f in zip(messages, scores.fold, strict=True) if f != k]
        expected = [p.log_odds for p in score(fit_messages(rest, SETTINGS), held_out)]
        np.testing.assert_array_equal(scores.log_odds[scores.fold == k], expected)


def test_training_keeps_rows_of_a_sample_and_scores_it_with_models_of_all_the_rest(
    monkeypatch,
):
    import nbspam.models.model
    from nbspam.fit.crossval import score_split
    from nbspam.fit.training import train as train_with_rule
    from nbspam.mail.headers import message_digest
    from nbspam.models.model import sample_key

    messages = sorted(small_corpus(), key=lambda m: m.label)  # 13 ham, then 8 spam
    monkeypatch.setattr(nbspam.models.model, "CV_ROWS", 12)
    model = train_with_rule(messages, SETTINGS)
    # 21 messages, at most 12 rows kept: the 12 of smallest keyed hash of their digest, in
    # the order read, in 4 folds; each fold is scored by the model of the messages outside it
    data = tokenize_all(messages, SETTINGS.tokenizer)
    keys = [(sample_key(message_digest(m.data)), message_digest(m.data)) for m in messages]
    sample = np.sort(np.array(sorted(range(21), key=keys.__getitem__)[:12]))
    labels = np.array(data.labels, dtype=object)[sample]
    fold = np.full(21, -1)
    fold[sample] = metrics.stratified_folds(labels, 4, 42)
    scores = score_split(data, fold, SETTINGS, protocol={})
    assert scores.evaluated.sum() == 12
    cfg = SETTINGS.training
    expected = choose_cutoffs(scores, cost_fp=15.0, cost_fn=cfg.cost_fn, cost_unsure=0.2)
    assert model.cutoffs == expected and model.calibration == calibrate(scores)
    # the model itself is fitted on every message
    np.testing.assert_array_equal(model.class_count, [13, 8])


def test_rows_keep_the_messages_of_smallest_key_within_their_limit():
    import scipy.sparse as sp

    from nbspam.models.model import SampledRows, sample_key

    digests = [bytes([i]) * 16 for i in range(16)]
    rows = SampledRows(limit=5)
    for start, n in ((0, 4), (4, 4), (8, 3), (11, 2), (13, 3)):
        X = sp.csr_matrix(np.arange(start, start + n, dtype=np.int64).reshape(-1, 1) + 1)
        rows.add(X, [f"m{i}" for i in range(start, start + n)], digests[start : start + n])
    # 16 messages, 5 kept: those of the 5 smallest keys, in the order they came
    chosen = sorted(sorted(range(16), key=lambda i: sample_key(digests[i]))[:5])
    assert rows.labels == [f"m{i}" for i in chosen]
    assert rows.numbers().tolist() == chosen
    assert [v for X, _, _ in rows.chunks for v in X.toarray().ravel().tolist()] == [
        i + 1 for i in chosen
    ]


def test_cross_validate_refuses_bad_fold_counts():
    messages = small_corpus()
    with pytest.raises(InputError, match="label 'spam' has 8 message.*fewer than the 9 folds"):
        cross_validate(messages, SETTINGS, folds=9)
    with pytest.raises(ConfigError, match="^--folds must be a whole number >= 2, not 1$"):
        cross_validate(messages, SETTINGS, folds=1)
    with pytest.raises(InputError, match="at least two labels"):
        cross_validate(texts("ham", ["a b", "c d", "e f"]), SETTINGS, folds=2)


def mail(date: str | None, body: str) -> bytes:
    date_line = f"Date: {date}\n" if date else ""
    return f"From: someone@example.com\n{date_line}Subject: {body}\n\n{body} text\n".encode()


def test_chronological_orders_mail_by_date_header_with_time_zones():
    dated = [
        ("ham", "Wed, 03 Jan 2024 10:00:00 +0000", "lunch meeting"),
        ("spam", "Fri, 05 Jan 2024 10:00:00 +0000", "free offer"),  # newest
        ("ham", "Mon, 01 Jan 2024 10:00:00 +0000", "meeting notes"),  # oldest
        ("spam", "Tue, 02 Jan 2024 10:00:00 +0000", "free money"),
        ("ham", "Thu, 04 Jan 2024 11:00:00 +0200", "agenda notes"),  # 09:00 UTC
        ("spam", "Thu, 04 Jan 2024 09:30:00 +0000", "winner offer"),  # 09:30 UTC
    ]
    messages = [Message(str(i), mail(d, b), label) for i, (label, d, b) in enumerate(dated)]
    scores = chronological(messages, SETTINGS, test_fraction=1 / 3)
    # oldest first: 2, 3, 0, 4, 5, 1 -> the newest third is messages 5 and 1
    np.testing.assert_array_equal(scores.fold, [-1, 0, -1, -1, -1, 0])
    assert scores.protocol["order"] == "Date header" and scores.protocol["undated"] == 0
    assert np.isnan(scores.log_odds[scores.fold < 0]).all()
    assert np.isfinite(scores.log_odds[scores.fold == 0]).all()
    r = report(scores, cutoffs=None, calibration=None)
    assert r["ranking"] is None  # only spam among the newest: no ROC
    assert r["counts"]["by_class"]["spam"] == {"evaluated": 2, "train_only": 1}


def test_chronological_without_dates_uses_the_input_order():
    messages = small_corpus()[:10]
    scores = chronological(messages, SETTINGS, test_fraction=0.25)
    np.testing.assert_array_equal(scores.fold, [-1] * 7 + [0] * 3)  # 2.5 rounds up
    assert scores.protocol["order"] == "input order"
    with pytest.raises(ConfigError, match="between 0 and 1"):
        chronological(messages, SETTINGS, test_fraction=1.0)


def test_message_time_and_chronological_order():
    assert message_time(mail("Mon, 01 Jan 2024 00:00:00 +0000", "x")) == 1704067200.0
    mbox = b"From someone Mon Jan  1 00:00:00 2024\n" + mail("Mon, 01 Jan 2024 01:00:00", "x")
    assert message_time(mbox) == 1704067200.0 + 3600  # no time zone: UTC
    assert message_time(mail(None, "x")) is None
    assert message_time(mail("not a date", "x")) is None
    assert message_time("Date: Mon, 01 Jan 2024 00:00:00 +0000\n\ntext") is None
    assert message_time(mail("Mon, 01 Jan 2024 00:00:00 +0000", "x"), "never") is None
    # undated messages keep the time of the message before them; ties keep the input order
    np.testing.assert_array_equal(chronological_order([None, 5.0, None, 1.0, 5.0]), [0, 3, 1, 2, 4])
    np.testing.assert_array_equal(chronological_order([None, None]), [0, 1])


# --------------------------------------------------------------------------------------------
# Cutoffs and calibration
# --------------------------------------------------------------------------------------------


def test_choose_cutoffs_known_answer():
    # sorted: -3 ham, -2 ham, -1 spam, 1 spam, 2 ham, 3 spam; a false positive costs 10.
    # spam from 2.5 (no FP, spam 3 caught); ham below -1.5 leaves -1, 1 and 2 unsure: 0.6.
    # Any lower spam cutoff pays 10 for ham 2; a higher ham cutoff pays 1 per spam missed.
    scores = binary_scores(
        [-3, -2, -1, 1, 2, 3, 99],
        ["ham", "ham", "spam", "spam", "ham", "spam", "ham"],
        fold=[0] * 6 + [-1],
    )
    by_cost = {"target_fpr": None, "cost_unsure": 0.2}
    assert choose_cutoffs(scores, **by_cost) == (-1.5, 2.5)
    # equal costs: one cutoff at -1.5 makes a single error (ham 2); unsure never pays
    assert choose_cutoffs(scores, target_fpr=None, cost_fp=1.0, cost_unsure=1.0) == (-1.5, -1.5)
    # the default, a bound: 3 ham cannot show 0.1% even with no false positive, so the spam
    # cutoff is the lowest with none (2.5), raised by 4% of the ham's spread: their 99th
    # percentile -2 + 0.98 * 4 = 1.92 less their median -2, 3.92. Below it the ham cutoff
    # of least FN + 0.5 U: -1.5 (no spam missed, -1, 1 and 2 unsure: 1.5).
    assert choose_cutoffs(scores) == (-1.5, pytest.approx(2.5 + 0.04 * 3.92))
    assert choose_cutoffs(scores, target_fpr=1 / 3) == choose_cutoffs(scores)
    with pytest.raises(InputError, match="two-class"):
        choose_cutoffs(multi_class_scores())


def test_calibrate_fits_platt_on_the_evaluated_scores_only():
    scores = binary_scores(
        [-3, -1, 2, 1, 4, 50],
        ["ham", "spam", "ham", "spam", "spam", "ham"],
        fold=[0, 1, 0, 1, 0, -1],
    )
    assert calibrate(scores) == metrics.fit_platt([-3, -1, 2, 1, 4], [0, 1, 0, 1, 1])


def test_calibration_of_scores_that_rank_backwards_is_flat_not_falling():
    # the spam score lower than the ham: unconstrained Platt fits a < 0, and the calibrated
    # probability would fall as the log-odds rise (0.41 then 0.34 within the unsure band).
    # The flat fit instead: a = 0, b = logit of the mean regularised target, here spam's
    # (2 + 1) / (2 + 2) = 0.75 twice and ham's 1 / (3 + 2) = 0.2 three times: mean 0.42
    from nbspam.fit.calibration import rule_from_log_odds
    from nbspam.models.decision import calibrated_probability

    odds, labels = [-2, -1, 1, 2, 3], ["spam", "spam", "ham", "ham", "ham"]
    a, b = calibrate(binary_scores(odds, labels))
    assert a == 0.0 and b == pytest.approx(math.log(0.42 / 0.58))
    given = build_settings({"cutoffs": [0.0, 1.5]}).training
    rule = rule_from_log_odds(np.array(odds, float), np.array(labels) == "spam", given)
    assert rule.calibration == (a, b)
    ps = [calibrated_probability(rule.calibration, x, rule.cutoffs) for x in (-2, 0.5, 1, 3)]
    assert ps == [pytest.approx(0.42), pytest.approx(0.42), pytest.approx(0.42), 0.5]


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def test_report_metrics_by_hand(hand_report):
    r = hand_report
    # predicted (log-odds > 0): ham ham spam | ham spam spam
    third = 2 / 3
    for label in ("ham", "spam"):
        assert r["per_class"][label] == pytest.approx(
            {"precision": third, "recall": third, "f1": third, "support": 3}
        )
    assert r["macro"] == pytest.approx({"precision": third, "recall": third, "f1": third})
    assert r["accuracy"] == pytest.approx(4 / 6)
    assert r["mcc"] == pytest.approx((2 * 2 - 1 * 1) / math.sqrt(3 * 3 * 3 * 3))
    assert r["confusion"] == {
        "true": ["ham", "spam"],
        "predicted": ["ham", "spam"],
        "matrix": [[2, 1], [1, 2]],
    }
    # spam -0.5 beats ham -3 and -1 only; spam 1 and 4 beat every ham: 8 of 9 pairs
    assert r["ranking"]["roc_auc"] == pytest.approx(8 / 9)
    assert r["ranking"]["one_minus_roca_percent"] == pytest.approx(100 / 9)
    # no ham may be called spam: a cutoff above ham 0.5 catches spam 1 and 4
    assert r["ranking"]["recall_at_fpr"] == [
        {"max_fpr": 0.001, "recall": pytest.approx(third), "threshold": 1.0},
        {"max_fpr": 0.01, "recall": pytest.approx(third), "threshold": 1.0},
    ]
    # ham below -2, spam from 2: ham -3 | unsure -1, 0.5, -0.5, 1 | spam 4
    cut = r["cutoffs"]
    assert (cut["ham_cutoff"], cut["spam_cutoff"]) == (-2.0, 2.0)
    assert (cut["false_positives"], cut["false_negatives"], cut["unsure"]) == (0, 0, 4)
    assert cut["unsure_rate"] == pytest.approx(4 / 6)
    assert cut["confusion"]["predicted"] == ["ham", "spam", "unsure"]
    assert cut["confusion"]["matrix"] == [[1, 0, 2], [0, 1, 2]]
    cal = r["calibration"]
    assert cal["platt"] == {"a": 0.5, "b": -0.25}
    spam = [y == "spam" for y in HAND_LABELS]
    raw = [sigmoid(s) for s in HAND_ODDS]
    assert cal["raw"]["brier"] == pytest.approx(
        sum((p - y) ** 2 for p, y in zip(raw, spam, strict=True)) / 6
    )
    assert cal["raw"]["log_loss"] == pytest.approx(
        sum(math.log1p(math.exp(-s if y else s)) for s, y in zip(HAND_ODDS, spam, strict=True)) / 6
    )
    # calibrated: ham 0.15, 0.25, 0.35; spam 0.55, 0.75, 0.85
    assert cal["calibrated"]["brier"] == pytest.approx(
        (0.15**2 + 0.25**2 + 0.35**2 + 0.45**2 + 0.25**2 + 0.15**2) / 6
    )
    assert cal["calibrated"]["log_loss"] == pytest.approx(
        -(
            math.log(0.85)
            + math.log(0.75)
            + math.log(0.65)
            + math.log(0.55)
            + math.log(0.75)
            + math.log(0.85)
        )
        / 6
    )
    assert [b["count"] for b in cal["raw"]["reliability"]] == [1, 0, 1, 1, 0, 0, 1, 1, 0, 1]
    assert [b["count"] for b in cal["calibrated"]["reliability"]] == [0, 1, 1, 1, 0, 1, 0, 1, 1, 0]
    assert r["seconds"] == {"tokenize": 2.0, "train": 1.5, "score": 0.3}


def test_report_says_when_the_calibrated_probability_is_not_to_be_trusted(hand_report):
    # the online report had a calibrated Brier score of 0.351 against 0.0149 raw and said
    # nothing. Platt (0, 0) gives 1/2 to every message: Brier 0.25, where the raw
    # posteriors sigmoid(s) of the hand scores give
    spam = [y == "spam" for y in HAND_LABELS]
    raw = sum((sigmoid(s) - y) ** 2 for s, y in zip(HAND_ODDS, spam, strict=True)) / 6
    assert raw == pytest.approx(0.15369, abs=1e-5)
    r = report(binary_scores(HAND_ODDS, HAND_LABELS), cutoffs=None, calibration=(0.0, 0.0))
    note = (
        f"the calibrated probability is worse than the raw posterior here (Brier 0.25000 "
        f"against {raw:.5f}): do not rely on it for these messages"
    )
    assert r["calibration"]["note"] == note
    assert f"  note: {note}" in list(render_report(r, "text"))
    # the hand report's calibration (Brier 0.0825) is better than raw: nothing to say
    assert hand_report["calibration"]["note"] is None
    assert "note: the calibrated" not in "\n".join(render_report(hand_report, "text"))


def test_report_json_keys_and_infinite_cutoffs():
    scores = binary_scores(HAND_ODDS, HAND_LABELS)
    r = report(scores, cutoffs=(-math.inf, math.inf), calibration=None)
    assert list(r) == [
        "protocol",
        "classes",
        "positive",
        "counts",
        "decision",
        "per_class",
        "macro",
        "accuracy",
        "mcc",
        "confusion",
        "ranking",
        "cutoffs",
        "calibration",
        "seconds",
    ]
    assert list(r["counts"]) == ["messages", "evaluated", "by_class"]
    assert list(r["ranking"]) == ["roc_auc", "one_minus_roca_percent", "recall_at_fpr"]
    assert list(r["cutoffs"]) == [
        "ham_cutoff",
        "spam_cutoff",
        "false_positives",
        "false_negatives",
        "unsure",
        "unsure_rate",
        "confusion",
    ]
    assert list(r["calibration"]) == ["platt", "calibrated_by", "raw", "calibrated", "note"]
    assert list(r["calibration"]["raw"]) == ["brier", "log_loss", "reliability"]
    assert (r["cutoffs"]["ham_cutoff"], r["cutoffs"]["spam_cutoff"]) == ("-inf", "inf")
    assert r["cutoffs"]["unsure"] == 6
    assert r["calibration"]["platt"] is None and r["calibration"]["calibrated"] is None
    json.dumps(r, allow_nan=False)  # strict JSON: no NaN, no Infinity


def test_report_multi_class_by_hand():
    r = report(multi_class_scores(), cutoffs=None, calibration=None)
    # confusion a: [1, 1, 0], b: [0, 1, 0], c: [1, 0, 1]
    assert r["confusion"]["matrix"] == [[1, 1, 0], [0, 1, 0], [1, 0, 1]]
    assert r["per_class"]["b"] == pytest.approx(
        {"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "support": 1}
    )
    assert r["macro"] == pytest.approx(
        {"precision": 2 / 3, "recall": 2 / 3, "f1": (0.5 + 2 / 3 + 2 / 3) / 3}
    )
    assert r["accuracy"] == pytest.approx(0.6)
    # Gorodkin: (c s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)), t = (2, 1, 2), p = (2, 2, 1)
    assert r["mcc"] == pytest.approx((3 * 5 - 8) / math.sqrt((25 - 9) * (25 - 9)))
    assert r["positive"] is None and r["decision"] == "highest posterior"
    assert r["ranking"] is None and r["cutoffs"] is None and r["calibration"] is None


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------

TABLE = """\
Evaluation
  stratified 2-fold cross-validation (seed 42)
  6 of 6 messages evaluated: ham 3, spam 3

Classification (spam iff log-odds > 0)
  class          precision  recall      F1  support
  ham               0.6667  0.6667  0.6667        3
  spam              0.6667  0.6667  0.6667        3
  macro average     0.6667  0.6667  0.6667        6
  accuracy 0.6667, Matthews correlation 0.3333

Confusion matrix (rows: true label, columns: predicted)
  true \\ predicted  ham  spam
  ham                 2     1
  spam                1     2

Ranking by log-odds
  ROC AUC 0.888889, (1-ROCA)% 11.1111
  false-positive rate  spam recall  log-odds cutoff
  0.1%                      0.6667           +1.000
  1%                        0.6667           +1.000

Cutoffs
  ham below -2.000, spam from +2.000 (log-odds), unsure between
  true \\ predicted  ham  spam  unsure
  ham                 1     0       2
  spam                0     1       2
  false positives 0, false negatives 0, unsure 4 (66.67%)

Calibration
  Platt: P(spam) = 1 / (1 + exp(-(a log-odds + b))), a = 0.5, b = -0.25
  calibrated: each test fold scored with the cutoffs and Platt calibration that train fits on its training part (internal cross-validation)
  probability      Brier  log loss
  raw posterior  0.15369   0.44024
  calibrated     0.08250   0.32150
  P(spam)  raw n  raw mean  raw observed  calibrated n  calibrated mean  calibrated observed
  0.0-0.1      1     0.047         0.000             0
  0.1-0.2      0                                     1            0.150                0.000
  0.2-0.3      1     0.269         0.000             1            0.250                0.000
  0.3-0.4      1     0.378         1.000             1            0.350                0.000
  0.4-0.5      0                                     0
  0.5-0.6      0                                     1            0.550                1.000
  0.6-0.7      1     0.622         0.000             0
  0.7-0.8      1     0.731         1.000             1            0.750                1.000
  0.8-0.9      0                                     1            0.850                1.000
  0.9-1.0      1     0.982         1.000             0

Timings
  tokenize 2.0 s, train 1.5 s, score 0.3 s"""


def test_render_table_exact(hand_report):
    assert list(render_report(hand_report, "text")) == TABLE.split("\n")


MULTI_CLASS_MARKDOWN = """\
## Evaluation

stratified 2-fold cross-validation (seed 7)

5 of 5 messages evaluated: a 2, b 1, c 2

## Classification (highest posterior)

| class | precision | recall | F1 | support |
|:---|---:|---:|---:|---:|
| a | 0.5000 | 0.5000 | 0.5000 | 2 |
| b | 0.5000 | 1.0000 | 0.6667 | 1 |
| c | 1.0000 | 0.5000 | 0.6667 | 2 |
| macro average | 0.6667 | 0.6667 | 0.6111 | 5 |

accuracy 0.6000, Matthews correlation 0.4375

## Confusion matrix (rows: true label, columns: predicted)

| true \\ predicted | a | b | c |
|:---|---:|---:|---:|
| a | 1 | 1 | 0 |
| b | 0 | 1 | 0 |
| c | 1 | 0 | 1 |

## Timings

train 0.5 s"""


def test_render_markdown_exact():
    r = report(multi_class_scores(), cutoffs=None, calibration=None)
    assert list(render_report(r, "markdown")) == MULTI_CLASS_MARKDOWN.split("\n")


def test_render_markdown_two_class_sections(hand_report):
    lines = list(render_report(hand_report, "markdown"))
    assert [line for line in lines if line.startswith("## ")] == [
        "## Evaluation",
        "## Classification (spam iff log-odds > 0)",
        "## Confusion matrix (rows: true label, columns: predicted)",
        "## Ranking by log-odds",
        "## Cutoffs",
        "## Calibration",
        "## Timings",
    ]
    assert "| ham | 1 | 0 | 2 |" in lines and "| calibrated | 0.08250 | 0.32150 |" in lines


def test_render_json_exact(hand_report):
    lines = list(render_report(hand_report, "json"))
    assert lines[:4] == [
        "{",
        '  "protocol": {',
        '    "method": "cross-validation",',
        '    "folds": 2,',
    ]
    assert lines[-5:] == [
        '    "tokenize": 2.0,',
        '    "train": 1.5,',
        '    "score": 0.3',
        "  }",
        "}",
    ]
    assert json.loads("\n".join(lines)) == hand_report


# --------------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------------


def test_plot_writes_png_and_svg(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install matplotlib)")
    from nbspam.errors import PlotError
    from nbspam.evaluation.plot import plot_evaluation

    scores = binary_scores(HAND_ODDS, HAND_LABELS)
    plot_evaluation(scores, str(tmp_path / "eval.png"), cutoffs=(-2.0, 2.0))
    assert (tmp_path / "eval.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    for name in ("a.svg", "b.svg"):
        plot_evaluation(scores, str(tmp_path / name), cutoffs=(-math.inf, 2.0))
    svg = (tmp_path / "a.svg").read_text()
    assert "<svg" in svg and svg == (tmp_path / "b.svg").read_text()
    with pytest.raises(PlotError, match=r"\.png or \.svg"):
        plot_evaluation(scores, str(tmp_path / "eval.pdf"), cutoffs=None)
    with pytest.raises(PlotError, match="two-class"):
        plot_evaluation(multi_class_scores(), str(tmp_path / "m.png"), cutoffs=None)
    with pytest.raises(PlotError, match="cannot write"):
        plot_evaluation(scores, str(tmp_path / "missing" / "eval.png"), cutoffs=None)


def test_plot_without_matplotlib_says_how_to_install(tmp_path, monkeypatch):
    from nbspam.errors import NbspamError, PlotError
    from nbspam.evaluation.plot import plot_evaluation

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    with pytest.raises(
        PlotError,
        match=r"needs matplotlib: pip install matplotlib \(pipx inject nbspam matplotlib under pipx\)$",
    ) as caught:
        plot_evaluation(
            binary_scores(HAND_ODDS, HAND_LABELS), str(tmp_path / "e.png"), cutoffs=None
        )
    assert isinstance(caught.value, NbspamError) and "matplotlib" in str(caught.value)
    assert not (tmp_path / "e.png").exists()


def _axes():
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install matplotlib)")
    from matplotlib.figure import Figure

    return Figure().subplots()


def test_histogram_is_clipped_to_the_scores_and_labels_its_cutoffs():
    from nbspam.evaluation.plot import draw_histogram

    # 199 ham at -10 and one at -1000, 199 spam at +10 and one at +5000: the 0.5th and
    # 99.5th percentiles are -10 and +10; with a margin of 5% of 20 the axis is -11..+11
    odds = np.array([-1000.0] + [-10.0] * 199 + [10.0] * 199 + [5000.0])
    pos = odds > 0
    axes = _axes()
    draw_histogram(axes, odds, pos, "spam", "ham", (-2.0, 3.0), "the median of the 5 folds' own")
    assert axes.get_xlim() == (-11.0, 11.0)
    labels = sorted(text.get_text().strip() for text in axes.texts)
    assert labels == ["ham below -2.0", "spam from +3.0"]
    assert (
        axes.get_title()
        == "Scores of the evaluated messages\ncutoffs: the median of the 5 folds' own"
    )
    # the outliers are counted in the end bins, not left out
    counts = [sum(bar.get_height() for bar in bars) for bars in axes.containers]
    assert counts == [200, 200]


def test_histogram_widens_to_show_a_cutoff_beyond_the_scores():
    from nbspam.evaluation.plot import draw_histogram

    odds = np.array([-10.0] * 10 + [10.0] * 10)
    axes = _axes()
    draw_histogram(axes, odds, odds > 0, "spam", "ham", (-math.inf, 30.0))
    assert axes.get_xlim() == (-12.0, 32.0)  # -10..30 and 5% of 40 each side
    assert [text.get_text().strip() for text in axes.texts] == ["spam from +30.0"]


def test_roc_starts_at_the_lowest_recall_shown():
    from nbspam.evaluation.plot import draw_roc

    # 9 of 10 spam score above every ham: 90% recall at no false positive, the lowest
    # recall the log axis shows; less a margin of 2, rounded down to 5: 85
    odds = np.array([100.0] * 9 + [-100.0] + [0.0] * 10)
    pos = np.array([True] * 10 + [False] * 10)
    axes = _axes()
    draw_roc(axes, odds, pos, "spam")
    assert axes.get_ylim() == (85.0, 100.5)
    assert sorted(text.get_text() for text in axes.texts) == ["90.0% at 0.1%", "90.0% at 1%"]


# --------------------------------------------------------------------------------------------
# The SpamAssassin corpus
# --------------------------------------------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.slow
def test_calibration_improves_held_out_log_loss_on_spamassassin(spamassassin_matrix):
    X, labels, terms = spamassassin_matrix  # tokenized once per session (tests/conftest.py)
    data = Tokenized([str(i) for i in range(len(labels))], labels, X, terms)
    settings = build_settings({"event_model": "multinomial"})
    fold, protocol = stratified_split(labels, 5, 42)
    scores = nested_scores(data, fold, settings, protocol=protocol, tokenize_seconds=0.0)
    assert scores.evaluated.all() and np.isfinite(scores.calibrated).all()
    r = report(scores, cutoffs=choose_cutoffs(scores), calibration=calibrate(scores))
    raw, calibrated = r["calibration"]["raw"], r["calibration"]["calibrated"]
    assert calibrated["log_loss"] < 0.5 * raw["log_loss"]
    assert calibrated["brier"] < raw["brier"]
    assert r["ranking"]["roc_auc"] > 0.995
    assert r["cutoffs"]["false_positives"] <= 0.002 * r["counts"]["by_class"]["ham"]["evaluated"]


def test_cutoffs_decide_as_predict_does_at_exactly_zero():
    # a log-odds of exactly 0 is ham for predict and filter (decision.verdict); the report
    # must count what they do, at cutoffs (0, 0) and at cutoffs that touch the score
    odds = [-1.0, 0.0, 0.0, 2.0]
    labels = ["ham", "ham", "spam", "spam"]
    scores = binary_scores(odds, labels)
    for cutoffs in [(0.0, 0.0), (-1.0, 2.0), (0.0, 2.0)]:
        cut = report(scores, cutoffs=cutoffs, calibration=None)["cutoffs"]
        decided = [verdict(o, cutoffs, "spam", "ham") for o in odds]
        false_positives = sum(d == "spam" and y == "ham" for d, y in zip(decided, labels))
        false_negatives = sum(d == "ham" and y == "spam" for d, y in zip(decided, labels))
        assert (cut["false_positives"], cut["false_negatives"]) == (
            false_positives,
            false_negatives,
        ), cutoffs
        assert cut["unsure"] == decided.count("unsure")
