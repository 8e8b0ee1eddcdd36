"""The models against docs/math.md: hand-worked examples, invariants, scikit-learn as an oracle."""

from __future__ import annotations

import dataclasses
import warnings
from math import log

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from nbspam.core.settings import build_settings
from nbspam.models import naive_bayes as nb
from nbspam.models.explain import explain_message
from nbspam.models.model import fit, from_counts, predict_matrix, transform
from nbspam.store.modelfile import load_model, save_model
from nbspam.text.counts import ClassCounts
from nbspam.text.vocabulary import TermIndex, count_rows, sorted_order
from tests.helpers import assert_same_model

# The China/Japan example of Manning, Raghavan and Schuetze, "Introduction to Information
# Retrieval", section 13.2-13.3: three documents of class china, one of class japan.
DOCS = [
    ["chinese", "beijing", "chinese"],
    ["chinese", "chinese", "shanghai"],
    ["chinese", "macao"],
    ["tokyo", "japan", "chinese"],
]
LABELS = ["china", "china", "china", "japan"]
TEST = ["chinese", "chinese", "chinese", "tokyo", "japan"]


def settings(**values):
    """The textbook settings: counts, Laplace smoothing, every word kept."""
    return build_settings(
        {"min_count": 1, "stop_words": "none", "binary": False, "alpha": 1.0, **values}
    )


def textbook(model_name: str):
    index = TermIndex()
    X = count_rows(DOCS, index)
    order = sorted_order(index.terms)
    terms = [index.terms[i] for i in order]
    model = fit(X[:, order].tocsr(), LABELS, terms, settings(event_model=model_name))
    return model, transform(model, [TEST])


def test_multinomial_textbook_by_hand():
    model, X = textbook("multinomial")
    terms = model.form.index.terms
    log_theta = model.form.coef
    # theta(chinese|china) = (5 + 1) / (8 + 6); theta(tokyo|china) = (0 + 1) / (8 + 6)
    assert log_theta[0, terms.index("chinese")] == pytest.approx(log(3 / 7), abs=1e-15)
    assert log_theta[0, terms.index("tokyo")] == pytest.approx(log(1 / 14), abs=1e-15)
    # theta(chinese|japan) = (1 + 1) / (3 + 6) = theta(tokyo|japan)
    assert log_theta[1, terms.index("chinese")] == pytest.approx(log(2 / 9), abs=1e-15)
    assert log_theta[1, terms.index("japan")] == pytest.approx(log(2 / 9), abs=1e-15)
    # P(china|d5) ~ 3/4 (3/7)^3 (1/14)^2 = 0.000301, P(japan|d5) ~ 1/4 (2/9)^5 = 0.000135
    china = 3 / 4 * (3 / 7) ** 3 * (1 / 14) ** 2
    japan = 1 / 4 * (2 / 9) ** 3 * (2 / 9) ** 2
    log_post, log_odds = predict_matrix(model, X)
    assert np.exp(log_post[0]) == pytest.approx(
        [china / (china + japan), japan / (china + japan)], abs=1e-15
    )
    assert model.training.positive == "japan"
    assert log_odds[0] == pytest.approx(log(japan / china), abs=1e-12)


def test_bernoulli_textbook_by_hand():
    model, X = textbook("bernoulli")
    # theta(chinese|china) = (3+1)/(3+2); japan, tokyo: 1/5; beijing, macao, shanghai: 2/5
    # theta(chinese|japan) = (1+1)/(1+2); japan, tokyo: 2/3; beijing, macao, shanghai: 1/3
    china = 3 / 4 * (4 / 5) * (1 / 5) * (1 / 5) * (1 - 2 / 5) ** 3
    japan = 1 / 4 * (2 / 3) * (2 / 3) * (2 / 3) * (1 - 1 / 3) ** 3
    assert china == pytest.approx(0.005184)
    assert japan == pytest.approx(0.021948, abs=1e-6)
    log_post, log_odds = predict_matrix(model, X)
    assert np.exp(log_post[0]) == pytest.approx(
        [china / (china + japan), japan / (china + japan)], abs=1e-15
    )
    assert log_odds[0] == pytest.approx(log(japan / china), abs=1e-12)


