"""Training a table model as `train` does: auto's choice of how to model the continuous
columns by internal cross-validation, and the decision rule.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.progress import counted
from ..models.columns import Categorical
from ..models.table_model import (
    Column,
    TableModel,
    TableSettings,
    TextStats,
    bin_edges,
    category_counts,
    check_range,
    classes_of,
    column_counts,
    column_numbers,
    empty_model,
    empty_stats,
    fit_table,
    given_kinds,
    number_categories,
    subset,
)
from ..text.tables import DEFAULT_BINS, Table, mostly_numbers_note, read_table

# --------------------------------------------------------------------------------------------
# Choosing how to model the continuous columns (--event-model auto), and cross-validation
# --------------------------------------------------------------------------------------------

AUTO_FOLDS = 5
AUTO_SEED = 42


def treatments(
    kinds: dict[str, str], settings: TableSettings, given: dict[str, str]
) -> dict[str, TableSettings]:
    """The ways auto tries for the continuous columns (those detected as numbers that are
    not all 0 or 1: of kind gaussian in ``kinds`` and not set by --column, ``given``):
    Gaussian; quantile bins, zero plus quartiles; Bernoulli on x > 0. Each names the kind
    of every column, so that the columns are detected once. None where there is no such
    column, or --bins says how."""
    continuous = [n for n, k in kinds.items() if k == "gaussian" and n not in given]
    if not continuous or settings.bins is not None:
        return {}
    as_bernoulli = {**kinds, **dict.fromkeys(continuous, "bernoulli")}
    return {
        "gaussian": dataclasses.replace(settings, kinds=kinds, bins=None),
        "quantile bins (zero + quartiles)": dataclasses.replace(
            settings, kinds=kinds, bins=DEFAULT_BINS, binning="quantile"
        ),
        "bernoulli (x > 0)": dataclasses.replace(settings, bins=None, kinds=as_bernoulli),
    }


def resolved(model: TableModel, settings: TableSettings) -> TableSettings:
    """``settings`` naming the kind of every column as ``model`` has it, so that models of
    parts of the table need not detect the kinds again."""
    binned = "gaussian" if settings.bins is not None else "binned"
    kinds = {c.name: binned if c.edges is not None else c.kind for c in model.columns}
    return dataclasses.replace(settings, kinds=kinds)


class FoldStatistics:
    """The statistics of each fold's rows of a table, per column and kind, each counted once
    and shared by every model of all folds but one (auto's candidates, the internal
    cross-validation): such a model is the whole table's statistics less its fold's, exact
    sums and counts that equal fitting the model on the other folds. A binned column is the
    exception: its edges are those of the other folds' values, so it is counted per fold."""

    def __init__(self, table: Table, fold: np.ndarray, share_scores: bool = False) -> None:
        self.table, self.fold = table, fold
        self.folds = np.unique(fold[fold >= 0]).tolist()
        self.rows = {k: np.flatnonzero(fold == k) for k in self.folds}
        self.parts = {k: subset(table, rows) for k, rows in self.rows.items()}
        # each row's place among the folds' rows laid end to end, a row of no fold that of a
        # row of zeros after them: the folds' scores are put in place by one `take`, which
        # costs a quarter of an assignment to the rows of each fold
        laid = np.concatenate([self.rows[k] for k in self.folds])
        self.place = np.full(len(fold), len(laid), dtype=np.intp)
        self.place[laid] = np.arange(len(laid))
        self.shared_scores: dict[tuple[Any, ...], np.ndarray] | None = {} if share_scores else None
        """Per column modelled alike by every setting: its out-of-fold log-likelihoods (kept
        with ``share_scores``, for several settings)."""
        self.counted: dict[tuple[str, str], list[Any]] = {}
        """Per column and kind: the statistics of all the folds, then those of each fold."""
        self.models: dict[int, dict[int, TableModel]] = {}
        """Per settings (kept in `empty`), its `fold_models`."""
        self.empty: dict[int, tuple[TableSettings, TableModel]] = {}
        """Per settings (kept, so that its id stays its own), its model with no row counted."""
        self.classes: tuple[tuple[str, ...], np.ndarray] | None = None
        """A model's labels, and each row's class among them (`classes_of`)."""

    def fold_models(self, settings: TableSettings, path: str) -> dict[int, TableModel]:
        """Per fold k, the `model` of ``settings`` without it (made once per settings)."""
        if id(settings) not in self.models:
            self.models[id(settings)] = {k: self.model(settings, k, path) for k in self.folds}
        return self.models[id(settings)]

    def model(self, settings: TableSettings, k: int, path: str) -> TableModel:
        """The model of ``settings`` fitted on the rows of every fold but ``k``."""
        if id(settings) not in self.empty:
            self.empty[id(settings)] = (settings, empty_model(self.table, settings, path))
        first = self.empty[id(settings)][1]
        model = dataclasses.replace(
            first, columns=[dataclasses.replace(c) for c in first.columns], class_count=[]
        )
        ys = {j: classes_of(model, part) for j, part in self.parts.items()}
        C = len(model.labels)
        counts = [np.bincount(y, minlength=C) for y in ys.values()]
        whole = np.sum(counts, axis=0)
        model.class_count = (whole - counts[self.folds.index(k)]).tolist()
        for column in model.columns:
            if column.kind == "ignore":
                continue
            if column.edges is not None:
                column.edges, column.zero_bin, column.stats = self._binned(
                    model, column, k, settings
                )
                continue
            key = (column.name, column.kind)
            if key not in self.counted:
                parts = [
                    column_counts(model, column_like(column, C), part, ys[j], +1)
                    for j, part in self.parts.items()
                ]
                whole = parts[0]
                for other in parts[1:]:
                    whole = _combine(whole, other, +1)
                self.counted[key] = [whole, *parts]
            whole, *parts = self.counted[key]
            column.stats = _combine(whole, parts[self.folds.index(k)], -1)
        return model

    def scored(self, models: dict[int, TableModel], j: int, settings: TableSettings) -> np.ndarray:
        """The out-of-fold log-likelihoods (n, C) of column ``j`` of ``models`` (each fold's,
        of ``settings``): each fold's rows scored by its model, other rows 0. A column that
        does not depend on how the continuous columns are modelled (categorical, Bernoulli,
        text, no bins) is scored once for all settings."""
        first = next(iter(models.values()))
        column = first.columns[j]
        key = None
        alike = column.kind in ("categorical", "bernoulli", "text") and column.edges is None
        if alike and self.shared_scores is not None:
            tokenizer = settings.tokenizer if column.kind == "text" else None
            key = (column.name, column.kind, settings.alpha, tokenizer)
            if key in self.shared_scores:
                return self.shared_scores[key]
        parts = []
        for k in self.folds:
            model = models[k]
            (_, part), *_ = model.column_parts(self.parts[k], Counter(), [model.columns[j]])
            parts.append(part)
        parts.append(np.zeros((1, len(first.labels))))
        out = np.concatenate(parts).take(self.place, axis=0)
        if key is not None and self.shared_scores is not None:
            self.shared_scores[key] = out
        return out

    def _binned(
        self, model: TableModel, column: Column, k: int, settings: TableSettings
    ) -> tuple[list[float], bool, Any]:
        x = column_numbers(column, self.table)
        train = self.fold != k  # rows without a label too, as fitting on them would
        edges, zero_bin = bin_edges(x[train], settings.bins or DEFAULT_BINS, settings.binning)
        binned = Column(column.name, column.kind, edges=edges, zero_bin=zero_bin)
        rows = np.flatnonzero(train & (self.fold >= 0))
        if self.classes is None or self.classes[0] != model.labels:  # once for every column
            self.classes = model.labels, classes_of(model, self.table)
        ys = self.classes[1][rows]
        names, codes = number_categories(binned, x[rows])
        return edges, zero_bin, category_counts(names, codes, ys, len(model.labels))


