"""Training with a decision rule: the model, then its cutoffs and calibration by internal
cross-validation on the same messages."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .config import Settings
from .counting import LabelledCounts
from .messages import Message

if TYPE_CHECKING:
    from .model import Model


def train(
    messages: Iterable[Message],
    settings: Settings,
    *,
    progress: Callable[[int], None] | None = None,
    jobs: int = 1,
) -> Model:
    """Train a model; for two classes also fit its cutoffs and Platt calibration.

    With ``calibrate`` (the default) the messages' count rows are kept and
    `evaluate.decision_rule` gives the cutoffs and calibration from an internal
    cross-validation. Without it only cutoffs given in the settings are set, and training
    streams with memory bounded by the model.
    """
    counted = LabelledCounts(messages, settings.tokenizer, progress=progress, jobs=jobs)
    # The workers are tokenizing: numpy and scipy are imported now, beside them, not before.
    from . import evaluate
    from .model import Rows, fit_counted

    cfg = settings.train
    rows = Rows() if cfg.calibrate else None
    model = fit_counted(counted, settings, rows=rows)
    if not model.is_binary:
        return model
    if rows is None:
        return dataclasses.replace(model, cutoffs=cfg.cutoffs)
    X, terms = rows.matrix()
    ids = [str(i) for i in range(X.shape[0])]
    rule = evaluate.decision_rule(evaluate.Tokenized(ids, rows.labels, X, terms), settings)
    return dataclasses.replace(model, cutoffs=rule.cutoffs, calibration=rule.calibration)
