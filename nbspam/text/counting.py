"""Messages to token counts over their own terms, as plain Python arrays (no numpy).

Worker processes tokenize and count their chunk of messages here (`count_chunk`) and send
the counts back. They never import numpy or scipy, so the process that started them can
import those (half a second) while they work. `vocabulary.renumber` turns the counts into
CSR rows over a vocabulary.
"""

from __future__ import annotations

import time
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Any, NamedTuple, TypeVar

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

    ``terms`` (k,) in order of first appearance (as str, or `EncodedTerms` where training's
    workers send them). Document i holds ``sizes[i]`` distinct terms: the next ``sizes[i]``
    entries of ``cols`` (their columns, in order of first appearance in the document, not
    sorted) and of ``counts`` (their occurrences).
    """

    terms: list[str] | EncodedTerms
    cols: array
    counts: array
    sizes: array


def count_tokens(token_lists: Iterable[Sequence[str]]) -> ChunkCounts:
    """Count each document's tokens: one `Counter` per document (counted in C), its terms
    given their columns, one per distinct term of all the documents in order of first
    appearance, as soon as it is counted.

    A document's tokens and its `Counter` are let go of before the next document is
    tokenized: a chunk holds its columns and counts (8 bytes a term of a document), not
    every document's `Counter` at once (some 100 bytes a term, a chunk's peak in a worker
    process). The columns are numbered in the same pass that looks them up: a missing term
    gets the next number from the dictionary's default factory, all in C.
    """
    column: defaultdict[str, int] = defaultdict(count().__next__)
    cols, counts, sizes = array("i"), array("i"), array("i")
    for tokens in token_lists:
        counter = Counter(tokens)
        # arrays extended from lists: twice as fast as from iterators
        cols.fromlist(list(map(column.__getitem__, counter)))
        counts.fromlist(list(counter.values()))
        sizes.append(len(counter))
    return ChunkCounts(list(column), cols, counts, sizes)


@dataclass(frozen=True, slots=True)
class EncodedTerms:
    """A chunk's terms as a worker sends them to be merged (`vocabulary.TermTable`): their
    UTF-8 in one string, each term followed by a line break, and the Python `hash` of each,
    so that the process that merges them makes no str and no hash a term (and unpickles
    one string, not one a term). Its length is the number of terms.

    ``seed`` is the hash of `SEED_WORD` where the terms were hashed: a forked worker shares
    its parent's hash seed, and a table that finds another one hashes the terms again."""

    text: bytes
    hashes: array  # of "q" (int64)
    seed: int

    def __len__(self) -> int:
        return len(self.hashes)


SEED_WORD = "nbspam"  # what `EncodedTerms.seed` is the hash of


def encode_terms(terms: Sequence[str], hasher: Callable[[str], int] = hash) -> EncodedTerms:
    """``terms`` (none with a line break) as `EncodedTerms`, hashed by ``hasher`` (the
    seed is this interpreter's hash seed's)."""
    text = "\n".join(terms) + "\n" if terms else ""
    return EncodedTerms(
        text.encode("utf-8", "surrogatepass"),
        array("q", list(map(hasher, terms))),
        hash(SEED_WORD),
    )


_ANALYZERS: dict[TokenizerConfig, Analyzer] = {}  # one per configuration, in each process


def count_chunk(tokenizer: TokenizerConfig, datas: Sequence[bytes | str]) -> ChunkCounts:
    """Tokenize and count one chunk of messages (raw bytes or text)."""
    analyzer = _ANALYZERS.get(tokenizer)
    if analyzer is None:
        analyzer = _ANALYZERS[tokenizer] = Analyzer(tokenizer)
    return count_tokens(map(analyzer.tokens, datas))


def count_chunk_encoded(tokenizer: TokenizerConfig, datas: Sequence[bytes | str]) -> ChunkCounts:
    """`count_chunk` with the terms as `EncodedTerms`, for a chunk to be merged into a
    `vocabulary.TermTable` (training's)."""
    counted = count_chunk(tokenizer, datas)
    return counted._replace(terms=encode_terms(counted.terms))


def count_chunks(
    items: Iterable[tuple[T, Sequence[bytes | str]]], tokenizer: TokenizerConfig, jobs: int = 1
) -> Iterator[tuple[T, ChunkCounts]]:
    """(tag, counts) for each (tag, messages) chunk, in order, by ``jobs`` worker processes
    (`parallel.imap_ordered`: they have started when this returns)."""
    return imap_ordered(count_chunk, tokenizer, items, jobs)


