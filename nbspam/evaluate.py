"""Evaluation: out-of-sample scores of labelled messages, and the report of what they show.

Scores come from stratified k-fold cross-validation, a separate test set, or a chronological
split (train on the oldest messages, test on the newest). Messages are tokenized once; every
model is fitted from the count rows of its training part, exactly as `train` would fit it.

The report gives per-class precision, recall and F1, accuracy, Matthews correlation, the
confusion matrix, and for two-class models the ranking metrics of the continuous log-odds
(ROC AUC, (1-ROCA)% as in the TREC spam track, spam recall at false-positive rates of 0.1%
and 1%), the outcome at a ham and a spam cutoff with an "unsure" band between them, and the
calibration of the raw posterior and of a Platt-scaled probability. That calibration is
judged out of sample: inside each test fold, Platt scaling is fitted on an inner
cross-validation of the training part alone (`_heldout_calibration`), never on the fold.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timezone
from itertools import chain
from typing import Any, Literal, NamedTuple, TextIO

import numpy as np

from . import metrics
from . import naive_bayes as nb
from .config import Settings, TokenizerConfig
from .counting import count_chunks
from .decision import UNSURE, verdict
from .errors import ConfigError, InputError, NbspamError, os_error_message
from .mailparse import looks_like_mail, skip_mbox_line
from .messages import Message
from .model import Model, from_counts, predict_matrix
from .parallel import CHUNK, chunks
from .render import json_line
from .sparse import sp
from .vocabulary import TermIndex, renumber, stack_sorted

Progress = Callable[[int], None]
ReportFormat = Literal["text", "json", "markdown"]
REPORT_FORMATS: tuple[str, ...] = ("text", "json", "markdown")

#: False-positive rates at which the report gives the best spam recall.
RECALL_FPRS: tuple[float, ...] = (0.001, 0.01)
#: Bins of the reliability tables.
RELIABILITY_BINS = 10
CALIBRATION_PROTOCOL = (
    "each test fold scored with the cutoffs and Platt calibration that train fits on its "
    "training part (internal cross-validation)"
)


class Rule(NamedTuple):
    """A two-class model's decision rule: (ham, spam) cutoffs on the log-odds, Platt (a, b).

    Either is None when the training messages were too few for an internal cross-validation.
    """

    cutoffs: tuple[float, float] | None
    calibration: tuple[float, float] | None


class Tokenized(NamedTuple):
    """Labelled messages as count rows: ids (n,), labels (n,), X (n, d), terms (d,) sorted."""

    ids: list[str]
    labels: list[str]
    X: sp.csr_matrix
    terms: list[str]


class Totals(NamedTuple):
    """The counts of a set of messages (`naive_bayes.class_counts`: class_count,
    term_count, doc_count over sorted terms) and their labels, in the counts' order."""

    classes: list[str]
    counts: tuple[np.ndarray, ...]


@dataclass(frozen=True, eq=False)
class Scores:
    """Out-of-sample scores of every evaluated message.

    Rows are the messages in input order. ``fold`` (n,) is the test fold that scored each
    message, -1 for a message used only for training (its score rows are NaN).
    ``log_posterior`` (n, C) has its columns in ``classes`` order; ``log_odds`` (n,) is
    log P(positive | x) - log P(negative | x) for two-class models, else None.
    For two-class models each test fold k gets the decision rule `train` would fit on its
    training part (``rules[k]``: cutoffs and Platt calibration from an internal
    cross-validation of that part alone, `decision_rule`); ``verdicts`` (n,) and
    ``calibrated`` (n,) are what `predict` with that model would print. ``protocol``
    describes the split; ``seconds`` the time spent per stage.
    """

    ids: tuple[str, ...]
    labels: tuple[str, ...]
    classes: tuple[str, ...]
    log_posterior: np.ndarray
    log_odds: np.ndarray | None
    positive: str | None
    fold: np.ndarray
    seconds: dict[str, float]
    calibrated: np.ndarray | None = None
    protocol: dict[str, Any] = field(default_factory=dict)
    verdicts: np.ndarray | None = None
    rules: dict[int, Rule] = field(default_factory=dict)

    @property
    def evaluated(self) -> np.ndarray:
        """Boolean mask (n,) of the messages that were scored by a model not trained on them."""
        return self.fold >= 0

    @property
    def negative(self) -> str | None:
        """The other class of a two-class model."""
        if self.positive is None:
            return None
        return next(c for c in self.classes if c != self.positive)


