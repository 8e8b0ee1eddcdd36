"""Learn into, forget from and merge model files of either kind, as the commands do: the kind
comes from `store.kinds` (the one place that tells it), the rest from the model.

A model of messages learns through its journal (`journalled`), optionally into a user's
layer; a table model learns the rows of tables, each under its label column (or all as
``label``), the file replaced under its lock (`store.tablefile`). Each function returns the
line the command prints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from ..errors import ConfigError, NbspamError
from ..mail.message import Message, Problems
from ..store import kinds

if TYPE_CHECKING:
    from ..models.interface import NaiveBayesModel

Inputs = Sequence[tuple[str, bool]]
"""The inputs of a command: (PATH, whether it is read literally); ``("-", True)`` is stdin."""


Watch = Callable[[Iterator[Message]], Iterator[Message]]
"""What sees the messages of a command as they are read (its progress bar)."""


def read_inputs(
    paths: Iterable[tuple[str, bool]],
    problems: Problems,
    *,
    follow_links: bool = False,
    watch: Watch | None = None,
) -> Iterator[Message]:
    """The messages of each input, seen by ``watch`` where given."""
    messages = _read_inputs(paths, problems, follow_links=follow_links)
    return watch(messages) if watch else messages


def _read_inputs(
    paths: Iterable[tuple[str, bool]], problems: Problems, *, follow_links: bool = False
) -> Iterator[Message]:
    """The messages of each (PATH, whether it is read literally) in turn
    (`messages.read_messages`); a PATH that holds none (an empty folder, say) is reported as
    skipped, so the command ends with status 3."""
    from ..mail.messages import read_messages

    for path, literal in paths:
        before = problems.skipped
        found = False
        for message in read_messages([path], problems, follow_links=follow_links, literal=literal):
            found = True
            yield message
        if not found and problems.skipped == before:
            problems.skip(path, "no messages found")


def learn(
    model_path: str,
    inputs: Inputs,
    label: str | None,
    problems: Problems,
    *,
    given: bool = True,
    layer: str | None = None,
    new_label: bool = False,
    follow_links: bool = False,
    watch: Watch | None = None,
) -> str:
    """`nbspam learn`: the inputs into the model file (``given``: PATHs were named, else
    the input is stdin); returns the summary line."""
    if kinds.kind_of(model_path) is kinds.TABLES:
        n = sum(_table_rows(model_path, inputs, given, layer, +1, label))
        return f"learned {n:,} row(s)" + (f" as {label}" if label else "")
    if label is None:
        raise ConfigError("Missing option '-l' / '--label': the label the messages are learned as.")
    from .journalled import learn as learn_messages

    messages = read_inputs(inputs, problems, follow_links=follow_links, watch=watch)
    change = learn_messages(model_path, messages, label, layer=layer, new_label=new_label)
    return (
        f"learned {change.learned + change.relabelled:,} message(s) as {label} "
        f"({change.relabelled:,} moved from another label, {change.unchanged:,} already known)"
    )


def forget(
    model_path: str,
    inputs: Inputs,
    problems: Problems,
    *,
    given: bool = True,
    layer: str | None = None,
    follow_links: bool = False,
    watch: Watch | None = None,
) -> str:
    """`nbspam forget`: the inputs out of the model file; messages it never learned are
    reported as skipped. Returns the summary line."""
    if kinds.kind_of(model_path) is kinds.TABLES:
        n = sum(_table_rows(model_path, inputs, given, layer, -1, None))
        return f"forgot {n:,} row(s)"
    from .journalled import forget as forget_messages

    messages = read_inputs(inputs, problems, follow_links=follow_links, watch=watch)
    change = forget_messages(model_path, messages, layer=layer)
    for name in change.unknown:
        problems.skip(name, "not learned by this model, nothing to forget")
    return f"forgot {change.forgotten:,} message(s)"


def _table_rows(
    model_path: str, inputs: Inputs, given: bool, layer: str | None, sign: int, label: str | None
) -> Iterator[int]:
    """The rows learned (or forgotten) of each table of ``inputs``, in turn."""
    from ..store.tablefile import update_table_file
    from ..text.tables import read_table

    if layer is not None:
        raise NbspamError("--user is for models of messages, not of typed tables")
    if not given:
        raise ConfigError("a table model learns and forgets the rows of a table: give PATH")
    for path, _ in inputs:
        yield update_table_file(model_path, read_table(path), sign, label)


def merge(paths: Sequence[str], output: str) -> list[str]:
    """`nbspam merge`: the models at ``paths`` (all of one kind) merged into ``output``;
    returns the lines to say."""
    models = [kinds.load(path) for path in paths]
    kinds.save(merged(models), output)
    if models[0].kind == kinds.TABLES.name:
        return [f"merged {len(paths)} table models into {output}"]
    from ..models.model import merged_note

    return [f"merged {len(paths)} models into {output}", f"note: {merged_note(models)}"]


def merged(models: Sequence[NaiveBayesModel]) -> NaiveBayesModel:
    """The merge of ``models``, all of one kind: a model of messages and a table model have
    nothing to add up."""
    first = models[0]
    if any(m.kind != first.kind for m in models[1:]):
        raise NbspamError("cannot merge a model of messages with a model of a typed table")
    return first.merge(models[1:])
