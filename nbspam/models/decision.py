"""From a score to what predict prints: the one rule of verdicts by cutoffs, and a calibrated
probability.

Standard library only: both the batch scorer (`model`) and the one-message scorer
(`array_scoring`) use it.
"""

from __future__ import annotations

import math
import sys
from collections import namedtuple

from ..core.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

UNSURE = "unsure"


# (typing.NamedTuple would import typing, which scoring one message does without)
Rule = namedtuple("Rule", ["cutoffs", "calibration"])
Rule.__doc__ = """A two-class model's decision rule: (ham, spam) cutoffs on the log-odds, Platt (a, b),
each a pair of floats or None (too few training messages for an internal cross-validation)."""


class Prediction(Record):
    """The verdict on one message.

    label: the most probable label; probabilities: posteriors in model label order. Two-class
    models also give log_odds, verdict (the negative label, 'unsure' or the positive label,
    by the model's cutoffs) and calibrated (the calibrated probability of the positive
    label, or None when the model has no calibration).
    """

    id: str
    label: str
    probabilities: tuple[float, ...]
    log_odds: float | None = None
    verdict: str | None = None
    calibrated: float | None = None


class Predictions:
    """The predictions of many rows at once, as columns: the rows' ids, the model's labels,
    each row's label (its place among the labels), the posteriors (one list per label),
    and for two classes the log-odds, verdicts and calibrated probabilities (None without
    a calibration) and the positive label. Iterating gives each row's `Prediction`; the
    columns let a whole block be written at once (`cli.prediction_lines`)."""

    def __init__(
        self,
        ids: Any,
        labels: tuple[str, ...],
        best: list[int],
        probabilities: list[list[float]],
        log_odds: list[float] | None = None,
        verdicts: list[str] | None = None,
        calibrated: list[float] | None = None,
        positive: str | None = None,
    ) -> None:
        self.ids, self.labels, self.best = ids, labels, best
        self.probabilities, self.log_odds, self.verdicts = probabilities, log_odds, verdicts
        self.calibrated, self.positive = calibrated, positive

    def __len__(self) -> int:
        return len(self.best)

    def __iter__(self) -> Iterator[Prediction]:
        labels, n = self.labels, len(self.best)
        rows = zip(*self.probabilities) if self.probabilities else iter(())
        odds = self.log_odds if self.log_odds is not None else [None] * n
        verdicts = self.verdicts if self.verdicts is not None else [None] * n
        calibrated = self.calibrated if self.calibrated is not None else [None] * n
        for row_id, best, probs, s, v, c in zip(
            self.ids, self.best, rows, odds, verdicts, calibrated
        ):
            yield Prediction(row_id, labels[best], probs, s, v, c)


def stored_cutoffs(cutoffs: tuple[float, float] | None) -> list[float] | None:
    """Cutoffs as a model file's JSON holds them: an infinite one (every message of that
    side unsure, as the rule of least cost may choose) as the largest float, which no
    log-odds reaches either; JSON has no infinity."""
    if cutoffs is None:
        return None
    return [max(-sys.float_info.max, min(sys.float_info.max, c)) for c in cutoffs]


def read_cutoffs(stored: tuple[float, float]) -> tuple[float, float]:
    """`stored_cutoffs` back: the largest float as infinite."""
    ham, spam = (math.copysign(math.inf, c) if abs(c) == sys.float_info.max else c for c in stored)
    return ham, spam


def verdict(
    log_odds: float, cutoffs: tuple[float, float] | None, positive: str, negative: str
) -> str:
    """The negative label below the ham cutoff, the positive label at or above the spam
    cutoff, 'unsure' between. Without cutoffs: the Bayes decision, no unsure band (a
    log-odds of exactly 0 is negative, as docs/math.md, "The linear form: weights and bias", decides + iff w.x + b > 0)."""
    if cutoffs is None or cutoffs == (0.0, 0.0):
        return positive if log_odds > 0 else negative
    ham_cutoff, spam_cutoff = cutoffs
    if log_odds >= spam_cutoff:
        return positive
    if log_odds < ham_cutoff:
        return negative
    return UNSURE


def calibrated_probability(
    calibration: tuple[float, float] | None,
    log_odds: float,
    cutoffs: tuple[float, float] | None = None,
) -> float | None:
    """The calibrated probability of the positive label: Platt scaling
    1 / (1 + exp(-(a * s + b))), computed without overflow, held on the side of its verdict
    (`verdict` at ``cutoffs``): at most 1/2 for a negative verdict, at least 1/2 for a
    positive one, as it is for unsure. None without a calibration.

    The verdict comes from the cutoffs, chosen for a bound on the false-positive rate; the
    Platt curve is fitted on all the scores at once and may cross 1/2 elsewhere. Where they
    disagree the verdict wins, so no message is called spam with a probability of spam
    below 1/2. Each piece is non-decreasing in ``log_odds`` and the bands are ordered, so
    the probability stays monotone."""
    if calibration is None:
        return None
    a, b = calibration
    z = a * log_odds + b
    if z >= 0:
        p = 1.0 / (1.0 + math.exp(-z))
    else:
        e = math.exp(z)
        p = e / (1.0 + e)
    side = verdict(log_odds, cutoffs, "+", "-")
    if side == "+":
        return max(p, 0.5)
    if side == "-":
        return min(p, 0.5)
    return p


def log_posterior_two(log_odds: float, positive: int) -> list[float]:
    """[log P(c | x) for the two classes] of a two-class model from the log-odds s of class
    ``positive``: -log(1 + e^-s) for it, -log(1 + e^s) for the other, computed as
    `naive_bayes.log_posterior_two` computes them (numpy's logaddexp(0, z))."""
    out = [0.0, 0.0]
    out[positive] = -_softplus(-log_odds)
    out[1 - positive] = -_softplus(log_odds)
    return out


def _softplus(z: float) -> float:
    """log(1 + e^z) without overflow, the way numpy.logaddexp(0.0, z) computes it."""
    if z < 0.0:
        return math.log1p(math.exp(z))
    return z + math.log1p(math.exp(-z))


def prediction(
    message_id: str,
    labels: tuple[str, ...],
    log_posterior: list[float],
    log_odds: float | None,
    *,
    positive: str | None,
    cutoffs: tuple[float, float] | None,
    calibration: tuple[float, float] | None,
) -> Prediction:
    """The Prediction of one message from its log posteriors (in label order) and, for two
    classes, its log-odds of ``positive``."""
    probabilities = tuple(math.exp(x) for x in log_posterior)
    if log_odds is None:
        best = max(range(len(labels)), key=log_posterior.__getitem__)
        return Prediction(message_id, labels[best], probabilities)
    negative = labels[1 - labels.index(positive)]
    return Prediction(
        id=message_id,
        label=positive if log_odds > 0 else negative,
        probabilities=probabilities,
        log_odds=log_odds,
        verdict=verdict(log_odds, cutoffs, positive, negative),
        calibrated=calibrated_probability(calibration, log_odds, cutoffs),
    )


def cutoff_text(negative: str, positive: str, cutoffs: tuple[float, float]) -> str:
    """'ham below -1.234, spam from +5.678': the verdicts of a model's cutoffs."""
    return f"{negative} below {cutoffs[0]:+.3f}, {positive} from {cutoffs[1]:+.3f}"