# --------------------------------------------------------------------------------------------
# Tokenizing and dating messages
# --------------------------------------------------------------------------------------------


def tokenize_all(
    messages: Iterable[Message],
    tokenizer: TokenizerConfig,
    progress: Progress | None = None,
    jobs: int = 1,
) -> Tokenized:
    """Tokenize labelled messages once: (ids, labels, X over sorted terms, terms).

    ``progress`` is called with the number of messages of each chunk read; ``jobs`` worker
    processes tokenize. Raises InputError for a message without a label or when there are
    no messages.
    """
    index = TermIndex()
    ids: list[str] = []
    labels: list[str] = []

    def labelled_chunks() -> Iterator[tuple[int, list[bytes | str]]]:
        for chunk in chunks(messages, CHUNK):
            for message in chunk:
                if message.label is None:
                    raise InputError(f"{message.id}: no label; evaluation needs labelled messages")
                ids.append(message.id)
                labels.append(message.label)
            yield len(chunk), [m.data for m in chunk]
            if progress:
                progress(len(chunk))

    blocks = [
        renumber(counted, index, grow=True)
        for _, counted in count_chunks(labelled_chunks(), tokenizer, jobs)
    ]
    if not ids:
        raise InputError("no messages to evaluate")
    X, terms = stack_sorted(blocks, index.terms)
    return Tokenized(ids, labels, X, terms)


_BLANK_LINE = re.compile(rb"\r?\n\r?\n")


def message_time(data: bytes | str, mail: str = "auto") -> float | None:
    """Seconds since the epoch of a mail's Date header; None for text or a missing/bad Date.

    ``mail`` is the tokenizer's setting, read as the tokenizer reads it: 'never' takes
    nothing for mail, 'auto' only bytes that look like mail, 'always' everything. A Date
    without a time zone is taken as UTC.
    """
    if isinstance(data, str):
        if mail != "always":
            return None
        data = data.encode("utf-8", "surrogateescape")
    if mail == "never" or (mail == "auto" and not looks_like_mail(data)):
        return None
    from email.parser import BytesHeaderParser  # only chronological splits read dates
    from email.policy import compat32
    from email.utils import parsedate_to_datetime

    head = _BLANK_LINE.split(skip_mbox_line(data), maxsplit=1)[0]
    value = BytesHeaderParser(policy=compat32).parsebytes(head + b"\n\n").get("date")
    if not isinstance(value, str):
        return None
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def chronological_order(times: Sequence[float | None]) -> np.ndarray:
    """Permutation (n,) ordering messages oldest first, ties and undated ones by input order.

    A message without a time takes the time of the dated message before it in the input (the
    undated ones at the start sort first); with no times at all this is the input order.
    """
    carried = np.empty(len(times), dtype=np.float64)
    last = -np.inf
    for i, t in enumerate(times):
        last = last if t is None else t
        carried[i] = last
    return np.argsort(carried, kind="stable")


# --------------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------------


