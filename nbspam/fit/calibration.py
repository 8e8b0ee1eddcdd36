"""A two-class model's decision rule: cutoffs and a Platt calibration, chosen on out-of-fold
scores of its own training messages (the internal cross-validation of `selection`)."""

from __future__ import annotations

import math

import numpy as np

from ..core.settings import Settings, TrainConfig
from ..errors import InputError
from ..models.decision import Rule
from . import metrics
from .crossval import LEFT_OUT, Scores, Tokenized, score_split, stratified_split

#: The confidence of the upper bound on the false-positive rate (`metrics.fpr_upper_bound`).
CONFIDENCE = 0.8
#: The spam cutoff is raised by this share of the spread of the ham's out-of-fold scores
#: (their 99th percentile less their median), for new mail that scores higher than the
#: training messages did, where the messages carry no dates to measure it
#: (`drift_from_dates`).
DRIFT = 0.04
#: The largest drift measured on dates that is taken: the whole spread of the ham's scores.
#: Newer ham that need more are unlike the older ones, and a wider band would leave most
#: spam unsure rather than keep them apart.
MAX_DRIFT = 1.0


def rule_from_scores(scores: Scores, cfg: TrainConfig, drift: float = DRIFT) -> Rule:
    """The decision rule from out-of-fold scores: the Platt calibration fitted on them, and
    the cutoffs given in the settings ``cfg``, else those for its ``target_fpr`` (the spam
    cutoff raised by ``drift``, a share of the spread of the ham's scores), else those of
    least cost."""
    cutoffs = cfg.cutoffs or choose_cutoffs(
        scores,
        target_fpr=cfg.target_fpr,
        cost_fp=cfg.cost_fp,
        cost_fn=cfg.cost_fn,
        cost_unsure=cfg.cost_unsure,
        drift=drift,
    )
    return Rule(cutoffs, calibrate(scores))


def rule_from_log_odds(odds: np.ndarray, pos: np.ndarray, cfg: TrainConfig) -> Rule:
    """`rule_from_scores` on bare out-of-sample log-odds (n,) and whether each message is
    positive (n,): what online evaluation refits as it scores (`online`)."""
    cutoffs = cfg.cutoffs or _cutoffs(
        odds, pos, cfg.target_fpr, cfg.cost_fp, cfg.cost_fn, cfg.cost_unsure
    )
    return Rule(cutoffs, platt(odds, pos))


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
    target_fpr: float | None = 0.001,
    cost_fp: float = 15.0,
    cost_fn: float = 1.0,
    cost_unsure: float = 0.5,
    drift: float = DRIFT,
) -> tuple[float, float]:
    """(ham_cutoff, spam_cutoff) on the log-odds, chosen on the out-of-sample scores.

    With ``target_fpr`` (the default) the spam cutoff is the lowest whose false-positive
    rate holds at the target with `CONFIDENCE` (`metrics.choose_cutoffs_for_bound`), raised
    by the margin ``drift`` (a share of the `spread` of the ham's scores), and the ham
    cutoff the one of least ``cost_fn FN + cost_unsure U`` below it; otherwise the pair of least total cost ``cost_fp FP + cost_fn FN +
    cost_unsure U`` (`metrics.choose_cutoffs_by_cost`). Either may be infinite.
    """
    odds, pos = _binary_scores(scores)
    if target_fpr is not None and pos.all():
        raise InputError(
            f"no {scores.negative} messages were evaluated: a false-positive rate is undefined"
        )
    return _cutoffs(odds, pos, target_fpr, cost_fp, cost_fn, cost_unsure, drift)


def _cutoffs(
    odds: np.ndarray,
    pos: np.ndarray,
    target_fpr: float | None,
    cost_fp: float,
    cost_fn: float,
    cost_unsure: float,
    drift: float = DRIFT,
) -> tuple[float, float]:
    """`choose_cutoffs` on bare log-odds and whether each message is positive."""
    if target_fpr is not None:
        margin = drift * spread(odds[~pos])
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


