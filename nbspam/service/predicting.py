"""Predict and explain with a model file of either kind, as the commands do: messages with a
model of messages (its scoring table where it can, a user's layer over it, or a Dask
cluster), the rows of tables with a table model. The kind comes from `store.kinds`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from ..errors import NbspamError
from ..mail.message import Problems
from ..store import kinds
from .engine import Engine
from .learning import Inputs, Watch, read_inputs


@dataclass
class Predicted:
    """What `predict` prints: the model's labels and a `decision.Prediction` per message, or
    a `decision.Predictions` per block of a table's rows (read lazily); after them, in ``unseen``, the categories of table cells never seen in
    training that scoring left out, per (column, value). ``noun``: what a result counts
    ("rows" of a table, whose bytes were told as they were read)."""

    labels: tuple[str, ...]
    results: Iterator[Any]
    unseen: Counter = field(default_factory=Counter)
    noun: str = "messages"


def predict(
    model_path: str,
    inputs: Inputs,
    problems: Problems,
    *,
    engine: Engine | None = None,
    layer: str | None = None,
    follow_links: bool = False,
    watch: Watch | None = None,
) -> Predicted:
    """`nbspam predict`: the model file's predictions for ``inputs``."""
    engine = engine or Engine()
    if kinds.kind_of(model_path) is kinds.TABLES:
        if layer is not None:
            raise NbspamError("--user scores messages, not rows of a typed table")
        engine.refuse("scores messages, not rows of a typed table")
        model = kinds.load(model_path)
        done = Predicted(model.labels, iter(()), noun="rows")
        done.results = _rows(model_path, model, inputs, done.unseen)
        return done
    if layer is not None and engine.dask:
        raise NbspamError("--user scores with the local scorer: give --engine local")
    engine.check()
    from .array_scoring import load_scorer

    scorer = load_scorer(model_path, layer)
    messages = read_inputs(inputs, problems, follow_links=follow_links, watch=watch)
    if engine.dask:
        return Predicted(scorer.labels, _on_cluster(engine, model_path, messages))
    messages, jobs = _jobs_for(messages, engine.jobs)
    return Predicted(scorer.labels, scorer.predict_messages(messages, jobs=jobs))


SMALL_BATCH = 1 << 20
"""Messages of fewer bytes than this in all are scored in one process, whatever --jobs."""


def _jobs_for(messages: Iterator[Any], jobs: int) -> tuple[Iterator[Any], int]:
    """(the messages, the number of processes to score them in): one where they hold fewer
    than `SMALL_BATCH` bytes in all, else ``jobs``. The messages are read ahead up to that
    many bytes to tell, and given back in order.

    Worker processes cost some 30 ms of CPU to start and feed, and each message is sent to
    one and its prediction back: on a few thousand short texts that is more than scoring
    them (the SMS test split, 1,115 texts of 90 kB, took a third more CPU and more time with
    two workers than in one process). A megabyte of mail is about a tenth of a second of
    scoring in one process, near where two workers start to pay."""
    if jobs <= 1:
        return messages, jobs
    ahead: list[Any] = []
    size = 0
    for message in messages:
        ahead.append(message)
        size += len(message.data)
        if size >= SMALL_BATCH:
            return chain(ahead, messages), jobs
    return iter(ahead), 1


def _rows(model_path: str, model: Any, inputs: Inputs, unseen: Counter) -> Iterator[Any]:
    from ..text.tables import read_table

    for path, _ in inputs:
        if path == "-":
            raise NbspamError(f"{model_path} is a table model: give the tables to score as PATH")
        yield from model.predict_blocks(read_table(path, texts=model.text_columns()), unseen)


def _on_cluster(engine: Engine, model_path: str, messages: Iterator[Any]) -> Iterator[Any]:
    from .cluster import predict as predict_on_cluster

    with engine.client() as client:
        yield from predict_on_cluster(model_path, messages, client)


def explain(
    model_path: str,
    inputs: Inputs | None,
    problems: Problems,
    *,
    top: int | None = None,
    against: str | None = None,
    follow_links: bool = False,
) -> tuple[Any, Any]:
    """`nbspam explain`: (the model, its explanation): without ``inputs``, what the model
    learned; with them, an explanation of each message or row, read lazily."""
    model = kinds.load(model_path)
    if inputs is None:
        return model, model.explain(top=top or 20, against=against)
    if model.kind == kinds.TABLES.name:
        from ..text.tables import read_table

        return model, model.explain(read_table(path) for path, _ in inputs)
    messages = read_inputs(inputs, problems, follow_links=follow_links)
    return model, model.explain(messages, against=against)
