"""Messages to token counts over their own terms, as plain Python arrays (no numpy).

Worker processes tokenize and count their chunk of messages here (`count_chunk`) and send
the counts back. They never import numpy or scipy, so the process that started them can
import those (half a second) while they work. `vocabulary.renumber` turns the counts into
CSR rows over a vocabulary.
"""

from __future__ import annotations

import itertools
import time
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, count
from typing import NamedTuple, TypeVar

from ..core.parallel import chunks, imap_ordered
from ..core.settings import TokenizerConfig
from ..mail.headers import message_digest
from ..mail.message import Message
from .features import Analyzer

T = TypeVar("T")


class ChunkCounts(NamedTuple):
    """One chunk's token counts, message by message and unlabelled, over the chunk's own
    terms (not summed per class as `counts.ClassCounts`): n documents over k terms, the
    parts of a CSR matrix (n, k).

    ``terms`` (k,) in order of first appearance. Document i holds ``sizes[i]`` distinct
    terms: the next ``sizes[i]`` entries of ``cols`` (their columns, in order of first
    appearance in the document, not sorted) and of ``counts`` (their occurrences).
    """

    terms: list[str]
    cols: array
    counts: array
    sizes: array


def count_tokens(token_lists: Iterable[Sequence[str]]) -> ChunkCounts:
    """Count each document's tokens: one `Counter` per document (counted in C), then one
    column per distinct term of all the documents, in order of first appearance.

    The columns are numbered in the same pass that looks them up: a missing term gets the
    next number from the dictionary's default factory, all in C.
    """
    counters = [Counter(tokens) for tokens in token_lists]
    column: defaultdict[str, int] = defaultdict(count().__next__)
    cols = array("i", list(map(column.__getitem__, chain.from_iterable(counters))))
    return ChunkCounts(  # arrays made from lists: twice as fast as from iterators
        list(column),
        cols,
        array("i", list(chain.from_iterable([c.values() for c in counters]))),
        array("i", list(map(len, counters))),
    )


_ANALYZERS: dict[TokenizerConfig, Analyzer] = {}  # one per configuration, in each process


def count_chunk(tokenizer: TokenizerConfig, datas: Sequence[bytes | str]) -> ChunkCounts:
    """Tokenize and count one chunk of messages (raw bytes or text)."""
    analyzer = _ANALYZERS.get(tokenizer)
    if analyzer is None:
        analyzer = _ANALYZERS[tokenizer] = Analyzer(tokenizer)
    return count_tokens(map(analyzer.tokens, datas))


def count_chunks(
    items: Iterable[tuple[T, Sequence[bytes | str]]], tokenizer: TokenizerConfig, jobs: int = 1
) -> Iterator[tuple[T, ChunkCounts]]:
    """(tag, counts) for each (tag, messages) chunk, in order, by ``jobs`` worker processes
    (`parallel.imap_ordered`: they have started when this returns)."""
    return imap_ordered(count_chunk, tokenizer, items, jobs)


class LabelledChunks:
    """A stream of labelled messages counted a chunk at a time: the labels and `ChunkCounts`
    of each chunk as it comes, not summed (`model.ClassCountsBuilder` sums them), each
    distinct message counted once (as `learn` would: by `messages.message_digest`).

    Iterating gives (labels, counts) for each chunk. When it is done, ``seen`` maps the
    digest of every message counted to its label, and ``duplicates`` is the number of
    messages skipped as already counted. The workers start at once; ``started`` is when
    (`time.perf_counter`).
    """

    def __init__(
        self,
        messages: Iterable[Message],
        tokenizer: TokenizerConfig,
        *,
        progress: Callable[[int], None] | None = None,
        jobs: int = 1,
    ) -> None:
        self.started = time.perf_counter()
        self.seen: dict[bytes, str] = {}
        self.duplicates = 0
        self._results = count_chunks(self._fresh(messages, progress), tokenizer, jobs)

    def __iter__(self) -> Iterator[tuple[list[str], ChunkCounts]]:
        return self._results

    def digests(self, start: int, n: int) -> list[bytes]:
        """The digests of the ``n`` distinct messages counted from number ``start`` on (the
        chunks are counted ahead of the caller, never behind)."""
        ahead = len(self.seen) - start  # the digests from start on are the newest
        return list(itertools.islice(reversed(self.seen), ahead))[::-1][:n]

    def _fresh(
        self, messages: Iterable[Message], progress: Callable[[int], None] | None
    ) -> Iterator[tuple[list[str], list[bytes | str]]]:
        for chunk in chunks(messages):
            fresh = first_copies(chunk, self.seen)
            self.duplicates += len(chunk) - len(fresh)
            yield [m.label for m in fresh], [m.data for m in fresh]
            if progress:
                progress(len(chunk))


def first_copies(messages: Sequence[Message], seen: dict[bytes, str]) -> list[Message]:
    """The messages whose bytes are not in ``seen`` (digest -> label) yet, each added to it
    as it comes: a repeated message counts once, under the label of its first copy."""
    fresh = []
    for message in messages:
        digest = message_digest(message.data)
        if digest not in seen:
            seen[digest] = message.label
            fresh.append(message)
    return fresh
