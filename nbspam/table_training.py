"""Training a table model as `train` does: auto's choice of how to model the continuous
columns by internal cross-validation, the decision rule, and the cross-validation of
`evaluate`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from .columns import Categorical
from .errors import TrainingError
from .table_model import (
    Column,
    TableModel,
    TableSettings,
    TextStats,
    bin_edges,
    category_counts,
    classes_of,
    column_counts,
    column_numbers,
    empty_model,
    empty_stats,
    fit_table,
    given_kinds,
    number_categories,
    posteriors,
    subset,
)
from .tables import DEFAULT_BINS, Table, mostly_numbers_note, read_table

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

    def __init__(self, table: Table, fold: np.ndarray) -> None:
        self.table, self.fold = table, fold
        self.folds = np.unique(fold[fold >= 0]).tolist()
        self.parts = {k: subset(table, np.flatnonzero(fold == k)) for k in self.folds}
        self.counted: dict[tuple[str, str], list[Any]] = {}
        self.empty: dict[int, tuple[TableSettings, TableModel]] = {}
        """Per settings (kept, so that its id stays its own), its model with no row counted."""

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
                self.counted[key] = [
                    column_counts(model, column_like(column, C), part, ys[j], +1)
                    for j, part in self.parts.items()
                ]
            parts = self.counted[key]
            stats = parts[0]
            for other in parts[1:]:
                stats = _combine(stats, other, +1)
            column.stats = _combine(stats, parts[self.folds.index(k)], -1)
        return model

    def _binned(
        self, model: TableModel, column: Column, k: int, settings: TableSettings
    ) -> tuple[list[float], bool, Any]:
        x = column_numbers(column, self.table)
        train = self.fold != k  # rows without a label too, as fitting on them would
        edges, zero_bin = bin_edges(x[train], settings.bins or DEFAULT_BINS, settings.binning)
        binned = Column(column.name, column.kind, edges=edges, zero_bin=zero_bin)
        rows = np.flatnonzero(train & (self.fold >= 0))
        ys = classes_of(model, self.table)[rows]
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
) -> tuple[np.ndarray, np.ndarray, list[str], str]:
    """Out-of-fold log-odds of a two-class model, split: (bias (n,), the contribution of each
    scored column (n, k), the k column names, the positive label); each row scored by the
    model of the other folds (rows of fold -1 are left at 0). ``shared``: the statistics of
    the folds, counted once for several settings."""
    shared = shared or FoldStatistics(table, fold)
    n = len(table.rows)
    bias, contrib = np.zeros(n), None
    names: list[str] = []
    positive = ""
    for k in shared.folds:
        model = shared.model(settings, k, path)
        test = np.flatnonzero(fold == k)
        names, parts = model.column_log_likelihoods(shared.parts[k], Counter())
        p, positive = model.positive_index, str(model.positive)
        if contrib is None:
            contrib = np.zeros((n, len(parts)))
        prior = model.log_prior()
        bias[test] = prior[p] - prior[1 - p]
        for j, part in enumerate(parts):
            contrib[test, j] = part[:, p] - part[:, 1 - p]
    assert contrib is not None
    return bias, contrib, names, positive


_TREATMENT_KIND = {
    "gaussian": "gaussian",
    "quantile bins (zero + quartiles)": "binned",
    "bernoulli (x > 0)": "bernoulli",
}

MIN_GAIN = 1e-4
"""The least gain in internal ROC AUC for which auto models one column otherwise."""


def auto_fit(
    table: Table, settings: TableSettings, path: str = "the table"
) -> tuple[TableModel, dict[str, Any]]:
    """The model of `auto_choice`'s settings, and what it chose."""
    final, info, _ = auto_choice(table, settings, path)
    return fit_table(table, final, path), info


