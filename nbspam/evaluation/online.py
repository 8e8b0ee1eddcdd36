"""Online evaluation, the TREC spam track's protocol: score each message, then learn it.

Messages go in order (oldest first by Date header, as given, or shuffled with a seed).
A warm-up prefix (`warmup_size`: the first 10% of the messages, at most 1,000) is trained on
as `train` would train on it: its messages are all learned with their true labels, and the
internal cross-validation of `selection.internal_cv` on them alone fixes, once, the event
model (with --event-model auto) and the first decision rule: the ham and spam cutoffs on the
log-odds and the Platt calibration. The event model stays fixed for the rest of the stream;
the rule is refitted every `REFIT` messages on the running scores (the warm-up's out of
fold and each later message's before it was learned), as a long-running filter that is
retrained now and then would have it, unless the cutoffs were given. The warm-up messages
are not scored.

Every later message i is scored by the model of the counts learned so far: the warm-up and
the messages before i that the training policy learned. So its log-odds are those that
`train` on the warm-up followed by `learn` of those messages would give (tests check
it). Then the policy decides whether, and under which label, message i is learned:

- ``all``: every message, with its true label;
- ``errors``: train on error, only a message whose verdict was the other label;
- ``unsure``: errors and the messages in the unsure band, with their true labels;
- ``autolearn``: only a message the model was very sure of (calibrated probability of spam
  at least ``autolearn_spam`` or at most ``autolearn_ham``), with the label the model
  gave it, right or wrong, unless it was learned before: what `filter --autolearn` does,
  with no correction by a person;
- ``errors+autolearn``: both, as a user who corrects the filter's mistakes (`learn`) while
  `filter --autolearn` runs: an error with its true label, else a sure one with its verdict.

Learning goes as `update.learn` goes: a message is known by its digest, learning it again
under the same label does nothing, and under the other label moves its counts.

The counts live in integer arrays over the vocabulary of the whole stream (terms not yet
seen have zero counts and are dropped by the vocabulary filters, as a model that never saw
them lacks them), so learning a message adds its count row, and the scoring form is derived
again only when something was learned since the last message.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.progress import counted
from ..core.settings import Settings
from ..core.sparse import sp
from ..errors import ConfigError, InputError, TrainingError
from ..fit.calibration import rule_from_log_odds
from ..fit.crossval import Scores, Tokenized, subset
from ..fit.selection import internal_cv
from ..mail.headers import message_digest, message_time
from ..mail.message import Message
from ..models.decision import UNSURE, calibrated_probability, verdict
from ..models.event_models import event_model
from ..models.model import Model, kept_columns
from ..models.scoring_forms import FisherForm, LinearForm
from ..text.counts import ClassCounts
from .evaluation import Progress, chronological_order, tokenize_all

POLICIES = ("all", "errors", "unsure", "autolearn", "errors+autolearn")
ORDERS = ("date", "input", "shuffle")
WARMUP_FRACTION = 0.1
WARMUP_MAX = 1000
AUTOLEARN_SPAM = 0.999
"""Default: learn as spam a message whose calibrated spam probability is at least this."""
AUTOLEARN_HAM = 0.001
"""Default: learn as ham a message whose calibrated spam probability is at most this."""
CURVE_BLOCK = 1000
#: The cutoffs and calibration are refitted on the running scores every this many messages.
REFIT = 500
"""The learning curve counts errors in consecutive blocks of this many scored messages."""


@dataclass(frozen=True)
class Stream:
    """Labelled messages tokenized in stream order: rows of ``data`` in that order, the
    digest of each, and the protocol words on the order."""

    data: Tokenized
    digests: list[bytes]
    order: dict[str, Any]


@dataclass(frozen=True, eq=False)
class Online:
    """The outcome of an online run: ``scores`` (rows in stream order; the warm-up rows
    have fold -1, the scored ones fold 0), what was learned (``learned`` (n,): the label
    each scored message was learned under, '' when it was not) and the learning curve."""

    scores: Scores
    learned: np.ndarray
    curve: list[dict[str, Any]]
    summary: dict[str, Any]
    counts: ClassCounts
    """The counts learned by the end: the warm-up and what the policy learned."""


def warmup_size(n: int) -> int:
    """The default warm-up: 10% of the ``n`` messages rounded up, at most 1,000."""
    return min(WARMUP_MAX, math.ceil(WARMUP_FRACTION * n))


def stream_order(times: Sequence[float | None], how: str, seed: int = 42) -> np.ndarray:
    """Permutation (n,) of the messages: by Date header (`evaluate.chronological_order`),
    as given, or shuffled by a generator seeded with ``seed``."""
    n = len(times)
    if how == "date":
        return chronological_order(times)
    if how == "input":
        return np.arange(n)
    if how == "shuffle":
        return np.random.default_rng(seed).permutation(n)
    raise ConfigError(f"--order must be one of {', '.join(ORDERS)}, not {how!r}")


def read_stream(
    messages: Iterable[Message],
    settings: Settings,
    *,
    order: str = "date",
    seed: int = 42,
    progress: Progress | None = None,
    jobs: int = 1,
) -> Stream:
    """Tokenize labelled messages once and put them in stream order."""
    times: list[float | None] = []
    digests: list[bytes] = []

    def dated(stream: Iterable[Message]) -> Iterator[Message]:
        for message in stream:
            if order == "date":
                times.append(message_time(message.data, settings.tokenizer.mail))
            else:
                times.append(None)
            digests.append(message_digest(message.data))
            yield message

    if order not in ORDERS:
        raise ConfigError(f"--order must be one of {', '.join(ORDERS)}, not {order!r}")
    data = tokenize_all(dated(messages), settings.tokenizer, progress, jobs)
    permutation = stream_order(times, order, seed)
    undated = sum(t is None for t in times)
    if order == "date":
        by = "input order" if undated == len(times) else "Date header"
        if 0 < undated < len(times):
            by += f" ({undated:,} without a Date keep their input place)"
    elif order == "input":
        by = "input order"
    else:
        by = f"a shuffled order (seed {seed})"
    return Stream(
        subset(data, permutation),
        [digests[i] for i in permutation.tolist()],
        {"order": order, "by": by, "seed": seed if order == "shuffle" else None},
    )


def evaluate_online(
    messages: Iterable[Message],
    settings: Settings,
    *,
    order: str = "date",
    seed: int = 42,
    policy: str = "all",
    warmup: int | None = None,
    autolearn_spam: float = AUTOLEARN_SPAM,
    autolearn_ham: float = AUTOLEARN_HAM,
    progress: Progress | None = None,
    jobs: int = 1,
) -> Online:
    """Read, tokenize and order labelled messages, then `run_online`."""
    started = time.perf_counter()
    stream = read_stream(messages, settings, order=order, seed=seed, progress=progress, jobs=jobs)
    return run_online(
        stream,
        settings,
        policy=policy,
        warmup=warmup,
        autolearn_spam=autolearn_spam,
        autolearn_ham=autolearn_ham,
        tokenize_seconds=time.perf_counter() - started,
    )


class Learner:
    """Per-class counts over the stream's vocabulary, learned a count row at a time, and
    the record of learned messages (digest -> (row, label)) that `update.learn` keeps."""

    def __init__(self, data: Tokenized, classes: tuple[str, str], settings: Settings) -> None:
        self.X = data.X.tocsr()
        self.classes = classes
        self.settings = settings
        d = len(data.terms)
        self.terms = tuple(data.terms)
        self.class_count = np.zeros(2, np.int64)
        self.term_count = np.zeros((2, d), np.int64)
        self.doc_count = np.zeros((2, d), np.int64)
        self.seen: dict[bytes, tuple[int, str]] = {}
        self._form: tuple[LinearForm | FisherForm, np.ndarray] | None = None

    def learn(self, row: int, digest: bytes, label: str) -> bool:
        """Learn count row ``row`` under ``label``; False when it was known under it."""
        old = self.seen.get(digest)
        if old is not None and old[1] == label:
            return False
        if old is not None:
            self._add(old[0], old[1], -1)
        self._add(row, label, 1)
        self.seen[digest] = (row, label)
        self._form = None
        return True

    def _add(self, row: int, label: str, sign: int) -> None:
        c = self.classes.index(label)
        start, end = self.X.indptr[row], self.X.indptr[row + 1]
        cols, values = self.X.indices[start:end], self.X.data[start:end]
        self.class_count[c] += sign
        self.term_count[c, cols] += sign * values.astype(np.int64)
        self.doc_count[c, cols] += sign * (values > 0)

    def model(self) -> Model:
        """The model of the counts learned so far."""
        return Model(
            labels=self.classes,
            terms=self.terms,
            class_count=self.class_count.copy(),
            term_count=self.term_count.copy(),
            doc_count=self.doc_count.copy(),
            tokenizer=self.settings.tokenizer,
            training=self.settings.training,
        )

    def form(self) -> tuple[LinearForm | FisherForm, np.ndarray]:
        """(the scoring form of the counts learned so far, the position of each vocabulary
        column among the kept terms, -1 for a dropped one), derived again only after a change.

        The form is the one `model.make_form` derives: the event model's, over the kept
        columns.
        """
        if self._form is None:
            model = Model(
                labels=self.classes,
                terms=self.terms,
                class_count=self.class_count,
                term_count=self.term_count,
                doc_count=self.doc_count,
                tokenizer=self.settings.tokenizer,
                training=self.settings.training,
            )
            kept = kept_columns(model)
            form = event_model(model.training.event_model).form(model, kept)
            if not form.kept.size:  # as `model.from_counts` refuses such a model
                raise TrainingError("no terms survive the vocabulary filters (or no clue)")
            position = np.full(len(self.terms), -1, np.int64)
            position[form.kept] = np.arange(form.kept.size)
            self._form = form, position
        return self._form

    def log_odds(self, row: int) -> float:
        """The log-odds of count row ``row`` by the current counts, as `model.predict_matrix`
        scores a row over the kept terms."""
        form, position = self.form()
        start, end = self.X.indptr[row], self.X.indptr[row + 1]
        where = position[self.X.indices[start:end]]
        keep = where >= 0
        values = self.X.data[start:end][keep]
        if form.binary:
            values = np.ones_like(values)
        F = sp.csr_matrix(
            (values, where[keep], np.array([0, int(keep.sum())])), shape=(1, form.kept.size)
        )
        _, odds = form.predict(F)
        return float(odds[0])


def run_online(
    stream: Stream,
    settings: Settings,
    *,
    policy: str = "all",
    warmup: int | None = None,
    autolearn_spam: float = AUTOLEARN_SPAM,
    autolearn_ham: float = AUTOLEARN_HAM,
    tokenize_seconds: float = 0.0,
) -> Online:
    """Score every message after the warm-up by the model of what came before it, then
    learn it as ``policy`` says (module docstring). The autolearn thresholds apply to the
    calibrated probability, or to the raw posterior when the warm-up was too small to
    calibrate."""
    if policy not in POLICIES:
        raise ConfigError(f"--learn must be one of {', '.join(POLICIES)}, not {policy!r}")
    if not 0.0 <= autolearn_ham < 0.5 < autolearn_spam <= 1.0:
        raise ConfigError(
            "the autolearn thresholds need 0 <= ham threshold < 0.5 < spam threshold <= 1, "
            f"not {autolearn_ham!r} and {autolearn_spam!r}"
        )
    data = stream.data
    n = len(data.ids)
    classes = tuple(sorted(set(data.labels)))
    if len(classes) != 2:
        raise InputError(
            f"online evaluation needs messages of exactly two labels, found {list(classes)}"
        )
    w = warmup_size(n) if warmup is None else warmup
    if not 0 < w < n:
        raise ConfigError(f"--warmup must leave at least one of the {n:,} messages, not {w!r}")
    warm_labels = set(data.labels[:w])
    if len(warm_labels) < 2:
        raise InputError(
            f"the warm-up (the first {w:,} messages) has only label(s) {sorted(warm_labels)}: "
            "it needs both; use a larger --warmup"
        )
    positive = settings.training.positive
    if positive is not None and positive not in classes:
        raise ConfigError(f"--positive {positive!r} is not one of the labels {list(classes)}")
    if positive is None:
        positive = "spam" if "spam" in classes else classes[-1]
    negative = classes[1 - classes.index(positive)]

    clock = time.perf_counter()
    fresh, known = [], set()
    for i in range(w):  # as train: a message counted twice is counted once
        if stream.digests[i] not in known:
            known.add(stream.digests[i])
            fresh.append(i)
    choice = internal_cv(subset(data, np.array(fresh, np.int64)), settings)
    training = choice.training.replace(positive=positive)
    rule = choice.rule
    cutoffs = rule.cutoffs if rule is not None else None
    calibration = rule.calibration if rule is not None else None
    online = settings.replace(training=training)
    learner = Learner(data, classes, online)  # type: ignore[arg-type]
    for i in range(w):
        learner.learn(i, stream.digests[i], data.labels[i])
    warmed = time.perf_counter() - clock

    log_odds = np.full(n, np.nan)
    calibrated = np.full(n, np.nan)
    verdicts = np.full(n, "", dtype=object)
    learned = np.full(n, "", dtype=object)
    clock = time.perf_counter()
    # the running scores: the warm-up's out of fold, then each message's before it is learned
    seen_odds: list[float] = [] if choice.scores is None else _evaluated(choice.scores)
    seen_pos: list[bool] = [] if choice.scores is None else _evaluated(choice.scores, positive)
    refit = rule is not None and settings.training.calibrate and not settings.training.cutoffs
    for i in counted("messages scored and learned in turn", range(w, n)):
        if refit and i > w and (i - w) % REFIT == 0:  # as a long-running filter retrains
            odds, pos = np.array(seen_odds), np.array(seen_pos)
            if pos.any() and not pos.all():
                rule = rule_from_log_odds(odds, pos, training)
                cutoffs, calibration = rule
        s = learner.log_odds(i)
        seen_odds.append(s)
        seen_pos.append(data.labels[i] == positive)
        v = verdict(s, cutoffs, positive, negative)
        p = calibrated_probability(calibration, s, cutoffs)
        log_odds[i], verdicts[i] = s, v
        if p is not None:
            calibrated[i] = p
        sure = 1.0 / (1.0 + math.exp(-s)) if p is None and abs(s) < 700 else p
        if sure is None:  # no calibration and a log-odds beyond 700: as sure as can be
            sure = 1.0 if s > 0 else 0.0
        label = learn_label(
            policy, data.labels[i], v, sure, positive, negative, autolearn_spam, autolearn_ham
        )
        corrected = policy == "errors+autolearn" and v not in (data.labels[i], UNSURE)
        if policy.endswith("autolearn") and not corrected and stream.digests[i] in learner.seen:
            label = None  # as filter --autolearn: never over what was learned before
        if label is not None and learner.learn(i, stream.digests[i], label):
            learned[i] = label
    online_seconds = time.perf_counter() - clock

    fold = np.r_[np.full(w, -1), np.zeros(n - w)].astype(np.int64)
    log_post = np.full((n, 2), np.nan)
    pos = classes.index(positive)
    scored = fold == 0
    log_post[scored, pos] = -np.logaddexp(0.0, -log_odds[scored])
    log_post[scored, 1 - pos] = -np.logaddexp(0.0, log_odds[scored])
    auto = choice.chosen if choice.chosen else None
    protocol = {
        "method": "online",
        "policy": policy,
        "warmup": w,
        "test": n - w,
        **stream.order,
        "event_model": training.event_model,
        "description": (
            f"online (TREC spam track): {n - w:,} messages in {stream.order['by']}, each "
            f"scored, then learned by policy '{policy}', after a warm-up of {w:,} trained "
            f"on as train would, which fixed the event model ({training.event_model}) and the "
            "cutoffs"
        ),
        "calibration": (
            "the cutoffs and Platt calibration train fits on the warm-up (internal "
            f"cross-validation), refitted every {REFIT:,} messages on the scores so far (the "
            "warm-up's out of fold and each message's before it was learned)"
            if refit
            else "each message scored with the cutoffs and Platt calibration train fits on "
            "the warm-up (internal cross-validation)"
        ),
    }
    if policy.endswith("autolearn"):
        protocol["autolearn"] = {"spam": autolearn_spam, "ham": autolearn_ham}
    if auto:
        protocol["auto"] = f"event model chosen on the warm-up: {auto}"
    scores = Scores(
        ids=tuple(data.ids),
        labels=tuple(data.labels),
        classes=classes,
        log_posterior=log_post,
        log_odds=log_odds,
        positive=positive,
        fold=fold,
        seconds={"tokenize": tokenize_seconds, "warm-up": warmed, "online": online_seconds},
        calibrated=None if calibration is None else calibrated,
        protocol=protocol,
        verdicts=verdicts,
        rules={0: rule} if rule is not None else {},
    )
    curve = learning_curve(
        np.array(data.labels, dtype=object)[scored], verdicts[scored], learned[scored], positive
    )
    truth = np.array(data.labels, dtype=object)[scored]
    wrong = (verdicts[scored] != truth) & (verdicts[scored] != UNSURE)
    summary = {
        "policy": policy,
        "warmup": w,
        "scored": int(scored.sum()),
        "learned": int((learned[scored] != "").sum()),
        "learned_wrong": int(((learned[scored] != "") & (learned[scored] != truth)).sum()),
        "errors": int(wrong.sum()),
        "errors_per_1000": round(1000.0 * float(wrong.mean()), 3),
        "curve": curve,
    }
    final = ClassCounts(
        classes, learner.terms, learner.class_count, learner.term_count, learner.doc_count
    )
    return Online(scores, learned, curve, summary, final.pruned())


def learn_label(
    policy: str,
    truth: str,
    given: str,
    probability: float,
    positive: str,
    negative: str,
    autolearn_spam: float = AUTOLEARN_SPAM,
    autolearn_ham: float = AUTOLEARN_HAM,
) -> str | None:
    """The label ``policy`` learns a message under (None: not learned), from its true label,
    its verdict ``given`` and its (calibrated) probability of the positive label."""
    if policy == "all":
        return truth
    if policy == "errors":
        return truth if given not in (truth, UNSURE) else None
    if policy == "unsure":
        return truth if given != truth else None
    if policy == "errors+autolearn":
        args = (truth, given, probability, positive, negative, autolearn_spam, autolearn_ham)
        return learn_label("errors", *args) or learn_label("autolearn", *args)
    if policy == "autolearn":
        if probability >= autolearn_spam:
            return positive
        if probability <= autolearn_ham:
            return negative
        return None
    raise ConfigError(f"--learn must be one of {', '.join(POLICIES)}, not {policy!r}")


def _evaluated(scores: Scores, positive: str | None = None) -> list:
    """The out-of-fold log-odds of the evaluated messages, or with ``positive`` whether
    each is of that label."""
    mask = scores.evaluated
    if positive is None:
        return scores.log_odds[mask].tolist()
    return (np.array(scores.labels, dtype=object)[mask] == positive).tolist()


def learning_curve(
    truth: np.ndarray, verdicts: np.ndarray, learned: np.ndarray, positive: str
) -> list[dict[str, Any]]:
    """Per block of `CURVE_BLOCK` scored messages (the last may be shorter): the messages,
    false positives, false negatives, unsure verdicts, errors per 1,000 and messages learned."""
    curve = []
    for start in range(0, len(truth), CURVE_BLOCK):
        t, v = truth[start : start + CURVE_BLOCK], verdicts[start : start + CURVE_BLOCK]
        fp = int(((v == positive) & (t != positive)).sum())
        fn = int(((v != positive) & (v != UNSURE) & (t == positive)).sum())
        curve.append(
            {
                "first": start + 1,
                "last": start + len(t),
                "fp": fp,
                "fn": fn,
                "unsure": int((v == UNSURE).sum()),
                "errors_per_1000": round(1000.0 * (fp + fn) / len(t), 3),
                "learned": int((learned[start : start + CURVE_BLOCK] != "").sum()),
            }
        )
    return curve
