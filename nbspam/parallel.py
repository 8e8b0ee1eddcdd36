"""Work on chunks of messages in worker processes, with the results in order.

`imap_ordered` runs a function over a stream of chunks in ``jobs`` worker processes. The
workers are forked, so they inherit a read-only context (a tokenizer configuration, a
scoring table) instead of receiving it with every chunk. Results come back in the order of
the chunks, so the outcome is the same whatever the number of jobs.

`count_chunk` tokenizes and counts one chunk of messages into a small count matrix over the
chunk's own terms (a pure function); the caller renumbers the columns into its vocabulary
(`vocabulary.renumber`).
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from .config import TokenizerConfig
from .features import Analyzer

if TYPE_CHECKING:
    import scipy.sparse as sp

T = TypeVar("T")
W = TypeVar("W")
R = TypeVar("R")
C = TypeVar("C")
CHUNK = 250  # messages tokenized as one piece of work
_ANALYZERS: dict[TokenizerConfig, Analyzer] = {}
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
    at most 2 * jobs items ahead of the reader, so memory stays bounded for any stream.
    ``func`` must be a module-level function (it is sent to the workers by name). Where
    processes cannot be forked, the work is done in this process.
    """
    it = iter(items)
    head = list(islice(it, 2))
    if jobs <= 1 or len(head) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        for tag, work in chain(head, it):
            yield tag, func(context, work)
        return
    fork = multiprocessing.get_context("fork")
    with fork.Pool(jobs, initializer=_set_context, initargs=(context,)) as pool:
        pending: deque = deque()
        for tag, work in chain(head, it):
            pending.append((tag, pool.apply_async(_call, (func, work))))
            if len(pending) >= 2 * jobs:
                done_tag, result = pending.popleft()
                yield done_tag, result.get()
        while pending:
            done_tag, result = pending.popleft()
            yield done_tag, result.get()


def _set_context(context: Any) -> None:
    _CONTEXT.append(context)


def _call(func: Callable[[Any, W], R], work: W) -> R:
    return func(_CONTEXT[-1], work)


class ChunkCounts(NamedTuple):
    """Count rows of a chunk: X (n, k) over the chunk's k terms, in order of first appearance."""

    terms: list[str]
    X: sp.csr_matrix


def count_chunk(tokenizer: TokenizerConfig, datas: Sequence[bytes | str]) -> ChunkCounts:
    """Tokenize and count one chunk of messages (raw bytes or text)."""
    from .vocabulary import TermIndex, count_rows  # numpy and scipy: not for scoring

    analyzer = _ANALYZERS.get(tokenizer)
    if analyzer is None:
        analyzer = _ANALYZERS[tokenizer] = Analyzer(tokenizer)
    index = TermIndex()
    X = count_rows((analyzer.tokens(data) for data in datas), index)
    return ChunkCounts(index.terms, X)


def count_chunks(
    items: Iterable[tuple[T, Sequence[bytes | str]]], tokenizer: TokenizerConfig, jobs: int = 1
) -> Iterator[tuple[T, ChunkCounts]]:
    """(tag, counts) for each (tag, messages) chunk, in order (`imap_ordered`)."""
    return imap_ordered(count_chunk, tokenizer, items, jobs)