def column_like(column: Column, classes: int) -> Column:
    return Column(column.name, column.kind, empty_stats(column.kind, classes), column.edges)


def _combine(a: Any, b: Any, sign: int) -> Any:
    """Statistics a + sign * b, with the categories and terms no row holds any more left out
    (as a model fitted without those rows never saw them)."""
    if isinstance(a, TextStats):
        terms = {t: list(v) for t, v in a.terms.items()}
        for t, v in b.terms.items():
            terms[t] = [x + sign * y for x, y in zip(terms.get(t, [0] * len(v)), v)]
        rows = [x + sign * y for x, y in zip(a.rows, b.rows)]
        return TextStats(rows, {t: v for t, v in terms.items() if any(v)})
    out = a.combine(b, sign)
    if isinstance(out, Categorical) and not out.fixed:
        keep = [j for j in range(len(out.categories)) if any(row[j] for row in out.counts)]
        if len(keep) < len(out.categories):
            out = Categorical(
                [out.categories[j] for j in keep], [[row[j] for j in keep] for row in out.counts]
            )
    return out


def fold_contributions(
    table: Table,
    settings: TableSettings,
    fold: np.ndarray,
    path: str,
    shared: FoldStatistics | None = None,
) -> tuple[np.ndarray, str | None]:
    """Out-of-fold joint log-likelihoods: (J (n, C), the log prior plus every scored
    column's log-likelihood added in column order, one column held at a time; the positive
    label or None for more than two classes). Each row is scored by the model of the other
    folds (rows of fold -1 are left at 0). ``shared``: the statistics of the folds, counted
    once for several settings, and the out-of-fold log-likelihoods of the columns every
    setting models alike (categorical, Bernoulli, text), scored once."""
    shared = shared or FoldStatistics(table, fold)
    models = shared.fold_models(settings, path)
    first = next(iter(models.values()))
    n, C = len(table), len(first.labels)
    bias = np.zeros((n, C))
    for k, model in models.items():
        bias[shared.rows[k]] = model.log_prior()
    total = None
    for j, column in enumerate(first.columns):
        if column.kind != "ignore":
            part = shared.scored(models, j, settings)
            total = part.copy() if total is None else total.__iadd__(part)
    jll = bias + (np.zeros((n, C)) if total is None else total)
    return jll, str(first.positive) if first.is_binary else None


