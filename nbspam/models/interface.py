"""The one model interface: what a model of messages (`model.Model`) and a model of a typed
table (`table_model.TableModel`) both do, so that the library and the commands use either
without asking which it is.

Two protocols, cut where the layers are: `NaiveBayesModel` is the model in memory (this
package knows no files), `ModelKind` one kind of model file: read, write, dump and
restore (`store.kinds` implements it, one object per kind). `store.kinds` is the one place
that tells the kind of a model file (`store.kinds.load` returns either model); nothing else
asks. Learning into and forgetting from a model file in place, under its lock and through
its journal, is `service.learning`'s, over `store.kinds`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any, Protocol, runtime_checkable

from .decision import Prediction


@runtime_checkable
class NaiveBayesModel(Protocol):
    """A trained naive Bayes classifier in memory."""

    kind: str
    """The kind of model: ``"messages"`` (`model.Model`) or ``"table"`` (`table_model.TableModel`)."""

    cutoffs: tuple[float, float] | None
    """The decision rule of a two-class model: the (negative, positive) cutoffs on the
    log-odds, for the verdicts negative / unsure / positive; None for the Bayes decision."""

    calibration: tuple[float, float] | None
    """Two classes: the Platt calibration (a, b) of the log-odds, or None."""

    @property
    def labels(self) -> tuple[str, ...]:
        """The classes, sorted."""
        ...

    @property
    def positive(self) -> str | None:
        """The class a two-class model's log-odds point to; None for more classes."""
        ...

    @property
    def is_binary(self) -> bool:
        """Whether the model has two classes (and so log-odds, cutoffs and a calibration)."""
        ...

    def predict(self, inputs: Iterable[Any]) -> Iterator[Prediction]:
        """A `decision.Prediction` for each input: a `message.Message` for a model of
        messages, a row of each `tables.Table` for a table model."""
        ...

    def explain(self, inputs: Any = None, **options: Any) -> Any:
        """Without inputs, what the model learned (the terms of most weight per class, or each
        column's statistics); with them, each input's log-odds as a bias plus one
        contribution per term or column."""
        ...

    def merge(self, others: Sequence[Any]) -> Any:
        """This model plus ``others`` of the same kind and settings, trained on disjoint
        inputs: the model trained on all of them at once."""
        ...

    def describe(self) -> dict[str, Any]:
        """What ``nbspam info`` shows of the model: labels and their counts, positive class,
        settings, decision rule and history, as plain JSON values."""
        ...


class ModelKind(Protocol):
    """The life cycle of one kind of model file."""

    name: str
    """The kind's name, as `NaiveBayesModel.kind`."""

    def read(self, path: str | os.PathLike[str]) -> NaiveBayesModel:
        """The model of a model file of this kind, every field checked; never unpickles."""
        ...

    def write(self, model: NaiveBayesModel, path: str | os.PathLike[str]) -> None:
        """Write the model file atomically (the old file or the new, never a part of one)."""
        ...

    def dump(self, model: NaiveBayesModel) -> Iterator[bytes]:
        """The model as UTF-8 text (`nbspam dump`), all the file holds but what is derived."""
        ...

    def restore(self, stream: IO[bytes]) -> NaiveBayesModel:
        """The model of a dump, checked as strictly as a model file."""
        ...