def test_bernoulli_weights_and_bias_match_math_md():
    model, _ = textbook("bernoulli")
    sc = model.form
    t = sc.index.terms
    # w_a = log[theta+ (1 - theta-) / (theta- (1 - theta+))], + = japan, - = china
    w_chinese = log((2 / 3) * (1 - 4 / 5) / ((4 / 5) * (1 - 2 / 3)))
    assert sc.weights[t.index("chinese")] == pytest.approx(w_chinese, abs=1e-14)
    # b = sum_a log[(1 - theta+)/(1 - theta-)] + log(pi+/pi-)
    bias = (
        log((1 - 2 / 3) / (1 - 4 / 5))  # chinese
        + 2 * log((1 - 2 / 3) / (1 - 1 / 5))  # japan, tokyo
        + 3 * log((1 - 1 / 3) / (1 - 2 / 5))  # beijing, macao, shanghai
        + log((1 / 4) / (3 / 4))
    )
    assert sc.bias == pytest.approx(bias, abs=1e-13)


@pytest.mark.parametrize("model_name", ["multinomial", "bernoulli", "complement"])
def test_explanation_adds_up_to_the_log_odds(model_name):
    model, X = textbook(model_name)
    e = explain_message(model, "d5", TEST)
    _, log_odds = predict_matrix(model, X)
    assert e.bias + sum(c.contribution for c in e.contributions) == pytest.approx(
        log_odds[0], abs=1e-12
    )
    assert e.log_odds == log_odds[0]
    counts = {c.term: c.count for c in e.contributions}
    assert counts == (
        {"chinese": 3, "tokyo": 1, "japan": 1}
        if model_name != "bernoulli"
        else {"chinese": 1, "tokyo": 1, "japan": 1}
    )


def random_counts(seed: int, n=60, d=40, classes=("ham", "spam")):
    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.4, size=(n, d)) * (rng.random((n, d)) < 0.5)
    dense[np.arange(d) % n, np.arange(d)] += 1  # every term occurs at least once
    y = [classes[i % len(classes)] for i in range(n)]
    return sp.csr_matrix(dense.astype(np.int64)), y, [f"t{i:03d}" for i in range(d)]


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.01])
@pytest.mark.parametrize("classes", [("ham", "spam"), ("a", "b", "c")])
def test_multinomial_agrees_with_scikit_learn(alpha, classes):
    from sklearn.naive_bayes import MultinomialNB

    X, y, terms = random_counts(int(alpha * 100) + len(classes), classes=classes)
    model = fit(X, y, terms, settings(alpha=alpha))
    ref = MultinomialNB(alpha=alpha).fit(X, y)
    np.testing.assert_allclose(model.form.coef, ref.feature_log_prob_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.form.intercept, ref.class_log_prior_, rtol=1e-12, atol=1e-12)
    log_post, _ = predict_matrix(model, X)
    np.testing.assert_allclose(log_post, ref.predict_log_proba(X), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("alpha", [1.0, 0.1])
def test_binary_multinomial_is_multinomial_on_presence(alpha):
    from sklearn.naive_bayes import MultinomialNB

    X, y, terms = random_counts(17)
    model = fit(X, y, terms, settings(alpha=alpha, binary=True))
    B = (X > 0).astype(np.int64)
    ref = MultinomialNB(alpha=alpha).fit(B, y)
    np.testing.assert_allclose(model.form.coef, ref.feature_log_prob_, rtol=1e-12, atol=1e-12)
    log_post, _ = predict_matrix(model, X)
    np.testing.assert_allclose(log_post, ref.predict_log_proba(B), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.01])