def log_odds_of(jll: np.ndarray, labels: Sequence[str], positive: str) -> np.ndarray:
    """The log-odds (n,) of the positive label of joint log-likelihoods (n, 2)."""
    p = list(labels).index(positive)
    return jll[:, p] - jll[:, 1 - p]


def log_loss(jll: np.ndarray, y: np.ndarray) -> float:
    """The mean log-loss (natural log) of the posteriors of joint log-likelihoods (n, C)
    for the true classes ``y`` (n,), column indices."""
    return float(np.mean(logsumexp_rows(jll) - jll[np.arange(len(y)), y]))


def logsumexp_rows(a: np.ndarray) -> np.ndarray:
    """log sum_c exp(a_ic) (n,) of each row of a (n, C): the same operations as
    ``scipy.special.logsumexp(a, axis=1)`` (the largest term of a row taken out of the sum,
    and its count; the plain sum of exponentials where that is not finite), so the same
    bits, without its checks and copies (auto computes it once per trial)."""
    if a.shape[1] == 2:
        return _logsumexp_two(np.ascontiguousarray(a[:, 0]), np.ascontiguousarray(a[:, 1]))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        top = a.max(axis=1, keepdims=True)
        at_top = a == top
        m = at_top.sum(axis=1, keepdims=True, dtype=a.dtype)
        s = np.exp(np.where(at_top, -np.inf, a) - top).sum(axis=1, keepdims=True)
        s = np.where(s == 0, s, s / m)
        out = (np.log1p(s) + np.log(m) + top)[:, 0]
        finite = np.isfinite(out)
        if not finite.all():
            direct = np.log(np.exp(a).sum(axis=1))
            out = np.where(finite, out, direct)
    return out


