"""Training with a decision rule: the model, then its cutoffs and calibration by internal
cross-validation on the same messages."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..core.parallel import ctrl_c_held_back
from ..core.settings import AUTO, Settings
from ..mail.headers import message_time
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
    cutoffs given in the settings are set. Either way memory follows the vocabulary (the
    model, some 50 bytes a term for two classes) and the sample, and grows with the number
    of messages only by some 50 bytes each: the digests counted (`counting.Seen`) and the
    model's record of them (docs/speed.md, "Memory"). The choice of auto and the candidates
    it tried are kept in the model's ``info["auto"]``.
    """
    cfg = settings.training
    keep_rows = cfg.calibrate or cfg.event_model == AUTO
    dates = Dates(settings.tokenizer.mail) if keep_rows else None
    counted = LabelledChunks(
        messages,
        settings.tokenizer,
        progress=progress,
        jobs=jobs,
        noted=None if dates is None else dates.note,
    )
    # The workers are tokenizing: numpy and scipy are imported now, beside them, not before.
    with ctrl_c_held_back():
        from ..models.model import CV_ROWS, SampledRows, fit_counted

    rows = None
    if keep_rows:
        rows = SampledRows(CV_ROWS, dated=None if dates is None else dates.take)
    model = fit_counted(counted, settings, rows=rows)  # auto: the fallback, until chosen
    times = None
    if rows is not None and dates is not None:
        times, rows.dated = rows.times(), None
    # the model holds the digests of the messages counted (32 bytes a message): their set
    # (`counting.Seen`, some 20 bytes a message) is let go of before the cross-validation
    del counted, dates
    return decide(model, rows, settings, times)


class Dates:
    """The date of each distinct message of a stream (`headers.message_time`, read as the
    tokenizer reads mail), for the chronological check of the cutoffs: noted as a message
    is read (`note`, given each message to be counted by `LabelledChunks`), and handed over
    (`take`) as it is counted, so that only the dates of the messages read ahead of the
    counting are held, not one a message (the sample keeps those of its rows)."""

    def __init__(self, mail: str) -> None:
        self.mail = mail
        self.times: dict[bytes, float] = {}

    def note(self, digest: bytes, message: Message) -> None:
        """Note the date of a message to be counted (by its ``digest``)."""
        moment = message_time(message.data, self.mail)
        self.times[digest] = math.nan if moment is None else moment

    def take(self, digests: Iterable[bytes]) -> list[float]:
        """The dates of messages now counted (by their ``digests``), NaN where a message
        has none, forgotten here."""
        return [self.times.pop(d, math.nan) for d in digests]


def decide(
    model: Model, rows: SampledRows | None, settings: Settings, times: list[float] | None = None
) -> Model:
    """The fitted model with auto's choice and the decision rule: from an internal
    cross-validation of the count rows ``rows`` kept while fitting, or without them only
    the cutoffs given in the settings; ``times`` (the date of each row of ``rows``, in their
    order, NaN where unknown) let the cutoffs be checked on a chronological split.
    (`train`, and `cluster.train` after its reduce.)"""
    import numpy as np

    from .calibration import DRIFT, expected_fpr
    from .crossval import Tokenized
    from .selection import internal_cv

    cfg = settings.training
    auto = cfg.event_model == AUTO
    cutoffs = cfg.cutoffs if model.is_binary else None
    if rows is None:
        return dataclasses.replace(model, cutoffs=cutoffs)
    # the fitted model's scoring form (the size of its counts) is not kept through the
    # cross-validation: the model decided is a new value, which makes its own
    model.__dict__.pop("form", None)
    X, terms = rows.matrix()
    data = Tokenized([str(i) for i in range(X.shape[0])], rows.labels, X, terms)
    row_times = None
    if times is not None and model.is_binary:
        row_times = np.asarray(times, dtype=np.float64)
        row_times = None if np.isnan(row_times).all() else row_times
    choice = internal_cv(data, settings, rows.totals, row_times)
    training = choice.training.replace(positive=model.training.positive)
    info = dict(model.info)
    if auto:
        info["auto"] = choice.info()
    if cfg.calibrate and choice.rule is not None:
        cutoffs, calibration = choice.rule
        if cutoffs is not None and choice.scores is not None:
            info["cutoffs"] = expected_fpr(choice.scores, cutoffs)
            if cfg.cutoffs is None and cfg.target_fpr is not None:
                info["cutoffs"]["drift"] = choice.drift or {"drift": DRIFT}
    else:
        calibration = None
    return dataclasses.replace(
        model, training=training, cutoffs=cutoffs, calibration=calibration, info=info
    )