def cross_validate(
    messages: Iterable[Message],
    settings: Settings,
    *,
    folds: int = 5,
    seed: int = 42,
    progress: Progress | None = None,
    jobs: int = 1,
) -> Scores:
    """Stratified k-fold cross-validation: each message scored by the model of the other folds.

    Folds come from `metrics.stratified_folds` (labels, ``folds``, ``seed``), so they depend
    only on the labels in input order. Raises InputError when a label has fewer messages
    than folds.
    """
    started = time.perf_counter()
    data = tokenize_all(messages, settings.tokenizer, progress, jobs)
    tokenized = time.perf_counter() - started
    return cross_validate_matrix(data, settings, folds=folds, seed=seed, tokenize_seconds=tokenized)


def cross_validate_matrix(
    data: Tokenized,
    settings: Settings,
    *,
    folds: int = 5,
    seed: int = 42,
    tokenize_seconds: float | None = None,
    decision_rules: bool = True,
    totals: Totals | None = None,
) -> Scores:
    """`cross_validate` on messages already tokenized by `tokenize_all`.

    Without ``decision_rules`` only the out-of-fold scores are computed (what `train` needs
    to choose its cutoffs and calibration), not each fold's own decision rule. ``totals``
    as for `score_split`.
    """
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise ConfigError(f"--folds must be a whole number of at least 2, not {folds!r}")
    _check_labels(data.labels, folds)
    fold = metrics.stratified_folds(np.array(data.labels, dtype=object), folds, seed)
    protocol = {
        "method": "cross-validation",
        "folds": folds,
        "seed": seed,
        "description": f"stratified {folds}-fold cross-validation (seed {seed})",
    }
    return score_split(
        data,
        fold,
        settings,
        protocol=protocol,
        tokenize_seconds=tokenize_seconds,
        decision_rules=decision_rules,
        totals=totals,
    )


def holdout(
    train_messages: Iterable[Message],
    test_messages: Iterable[Message],
    settings: Settings,
    progress: Progress | None = None,
    *,
    jobs: int = 1,
) -> Scores:
    """Train on one set of messages, score another. Rows: the training messages, then the test.

    Raises InputError when the test
    data has a label the training data lacks.
    """
    started = time.perf_counter()
    n_train = 0

    def counted(messages: Iterable[Message]) -> Iterator[Message]:
        nonlocal n_train
        for message in messages:
            n_train += 1
            yield message

    data = tokenize_all(
        chain(counted(train_messages), test_messages), settings.tokenizer, progress, jobs
    )
    tokenized = time.perf_counter() - started
    n_test = len(data.ids) - n_train
    if not n_train or not n_test:
        raise InputError(f"no {'training' if not n_train else 'test'} messages to evaluate")
    fold = np.r_[np.full(n_train, -1), np.zeros(n_test, dtype=np.int64)].astype(np.int64)
    protocol = {
        "method": "holdout",
        "train": n_train,
        "test": n_test,
        "description": f"trained on {n_train:,} messages, tested on {n_test:,} others",
    }
    return score_split(data, fold, settings, protocol=protocol, tokenize_seconds=tokenized)