class LabelledChunks:
    """A stream of labelled messages counted a chunk at a time: the labels and `ChunkCounts`
    of each chunk as it comes (its terms `EncodedTerms`), not summed (`model.ClassCountsBuilder`
    sums them), each distinct message counted once (as `learn` would: by
    `messages.message_digest`).

    Iterating gives (labels, counts) for each chunk, and sets ``digests`` to the digests of
    its messages. When it is done, ``seen`` (`Seen`) holds the digest of every message
    counted with its label, and ``duplicates`` is the number of messages skipped as already
    counted. The workers start at once; ``started`` is when (`time.perf_counter`).
    ``noted`` is given the digest of each message to be counted and the message, as its
    chunk is read (training notes each one's date), so that no one digests it again.
    """

    def __init__(
        self,
        messages: Iterable[Message],
        tokenizer: TokenizerConfig,
        *,
        progress: Callable[[int], None] | None = None,
        jobs: int = 1,
        noted: Callable[[bytes, Message], None] | None = None,
    ) -> None:
        self.started = time.perf_counter()
        self.seen = Seen()
        self.duplicates = 0
        self.digests: list[bytes] = []
        self._noted = noted
        fresh = self._fresh(messages, progress)
        self._results = imap_ordered(count_chunk_encoded, tokenizer, fresh, jobs)

    def __iter__(self) -> Iterator[tuple[list[str], ChunkCounts]]:
        return map(self._handed, self._results)  # no generator of its own between

    def _handed(self, result: tuple[tuple[list[str], list[bytes]], ChunkCounts]):
        (labels, self.digests), counts = result
        return labels, counts

    def _fresh(
        self, messages: Iterable[Message], progress: Callable[[int], None] | None
    ) -> Iterator[tuple[tuple[list[str], list[bytes]], list[bytes | str]]]:
        for chunk in chunks(messages):
            fresh, digests = first_copies(chunk, self.seen)
            self.duplicates += len(chunk) - len(fresh)
            if self._noted is not None:
                for digest, message in zip(digests, fresh):
                    self._noted(digest, message)
            yield ([m.label for m in fresh], digests), [m.data for m in fresh]
            if progress:
                progress(len(chunk))


def first_copies(messages: Sequence[Message], seen: Seen) -> tuple[list[Message], list[bytes]]:
    """The messages whose bytes are not in ``seen`` yet, and their digests, each added to it
    as it comes: a repeated message counts once, under the label of its first copy."""
    fresh, digests = [], []
    for message in messages:
        digest = message_digest(message.data)
        if digest not in seen:
            seen.add(digest, message.label)
            fresh.append(message)
            digests.append(digest)
    return fresh, digests


class Seen:
    """The digests of the messages counted (16 bytes each), with the label of each: what
    makes a repeated message count once.

    The newest are kept in a dictionary (some 100 bytes a message); when it holds
    `MERGED_AT` of them, and an eighth as many as the rest, they are merged into one sorted
    array of digests and one of label codes, 17 bytes a message (numpy is imported then:
    counting a few thousand messages leaves it unimported). Found exactly: a digest is
    looked up in the dictionary, then by binary search in the sorted array."""

    MERGED_AT = 8192

    def __init__(self) -> None:
        self.recent: dict[bytes, str] = {}
        self.labels: list[str] = []
        """The labels the codes of the sorted array name."""
        self._sorted: Any = None  # digests as a numpy array of 16-byte strings, sorted
        self._codes: Any = None  # the label code of each

    def __len__(self) -> int:
        return len(self.recent) + (0 if self._sorted is None else len(self._sorted))

    def __contains__(self, digest: object) -> bool:
        if digest in self.recent:
            return True
        if self._sorted is None or not isinstance(digest, bytes) or len(digest) != 16:
            return False
        at = int(self._sorted.searchsorted(digest))
        return at < len(self._sorted) and self._sorted[at : at + 1].tobytes() == digest

    def add(self, digest: bytes, label: str) -> None:
        """Note a message not noted yet (``digest`` not in this set)."""
        self.recent[digest] = label
        if len(self.recent) >= max(self.MERGED_AT, len(self) // 9):
            self._merge()

    def _merge(self) -> None:
        import numpy as np

        codes = {label: i for i, label in enumerate(self.labels)}
        for label in self.recent.values():
            if label not in codes:
                codes[label] = len(self.labels)
                self.labels.append(label)
        kind = np.uint8 if len(self.labels) <= 256 else np.int32
        digests = np.frombuffer(b"".join(self.recent), "S16")
        new = np.fromiter(map(codes.__getitem__, self.recent.values()), kind, len(self.recent))
        if self._sorted is not None:
            digests = np.concatenate([self._sorted, digests])
            new = np.concatenate([self._codes.astype(kind), new])
        self._sorted = self._codes = None
        order = digests.argsort(kind="stable")
        self._sorted, self._codes = digests[order], new[order]
        self.recent = {}

    def arrays(self) -> tuple[Any, Any]:
        """(the digests (n, 16) as uint8, sorted; the code of each one's label in
        ``labels``, int64), every message noted merged."""
        import numpy as np

        if self.recent or self._sorted is None:
            if not self.recent:
                return np.zeros((0, 16), np.uint8), np.zeros(0, np.int64)
            self._merge()
        return self._sorted.view(np.uint8).reshape(-1, 16), self._codes.astype(np.int64)
