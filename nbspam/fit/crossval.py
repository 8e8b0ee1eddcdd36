"""Out-of-fold scores: every message scored by a model fitted without it.

Messages come as count rows (`Tokenized`). Each fold's model is fitted from counts (the
totals less the fold's rows), so it is exactly the model `train` would fit on the other
rows. `evaluation` builds its splits on this, and `calibration` the internal
cross-validation that chooses a model's cutoffs and calibration.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from ..core.arguments import whole
from ..core.settings import AUTO, Settings
from ..core.sparse import sp
from ..errors import InputError, TrainingError
from ..models import naive_bayes as nb
from ..models.decision import Rule
from ..models.event_models import event_model
from ..models.fisher import fisher_log_odds_many
from ..models.model import Model, from_counts, kept_columns
from ..models.scoring_forms import FisherForm, LinearForm
from ..text.counts import ClassCounts
from . import metrics

#: The test rows a fold's model scores at a time: their copy is a block's, not the fold's.
SCORED_ROWS = 1024

#: The fold of a row left out of a split: neither trained on nor scored (`score_split`), so
#: that a part of the rows is cross-validated without a copy of them.
LEFT_OUT = -2


class Tokenized(NamedTuple):
    """Labelled messages as count rows: ids (n,), labels (n,), X (n, d), terms (d,) sorted;
    ``copies`` (n,), where given, numbers the distinct messages (rows of one message share
    a number), so that a model counts a repeated message once, as `train` does; ``times``
    (n,), where given, each message's Date in seconds (NaN where it has none), as `train`
    reads them to measure drift."""

    ids: list[str]
    labels: list[str]
    X: sp.csr_matrix
    terms: list[str]
    copies: np.ndarray | None = None
    times: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Scores:
    """Out-of-sample scores of every evaluated message.

    Rows are the messages in input order, ``ids`` naming each (a sequence: a table's row
    names are made when read). ``fold`` (n,) is the test fold that scored each
    message, -1 for a message used only for training, `LEFT_OUT` for one neither trained
    on nor scored (the score rows of both are NaN).
    ``log_posterior`` (n, C) has its columns in ``classes`` order; ``log_odds`` (n,) is
    log P(positive | x) - log P(negative | x) for two-class models, else None.
    For two-class models each test fold k gets the decision rule `train` would fit on its
    training part (``rules[k]``: cutoffs and Platt calibration from an internal
    cross-validation of that part alone, `decision_rule`); ``verdicts`` (n,) and
    ``calibrated`` (n,) are what `predict` with that model would print. ``protocol``
    describes the split; ``seconds`` the time spent per stage.
    """

    ids: Sequence[str]
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


def cross_validate_matrix(
    data: Tokenized,
    settings: Settings,
    *,
    folds: int = 5,
    seed: int = 42,
    tokenize_seconds: float | None = None,
    totals: ClassCounts | None = None,
    shared: Folds | None = None,
) -> Scores:
    """Stratified k-fold cross-validation of tokenized messages: each scored by the model
    of the other folds.

    Folds come from `metrics.stratified_folds` (labels, ``folds``, ``seed``), so they depend
    only on the labels in input order. Raises InputError when a label has fewer messages
    than folds. ``totals`` as for `score_split`; ``shared``, the `Folds` of these rows,
    ``folds`` and ``seed``, where several settings are cross-validated on them.
    """
    fold, protocol = stratified_split(data.labels, folds, seed)
    return score_split(
        data,
        fold,
        settings,
        protocol=protocol,
        tokenize_seconds=tokenize_seconds,
        totals=totals,
        shared=shared,
    )


def stratified_split(labels: Sequence[str], folds: int, seed: int) -> tuple[np.ndarray, dict]:
    """(fold of each message, the protocol) of stratified k-fold cross-validation; folds
    from `metrics.stratified_folds`, so they depend only on the labels in input order."""
    folds = whole("--folds", folds, 2)
    _check_labels(labels, folds)
    fold = metrics.stratified_folds(np.array(labels, dtype=object), folds, seed)
    protocol = {
        "method": "cross-validation",
        "folds": folds,
        "seed": seed,
        "description": f"stratified {folds}-fold cross-validation (seed {seed})",
    }
    return fold, protocol


def _check_labels(labels: Sequence[str], folds: int) -> None:
    """InputError unless there are two labels or more, each with at least ``folds`` messages."""
    counts = Counter(labels)
    if len(counts) < 2:
        raise InputError(
            f"need messages of at least two labels to evaluate, found only {', '.join(sorted(counts)) or 'none'}"
        )
    for label, count in sorted(counts.items()):
        if count < folds:
            raise InputError(
                f"label {label!r} has {count} message(s), fewer than the {folds} folds: "
                f"use fewer --folds or more data"
            )


def score_split(
    data: Tokenized,
    fold: np.ndarray,
    settings: Settings | Mapping[int, Settings],
    *,
    protocol: dict[str, Any],
    tokenize_seconds: float | None = None,
    totals: ClassCounts | None = None,
    shared: Folds | None = None,
) -> Scores:
    """Score each test fold k (``fold == k``) with a model fitted on all other rows, with
    the ``settings`` (or ``settings[k]``: each fold's own).

    Rows with ``fold == -1`` are only ever trained on, rows with `LEFT_OUT` neither (their
    scores stay NaN, as those of the rows only trained on). ``totals``, the counts of a larger
    set of messages that holds these rows, make each fold's model the one of all those
    messages but the fold's. ``shared`` (`Folds` of the same rows, folds and totals) keeps
    what does not depend on the settings from one call to the next.
    """
    seconds = {} if tokenize_seconds is None else {"tokenize": tokenize_seconds}
    clock = time.perf_counter()
    if shared is None:
        shared = Folds(data, np.asarray(fold, dtype=np.int64), totals)
    seconds["train"] = time.perf_counter() - clock
    (scores,) = score_candidates(data, shared, [settings], protocol=protocol, seconds=seconds)
    if isinstance(scores, TrainingError):
        raise scores
    assert isinstance(scores, Scores)
    return scores


class Stopped(NamedTuple):
    """A setting whose scoring `score_candidates` stopped before its last fold, and why."""

    note: str


def score_candidates(
    data: Tokenized,
    shared: Folds,
    trials: Sequence[Settings | Mapping[int, Settings]],
    *,
    protocol: dict[str, Any] | None = None,
    seconds: dict[str, float] | None = None,
    done: Callable[[int], None] | None = None,
    stop: Callable[[int, Scores, int], str | None] | None = None,
) -> list[Scores | TrainingError | Stopped]:
    """The scores of each of several settings (``trials``, each one `Settings` or one per
    fold) on the folds of ``shared``, as `score_split` gives each alone, to the bit; or the
    `TrainingError` that fitting it on some fold raised (a mask that leaves no term).

    A fold at a time, then each setting: what does not depend on the settings is made once
    per fold for all of them (the counts of the rest, the first model, the columns each
    vocabulary filter keeps: `FoldModels`), and only each setting's own scoring form (one
    at a time, the size of the model) and its products with the test rows (a block at a
    time) are made per setting.
    ``done(fits)`` is called after each fold with the settings scored on it (and those
    stopped, with the folds they leave out). ``stop(i, scores, folds)``, after each fold
    but the last, may stop setting i: given its scores of the ``folds`` done so far (the
    other rows' ``fold`` -1, a row `LEFT_OUT` left as it is), it returns why (the setting's
    result is then `Stopped`), or None to go on; it is for folds that leave no row out
    (`selection`'s bound on a setting's AUC counts the pairs of every row)."""
    fold = shared.fold
    labels = np.array(data.labels, dtype=object)
    seconds = dict(seconds or {})
    seconds.setdefault("train", 0.0)
    seconds["score"] = 0.0
    # not np.unique: numpy 2's imports numpy.ma on first use, 7 ms of training's serial end
    test_folds = sorted(set(fold[fold >= 0].tolist()))
    if not test_folds:
        raise InputError("no messages to evaluate: every message is for training")
    results: list[_Trial | TrainingError | Stopped] = [_Trial() for _ in trials]
    for step, k in enumerate(test_folds):
        models = FoldModels(shared.rest(k), shared.memo)
        blocks = _Blocks(data.X, shared.test(k))
        fits = 0
        for i, trial in enumerate(trials):
            result = results[i]
            if not isinstance(result, _Trial):
                continue
            clock = time.perf_counter()
            fold_settings = trial if isinstance(trial, Settings) else trial[k]
            fits += 1
            try:
                model = models.model(fold_settings)
            except TrainingError as exc:
                results[i] = exc
                continue
            _check_test_labels(set(labels[blocks.test]), model.labels)
            fitted = time.perf_counter()
            seconds["train"] += fitted - clock
            result.begin(model, len(labels))
            form, wide = widened(model.form, blocks.width)
            # the model let go of before its rows are scored and the next is made; a linear
            # form's arrays of the kept terms too (its weights over the vocabulary score the
            # rows), where a Fisher form is kept and scores them with its clues' places
            del model
            result.score(form, wide, blocks)
            del form, wide
            seconds["score"] += time.perf_counter() - fitted
        del models, blocks
        left = len(test_folds) - step - 1
        if stop is not None and left:
            so_far = np.where(fold <= k, fold, -1)  # the folds are scored in order
            for i, result in enumerate(results):
                if isinstance(result, _Trial):
                    note = stop(i, result.scores(data, so_far, {}, {}), step + 1)
                    if note is not None:
                        results[i], fits = Stopped(note), fits + left
        if done is not None:
            done(fits)
    return [
        result.scores(data, fold, dict(seconds), dict(protocol or {}))
        if isinstance(result, _Trial)
        else result
        for result in results
    ]


#: The training settings `model.kept_columns` reads: settings alike in these keep the same
#: columns of the same counts.
FILTERS = ("stop_words", "score_pairs", "select", "max_features", "min_count", "max_df")


class FoldModels:
    """The models of one fold (fitted on the counts ``rest``) for several settings, each
    made of what its settings change: the first by `from_counts` (every check of the
    counts and settings), the others as that model with their own training settings (where
    the labels, prior and tokenizer that `from_counts` checks are the same), their scoring
    forms from the columns each vocabulary filter keeps (`FILTERS`), found once for the
    settings that follow one another with the same filter, and what the event models
    derive from the counts alone (`EventModel.form`'s ``memo``). The same models, to the
    bit, as `from_counts` makes of each. A ``memo`` given (`Folds.memo`) is the one of the
    fold before: what it holds is made anew from these counts, in its arrays."""

    def __init__(self, rest: ClassCounts, memo: dict | None = None) -> None:
        self.rest = rest
        self.first: tuple[Settings, Model] | None = None
        self.kept: dict[tuple, np.ndarray] = {}
        self.memo: dict = {} if memo is None else memo
        for name, (_, value) in self.memo.items():  # the other counts': their arrays alone
            self.memo[name] = None, value

    def model(self, settings: Settings) -> Model:
        """The model of ``settings`` on the counts, its scoring form made; raises the
        `TrainingError` of `from_counts`."""
        cfg = settings.training
        if self.first is None or not self._alike(settings):
            model = from_counts(self.rest, settings, sorted_terms=True)
            if self.first is None:  # kept without its form: a form is the size of the model
                self.first = settings, dataclasses.replace(model)
            return model
        first = self.first[1]
        model = dataclasses.replace(first, training=cfg.replace(positive=first.training.positive))
        key = tuple(getattr(cfg, name) for name in FILTERS)
        if key not in self.kept:  # the latest filter's alone: settings alike come together
            self.kept.clear()  # let go of before the next is made
            kept = kept_columns(model)  # held while the filter lasts: as int32 where it fits
            self.kept[key] = kept.astype(np.int32) if len(model.terms) < 2**31 else kept
        form = event_model(cfg.event_model).form(model, self.kept[key], self.memo)
        if not form.kept.size:  # no term left: the error `from_counts` raises
            return from_counts(self.rest, settings, sorted_terms=True)
        model.__dict__["form"] = form  # the cached property's value
        return model

    def _alike(self, settings: Settings) -> bool:
        """Whether ``settings`` differ from the first model's only where a model of the same
        counts may: not in its tokenizer, labels, prior, nor as auto."""
        assert self.first is not None
        given, cfg = self.first[0], settings.training
        return (
            settings.tokenizer == given.tokenizer
            and (cfg.positive, cfg.prior) == (given.training.positive, given.training.prior)
            and cfg.event_model != AUTO
        )


class _Trial:
    """The scores of one setting, filled in a fold at a time (`score_candidates`), and the
    classes and positive class of its first fold's model (not the model: the forms of
    several settings would be held at once). Of a two-class model only the log-odds are
    kept: its log posteriors are a function of them alone (`naive_bayes.log_posterior_two`,
    element by element: the same values made at the end), a third of the memory."""

    def __init__(self) -> None:
        self.classes: tuple[str, ...] = ()
        self.positive: str | None = None
        self.row = 0  # the positive class's column of a two-class model's log posteriors
        self.log_post: np.ndarray | None = None
        self.log_odds: np.ndarray | None = None

    def begin(self, model: Model, n: int) -> None:
        """Note the classes of the first fold's ``model`` (of ``n`` rows in all)."""
        if not self.classes:
            self.classes, self.positive = model.labels, model.positive
            if model.is_binary:
                self.log_odds, self.row = np.full(n, np.nan), model.positive_index
            else:
                self.log_post = np.full((n, len(model.labels)), np.nan)

    def score(self, form: LinearForm | FisherForm, wide: np.ndarray, blocks: _Blocks) -> None:
        """Score the fold's test rows (``blocks``) with its model's form `widened`."""
        for block in blocks:
            F = block.presence if form.binary else block.counts
            log_post, odds = predict_wide(form, wide, F)
            if self.log_odds is not None:
                self.log_odds[block.rows] = odds
            else:
                self.log_post[block.rows] = log_post
            del block, F  # let go of before the next block is copied

    def scores(
        self, data: Tokenized, fold: np.ndarray, seconds: dict[str, float], protocol: dict
    ) -> Scores:
        log_post = self.log_post
        if self.log_odds is not None:  # the rows scored (the others' stay NaN)
            scored = ~np.isnan(self.log_odds)
            log_post = np.full((scored.size, 2), np.nan)
            log_post[scored] = nb.log_posterior_two(self.log_odds[scored], self.row)
        return Scores(
            ids=tuple(data.ids),
            labels=tuple(data.labels),
            classes=self.classes,
            log_posterior=np.zeros(0) if log_post is None else log_post,
            log_odds=self.log_odds,
            positive=self.positive,
            fold=fold,
            seconds=seconds,
            protocol=protocol,
        )


