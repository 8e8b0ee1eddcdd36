"""Tokenizing and counting chunks of messages, in worker processes when there are several.

Each chunk becomes its own small count matrix over the chunk's terms (`count_chunk`, a pure
function); the caller renumbers the columns into its vocabulary (`vocabulary.renumber`).
Chunks come back in order, so the result is the same whatever the number of jobs.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import NamedTuple, TypeVar

import scipy.sparse as sp

from .config import TokenizerConfig
from .features import Analyzer
from .vocabulary import TermIndex, count_rows

T = TypeVar("T")
_ANALYZERS: dict[TokenizerConfig, Analyzer] = {}


class ChunkCounts(NamedTuple):
    """Count rows of a chunk: X (n, k) over the chunk's k terms, in order of first appearance."""

    terms: list[str]
    X: sp.csr_matrix


def count_chunk(datas: Sequence[bytes | str], tokenizer: TokenizerConfig) -> ChunkCounts:
    """Tokenize and count one chunk of messages (raw bytes or text)."""
    analyzer = _ANALYZERS.get(tokenizer)
    if analyzer is None:
        analyzer = _ANALYZERS[tokenizer] = Analyzer(tokenizer)
    index = TermIndex()
    X = count_rows((analyzer.tokens(data) for data in datas), index)
    return ChunkCounts(index.terms, X)


def count_chunks(
    chunks: Iterable[tuple[T, Sequence[bytes | str]]], tokenizer: TokenizerConfig, jobs: int = 1
) -> Iterator[tuple[T, ChunkCounts]]:
    """(tag, counts) for each (tag, messages) chunk, in order; tags stay in this process.

    With ``jobs`` > 1 and more than one chunk, ``jobs`` worker processes count the chunks,
    at most 2 * jobs chunks ahead of the reader, so memory stays bounded for any stream.
    """
    it = iter(chunks)
    head = list(islice(it, 2))
    if jobs <= 1 or len(head) < 2:
        for tag, datas in chain(head, it):
            yield tag, count_chunk(datas, tokenizer)
        return
    context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    with context.Pool(jobs) as pool:
        pending: deque = deque()
        for tag, datas in chain(head, it):
            pending.append((tag, pool.apply_async(count_chunk, (datas, tokenizer))))
            if len(pending) >= 2 * jobs:
                done_tag, result = pending.popleft()
                yield done_tag, result.get()
        while pending:
            done_tag, result = pending.popleft()
            yield done_tag, result.get()
