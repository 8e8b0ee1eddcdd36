"""Training a table model as `train` does: auto's choice of how to model the continuous
columns by internal cross-validation, and the decision rule.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..models.table_model import (
    TableModel,
    TableSettings,
    fit_table,
    given_kinds,
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


def fold_contributions(
    table: Table, settings: TableSettings, fold: np.ndarray, path: str
) -> tuple[np.ndarray, np.ndarray, list[str], str]:
    """Out-of-fold log-odds of a two-class model, split: (bias (n,), the contribution of each
    scored column (n, k), the k column names, the positive label); each row scored by the
    model of the other folds (rows of fold -1 are left at 0)."""
    n = len(table.rows)
    bias, contrib = np.zeros(n), None
    names: list[str] = []
    positive = ""
    for k in np.unique(fold[fold >= 0]):
        model = fit_table(subset(table, np.flatnonzero(fold != k)), settings, path)
        test = np.flatnonzero(fold == k)
        names, parts = model.column_log_likelihoods(subset(table, test), Counter())
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
    parts = {name: fold_contributions(table, c, fold, path) for name, c in candidates.items()}
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
