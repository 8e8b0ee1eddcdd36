"""The Model: raw counts plus settings; training, scoring and explanation derive from them."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from typing import Any, ClassVar

import numpy as np

from ..core.parallel import CHUNK, chunks
from ..core.settings import (
    AUTO,
    AUTO_FALLBACK,
    MAX_LABEL_CHARS,
    MAX_LABELS,
    Settings,
    TokenizerConfig,
    TrainConfig,
)
from ..core.sparse import sp
from ..errors import NbspamError, TrainingError
from ..mail.message import Message
from ..text.counting import ChunkCounts, LabelledChunks, Seen, count_chunk, count_chunks
from ..text.counts import ClassCounts
from ..text.vocabulary import (
    Terms,
    TermTable,
    count_rows,
    grown_apart,
    mutual_information,
    pair_terms,
    renumber,
    rows_over,
    select_terms,
    sorted_order,
    stack_in_order,
    stop_terms,
)
from . import naive_bayes as nb
from .decision import (  # noqa: F401  (UNSURE: re-exported)
    UNSURE,
    Prediction,
    prediction,
    stored_cutoffs,
)
from .event_models import BLOCK, event_model
from .scoring_forms import FisherForm, LinearForm, predict_counts


@dataclass(frozen=True, eq=False)
class Model:
    """A trained naive Bayes model, stored as counts over the full vocabulary.

    labels (C,) sorted; terms (d,) sorted by code point, every term seen in training;
    class_count (C,) documents per class; term_count (C, d) occurrences per class;
    doc_count (C, d) documents per class containing the term; seen_digests (n, 16) the
    sorted digests of the n messages learned (`messages.message_digest`) and seen_labels
    (n,) the label index each was learned as. Two-class models may carry cutoffs
    (ham_cutoff, spam_cutoff) on the log-odds, for the verdicts negative / unsure / positive,
    and a Platt calibration (a, b): P(positive | x) = 1 / (1 + exp(-(a * log_odds + b))).
    The vocabulary filters
    (min_count, max_df, max_features) are applied when the scoring parameters are derived,
    so adding or removing documents only adds or subtracts counts.

    seen_times (n,) is when each message was learned, in seconds since 1970 (UTC), or
    `UNKNOWN_TIME` for messages learned before nbspam recorded it (a model built without
    them gets that for every message); `update.prune` expires digests by it.
    """

    def __post_init__(self) -> None:
        n = len(self.seen_digests)
        if len(self.seen_times) != n:
            if len(self.seen_times):
                raise ValueError("seen_times must have one entry per digest")
            object.__setattr__(self, "seen_times", np.full(n, UNKNOWN_TIME, np.int64))

    labels: tuple[str, ...]
    terms: Terms
    class_count: np.ndarray
    term_count: np.ndarray
    doc_count: np.ndarray
    tokenizer: TokenizerConfig
    training: TrainConfig
    seen_digests: np.ndarray = field(default_factory=lambda: np.zeros((0, 16), np.uint8))
    seen_labels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    seen_times: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cutoffs: tuple[float, float] | None = None
    calibration: tuple[float, float] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def counts(self) -> ClassCounts:
        """The model's counts as one value, to add to and subtract from."""
        return ClassCounts(
            self.labels, self.terms, self.class_count, self.term_count, self.doc_count
        )

    @property
    def is_binary(self) -> bool:
        """True for two-class models, which have a positive class and log-odds."""
        return len(self.labels) == 2

    @property
    def positive_index(self) -> int:
        return self.labels.index(self.training.positive)

    @property
    def negative_index(self) -> int:
        return 1 - self.positive_index

    @cached_property
    def form(self) -> LinearForm | FisherForm:
        """The model's scoring form (`scoring_forms`), derived from the counts on first use."""
        return make_form(self)

    # -- the model interface (`interface.NaiveBayesModel`) ------------------------------------

    kind: ClassVar[str] = "messages"

    @property
    def positive(self) -> str | None:
        """The class the log-odds point to (two classes); None for more."""
        return self.training.positive if self.is_binary else None

    def predict(self, messages: Iterable[Message], *, jobs: int = 1) -> Iterator[Prediction]:
        """A `decision.Prediction` for each `message.Message` (`score`)."""
        return score(self, messages, jobs=jobs)

    def explain(
        self,
        messages: Iterable[Message] | None = None,
        *,
        top: int = 20,
        against: str | None = None,
    ) -> Any:
        """Without messages, each class's ``top`` terms of most weight (`explain.top_terms`);
        with them, an `explain.MessageExplanation` (or `explain.FisherExplanation`) of each.
        ``against``: more than two classes, the class compared with (default the runner-up)."""
        from ..text.features import Analyzer
        from . import explain as ex

        if against is not None and against not in self.labels:
            raise TrainingError(
                f"--against {against!r} is not one of the labels {list(self.labels)}"
            )
        if messages is None:
            return ex.top_terms(self, top, against=against)
        analyzer = Analyzer(self.tokenizer)
        return (
            ex.explain_message(self, m.id, analyzer.tokens(m.data), against=against)
            for m in messages
        )

    def merge(self, others: Sequence[Model]) -> Model:
        """`merge` of this model and ``others``."""
        return merge([self, *others])

    def describe(self) -> dict[str, Any]:
        """What `info` shows: labels with their messages, positive class, vocabulary,
        settings, decision rule and history."""
        return {
            "kind": self.kind,
            "labels": {label: int(n) for label, n in zip(self.labels, self.class_count)},
            "positive": self.training.positive,
            "messages": int(self.class_count.sum()),
            "terms_seen": len(self.terms),
            "terms_kept": int(self.form.kept.size),
            "settings": {
                "train": self.training.as_dict(),
                "tokenizer": self.tokenizer.as_dict(),
            },
            "cutoffs": stored_cutoffs(self.cutoffs),
            "calibration": None if self.calibration is None else list(self.calibration),
            "history": self.info,
        }