class _Blocks:
    """The test rows of a fold, `SCORED_ROWS` at a time (`_Block`), copied again at each
    pass (for each setting): their copy is a block's, not the fold's."""

    def __init__(self, X: sp.csr_matrix, test: np.ndarray) -> None:
        self.X, self.test, self.width = X, test, X.shape[1]

    def __iter__(self) -> Iterator[_Block]:
        for start in range(0, self.test.size, SCORED_ROWS):
            yield _Block(self.X, self.test[start : start + SCORED_ROWS])


class _Block:
    """Test rows (their numbers, ``rows``) copied: their ``counts``, and their `presence`
    (f(x) = [x > 0]) when first needed."""

    def __init__(self, X: sp.csr_matrix, rows: np.ndarray) -> None:
        self.rows, self.counts = rows, X[rows]

    @cached_property
    def presence(self) -> sp.csr_matrix:
        X = self.counts
        # ones of one byte: a product takes them as the weights' floats, 1.0 times each
        return sp.csr_matrix((np.ones(X.nnz, np.uint8), X.indices, X.indptr), shape=X.shape)


class Folds:
    """What the cross-validations of several settings on the same rows and folds share,
    computed once: the class counts of all the rows but those `LEFT_OUT` (or the
    ``totals`` they are a sample of), and the counts of each test fold's rows (over the
    terms they hold).

    A fold's model is fitted from the counts of the rest: the totals less the fold's rows
    (`rest`), integers, so it is exactly the model fitted on the other rows, and only the
    fold's rows are counted, once. The rest's counts of each fold are written into one
    pair of arrays, which each call of `rest` reuses (and so may another `Folds` of the same
    rows, given as ``like``). Counts are kept in the smallest integers that hold them (the
    rows' own sums and the folds' as uint16 where they fit, the rest's as int32): the event
    models take them as floats, or sum them as int64, so the fold models are the same to
    the bit.
    """

    def __init__(
        self,
        data: Tokenized,
        fold: np.ndarray,
        totals: ClassCounts | None,
        *,
        like: Folds | None = None,
    ) -> None:
        self.data = data
        self.fold = np.asarray(fold, dtype=np.int64)
        labels = np.array(data.labels, dtype=object)
        left_out = self.fold == LEFT_OUT
        if totals is not None and left_out.any():
            raise ValueError("rows are left out only of the folds' own counts, not of totals")
        classes = sorted(set(labels[~left_out].tolist()) if totals is None else totals.labels)
        C = len(classes)
        self.y = np.searchsorted(np.array(classes, dtype=object), labels).astype(np.int64)
        if totals is None:
            # the rows left out summed as one more class, whose sums are then dropped: the
            # same sums as those of a copy of the other rows, and no copy of them
            extra = int(left_out.any())
            self.y[left_out] = C
            class_count, *sums = nb.class_counts(data.X, self.y, C + extra, narrow=True)
            class_count, sums = class_count[:C], [a[:C] for a in sums]
            kind = _smallest(int(sums[0].max(initial=0)))
            term_count, doc_count = (a.astype(kind) for a in sums)
            del sums
            self.counts = ClassCounts(
                tuple(classes), data.terms, class_count, term_count, doc_count
            )
        else:  # the totals' labels in sorted order
            self.counts = totals.in_order([totals.labels.index(c) for c in classes])
        #: the type of the rest's counts: int32 where the totals fit
        self.kind = np.int32 if self.counts.term_count.max(initial=0) < 2**31 else np.int64
        self._held: dict[int, tuple[np.ndarray, ...]] = {}
        # the arrays `rest` writes into, by shape and type; shared with ``like``, another
        # Folds whose fold models are never in use at the same time as these
        self._buffers: dict[tuple, tuple[np.ndarray, np.ndarray]] = (
            {} if like is None else like._buffers
        )
        #: what the event models derive from a fold's counts (`FoldModels`), its arrays
        #: written into again at the next fold (of these Folds or of ``like``'s)
        self.memo: dict = {} if like is None else like.memo

    def rest(self, k: int) -> ClassCounts:
        """The counts of every row but fold k's (and, where rows repeat a message, but the
        repeats of the rest's own messages: a model counts a message once), without the
        classes left with no row.

        The counts are written into the same two arrays at every call (a fold's model is
        fitted and done with before the next: `score_split`), so that the folds of every
        setting tried make no new arrays the size of the model, nor leave the allocator
        with holes of that size between them."""
        if k not in self._held:
            data, fold = self.data, self.fold
            held = fold == k
            if data.copies is not None:  # a message repeated in the training part counts once
                held = held | repeats(data.copies, (fold != k) & (fold != LEFT_OUT))
            self._held[k] = self._sums(np.flatnonzero(held))
        class_less, cols, term_less, doc_less = self._held[k]
        totals = self.counts
        shape = (totals.term_count.shape, self.kind)
        if shape not in self._buffers:  # one pair of arrays for every fold and every setting
            self._buffers.clear()
            self._buffers[shape] = np.empty(shape[0], self.kind), np.empty(shape[0], self.kind)
        term_count, doc_count = self._buffers[shape]
        np.copyto(term_count, totals.term_count)
        np.copyto(doc_count, totals.doc_count)
        for row in range(len(totals.labels)):  # a row at a time: 3x quicker than [:, cols]
            term_count[row, cols] -= term_less[row]
            doc_count[row, cols] -= doc_less[row]
        rest = ClassCounts(
            totals.labels, totals.terms, totals.class_count - class_less, term_count, doc_count
        )
        return rest.without_empty_classes()

    def _sums(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """(class_count, cols, term_count, doc_count): the sums of the ``rows`` (numbers)
        over the columns they hold (``cols``, int32), not the whole vocabulary, in the
        smallest integers that hold them (a quarter of int64's memory for most folds, whose
        sums are kept for every setting). Taken `nb.SUMMED` entries of the rows at a time,
        twice (their columns, then their sums): a fold's temporaries are a block's, not
        the fold's rows copied, nor the model's size."""
        X, d = self.data.X, self.data.X.shape[1]
        ends = np.cumsum(X.indptr[rows + 1] - X.indptr[rows])
        bounds = np.searchsorted(
            ends, np.arange(nb.SUMMED, ends[-1] if ends.size else 0, nb.SUMMED)
        )
        blocks = np.split(rows, sorted(set(bounds.tolist())))
        held_cols = np.zeros(d, bool)
        for block in blocks:
            held_cols[X[block].indices] = True
        cols = np.flatnonzero(held_cols).astype(np.int32)
        del held_cols
        local = np.zeros(d, np.int32)
        local[cols] = np.arange(cols.size, dtype=np.int32)
        C = len(self.counts.labels)
        class_count = np.zeros(C, np.int64)
        # in the rest's integers: the rows' sums are at most the totals'
        term_count, doc_count = np.zeros((2, C, cols.size), self.kind)
        for block in blocks:
            part = X[block]
            own = sp.csr_matrix(
                (part.data, local[part.indices], part.indptr), (block.size, cols.size)
            )
            sums = nb.class_counts(own, self.y[block], C, narrow=True)
            class_count += sums[0]
            term_count += sums[1]
            doc_count += sums[2]
            del part, own, sums
        kind = _smallest(int(term_count.max(initial=0)))
        return class_count, cols, term_count.astype(kind), doc_count.astype(kind)

    def test(self, k: int) -> np.ndarray:
        """The test rows of fold k (their numbers)."""
        return np.flatnonzero(self.fold == k)


def _smallest(top: int) -> type:
    """The smallest of uint16, int32 and int64 that holds the counts up to ``top``, the
    largest count of a term (at least its documents')."""
    return np.uint16 if top < 2**16 else np.int32 if top < 2**31 else np.int64


def predict_rows(
    form: LinearForm | FisherForm, X: sp.csr_matrix
) -> tuple[np.ndarray, np.ndarray | None]:
    """`model.predict_matrix` of count rows X (n, d) over the whole vocabulary of the form's
    model, rather than over its kept terms (`predict_wide`)."""
    if form.binary:  # f(x) = [x > 0]: presence, over the same indices
        X = sp.csr_matrix((np.ones(X.nnz), X.indices, X.indptr), shape=X.shape)
    return predict_wide(*widened(form, X.shape[1]), X)


def widened(form: LinearForm | FisherForm, d: int) -> tuple[LinearForm | FisherForm, np.ndarray]:
    """What `predict_wide` scores rows over the whole vocabulary of the form's model (d
    terms) with: a linear form's weights over it, zero where a term is not kept ((d,)
    log-odds weights, or (C, d) coefficients of more classes), with the form without its
    arrays of the kept terms (which may then be let go of); a Fisher form whole, with each
    term's place among its clues (d,), -1 where a term is not one."""
    if isinstance(form, FisherForm):
        places = np.full(d, -1, np.int32 if form.kept.size < 2**31 else np.int64)
        places[form.kept] = np.arange(form.kept.size, dtype=places.dtype)
        return form, places
    if form.weights is not None:  # two classes: the log-odds weights alone
        wide = np.zeros(d)
        wide[form.kept] = form.weights
    else:
        wide = np.zeros((form.coef.shape[0], d))
        wide[:, form.kept] = form.coef
    weights = None if form.weights is None else _DROPPED
    return dataclasses.replace(form, kept=_DROPPED, coef=_DROPPED, weights=weights), wide


#: What a `widened` form holds in place of its arrays of the kept terms, dropped: such a
#: form is only for `predict_wide`, beside its weights over the vocabulary.
_DROPPED = np.zeros(0)


def predict_wide(
    form: LinearForm | FisherForm, wide: np.ndarray, F: sp.csr_matrix
) -> tuple[np.ndarray, np.ndarray | None]:
    """`model.predict_matrix` of rows F over the whole vocabulary, f already applied
    (presence where the form is binary), with what `widened` made of the form (``wide``: a
    linear form's weights over the vocabulary, a Fisher form's clues' places): the rows are
    not copied column by column (a copy, and scipy's temporaries, several times the size
    of the rows). The same values to the bit: a row's sum takes its terms in the same
    order, and a term that is not kept adds 0.0 (`clue_sums`: nothing)."""
    if isinstance(form, FisherForm):
        log_f, log_not_f, clues = clue_sums(form, wide, F)
        log_odds = fisher_log_odds_many(log_f, log_not_f, clues)
        return nb.log_posterior_two(log_odds, form.positive), log_odds
    if form.weights is not None:
        return dataclasses.replace(form, weights=wide).predict(F)
    return dataclasses.replace(form, coef=wide).predict(F)


def clue_sums(
    form: FisherForm, places: np.ndarray, F: sp.csr_matrix
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's sums of ln f and of ln(1 - f) over its clues, and its number of clues, of
    presence rows F (every entry 1, as a Fisher form scores), ``places`` being each term's
    place among the form's clues (-1: not one; `widened`): the product of F and the clues'
    (ln f, ln(1 - f), 1) over the vocabulary, to the bit. Each row's clues are added one by
    one from 0.0 in the order of its entries (`np.bincount`), as scipy's product adds each
    entry's 1.0 x ln f, and an entry that is not a clue adds 0.0 there (x + 0.0 is x: a sum
    from +0.0 is never -0.0)."""
    n = F.shape[0]
    if F.shape[1] != places.size:
        raise ValueError(f"rows of {F.shape[1]} terms scored by clues of {places.size}")
    at = places[F.indices]
    hit = np.flatnonzero(at >= 0)
    at = at[hit]
    rows = np.repeat(np.arange(n, dtype=np.int32), np.diff(F.indptr))[hit]  # of each clue
    return (
        np.bincount(rows, form.log_f[at], n).astype(np.float64, copy=False),
        np.bincount(rows, form.log_not_f[at], n).astype(np.float64, copy=False),
        np.bincount(rows, minlength=n),
    )


def _check_test_labels(test_labels: set[str], model_labels: Sequence[str]) -> None:
    """InputError when the test rows have labels the model was not trained on."""
    unknown = sorted(test_labels - set(model_labels))
    if unknown:
        raise InputError(
            f"the test messages have label(s) {unknown} that the training messages lack "
            f"(training labels: {list(model_labels)})"
        )


def repeats(copies: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Mask (n,) of the rows among ``rows`` (a mask) that repeat an earlier one of them:
    the same message again (``copies``, `Tokenized`)."""
    chosen = np.flatnonzero(rows)
    _, first = np.unique(copies[chosen], return_index=True)
    out = rows.copy()
    out[chosen[first]] = False
    return out


def training_rows(data: Tokenized, rows: np.ndarray) -> np.ndarray:
    """The indices of the rows (a mask) that a model of them counts: each message once."""
    if data.copies is not None:
        rows = rows & ~repeats(data.copies, rows)
    return np.flatnonzero(rows)


def subset(data: Tokenized, rows: np.ndarray) -> Tokenized:
    """The given rows of ``data``."""
    return Tokenized(
        [data.ids[i] for i in rows], [data.labels[i] for i in rows], data.X[rows], data.terms
    )
