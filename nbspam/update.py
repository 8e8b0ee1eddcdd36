"""Learn, forget and merge: exact arithmetic on a model's counts and its record of messages.

A model is a sum over the messages it learned, so adding a message's counts (learn),
subtracting them (forget) or adding two models (merge) gives exactly the model trained on
the resulting set of messages. The record of learned messages (digest -> label) makes
learning a message twice a no-op and learning it under another label move its counts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from .config import Settings
from .counts import ClassCounts
from .errors import NbspamError, TrainingError
from .headers import message_digest
from .messages import Message
from .model import CountTable, Model, _now, from_counts

T = TypeVar("T")


@dataclass(frozen=True)
class Change:
    """What an update did: messages newly learned, relabelled, forgotten, already known."""

    learned: int = 0
    relabelled: int = 0
    forgotten: int = 0
    unchanged: int = 0
    unknown: list[str] = dataclasses.field(default_factory=list)


def update_model_file(path: str, change: Callable[[Model], tuple[Model, T]]) -> tuple[Model, T]:
    """Apply ``change`` (Model -> (changed Model, what it did)) to the model file at ``path``
    under its lock: concurrent updates wait for each other, and the file is replaced whole
    (leftovers of a writer that was killed are removed first)."""
    from .lock import model_lock
    from .modelfile import load_model, remove_leftovers, save_model

    with model_lock(path):
        remove_leftovers(path)
        model, result = change(load_model(path))
        save_model(model, path)
    return model, result


def seen_map(model: Model) -> dict[bytes, str]:
    """The record of learned messages as digest -> label."""
    return {bytes(d): model.labels[k] for d, k in zip(model.seen_digests, model.seen_labels)}


def learn(model: Model, messages: Iterable[Message], label: str) -> tuple[Model, Change]:
    """Add messages to the model under ``label`` (a new label is allowed).

    A message already learned under ``label`` is left alone; one learned under another label
    has its counts moved. The result equals training on the old messages plus these.
    """
    seen = seen_map(model)
    plus, minus = [], []
    unchanged = relabelled = 0
    for message in messages:
        digest = message_digest(message.data)
        old = seen.get(digest)
        if old == label:
            unchanged += 1
            continue
        if old is not None:
            minus.append(dataclasses.replace(message, label=old))
            relabelled += 1
        plus.append(dataclasses.replace(message, label=label))
        seen[digest] = label
    updated = _apply(model, plus, minus, seen)
    return updated, Change(
        learned=len(plus) - relabelled, relabelled=relabelled, unchanged=unchanged
    )


def forget(model: Model, messages: Iterable[Message]) -> tuple[Model, Change]:
    """Remove learned messages from the model; ones it never learned are listed as unknown.

    The result equals training on the model's messages less these.
    """
    seen = seen_map(model)
    minus, unknown = [], []
    for message in messages:
        label = seen.pop(message_digest(message.data), None)
        if label is None:
            unknown.append(message.id)
        else:
            minus.append(dataclasses.replace(message, label=label))
    updated = _apply(model, [], minus, seen)
    return updated, Change(forgotten=len(minus), unknown=unknown)


def merge(models: Sequence[Model]) -> Model:
    """Add models trained on disjoint sets of messages with the same settings.

    Models with other settings are refused, and so are models that learned a message in
    common (it would be counted twice).
    """
    first = models[0]
    for other in models[1:]:
        for part in ("tokenizer", "training"):
            if getattr(other, part) != getattr(first, part):
                diff = _first_difference(getattr(first, part), getattr(other, part))
                raise NbspamError(f"cannot merge models with different settings: {diff}")
    seen: dict[bytes, str] = {}
    total: ClassCounts | None = None
    for model in models:
        for digest, label in seen_map(model).items():
            if digest in seen:
                raise NbspamError(
                    "cannot merge models that learned the same message (it would be counted "
                    "twice); train the parts on disjoint sets of messages"
                )
            seen[digest] = label
        total = model.counts if total is None else total.plus(model.counts)
    settings = Settings(tokenizer=first.tokenizer, training=first.training)
    info = {"created": _now(), "merged": len(models)}
    return from_counts(total.pruned(), settings, info, seen)


def _apply(
    model: Model, plus: list[Message], minus: list[Message], seen: dict[bytes, str]
) -> Model:
    """The model with the counts of ``plus`` added and those of ``minus`` subtracted."""
    if not plus and not minus:
        return model
    total = model.counts
    for messages, sign in ((plus, 1), (minus, -1)):
        if messages:
            table = CountTable()
            table.add(messages, model.tokenizer)
            total = total.plus(table.totals(), sign)
    if total.is_negative():
        raise TrainingError(
            "forgetting these messages would make counts negative: they were learned by a "
            "version of nbspam that tokenized them differently; retrain the model"
        )
    settings = Settings(tokenizer=model.tokenizer, training=model.training)
    info = {**model.info, "updated": _now()}
    updated = from_counts(total.pruned(), settings, info, seen)
    # the cutoffs and calibration were fitted when the model was trained; they stay
    return dataclasses.replace(updated, cutoffs=model.cutoffs, calibration=model.calibration)


def _first_difference(a, b) -> str:
    for f in dataclasses.fields(a):
        if getattr(a, f.name) != getattr(b, f.name):
            return (
                f"{f.name} is {getattr(a, f.name)!r} in one and {getattr(b, f.name)!r} in another"
            )
    return "unknown"