def _logsumexp_two(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """`logsumexp_rows` of the rows (x_i, y_i) of two columns, each result the same bits as
    its operations give: a reduction over a row of two is numpy's first value plus the
    second, and the term of the largest is left out, so the sum is exp(smaller - larger),
    or 0 where the two are equal (then counted twice: + ln 2, where it is + ln 1 = 0.0
    else). Computed elementwise on the columns, in place: a tenth of the time of numpy's
    reductions over rows of two."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        top = np.maximum(x, y)
        s = np.minimum(x, y)
        s -= top
        np.exp(s, out=s)
        tie = x == y
        s[tie] = 0.0
        out = np.log1p(s)
        out += np.where(tie, np.log(2.0), 0.0)
        out += top
        finite = np.isfinite(out)
        if not finite.all():
            direct = np.log(np.exp(x) + np.exp(y))
            out = np.where(finite, out, direct)
    return out


_TREATMENT_KIND = {
    "gaussian": "gaussian",
    "quantile bins (zero + quartiles)": "binned",
    "bernoulli (x > 0)": "bernoulli",
}

MIN_GAIN = 1e-4
"""The least fall in internal log-loss for which auto models one column otherwise."""


def auto_fit(
    table: Table, settings: TableSettings, path: str = "the table"
) -> tuple[TableModel, dict[str, Any]]:
    """The model of `auto_choice`'s settings, and what it chose."""
    final, info, _ = auto_choice(table, settings, path)
    return fit_table(table, final, path), info


def internal_odds(
    table: Table, settings: TableSettings, path: str, folds: int = AUTO_FOLDS
) -> InternalOdds:
    """The out-of-fold log-odds of an internal stratified cross-validation of ``folds``
    folds."""
    y = np.array(table.column(settings.label_column), dtype=object)
    fold = stratified_folds_of(y, folds)
    jll, positive = fold_contributions(table, settings, fold, path)
    labels = sorted(set(y[fold >= 0].tolist()))
    assert positive is not None
    return InternalOdds(log_odds_of(jll, labels, positive), fold, y, positive)


@dataclass
class InternalOdds:
    """Out-of-fold log-odds (n,) of the rows of a table, their folds (-1: unlabelled), labels
    and the positive label."""

    odds: np.ndarray
    fold: np.ndarray
    labels: np.ndarray
    positive: str


def stratified_folds_of(y: np.ndarray, folds: int = AUTO_FOLDS) -> np.ndarray:
    from .metrics import stratified_folds

    fold = stratified_folds(y, folds, AUTO_SEED)
    fold[y == ""] = -1
    return fold


def checked_model(table: Table, settings: TableSettings, path: str) -> TableModel:
    """The model of ``settings`` with its rows per class but no column counted, every
    check of fitting it made (the label column and labels, each numeric column's cells
    numbers and a Gaussian one's within range), in the order fitting makes them."""
    model = empty_model(table, settings, path)
    for column in model.columns:
        if column.kind == "gaussian":
            check_range(column, table)
        elif column.kind == "bernoulli" or column.edges is not None:
            column_numbers(column, table)
    ys = classes_of(model, table)
    model.class_count = np.bincount(ys[ys >= 0], minlength=len(model.labels)).tolist()
    return model


def auto_choice(
    table: Table, settings: TableSettings, path: str = "the table", folds: int = AUTO_FOLDS
) -> tuple[TableSettings, dict[str, Any], InternalOdds | None]:
    """Choose how to model the continuous columns by an internal stratified cross-validation
    of the table (``folds`` folds: the setting ``folds``, 5 by default), judged by the log-loss of the pooled out-of-fold
    posteriors, in two rounds:

    1. each of `treatments` for all of them; the best is kept (ties: the earlier);
    2. one column at a time, in table order, each other treatment of that column alone; a
       change is kept where it lowers the log-loss by at least `MIN_GAIN`.

    The log-loss, not the ROC AUC: it judges the posteriors the verdicts come from, so a
    treatment whose scores rank well but are wildly overconfident (Gaussian columns of
    counts, where one value far in a tail gives thousands of log-odds) loses, and it is the
    same criterion for any number of labels. The ROC AUC of each is kept beside it for two.

    Naive Bayes adds up its columns, so the second round costs no fitting: a row's
    out-of-fold joint log-likelihood under any mix is the log prior plus each column's
    under its treatment. No continuous column, or a label of fewer rows than folds: no
    cross-validation.

    Returns (the settings chosen, what auto tried, the out-of-fold log-odds of the choice
    for two labels, else None)."""
    from .metrics import roc_auc

    model = checked_model(table, settings, path)
    kinds = resolved(model, settings).kinds
    given = given_kinds(settings.kinds, kinds)
    candidates = treatments(kinds, settings, given)
    if not candidates or min(model.class_count) < folds:
        return settings, {}, None
    y = np.array(table.column(settings.label_column), dtype=object)
    fold = stratified_folds_of(y, folds)
    scored = fold >= 0
    target = classes_of(model, table)[scored]  # each scored row's label, as its place
    scored_rows = None if scored.all() else np.flatnonzero(scored)
    shared = FoldStatistics(table, fold, share_scores=True)
    tried = counted("auto: treatments tried", list(candidates.items()))
    parts = {name: fold_contributions(table, c, fold, path, shared) for name, c in tried}
    positive = next(iter(parts.values()))[1]

    def loss(jll: np.ndarray) -> float:  # `take`: a tenth of the time of a mask's copy
        return log_loss(jll if scored_rows is None else jll.take(scored_rows, axis=0), target)

    def column(candidate: str, name: str) -> np.ndarray:
        """The out-of-fold log-likelihoods of one column under a candidate, scored again
        (the same values as in its J) rather than held for every column and candidate."""
        models = shared.fold_models(candidates[candidate], path)
        first = next(iter(models.values()))
        j = [c.name for c in first.columns].index(name)
        return shared.scored(models, j, candidates[candidate])

    jlls = {name: jll for name, (jll, _) in parts.items()}
    losses = {name: loss(jll) for name, jll in jlls.items()}
    best = min(losses, key=lambda n: (losses[n], list(losses).index(n)))
    names = [n for n in table.names if kinds.get(n) == "gaussian" and n not in given]
    continuous = list(range(len(names)))  # the continuous columns, in table order
    choice = dict.fromkeys(continuous, best)
    jll, score, changed = jlls[best], losses[best], {}
    for j in continuous:
        current = column(choice[j], names[j])
        for other in candidates:
            if other == choice[j]:
                continue
            instead = column(other, names[j])
            trial = jll - current + instead
            trial_loss = loss(trial)
            if trial_loss <= score - MIN_GAIN:
                jll, score, choice[j], current = trial, trial_loss, other, instead
                changed[names[j]] = other
    mixed = dict(kinds)
    for j, name in choice.items():
        mixed[names[j]] = _TREATMENT_KIND[name]
    final = (
        dataclasses.replace(settings, kinds=mixed, bins=None, binning="quantile")
        if changed
        else candidates[best]
    )
    info: dict[str, Any] = {
        "chose": best,
        "criterion": "pooled out-of-fold log-loss",
        "log_loss": losses,
        "folds": folds,
    }
    if changed:
        info["columns"] = changed
        info["log_loss_mixed"] = score
    if positive is None:
        return final, info, None
    odds = {name: log_odds_of(j, model.labels, positive) for name, j in jlls.items()}
    is_pos = y[scored] == positive
    info["roc_auc"] = {name: float(roc_auc(o[scored], is_pos)) for name, o in odds.items()}
    return final, info, InternalOdds(log_odds_of(jll, model.labels, positive), fold, y, positive)


def table_rule(settings: Any) -> Any:
    """The training settings of a `settings.Settings` with a typed table's decision rule
    (`settings.TABLE_RULE`: the cutoffs of least cost, errors alike, unsure a third of an
    error) for each of its settings that the user did not give."""
    from ..core.settings import TABLE_RULE

    kept = {key: value for key, value in TABLE_RULE.items() if key not in settings.given}
    return settings.training.replace(**kept)


def table_settings_of(table: TableSettings, settings: Any) -> TableSettings:
    """A typed table's settings (those of the table options) with the run's, a
    `settings.Settings` of the defaults, the -c file and the options, in that order: its
    tokenizer and prior, its positive label, and its alpha where the file or an option gives
    one (a table's alpha is 1 unless given, where a model of messages has 0.1)."""
    training = settings.training
    return dataclasses.replace(
        table,
        tokenizer=settings.tokenizer,
        prior=training.prior,
        positive=training.positive,
        alpha=training.alpha if "alpha" in settings.given else table.alpha,
    )


def fit_with_rule(
    table: Table, settings: TableSettings, *, auto: bool, cfg: Any, path: str = "the table"
) -> TableModel:
    """The model `train` makes: with ``auto`` the settings `auto_choice` picks; for two
    classes with ``cfg.calibrate`` (a `settings.TrainConfig`) the cutoffs and Platt
    calibration that `calibration.rule_from_scores` fits on the out-of-fold log-odds of an
    internal cross-validation of ``cfg.folds`` folds (auto's own, else one more), or
    ``cfg.cutoffs`` alone."""
    from .calibration import rule_from_scores
    from .crossval import Scores

    chosen, odds = {}, None
    if auto:
        settings, chosen, odds = auto_choice(table, settings, path, cfg.folds)
    model = fit_table(table, settings, path)
    if chosen:
        model.info["auto"] = chosen
    if not model.is_binary:
        return model
    model.cutoffs = cfg.cutoffs
    if not cfg.calibrate:
        return model
    if odds is None:
        if min(model.class_count) < cfg.folds:
            return model  # too few rows of a label for an internal cross-validation
        odds = internal_odds(table, resolved(model, settings), path, cfg.folds)
    n = len(odds.odds)
    scores = Scores(
        ids=table.ids,  # made when read
        labels=tuple(odds.labels.tolist()),
        classes=model.labels,
        log_posterior=np.zeros((n, len(model.labels))),
        log_odds=odds.odds,
        positive=odds.positive,
        fold=odds.fold,
        seconds={},
    )
    model.cutoffs, model.calibration = rule_from_scores(scores, cfg)
    return model


def train_table(path: str, settings: TableSettings, auto: bool, cfg: Any) -> TableModel:
    """The model `train` writes for a typed table (`fit_with_rule`)."""
    import time

    table = read_table(path)
    model = fit_with_rule(table, settings, auto=auto, cfg=cfg, path=path)
    model.info.update(created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), rows=len(table))
    model.notes = table_notes(
        table, settings, model, auto=auto, calibrate=cfg.calibrate, folds=cfg.folds
    )
    return model


