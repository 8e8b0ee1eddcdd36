"""Training with a decision rule: the model, then its cutoffs and calibration by internal
cross-validation on the same messages."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..core.settings import AUTO, Settings
from ..mail.message import Message
from ..text.counting import LabelledChunks

if TYPE_CHECKING:
    from ..models.model import Model, SampledRows


def train(
    messages: Iterable[Message],
    settings: Settings,
    *,
    progress: Callable[[int], None] | None = None,
    jobs: int = 1,
) -> Model:
    """Train a model; with --event-model auto choose its event model and settings; for two
    classes also fit its cutoffs and Platt calibration.

    With ``calibrate`` (the default) or auto the count rows of the messages (of a sample of
    at most `model.CV_ROWS` of them) are kept, and `selection.internal_cv` chooses the
    settings and gives the cutoffs and calibration from an internal cross-validation of
    them, each fold scored by a model of all the other messages. Without calibration only
    cutoffs given in the settings are set. Either way memory is bounded by the model, not by
    the number of messages. The choice of auto and the candidates it tried are kept in the
    model's ``info["auto"]``.
    """
    counted = LabelledChunks(messages, settings.tokenizer, progress=progress, jobs=jobs)
    # The workers are tokenizing: numpy and scipy are imported now, beside them, not before.
    from ..models.model import CV_ROWS, SampledRows, fit_counted

    cfg = settings.training
    rows = SampledRows(CV_ROWS) if cfg.calibrate or cfg.event_model == AUTO else None
    model = fit_counted(counted, settings, rows=rows)  # auto: the fallback, until chosen
    return decide(model, rows, settings)


def decide(model: Model, rows: SampledRows | None, settings: Settings) -> Model:
    """The fitted model with auto's choice and the decision rule: from an internal
    cross-validation of the count rows ``rows`` kept while fitting, or without them only
    the cutoffs given in the settings. (`train`, and `cluster.train` after its reduce.)"""
    from .calibration import expected_fpr
    from .crossval import Tokenized
    from .selection import internal_cv

    cfg = settings.training
    auto = cfg.event_model == AUTO
    cutoffs = cfg.cutoffs if model.is_binary else None
    if rows is None:
        return dataclasses.replace(model, cutoffs=cutoffs)
    X, terms = rows.matrix()
    data = Tokenized([str(i) for i in range(X.shape[0])], rows.labels, X, terms)
    choice = internal_cv(data, settings, rows.totals)
    training = dataclasses.replace(choice.training, positive=model.training.positive)
    info = dict(model.info)
    if auto:
        info["auto"] = choice.info()
    if cfg.calibrate and choice.rule is not None:
        cutoffs, calibration = choice.rule
        if cutoffs is not None and choice.scores is not None:
            info["cutoffs"] = expected_fpr(choice.scores, cutoffs)
    else:
        calibration = None
    return dataclasses.replace(
        model, training=training, cutoffs=cutoffs, calibration=calibration, info=info
    )
