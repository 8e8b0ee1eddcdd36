"""nbspam.sklearn.NaiveBayesTextClassifier: scikit-learn's own checks, the same model as
nbspam's and the same predictions as MultinomialNB, in a Pipeline and a GridSearchCV."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.feature_extraction.text import CountVectorizer  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.naive_bayes import MultinomialNB  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import nbspam  # noqa: E402
from nbspam.sklearn import EXPECTED_FAILED_CHECKS, NaiveBayesTextClassifier  # noqa: E402
from tests.helpers import SAMPLE, assert_same_model  # noqa: E402


@parametrize_with_checks(
    [NaiveBayesTextClassifier()], expected_failed_checks=lambda _: EXPECTED_FAILED_CHECKS
)
def test_scikit_learn_checks(estimator, check):
    check(estimator)


def sample_messages():
    """The sample training messages as (bytes, label), in a fixed order."""
    pairs = []
    for label in ("ham", "spam"):
        for path in sorted((SAMPLE / "train" / label).iterdir()):
            pairs.append((path.read_bytes(), label))
    return pairs


def test_on_messages_it_is_nbspams_model():
    pairs = sample_messages()
    X, y = [data for data, _ in pairs], [label for _, label in pairs]
    est = NaiveBayesTextClassifier(event_model="bernoulli", alpha=0.5).fit(X, y)
    model = nbspam.train(pairs, event_model="bernoulli", alpha=0.5, calibrate=False)
    assert list(est.classes_) == ["ham", "spam"]
    # the estimator's labels are the positions of classes_; everything else is the same
    for name in ("terms", "class_count", "term_count", "doc_count", "seen_digests"):
        assert np.array_equal(getattr(est.model_, name), getattr(model.model, name)), name
    new = [p.read_bytes() for p in sorted((SAMPLE / "new").iterdir())]
    expected = model.predict(new)
    assert est.decision_function(new).tolist() == [p.log_odds for p in expected]
    assert est.predict(new).tolist() == [p.label for p in expected]
    assert np.allclose(est.predict_proba(new), [p.probabilities for p in expected], rtol=1e-12)


def test_on_counts_it_predicts_as_multinomial_nb():
    rng = np.random.default_rng(3)
    X = rng.poisson(1.5, size=(60, 12))
    X[:, 0] += 1  # no column empty: MultinomialNB keeps empty columns, nbspam drops them
    y = np.array(["a", "b", "c"] * 20)
    X[y == "b", 3] += 4
    ours = NaiveBayesTextClassifier(alpha=0.7, binary=False).fit(X, y)
    theirs = MultinomialNB(alpha=0.7).fit(X, y)
    test = rng.poisson(1.5, size=(25, 12))
    assert np.allclose(ours.predict_log_proba(test), theirs.predict_log_proba(test), atol=1e-10)
    assert ours.predict(test).tolist() == theirs.predict(test).tolist()
    two = y != "c"
    ours2 = NaiveBayesTextClassifier(alpha=0.7, binary=False).fit(X[two], y[two])
    theirs2 = MultinomialNB(alpha=0.7).fit(X[two], y[two])
    log_odds = np.diff(theirs2.predict_joint_log_proba(test), axis=1)[:, 0]
    assert np.allclose(ours2.decision_function(test), log_odds, atol=1e-10)
    # fractional counts too, as MultinomialNB takes them
    tfidf = X / X.sum(axis=1, keepdims=True)
    ours3 = NaiveBayesTextClassifier(alpha=0.7, binary=False).fit(tfidf, y)
    theirs3 = MultinomialNB(alpha=0.7).fit(tfidf, y)
    assert np.allclose(ours3.predict_log_proba(test), theirs3.predict_log_proba(test), atol=1e-10)


def test_partial_fit_equals_fit():
    pairs = sample_messages()
    X, y = [data for data, _ in pairs], [label for _, label in pairs]
    whole = NaiveBayesTextClassifier().fit(X, y)
    parts = NaiveBayesTextClassifier()
    parts.partial_fit(X[::2], y[::2], classes=["ham", "spam"])
    parts.partial_fit(X[1::2], y[1::2])
    assert_same_model(parts.model_, whole.model_)
    counts = np.random.default_rng(0).poisson(2, size=(30, 5))
    labels = np.arange(30) % 3
    whole = NaiveBayesTextClassifier(binary=False).fit(counts, labels)
    parts = NaiveBayesTextClassifier(binary=False).partial_fit(counts[:7], labels[:7], [0, 1, 2])
    parts.partial_fit(counts[7:], labels[7:])
    assert_same_model(parts.model_, whole.model_)


def test_params_are_kept_as_given():
    est = NaiveBayesTextClassifier(alpha=1, prior={"spam": 1, "ham": 3}, settings={"ngrams": 2})
    assert est.get_params()["prior"] == {"spam": 1, "ham": 3}
    assert clone(est).set_params(alpha=0.5).get_params()["alpha"] == 0.5
    with pytest.raises(ValueError, match="setting ngrams must be at most 5"):
        NaiveBayesTextClassifier(ngrams=9).fit(["a b", "c d"], ["x", "y"])


def test_pipeline_and_grid_search():
    pairs = sample_messages()
    texts = [data.decode("utf-8", "replace") for data, _ in pairs]
    y = [label for _, label in pairs]
    pipe = make_pipeline(CountVectorizer(), NaiveBayesTextClassifier(binary=False))
    pipe.fit(texts, y)
    assert (pipe.predict(texts) == np.array(y)).mean() > 0.9
    grid = GridSearchCV(
        NaiveBayesTextClassifier(),
        {"alpha": [0.01, 1.0], "event_model": ["multinomial", "bernoulli"]},
        cv=3,
    )
    grid.fit(np.array([data for data, _ in pairs], dtype=object), y)
    assert set(grid.best_params_) == {"alpha", "event_model"} and grid.best_score_ > 0.8


@pytest.mark.parametrize(
    "params, message",
    [
        ({"settings": 3}, "settings must be a dict of settings, not 3"),
        ({"settings": "ngrams=2"}, "settings must be a dict of settings, not 'ngrams=2'"),
        ({"settings": [("ngrams", 2)]}, "settings must be a dict of settings, not [('ngrams', 2)]"),
        ({"alpha": True}, "setting alpha must be a number, not True"),
        (
            {"prior": {"ham": 1, "nope": 3}},
            "prior names 'nope', not one of the classes ['ham', 'spam']",
        ),
    ],
)
def test_fit_refuses_a_parameter_of_the_wrong_type(params, message):
    """settings that are not a dict were a TypeError; alpha=True was 1, and a prior of a
    class that is none was given to another class (the one sorted after it)."""
    texts = ["cheap meds now", "free money", "lunch at noon", "meeting on monday"]
    labels = ["spam", "spam", "ham", "ham"]
    for X in (texts, np.array([[1, 0], [2, 0], [0, 1], [0, 3]])):
        with pytest.raises(ValueError) as raised:
            NaiveBayesTextClassifier(**params).fit(X, labels)
        assert str(raised.value) == message