UNKNOWN_TIME = -1
"""The learn time of a message learned before models recorded learn times."""


def make_form(model: Model) -> LinearForm | FisherForm:
    """Apply the vocabulary filters (with --max-features, the terms of most documents or of
    most mutual information with the label), then the event model's scoring form."""
    return event_model(model.training.event_model).form(model, kept_columns(model))


def kept_columns(model: Model) -> np.ndarray:
    """The columns of the model's vocabulary that its vocabulary filters keep, in order."""
    cfg = model.training
    n_docs = int(model.class_count.sum())
    doc_freq = model.doc_count.sum(axis=0)
    if cfg.stop_words:  # in place: the sum is this function's own array
        doc_freq[stop_terms(model.terms, cfg.stop_words)] = 0
    if not cfg.score_pairs and model.tokenizer.word_pairs != "none":
        doc_freq[pair_terms(model.terms)] = 0
    rank = None  # --select frequency: the terms in most messages
    if cfg.select == "mi":  # a block of terms at a time: I of a term is its own counts'
        rank = np.empty(doc_freq.size)
        for start in range(0, rank.size, BLOCK):
            block = slice(start, start + BLOCK)
            rank[block] = mutual_information(model.doc_count[:, block], model.class_count)
    keep = select_terms(
        doc_freq,
        n_docs,
        min_count=cfg.min_count,
        max_df=cfg.max_df,
        max_features=cfg.max_features,
        rank=rank,
    )
    return np.flatnonzero(keep)