def chronological(
    messages: Iterable[Message],
    settings: Settings,
    *,
    test_fraction: float,
    progress: Progress | None = None,
    jobs: int = 1,
) -> Scores:
    """Train on the oldest messages, test on the newest ``test_fraction`` of them.

    Mail is ordered by its Date header (`message_time`, `chronological_order`), anything
    else by its order in the input. The test part has ``test_fraction * n`` messages rounded
    half up, at least one, and leaves at least one for training.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ConfigError(
            f"--chronological must be a fraction between 0 and 1, not {test_fraction!r}"
        )
    started = time.perf_counter()
    times: list[float | None] = []

    def dated(stream: Iterable[Message]) -> Iterator[Message]:
        for message in stream:
            times.append(message_time(message.data, settings.tokenizer.mail))
            yield message

    data = tokenize_all(dated(messages), settings.tokenizer, progress, jobs)
    tokenized = time.perf_counter() - started
    n = len(data.ids)
    if n < 2:
        raise InputError("a chronological split needs at least two messages")
    n_test = min(max(1, math.floor(test_fraction * n + 0.5)), n - 1)
    order = chronological_order(times)
    fold = np.full(n, -1, dtype=np.int64)
    fold[order[n - n_test :]] = 0
    undated = sum(t is None for t in times)
    by = "input order" if undated == n else "Date header"
    note = f" ({undated:,} without a Date keep their input place)" if 0 < undated < n else ""
    protocol = {
        "method": "chronological",
        "test_fraction": test_fraction,
        "order": by,
        "undated": undated,
        "train": n - n_test,
        "test": n_test,
        "description": (
            f"trained on the oldest {n - n_test:,} messages by {by}, tested on the newest "
            f"{n_test:,}{note}"
        ),
    }
    return score_split(data, fold, settings, protocol=protocol, tokenize_seconds=tokenized)


def _check_labels(labels: Sequence[str], folds: int) -> None:
    """InputError unless there are two labels or more, each with at least ``folds`` messages."""
    counts = Counter(labels)
    if len(counts) < 2:
        raise InputError(
            f"need messages of at least two labels to evaluate, found only {sorted(counts)}"
        )
    for label, count in sorted(counts.items()):
        if count < folds:
            raise InputError(
                f"label {label!r} has {count} message(s), fewer than the {folds} folds: "
                f"use fewer --folds or more data"
            )


# --------------------------------------------------------------------------------------------
# Scoring a split
# --------------------------------------------------------------------------------------------


def score_split(
    data: Tokenized,
    fold: np.ndarray,
    settings: Settings,
    *,
    protocol: dict[str, Any],
    tokenize_seconds: float | None = None,
    decision_rules: bool = True,
    totals: Totals | None = None,
) -> Scores:
    """Score each test fold k (``fold == k``) with a model fitted on all other rows.

    Rows with ``fold == -1`` are only ever trained on. For two-class models each test fold
    also gets the decision rule `train` would fit on its training part (`decision_rule`).
    ``totals``, the counts of a larger set of messages that holds these rows, make each
    fold's model the one of all those messages but the fold's.
    """
    fold = np.asarray(fold, dtype=np.int64)
    labels = np.array(data.labels, dtype=object)
    seconds = {} if tokenize_seconds is None else {"tokenize": tokenize_seconds}
    # not np.unique: numpy 2's imports numpy.ma on first use, 7 ms of training's serial end
    test_folds = sorted(set(fold[fold >= 0].tolist()))
    if not test_folds:
        raise InputError("no messages to evaluate: every message is for training")
    clock = time.perf_counter()
    classes = sorted(set(data.labels) if totals is None else totals.classes)
    y = np.searchsorted(np.array(classes, dtype=object), labels).astype(np.int64)
    if totals is None:
        counts = nb.class_counts(data.X, y, len(classes))
    else:  # the totals' classes in sorted order
        order = [totals.classes.index(c) for c in classes]
        counts = tuple(c[order] for c in totals.counts)
    seconds["train"], seconds["score"] = time.perf_counter() - clock, 0.0
    first: Model | None = None
    for k in test_folds:  # one fold's model at a time: each is the size of the whole model
        clock = time.perf_counter()
        model = _fit_without(data, y, fold == k, classes, counts, settings)
        _check_test_labels(set(labels[fold == k]), model.labels)
        fitted = time.perf_counter()
        seconds["train"] += fitted - clock
        if first is None:
            first = model
            log_post = np.full((len(labels), len(model.labels)), np.nan)
            log_odds = np.full(len(labels), np.nan) if model.is_binary else None
        rows = np.flatnonzero(fold == k)
        log_post[rows], odds = _predict_rows(model, data.X, rows)
        if log_odds is not None:
            log_odds[rows] = odds
        seconds["score"] += time.perf_counter() - fitted
    assert first is not None
    classes = first.labels
    calibrated = verdicts = None
    rules: dict[int, Rule] = {}
    if first.is_binary and decision_rules:
        clock = time.perf_counter()
        calibrated = np.full(len(labels), np.nan)
        verdicts = np.full(len(labels), "", dtype=object)
        for k in test_folds:
            train_rows, test_rows = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
            rules[k] = decision_rule(_subset(data, train_rows), settings)
            verdicts[test_rows] = _verdicts(log_odds[test_rows], rules[k], first)
            if rules[k].calibration is not None:
                calibrated[test_rows] = metrics.apply_platt(
                    log_odds[test_rows], *rules[k].calibration
                )
        if all(rule.calibration is None for rule in rules.values()):
            calibrated = None  # every training part was too small for an internal CV
        seconds["decision rules"] = time.perf_counter() - clock
        protocol = {**protocol, "calibration": CALIBRATION_PROTOCOL}
    return Scores(
        ids=tuple(data.ids),
        labels=tuple(data.labels),
        classes=classes,
        log_posterior=log_post,
        log_odds=log_odds,
        positive=first.train.positive if first.is_binary else None,
        fold=fold,
        seconds=seconds,
        calibrated=calibrated,
        protocol=protocol,
        verdicts=verdicts,
        rules=rules,
    )


def _fit_without(
    data: Tokenized,
    y: np.ndarray,
    held_out: np.ndarray,
    classes: list[str],
    totals: tuple[np.ndarray, ...],
    settings: Settings,
) -> Model:
    """The model of every row but the held-out ones (mask (n,)), from counts.

    The counts of the training rows are the ``totals`` of all rows (`naive_bayes.class_counts`,
    rows labelled ``classes[y]``) less those of the held-out rows: integers, so the model is
    exactly the one fitted on the training rows, and only the held-out rows are counted
    again. A class with no training row is left out, as a fit on those rows would leave it.
    """
    part = nb.class_counts(data.X[held_out], y[held_out], len(classes))
    counts = [total - held for total, held in zip(totals, part)]
    keep = np.flatnonzero(counts[0] > 0)
    if keep.size < len(classes):
        counts = [c[keep] for c in counts]
    labels = [classes[c] for c in keep.tolist()]
    return from_counts(labels, data.terms, *counts, settings, sorted_terms=True)


def _predict_rows(
    model: Model, X: sp.csr_matrix, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """(log posteriors, log-odds or None) of the given rows of the full count matrix."""
    return predict_matrix(model, X[rows][:, model.scorer.kept])


def _check_test_labels(test_labels: set[str], model_labels: Sequence[str]) -> None:
    """InputError when the test rows have labels the model was not trained on."""
    unknown = sorted(test_labels - set(model_labels))
    if unknown:
        raise InputError(
            f"the test messages have label(s) {unknown} that the training messages lack "
            f"(training labels: {list(model_labels)})"
        )


def _subset(data: Tokenized, rows: np.ndarray) -> Tokenized:
    return Tokenized(
        [data.ids[i] for i in rows], [data.labels[i] for i in rows], data.X[rows], data.terms
    )


def _verdicts(odds: np.ndarray, rule: Rule, model: Model) -> np.ndarray:
    """What `predict` prints as the verdict of each log-odds under ``rule``."""
    positive, negative = model.train.positive, model.labels[model.negative_index]
    return np.array(
        [verdict(float(x), rule.cutoffs, positive, negative) for x in odds], dtype=object
    )


def typical_cutoffs(scores: Scores) -> tuple[float, float] | None:
    """The median over folds of each fold's (ham, spam) cutoffs, to draw; None if none."""
    pairs = [rule.cutoffs for rule in scores.rules.values() if rule.cutoffs is not None]
    if not pairs:
        return None
    ham, spam = np.median(np.array(pairs, dtype=np.float64), axis=0)
    return float(ham), float(spam)


