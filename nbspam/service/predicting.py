"""Predict and explain with a model file of either kind, as the commands do: messages with a
model of messages (its scoring table where it can, a user's layer over it, or a Dask
cluster), the rows of tables with a table model. The kind comes from `store.kinds`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
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
    training that scoring left out, per (column, value)."""

    labels: tuple[str, ...]
    results: Iterator[Any]
    unseen: Counter = field(default_factory=Counter)


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
        done = Predicted(model.labels, iter(()))
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
    return Predicted(scorer.labels, scorer.predict_messages(messages, jobs=engine.jobs))


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