def from_counts(
    counts: ClassCounts,
    settings: Settings,
    info: dict[str, Any] | None = None,
    seen: dict[bytes, str] | Seen | None = None,
    *,
    sorted_terms: bool = False,
    times: dict[bytes, int] | None = None,
    default_time: int = UNKNOWN_TIME,
) -> Model:
    """Build a Model from counts in any label and term order (they are sorted here; the
    terms not if ``sorted_terms`` says they already are).

    ``seen`` maps the digest of every message counted to its label, ``times`` some of
    them to when they were learned (seconds since 1970); the others get ``default_time``.

    With --event-model auto the model is `settings.AUTO_FALLBACK`'s: there is no
    cross-validation here to choose by (`training.train` runs one).

    Checks that there are two or more classes with documents (and not more than a model
    file holds, each named), resolves the positive class
    of a two-class model (``train.positive``, else the label 'spam', else the label that
    sorts last) and that the prior fits the labels.
    """
    label_order = sorted(range(len(counts.labels)), key=counts.labels.__getitem__)
    counts = counts.in_order(label_order, None if sorted_terms else sorted_order(counts.terms))
    labels = counts.labels
    terms = counts.terms  # sorted now: packed, or marked, as such
    if not isinstance(terms, Terms):
        terms = Terms.of(terms, ordered=True)
    elif not terms.ordered:
        terms = Terms(terms.blob, terms.offsets, ordered=True)
    if len(labels) < 2:
        raise TrainingError(
            f"need messages of at least two labels to train, found only {', '.join(labels) or 'none'}"
        )
    if len(labels) > MAX_LABELS:
        raise TrainingError(f"found {len(labels):,} labels; a model holds at most {MAX_LABELS:,}")
    for label in labels:
        if not 0 < len(label) <= MAX_LABEL_CHARS:
            raise TrainingError(f"a label must have 1 to {MAX_LABEL_CHARS:,} characters: {label!r}")
    train_cfg = settings.training
    positive = train_cfg.positive
    if positive is not None and positive not in labels:
        raise TrainingError(f"--positive {positive!r} is not one of the labels {list(labels)}")
    if len(labels) == 2 and positive is None:
        positive = "spam" if "spam" in labels else labels[-1]
    train_cfg = train_cfg.replace(positive=positive)
    if train_cfg.event_model == AUTO:
        train_cfg = train_cfg.replace(event_model=AUTO_FALLBACK)
    nb.prior_weights(train_cfg.prior, labels)
    digests, seen_labels, seen_times = _seen_arrays(seen or {}, labels, times or {}, default_time)
    model = Model(
        labels=labels,
        terms=terms,
        class_count=counts.class_count,
        term_count=counts.term_count,
        doc_count=counts.doc_count,
        tokenizer=settings.tokenizer,
        training=train_cfg,
        seen_digests=digests,
        seen_labels=seen_labels,
        seen_times=seen_times,
        info=dict(info or {}),
    )
    if not model.form.kept.size:
        raise TrainingError(
            f"no terms survive --min-count {train_cfg.min_count} and --max-df "
            f"{train_cfg.max_df:g}; try a lower --min-count or a higher --max-df"
        )
    return model


