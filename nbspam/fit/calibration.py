"""A two-class model's decision rule: cutoffs and a Platt calibration, chosen on out-of-fold
scores of its own training messages (the internal cross-validation of `selection`)."""

from __future__ import annotations

import numpy as np

from ..core.settings import TrainConfig
from ..errors import InputError
from ..models.decision import Rule
from . import metrics
from .crossval import Scores


def rule_from_scores(scores: Scores, cfg: TrainConfig) -> Rule:
    """The decision rule from out-of-fold scores: the Platt calibration fitted on them, and
    the cutoffs given in the settings ``cfg``, else those for its ``target_fpr``, else
    those of least cost."""
    cutoffs = cfg.cutoffs or choose_cutoffs(
        scores,
        target_fpr=cfg.target_fpr,
        cost_fp=cfg.cost_fp,
        cost_fn=cfg.cost_fn,
        cost_unsure=cfg.cost_unsure,
    )
    return Rule(cutoffs, calibrate(scores))


def rule_from_log_odds(odds: np.ndarray, pos: np.ndarray, cfg: TrainConfig) -> Rule:
    """`rule_from_scores` on bare out-of-sample log-odds (n,) and whether each message is
    positive (n,): what online evaluation refits as it scores (`online`)."""
    cutoffs = cfg.cutoffs or _cutoffs(
        odds, pos, cfg.target_fpr, cfg.cost_fp, cfg.cost_fn, cfg.cost_unsure
    )
    return Rule(cutoffs, metrics.fit_platt(odds, pos))


def _binary_scores(scores: Scores) -> tuple[np.ndarray, np.ndarray]:
    """(log-odds, is positive) of the evaluated messages; InputError unless two-class."""
    if scores.log_odds is None or scores.positive is None:
        raise InputError(
            f"cutoffs and calibration need a two-class model, this one has {len(scores.classes)} "
            f"classes"
        )
    mask = scores.evaluated
    return scores.log_odds[mask], np.array(scores.labels, dtype=object)[mask] == scores.positive


#: The confidence of the upper bound on the false-positive rate (`metrics.fpr_upper_bound`).
CONFIDENCE = 0.8
#: The spam cutoff is raised by this share of the spread of the ham's out-of-fold scores
#: (their 99th percentile less their median), for new mail that scores higher than the
#: training messages did.
DRIFT = 0.04


def choose_cutoffs(
    scores: Scores,
    *,
    target_fpr: float | None = 0.001,
    cost_fp: float = 15.0,
    cost_fn: float = 1.0,
    cost_unsure: float = 0.5,
) -> tuple[float, float]:
    """(ham_cutoff, spam_cutoff) on the log-odds, chosen on the out-of-sample scores.

    With ``target_fpr`` (the default) the spam cutoff is the lowest whose false-positive
    rate holds at the target with `CONFIDENCE` (`metrics.choose_cutoffs_for_bound`), raised
    by the `DRIFT` margin, and the ham cutoff the one of least ``cost_fn FN + cost_unsure
    U`` below it; otherwise the pair of least total cost ``cost_fp FP + cost_fn FN +
    cost_unsure U`` (`metrics.choose_cutoffs_by_cost`). Either may be infinite.
    """
    odds, pos = _binary_scores(scores)
    if target_fpr is not None and pos.all():
        raise InputError(
            f"no {scores.negative} messages were evaluated: a false-positive rate is undefined"
        )
    return _cutoffs(odds, pos, target_fpr, cost_fp, cost_fn, cost_unsure)


def _cutoffs(
    odds: np.ndarray,
    pos: np.ndarray,
    target_fpr: float | None,
    cost_fp: float,
    cost_fn: float,
    cost_unsure: float,
) -> tuple[float, float]:
    """`choose_cutoffs` on bare log-odds and whether each message is positive."""
    if target_fpr is not None:
        ham = np.sort(odds[~pos])
        margin = DRIFT * (_quantile(ham, 0.99) - _quantile(ham, 0.5))
        return metrics.choose_cutoffs_for_bound(
            odds,
            pos,
            target_fpr,
            confidence=CONFIDENCE,
            margin=margin,
            cost_fn=cost_fn,
            cost_unsure=cost_unsure,
        )
    return metrics.choose_cutoffs_by_cost(
        odds, pos, cost_fp=cost_fp, cost_fn=cost_fn, cost_unsure=cost_unsure
    )


def _quantile(ordered: np.ndarray, q: float) -> float:
    """The q quantile of sorted values, interpolated as numpy's default (np.quantile loads
    numpy.ma, which nothing else of training needs)."""
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (at - low) * (ordered[high] - ordered[low]))


def expected_fpr(scores: Scores, cutoffs: tuple[float, float]) -> dict[str, float | int]:
    """What the out-of-fold scores say of the false-positive rate at ``cutoffs``: ``ham``
    evaluated, ``false_positives`` among them (log-odds at or above the spam cutoff), the
    rate, its one-sided Clopper–Pearson upper bound at `CONFIDENCE`, and the share of all
    messages left ``unsure``."""
    odds, pos = _binary_scores(scores)
    ham = int(np.count_nonzero(~pos))
    fp = int(np.count_nonzero(odds[~pos] >= cutoffs[1]))
    unsure = int(np.count_nonzero((odds >= cutoffs[0]) & (odds < cutoffs[1])))
    return {
        "ham": ham,
        "false_positives": fp,
        "fpr": fp / ham if ham else 0.0,
        "fpr_upper": float(metrics.fpr_upper_bound(fp, ham, CONFIDENCE)) if ham else 1.0,
        "confidence": CONFIDENCE,
        "unsure_rate": unsure / len(odds) if len(odds) else 0.0,
    }


def calibrate(scores: Scores) -> tuple[float, float]:
    """Platt parameters (a, b) fitted on all out-of-sample log-odds (`metrics.fit_platt`).

    These are for a model trained on all the data: P(positive) = 1 / (1 + exp(-(a s + b))).
    The report judges calibration with the held-out fits of ``Scores.calibrated`` instead.
    """
    odds, pos = _binary_scores(scores)
    return metrics.fit_platt(odds, pos)
