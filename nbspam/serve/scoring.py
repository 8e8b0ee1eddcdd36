"""What a request asks of a model, done by the library functions the commands use: the
verdict and header of `nbspam filter` (`filtering.verdict_with` and `with_header`, the
scorer of `array_scoring`, so the verdict is `nbspam predict`'s), the report of `nbspam explain` (`explain`, `explanation_text`), and
`nbspam learn` / `nbspam forget` (`service.journalled`). The protocols only translate."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ServeError
from ..mail.message import MAX_MESSAGE_BYTES, Message
from ..models.decision import Prediction
from ..service.filtering import SPAM, verdict_with, with_header
from .models import Loaded, Models

Log = Callable[[str], None]


@dataclass
class Service:
    """What every connection shares: the models, the limits, whether lessons are taken, and
    the log of one line a message."""

    models: Models
    max_size: int = MAX_MESSAGE_BYTES
    allow_tell: bool = False
    log: Log = print
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    #: Reports are made one at a time: a user's report builds a whole model (the site's
    #: with the user's layer over it), and any client of the socket may ask for one, so
    #: several at once would hold as many models.
    reporting: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(1))

    def next_id(self) -> str:
        return str(next(self._ids))

    def logged(
        self, message_id: str, user: str | None, what: str, log_odds: float | None, start: float
    ) -> None:
        """One line: id, user, verdict (or what was done), log-odds, milliseconds."""
        odds = "-" if log_odds is None else f"{log_odds:+.3f}"
        ms = (time.perf_counter() - start) * 1000
        self.log(f"id={message_id} user={user or '-'} {what} log_odds={odds} ms={ms:.1f}")


@dataclass(frozen=True)
class Outcome:
    """One scored message: the model that scored it, its prediction and verdict kind
    ('spam', 'unsure' or 'ham'), and (`output`) the message with nbspam's header."""

    loaded: Loaded
    prediction: Prediction
    kind: str
    data: bytes

    @property
    def output(self) -> bytes:
        """The message with nbspam's header, made when asked (CHECK does not ask)."""
        return with_header(self.data, self.prediction, self.kind)

    @property
    def is_spam(self) -> bool:
        """The yes/no of spamd and milter: the spam verdict only (unsure is not spam)."""
        return self.kind == SPAM

    @property
    def log_odds(self) -> float:
        return self.prediction.log_odds or 0.0

    @property
    def threshold(self) -> float:
        """The log-odds from which a message is spam: the model's spam cutoff, or 0 for a
        model without cutoffs (spam above 0)."""
        cutoffs = getattr(self.loaded.scorer, "cutoffs", None)
        if cutoffs is None:
            cutoffs = getattr(getattr(self.loaded.scorer, "model", None), "cutoffs", None)
        return 0.0 if cutoffs is None else cutoffs[1]


def score(models: Models, user: str | None, data: bytes, message_id: str = "-") -> Outcome:
    """Score one message with the site model and ``user``'s layer over it, if any."""
    loaded = models.scorer_for(user)
    kind, prediction = verdict_with(loaded.scorer, data, message_id)
    return Outcome(loaded, prediction, kind, data)


def report(models: Models, outcome: Outcome, data: bytes, top: int | None = 20) -> str:
    """`nbspam explain`'s text for the message (its ``top`` words), as one string."""
    from ..models.explain import explain_message
    from ..service.explanation_text import explanation_lines
    from ..text.features import Analyzer

    model = models.full_model(outcome.loaded)
    tokens = Analyzer(model.tokenizer).tokens(data[:MAX_MESSAGE_BYTES])
    explained = explain_message(model, "-", tokens)
    return "".join(line + "\n" for line in explanation_lines(explained, top))


def tell(models: Models, user: str | None, data: bytes, learn_as: str | None) -> bool:
    """Learn the message as 'spam' or 'ham' (``learn_as``), or forget it (None): in
    ``user``'s layer where the user has one by the template, else in the site model, by
    records appended to the journal and fsynced before this returns (`nbspam learn` /
    `nbspam forget`, under the model's lock), in time proportional to the message. True if
    the model changed; the next message scores with the change."""
    from ..service import journalled

    layer = models.layer_for(user)
    message = Message("-", data[:MAX_MESSAGE_BYTES])
    try:
        if learn_as is None:
            done = journalled.forget(models.site, [message], layer=layer)
            return done.forgotten > 0
        labels, positive = models.labels()
        if len(labels) != 2:
            raise ServeError(f"{models.site} is not a two-class model: it cannot learn {learn_as}")
        at = labels.index(positive)
        label = labels[at if learn_as == SPAM else 1 - at]
        done = journalled.learn(models.site, [message], label, layer=layer)
        return done.learned + done.relabelled > 0
    finally:
        models.changed()


def shown(value: float) -> str:
    """A score or threshold as spamd's protocol carries it: three decimals, the precision
    of nbspam's header; an infinite cutoff as +-1e308, a number spamc reads."""
    return f"{value:.3f}" if math.isfinite(value) else ("1e308" if value > 0 else "-1e308")