def write_scores(scores: Scores, path: str) -> None:
    """Each evaluated message's out-of-sample scores as JSON Lines: id, label, fold, log_odds,
    verdict, calibrated (two classes) or probabilities (more)."""
    try:
        with open(path, "w", encoding="utf-8") as out:
            _write_score_lines(scores, out)
    except OSError as exc:
        raise NbspamError(f"cannot write scores {path}: {os_error_message(exc)}") from None


def _write_score_lines(scores: Scores, out: TextIO) -> None:
    for i in np.flatnonzero(scores.evaluated):
        record: dict[str, Any] = {
            "path": scores.ids[i],
            "label": scores.labels[i],
            "fold": int(scores.fold[i]),
        }
        if scores.log_odds is not None:
            record["log_odds"] = float(scores.log_odds[i])
            if scores.verdicts is not None:
                record["verdict"] = scores.verdicts[i]
            if scores.calibrated is not None and not np.isnan(scores.calibrated[i]):
                record["calibrated"] = float(scores.calibrated[i])
        else:
            probs = np.exp(scores.log_posterior[i])
            record["probabilities"] = dict(zip(scores.classes, map(float, probs)))
        out.write(json_line(record) + "\n")


def decision_rule(data: Tokenized, settings: Settings, totals: Totals | None = None) -> Rule:
    """The cutoffs and calibration `train` stores, from an internal cross-validation.

    Every message gets a log-odds from a model of the other folds (stratified, ``folds``
    of the settings, fewer when a class has fewer messages, seed 42), or with ``totals``
    (of all the messages these are a sample of) from a model of all the messages but its
    fold. The Platt calibration is fitted on those; the cutoffs are the ones given in the
    settings, else those for ``target_fpr``, else those of least cost. Without two folds'
    worth of messages in each class, only given cutoffs are returned.
    """
    cfg = settings.train
    counts = Counter(data.labels)
    folds = min(cfg.folds, min(counts.values()))
    if folds < 2 or len(counts) < 2:
        return Rule(cfg.cutoffs, None)
    scores = cross_validate_matrix(data, settings, folds=folds, decision_rules=False, totals=totals)
    cutoffs = cfg.cutoffs or choose_cutoffs(
        scores,
        target_fpr=cfg.target_fpr,
        cost_fp=cfg.cost_fp,
        cost_fn=cfg.cost_fn,
        cost_unsure=cfg.cost_unsure,
    )
    return Rule(cutoffs, calibrate(scores))


