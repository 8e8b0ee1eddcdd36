"""The mathematics of naive Bayes (docs/math.md) as small pure functions on numpy arrays.

Shapes: C classes, d terms, n documents. Counts are int64, everything in log space float64.
The naive Bayes event models are linear in their document features, so all are reduced to
one form

    J(x)_c = intercept_c + sum_a f(x_a) coef_ca       (f(x) = x multinomial, f(x) = [x > 0] Bernoulli)

and scoring, log-odds weights and per-word explanations are shared by the models.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.sparse import sp
from ..errors import TrainingError

#: Smallest smoothing used when alpha = 0 would put log(0) into a score (as scikit-learn does).
ALPHA_FLOOR = 1e-10


class SmoothingWarning(UserWarning):
    """alpha = 0 met a zero count, and was raised to ALPHA_FLOOR so that no log(0) is taken."""


#: The entries of count rows `class_counts` sums at a time (integer counts): its
#: temporaries are a block's, not the rows'.
SUMMED = 1 << 16


def class_counts(
    X: sp.csr_matrix, y: np.ndarray, n_classes: int, *, narrow: bool = False
) -> tuple[np.ndarray, ...]:
    """Sufficient statistics of a labelled count matrix.

    X: (n, d) counts x_ia; y: (n,) class indices in [0, C). Returns
    class_count (C,) = N_c, term_count (C, d) = sum_{i: y_i=c} x_ia, and
    doc_count (C, d) = sum_{i: y_i=c} b_ia, all int64 (with ``narrow``, the two sums in
    int32 where all of X's counts add up to less than 2^31). Everything a model needs is a
    sum of these over documents, so models trained on parts add up to the model trained
    on all.
    """
    n, d = X.shape
    X = X.tocsr()
    y = np.asarray(y, np.int64)
    # the per-class sums as one product X^T Y, Y (n, C) the one-hot labels: summed entry by
    # entry into the (d, C) result, with no temporary the size of X's entries where the
    # sums fit X's integers (int32 for a sample's rows; bincount's keys and weights took 16
    # bytes an entry); exact, as integers, and so summed `SUMMED` entries at a time (the
    # product's copy of the counts as int32, and the presence of each, are a block's)
    kind = np.int64
    blocks = [(0, n)]
    if X.dtype.kind in "iu" and X.dtype.itemsize <= 4:
        if int(X.data.sum(dtype=np.int64)) < 2**31 and n < 2**31:
            kind = np.int32
        starts = np.searchsorted(X.indptr, np.arange(0, X.nnz, SUMMED), "right") - 1
        bounds = [*sorted({0, *starts.tolist()}), n]
        blocks = list(zip(bounds[:-1], bounds[1:]))
    elif X.dtype.kind == "f":
        kind = np.float64
    onehot = np.zeros((n, n_classes), kind)
    onehot[np.arange(n), y] = 1
    term_count = doc_count = None
    for start, stop in blocks:
        part = X if len(blocks) == 1 else X[start:stop]
        labels = onehot[start:stop]
        terms = part.T @ labels
        # b_ia = [x_ia > 0]; an explicit zero is no occurrence
        present = (part.data != 0).astype(kind)
        docs = sp.csr_matrix((present, part.indices, part.indptr), shape=part.shape).T @ labels
        del part, present
        if term_count is None:
            term_count, doc_count = terms, docs
        else:
            term_count += terms
            doc_count += docs
        del terms, docs
    wide = None if narrow and kind == np.int32 else np.int64
    return (
        np.bincount(y, minlength=n_classes).astype(np.int64),
        np.ascontiguousarray(term_count.T, dtype=wide),
        np.ascontiguousarray(doc_count.T, dtype=wide),
    )


def class_log_prior(class_count: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """log pi_c, shape (C,).

    Fitted prior (``weights`` None): pi_c = N_c / N (the Dirichlet prior with a = 0).
    Uniform or explicit prior: pi_c = w_c / sum_k w_k for the given weights (C,).
    """
    w = np.asarray(class_count if weights is None else weights, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(w) - np.log(w.sum())


def prior_weights(prior: Any, labels: Sequence[str]) -> np.ndarray | None:
    """Class weights for `naive_bayes.class_log_prior`: None for the fitted prior."""
    if prior == "fitted":
        return None
    if prior == "uniform":
        return np.ones(len(labels))
    given = dict(prior)
    if set(given) != set(labels):
        raise TrainingError(
            f"the prior names labels {sorted(given)} but the model has labels {list(labels)}"
        )
    return np.array([given[label] for label in labels], dtype=np.float64)


def smoothing(alpha: float, has_zero: bool) -> float:
    """The alpha actually used: alpha itself, or ALPHA_FLOOR when alpha = 0 meets a zero count.

    docs/math.md, "Smoothing": with l = 0 an unseen (word, class) pair has estimate 0 and log 0 must never
    reach a score; it is floored, and a SmoothingWarning says so.
    """
    if alpha == 0 and has_zero:
        warnings.warn(
            f"alpha = 0 leaves some (word, class) probabilities at 0 or 1; using alpha = "
            f"{ALPHA_FLOOR:g} instead (give --alpha > 0 to choose the smoothing)",
            SmoothingWarning,
            stacklevel=2,
        )
        return ALPHA_FLOOR
    return alpha


def multinomial_log_prob(term_count: np.ndarray, alpha: float) -> np.ndarray:
    """log theta_ac of the multinomial event model, shape (C, d).

    theta_ac = (sum_{i: y_i=c} x_ia + l) / (sum_{i: y_i=c} m_i + l d),  with m_i summed over
    the d terms of the vocabulary. (McCallum and Nigam 1998.)
    """
    d = term_count.shape[1]
    alpha = smoothing(alpha, np.count_nonzero(term_count) < term_count.size)
    denominator = term_count.sum(axis=1, keepdims=True) + alpha * d
    # one new (C, d) array, the logs taken in it: the same values as log(num) - log(den)
    out = np.add(term_count, alpha, dtype=np.float64)
    with np.errstate(divide="ignore"):
        np.log(out, out=out)
        out -= np.log(denominator)
    return out


def bernoulli_log_probs(
    doc_count: np.ndarray, class_count: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """(log theta_ac, log(1 - theta_ac)) of the Bernoulli event model, each (C, d).

    theta_ac = (sum_{i: y_i=c} b_ia + l) / (N_c + 2 l). Both logs come from counts, so
    log(1 - theta) = log(N_c - df_ac + l) - log(N_c + 2 l) loses no precision near theta = 1.
    """
    n_c = class_count[:, None]
    has_zero = np.count_nonzero(doc_count) < doc_count.size or (doc_count == n_c).any()
    alpha = smoothing(alpha, bool(has_zero))
    # each (C, d) array made once and its log taken in it (the same values as without)
    present = np.add(doc_count, alpha, dtype=np.float64)
    absent = np.subtract(n_c, doc_count, dtype=np.float64)
    absent += alpha
    with np.errstate(divide="ignore"):
        log_denominator = np.log(n_c + 2 * alpha)
        for out in (present, absent):
            np.log(out, out=out)
            out -= log_denominator
    return present, absent


def multinomial_linear(
    term_count: np.ndarray, log_prior: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """(coef (C, d), intercept (C,)) with J_c(x) = log pi_c + sum_a x_a log theta_ac.

    The multinomial coefficient log(m! / prod x_a!) is the same for every class and dropped.
    """
    return multinomial_log_prob(term_count, alpha), log_prior


def complement_linear(
    term_count: np.ndarray, alpha: float, *, norm: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(coef (C, d), intercept (C,)) of complement naive Bayes (Rennie et al. 2003).

    Each class is estimated from the counts of all the other classes:
    theta~_ac = (sum_{i: y_i != c} x_ia + l) / (sum_{i: y_i != c} m_i + l d), the multinomial
    estimate of the complement's counts, and w_ac = log theta~_ac; with ``norm``,
    w_ac / sum_k |w_kc|. The class decided is argmin_c sum_a x_a w_ac, the class whose
    complement explains the document worst, so coef = -w and J_c(x) = -sum_a x_a w_ac is
    maximised as for the other models. There is no prior: intercept_c = 0 (as scikit-learn's
    ComplementNB for two classes or more). With two classes and no normalisation the
    complement of one class is the other, and the log-odds weights are the multinomial
    model's with a uniform prior.

    Rennie's transforms of x (log(1 + x), the inverse document frequency, the length
    normalisation) are not applied: they make the counts non-integer, and learn, forget and
    merge could no longer add and subtract them exactly.
    """
    complement = term_count.sum(axis=0, keepdims=True) - term_count
    w = multinomial_log_prob(complement, alpha)
    del complement
    if norm:
        w /= np.abs(w).sum(axis=1, keepdims=True)
    np.negative(w, out=w)
    return w, np.zeros(term_count.shape[0])


def bernoulli_linear(
    doc_count: np.ndarray, class_count: np.ndarray, log_prior: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """(coef (C, d), intercept (C,)) with J_c(b) = intercept_c + sum_a b_a coef_ca, where

    coef_ca = log theta_ac - log(1 - theta_ac) and intercept_c = log pi_c + sum_a log(1 - theta_ac):
    the sparse form of sum_a [b_a log theta_ac + (1 - b_a) log(1 - theta_ac)], in which absent
    words count through the intercept.
    """
    log_theta, log_not_theta = bernoulli_log_probs(doc_count, class_count, alpha)
    intercept = log_prior + log_not_theta.sum(axis=1)
    log_theta -= log_not_theta
    return log_theta, intercept


def joint_log_likelihood(
    X: sp.csr_matrix, coef: np.ndarray, intercept: np.ndarray, *, binary: bool
) -> np.ndarray:
    """J (n, C): J_ic = intercept_c + sum_a f(x_ia) coef_ca, f the identity or presence."""
    if binary:
        X = X.copy()
        X.data = np.ones_like(X.data)
    return np.asarray(X @ coef.T) + intercept


def log_posterior(jll: np.ndarray) -> np.ndarray:
    """log P(c | x) = J_c - logsumexp_k J_k, shape (n, C); the rows exponentiate to sum 1."""
    top = jll.max(axis=1, keepdims=True)
    return jll - (top + np.log(np.exp(jll - top).sum(axis=1, keepdims=True)))


def log_posterior_two(log_odds: np.ndarray, positive: int) -> np.ndarray:
    """log P(c | x), shape (n, 2), of a two-class model from the log-odds s of class
    ``positive``: log P(+|x) = -log(1 + e^-s) and log P(-|x) = -log(1 + e^s).

    Since s = J_+ - J_-, this is `log_posterior` (J_c - logsumexp_k J_k) for two classes,
    computed from one product instead of two; `decision.log_posterior_two` is the same
    in plain Python (both through log1p and exp: numpy's logaddexp(0, z)).
    """
    out = np.empty((len(log_odds), 2))
    out[:, positive] = -np.logaddexp(0.0, -log_odds)
    out[:, 1 - positive] = -np.logaddexp(0.0, log_odds)
    return out


def pair_weights(
    coef: np.ndarray, intercept: np.ndarray, positive: int, negative: int
) -> tuple[np.ndarray, float]:
    """Log-odds weights w (d,) and bias b of class ``positive`` against class ``negative``.

    w_a = coef_{+a} - coef_{-a} and b = intercept_+ - intercept_-, so that
    log P(+|x) - log P(-|x) = b + sum_a f(x_a) w_a exactly. For the multinomial model
    w_a = log theta_a+ - log theta_a- and b = log pi_+ - log pi_-; for the Bernoulli model
    w_a = log[theta_a+ (1 - theta_a-) / (theta_a- (1 - theta_a+))] and
    b = sum_a log[(1 - theta_a+) / (1 - theta_a-)] + log(pi_+ / pi_-)  (docs/math.md, "The linear form: weights and bias").
    """
    return coef[positive] - coef[negative], float(intercept[positive] - intercept[negative])