def table_notes(
    table: Table,
    settings: TableSettings,
    model: TableModel,
    *,
    auto: bool,
    calibrate: bool,
    folds: int = AUTO_FOLDS,
) -> list[str]:
    """What `train` notes of a table whose model is sound but may not be what was meant:
    rows without a label left out, a column of numbers made categorical by a few that are
    not, and a label of too few rows for the internal cross-validation (no cutoffs)."""
    notes = []
    unlabelled = [i for i, v in enumerate(table.column(settings.label_column)) if not v]
    if unlabelled:
        notes.append(
            f"{len(unlabelled):,} row(s) with an empty {settings.label_column!r} were left out "
            f"(the first: {table.ids[unlabelled[0]]})"
        )
    given = given_kinds(settings.kinds, table.names)
    for column in model.columns:
        if column.kind == "categorical" and column.edges is None and column.name not in given:
            note = mostly_numbers_note(table, column.name)
            if note:
                notes.append(note)
    few = [(n, label) for label, n in zip(model.labels, model.class_count) if n < folds]
    if model.is_binary and (auto or calibrate) and few:
        n, label = min(few)
        notes.append(
            f"label {label!r} has {n} row(s), too few for the internal {folds}-fold "
            "cross-validation: "
            + ("no cutoffs or calibration were fitted (the Bayes decision)" if calibrate else "")
            + (", and " if calibrate and auto else "")
            + ("auto kept the continuous columns as they are" if auto else "")
        )
    return notes
