"""Progress of long work: the library says what it does and how much of it there is, and
whoever listens shows it (the command line: `cli.progress`). No listener, nothing shown.

A stage opened inside another is told to no one: the outer stage's steps already say how
far the work is (evaluate's folds, not the internal cross-validation inside each)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Protocol, TypeVar

Step = Callable[[int], None]
T = TypeVar("T")


class Listener(Protocol):
    def begin(self, what: str, total: int | None) -> None:
        """A stage starts: ``what`` it does, in ``total`` steps (None: not known)."""

    def advance(self, steps: int) -> None:
        """``steps`` more of the stage are done."""

    def end(self) -> None:
        """The stage is over."""


_LISTENER: ContextVar[Listener | None] = ContextVar("nbspam_progress", default=None)


def _nothing(steps: int) -> None:
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
def stage(what: str, total: int | None = None) -> Iterator[Step]:
    """A stage of ``total`` steps: yields the function to call with the steps done each
    time (one by default)."""
    listener = _LISTENER.get()
    if listener is None:
        yield _nothing
        return
    listener.begin(what, total)
    token = _LISTENER.set(None)  # stages inside this one stay quiet
    try:
        yield lambda steps=1: listener.advance(steps)
    finally:
        _LISTENER.reset(token)
        listener.end()


def counted(what: str, items: Sequence[T]) -> Iterator[T]:
    """The ``items`` in turn, each one step of a stage."""
    with stage(what, len(items)) as step:
        for item in items:
            yield item
            step(1)
