"""Learn, forget and compact a model file through its journal (`store.journal`), under the
model's lock: records appended and fsynced in time proportional to the messages, and folded
into the model file when the journal passes `journal.COMPACT_BYTES` or on `compact`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import NbspamError
from ..store import journal, layers, schema
from ..store.container import remove_leftovers, target
from ..store.lock import model_lock
from ..store.modelfile import load_journalled, save_model
from ..store.safefiles import model_writers


@contextmanager
def writing(model_path: str | os.PathLike[str], base: tuple[int, int]) -> Iterator[journal.Writer]:
    """A `journal.Writer` of the journal of the model at ``model_path`` (whose file has
    fingerprint ``base``), to use under the model's lock; committed when the block ends
    without an error, then folded into the model (`compact`) if it passed
    `journal.COMPACT_BYTES`."""
    like = target(model_path)
    path = journal.journal_path(model_path)
    writer = journal.Writer(path, base, like=like, writers=model_writers(like))
    try:
        yield writer
        writer.commit()
    finally:
        writer.close()
    if writer.offset > journal.COMPACT_BYTES:
        _fold(model_path)


def learn(
    model_path: str | os.PathLike[str],
    messages: Iterable[Any],
    label: str,
    *,
    layer: str | os.PathLike[str] | None = None,
    new_label: bool = False,
    only_new: bool = False,
) -> Any:
    """Learn ``messages`` (`messages.Message`) as ``label`` into the model file, or into the
    user layer file ``layer`` over it (`layers`), by records appended to its journal and
    fsynced before this returns: `update.learn`'s rules (a message learned as ``label`` is
    left alone, one learned as another label moves), in time proportional to the messages.
    A label the model lacks needs ``new_label``; with ``only_new`` a message learned under
    any label is left alone (autolearn). Returns the `update.Change`."""
    return _update(model_path, messages, label, layer=layer, new_label=new_label, only_new=only_new)


def forget(
    model_path: str | os.PathLike[str],
    messages: Iterable[Any],
    *,
    layer: str | os.PathLike[str] | None = None,
) -> Any:
    """Forget ``messages`` from the model file (or the user layer ``layer`` over it) by
    journal records, as `update.forget` does: unknown ones are listed in the `update.Change`;
    with digests expired by prune an unknown one is refused and nothing is forgotten."""
    return _update(model_path, messages, None, layer=layer)


def _update(
    model_path: Any,
    messages: Iterable[Any],
    label: str | None,
    *,
    layer: Any,
    new_label: bool = False,
    only_new: bool = False,
) -> Any:
    lock = model_lock(model_path) if layer is None else model_lock(layer, beside=layer)
    with lock:
        if layer is None:
            remove_leftovers(model_path)
        box = schema.mapped(model_path)
        known = journal.Known(box)
        site = journal.pending(model_path, box.fingerprint) if layer is not None else None
        for record in site.records if site else []:
            known.change(record)
        if layer is None:
            path, base = journal.journal_path(model_path), box.fingerprint
            like = target(model_path)
            writers = model_writers(like)
        else:
            path, base, like, writers = Path(layer), journal.LAYER, None, layers.writers(layer)
        what = "journal" if layer is None else "layer"
        writer = journal.Writer(path, base, like=like, writers=writers, what=what)
        try:
            for record in writer.contents.records:
                known.change(record)
            if label is None:
                change = journal.append_forgotten(model_path, box, known, messages, writer)
            else:
                if label not in known.labels() and not new_label:
                    raise NbspamError(
                        f"{model_path} has no label {label!r} (its labels: "
                        f"{', '.join(known.labels())}); give --new-label to add one"
                    )
                change = journal.append_learned(box, known, messages, label, writer, only_new)
            writer.commit()
        finally:
            writer.close()
        if layer is None and writer.offset > journal.COMPACT_BYTES:
            _fold(model_path)
    return change


def compact(model_path: str | os.PathLike[str]) -> int:
    """Fold the journal of the model file into it, under its lock: the model is rewritten
    with the records applied (atomically), then the journal removed. Returns the number of
    records folded (0: nothing to fold; the file is not rewritten)."""
    with model_lock(model_path):
        return _fold(model_path)


def _fold(model_path: str | os.PathLike[str]) -> int:
    remove_leftovers(model_path)
    model, _, folded = load_journalled(model_path)
    if folded:
        save_model(model, model_path)
    journal.discard(model_path)
    return folded