@pytest.mark.parametrize("classes", [("ham", "spam"), ("a", "b", "c")])
def test_bernoulli_agrees_with_scikit_learn(alpha, classes):
    from sklearn.naive_bayes import BernoulliNB

    X, y, terms = random_counts(int(alpha * 100) + 7 * len(classes), classes=classes)
    model = fit(X, y, terms, settings(event_model="bernoulli", alpha=alpha))
    ref = BernoulliNB(alpha=alpha).fit(X, y)
    log_theta, _ = nb.bernoulli_log_probs(model.doc_count, model.class_count, alpha)
    np.testing.assert_allclose(log_theta, ref.feature_log_prob_, rtol=1e-12, atol=1e-12)
    log_post, _ = predict_matrix(model, X)
    np.testing.assert_allclose(log_post, ref.predict_log_proba(X), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("alpha", [1.0, 0.3, 0.01])
@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("classes", [("ham", "spam"), ("a", "b", "c")])
def test_complement_agrees_with_scikit_learn(alpha, norm, binary, classes):
    from sklearn.naive_bayes import ComplementNB

    X, y, terms = random_counts(int(alpha * 100) + 3 * len(classes) + norm, classes=classes)
    model = fit(
        X, y, terms, settings(event_model="complement", alpha=alpha, complement_norm=norm, binary=binary)
    )
    F = (X > 0).astype(np.int64) if binary else X  # presence: scikit-learn on binarised X
    ref = ComplementNB(alpha=alpha, norm=norm).fit(F, y)
    np.testing.assert_allclose(model.form.coef, ref.feature_log_prob_, rtol=1e-12, atol=1e-12)
    assert model.form.intercept.tolist() == [0.0] * len(classes)  # no prior
    jll = ref.predict_joint_log_proba(F)
    sc = model.form
    mine = nb.joint_log_likelihood(X, sc.coef, sc.intercept, binary=sc.binary)
    np.testing.assert_allclose(mine, jll, rtol=1e-10, atol=1e-10)
    log_post, log_odds = predict_matrix(model, X)
    np.testing.assert_allclose(log_post, ref.predict_log_proba(F), rtol=1e-10, atol=1e-10)
    assert (np.array(model.labels)[log_post.argmax(axis=1)] == ref.predict(F)).all()
    if len(classes) == 2:
        np.testing.assert_allclose(log_odds, jll[:, 1] - jll[:, 0], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("binary", [False, True])
def test_two_class_complement_is_multinomial_with_a_uniform_prior(binary):
    X, y, terms = random_counts(21)
    complement = fit(X, y, terms, settings(event_model="complement", binary=binary, alpha=0.5))
    multinomial = fit(X, y, terms, settings(binary=binary, alpha=0.5, prior="uniform"))
    np.testing.assert_allclose(
        complement.form.weights, multinomial.form.weights, rtol=1e-13, atol=1e-13
    )
    assert complement.form.bias == multinomial.form.bias == 0.0
    np.testing.assert_allclose(
        predict_matrix(complement, X)[1], predict_matrix(multinomial, X)[1], atol=1e-12
    )


def test_complement_textbook_by_hand():
    model, X = textbook("complement")
    t = model.form.index.terms
    # china's complement is the japan document: chinese, japan, tokyo once each, 3 words
    # over 6 terms: theta~ = 2/9 for those, 1/9 for the rest; japan's complement is the
    # three china documents, 8 words: chinese (5 + 1) / 14, beijing, macao, shanghai 2/14,
    # japan and tokyo 1/14. coef = -log theta~
    assert -model.form.coef[0, t.index("chinese")] == pytest.approx(log(2 / 9), abs=1e-15)
    assert -model.form.coef[0, t.index("macao")] == pytest.approx(log(1 / 9), abs=1e-15)
    assert -model.form.coef[1, t.index("chinese")] == pytest.approx(log(6 / 14), abs=1e-15)
    assert -model.form.coef[1, t.index("tokyo")] == pytest.approx(log(1 / 14), abs=1e-15)
    # d5 = chinese x3, tokyo, japan: sum x w is 5 log(2/9) = -7.52 for china and
    # 3 log(3/7) + 2 log(1/14) = -7.82 for japan: the smaller, japan, is decided
    china, japan = 5 * log(2 / 9), 3 * log(3 / 7) + 2 * log(1 / 14)
    assert japan < china
    log_post, log_odds = predict_matrix(model, X)
    assert model.labels[int(log_post[0].argmax())] == "japan"
    assert log_odds[0] == pytest.approx(china - japan, abs=1e-12)
    # the multinomial log-odds of the same message without its prior 1/4 : 3/4
    assert log_odds[0] == pytest.approx(log((2 / 9) ** 5 / ((3 / 7) ** 3 * (1 / 14) ** 2)))


def test_complement_weight_normalisation_by_hand():
    model, _ = textbook("complement")
    normed = dataclasses.replace(
        model, training=model.training.replace(complement_norm=True)
    )
    t = normed.form.index.terms
    # each class's w divided by sum_k |w_kc| over the 6 terms
    china = 3 * log(9 / 2) + 3 * log(9)
    japan = log(14 / 6) + 3 * log(7) + 2 * log(14)
    assert normed.form.coef[0, t.index("chinese")] == pytest.approx(log(9 / 2) / china)
    assert normed.form.coef[1, t.index("tokyo")] == pytest.approx(log(14) / japan)
    assert np.abs(normed.form.coef).sum(axis=1) == pytest.approx([1.0, 1.0], abs=1e-15)


def test_posteriors_sum_to_one_and_log_odds_do_not_saturate():
    X, y, terms = random_counts(3)
    model = fit(X, y, terms, settings())
    # a huge message: every word 400 times
    big = sp.csr_matrix(np.full((2, len(terms)), 400, dtype=np.int64))
    big[1, 0] = 100
    log_post, log_odds = predict_matrix(model, big)
    assert np.exp(log_post).sum(axis=1) == pytest.approx([1.0, 1.0], abs=1e-12)
    assert np.all(np.isfinite(log_odds)) and abs(log_odds[0]) > 50
    assert log_odds[0] != log_odds[1]


@pytest.mark.parametrize("model_name", ["multinomial", "bernoulli", "complement"])
def test_two_class_posteriors_from_the_log_odds_are_the_log_sum_exp_ones(model_name):
    X, y, terms = random_counts(11)
    model = fit(X, y, terms, settings(event_model=model_name))
    sc = model.form
    jll = nb.joint_log_likelihood(X, sc.coef, sc.intercept, binary=sc.binary)
    log_post, log_odds = predict_matrix(model, X)
    np.testing.assert_allclose(log_post, nb.log_posterior(jll), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(log_odds, jll[:, 1] - jll[:, 0], rtol=1e-12, atol=1e-9)


@hypothesis_settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(-2000, 2000, allow_nan=False), min_size=1, max_size=20),
    st.integers(0, 1),
)
def test_two_class_posteriors_in_math_are_numpys_to_the_bit(log_odds, positive):
    from nbspam.models.decision import log_posterior_two

    batch = nb.log_posterior_two(np.array(log_odds), positive)
    assert batch.tolist() == [log_posterior_two(s, positive) for s in log_odds]
    assert np.all(np.abs(np.exp(batch).sum(axis=1) - 1) < 1e-15)


def test_training_in_two_batches_equals_training_at_once():
    X, y, terms = random_counts(5)
    whole = nb.class_counts(X, np.array([y_ == "spam" for y_ in y], np.int64), 2)
    a = nb.class_counts(X[:25], np.array([y_ == "spam" for y_ in y[:25]], np.int64), 2)
    b = nb.class_counts(X[25:], np.array([y_ == "spam" for y_ in y[25:]], np.int64), 2)
    for total, part_a, part_b in zip(whole, a, b):
        np.testing.assert_array_equal(total, part_a + part_b)


def test_priors_fitted_uniform_and_explicit():
    X, y, terms = random_counts(9, n=30)  # 15 ham, 15 spam
    y = ["spam" if i < 10 else "ham" for i in range(30)]  # 20 ham, 10 spam
    fitted = fit(X, y, terms, settings()).form.intercept
    assert fitted == pytest.approx([log(20 / 30), log(10 / 30)])
    uniform = fit(X, y, terms, settings(prior="uniform")).form.intercept
    assert uniform == pytest.approx([log(0.5), log(0.5)])
    given = fit(X, y, terms, settings(prior="spam=1,ham=3")).form.intercept
    assert given == pytest.approx([log(0.75), log(0.25)])


def test_alpha_zero_is_floored_and_says_so():
    model, X = textbook("multinomial")
    zero = dataclasses.replace(model, training=model.training.replace(alpha=0.0))
    with pytest.warns(nb.SmoothingWarning, match="alpha = 0"):
        log_post, log_odds = predict_matrix(zero, X)
    assert np.all(np.isfinite(log_post)) and np.isfinite(log_odds[0])


def test_alpha_zero_without_zero_counts_is_the_exact_maximum_likelihood():
    counts = np.array([[2, 2], [1, 3]], dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log_theta = nb.multinomial_log_prob(counts, 0.0)
    np.testing.assert_allclose(np.exp(log_theta), [[0.5, 0.5], [0.25, 0.75]], atol=1e-15)


def test_min_count_and_max_features_filter_the_scored_vocabulary():
    model, _ = textbook("multinomial")

    def kept(**settings):
        changed = model.training.replace(**settings)
        return list(dataclasses.replace(model, training=changed).form.index.terms)

    assert kept(min_count=2) == ["chinese"]  # the only word in two or more documents
    assert kept(max_df=0.5) == ["beijing", "japan", "macao", "shanghai", "tokyo"]
    # df: chinese 4, others 1; ties broken by sorted term order
    assert kept(max_features=3) == ["beijing", "chinese", "japan"]
    # mutual information: japan and tokyo, only in the japan document, tell the labels
    # apart, I = H(Y); beijing, macao and shanghai, in one china document each, less;
    # chinese, in every document, not at all
    assert kept(select="mi", max_features=2) == ["japan", "tokyo"]
    assert kept(select="mi", max_features=3) == ["beijing", "japan", "tokyo"]
    assert "chinese" not in kept(select="mi", max_features=5)


@pytest.mark.parametrize("min_count", [1, 3])
def test_select_mi_keeps_the_top_k_terms_by_scikit_learns_mutual_information(min_count):
    from sklearn.feature_selection import mutual_info_classif

    X, y, terms = random_counts(23, n=80, d=50)
    model = fit(X, y, terms, settings(select="mi", max_features=12, min_count=min_count))
    presence = (X > 0).astype(np.int64).toarray()
    mi = mutual_info_classif(presence, y, discrete_features=True)
    candidates = [a for a in range(len(terms)) if presence[:, a].sum() >= min_count]
    best = sorted(candidates, key=lambda a: -mi[a])[:12]  # stable: ties in term order
    assert list(model.form.kept) == sorted(best)
    assert len(set(model.form.kept)) == 12


def test_counts_in_any_order_give_the_same_model():
    X, y, terms = random_counts(11)
    model = fit(X, y, terms, settings())
    rev = np.arange(len(terms))[::-1]
    again = fit(X[:, rev].tocsr(), y, [terms[i] for i in rev], settings())
    assert_same_model(again, model)


def test_save_then_load_gives_identical_predictions(tmp_path):
    X, y, terms = random_counts(13, classes=("a", "b", "c"))
    model = fit(X, y, terms, settings(event_model="bernoulli", alpha=0.3))
    save_model(model, tmp_path / "m.nbm")
    loaded = load_model(tmp_path / "m.nbm")
    assert_same_model(loaded, model)
    np.testing.assert_array_equal(predict_matrix(loaded, X)[0], predict_matrix(model, X)[0])


def test_one_class_is_refused():
    X, _, terms = random_counts(1)
    from nbspam.errors import TrainingError

    with pytest.raises(TrainingError, match="at least two labels"):
        fit(X, ["ham"] * X.shape[0], terms, settings())
    with pytest.raises(TrainingError, match="no terms survive --min-count 1000"):
        counts = ClassCounts(
            ("a", "b"),
            ("x",),
            np.array([1, 1]),
            np.ones((2, 1), np.int64),
            np.ones((2, 1), np.int64),
        )
        from_counts(counts, settings(min_count=1000))


@pytest.mark.corpus
@pytest.mark.slow
def test_agrees_with_scikit_learn_on_the_spamassassin_corpus(spamassassin_matrix):
    from sklearn.naive_bayes import BernoulliNB, MultinomialNB

    X, y, terms = spamassassin_matrix
    runs = (
        ("multinomial", False, MultinomialNB),
        ("multinomial", True, MultinomialNB),
        ("bernoulli", False, BernoulliNB),
    )
    for name, binary, ref_class in runs:
        model = fit(X, y, terms, settings(event_model=name, min_count=2, binary=binary, alpha=0.1))
        Xk = X[:, model.form.kept]
        if binary:
            Xk = (Xk > 0).astype(np.int64)
        ref = ref_class(alpha=0.1).fit(Xk, y)
        log_post, log_odds = predict_matrix(model, Xk)
        if name == "multinomial":
            np.testing.assert_allclose(model.form.coef, ref.feature_log_prob_, rtol=1e-12)
        ref_post = ref.predict_log_proba(Xk)
        np.testing.assert_allclose(log_post, ref_post, rtol=1e-10, atol=1e-10)
        jll = ref.predict_joint_log_proba(Xk)
        np.testing.assert_allclose(log_odds, jll[:, 1] - jll[:, 0], rtol=1e-10, atol=1e-8)


@hypothesis_settings(max_examples=100, deadline=None)
@given(st.integers(0, 30), st.integers(1, 12), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_class_counts_are_the_dense_sums(n, d, n_classes, seed):
    rng = np.random.default_rng(seed)
    dense = rng.integers(0, 4, size=(n, d)) * (rng.random((n, d)) < 0.4)
    y = rng.integers(0, n_classes, size=n)
    class_count, term_count, doc_count = nb.class_counts(sp.csr_matrix(dense), y, n_classes)
    for c in range(n_classes):
        assert class_count[c] == (y == c).sum()
        np.testing.assert_array_equal(term_count[c], dense[y == c].sum(axis=0))
        np.testing.assert_array_equal(doc_count[c], (dense[y == c] > 0).sum(axis=0))
    assert term_count.dtype == doc_count.dtype == np.int64


def test_every_event_model_named_in_the_settings_has_its_class():
    from nbspam.core.settings import EVENT_MODELS
    from nbspam.models.event_models import event_model

    for name in EVENT_MODELS:
        assert event_model(name).name == name
