"""A scikit-learn estimator of nbspam's naive Bayes: `NaiveBayesTextClassifier`.

It fits on raw messages (a 1-D sequence of ``bytes``, a raw message each, or ``str``, a
text each) tokenized as ``nbspam train`` tokenizes them, or on a ready count matrix (a
2-D array or sparse matrix of non-negative counts, one row per document and one column per
term, as `sklearn.feature_extraction.text.CountVectorizer` makes). Either way the model is
nbspam's `model.Model`, as ``model_``: on messages, the model ``nbspam.train`` gives for
the same messages and settings; on counts, what scikit-learn's ``MultinomialNB`` gives for
the same counts and alpha, with ``event_model="multinomial", binary=False``.

Needs scikit-learn (``pip install scikit-learn``, or ``pip install '.[sklearn]'`` in
nbspam's checkout).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from .core import arguments as arg
from .core.sparse import sp
from .errors import ConfigError, NbspamError
from .text.counts import ClassCounts

#: The checks of `sklearn.utils.estimator_checks` that cannot apply, each with its reason:
#: the mapping `parametrize_with_checks` and `check_estimator` take as
#: ``expected_failed_checks``.
EXPECTED_FAILED_CHECKS: dict[str, str] = {
    "check_decision_proba_consistency": (
        "it fits on features with negative values, which are no counts: the estimator "
        "refuses them, as its positive_only tag says, but this check ignores the tag"
    ),
}


class NaiveBayesTextClassifier(ClassifierMixin, BaseEstimator):
    """nbspam's naive Bayes over raw messages or a count matrix, as a scikit-learn classifier.

    The parameters are the options of ``nbspam train`` (snake_case) of the same names and
    meanings, with nbspam's defaults but for ``event_model``; ``settings`` takes any other
    setting (``{"cutoffs": "-5,5"}``, ``{"ngrams": 2}``). ``stop_words``, ``ngrams`` and
    ``mail`` only matter for messages. ``event_model="auto"`` chooses by internal
    cross-validation on messages; on a count matrix it is multinomial.

    Messages whose bytes are the same are counted once, as nbspam counts them. On a count
    matrix every column is a term; fractional counts (tf-idf, say) are taken as they are,
    as ``MultinomialNB`` takes them.

    Attributes: ``classes_`` (the labels, sorted), ``model_`` (the `model.Model`, whose
    labels are the positions of ``classes_`` written as ``0000``, ``0001``, ...),
    ``n_features_in_`` (count matrices only). ``decision_function`` gives a two-class
    model's log-odds of ``classes_[1]``, which never saturates; for more classes the log
    posteriors.
    """

    def __init__(
        self,
        event_model: str = "multinomial",
        alpha: float = 0.1,
        binary: bool = True,
        prior: Any = "fitted",
        min_count: int = 1,
        max_df: float = 1.0,
        max_features: int | None = None,
        select: str = "frequency",
        stop_words: str = "none",
        ngrams: int = 1,
        mail: str = "auto",
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.event_model = event_model
        self.alpha = alpha
        self.binary = binary
        self.prior = prior
        self.min_count = min_count
        self.max_df = max_df
        self.max_features = max_features
        self.select = select
        self.stop_words = stop_words
        self.ngrams = ngrams
        self.mail = mail
        self.settings = settings

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        # naive Bayes of counts is not made for the checks' Gaussian blobs: scikit-learn's
        # own discrete naive Bayes estimators say so too
        tags.classifier_tags.poor_score = True
        return tags

    # ----------------------------------------------------------------------------------------
    # Fitting
    # ----------------------------------------------------------------------------------------

    def fit(self, X: Any, y: Any) -> NaiveBayesTextClassifier:
        """Fit on messages or a count matrix ``X`` with labels ``y``."""
        for name in ("model_", "_totals", "n_features_in_"):
            self.__dict__.pop(name, None)
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if len(self.classes_) < 2:
            found = f"one class, {self.classes_[0]!r}" if len(self.classes_) else "no samples"
            raise ValueError(f"need samples of at least two classes to fit, found {found}")
        return self._add(X, y, reset=True)

    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> NaiveBayesTextClassifier:
        """Add messages or count rows to the model (the first call fits, and must name all
        the ``classes``); the result equals fitting on all of them at once."""
        first = not hasattr(self, "classes_")
        if first:
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit")
            check_classification_targets(classes)
            self.classes_ = np.unique(np.asarray(classes))
        elif classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(f"classes={classes!r} is not the same as on the first call")
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        return self._add(X, y, reset=first)

    def _add(self, X: Any, y: Any, *, reset: bool) -> NaiveBayesTextClassifier:
        y = np.asarray(y)
        unknown = np.setdiff1d(y, self.classes_)
        if unknown.size:
            raise ValueError(f"labels {unknown.tolist()} are not in classes {self.classes_}")
        y_idx = np.searchsorted(self.classes_, y)
        try:
            if _is_messages(X):
                self._add_messages(list(X), y_idx, reset=reset)
            else:
                self._add_counts(X, y_idx, reset=reset)
        except NbspamError as error:
            raise ValueError(str(error)) from error
        return self

    def _settings(self) -> Any:
        from .fit.run_settings import resolve_settings

        arg.optional(arg.instance, "settings", self.settings, dict, "a dict of settings")
        values = {
            "event_model": self.event_model,
            "alpha": self.alpha,
            "binary": self.binary,
            "prior": self.prior,
            "min_count": self.min_count,
            "max_df": self.max_df,
            "max_features": self.max_features,
            "select": self.select,
            "stop_words": self.stop_words,
            "ngrams": self.ngrams,
            "mail": self.mail,
            "calibrate": False,  # the verdicts and calibration are nbspam's, not scikit-learn's
            **(self.settings or {}),
        }
        prior = values["prior"]
        if isinstance(prior, dict):  # weights by class, as the classes are named in the model
            values["prior"] = {self._label(c): w for c, w in prior.items()}
        return resolve_settings(values, source=type(self).__name__)

    def _label(self, value: Any) -> str:
        """The model's label of a class: its position in ``classes_``; a value that is no
        class would be given the place of another."""
        if value not in self.classes_.tolist():
            raise ConfigError(
                f"prior names {value!r}, not one of the classes {self.classes_.tolist()}"
            )
        return f"{int(np.searchsorted(self.classes_, value)):04d}"

    def _labels(self) -> list[str]:
        return [f"{i:04d}" for i in range(len(self.classes_))]

    def _add_messages(self, data: list[Any], y_idx: np.ndarray, *, reset: bool) -> None:
        from .mail.message import Message

        if hasattr(self, "_totals"):
            raise ValueError("this estimator was fitted on a count matrix, not on messages")
        labels = self._labels()
        messages = [Message(str(i), d, labels[k]) for i, (d, k) in enumerate(zip(data, y_idx))]
        if reset:
            from .fit.training import train

            self.model_ = train(messages, self._settings())
            return
        from .service.update import learn

        for k in np.unique(y_idx).tolist():
            group = [m for m, c in zip(messages, y_idx.tolist()) if c == k]
            self.model_, _ = learn(self.model_, group, labels[k])

    def _add_counts(self, X: Any, y_idx: np.ndarray, *, reset: bool) -> None:
        if not reset and not hasattr(self, "_totals"):
            raise ValueError("this estimator was fitted on messages, not on a count matrix")
        X = self._counts(X, reset=reset)
        C, d = len(self.classes_), X.shape[1]
        Y = sp.csr_matrix(
            (np.ones(len(y_idx)), (y_idx, np.arange(len(y_idx)))), shape=(C, len(y_idx))
        )
        present = X.copy()
        present.data = (present.data != 0).astype(np.float64)
        part = [
            np.bincount(y_idx, minlength=C).astype(np.int64),
            np.asarray((Y @ X).todense()),
            np.asarray((Y @ present).todense()).astype(np.int64),
        ]
        totals = part if reset else [a + b for a, b in zip(self._totals, part)]
        self._totals = totals
        class_count, term_count, doc_count = totals
        if np.array_equal(term_count, np.round(term_count)):
            term_count = term_count.astype(np.int64)  # whole counts: exactly nbspam's
        width = len(str(max(d - 1, 0)))
        terms = tuple(f"x{j:0{width}d}" for j in range(d))  # sorted as the columns are
        counts = ClassCounts(tuple(self._labels()), terms, class_count, term_count, doc_count)
        from .models.model import from_counts

        self.model_ = from_counts(counts, self._settings(), sorted_terms=True)

    def _counts(self, X: Any, *, reset: bool) -> sp.csr_matrix:
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=reset)
        X = sp.csr_matrix(X)
        if X.data.size and X.data.min() < 0:
            raise ValueError(f"Negative values in data passed to {type(self).__name__}")
        return X

    # ----------------------------------------------------------------------------------------
    # Predicting
    # ----------------------------------------------------------------------------------------

    def _scores(self, X: Any) -> tuple[np.ndarray, np.ndarray | None]:
        """(log posteriors (n, C), log-odds (n,) or None), as `model.score` gives them."""
        from .models.model import predict_matrix

        check_is_fitted(self, "model_")
        model = self.model_
        if _is_messages(X):
            if hasattr(self, "_totals"):
                raise ValueError("this estimator was fitted on a count matrix, not on messages")
            from .text.counting import count_chunk
            from .text.vocabulary import renumber

            counted = count_chunk(model.tokenizer, list(X))
            rows = renumber(counted, model.form.index, grow=False)
        else:
            if not hasattr(self, "_totals"):
                raise ValueError("this estimator was fitted on messages, not on a count matrix")
            rows = self._counts(X, reset=False)[:, model.form.kept]
        return predict_matrix(model, rows)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Log posteriors (n, n_classes), in the order of ``classes_``."""
        return self._scores(X)[0]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posteriors (n, n_classes), in the order of ``classes_``."""
        return np.exp(self.predict_log_proba(X))

    def decision_function(self, X: Any) -> np.ndarray:
        """Two classes: the log-odds of ``classes_[1]`` (n,); more: log posteriors (n, C)."""
        log_post, log_odds = self._scores(X)
        return log_post if log_odds is None else log_odds

    def predict(self, X: Any) -> np.ndarray:
        """The label of each row: for two classes ``classes_[1]`` where its log-odds > 0,
        as nbspam decides; for more, the most probable."""
        log_post, log_odds = self._scores(X)
        if log_odds is not None:
            return self.classes_[(log_odds > 0).astype(np.int64)]
        return self.classes_[np.argmax(log_post, axis=1)]


def _is_messages(X: Any) -> bool:
    """Whether X is a sequence of messages (bytes or text), not a count matrix."""
    if sp.issparse(X):
        return False
    if isinstance(X, np.ndarray):
        return (
            X.ndim == 1 and (X.dtype.kind in "USO") and all(isinstance(x, (str, bytes)) for x in X)
        )
    if isinstance(X, Sequence) and not isinstance(X, (str, bytes)):
        return len(X) > 0 and all(isinstance(x, (str, bytes)) for x in X)
    return False
