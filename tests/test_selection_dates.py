"""auto's choice where the training messages carry dates: each candidate is also judged on
a split by date (each label's newer half scored by a model of the rest), and its AUC is the
mean of that and the pooled out-of-fold AUC (`selection.date_split`)."""

from __future__ import annotations

import numpy as np
import pytest

from nbspam.core.sparse import sp
from nbspam.fit import selection
from nbspam.fit.crossval import Tokenized
from nbspam.fit.run_settings import resolve_settings

SETTINGS = resolve_settings({}, source="test")


def test_the_split_by_date_judges_each_labels_newer_half_and_trains_on_the_rest():
    labels = ["ham", "spam", "ham", "ham", "spam", "ham", "spam", "spam"]
    times = np.array([40.0, 1.0, 10.0, np.nan, 3.0, 20.0, 4.0, 2.0])
    # ham dated 40, 10, 20 (rows 0, 2, 5): the newer half is 20 and 40; spam 1, 3, 4, 2:
    # 3 and 4 (rows 4, 6); the undated ham (row 3) is trained on
    fold = selection.date_split(labels, times, least=3)
    assert fold.tolist() == [0, -1, -1, -1, 0, 0, 0, -1]
    # too few dated messages of a label, or none at all: no split
    assert selection.date_split(labels, times, least=4) is None
    assert selection.date_split(labels, None) is None


def drifting(n: int = 240, seed: int = 7) -> tuple[Tokenized, np.ndarray]:
    """n ham and n spam over time, told apart by one noisy word each ("meeting" in 70% of
    the ham, "offer" in 70% of the spam, each also in 30% of the other), with ten words of
    noise; and "zzz", which the older spam use (half of them) and the newer ham (half of
    them): a word whose meaning changed, neutral when old and new mail are mixed."""
    rng = np.random.default_rng(seed)
    terms = ["meeting", "offer", "zzz"] + [f"w{i:02d}" for i in range(10)]
    rows, labels, times = [], [], []
    for label in ("ham", "spam"):
        for i in range(n):
            newer = i >= n // 2
            row = np.zeros(len(terms))
            own, other = (0, 1) if label == "ham" else (1, 0)
            row[own] = rng.random() < 0.7
            row[other] = rng.random() < 0.3
            row[2] = rng.random() < 0.5 if (label == "spam") != newer else 0
            row[3:] = rng.random(10) < 0.3
            rows.append(row)
            labels.append(label)
            times.append(float(i))
    X = sp.csr_matrix(np.array(rows))
    order = np.argsort(terms)
    data = Tokenized(
        [str(i) for i in range(len(labels))],
        labels,
        X[:, order].tocsr(),
        [terms[i] for i in order],
    )
    return data, np.array(times)


def two_candidates(binary: bool) -> list[selection.Candidate]:
    return [
        selection.Candidate("multinomial", {"event_model": "multinomial", "alpha": 0.1}),
        selection.Candidate(
            "without zzz", {"event_model": "multinomial", "alpha": 0.1, "stop_words": ("zzz",)}
        ),
    ]


def test_with_dates_auto_chooses_what_wins_on_the_newer_mail(monkeypatch):
    monkeypatch.setattr(selection, "first_round", two_candidates)
    data, times = drifting()
    # mixed by cross-validation, "zzz" says little: the first candidate keeps its place
    undated = selection.internal_cv(data, SETTINGS)
    assert undated.chosen.split(" + ")[0] == "multinomial"
    first, second = undated.tried[:2]
    assert abs(first.auc - second.auc) < 0.1 * (1 - first.auc)
    assert undated.info()["criterion"] == "pooled out-of-fold ROC AUC"

    # trained on the older mail, "zzz" marks the newer ham as spam: the model without it wins
    dated = selection.internal_cv(data, SETTINGS, times=times)
    assert dated.chosen.split(" + ")[0] == "without zzz"
    first, second = dated.tried[:2]
    assert first.folds_auc == undated.tried[0].auc
    assert second.folds_auc == undated.tried[1].auc
    assert second.date_auc > first.date_auc
    for row in (first, second):
        assert row.auc == pytest.approx((row.folds_auc + row.date_auc) / 2)
    info = dated.info()
    assert info["criterion"] == (
        "mean of the pooled out-of-fold ROC AUC and the ROC AUC of a split by date"
    )
    assert info["candidates"][1]["date_auc"] == second.date_auc


def test_train_and_info_say_the_choice_was_also_judged_by_date(monkeypatch):
    from nbspam.cli.render import auto_lines

    monkeypatch.setattr(selection, "first_round", two_candidates)
    data, times = drifting()
    dated = auto_lines(selection.internal_cv(data, SETTINGS, times=times).info())
    assert dated[0] == (
        "event model: without zzz, chosen by cross-validation (5 folds of 480 messages) "
        "and a split by date (each ROC AUC the mean of the two)"
    )
    undated = auto_lines(selection.internal_cv(data, SETTINGS).info())
    assert undated[0] == (
        "event model: multinomial, chosen by cross-validation (5 folds of 480 messages)"
    )