def internal_odds(table: Table, settings: TableSettings, path: str) -> InternalOdds:
    """The out-of-fold log-odds of an internal stratified 5-fold cross-validation."""
    y = np.array(table.column(settings.label_column), dtype=object)
    fold = stratified_folds_of(y)
    bias, contrib, _, positive = fold_contributions(table, settings, fold, path)
    return InternalOdds(bias + contrib.sum(axis=1), fold, y, positive)


@dataclass
class InternalOdds:
    """Out-of-fold log-odds (n,) of the rows of a table, their folds (-1: unlabelled), labels
    and the positive label."""

    odds: np.ndarray
    fold: np.ndarray
    labels: np.ndarray
    positive: str


def stratified_folds_of(y: np.ndarray) -> np.ndarray:
    from .metrics import stratified_folds

    fold = stratified_folds(y, AUTO_FOLDS, AUTO_SEED)
    fold[y == ""] = -1
    return fold


def auto_choice(
    table: Table, settings: TableSettings, path: str = "the table"
) -> tuple[TableSettings, dict[str, Any], InternalOdds | None]:
    """Choose how to model the continuous columns by an internal stratified 5-fold
    cross-validation of the table (pooled log-odds, ROC AUC), in two rounds:

    1. each of `treatments` for all of them; the best is kept (ties: the earlier);
    2. one column at a time, in table order, each other treatment of that column alone; a
       change is kept where it raises the AUC by at least `MIN_GAIN`.

    Naive Bayes adds up its columns, so the second round costs no fitting: a row's
    out-of-fold log-odds under any mix is the bias plus each column's contribution under
    its treatment. More than two labels, or no continuous column: no cross-validation.

    Returns (the settings chosen, what auto tried, the out-of-fold log-odds of the choice
    or None)."""
    from .metrics import roc_auc

    model = fit_table(table, settings, path)  # checks the label column and the labels
    kinds = resolved(model, settings).kinds
    given = given_kinds(settings.kinds, kinds)
    candidates = treatments(kinds, settings, given)
    if not model.is_binary or not candidates or min(model.class_count) < AUTO_FOLDS:
        return settings, {}, None
    y = np.array(table.column(settings.label_column), dtype=object)
    fold = stratified_folds_of(y)
    scored = fold >= 0
    shared = FoldStatistics(table, fold)
    parts = {
        name: fold_contributions(table, c, fold, path, shared) for name, c in candidates.items()
    }
    first = next(iter(parts.values()))
    names, is_pos = first[2], y[scored] == first[3]

    def auc(odds: np.ndarray) -> float:
        return float(roc_auc(odds[scored], is_pos))

    aucs = {name: auc(bias + contrib.sum(axis=1)) for name, (bias, contrib, _, _) in parts.items()}
    best = max(aucs, key=lambda n: (aucs[n], -list(aucs).index(n)))
    continuous = [j for j, n in enumerate(names) if kinds[n] == "gaussian" and n not in given]
    choice = dict.fromkeys(continuous, best)
    odds = parts[best][0] + parts[best][1].sum(axis=1)
    score, changed = aucs[best], {}
    for j in continuous:
        for other in candidates:
            if other == choice[j]:
                continue
            trial = odds - parts[choice[j]][1][:, j] + parts[other][1][:, j]
            trial_auc = auc(trial)
            if trial_auc >= score + MIN_GAIN:
                odds, score, choice[j] = trial, trial_auc, other
                changed[names[j]] = other
    mixed = dict(kinds)
    for j, name in choice.items():
        mixed[names[j]] = _TREATMENT_KIND[name]
    final = (
        dataclasses.replace(settings, kinds=mixed, bins=None, binning="quantile")
        if changed
        else candidates[best]
    )
    info = {"chose": best, "roc_auc": aucs, "folds": AUTO_FOLDS}
    if changed:
        info["columns"] = changed
        info["roc_auc_mixed"] = score
    return final, info, InternalOdds(odds, fold, y, first[3])