# --------------------------------------------------------------------------------------------
# Cutoffs and calibration for a model trained on all the data
# --------------------------------------------------------------------------------------------


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
    cost_fp: float = 10.0,
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


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------


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
        out["calibration"] = _calibration(odds, pos, raw, held_out, calibration)
    return out


def predicted_labels(scores: Scores) -> np.ndarray:
    """The model's own label for each row (n,): log-odds > 0 for two classes, else argmax.

    Rows not evaluated get the first class; mask them with ``scores.evaluated``.
    """
    classes = np.array(scores.classes, dtype=object)
    if scores.log_odds is not None and scores.positive is not None:
        return np.where(scores.log_odds > 0, scores.positive, scores.negative).astype(object)
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
) -> dict[str, Any]:
    """Brier score, log loss and reliability table of the raw and the calibrated probability.

    The calibrated probability is the held-out one when the split computed it; else the
    given Platt parameters applied to the very scores they were presumably fitted on.
    """
    if held_out is not None:
        calibrated, how = held_out, CALIBRATION_PROTOCOL
    elif calibration is not None:
        calibrated = metrics.apply_platt(odds, *calibration)
        how = "the given Platt parameters, applied to the evaluated scores (not held out)"
    else:
        calibrated, how = None, None
    platt = None if calibration is None else {"a": calibration[0], "b": calibration[1]}
    return {
        "platt": platt,
        "calibrated_by": how,
        "raw": _probability_quality(raw, pos),
        "calibrated": None if calibrated is None else _probability_quality(calibrated, pos),
    }


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


