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
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from .core import arguments as arg
from .errors import ConfigError, InputError, NbspamError
from .mail.message import MAX_MESSAGE_BYTES, Message, Problems
from .mail.messages import read_labelled, read_messages
from .service.engine import Engine, check_jobs

if TYPE_CHECKING:
    from .models.decision import Prediction
    from .models.interface import NaiveBayesModel
    from .models.table_model import TableSettings
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


@dataclass
class Reading:
    """How the paths of the data are read, as the commands read them: where skipped inputs
    are reported (``problems``), a ``progress`` callback (``progress(messages, size=0)``:
    more messages read, and their bytes where known), --follow-links, and --literal-paths
    (``literal``); paths in ``listed`` (--files-from) are always read literally. ``watch``,
    where given, sees every message read in this process as it passes (a command's
    progress bar)."""

    problems: Problems = field(default_factory=lambda: _problems())
    progress: Callable[..., None] | None = None
    follow_links: bool = False
    literal: bool = False
    listed: Sequence[str] = ()
    watch: Callable[[Iterator[Message]], Iterator[Message]] | None = None

    def __post_init__(self) -> None:
        """Each checked: follow_links="no" would follow links, a str in listed be read as
        the paths of its characters."""
        arg.instance("problems", self.problems, Problems, "a mail.message.Problems")
        arg.optional(arg.instance, "progress", self.progress, Callable, "a function")
        arg.flag("follow_links", self.follow_links)
        arg.flag("literal", self.literal)
        self.listed = arg.texts("listed", self.listed)
        arg.optional(arg.instance, "watch", self.watch, Callable, "a function")


TABLE_OPTIONS = ("label_column", "columns", "bins", "binning")
"""The options of typed tables, which only `train` and `evaluate` of a table take."""


def train(
    data: Any,
    *,
    config: str | os.PathLike[str] | None = None,
    jobs: int = 1,
    label_column: str | None = None,
    columns: Iterable[str] = (),
    bins: int | None = None,
    binning: str = "quantile",
    reading: Reading | None = None,
    engine: Engine | None = None,
    min_docs: int | None = None,
    max_terms: int | None = None,
    **settings: Any,
) -> Classifier:
    """Train a model, as ``nbspam train`` does: the same data, the same settings, the same
    model (to the bit; only the time it was made differs).

    ``data``: paths, ``LABEL=PATH`` strings and ``(text, label)`` pairs (see the module's
    documentation). ``settings``: the options of ``nbspam train`` in snake_case, over those
    of the YAML file ``config``. A typed table (a CSV or JSON Lines table without a text
    column, or one table with ``label_column``, ``columns`` (``NAME=KIND`` strings) or
    ``bins``) gives a `Classifier` of a table model, anything else one of messages.
    ``jobs`` worker processes tokenize; the model is the same for any number. ``reading``
    and ``engine`` (`engine.Engine`: a Dask cluster) are the command's. ``min_docs`` and
    ``max_terms`` prune the terms as `update.prune` does: on a Dask cluster while its
    counts are added up (the decision rule is then fitted on the pruned counts), here
    after training.
    """
    from .fit.training import train as train_model

    reading, engine = _run(reading, engine, jobs)
    config = arg.optional(arg.path, "config", config)
    min_docs = arg.optional(arg.whole, "min_docs", min_docs, 1)
    max_terms = arg.optional(arg.whole, "max_terms", max_terms, 1)
    given = _items(data)  # listed once: data may be a generator, read only once
    items = given + list(reading.listed)
    table_path, table_settings = typed_table_settings(items, label_column, columns, bins, binning)
    resolved = settings_from(config, settings)
    engine.check()
    if table_path is not None:
        from .fit.table_training import table_rule, table_settings_of, train_table

        engine.refuse("trains on messages, not on a typed table")
        if min_docs is not None or max_terms is not None:
            raise ConfigError("--min-docs and --max-terms prune terms: not of a typed table")
        table_settings = table_settings_of(table_settings, resolved)
        auto = resolved.training.event_model == "auto"
        return Classifier(train_table(table_path, table_settings, auto, table_rule(resolved)))
    if engine.dask:
        from .service.cluster import train as train_on_cluster
        from .service.cluster import train_parts

        with engine.client() as client:
            if all(isinstance(item, (str, os.PathLike)) for item in items):
                # the workers read the files themselves: here they are only listed
                parts = _parts(given, reading)
                model = train_parts(
                    parts,
                    resolved,
                    client,
                    progress=reading.progress,
                    problems=reading.problems,
                    min_docs=min_docs,
                    max_terms=max_terms,
                )
            else:
                messages = _labelled(given, reading)
                model = train_on_cluster(
                    messages,
                    resolved,
                    client,
                    progress=reading.progress,
                    min_docs=min_docs,
                    max_terms=max_terms,
                )
    else:
        messages = _labelled(given, reading)
        model = train_model(messages, resolved, progress=reading.progress, jobs=engine.jobs)
        if min_docs is not None or max_terms is not None:
            from .service.update import prune

            model, _ = prune(model, min_docs=min_docs, max_terms=max_terms)
    return Classifier(model)


