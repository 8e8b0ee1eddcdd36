"""The evaluation report: what out-of-sample scores show, as a JSON-serialisable dict.

Per-class precision, recall and F1, accuracy, Matthews correlation, the confusion matrix,
and for two-class models the ranking metrics of the continuous log-odds (ROC AUC,
(1-ROCA)% as in the TREC spam track, spam recall at false-positive rates of 0.1% and 1%),
the outcome at a ham and a spam cutoff with an "unsure" band between them, and the
calibration of the raw posterior and of a Platt-scaled probability. `render` turns it into
text, JSON or Markdown.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConfigError, InputError
from ..fit import metrics
from ..fit.crossval import Scores
from ..models.decision import UNSURE, calibrated_probability, verdict
from .evaluation import CALIBRATION_PROTOCOL

#: False-positive rates at which the report gives the best spam recall.
RECALL_FPRS: tuple[float, ...] = (0.001, 0.01)
#: Bins of the reliability tables.
RELIABILITY_BINS = 10


def report(
    scores: Scores,
    *,
    cutoffs: tuple[float, float] | None,
    calibration: tuple[float, float] | None,
) -> dict[str, Any]:
    """Everything the evaluation shows, as a JSON-serialisable dict.

    Keys: protocol, classes, positive, counts, decision, per_class, macro, accuracy, mcc,
    confusion, ranking, cutoffs, calibration, seconds. The classification metrics use the
    model's own decision (two classes: positive iff log-odds > 0; else the highest
    posterior). ranking, cutoffs and calibration are None for multi-class models (which
    ignore both arguments); ranking also when the evaluated messages lack a class, cutoffs
    when none are given. ``calibration`` is the Platt (a, b) to show, e.g. `calibrate`'s;
    the calibrated metrics use the held-out ``Scores.calibrated`` when present. Infinite
    numbers (a cutoff beyond every score) are written as the strings "inf" and "-inf".
    """
    mask = scores.evaluated
    if not mask.any():
        raise InputError("no message was evaluated")
    classes = list(scores.classes)
    y = np.array(scores.labels, dtype=object)[mask]
    predicted = predicted_labels(scores)[mask]
    binary = scores.log_odds is not None and scores.positive is not None
    out: dict[str, Any] = {
        "protocol": dict(scores.protocol),
        "classes": classes,
        "positive": scores.positive,
        "counts": _counts(scores),
        "decision": f"{scores.positive} iff log-odds > 0" if binary else "highest posterior",
        **_classification(y, predicted, classes),
        "ranking": None,
        "cutoffs": None,
        "calibration": None,
        "seconds": {stage: round(float(s), 3) for stage, s in scores.seconds.items()},
    }
    if binary:
        odds = scores.log_odds[mask]
        pos = y == scores.positive
        out["ranking"] = _ranking(odds, pos)
        if cutoffs is not None:
            out["cutoffs"] = _cutoff_outcome(odds, y, scores, cutoffs)
        elif scores.verdicts is not None:
            out["cutoffs"] = _outcome(scores.verdicts[mask], y, scores)
            out["cutoffs"]["per_fold"] = {
                str(k): {
                    "ham_cutoff": None if rule.cutoffs is None else _number(rule.cutoffs[0]),
                    "spam_cutoff": None if rule.cutoffs is None else _number(rule.cutoffs[1]),
                }
                for k, rule in sorted(scores.rules.items())
            }
        raw = np.exp(scores.log_posterior[mask, classes.index(scores.positive)])
        held_out = None if scores.calibrated is None else scores.calibrated[mask]
        if held_out is not None and np.isnan(held_out).any():
            held_out = None  # some training part was too small to calibrate
        how = scores.protocol.get("calibration", CALIBRATION_PROTOCOL)
        out["calibration"] = _calibration(odds, pos, raw, held_out, calibration, how, cutoffs)
    return out


def predicted_labels(scores: Scores) -> np.ndarray:
    """The model's own label for each row (n,): log-odds > 0 for two classes, else argmax.

    Rows not evaluated get the first class; mask them with ``scores.evaluated``.
    """
    classes = np.array(scores.classes, dtype=object)
    if scores.log_odds is not None and scores.positive is not None:
        positive, negative = scores.positive, scores.negative
        odds = scores.log_odds.tolist()  # the Bayes decision: `decision.verdict` without cutoffs
        return np.array([verdict(o, None, positive, negative) for o in odds], dtype=object)
    return classes[np.nan_to_num(scores.log_posterior, nan=-np.inf).argmax(axis=1)]


def _counts(scores: Scores) -> dict[str, Any]:
    """Messages in all, evaluated, and per class evaluated and used only for training."""
    labels = np.array(scores.labels, dtype=object)
    mask = scores.evaluated
    return {
        "messages": len(labels),
        "evaluated": int(mask.sum()),
        "by_class": {
            c: {
                "evaluated": int(np.sum(mask & (labels == c))),
                "train_only": int(np.sum(~mask & (labels == c))),
            }
            for c in scores.classes
        },
    }


def _classification(y: np.ndarray, predicted: np.ndarray, classes: list[str]) -> dict[str, Any]:
    """per_class, macro, accuracy, mcc and confusion of predicted labels against true ones."""
    per_class = metrics.precision_recall_f1(y, predicted, classes)
    macro = {
        key: float(np.mean([per_class[c][key] for c in classes]))
        for key in ("precision", "recall", "f1")
    }
    return {
        "per_class": per_class,
        "macro": macro,
        "accuracy": metrics.accuracy(y, predicted),
        "mcc": metrics.matthews_corrcoef(y, predicted, classes),
        "confusion": _confusion(y, predicted, classes, classes),
    }


def _confusion(
    y: np.ndarray, predicted: np.ndarray, rows: list[str], columns: list[str]
) -> dict[str, Any]:
    """{"true": rows, "predicted": columns, "matrix": counts[row][column]}."""
    matrix = metrics.confusion_matrix(y, predicted, rows, columns)
    return {"true": rows, "predicted": columns, "matrix": matrix.tolist()}


def _ranking(odds: np.ndarray, pos: np.ndarray) -> dict[str, Any] | None:
    """ROC AUC, (1-ROCA)% and recall at RECALL_FPRS; None unless both classes are present."""
    if pos.all() or not pos.any():
        return None
    auc = metrics.roc_auc(odds, pos)
    at = []
    for fpr in RECALL_FPRS:
        recall, threshold = metrics.recall_at_fpr(odds, pos, fpr)
        at.append({"max_fpr": fpr, "recall": recall, "threshold": _number(threshold)})
    return {"roc_auc": auc, "one_minus_roca_percent": 100.0 * (1.0 - auc), "recall_at_fpr": at}


def _cutoff_outcome(
    odds: np.ndarray, y: np.ndarray, scores: Scores, cutoffs: tuple[float, float]
) -> dict[str, Any]:
    """FP, FN and unsure counts, and the confusion matrix with an unsure column, at cutoffs."""
    ham_cut, spam_cut = (float(c) for c in cutoffs)
    if not ham_cut <= spam_cut:
        raise ConfigError(f"the ham cutoff {ham_cut:g} is above the spam cutoff {spam_cut:g}")
    positive, negative = scores.positive, scores.negative
    # the rule predict and filter apply (`decision.verdict`), so the report counts what they do
    cut = (ham_cut, spam_cut)
    decided = np.array([verdict(o, cut, positive, negative) for o in odds.tolist()], object)
    return {"ham_cutoff": _number(ham_cut), "spam_cutoff": _number(spam_cut)} | _outcome(
        decided, y, scores
    )


def _outcome(decided: np.ndarray, y: np.ndarray, scores: Scores) -> dict[str, Any]:
    """FP, FN and unsure counts and the confusion matrix with an unsure column."""
    positive, negative = scores.positive, scores.negative
    classes = list(scores.classes)
    confusion = _confusion(y, decided, classes, [*classes, UNSURE])
    matrix = confusion["matrix"]
    n_unsure = sum(row[-1] for row in matrix)
    return {
        "false_positives": matrix[classes.index(negative)][classes.index(positive)],
        "false_negatives": matrix[classes.index(positive)][classes.index(negative)],
        "unsure": n_unsure,
        "unsure_rate": n_unsure / len(y),
        "confusion": confusion,
    }


def _calibration(
    odds: np.ndarray,
    pos: np.ndarray,
    raw: np.ndarray,
    held_out: np.ndarray | None,
    calibration: tuple[float, float] | None,
    held_out_how: str = CALIBRATION_PROTOCOL,
    cutoffs: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """Brier score, log loss and reliability table of the raw and the calibrated probability.

    The calibrated probability is the held-out one when the split computed it (as
    ``held_out_how`` says); else the
    given Platt parameters applied to the very scores they were presumably fitted on.
    """
    if held_out is not None:
        calibrated, how = held_out, held_out_how
    elif calibration is not None:
        calibrated = np.array(  # as predict gives it: held on the side of its verdict
            [calibrated_probability(calibration, o, cutoffs) for o in odds.tolist()]
        )
        how = "the given Platt parameters, applied to the evaluated scores (not held out)"
    else:
        calibrated, how = None, None
    platt = None if calibration is None else {"a": calibration[0], "b": calibration[1]}
    raw_quality = _probability_quality(raw, pos)
    quality = None if calibrated is None else _probability_quality(calibrated, pos)
    return {
        "platt": platt,
        "calibrated_by": how,
        "raw": raw_quality,
        "calibrated": quality,
        "note": None if quality is None else _untrusted(raw_quality, quality),
    }


def _untrusted(raw: dict[str, Any], calibrated: dict[str, Any]) -> str | None:
    """What to say where the calibrated probability is worse than the raw posterior by the
    Brier score (the mean squared error of the probability, which the raw posterior's
    overconfidence does not blow up as it does the log loss), else None."""
    if calibrated["brier"] <= raw["brier"]:
        return None
    return (
        f"the calibrated probability is worse than the raw posterior here (Brier "
        f"{calibrated['brier']:.5f} against {raw['brier']:.5f}): do not rely on it for these "
        "messages"
    )


def _probability_quality(prob: np.ndarray, pos: np.ndarray) -> dict[str, Any]:
    """Brier score, log loss and reliability table of probabilities of the positive class."""
    prob = np.clip(prob, 0.0, 1.0)
    return {
        "brier": metrics.brier_score(prob, pos),
        "log_loss": metrics.log_loss(prob, pos),
        "reliability": metrics.reliability_table(prob, pos, RELIABILITY_BINS),
    }


def _number(value: float) -> float | str:
    """A float for JSON: infinities become the strings 'inf' and '-inf'."""
    value = float(value)
    if np.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value