def drift_from_dates(
    data: Tokenized, times: np.ndarray, settings: Settings, folds: int
) -> dict[str, float | int] | None:
    """The drift margin measured on a chronological split of the training messages, or None
    where they are too few with a date (or the settings give the cutoffs).

    ``times`` (n,) are the messages' dates in seconds, NaN where unknown. Each label's dated
    messages are split by date: the older half is cross-validated (``folds`` folds) and
    gives the spam cutoff that the bound of `choose_cutoffs` picks on its out-of-fold
    scores; the newer half is scored by the model of the whole older half, and gives the
    spam cutoff the same bound would have needed on it. How far the newer mail needed the
    cutoff raised, in shares of the `spread` of the older ham's out-of-fold scores, is the
    drift, at least `DRIFT` (one split by date is a small sample of drift: the dates may
    only widen the band) and at most `MAX_DRIFT`. The
    record: ``drift`` (that share), the ``dated`` messages, the ``newer_ham`` and how many of them scored at or
    above the older cutoff (``newer_false_positives``).
    """
    cfg = settings.training
    if cfg.cutoffs or cfg.target_fpr is None:
        return None
    labels = np.array(data.labels, dtype=object)
    dated = ~np.isnan(times)
    older, newer = [], []
    for label in sorted(set(data.labels)):
        idx = np.flatnonzero(dated & (labels == label))
        if len(idx) < 2 * folds:
            return None
        idx = idx[np.argsort(times[idx], kind="stable")]
        older.append(idx[: len(idx) // 2])
        newer.append(idx[len(idx) // 2 :])
    old_rows, new_rows = np.sort(np.concatenate(older)), np.sort(np.concatenate(newer))
    # the rows of each split picked by their folds, the others `LEFT_OUT`: the sample's rows
    # are not copied (the older half, then every dated row: some 6 bytes an entry each)
    data = data._replace(copies=None, times=None)  # as a copy of some of the rows has none
    fold = np.full(len(labels), LEFT_OUT)
    fold[old_rows], protocol = stratified_split(labels[old_rows].tolist(), folds, 42)
    old = score_split(data, fold, settings, protocol=protocol)
    fold = np.full(len(labels), LEFT_OUT)  # a new array: the scores hold the first
    fold[old_rows], fold[new_rows] = -1, 0
    new = score_split(data, fold, settings, protocol={})
    old_odds, old_pos = _binary_scores(old)
    new_odds, new_pos = _binary_scores(new)
    if old_pos.all() or new_pos.all():
        return None
    bound = {"confidence": CONFIDENCE, "cost_fn": cfg.cost_fn, "cost_unsure": cfg.cost_unsure}
    cut_old, needed = (
        # where the highest message is a ham the bound's cutoff is infinite: any above it
        min(
            metrics.choose_cutoffs_for_bound(odds, pos, cfg.target_fpr, **bound)[1],
            float(np.nextafter(odds[~pos].max(), np.inf)),
        )
        for odds, pos in ((old_odds, old_pos), (new_odds, new_pos))
    )
    width = spread(old_odds[~old_pos])
    if not (math.isfinite(cut_old) and math.isfinite(needed)) or width <= 0:
        return None
    return {
        "drift": min(MAX_DRIFT, max(DRIFT, (needed - cut_old) / width)),
        "dated": int(dated.sum()),
        "newer_ham": int(np.count_nonzero(~new_pos)),
        "newer_false_positives": int(np.count_nonzero(new_odds[~new_pos] >= cut_old)),
    }


def spread(ham_odds: np.ndarray) -> float:
    """The spread of the ham's scores that the drift margin is a share of: their 99th
    percentile less their median."""
    ham = np.sort(ham_odds)
    return _quantile(ham, 0.99) - _quantile(ham, 0.5)


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
    """Platt parameters (a, b) fitted on all out-of-sample log-odds (`platt`).

    These are for a model trained on all the data: P(positive) = 1 / (1 + exp(-(a s + b))).
    The report judges calibration with the held-out fits of ``Scores.calibrated`` instead.
    """
    odds, pos = _binary_scores(scores)
    return platt(odds, pos)


def platt(odds: np.ndarray, pos: np.ndarray) -> tuple[float, float]:
    """Platt (a, b) on log-odds (n,) and whether each message is positive (n,), with a slope
    of at least 0: where the scores rank the labels backwards (a few messages, or mail that
    changed) the best fit of a > 0 is the flat one, the positives' share (a = 0), so the
    calibrated probability never falls as the log-odds rise."""
    a, b = metrics.fit_platt(odds, pos)
    if a < 0:
        return metrics.fit_platt(np.zeros(len(odds)), pos)
    return a, b
