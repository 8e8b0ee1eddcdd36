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

    With ``calibrate`` (the default) the count rows of the messages (of a sample of at most
    `model.CV_ROWS` of them) are kept, and `calibration.decision_rule` gives the cutoffs and
    calibration from an internal cross-validation of them, each fold scored by a model of
    all the other messages. Without it only cutoffs given in the settings are set. Either
    way memory is bounded by the model, not by the number of messages.
    """
    counted = LabelledCounts(messages, settings.tokenizer, progress=progress, jobs=jobs)
    # The workers are tokenizing: numpy and scipy are imported now, beside them, not before.
    from .calibration import decision_rule
    from .crossval import Tokenized
    from .model import CV_ROWS, Rows, fit_counted

    cfg = settings.training
    rows = Rows(CV_ROWS) if cfg.calibrate else None
    model = fit_counted(counted, settings, rows=rows)
    if not model.is_binary:
        return model
    if rows is None:
        return dataclasses.replace(model, cutoffs=cfg.cutoffs)
    X, terms = rows.matrix()
    ids = [str(i) for i in range(X.shape[0])]
    data = Tokenized(ids, rows.labels, X, terms)
    rule = decision_rule(data, settings, rows.totals)
    return dataclasses.replace(model, cutoffs=rule.cutoffs, calibration=rule.calibration)