# --------------------------------------------------------------------------------------------
# Rendering the report
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Table:
    """A table of text cells: the first column is aligned left, the others right."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


_Block = str | _Table
_Section = tuple[str, list[_Block]]


def render_report(report: dict[str, Any], fmt: ReportFormat) -> Iterator[str]:
    """The report as lines: an aligned plain-text table, JSON, or Markdown."""
    if fmt == "json":
        yield from json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False).splitlines()
        return
    if fmt not in REPORT_FORMATS:
        raise ValueError(f"unknown report format {fmt!r}")
    layout = _markdown_section if fmt == "markdown" else _text_section
    for i, section in enumerate(_sections(report)):
        if i:
            yield ""
        yield from layout(section)


def _text_section(section: _Section) -> Iterator[str]:
    title, blocks = section
    yield title
    for block in blocks:
        if isinstance(block, _Table):
            yield from ("  " + line for line in _aligned(block))
        else:
            yield "  " + block


def _aligned(table: _Table) -> Iterator[str]:
    rows = [table.header, *table.rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(table.header))]
    for row in rows:
        cells = [
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        yield "  ".join(cells).rstrip()


def _markdown_section(section: _Section) -> Iterator[str]:
    title, blocks = section
    yield f"## {title}"
    for block in blocks:
        yield ""
        if isinstance(block, _Table):
            yield _markdown_row(block.header)
            yield "|" + "|".join([":---", *["---:"] * (len(block.header) - 1)]) + "|"
            yield from (_markdown_row(row) for row in block.rows)
        else:
            yield block


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _sections(report: dict[str, Any]) -> list[_Section]:
    """The report's content, format-neutral: titled sections of lines and tables."""
    sections = [_overview(report), _classification_section(report), _confusion_section(report)]
    if report["positive"] is not None:
        sections.append(_ranking_section(report))
        if report["cutoffs"] is not None:
            sections.append(_cutoff_section(report))
        if report["calibration"] is not None:
            sections.append(_calibration_section(report))
    if report["seconds"]:
        times = ", ".join(f"{stage} {s:.1f} s" for stage, s in report["seconds"].items())
        sections.append(("Timings", [times]))
    return sections


def _overview(report: dict[str, Any]) -> _Section:
    counts = report["counts"]
    by_class = counts["by_class"]
    evaluated = ", ".join(f"{c} {v['evaluated']:,}" for c, v in by_class.items())
    lines = [
        report["protocol"].get("description", "evaluation"),
        f"{counts['evaluated']:,} of {counts['messages']:,} messages evaluated: {evaluated}",
    ]
    if counts["evaluated"] < counts["messages"]:
        trained = ", ".join(f"{c} {v['train_only']:,}" for c, v in by_class.items())
        lines.append(f"used only for training: {trained}")
    return "Evaluation", lines


def _classification_section(report: dict[str, Any]) -> _Section:
    header = ("class", "precision", "recall", "F1", "support")
    rows = [
        (c, f"{m['precision']:.4f}", f"{m['recall']:.4f}", f"{m['f1']:.4f}", f"{m['support']:,}")
        for c, m in report["per_class"].items()
    ]
    macro = report["macro"]
    total = sum(m["support"] for m in report["per_class"].values())
    rows.append(
        (
            "macro average",
            f"{macro['precision']:.4f}",
            f"{macro['recall']:.4f}",
            f"{macro['f1']:.4f}",
            f"{total:,}",
        )
    )
    summary = f"accuracy {report['accuracy']:.4f}, Matthews correlation {report['mcc']:.4f}"
    return f"Classification ({report['decision']})", [_Table(header, tuple(rows)), summary]


def _confusion_table(confusion: dict[str, Any]) -> _Table:
    header = ("true \\ predicted", *confusion["predicted"])
    rows = tuple(
        (label, *(f"{n:,}" for n in row))
        for label, row in zip(confusion["true"], confusion["matrix"], strict=True)
    )
    return _Table(header, rows)


