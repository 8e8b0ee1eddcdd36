"""Evaluation: out-of-sample scores of labelled messages, by the split a user chooses.

Scores come from stratified k-fold cross-validation, a separate test set, or a chronological
split (train on the oldest messages, test on the newest). Messages are tokenized once, and
every model is fitted from the count rows of its training part (`crossval`), exactly as
`train` would fit it. Each test fold of a two-class model also gets the decision rule that
`train` would fit on its training part (`nested_scores`): with auto the event model that
part alone chooses, and the verdicts and calibrated probabilities of its own decision rule,
so nothing is ever fitted or chosen on the fold it scores. `report`
says what the scores show.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

import numpy as np

from ..core.jsonl import json_line
from ..core.parallel import CHUNK, chunks
from ..core.progress import counted
from ..core.settings import AUTO, Settings, TokenizerConfig
from ..errors import ConfigError, InputError
from ..fit.crossval import Scores, Tokenized, score_split, stratified_split, subset, training_rows
from ..fit.selection import internal_cv
from ..mail.headers import message_digest, message_time
from ..mail.message import Message
from ..models.decision import Rule, calibrated_probability, verdict
from ..text.counting import count_chunks
from ..text.vocabulary import TermIndex, renumber, stack_sorted

Progress = Callable[[int], None]
Counter_ = Callable[..., Iterator]
"""What tokenizes and counts chunks of messages, in order: `counting.count_chunks` (worker
processes here), or `cluster.count_chunks` with its client (a Dask cluster)."""

CALIBRATION_PROTOCOL = (
    "each test fold scored with the cutoffs and Platt calibration that train fits on its "
    "training part (internal cross-validation)"
)


# --------------------------------------------------------------------------------------------
# Tokenizing and dating messages
# --------------------------------------------------------------------------------------------


def tokenize_all(
    messages: Iterable[Message],
    tokenizer: TokenizerConfig,
    progress: Progress | None = None,
    jobs: int = 1,
    counter: Counter_ = count_chunks,
) -> Tokenized:
    """Tokenize labelled messages once: (ids, labels, X over sorted terms, terms, which
    rows are copies of one message, each message's Date as `train` reads it).

    ``progress`` is called with the number of messages of each chunk read; ``jobs`` worker
    processes tokenize (``counter`` says where: the same counts either way). Raises InputError for a message without a label or when there are
    no messages.
    """
    index = TermIndex()
    ids: list[str] = []
    labels: list[str] = []
    copies: dict[bytes, int] = {}
    copy_of: list[int] = []
    times: list[float] = []

    def labelled_chunks() -> Iterator[tuple[int, list[bytes | str]]]:
        for chunk in chunks(messages, CHUNK):
            for message in chunk:
                if message.label is None:
                    raise InputError(f"{message.id}: no label; evaluation needs labelled messages")
                ids.append(message.id)
                labels.append(message.label)
                copy_of.append(copies.setdefault(message_digest(message.data), len(copies)))
                moment = message_time(message.data, tokenizer.mail)
                times.append(math.nan if moment is None else moment)
            yield len(chunk), [m.data for m in chunk]
            if progress:
                progress(len(chunk))

    blocks = [
        renumber(counted, index, grow=True)
        for _, counted in counter(labelled_chunks(), tokenizer, jobs)
    ]
    if not ids:
        raise InputError("no messages to evaluate")
    X, terms = stack_sorted(blocks, index.terms)
    return Tokenized(
        ids, labels, X, terms, np.array(copy_of, dtype=np.int64), np.array(times, np.float64)
    )


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
    counter: Counter_ = count_chunks,
) -> Scores:
    """Stratified k-fold cross-validation: each message scored by the model of the other folds.

    Folds come from `metrics.stratified_folds` (labels, ``folds``, ``seed``), so they depend
    only on the labels in input order. Raises InputError when a label has fewer messages
    than folds.
    """
    started = time.perf_counter()
    data = tokenize_all(messages, settings.tokenizer, progress, jobs, counter)
    tokenized = time.perf_counter() - started
    fold, protocol = stratified_split(data.labels, folds, seed)
    return nested_scores(data, fold, settings, protocol=protocol, tokenize_seconds=tokenized)


def holdout(
    train_messages: Iterable[Message],
    test_messages: Iterable[Message],
    settings: Settings,
    progress: Progress | None = None,
    *,
    jobs: int = 1,
    counter: Counter_ = count_chunks,
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
        chain(counted(train_messages), test_messages), settings.tokenizer, progress, jobs, counter
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
    return nested_scores(data, fold, settings, protocol=protocol, tokenize_seconds=tokenized)


def chronological(
    messages: Iterable[Message],
    settings: Settings,
    *,
    test_fraction: float,
    progress: Progress | None = None,
    jobs: int = 1,
    counter: Counter_ = count_chunks,
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

    data = tokenize_all(dated(messages), settings.tokenizer, progress, jobs, counter)
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
    return nested_scores(data, fold, settings, protocol=protocol, tokenize_seconds=tokenized)


def nested_scores(
    data: Tokenized,
    fold: np.ndarray,
    settings: Settings,
    *,
    protocol: dict[str, Any],
    tokenize_seconds: float,
) -> Scores:
    """Score each test fold k (``fold == k``) as `train` on its training part would: with
    the settings the internal cross-validation of that part alone chooses (auto's event
    model, `selection.internal_cv`: nested, so no test message takes part in the choice),
    and for two classes with the cutoffs and calibration it fits there."""
    clock = time.perf_counter()
    choices = {}
    for k in counted("folds fitted", sorted(set(fold[fold >= 0].tolist()))):
        rows = training_rows(data, fold != k)
        times = None if data.times is None else data.times[rows]  # train's drift check
        choices[k] = internal_cv(subset(data, rows), settings, times=times)
    chosen = time.perf_counter() - clock
    if settings.training.event_model == AUTO:
        picked = {k: choice.chosen or choice.training.event_model for k, choice in choices.items()}
        names = Counter(picked.values())
        protocol = {
            **protocol,
            "auto": "event model chosen inside each training part: "
            + ", ".join(f"{name} ({n} of {len(choices)})" for name, n in names.most_common()),
            "auto_by_fold": {str(k): name for k, name in picked.items()},
        }
    per_fold = {k: settings.replace(training=c.training) for k, c in choices.items()}
    scores = score_split(data, fold, per_fold, protocol=protocol, tokenize_seconds=tokenize_seconds)
    scores = dataclasses.replace(scores, seconds={**scores.seconds, "internal CV": chosen})
    rules = {k: c.rule for k, c in choices.items() if c.rule is not None}
    return with_decision_rules(scores, rules) if rules else scores


def with_decision_rules(scores: Scores, rules: dict[int, Rule]) -> Scores:
    """``scores`` of a two-class model with each test fold k's decision rule ``rules[k]``
    (the cutoffs and calibration `train` fits on its training part alone), and the verdict
    and calibrated probability that `predict` with that model would print (``verdicts``,
    ``calibrated``)."""
    if scores.log_odds is None or scores.positive is None:
        return scores
    fold, log_odds = scores.fold, scores.log_odds
    calibrated = np.full(len(fold), np.nan)
    verdicts = np.full(len(fold), "", dtype=object)
    for k, rule in rules.items():
        test_rows = np.flatnonzero(fold == k)
        verdicts[test_rows] = [
            verdict(x, rule.cutoffs, scores.positive, scores.negative)
            for x in log_odds[test_rows].tolist()
        ]
        if rule.calibration is not None:
            calibrated[test_rows] = [
                calibrated_probability(rule.calibration, x, rule.cutoffs)
                for x in log_odds[test_rows].tolist()
            ]
    if all(rule.calibration is None for rule in rules.values()):
        calibrated = None  # every training part was too small for an internal CV
    return dataclasses.replace(
        scores,
        calibrated=calibrated,
        verdicts=verdicts,
        rules=dict(rules),
        protocol={**scores.protocol, "calibration": CALIBRATION_PROTOCOL},
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
    verdict, calibrated (two classes) or probabilities (more).

    Written as every output that is not a model (`container.write_output`): never through a
    link planted at ``path``, never into a FIFO or a device, and never left half-written."""
    from ..store.container import write_output

    write_output(path, _score_lines(scores), what="scores file")


def _score_lines(scores: Scores) -> Iterator[bytes]:
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
        yield (json_line(record) + "\n").encode("utf-8")