def fit_with_rule(
    table: Table, settings: TableSettings, *, auto: bool, cfg: Any, path: str = "the table"
) -> TableModel:
    """The model `train` makes: with ``auto`` the settings `auto_choice` picks; for two
    classes with ``cfg.calibrate`` (a `config.TrainConfig`) the cutoffs and Platt
    calibration that `calibration.rule_from_scores` fits on the out-of-fold log-odds of an
    internal cross-validation (auto's own, else one more), or ``cfg.cutoffs`` alone."""
    from .calibration import rule_from_scores
    from .crossval import Scores

    chosen, odds = {}, None
    if auto:
        settings, chosen, odds = auto_choice(table, settings, path)
    model = fit_table(table, settings, path)
    if chosen:
        model.info["auto"] = chosen
    if not model.is_binary:
        return model
    model.cutoffs = cfg.cutoffs
    if not cfg.calibrate:
        return model
    if odds is None:
        if min(model.class_count) < AUTO_FOLDS:
            return model  # too few rows of a label for an internal cross-validation
        odds = internal_odds(table, resolved(model, settings), path)
    n = len(odds.odds)
    scores = Scores(
        ids=tuple(table.ids),
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
    model.info.update(
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), rows=len(table.rows)
    )
    model.notes = table_notes(table, settings, model, auto=auto, calibrate=cfg.calibrate)
    return model


def table_notes(
    table: Table, settings: TableSettings, model: TableModel, *, auto: bool, calibrate: bool
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
            note = mostly_numbers_note(table.column(column.name), table.ids, column.name)
            if note:
                notes.append(note)
    few = [(n, label) for label, n in zip(model.labels, model.class_count) if n < AUTO_FOLDS]
    if model.is_binary and (auto or calibrate) and few:
        n, label = min(few)
        notes.append(
            f"label {label!r} has {n} row(s), too few for the internal {AUTO_FOLDS}-fold "
            "cross-validation: "
            + ("no cutoffs or calibration were fitted (the Bayes decision)" if calibrate else "")
            + (", and " if calibrate and auto else "")
            + ("auto kept the continuous columns as they are" if auto else "")
        )
    return notes


def cross_validate_table(
    path: str, settings: TableSettings, auto: bool, folds: int, seed: int, cfg: Any
) -> Any:
    """`crossval.Scores` of stratified k-fold cross-validation of a typed table (folds as
    `evaluate` deals them); each training part chooses (auto) and fits its decision rule
    for itself (nested), as `train` would on it."""
    from .crossval import Scores, stratified_split
    from .decision import Rule
    from .evaluation import with_decision_rules

    table = read_table(path)
    y_all = table.column(settings.label_column) if table.has(settings.label_column) else []
    table = subset(table, [i for i, v in enumerate(y_all) if v])
    y = table.column(settings.label_column) if table.rows else []
    fold, protocol = stratified_split(y, folds, seed)
    jll: np.ndarray | None = None
    labels: tuple[str, ...] = ()
    positive = None
    rules = {}
    for k in range(folds):
        train_part = subset(table, np.flatnonzero(fold != k))
        model = fit_with_rule(train_part, settings, auto=auto, cfg=cfg, path=path)
        if model.is_binary:
            rules[k] = Rule(model.cutoffs, model.calibration)
        test = np.flatnonzero(fold == k)
        part = model.joint_log_likelihood(subset(table, test), Counter())
        if jll is None:
            labels, positive = model.labels, model.positive
            jll = np.zeros((len(table.rows), len(labels)))
        if model.labels != labels:
            raise TrainingError("a fold lacks a label; use fewer folds")
        jll[test] = part
    assert jll is not None
    binary = len(labels) == 2
    p = labels.index(positive) if binary and positive else None
    log_post, log_odds = posteriors(jll, p)
    scores = Scores(
        ids=tuple(table.ids),
        labels=tuple(y),
        classes=labels,
        log_posterior=log_post,
        log_odds=log_odds,
        positive=positive if binary else None,
        fold=fold,
        seconds={},
        protocol=protocol,
    )
    return with_decision_rules(scores, rules) if rules else scores