def _seen_arrays(
    seen: dict[bytes, str] | Seen,
    labels: Sequence[str],
    times: dict[bytes, int],
    default_time: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(digests (n, 16) sorted, the label index of each, when each was learned) of the
    messages ``seen`` (digest -> label), in arrays from the start: 32 bytes a message, not
    a sorted list of pairs (and a time) of some 150."""
    if isinstance(seen, Seen):  # sorted already, in arrays
        digests, codes = seen.arrays()
        index = np.array([labels.index(label) for label in seen.labels], np.int64)
        when = np.full(len(digests), default_time, np.int64)
        if times:
            when = np.fromiter(
                map(times.get, map(bytes, digests), repeat(default_time)), np.int64, len(digests)
            )
        return digests, index[codes] if index.size else codes, when
    digests = np.frombuffer(b"".join(seen), np.uint8).reshape(-1, 16)
    hi, lo = digest_halves(digests)
    order = np.lexsort((lo, hi))
    del hi, lo
    index = {label: i for i, label in enumerate(labels)}
    every = np.fromiter(map(index.__getitem__, seen.values()), np.int64, len(seen))
    when = np.fromiter(map(times.get, seen, repeat(default_time)), np.int64, len(seen))
    return digests[order], every[order], when[order]


CV_ROWS = 10_000
"""The most messages whose count rows training keeps for its internal cross-validation."""
SAMPLE_SEED = b"nbspam cross-validation sample"


def sample_key(digest: bytes) -> int:
    """The key of a message for the cross-validation sample (the smallest are taken): the
    first 8 bytes, big-endian, of BLAKE2b of its digest keyed with `SAMPLE_SEED`."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(digest, digest_size=8, key=SAMPLE_SEED).digest(), "big")


def digest_halves(digests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Digests (n, 16) of uint8 as two big-endian uint64 halves: sorting by (hi, lo) is
    sorting the digests' bytes."""
    pairs = np.ascontiguousarray(digests).view(">u8").reshape(-1, 2)
    return pairs[:, 0].astype(np.uint64), pairs[:, 1].astype(np.uint64)


def sample_order(keys: np.ndarray, digests: np.ndarray) -> np.ndarray:
    """The rows in the order the sample takes them: by `sample_key`, ties by digest."""
    hi, lo = digest_halves(digests)
    return np.lexsort((lo, hi, keys))


def _counts_type(counts: np.ndarray) -> type:
    """The smallest of uint8, uint16 and int32 that holds the (positive) ``counts``."""
    top = int(counts.max(initial=0))
    return np.uint8 if top < 2**8 else np.uint16 if top < 2**16 else np.int32


@dataclass
class SampledRows:
    """Per-message count rows (not summed per class, unlike `ClassCounts`) kept while
    training, for the internal cross-validation: of every distinct message while there are
    at most ``limit``, then of the ``limit`` with the smallest `sample_key` (a keyed hash of
    the message's digest, ties by the digest), in the order counted. The sample so needs
    neither the number of messages in advance nor more than ``limit`` rows at a time, and
    it is the same for any number of jobs and any partitions (`tally`, on a Dask cluster,
    draws the same one). One matrix per chunk, columns numbered in order of first
    appearance, and the label of each row.

    ``totals`` are the counts of all the messages: the cross-validation fits each fold's
    model on all the messages but that fold's.
    """

    limit: int = CV_ROWS
    chunks: list[tuple[sp.csr_matrix, list[str], np.ndarray]] = field(default_factory=list)
    """(rows, their labels, their numbers in the stream) of each chunk."""
    seen: int = 0
    terms: Sequence[str] = ()
    """The terms sorted by code point, once known."""
    order: np.ndarray | None = None
    """The permutation that sorts the terms of the columns into ``terms``, once known."""
    totals: ClassCounts | None = None
    """The counts of all the messages, over the sorted terms, once known."""
    ranks: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    """(keys, digests) of each chunk's rows, what the sample is drawn by."""
    dated: Callable[[Sequence[bytes]], list[float]] | None = None
    """Where given, the date of each message of a chunk from its digest (NaN where it has
    none): the dates of the rows kept are kept beside them (`times`)."""
    dates: list[np.ndarray] = field(default_factory=list)
    """The dates of each chunk's rows kept, where ``dated`` gives them."""

    @property
    def labels(self) -> list[str]:
        self._trim()
        return [label for _, labels, _ in self.chunks for label in labels]

    def add(self, X: sp.csr_matrix, labels: Sequence[str], digests: Sequence[bytes]) -> None:
        """Keep the rows of a chunk (``digests``: its messages') that the sample takes: the
        indices as int32, the counts in the smallest unsigned integers that hold them
        (uint8 for most chunks: 5 bytes an entry where int64 took 16)."""
        if not X.shape[0]:  # a chunk of messages counted before: no row, no date
            return
        numbers = np.arange(self.seen, self.seen + X.shape[0])
        self.seen += X.shape[0]
        X = sp.csr_matrix(
            (
                X.data.astype(_counts_type(X.data)),
                X.indices.astype(np.int32),
                X.indptr.astype(np.int32),
            ),
            shape=X.shape,
        )
        keys = np.array([sample_key(d) for d in digests], np.uint64)
        raw = np.frombuffer(b"".join(digests), np.uint8).reshape(-1, 16)
        self.chunks.append((X, list(labels), numbers))
        self.ranks.append((keys, raw))
        if self.dated is not None:
            self.dates.append(np.array(self.dated(digests), np.float64))
        if self._held() > self.limit + self.limit // 8:
            self._trim()

    def _held(self) -> int:
        return sum(len(labels) for _, labels, _ in self.chunks)

    def _trim(self) -> None:
        """Drop the rows held past the ``limit`` the sample takes. `add` lets an eighth of
        ``limit`` more be held before it drops them: a full sample of 10,000 rows loses a
        few of most of its chunks' rows with each new chunk, and each such chunk's rows are
        copied, which a drop every chunk did for every chunk (8 MB of rows at 19,000
        messages, 36 times); a row held past the limit is one the sample would have dropped
        by then, and it is the same sample."""
        kept = self._held()
        if kept <= self.limit or not self.ranks:
            return
        keys = np.concatenate([k for k, _ in self.ranks])
        digests_kept = np.concatenate([d for _, d in self.ranks])
        drop = np.zeros(kept, bool)
        drop[sample_order(keys, digests_kept)[self.limit :]] = True
        chunks, ranks, dates, at = [], [], [], 0
        for i, ((Y, y, n), (k, d)) in enumerate(zip(self.chunks, self.ranks)):
            self.chunks[i] = None  # let go of as its rows are copied: not all held twice
            keep = ~drop[at : at + len(y)]
            at += len(y)
            if keep.all():  # not copied again: a chunk's rows are copied when they go
                chunks.append((Y, y, n))
                ranks.append((k, d))
                dates.extend(self.dates[i : i + 1])  # a date for each chunk kept, if dated
            elif keep.any():
                chunks.append((Y[keep], [v for v, t in zip(y, keep.tolist()) if t], n[keep]))
                ranks.append((k[keep], d[keep]))
                dates.extend(dated[keep] for dated in self.dates[i : i + 1])
            del Y
        self.chunks, self.ranks, self.dates = chunks, ranks, dates

    def times(self) -> list[float]:
        """The date of each row (`dated`), in their order."""
        self._trim()
        return np.concatenate(self.dates).tolist() if self.dates else []

    def numbers(self) -> np.ndarray:
        """The number of each row in the stream of messages counted (n,)."""
        self._trim()
        return np.concatenate([numbers for _, _, numbers in self.chunks])

    def matrix(self) -> tuple[sp.csr_matrix, Sequence[str]]:
        """(X (n, d) over the sorted terms, the sorted terms). The rows are then kept as X
        alone (one chunk over the sorted terms), not twice."""
        if not self.chunks:
            return stack_in_order([], self.order), self.terms
        labels, numbers = self.labels, self.numbers()
        blocks = [X for X, _, _ in self.chunks]
        # the smallest type that holds the counts, however the chunks were kept (`add`, or
        # a cluster's `tally`): the same matrix either way
        kind = _counts_type(np.array([b.data.max(initial=0) for b in blocks]))
        self.chunks = []  # each chunk's rows let go of as they are stacked
        X = stack_in_order(blocks, self.order, release=True, dtype=kind)
        self.chunks = [(X, labels, numbers)]
        self.order = np.arange(len(self.terms))
        return X, self.terms


def fit_messages(
    messages: Iterable[Message],
    settings: Settings,
    *,
    progress: Callable[[int], None] | None = None,
    rows: SampledRows | None = None,
    jobs: int = 1,
) -> Model:
    """Fit a model on labelled messages, streaming: only the counts are kept in memory. No
    decision rule is fitted (`training.train` fits one).

    Messages are tokenized and counted a chunk at a time by ``jobs`` worker processes
    (`counting.LabelledChunks`: a message whose bytes were already counted is counted once,
    as `learn` would do), then `fit_counted`. The model is the same for any number of jobs.
    """
    counted = LabelledChunks(messages, settings.tokenizer, progress=progress, jobs=jobs)
    return fit_counted(counted, settings, rows=rows)


def fit_counted(
    counted: LabelledChunks, settings: Settings, *, rows: SampledRows | None = None
) -> Model:
    """Train a model on the counts of labelled messages.

    Each chunk's counts are folded into per-class totals (`naive_bayes.class_counts`) and
    dropped, unless ``rows`` is given, which then keeps them (or its sample of them) and the
    totals.
    """
    counts = ClassCountsBuilder()
    for labels, chunk in counted:
        X = counts.add_counts(chunk, labels)
        if rows is not None:
            rows.add(X, labels, counted.digests)
    if not counts.labels:
        raise TrainingError("no messages to train on")
    total = counts.totals()
    del counts  # the table's hashes: the terms are kept, sorted, in the model
    order = sorted_order(total.terms)
    info = {
        "created": utc_timestamp(),
        "seconds": round(time.perf_counter() - counted.started, 3),
        "duplicates": counted.duplicates,
    }
    # labels and terms sorted at once: the model holds these arrays, not another copy
    total = total.in_order(sorted(range(len(total.labels)), key=total.labels.__getitem__), order)
    model = from_counts(
        total, settings, info, counted.seen, sorted_terms=True, default_time=int(time.time())
    )
    if rows is not None:
        rows.terms, rows.order, rows.totals = model.terms, order, model.counts
    return model


class ClassCountsBuilder:
    """`ClassCounts` built up from `ChunkCounts` a chunk at a time (mutable; labels and terms
    in order of arrival); ``totals()`` gives the value.

    A chunk's counts are summed over its own terms and added in place to the totals, whose
    arrays grow by doubling: the work and the temporaries of a chunk are those of its
    terms, not of the whole vocabulary (a new pair of vocabulary-wide arrays a chunk, ever
    larger, left the allocator with more free holes than counts)."""

    def __init__(self) -> None:
        self.index = TermTable()
        self.labels: dict[str, int] = {}
        self._class = np.zeros(0, np.int64)
        self._term = np.zeros((0, 0), np.int64)
        self._doc = np.zeros((0, 0), np.int64)

    def add(self, messages: Sequence[Message], tokenizer: TokenizerConfig) -> sp.csr_matrix:
        """Count a chunk of labelled messages; returns its count rows (over ``index``)."""
        counted = count_chunk(tokenizer, [m.data for m in messages])
        return self.add_counts(counted, [m.label for m in messages])

    def add_counts(self, counted: ChunkCounts, labels: Sequence[str]) -> sp.csr_matrix:
        """Add a counted chunk with the label of each row; returns its rows over ``index``."""
        cols = self.index.columns(counted.terms)
        y = np.array(
            [self.labels.setdefault(label, len(self.labels)) for label in labels], np.int64
        )
        self._reserve(len(self.labels), len(self.index))
        own = rows_over(counted, np.arange(len(cols)), len(cols))  # over the chunk's terms
        class_count, term_count, doc_count = nb.class_counts(own, y, len(self.labels))
        c = len(self.labels)
        self._class[:c] += class_count
        self._term[:c, cols] += term_count
        self._doc[:c, cols] += doc_count
        return rows_over(counted, cols, len(self.index))

    def _reserve(self, c: int, d: int) -> None:
        """Room for c labels and d terms (when the terms' room runs out, at least twice as
        much: the arrays are `zeros_apart`, whose room not yet written takes no memory)."""
        rows, room = self._term.shape
        if c <= rows and d <= room:
            return
        rows, room = max(c, rows), room if d <= room else max(d, 2 * room, 1024)
        self._class = grown_apart(self._class, (rows,))
        self._term = grown_apart(self._term, (rows, room))
        self._doc = grown_apart(self._doc, (rows, room))

    def totals(self) -> ClassCounts:
        """The counts of all the chunks, labels and terms in order of arrival (views of
        the builder's arrays)."""
        c, d = len(self.labels), len(self.index)
        return ClassCounts(
            tuple(self.labels),
            self.index.terms(),
            self._class[:c],
            self._term[:c, :d],
            self._doc[:c, :d],
        )


def utc_timestamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def fit(
    X: sp.csr_matrix,
    y: Sequence[str],
    terms: Sequence[str],
    settings: Settings,
    *,
    sorted_terms: bool = False,
) -> Model:
    """Train on a count matrix X (n, d) whose columns are ``terms`` and labels y (n,).

    ``sorted_terms`` says the terms are already in code-point order (as `vocabulary`
    and `evaluate.tokenize_all` give them), which saves sorting them again.
    """
    labels = sorted(set(y))
    y_idx = np.searchsorted(np.array(labels, dtype=object), np.array(y, dtype=object))
    counts = nb.class_counts(X, y_idx.astype(np.int64), len(labels))
    return from_counts(
        ClassCounts(tuple(labels), tuple(terms), *counts), settings, sorted_terms=sorted_terms
    )


def transform(model: Model, token_lists: Iterable[Sequence[str]]) -> sp.csr_matrix:
    """Count matrix (n, k) of documents over the model's kept terms (unknown terms ignored)."""
    return count_rows(token_lists, model.form.index, grow=False)


def predict_matrix(model: Model, X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray | None]:
    """(log posteriors (n, C), log-odds (n,) or None) for a matrix from `transform`, by the
    model's scoring form (`scoring_forms.predict_counts`)."""
    return predict_counts(model.form, X)


def score(
    model: Model, messages: Iterable[Message], *, chunk: int = CHUNK, jobs: int = 1
) -> Iterator[Prediction]:
    """Predictions for a stream of messages, scored a chunk at a time (by ``jobs`` workers)."""
    parts = ((part, [m.data for m in part]) for part in chunks(messages, chunk))
    for part, counted in count_chunks(parts, model.tokenizer, jobs):
        # a row's indices in the order its terms first appear: the scoring table sums in it
        X = renumber(counted, model.form.index, grow=False)
        log_post, log_odds = predict_matrix(model, X)
        for i, message in enumerate(part):
            yield prediction(
                message.id,
                model.labels,
                log_post[i].tolist(),
                None if log_odds is None else float(log_odds[i]),
                positive=model.training.positive,
                cutoffs=model.cutoffs,
                calibration=model.calibration,
            )


# -- exact learning: a model's counts plus and minus counts ---------------------------------------


def seen_map(model: Model) -> dict[bytes, str]:
    """The record of learned messages as digest -> label."""
    return {bytes(d): model.labels[k] for d, k in zip(model.seen_digests, model.seen_labels)}


def times_map(model: Model) -> dict[bytes, int]:
    """When each learned message was learned, digest -> seconds since 1970 (or
    `model.UNKNOWN_TIME`)."""
    return dict(zip(map(bytes, model.seen_digests), model.seen_times.tolist()))


def apply_counts(
    model: Model,
    plus: ClassCounts | None,
    minus: ClassCounts | None,
    seen: dict[bytes, str],
    times: dict[bytes, int],
    *,
    clip: bool = False,
) -> Model:
    """The model with the counts ``plus`` added and ``minus`` subtracted; with ``clip`` (or
    for a pruned model) term counts that would go below zero stop at zero."""
    if plus is None and minus is None:
        return model
    total = model.counts
    pruned = "pruned" in model.info
    if plus is not None:
        total = total.plus(plus)
    if minus is not None:
        if pruned:  # the terms prune dropped are not there to subtract
            minus = _within(minus, model.terms)
        total = total.minus(minus)
    if pruned or clip:
        total = _clipped(total)
    if total.is_negative():
        raise TrainingError(
            "forgetting these messages would make counts negative: they were learned by a "
            "version of nbspam that tokenized them differently; retrain the model"
        )
    settings = Settings(tokenizer=model.tokenizer, training=model.training)
    info = {**model.info, "updated": utc_timestamp()}
    updated = from_counts(total.pruned(), settings, info, seen, times=times)
    # the cutoffs and calibration were fitted when the model was trained; they stay
    return dataclasses.replace(updated, cutoffs=model.cutoffs, calibration=model.calibration)


def _within(counts: ClassCounts, terms: Sequence[str]) -> ClassCounts:
    """``counts`` over only those of its terms that are among ``terms``."""
    import numpy as np

    known = set(terms)
    cols = [j for j, term in enumerate(counts.terms) if term in known]
    return counts.in_order(terms=np.array(cols, np.int64))


def _clipped(counts: ClassCounts) -> ClassCounts:
    """A pruned model's term counts after forgetting, never below zero: a term dropped and
    learned again may be subtracted by a message that held it before (inexact, as
    `PRUNE_NOTE` says)."""
    import numpy as np

    term_count = np.maximum(counts.term_count, 0)
    doc_count = np.minimum(np.maximum(counts.doc_count, 0), term_count)
    return dataclasses.replace(counts, term_count=term_count, doc_count=doc_count)


# -- merging: the counts of models trained on disjoint messages, added ---------------------


AUTO_CHOSEN = (
    "event_model",
    "alpha",
    "complement_norm",
    "strength",
    "stop_words",
    "min_count",
    "select",
    "max_features",
    "score_pairs",
)


def merge(models: Sequence[Model]) -> Model:
    """Add models trained on disjoint sets of messages with the same settings.

    The counts add up exactly, to those of training on all the messages. The settings that
    auto chose for each part (`AUTO_CHOSEN`: the event model, its smoothing, the words
    left out) may differ between parts trained with ``--event-model auto``: the merged
    model takes those of the part that learned most messages (ties: the first given), and
    that part's cutoffs and calibration, as if it had learned the other parts' messages
    (`learn` keeps a model's settings and decision rule). Models with other differences in
    their settings are refused, and so are models that learned a message in common (it
    would be counted twice).
    """
    first = models[0]
    for other in models[1:]:
        if other.tokenizer != first.tokenizer:
            diff = _first_difference(first.tokenizer, other.tokenizer)
            raise NbspamError(f"cannot merge models with different settings: {diff}")
        a, b = _compared(first), _compared(other)
        if a != b:
            raise NbspamError(
                f"cannot merge models with different settings: {_first_difference(a, b)}"
            )
    seen: dict[bytes, str] = {}
    times: dict[bytes, int] = {}
    total: ClassCounts | None = None
    for model in models:
        times.update(times_map(model))
        for digest, label in seen_map(model).items():
            if digest in seen:
                raise NbspamError(
                    "cannot merge models that learned the same message (it would be counted "
                    "twice); train the parts on disjoint sets of messages"
                )
            seen[digest] = label
        total = model.counts if total is None else total.plus(model.counts)
    largest = largest_part(models)
    settings = Settings(tokenizer=first.tokenizer, training=largest.training)
    info: dict = {"created": utc_timestamp(), "merged": len(models)}
    if "auto" in largest.info:
        info["auto"] = {**largest.info["auto"], "merged": merged_note(models)}
    for key, what in (("expired", "digests"), ("pruned", "terms_dropped")):
        # forget must still know that digests were expired, or terms dropped, from a part
        parts = [m.info[key] for m in models if isinstance(m.info.get(key), dict)]
        if parts:
            info[key] = {
                what: sum(p.get(what, 0) for p in parts if type(p.get(what, 0)) is int),
                "last": max(str(p.get("last", "")) for p in parts),
            }
    merged = from_counts(total.pruned(), settings, info, seen, times=times)
    return dataclasses.replace(merged, cutoffs=largest.cutoffs, calibration=largest.calibration)


def largest_part(models: Sequence[Model]) -> Model:
    """The model that learned most messages (ties: the first)."""
    sizes = [int(m.class_count.sum()) for m in models]
    return models[sizes.index(max(sizes))]


def merged_note(models: Sequence[Model]) -> str:
    """How merge chose the settings and decision rule of the merged model."""
    largest = largest_part(models)
    total = sum(int(m.class_count.sum()) for m in models)
    size = int(largest.class_count.sum())
    same = all(_chosen(m) == _chosen(largest) for m in models)
    chosen = "the same settings" if same else "different settings"
    return (
        f"the {len(models)} parts had {chosen} (event model {largest.training.event_model}, as "
        f"the largest part chose); the merged model takes the settings, cutoffs and "
        f"calibration of the largest part ({size:,} of the {total:,} messages), fitted on "
        f"it alone: train on all the messages to fit them on everything"
    )


def _chosen(model: Model) -> tuple:
    return tuple(getattr(model.training, name) for name in AUTO_CHOSEN)


def _compared(model: Model):
    """A model's training settings as merge compares them: those auto chose left out,
    where auto chose them."""
    from ..core.settings import TrainConfig

    if "auto" not in model.info:
        return model.training
    defaults = TrainConfig()
    return model.training.replace(**{name: getattr(defaults, name) for name in AUTO_CHOSEN})


def _first_difference(a, b) -> str:
    for name in a.fields():
        if getattr(a, name) != getattr(b, name):
            return f"{name} is {getattr(a, name)!r} in one and {getattr(b, name)!r} in another"
    return "unknown"
