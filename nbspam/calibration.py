"""A two-class model's decision rule: cutoffs and a Platt calibration, chosen on out-of-fold
scores of its own training messages (the internal cross-validation of `selection`)."""

from __future__ import annotations

import numpy as np

from . import metrics
from .config import MAIL_COST_FP, MAIL_COST_UNSURE, TrainConfig
from .crossval import Scores
from .decision import Rule
from .errors import InputError


def rule_from_scores(scores: Scores, cfg: TrainConfig) -> Rule:
    """The decision rule from out-of-fold scores: the Platt calibration fitted on them, and
    the cutoffs given in the settings ``cfg``, else those for its ``target_fpr``, else
    those of least cost."""
    cutoffs = cfg.cutoffs or choose_cutoffs(
        scores,
        target_fpr=cfg.target_fpr,
        cost_fp=MAIL_COST_FP if cfg.cost_fp is None else cfg.cost_fp,
        cost_fn=cfg.cost_fn,
        cost_unsure=MAIL_COST_UNSURE if cfg.cost_unsure is None else cfg.cost_unsure,
    )
    return Rule(cutoffs, calibrate(scores))


def _binary_scores(scores: Scores) -> tuple[np.ndarray, np.ndarray]:
    """(log-odds, is positive) of the evaluated messages; InputError unless two-class."""
    if scores.log_odds is None or scores.positive is None:
        raise InputError(
            f"cutoffs and calibration need a two-class model, this one has {len(scores.classes)} "
            f"classes"
        )
    mask = scores.evaluated
    return scores.log_odds[mask], np.array(scores.labels, dtype=object)[mask] == scores.positive


def choose_cutoffs(
    scores: Scores,
    *,
    target_fpr: float | None = None,
    cost_fp: float = 15.0,
    cost_fn: float = 1.0,
    cost_unsure: float = 0.2,
) -> tuple[float, float]:
    """(ham_cutoff, spam_cutoff) on the log-odds, chosen on the out-of-sample scores.

    With ``target_fpr`` both are the lowest cutoff whose false-positive rate is at most the
    target (`metrics.choose_cutoffs_for_fpr`: no unsure band); otherwise the pair of least
    total cost ``cost_fp FP + cost_fn FN + cost_unsure U`` (`metrics.choose_cutoffs_by_cost`).
    Either may be infinite.
    """
    odds, pos = _binary_scores(scores)
    if target_fpr is not None:
        if pos.all():
            raise InputError(
                f"no {scores.negative} messages were evaluated: a false-positive rate is undefined"
            )
        cut = metrics.choose_cutoffs_for_fpr(odds, pos, target_fpr)
        return cut, cut
    return metrics.choose_cutoffs_by_cost(
        odds, pos, cost_fp=cost_fp, cost_fn=cost_fn, cost_unsure=cost_unsure
    )


def calibrate(scores: Scores) -> tuple[float, float]:
    """Platt parameters (a, b) fitted on all out-of-sample log-odds (`metrics.fit_platt`).

    These are for a model trained on all the data: P(positive) = 1 / (1 + exp(-(a s + b))).
    The report judges calibration with the held-out fits of ``Scores.calibrated`` instead.
    """
    odds, pos = _binary_scores(scores)
    return metrics.fit_platt(odds, pos)