def _confusion_section(report: dict[str, Any]) -> _Section:
    return "Confusion matrix (rows: true label, columns: predicted)", [
        _confusion_table(report["confusion"])
    ]


def _ranking_section(report: dict[str, Any]) -> _Section:
    ranking = report["ranking"]
    title = "Ranking by log-odds"
    if ranking is None:
        return title, ["ROC metrics need messages of both classes among the evaluated ones"]
    line = f"ROC AUC {ranking['roc_auc']:.6f}, (1-ROCA)% {ranking['one_minus_roca_percent']:.4f}"
    header = ("false-positive rate", f"{report['positive']} recall", "log-odds cutoff")
    rows = tuple(
        (f"{100 * r['max_fpr']:g}%", f"{r['recall']:.4f}", _cut(r["threshold"]))
        for r in ranking["recall_at_fpr"]
    )
    return title, [line, _Table(header, rows)]


def _cut(value: float | str) -> str:
    """A log-odds cutoff for people: signed, three decimals, or +inf / -inf."""
    if isinstance(value, str):
        return value if value.startswith("-") else "+" + value
    return f"{value:+.3f}"


def _cutoff_section(report: dict[str, Any]) -> _Section:
    cut = report["cutoffs"]
    positive = report["positive"]
    negative = next(c for c in report["classes"] if c != positive)
    if "per_fold" in cut:
        pairs = [
            "none"
            if rule["ham_cutoff"] is None
            else f"{_cut(rule['ham_cutoff'])}..{_cut(rule['spam_cutoff'])}"
            for rule in cut["per_fold"].values()
        ]
        line = (
            f"each fold's own cutoffs, as train fits them on the fold's training part: "
            f"{negative} below, {positive} from, unsure between (log-odds): {', '.join(pairs)}"
        )
    else:
        line = (
            f"{negative} below {_cut(cut['ham_cutoff'])}, {positive} from "
            f"{_cut(cut['spam_cutoff'])} (log-odds), unsure between"
        )
    outcome = (
        f"false positives {cut['false_positives']:,}, false negatives "
        f"{cut['false_negatives']:,}, unsure {cut['unsure']:,} ({cut['unsure_rate']:.2%})"
    )
    return "Cutoffs", [line, _confusion_table(cut["confusion"]), outcome]


def _calibration_section(report: dict[str, Any]) -> _Section:
    cal = report["calibration"]
    positive = report["positive"]
    blocks: list[_Block] = []
    if cal["platt"] is not None:
        blocks.append(
            f"Platt: P({positive}) = 1 / (1 + exp(-(a log-odds + b))), "
            f"a = {cal['platt']['a']:.6g}, b = {cal['platt']['b']:.6g}"
        )
    kinds = [("raw posterior", cal["raw"])]
    if cal["calibrated"] is not None:
        blocks.append(f"calibrated: {cal['calibrated_by']}")
        kinds.append(("calibrated", cal["calibrated"]))
    blocks.append(
        _Table(
            ("probability", "Brier", "log loss"),
            tuple((name, f"{q['brier']:.5f}", f"{q['log_loss']:.5f}") for name, q in kinds),
        )
    )
    header = [f"P({positive})"]
    for name, _ in kinds:
        short = name.split()[0]
        header += [f"{short} n", f"{short} mean", f"{short} observed"]
    rows = []
    for i, first in enumerate(kinds[0][1]["reliability"]):
        row = [f"{first['lower']:.1f}-{first['upper']:.1f}"]
        for _, quality in kinds:
            b = quality["reliability"][i]
            row += [f"{b['count']:,}", _mean(b["mean_predicted"]), _mean(b["fraction_positive"])]
        rows.append(tuple(row))
    blocks.append(_Table(tuple(header), tuple(rows)))
    return "Calibration", blocks


def _mean(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"
