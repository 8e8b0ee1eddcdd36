"""The Python API: `train`, `load` and `evaluate`, and a model's predict, explain, learn,
forget and save, the library functions behind the commands of the same names.

Data and messages come as the commands take them, or from memory:

* training data (`train`, `evaluate`): a path (a folder with one subfolder per label, a
  table, a typed table), a ``LABEL=PATH`` string, a ``(text, label)`` pair whose text is
  ``str`` or ``bytes``, or a list mixing them;
* messages (`Classifier.predict`, ``explain``, ``learn``, ``forget``): ``bytes`` (a raw
  message), ``str`` (its text) or a path (`os.PathLike`, such as `pathlib.Path`: a message
  file, an mbox, a Maildir, a folder), one or a list of them. A ``str`` is always text,
  never a path: give paths as `pathlib.Path`.

Settings are the command-line options in snake_case (``event_model``, ``alpha``,
``min_count``, ...) and ``config``, the YAML file of ``-c``; they are resolved as the
commands resolve them (`settings.settings_from`). Failures raise `errors.NbspamError` with
the message the command prints after ``Error:``; an input that is skipped (unreadable,
binary, holding no message) is a `SkippedInputWarning` whose text is the line the command
prints on stderr.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import warnings
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Union

from .errors import InputError, NbspamError
from .mail.message import MAX_MESSAGE_BYTES, Message, Problems
from .mail.messages import read_labelled, read_messages

if TYPE_CHECKING:
    from .models.decision import Prediction
    from .models.model import Model
    from .models.table_model import TableModel, TableSettings
    from .service.update import Change
    from .text.tables import Table

Text = str | bytes
OneMessage = Union[str, bytes, "os.PathLike[str]", Message]


class SkippedInputWarning(UserWarning):
    """An input was skipped (or cut), as the commands report it: ``WHERE: reason``."""


def _problems() -> Problems:
    return Problems(lambda line: warnings.warn(line, SkippedInputWarning, stacklevel=4))


# --------------------------------------------------------------------------------------------
# Training and evaluating
# --------------------------------------------------------------------------------------------


def train(
    data: Any,
    *,
    config: str | os.PathLike[str] | None = None,
    jobs: int = 1,
    label_column: str | None = None,
    columns: Iterable[str] = (),
    bins: int | None = None,
    binning: str = "quantile",
    **settings: Any,
) -> Classifier | TableClassifier:
    """Train a model, as ``nbspam train`` does: the same data, the same settings, the same
    model (to the bit; only the time it was made differs).

    ``data``: paths, ``LABEL=PATH`` strings and ``(text, label)`` pairs (see the module's
    documentation). ``settings``: the options of ``nbspam train`` in snake_case, over those
    of the YAML file ``config``. A typed table (a CSV or JSON Lines table without a text
    column, or one table with ``label_column``, ``columns`` (``NAME=KIND`` strings) or
    ``bins``) gives a `TableClassifier`, anything else a `Classifier`. ``jobs`` worker
    processes tokenize; the model is the same for any number.
    """
    from .fit.run_settings import settings_from
    from .fit.training import train as train_model

    items = _items(data)
    table_path, table_settings = typed_table_settings(
        items, label_column, columns, bins, binning, settings
    )
    resolved = settings_from(_path(config), settings)
    if table_path is not None:
        from .fit.table_training import table_rule, train_table

        table_settings = dataclasses.replace(table_settings, tokenizer=resolved.tokenizer)
        cfg = resolved.training
        rule = table_rule(resolved)
        return TableClassifier(train_table(table_path, table_settings, cfg.event_model == "auto", rule))
    messages = _labelled(items, _problems())
    return Classifier(train_model(messages, resolved, jobs=jobs))


def evaluate(
    data: Any,
    *,
    folds: int = 5,
    seed: int = 42,
    test: Any = None,
    chronological: float | None = None,
    config: str | os.PathLike[str] | None = None,
    jobs: int = 1,
    label_column: str | None = None,
    columns: Iterable[str] = (),
    bins: int | None = None,
    binning: str = "quantile",
    **settings: Any,
) -> dict[str, Any]:
    """The report of ``nbspam evaluate``: the dict that its ``-f json`` prints and its text
    and Markdown render (`report.report`).

    Stratified cross-validation with ``folds`` folds dealt by ``seed`` (the default), or
    trained on ``data`` and tested on the labelled ``test`` data, or trained on the oldest
    messages and tested on the newest ``chronological`` fraction. ``data``, ``settings``
    and the table options as for `train`.
    """
    from .evaluation import evaluation as ev
    from .evaluation.report import report
    from .fit.run_settings import settings_from

    items = _items(data)
    table_path, table_settings = typed_table_settings(
        items, label_column, columns, bins, binning, settings
    )
    resolved = settings_from(_path(config), settings)
    if test is not None and chronological is not None:
        raise NbspamError("give test or chronological, not both")
    if chronological is not None and not 0 < chronological < 1:
        raise NbspamError(f"chronological must be a fraction in (0, 1), not {chronological!r}")
    problems = _problems()
    if table_path is not None:
        if test is not None or chronological is not None:
            raise NbspamError("a typed table is evaluated by cross-validation only (--folds)")
        from .evaluation.table_evaluation import cross_validate_table
        from .fit.table_training import table_rule

        scores = cross_validate_table(
            table_path,
            dataclasses.replace(table_settings, tokenizer=resolved.tokenizer),
            auto=resolved.training.event_model == "auto",
            folds=folds,
            seed=seed,
            cfg=table_rule(resolved),
        )
    elif test is not None:
        tests = _labelled(_items(test), problems)
        scores = ev.holdout(_labelled(items, problems), tests, resolved, jobs=jobs)
    elif chronological is not None:
        scores = ev.chronological(
            _labelled(items, problems), resolved, test_fraction=chronological, jobs=jobs
        )
    else:
        scores = ev.cross_validate(
            _labelled(items, problems), resolved, folds=folds, seed=seed, jobs=jobs
        )
    return report(scores, cutoffs=None, calibration=None)


def load(path: str | os.PathLike[str]) -> Classifier | TableClassifier:
    """Read a model file, as every command does: a `Classifier` of messages, or a
    `TableClassifier` of a typed table. A bad file raises `errors.ModelFileError`; nothing
    is ever unpickled."""
    from .store.container import is_table_model

    path = os.fspath(path)
    if is_table_model(path):
        from .models.table_model import load_table_model

        return TableClassifier(load_table_model(path))
    from .store.modelfile import load_model

    return Classifier(load_model(path))


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


class Classifier:
    """A model of messages: `model.Model` (its counts and settings, as ``model``) with the
    operations of the commands.

    ``labels`` are its classes, sorted; ``positive`` the class a two-class model's log-odds
    point to (None for more classes).
    """

    def __init__(self, model: Model) -> None:
        self.model = model

    @property
    def labels(self) -> tuple[str, ...]:
        return self.model.labels

    @property
    def positive(self) -> str | None:
        return self.model.training.positive if self.model.is_binary else None

    def __repr__(self) -> str:
        cfg = self.model.training
        return (
            f"<nbspam.Classifier {cfg.event_model} labels={list(self.labels)} "
            f"terms={len(self.model.terms):,} messages={int(self.model.class_count.sum()):,}>"
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model file, as ``nbspam train -o`` writes it (atomically, under the
        model's lock)."""
        from .store.modelfile import write_model

        write_model(self.model, os.fspath(path))

    def predict(
        self, messages: OneMessage | Iterable[OneMessage], *, jobs: int = 1
    ) -> list[Prediction]:
        """A `decision.Prediction` for every message, what ``nbspam predict`` prints: ``id``
        (a message given as bytes or text: its position among those given, from 0; else
        the identifier ``predict`` prints), ``label``, ``probabilities`` (in the order of
        ``labels``) and, for two classes, ``log_odds``, ``verdict`` (by the model's
        cutoffs: the negative label, 'unsure' or the positive label) and ``calibrated``
        (the calibrated probability of the positive label, or None)."""
        from .models.model import score

        return list(score(self.model, _messages(messages, _problems()), jobs=jobs))

    def explain(
        self, message: OneMessage | None = None, *, top: int = 20, against: str | None = None
    ) -> Any:
        """``nbspam explain``: without a message, for each class its ``top`` terms of
        largest log-odds weight (a list of `explain.ClassTerms`); with one, its log-odds
        as a bias plus one contribution per known term (`explain.MessageExplanation`, or
        `explain.FisherExplanation` for a fisher model). ``against``: more than two classes,
        the class to compare with (default: the runner-up)."""
        from .models import explain as ex

        if against is not None and against not in self.labels:
            raise NbspamError(f"--against {against!r} is not one of the labels {list(self.labels)}")
        if message is None:
            return ex.top_terms(self.model, top, against=against)
        found = list(_messages(message, _problems()))
        if len(found) != 1:
            raise InputError(f"explain takes one message; {_name(message)} holds {len(found):,}")
        from .text.features import Analyzer

        tokens = Analyzer(self.model.tokenizer).tokens(found[0].data)
        return ex.explain_message(self.model, found[0].id, tokens, against=against)

    def learn(
        self, messages: OneMessage | Iterable[OneMessage], label: str, *, new_label: bool = False
    ) -> Change:
        """Add messages under ``label``, as ``nbspam learn`` does (a message learned before
        under another label is moved); the result equals training on all the messages at
        once. A label the model lacks needs ``new_label=True``. Returns what was done
        (`update.Change`: learned, relabelled, unchanged)."""
        from .service.update import learn

        if label not in self.labels and not new_label:
            raise NbspamError(
                f"the model has no label {label!r} (its labels: {', '.join(self.labels)}); "
                "give new_label=True to add one"
            )
        self.model, change = learn(self.model, _messages(messages, _problems()), label)
        return change

    def forget(self, messages: OneMessage | Iterable[OneMessage]) -> Change:
        """Remove learned messages, as ``nbspam forget`` does; the result equals training
        without them. Returns `update.Change`, whose ``unknown`` lists the messages that
        the model never learned (left alone)."""
        from .service.update import forget

        self.model, change = forget(self.model, _messages(messages, _problems()))
        return change


