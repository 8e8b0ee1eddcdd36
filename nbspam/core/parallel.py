"""Work on chunks of messages in worker processes, with the results in order.

`imap_ordered` runs a function over a stream of chunks in ``jobs`` worker processes. The
workers are forked, so they inherit a read-only context (a tokenizer configuration, a
scoring table) instead of receiving it with every chunk. Results come back in the order of
the chunks, so the outcome is the same whatever the number of jobs. The workers start, and
get their first chunks, before `imap_ordered` returns: the caller can import what it needs
for the results (numpy, scipy) while they work.
"""

from __future__ import annotations

import atexit
import gc
import multiprocessing
import signal
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
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


@contextmanager
def ctrl_c_held_back() -> Iterator[None]:
    """Ctrl-C held back in this block, not lost: it is raised (KeyboardInterrupt) as the
    block ends. For code that would lose it: the initialization of compiled modules (numpy's
    and scipy's, made by Cython) runs Python code and drops what it raises, so that a Ctrl-C
    raised there vanished and the command went on. In the main thread only; where signals
    cannot be held back (Windows), nothing is."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def imap_ordered(
    func: Callable[[C, W], R], context: C, items: Iterable[tuple[T, W]], jobs: int = 1
) -> Iterator[tuple[T, R]]:
    """(tag, func(context, work)) for each (tag, work), in order; tags stay in this process.

    With ``jobs`` > 1, ``jobs`` forked worker processes do the work, at most 2 * jobs items
    ahead of the reader, so memory stays bounded for any stream; they are forked as soon as
    the first item exists, and given it before the second is taken (a training's first
    chunk is tokenized while its second is read), and they have their first items before
    this returns. ``func`` must be a module-level function (it is sent to the workers by
    name). Where processes cannot be forked, the work is done in this process, as the
    results are read.
    """
    it = iter(items)
    head = list(islice(it, 1))
    if jobs <= 1 or not head or "fork" not in multiprocessing.get_all_start_methods():
        return ((tag, func(context, work)) for tag, work in chain(head, it))
    # Ctrl-C is held back while the workers are forked: a worker that got it before its
    # initializer ignores it would die, and the pool would fork a replacement that outlives
    # this process. Held back, not lost: it arrives as the mask is restored, and from then
    # on the pool is stopped whatever leaves here.
    stop = None
    try:
        with ctrl_c_held_back(), _frozen_in_workers():
            pool = multiprocessing.get_context("fork").Pool(
                jobs, initializer=_set_context, initargs=(context,)
            )
            stop = _Stop(pool)
        pending = deque(
            (tag, pool.apply_async(_call, (func, work)))
            for tag, work in chain(head, islice(it, 2 * jobs - 1))
        )
        results = _in_order(pool, func, pending, it, 2 * jobs, stop)
        # a reader that lets the results go before reading any (or is interrupted before)
        weakref.finalize(results, stop).atexit = False
    except BaseException:
        if stop is not None:
            stop()
        raise
    return results


def _in_order(
    pool: Any, func: Callable, pending: deque, it: Iterator[tuple[T, W]], ahead: int, stop
) -> Iterator[tuple[T, R]]:
    """The results of the pending items in order, handing out the rest of ``it`` as they
    are read; the workers are stopped when the reader stops (at the end, on an error, or
    when this generator is closed)."""
    try:
        while pending:
            tag, result = pending.popleft()
            for next_tag, work in islice(it, ahead - len(pending)):
                pending.append((next_tag, pool.apply_async(_call, (func, work))))
            yield tag, result.get()
    finally:
        stop()


STOP_WAIT = 2.0  # seconds `Pool.terminate` is given before the workers are killed


class _Stop:
    """Stops a pool's workers, once: at the end of its results, on an error, when the reader
    lets them go, or at the latest as the program exits, before multiprocessing's own exit
    handler (registered earlier, run later), which would terminate the pool without a bound.

    `Pool.terminate` can wait for ever: told to terminate, the pool's result thread stops
    reading after the next result, and a worker that then sends a result larger than a pipe
    holds (a chunk's counts are) blocks, holding the lock of the result queue, which
    terminate takes to send its own end-of-results before it ends the workers. So it runs
    in a thread of its own, given ``STOP_WAIT`` seconds; after that the workers are killed
    (SIGKILL ends a process blocked in a write) and the thread, if it still waits for that
    lock, is left to end with the program.
    """

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        atexit.register(self)

    def __call__(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        atexit.unregister(self)
        ending = threading.Thread(target=pool.terminate, name="nbspam-pool-end", daemon=True)
        ending.start()
        ending.join(STOP_WAIT)
        if ending.is_alive():
            workers = list(pool._pool)  # the pool's worker processes (not public)
            for worker in workers:
                worker.kill()
            for worker in workers:
                worker.join(STOP_WAIT)


@contextmanager
def _frozen_in_workers() -> Iterator[None]:
    """The objects this process has frozen (`gc.freeze`) for the workers forked in this
    block, and unfrozen here as it ends: a worker keeps them frozen for its life, so that its
    collections do not write the header of every object it inherited and copy their pages.
    Where objects are frozen already (by the program that imports nbspam), nothing is done."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _set_context(context: Any) -> None:
    # Ctrl-C reaches every process of the terminal's group: the main process alone answers
    # it (it ends the workers), so a worker does not print a traceback of its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _CONTEXT.append(context)


def _call(func: Callable[[Any, W], R], work: W) -> R:
    return func(_CONTEXT[-1], work)
