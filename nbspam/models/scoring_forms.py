"""Scoring forms: what an event model makes of a model's counts, and how it scores count
rows with it (`event_models` makes them, `model.predict_matrix` uses them).

A form holds its kept terms (``kept``, columns of the model's vocabulary) and whether a term
counts by presence (``binary``), and gives, for count rows over the kept terms, the log
posteriors and (two classes) the log-odds of the positive class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..core.sparse import sp
from ..text.vocabulary import TermIndex, Terms
from . import naive_bayes as nb
from .fisher import fisher_log_odds_many


@dataclass(frozen=True, eq=False)
class _Kept:
    """The kept terms of a form: ``kept`` (k,) their columns in the model's vocabulary;
    ``terms`` (k,), and ``index``, a map of a kept term to its column 0..k-1, are built when
    first needed."""

    kept: np.ndarray
    vocabulary: tuple[str, ...]

    @cached_property
    def terms(self) -> tuple[str, ...]:
        return pick(self.vocabulary, self.kept)

    @cached_property
    def index(self) -> TermIndex:
        return TermIndex(self.terms)


@dataclass(frozen=True, eq=False)
class LinearForm(_Kept):
    """J = f(X) coef.T + intercept: coef (C, k), intercept (C,); ``binary`` says f is
    presence. For two-class models, weights (k,) and bias are the log-odds form (positive
    against negative, ``positive`` the positive class's row)."""

    coef: np.ndarray
    intercept: np.ndarray
    binary: bool
    weights: np.ndarray | None
    bias: float | None
    positive: int | None

    def predict(self, F: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray | None]:
        """(log posteriors (n, C), log-odds (n,) or None) of rows F (n, k), f already applied.

        The log-odds b + F w comes from the linear form directly, never from the posteriors,
        so it does not saturate; a two-class model's posteriors follow from it.
        """
        if self.weights is None:
            jll = nb.joint_log_likelihood(F, self.coef, self.intercept, binary=False)
            return nb.log_posterior(jll), None
        log_odds = np.asarray(F @ self.weights) + self.bias
        return nb.log_posterior_two(log_odds, self.positive), log_odds


@dataclass(frozen=True, eq=False)
class FisherForm(_Kept):
    """Robinson–Fisher scoring (`fisher`, docs/math.md, "Robinson–Fisher combining") over the clues: the kept terms are the
    words with |f - 1/2| >= min_dev, log_f (k,) = ln f and log_not_f (k,) = ln(1 - f) of
    each. A message's score is logit(I) from the sums over its clues; ``positive`` is the
    row of the spam class. Presence only."""

    log_f: np.ndarray
    log_not_f: np.ndarray
    positive: int
    binary: bool = True

    @property
    def coef(self) -> np.ndarray:
        """(2, k): ln f in the positive class's row, ln(1 - f) in the other; so the pair
        weights of the classes are logit(f), each word's evidence on its own."""
        coef = np.empty((2, self.log_f.size))
        coef[self.positive], coef[1 - self.positive] = self.log_f, self.log_not_f
        return coef

    @property
    def intercept(self) -> np.ndarray:
        return np.zeros(2)

    def predict(self, F: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """(log posteriors (n, 2), log-odds (n,)) of presence rows F (n, k): for each row the
        sums of ln f and ln(1 - f) over its clues, and logit(I) from them, all rows at once
        (`fisher_log_odds_many`: each row's `fisher_log_odds` to the bit)."""
        sums = np.asarray(F @ np.column_stack([self.log_f, self.log_not_f]))
        log_odds = fisher_log_odds_many(sums[:, 0], sums[:, 1], np.diff(F.indptr))
        return nb.log_posterior_two(log_odds, self.positive), log_odds


def pick(items: Sequence[str], positions: np.ndarray) -> tuple[str, ...]:
    """The items at the given positions, as a tuple."""
    if isinstance(items, Terms):  # a packed vocabulary: in one pass, not a term at a time
        return items.picked(positions)
    return tuple(map(items.__getitem__, positions.tolist()))


def predict_counts(
    form: LinearForm | FisherForm, X: sp.csr_matrix
) -> tuple[np.ndarray, np.ndarray | None]:
    """(log posteriors (n, C), log-odds (n,) or None) of count rows X (n, k) over the form's
    kept terms: presence where the form is binary, else the counts. The log-odds never
    saturates: a message at log-odds 800 scores 800."""
    F = X
    if form.binary:  # f(x) = [x > 0]: presence
        F = X.copy()
        F.data = np.ones_like(F.data)
    return form.predict(F)