class TableClassifier:
    """A model of a typed table (`table_model.TableModel`, as ``model``): it predicts,
    explains, learns and forgets the rows of tables, given as paths or `tables.Table`."""

    def __init__(self, model: TableModel) -> None:
        self.model = model

    @property
    def labels(self) -> tuple[str, ...]:
        return self.model.labels

    @property
    def positive(self) -> str | None:
        return self.model.labels[self.model.positive_index] if self.model.is_binary else None

    def __repr__(self) -> str:
        return (
            f"<nbspam.TableClassifier labels={list(self.labels)} "
            f"columns={[c.name for c in self.model.columns]}>"
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model file, as ``nbspam train -o`` writes it."""
        from .models.table_model import save_table_model

        save_table_model(self.model, os.fspath(path))

    def predict(self, tables: Any) -> list[Prediction]:
        """A `decision.Prediction` for every row of each table (its ``id`` PATH#LINE)."""
        return [p for table in _tables(tables) for p in self.model.predict(table)]

    def explain(self, tables: Any = None) -> Any:
        """Without tables, the model's columns (`table_model.describe`); with them, each
        row's log-odds as a bias plus one contribution per column (two classes)."""
        from .models.table_model import describe, explain_rows

        if tables is None:
            return describe(self.model)
        return [e for table in _tables(tables) for e in explain_rows(self.model, table)]

    def learn(self, tables: Any) -> int:
        """Add the labelled rows of tables (each under its label column); returns how many."""
        return self._add(tables, +1)

    def forget(self, tables: Any) -> int:
        """Remove the rows of tables learned before (all of them, or nothing)."""
        return self._add(tables, -1)

    def _add(self, tables: Any, sign: int) -> int:
        from .models.table_model import add_rows

        model = copy.deepcopy(self.model)  # a failure leaves the model as it was
        n = sum(add_rows(model, table, sign) for table in _tables(tables))
        self.model = model
        return n


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def _path(path: str | os.PathLike[str] | None) -> str | None:
    return None if path is None else os.fspath(path)


def _items(data: Any) -> list[Any]:
    """Training data as a list of items: one path, spec or pair, or a list of them."""
    if isinstance(data, (str, os.PathLike)) or _is_pair(data):
        return [data]
    if isinstance(data, bytes) or not isinstance(data, Iterable):
        raise InputError(f"training data must be paths or (text, label) pairs, not {data!r:.60}")
    return list(data)


def _is_pair(item: Any) -> bool:
    return (
        isinstance(item, tuple)
        and len(item) == 2
        and isinstance(item[0], (str, bytes))
        and isinstance(item[1], str)
    )


def typed_table_settings(
    items: list[Any],
    label_column: str | None,
    columns: Iterable[str],
    bins: int | None,
    binning: str,
    settings: dict[str, Any],
) -> tuple[str | None, TableSettings | None]:
    """(the typed table the data names or None, its settings), as the commands tell."""
    from .text.tables import BINNINGS, parse_column_options, typed_table

    columns = [columns] if isinstance(columns, str) else list(columns)
    forced = label_column is not None or bool(columns) or bins is not None
    if not all(isinstance(item, (str, os.PathLike)) for item in items):
        if forced:
            raise NbspamError("label_column, columns and bins take one table as data")
        return None, None
    path = typed_table([os.fspath(item) for item in items], forced)
    if path is None:
        return None, None
    from .models.table_model import TableSettings

    if binning not in BINNINGS:
        raise NbspamError(f"binning must be one of {', '.join(BINNINGS)}, not {binning!r}")
    if bins is not None and (isinstance(bins, bool) or not isinstance(bins, int) or bins < 1):
        raise NbspamError(f"bins must be a whole number >= 1, not {bins!r}")
    alpha = settings.get("alpha")
    return path, TableSettings(
        label_column=label_column or "label",
        kinds=parse_column_options(columns),
        bins=bins,
        binning=binning,
        alpha=1.0 if alpha is None else alpha,
        positive=settings.get("positive"),
    )


def _labelled(items: list[Any], problems: Problems) -> Iterator[Message]:
    """The labelled messages of training data items, in order."""
    for i, item in enumerate(items):
        if isinstance(item, (str, os.PathLike)):
            yield from read_labelled([os.fspath(item)], problems)
        elif _is_pair(item):
            yield Message(str(i), _cut(item[0]), item[1])
        elif isinstance(item, Message) and item.label is not None:
            yield item
        else:
            raise InputError(
                f"item {i} of the training data is neither a path nor a (text, label) "
                f"pair: {item!r:.60}"
            )


def _messages(messages: Any, problems: Problems) -> Iterator[Message]:
    """The messages of bytes, text, paths and `Message` values (one, or a list), in order;
    a path that holds none is reported, as the commands report it."""
    if isinstance(messages, (str, bytes, os.PathLike, Message)):
        messages = [messages]
    elif not isinstance(messages, Iterable):
        raise InputError(f"messages must be bytes, text or paths, not {messages!r:.60}")
    for i, item in enumerate(messages):
        if isinstance(item, (str, bytes)):
            yield Message(str(i), _cut(item))
        elif isinstance(item, Message):
            yield item
        elif isinstance(item, os.PathLike):
            path, before, found = os.fspath(item), problems.skipped, False
            for message in read_messages([path], problems):
                found = True
                yield message
            if not found and problems.skipped == before:
                problems.skip(path, "no messages found")
        else:
            raise InputError(f"message {i} is not bytes, text or a path: {item!r:.60}")


def _cut(data: Text) -> Text:
    """A message as the commands read it: at most `messages.MAX_MESSAGE_BYTES` of it."""
    return data[:MAX_MESSAGE_BYTES]


def _name(message: Any) -> str:
    return os.fspath(message) if isinstance(message, os.PathLike) else "the message"


def _tables(tables: Any) -> Iterator[Table]:
    """Tables given as paths (str or os.PathLike) or `tables.Table` values, one or a list."""
    from .text.tables import Table, read_table

    if isinstance(tables, (str, os.PathLike, Table)):
        tables = [tables]
    for table in tables:
        yield table if isinstance(table, Table) else read_table(os.fspath(table))
