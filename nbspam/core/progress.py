"""Progress of long work: the library says what it does and how much of it there is, and
whoever listens shows it (the command line: `cli.progress`). No listener, nothing shown.

A stage opened inside another is told to no one: the outer stage's steps already say how
far the work is (evaluate's folds, not the internal cross-validation inside each)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Protocol, TypeVar

Step = Callable[..., None]
"""``step(steps=1, items=0)``: more of a stage done."""
T = TypeVar("T")


class Listener(Protocol):
    """What is told of the stages: ``noun`` and ``items`` only of a stage that counts items
    beside its steps (the rows of a table read, beside its bytes)."""

    def begin(self, what: str, total: int | None, noun: str | None = None) -> None:
        """A stage starts: ``what`` it does, in ``total`` steps (None: not known); with a
        ``noun`` (as "rows"), the items are counted beside the steps (as bytes)."""

    def advance(self, steps: int, items: int = 0) -> None:
        """``steps`` more of the stage are done, and ``items`` more items."""

    def end(self) -> None:
        """The stage is over."""


_LISTENER: ContextVar[Listener | None] = ContextVar("nbspam_progress", default=None)


def _nothing(steps: int = 1, items: int = 0) -> None:
    pass


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Tell ``listener`` of the stages begun in this block."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


@contextlib.contextmanager
def stage(what: str, total: int | None = None, noun: str | None = None) -> Iterator[Step]:
    """A stage of ``total`` steps: yields the function to call with the steps done each
    time (one by default); with a ``noun``, also with the items done (``step(bytes, rows)``
    of a table read, its rows counted beside its bytes)."""
    listener = _LISTENER.get()
    if listener is None:
        yield _nothing
        return
    if noun is None:  # a listener of stages without nouns need not take them
        listener.begin(what, total)
    else:
        listener.begin(what, total, noun)

    def step(steps: int = 1, items: int = 0) -> None:
        if items:
            listener.advance(steps, items)
        else:
            listener.advance(steps)

    token = _LISTENER.set(None)  # stages inside this one stay quiet
    try:
        yield step
    finally:
        _LISTENER.reset(token)
        listener.end()


def counted(what: str, items: Sequence[T]) -> Iterator[T]:
    """The ``items`` in turn, each one step of a stage."""
    with stage(what, len(items)) as step:
        for item in items:
            yield item
            step(1)
