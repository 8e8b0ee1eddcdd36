"""`evaluate` on a typed table: stratified k-fold cross-validation, each training part
fitted (auto's choice and the decision rule) as `train` would fit it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ..core.progress import counted
from ..errors import TrainingError
from ..fit.crossval import Scores, stratified_split
from ..fit.table_training import fit_with_rule
from ..models.decision import Rule
from ..models.table_model import TableSettings, posteriors, subset
from ..text.tables import read_table
from .evaluation import with_decision_rules


def cross_validate_table(
    path: str, settings: TableSettings, auto: bool, folds: int, seed: int, cfg: Any
) -> Scores:
    """`crossval.Scores` of stratified k-fold cross-validation of a typed table (folds as
    `evaluate` deals them); each training part chooses (auto) and fits its decision rule
    for itself (nested), as `train` would on it."""
    table = read_table(path)
    y_all = table.column(settings.label_column) if table.has(settings.label_column) else []
    table = subset(table, [i for i, v in enumerate(y_all) if v])
    y = table.column(settings.label_column) if len(table) else []
    fold, protocol = stratified_split(y, folds, seed)
    jll: np.ndarray | None = None
    labels: tuple[str, ...] = ()
    positive = None
    rules = {}
    for k in counted("folds fitted", range(folds)):
        train_part = subset(table, np.flatnonzero(fold != k))
        model = fit_with_rule(train_part, settings, auto=auto, cfg=cfg, path=path)
        if model.is_binary:
            rules[k] = Rule(model.cutoffs, model.calibration)
        test = np.flatnonzero(fold == k)
        part = model.joint_log_likelihood(subset(table, test), Counter())
        if jll is None:
            labels, positive = model.labels, model.positive
            jll = np.zeros((len(table), len(labels)))
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
