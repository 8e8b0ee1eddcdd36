"""What training fits besides the counts, by an internal cross-validation of its messages:
the event model and its settings (``--event-model auto``), and a two-class model's cutoffs
and calibration (`calibration`).

Every message is scored by a model of the other folds (`crossval`). With auto this is done
for each candidate of a small grid, all on the same count rows: first the event models,
then, on the best of them, one change at a time: another smoothing, stop words left out,
rare words left out, half the words kept by mutual information, word pairs left out (where
the tokenizer counts them). Each change is a mask over
the columns or a setting of the maths, never a second tokenization. The judge is the pooled
out-of-fold ROC AUC (for more than two classes, the mean of each class's
one-against-the-rest AUC), and a candidate replaces the best only where it removes a clear
share of its error (`better`): a choice that flips with the sample costs more than it gains,
as pooled scores of models that differ fold by fold rank worse together. Where at least
`DATED` messages of each label carry a date, cross-validation mixes old and new mail, so
each candidate is also judged on a split by date (`date_split`: each label's newer half
scored by a model of the rest), and its AUC is the mean of the two. The winner's
out-of-fold scores give the cutoffs and calibration, so choosing costs one
cross-validation per candidate and nothing else.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.progress import stage
from ..core.settings import AUTO, AUTO_FALLBACK, Settings, TrainConfig
from ..errors import TrainingError
from ..models.decision import Rule
from ..text.counts import ClassCounts
from ..text.tokenizer import load_stop_words
from . import metrics
from .calibration import DRIFT, drift_from_dates, rule_from_scores
from .crossval import (
    Folds,
    Scores,
    Stopped,
    Tokenized,
    cross_validate_matrix,
    score_candidates,
    stratified_split,
)

#: The seed of the folds every candidate is cross-validated on.
SEED = 42
#: AUCs closer than this are a tie, won by the simpler candidate (the one tried first).
TIE = 1e-4
#: How much of the best error 1 - AUC a candidate must remove to replace it: in the first
#: round (another event model), and in the second (a change to the winner).
MARGIN_MODEL = 0.1
MARGIN_CHANGE = 0.2
#: The other smoothings tried on a linear winner, and the strengths s on a Fisher winner.
ALPHAS = (0.1, 0.5, 1.0)
STRENGTHS = (0.05, 0.2, 0.5)
#: The least dated messages of each label for auto to judge candidates on a split by date.
DATED = 200


@dataclass(frozen=True)
class Candidate:
    """One setting of the grid: its name and the training settings it changes."""

    name: str
    changes: dict[str, Any]


@dataclass(frozen=True)
class Tried:
    """A candidate and the AUC it was judged by (None: it could not be trained, ``note``
    says why): its out-of-fold AUC, or where the messages carry dates the mean of that
    (``folds_auc``) and the AUC on the split by date (``date_auc``)."""

    name: str
    changes: dict[str, Any]
    auc: float | None
    note: str = ""
    folds_auc: float | None = None
    date_auc: float | None = None


@dataclass(frozen=True)
class Choice:
    """What the internal cross-validation fitted: the training settings (the event model
    chosen, never auto), a two-class model's decision rule (None for more classes), and
    with auto the candidates tried in order and the name of the one chosen."""

    training: TrainConfig
    rule: Rule | None
    tried: tuple[Tried, ...] = ()
    chosen: str | None = None
    messages: int = 0
    folds: int = 0
    #: the out-of-fold scores of the chosen settings (None where nothing was cross-validated)
    scores: Scores | None = field(default=None, compare=False, repr=False)
    #: the drift measured on the messages' dates (`calibration.drift_from_dates`), or None
    drift: dict[str, float | int] | None = None

    def info(self) -> dict[str, Any]:
        """The record of the choice a model keeps (``info["auto"]``): the chosen candidate
        (None where the messages were too few to choose), how it was judged, and every
        candidate tried."""
        return {
            "chosen": self.chosen,
            "event_model": self.training.event_model,
            "criterion": self.criterion,
            "messages": self.messages,
            "folds": self.folds,
            "candidates": [
                {"name": t.name, "settings": _plain(t.changes), "auc": t.auc, "note": t.note}
                | ({} if t.date_auc is None else {"folds_auc": t.folds_auc, "date_auc": t.date_auc})
                for t in self.tried
            ],
        }

    @property
    def criterion(self) -> str:
        """What the candidates were judged by."""
        if any(t.date_auc is not None for t in self.tried):
            return "mean of the pooled out-of-fold ROC AUC and the ROC AUC of a split by date"
        return "pooled out-of-fold ROC AUC"


def first_round(binary: bool) -> list[Candidate]:
    """The event models, simplest first, each with the smoothing that suits it: the
    multinomial model, the Bernoulli model (alpha 0.5: with less, a word never seen in one
    class weighs too much), the complement model with its weights normalised (without, it
    ranks two classes as the multinomial model does), and for two classes the
    Robinson–Fisher scorer."""
    grid = [
        Candidate("multinomial", {"event_model": "multinomial", "alpha": 0.1}),
        Candidate("bernoulli", {"event_model": "bernoulli", "alpha": 0.5}),
        Candidate(
            "complement norm", {"event_model": "complement", "alpha": 0.1, "complement_norm": True}
        ),
    ]
    if binary:
        grid.append(Candidate("fisher", {"event_model": "fisher"}))
    return grid


def second_round(
    winner: TrainConfig, stop_words: tuple[str, ...], terms: int, *, pairs: bool = False
) -> list[Candidate]:
    """What is tried on the winner of the first round, one change at a time: its smoothing
    (alpha, or Fisher's strength s), stop words left out, words of one message left out,
    only the most informative half of the words (``terms`` of them in all) kept, and where
    the tokenizer counts word pairs (``pairs``), the model without them."""
    if winner.event_model == "fisher":
        grid = [
            Candidate(f"+ strength {s:g}", {"strength": s})
            for s in STRENGTHS
            if s != winner.strength
        ]
    else:
        grid = [Candidate(f"+ alpha {a:g}", {"alpha": a}) for a in ALPHAS if a != winner.alpha]
    grid += [
        Candidate("+ stop words", {"stop_words": stop_words}),
        Candidate("+ min-count 2", {"min_count": 2}),
    ]
    if pairs:
        grid.append(Candidate("+ without word pairs", {"score_pairs": False}))
    if terms >= 2:
        grid.append(
            Candidate(
                f"+ {terms // 2:,} words by mutual information",
                {"select": "mi", "max_features": terms // 2},
            )
        )
    return grid


def held_settings(given: frozenset[str]) -> frozenset[str]:
    """The settings auto may not change: those the user gave (an option, a file of
    settings, an argument of the API), but the event model (auto itself); word pairs given
    hold their scoring too (``score_pairs``, auto's "+ without word pairs")."""
    held = set(given) - {"event_model"}
    if "word_pairs" in held:
        held.add("score_pairs")
    return frozenset(held)


def holding(candidates: list[Candidate], held: frozenset[str], *, keep: bool) -> list[Candidate]:
    """The ``candidates`` with the ``held`` settings kept as given: with ``keep`` (the event
    models of the first round) each is tried without its change of a held setting, so that
    `train --alpha 5` tries every event model with alpha 5; else (the changes of the second
    round) a change of a held setting is not tried. Auto chooses only what was left to it:
    before, a given alpha, min-count or stop-word list was replaced without a word."""
    if keep:
        return [
            Candidate(c.name, {k: v for k, v in c.changes.items() if k not in held})
            for c in candidates
        ]
    return [c for c in candidates if not held & set(c.changes)]


def better(auc: float, best: float, margin: float) -> bool:
    """Whether an out-of-fold AUC beats the best so far by more than noise: its error
    1 - AUC below the best's by more than the fraction ``margin`` of it (and by more than
    `TIE`). The AUC of a few thousand messages moves by that much between samples, and a
    choice that flips between folds costs more than it gains."""
    return 1.0 - auc < (1.0 - best) * (1.0 - margin) and auc > best + TIE


def internal_cv(
    data: Tokenized,
    settings: Settings,
    totals: ClassCounts | None = None,
    times: np.ndarray | None = None,
) -> Choice:
    """The settings and decision rule `train` fits on the messages ``data`` (count rows).

    Every message gets scores from a model of the other folds (stratified, ``folds`` of the
    settings, fewer when a class has fewer messages, seed 42), or with ``totals`` (of all
    the messages these are a sample of) from a model of all the messages but its fold.
    With auto, the candidates are compared on those scores; a two-class model's Platt
    calibration and cutoffs come from the scores of the chosen settings
    (`calibration.rule_from_scores`); where the messages carry dates (``times`` (n,),
    seconds, NaN where unknown), the spam cutoff's drift margin is measured on a
    chronological split of them (`calibration.drift_from_dates`), else it is the fixed
    `calibration.DRIFT`. With fewer than two folds' worth of messages in each
    class nothing is fitted: auto becomes `settings.AUTO_FALLBACK`, and only given cutoffs are kept.
    """
    cfg = settings.training
    counts = Counter(data.labels)
    binary = len(totals.labels if totals is not None else counts) == 2
    folds = min(cfg.folds, min(counts.values()))
    auto = cfg.event_model == AUTO
    if folds < 2 or len(counts) < 2:
        training = cfg.replace(event_model=AUTO_FALLBACK) if auto else cfg
        return Choice(
            training, Rule(cfg.cutoffs, None) if binary else None, (), None, len(data.labels), 0
        )
    if not auto:
        if not binary:
            return Choice(cfg, None)
        scores = cross_validate_matrix(data, settings, folds=folds, totals=totals)
        return decided(Choice(cfg, None, scores=scores), data, settings, times, folds)
    choice = choose(data, settings, totals, folds=folds, binary=binary, times=times)
    return decided(choice, data, settings, times, folds) if binary else choice


def decided(
    choice: Choice, data: Tokenized, settings: Settings, times: np.ndarray | None, folds: int
) -> Choice:
    """The two-class ``choice`` with its decision rule from its out-of-fold scores, the
    drift margin measured on the messages' ``times`` where they carry dates."""
    assert choice.scores is not None
    chosen = settings.replace(training=choice.training)
    drift = None if times is None else drift_from_dates(data, times, chosen, folds)
    share = DRIFT if drift is None else float(drift["drift"])
    rule = rule_from_scores(choice.scores, choice.training, drift=share)
    return dataclasses.replace(choice, rule=rule, drift=drift)


def choose(
    data: Tokenized,
    settings: Settings,
    totals: ClassCounts | None,
    *,
    folds: int,
    binary: bool,
    times: np.ndarray | None = None,
) -> Choice:
    """auto's choice (`internal_cv`): each candidate cross-validated on the same folds (and
    where the messages' ``times`` allow, scored on the same `date_split`); the first
    round's event models, then the changes of the second round on its winner."""
    cfg = settings.training
    held = held_settings(settings.given)
    stop_words = cfg.stop_words or load_stop_words("english", settings.tokenizer)
    base = cfg if "stop_words" in held else cfg.replace(stop_words=())
    tried: list[Tried] = []
    # the counts of each fold's rest, its test rows and Fisher's log-odds, for every candidate
    fold, protocol = stratified_split(data.labels, folds, SEED)
    shared = Folds(data, fold, totals)
    split = date_split(data.labels, times)
    by_date = None if split is None else Folds(data, split, None, like=shared)

    test_folds = len(set(fold.tolist()))
    fits = test_folds + (by_date is not None)  # of each candidate

    def run(
        candidates: list[Candidate],
        start: TrainConfig,
        step: Callable[[int], None],
        best: float | None,
        margin: float,
    ) -> list[tuple[float, TrainConfig, Scores] | None]:
        """Each candidate (changes to ``start``) judged: first on the split by date, then
        on the folds, all of them on each fold in turn (`score_candidates`); a candidate is
        stopped after a fold where even the best ROC AUC the remaining folds could give it
        (`best_possible_auc`) does not beat ``best`` (a candidate that does not beat the best
        before its round never beats the best at its turn: that only grows). Where there is
        no best yet (the first round), the first candidate that trains is judged on all its
        folds first, and is the best the others must beat."""
        trainings = [start.replace(**c.changes) for c in candidates]
        trials = [settings.replace(training=t) for t in trainings]
        progress = _Progress(step, len(candidates), fits)
        on_date: list[Scores | TrainingError | Stopped | None] = [None] * len(candidates)
        if by_date is not None:  # one fit each, which may rule a candidate out
            on_date = score_candidates(data, by_date, trials)
            progress(len(candidates))
        date_auc = [pooled_auc(s) if isinstance(s, Scores) else None for s in on_date]
        outcome: list[Scores | TrainingError | Stopped | None] = [None] * len(candidates)

        def judged(i: int) -> tuple[Tried, tuple[float, TrainConfig, Scores] | None]:
            name, changes, scores, dated = (
                candidates[i].name,
                candidates[i].changes,
                outcome[i],
                on_date[i],
            )
            if isinstance(scores, TrainingError):  # a mask that leaves no term
                return Tried(name, changes, None, str(scores)), None
            if isinstance(dated, TrainingError):
                raise dated
            if isinstance(scores, Stopped):
                return Tried(name, changes, None, scores.note), None
            assert isinstance(scores, Scores)
            auc = pooled_auc(scores)
            if date_auc[i] is None:
                return Tried(name, changes, auc), (auc, trainings[i], scores)
            value = (auc + date_auc[i]) / 2
            return Tried(name, changes, value, "", auc, date_auc[i]), (value, trainings[i], scores)

        first = 0
        while best is None and first < len(candidates):  # the first that trains sets the bar
            (outcome[first],) = score_candidates(
                data, shared, [trials[first]], protocol=protocol, done=progress
            )
            result = judged(first)[1]
            best = None if result is None else result[0]
            first += 1

        def cannot_win(i: int, folds_auc: float, done: int) -> str | None:
            """Why candidate i is stopped after ``done`` folds where its pooled ROC AUC can
            reach ``folds_auc`` at most, or None."""
            if best is None or isinstance(on_date[i], TrainingError):
                return None
            bound = folds_auc if date_auc[i] is None else (folds_auc + date_auc[i]) / 2
            if better(bound + SLACK, best, margin):
                return None
            seen = [f"{done} of {test_folds} folds"] if done else []
            seen += [] if date_auc[i] is None else ["the split by date"]
            return (
                f"stopped {'after ' + ' and '.join(seen) if seen else 'before its folds'}: its "
                f"ROC AUC could be at most {bound:.5f}, which does not remove {margin:.0%} of "
                f"the error of the best, {best:.5f}"
            )

        for i in range(first, len(candidates)):  # the split by date alone may tell
            note = cannot_win(i, 1.0, 0)
            if note is not None:
                outcome[i] = Stopped(note)
                progress(test_folds)
        others = [i for i in range(first, len(candidates)) if outcome[i] is None]
        if others:
            scored = score_candidates(
                data,
                shared,
                [trials[i] for i in others],
                protocol=protocol,
                done=progress,
                stop=lambda j, scores, done: cannot_win(others[j], best_possible_auc(scores), done),
            )
            for i, scores in zip(others, scored):
                outcome[i] = scores
        progress.end()
        results = []
        for i in range(len(candidates)):
            row, result = judged(i)
            tried.append(row)
            results.append(result)
        return results

    best: tuple[float, TrainConfig, Scores] | None = None
    candidates = holding(first_round(binary), held, keep=True)
    with stage("auto: event models tried", len(candidates)) as step:
        results = run(candidates, base, step, None, MARGIN_MODEL)
    for candidate, result in zip(candidates, results):
        if result is not None and (best is None or better(result[0], best[0], MARGIN_MODEL)):
            best, name = result, candidate.name
    if best is None:
        raise TrainingError("no candidate of --event-model auto could be trained")
    winner, first = best[1], name
    terms = len(totals.terms if totals is not None else data.terms)
    pairs = settings.tokenizer.word_pairs != "none"
    candidates = holding(second_round(winner, stop_words, terms, pairs=pairs), held, keep=False)
    with stage(f"auto: changes to {first} tried", len(candidates)) as step:
        results = run(candidates, winner, step, best[0], MARGIN_CHANGE)  # each on the winner
    for candidate, result in zip(candidates, results):
        if result is not None and better(result[0], best[0], MARGIN_CHANGE):
            best, name = result, f"{first} {candidate.name}"
    _, training, scores = best
    return Choice(training, None, tuple(tried), name, len(data.labels), folds, scores)


def date_split(
    labels: list[str], times: np.ndarray | None, least: int = DATED
) -> np.ndarray | None:
    """The test fold of auto's split by date, or None unless every label has ``least``
    messages with a date (``times`` (n,), seconds, NaN where unknown): 0 for each label's
    newer half of its dated messages, -1 (trained on) for the rest, the undated included."""
    if times is None:
        return None
    y = np.array(labels, dtype=object)
    dated = ~np.isnan(times)
    fold = np.full(len(y), -1, dtype=np.int64)
    for label in sorted(set(labels)):
        idx = np.flatnonzero(dated & (y == label))
        if len(idx) < least:
            return None
        idx = idx[np.argsort(times[idx], kind="stable")]
        fold[idx[len(idx) // 2 :]] = 0
    return fold


def pooled_auc(scores: Scores) -> float:
    """The ROC AUC of the out-of-fold scores: of the log-odds for two classes, else the mean
    over classes of the AUC of each class's log posterior against the rest."""
    labels = np.array(scores.labels, dtype=object)
    mask = scores.evaluated
    if scores.log_odds is not None:
        return metrics.roc_auc(scores.log_odds[mask], labels[mask] == scores.positive)
    return float(
        np.mean(
            [
                metrics.roc_auc(scores.log_posterior[mask, c], labels[mask] == label)
                for c, label in enumerate(scores.classes)
            ]
        )
    )


#: What a bound on an AUC is raised by before it is compared (`best_possible_auc` counts
#: pairs where `pooled_auc` sums a curve: their last bits may differ).
SLACK = 1e-9


def best_possible_auc(scores: Scores) -> float:
    """The highest `pooled_auc` that out-of-fold ``scores`` of some folds (the others' rows
    not evaluated) can reach once every row is scored: every pair of a positive and a
    negative with a row not scored yet ranked right. For two classes, 1 less the share of
    all the pairs of positives and negatives that the rows scored already rank wrong (a tie
    half); for more, the mean of each class's bound."""
    labels = np.array(scores.labels, dtype=object)
    if scores.log_odds is not None:
        return _best_auc(scores.log_odds, labels == scores.positive, scores.evaluated)
    return float(
        np.mean(
            [
                _best_auc(scores.log_posterior[:, c], labels == label, scores.evaluated)
                for c, label in enumerate(scores.classes)
            ]
        )
    )


def _best_auc(values: np.ndarray, positive: np.ndarray, known: np.ndarray) -> float:
    """1 less the share of all the pairs (positive, negative) that the ``known`` rows'
    ``values`` rank wrong, a tie counting half: pairs are counted as integers."""
    pairs = int(np.count_nonzero(positive)) * int(np.count_nonzero(~positive))
    if not pairs:
        return 1.0
    negatives = np.sort(values[known & ~positive])
    ours = values[known & positive]
    above = negatives.size - np.searchsorted(negatives, ours, "right")
    ties = np.searchsorted(negatives, ours, "right") - np.searchsorted(negatives, ours, "left")
    wrong_twice = 2 * int(above.sum()) + int(ties.sum())
    return 1.0 - wrong_twice / (2 * pairs)


class _Progress:
    """A round's progress in candidates, from the fits done (``fits`` of each of
    ``candidates``: the folds and the split by date; a candidate stopped early has done
    its fits)."""

    def __init__(self, step: Callable[[int], None], candidates: int, fits: int) -> None:
        self.step, self.candidates, self.fits = step, candidates, fits
        self.fitted = self.shown = 0

    def __call__(self, fits: int) -> None:
        self.fitted += fits
        now = min(self.candidates, self.fitted // self.fits)
        if now > self.shown:
            self.step(now - self.shown)
            self.shown = now

    def end(self) -> None:
        self(self.candidates * self.fits)


def _plain(changes: dict[str, Any]) -> dict[str, Any]:
    """The settings a candidate changes, as a model file keeps them (a stop-word list as the
    number of words)."""
    return {key: (len(value) if key == "stop_words" else value) for key, value in changes.items()}
