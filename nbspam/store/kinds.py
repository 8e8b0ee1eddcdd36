"""The one place that tells the kind of a model file: a model of messages (`modelfile`) or of
a typed table (`tablefile`). `load` reads either; `kind_of` gives the `interface.ModelKind`
of a file, `kind_for` that of a model in memory; `restore` reads either kind of dump.
Everything else works on the `interface.NaiveBayesModel` these return, never asking which.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import IO, Any

from ..errors import InputError
from ..models.interface import ModelKind, NaiveBayesModel
from . import container

TABLE_DUMP = "# nbspam table dump 1"
"""The first line of the dump of a table model: then its model file's JSON header, indented,
and the line ``end``."""


class Messages:
    """Models of messages (`model.Model`): counts and digests in arrays, a scoring table."""

    name = "messages"

    def read(self, path: str | os.PathLike[str]) -> Any:
        from .modelfile import load_model

        return load_model(path)

    def write(self, model: Any, path: str | os.PathLike[str]) -> None:
        from .modelfile import write_model

        write_model(model, path)

    def dump(self, model: Any) -> Iterator[bytes]:
        from .dump import dump_chunks

        return dump_chunks(model)

    def restore(self, stream: IO[bytes]) -> Any:
        from .dump import restore

        return restore(stream)


class Tables:
    """Models of typed tables (`table_model.TableModel`): the whole model in the header."""

    name = "table"

    def read(self, path: str | os.PathLike[str]) -> Any:
        from .tablefile import load_table_model

        return load_table_model(path)

    def write(self, model: Any, path: str | os.PathLike[str]) -> None:
        from .lock import model_lock
        from .tablefile import save_table_model

        with model_lock(path):
            save_table_model(model, path)

    def dump(self, model: Any) -> Iterator[bytes]:
        from .tablefile import to_header

        text = json.dumps(to_header(model), indent=1, ensure_ascii=False, allow_nan=False)
        yield f"{TABLE_DUMP}\n{text}\nend\n".encode()

    def restore(self, stream: IO[bytes]) -> Any:
        """The table model of a dump (its first line read already). Its JSON is indented,
        several times the bytes of the model file's header (two to three for most models),
        so it is read a line at a time without its indentation (spaces after a line break,
        never within a JSON string): a model file's header takes at least half the bytes
        kept, which are refused past twice `container.MAX_HEADER`. Writing the model
        checks the header itself."""
        from .tablefile import from_header

        limit = 2 * container.MAX_HEADER
        text, last = bytearray(), b""
        while raw := stream.readline(limit + 1):
            text += last.lstrip(b" ")
            if len(raw) > limit or len(text) > limit:
                raise InputError(
                    "line 2: the dump of a table model is larger than a model file holds"
                )
            last = raw
        if last != b"end\n":
            raise InputError("the dump is cut short: it must end with the line 'end'")
        try:
            header = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"line 2: not the JSON of a table model: {exc}") from None
        return from_header("the dump", header)


MESSAGES: ModelKind = Messages()
TABLES: ModelKind = Tables()


def kind_of(path: str | os.PathLike[str]) -> ModelKind:
    """The kind of the model file at ``path`` (by its header; a file that is neither is
    read, and refused, as a model of messages)."""
    return TABLES if container.is_table_model(path) else MESSAGES


def kind_for(model: NaiveBayesModel) -> ModelKind:
    """The kind of a model in memory."""
    return TABLES if model.kind == TABLES.name else MESSAGES


def load(path: str | os.PathLike[str]) -> Any:
    """The model of a model file of either kind, checked; never unpickles."""
    return kind_of(path).read(path)


def describe(path: str | os.PathLike[str]) -> tuple[Any, dict[str, Any]]:
    """(the model of the file, what `nbspam info` shows of the file beside the model): its
    size in bytes (``size``), and for a model of messages its header (``header``) and the
    bytes each part takes (``sizes``, `modelfile.part_sizes`)."""
    model = load(path)
    facts: dict[str, Any] = {"size": os.path.getsize(path)}
    if model.kind == MESSAGES.name:
        from .modelfile import part_sizes, read_header

        facts["header"], facts["sizes"] = read_header(path), part_sizes(path)
    return model, facts


def save(model: NaiveBayesModel, path: str | os.PathLike[str]) -> None:
    """Write a model of either kind atomically, under the model's lock."""
    kind_for(model).write(model, path)


def dump(model: NaiveBayesModel) -> Iterator[bytes]:
    """The text dump of a model of either kind, in chunks."""
    return kind_for(model).dump(model)


def restore(stream: IO[bytes]) -> Any:
    """The model of a dump of either kind (`InputError` ``line N: ...`` for a bad one)."""
    first = stream.readline(len(TABLE_DUMP) + 32)
    if first == f"{TABLE_DUMP}\n".encode():
        return TABLES.restore(stream)
    return MESSAGES.restore(_Prefixed(first, stream))


class _Prefixed:
    """A binary stream whose first line was read already: it is read again first."""

    def __init__(self, first: bytes, stream: IO[bytes]) -> None:
        self.first, self.stream = first, stream

    def readline(self, size: int = -1) -> bytes:
        if self.first:
            line, self.first = self.first, b""
            return line
        return self.stream.readline(size)