def _parts(items: list[Any], reading: Reading) -> Iterator[Any]:
    """The parts (`sources.Part`) the cluster's workers read, of training data paths."""
    from .service.sources import list_parts

    follow = reading.follow_links
    yield from list_parts(
        [os.fspath(item) for item in items],
        reading.problems,
        follow_links=follow,
        literal=reading.literal,
    )
    yield from list_parts(list(reading.listed), reading.problems, follow_links=follow, literal=True)


def evaluate(
    data: Any,
    *,
    folds: int = 5,
    seed: int = 42,
    test: Any = None,
    chronological: float | None = None,
    online: bool = False,
    order: str = "date",
    learn: str = "all",
    warmup: int | None = None,
    autolearn_spam: float = 0.999,
    autolearn_ham: float = 0.001,
    scores: str | os.PathLike[str] | None = None,
    plot: str | os.PathLike[str] | None = None,
    config: str | os.PathLike[str] | None = None,
    jobs: int = 1,
    label_column: str | None = None,
    columns: Iterable[str] = (),
    bins: int | None = None,
    binning: str = "quantile",
    reading: Reading | None = None,
    engine: Engine | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """The report of ``nbspam evaluate``: the dict that its ``-f json`` prints and its text
    and Markdown render (`report.report`).

    Stratified cross-validation with ``folds`` folds dealt by ``seed`` (the default), or
    trained on ``data`` and tested on the labelled ``test`` data, or trained on the oldest
    messages and tested on the newest ``chronological`` fraction, or (``online``) the TREC
    spam track's online protocol: each message scored in ``order`` then learned by the
    policy ``learn`` (all, errors, unsure, autolearn, errors+autolearn; after ``warmup``
    messages, at the ``autolearn_*`` thresholds). A typed table is evaluated by
    cross-validation only. ``scores``: also write each message's out-of-sample scores as
    JSON Lines there; ``plot``: draw the ROC curve and histograms (or the online learning
    curve) there. ``data``, ``settings``, the table options, ``reading`` and ``engine`` as
    for `train`.
    """
    from .evaluation import evaluation as ev
    from .evaluation.online import ORDERS, POLICIES
    from .evaluation.report import report

    reading, engine = _run(reading, engine, jobs)
    folds = arg.whole("--folds", folds, 2)
    seed = arg.whole("--seed", seed, 0)  # numpy's seed: no bool, float or negative number
    chronological = arg.optional(arg.number, "chronological", chronological, "(0, 1)")
    online = arg.flag("online", online)
    order, learn = arg.one_of("--order", order, ORDERS), arg.one_of("--learn", learn, POLICIES)
    warmup = arg.optional(arg.whole, "warmup", warmup, 1)
    autolearn_spam = arg.number("autolearn_spam", autolearn_spam, "(0.5, 1]")
    autolearn_ham = arg.number("autolearn_ham", autolearn_ham, "[0, 0.5)")
    scores = arg.optional(arg.path, "scores", scores)
    plot = arg.optional(arg.path, "plot", plot)
    config = arg.optional(arg.path, "config", config)
    items = _items(data)
    table_path, table_settings = typed_table_settings(items, label_column, columns, bins, binning)
    resolved = settings_from(config, settings)
    if test is not None and chronological is not None:
        raise NbspamError("give test or chronological, not both")
    engine.check()
    if online and engine.dask:
        raise NbspamError("--online learns one message at a time here: not with --engine dask")
    if online and table_path is None:
        from .evaluation.online import evaluate_online

        result = evaluate_online(
            _labelled(items, reading),
            resolved,
            order=order,
            seed=seed,
            policy=learn,
            warmup=warmup,
            autolearn_spam=autolearn_spam,
            autolearn_ham=autolearn_ham,
            progress=reading.progress,
            jobs=engine.jobs,
        )
        evaluated = report(result.scores, cutoffs=None, calibration=None)
        evaluated["online"] = result.summary
        if scores:
            ev.write_scores(result.scores, scores)
        if plot:
            from .evaluation.plot import plot_online

            plot_online(result.scores, result.curve, plot)
        return evaluated
    if table_path is not None:
        if test is not None or chronological is not None or online:
            raise NbspamError("a typed table is evaluated by cross-validation only (--folds)")
        engine.refuse("evaluates messages, not a typed table")
        from .evaluation.table_evaluation import cross_validate_table
        from .fit.table_training import table_rule, table_settings_of

        found = cross_validate_table(
            table_path,
            table_settings_of(table_settings, resolved),
            auto=resolved.training.event_model == "auto",
            folds=folds,
            seed=seed,
            cfg=table_rule(resolved),
        )
    else:
        with engine.counter() as counter:
            run = {"progress": reading.progress, "jobs": engine.jobs, "counter": counter}
            if test is not None:
                tests = _labelled(_items(test), reading)
                found = ev.holdout(_labelled(items, reading), tests, resolved, **run)
            elif chronological is not None:
                found = ev.chronological(
                    _labelled(items, reading), resolved, test_fraction=chronological, **run
                )
            else:
                found = ev.cross_validate(
                    _labelled(items, reading), resolved, folds=folds, seed=seed, **run
                )
    evaluated = report(found, cutoffs=None, calibration=None)
    if scores:
        ev.write_scores(found, scores)
    if plot:
        from .evaluation.plot import plot_evaluation

        plot_evaluation(found, plot, cutoffs=ev.typical_cutoffs(found))
    return evaluated


def _run(reading: Any, engine: Any, jobs: Any) -> tuple[Reading, Engine]:
    """How a run reads its data and where it works: the `Reading` and `Engine` given, else
    the defaults (an engine of ``jobs`` local workers)."""
    reading = Reading() if reading is None else reading
    engine = Engine(jobs=jobs) if engine is None else engine
    arg.instance("reading", reading, Reading, "an nbspam.api.Reading")
    arg.instance("engine", engine, Engine, "an nbspam.service.engine.Engine")
    return reading, engine


def settings_from(config: str | None, settings: dict[str, Any]) -> Any:
    """`settings.settings_from`, but for the table options, which are not settings."""
    from .fit.run_settings import settings_from as resolve

    return resolve(config, {k: v for k, v in settings.items() if k not in TABLE_OPTIONS})


def load(path: str | os.PathLike[str]) -> Classifier:
    """Read a model file, as every command does: a `Classifier` of messages or of a typed
    table (`store.kinds.load`). A bad file raises `errors.ModelFileError`; nothing is ever
    unpickled."""
    from .store.kinds import load as load_model

    return Classifier(load_model(arg.path("path", path)))


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


class Classifier:
    """A model (`interface.NaiveBayesModel`, as ``model``: a `model.Model` of messages or a
    `table_model.TableModel` of a typed table) with the operations of the commands.

    ``labels`` are its classes, sorted; ``positive`` the class a two-class model's log-odds
    point to (None for more classes). A model of messages takes messages (bytes, text,
    paths); a table model the rows of tables, given as paths or `tables.Table`.
    """

    def __init__(self, model: NaiveBayesModel) -> None:
        from .models.interface import NaiveBayesModel

        self.model = arg.instance(
            "model", model, NaiveBayesModel, "a model of messages or of a table (nbspam.load)"
        )

    @property
    def kind(self) -> str:
        """``"messages"`` or ``"table"``."""
        return self.model.kind

    @property
    def labels(self) -> tuple[str, ...]:
        return self.model.labels

    @property
    def positive(self) -> str | None:
        return self.model.positive if self.model.is_binary else None

    def __repr__(self) -> str:
        m: Any = self.model
        if self.kind == "table":
            return f"<nbspam.Classifier table labels={list(self.labels)} columns={[c.name for c in m.columns]}>"
        return (
            f"<nbspam.Classifier {m.training.event_model} labels={list(self.labels)} "
            f"terms={len(m.terms):,} messages={int(m.class_count.sum()):,}>"
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model file, as ``nbspam train -o`` writes it (atomically, under the
        model's lock)."""
        from .store.kinds import save

        save(self.model, arg.path("path", path))

    def dump(self) -> bytes:
        """The model as text, what ``nbspam dump`` writes (`restore` reads it back)."""
        from .store.kinds import dump

        return b"".join(dump(self.model))

    def merge(self, *others: Classifier) -> Classifier:
        """The model of this one's inputs and ``others``' (trained on disjoint inputs with
        the same settings), as ``nbspam merge`` makes it."""
        from .service.learning import merged

        for other in others:
            arg.instance("others", other, Classifier, "nbspam.Classifier models")
        return Classifier(merged([self.model, *(other.model for other in others)]))

    def describe(self) -> dict[str, Any]:
        """What ``nbspam info`` shows of the model (`interface.NaiveBayesModel.describe`)."""
        return self.model.describe()

    def predict(self, inputs: Any, *, jobs: int = 1) -> list[Prediction]:
        """A `decision.Prediction` for every message (or row), what ``nbspam predict``
        prints: ``id`` (a message given as bytes or text: its position among those given,
        from 0; a row: PATH#LINE; else the identifier ``predict`` prints), ``label``,
        ``probabilities`` (in the order of ``labels``) and, for two classes,
        ``log_odds``, ``verdict`` (by the model's cutoffs: the negative label, 'unsure' or
        the positive label) and ``calibrated`` (the calibrated probability of the positive
        label, or None)."""
        jobs = check_jobs(jobs)
        if self.kind == "table":
            return list(self.model.predict(_tables(inputs)))
        return list(self.model.predict(_messages(inputs, _problems()), jobs=jobs))

    def explain(self, inputs: Any = None, *, top: int = 20, against: str | None = None) -> Any:
        """``nbspam explain``. A model of messages: without a message, for each class its
        ``top`` terms of largest log-odds weight (a list of `explain.ClassTerms`); with one,
        its log-odds as a bias plus one contribution per known term
        (`explain.MessageExplanation`, or `explain.FisherExplanation` for a fisher model);
        ``against``: more than two classes, the class to compare with (default: the
        runner-up). A table model: without tables, its columns' statistics; with them, a
        list of each row's log-odds as a bias plus one contribution per column."""
        top = arg.whole("top", top, 1)
        if self.kind == "table":
            explained = self.model.explain(None if inputs is None else _tables(inputs))
            return explained if inputs is None else list(explained)
        if against is not None and against not in self.labels:
            raise NbspamError(f"--against {against!r} is not one of the labels {list(self.labels)}")
        if inputs is None:
            return self.model.explain(top=top, against=against)
        found = list(_messages(inputs, _problems()))
        if len(found) != 1:
            raise InputError(f"explain takes one message; {_name(inputs)} holds {len(found):,}")
        return next(iter(self.model.explain(found, against=against)))

    def learn(self, inputs: Any, label: str | None = None, *, new_label: bool = False) -> Any:
        """Add messages under ``label``, as ``nbspam learn`` does (a message learned before
        under another label is moved); the result equals training on all the messages at
        once. A label the model lacks needs ``new_label=True``. Returns what was done
        (`update.Change`: learned, relabelled, unchanged). A table model adds the labelled
        rows of tables (each under its label column, or all as ``label``) and returns how
        many."""
        label = arg.optional(arg.text, "label", label)
        new_label = arg.flag("new_label", new_label)
        if self.kind == "table":
            return self._add_rows(inputs, +1, label)
        from .service.update import learn

        if label is None:
            raise NbspamError("give the label the messages are learned as")
        if label not in self.labels and not new_label:
            raise NbspamError(
                f"the model has no label {label!r} (its labels: {', '.join(self.labels)}); "
                "give new_label=True to add one"
            )
        self.model, change = learn(self.model, _messages(inputs, _problems()), label)
        return change

    def forget(self, inputs: Any) -> Any:
        """Remove learned messages, as ``nbspam forget`` does; the result equals training
        without them. Returns `update.Change`, whose ``unknown`` lists the messages that
        the model never learned (left alone). A table model removes the rows of tables
        learned before (all of them, or nothing) and returns how many."""
        if self.kind == "table":
            return self._add_rows(inputs, -1, None)
        from .service.update import forget

        self.model, change = forget(self.model, _messages(inputs, _problems()))
        return change

    def _add_rows(self, tables: Any, sign: int, label: str | None) -> int:
        from .models.table_model import add_rows, relabelled

        model = copy.deepcopy(self.model)  # a failure leaves the model as it was
        n = sum(add_rows(model, relabelled(model, t, label), sign) for t in _tables(tables))
        self.model = model
        return n


TableClassifier = Classifier
"""The `Classifier` of a table model: the same class (an older name, kept for scripts)."""


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


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
) -> tuple[str | None, TableSettings | None]:
    """(the typed table the data names or None, its settings of the table options), as the
    commands tell; `table_training.table_settings_of` adds those of the run's settings."""
    from .core.settings import BINNINGS, MAX_BINS
    from .mail.messages import typed_table

    label_column = arg.optional(arg.text, "label_column", label_column)
    columns = arg.texts("columns", columns)
    bins = arg.optional(arg.whole, "bins", bins, 1, MAX_BINS)
    binning = arg.one_of("binning", binning, BINNINGS)
    forced = label_column is not None or bool(columns) or bins is not None
    if not all(isinstance(item, (str, os.PathLike)) for item in items):
        if forced:
            raise NbspamError("label_column, columns and bins take one table as data")
        return None, None
    path = typed_table([os.fspath(item) for item in items], forced)
    if path is None:
        return None, None
    from .models.table_model import TableSettings
    from .text.tables import parse_column_options

    return path, TableSettings(
        label_column=label_column or "label",
        kinds=parse_column_options(columns),
        bins=bins,
        binning=binning,
    )


def _labelled(items: list[Any], reading: Reading) -> Iterator[Message]:
    """The labelled messages of training data items, in order, then those of the paths
    ``reading.listed`` (read literally), each seen by ``reading.watch``."""
    messages = _labelled_items(items, reading)
    return reading.watch(messages) if reading.watch else messages


def _labelled_items(items: list[Any], reading: Reading) -> Iterator[Message]:
    problems = reading.problems
    for i, item in enumerate(items):
        if isinstance(item, (str, os.PathLike)):
            yield from read_labelled(
                [os.fspath(item)],
                problems,
                follow_links=reading.follow_links,
                literal=reading.literal,
            )
        elif _is_pair(item):
            yield Message(str(i), _cut(item[0]), item[1])
        elif isinstance(item, Message) and item.label is not None:
            yield item
        else:
            raise InputError(
                f"item {i} of the training data is neither a path nor a (text, label) "
                f"pair: {item!r:.60}"
            )
    if reading.listed:
        yield from read_labelled(
            list(reading.listed), problems, follow_links=reading.follow_links, literal=True
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
    elif not isinstance(tables, Iterable):
        raise InputError(f"tables must be paths or tables.Table values, not {tables!r:.60}")
    for i, table in enumerate(tables):
        if not isinstance(table, (str, os.PathLike, Table)):
            raise InputError(f"table {i} is not a path or a tables.Table: {table!r:.60}")
        yield table if isinstance(table, Table) else read_table(os.fspath(table))
