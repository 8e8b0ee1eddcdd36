"""Work on chunks of messages in worker processes, with the results in order.

`imap_ordered` runs a function over a stream of chunks in ``jobs`` worker processes. The
workers are forked, so they inherit a read-only context (a tokenizer configuration, a
scoring table) instead of receiving it with every chunk. Results come back in the order of
the chunks, so the outcome is the same whatever the number of jobs. The workers start, and
get their first chunks, before `imap_ordered` returns: the caller can import what it needs
for the results (numpy, scipy) while they work.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from typing import Any, TypeVar

T = TypeVar("T")
W = TypeVar("W")
R = TypeVar("R")
C = TypeVar("C")
CHUNK = 250  # messages tokenized as one piece of work
_CONTEXT: list[Any] = []  # in a worker process: the context it was started with


def chunks(items: Iterable[T], size: int = CHUNK) -> Iterator[list[T]]:
    """Consecutive lists of up to ``size`` items of a stream."""
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def imap_ordered(
    func: Callable[[C, W], R], context: C, items: Iterable[tuple[T, W]], jobs: int = 1
) -> Iterator[tuple[T, R]]:
    """(tag, func(context, work)) for each (tag, work), in order; tags stay in this process.

    With ``jobs`` > 1 and more than one item, ``jobs`` forked worker processes do the work,
    at most 2 * jobs items ahead of the reader, so memory stays bounded for any stream; they
    are started, and given their first items, before this returns. ``func`` must be a
    module-level function (it is sent to the workers by name). Where processes cannot be
    forked, the work is done in this process, as the results are read.
    """
    it = iter(items)
    head = list(islice(it, 2))
    if jobs <= 1 or len(head) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return ((tag, func(context, work)) for tag, work in chain(head, it))
    # Ctrl-C is held back while the workers are forked: a worker that got it before its
    # initializer ignores it would die, and the pool would fork a replacement that outlives
    # this process. Held back, not lost: it arrives as the mask is restored.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        pool = multiprocessing.get_context("fork").Pool(
            jobs, initializer=_set_context, initargs=(context,)
        )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    try:
        pending = deque(
            (tag, pool.apply_async(_call, (func, work)))
            for tag, work in chain(head, islice(it, 2 * jobs - 2))
        )
    except BaseException:
        pool.terminate()
        raise
    return _in_order(pool, func, pending, it, 2 * jobs)


def _in_order(
    pool: Any, func: Callable, pending: deque, it: Iterator[tuple[T, W]], ahead: int
) -> Iterator[tuple[T, R]]:
    """The results of the pending items in order, handing out the rest of ``it`` as they
    are read; the workers are terminated when the reader stops (at the end, on an error,
    or when this generator is closed)."""
    with pool:
        while pending:
            tag, result = pending.popleft()
            for next_tag, work in islice(it, ahead - len(pending)):
                pending.append((next_tag, pool.apply_async(_call, (func, work))))
            yield tag, result.get()


def _set_context(context: Any) -> None:
    # Ctrl-C reaches every process of the terminal's group: the main process alone answers
    # it (it ends the workers), so a worker does not print a traceback of its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _CONTEXT.append(context)


def _call(func: Callable[[Any, W], R], work: W) -> R:
    return func(_CONTEXT[-1], work)
