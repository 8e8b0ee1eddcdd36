"""Scoring messages without numpy or scipy, from the scoring arrays in the model file.

A process that scores messages pays for every import, and scoring needs no matrices: each
message is a short sum of weights. This path reads the file's scoring arrays as memory
views and sums the same weights in the same order as `model.score` (the order in which the
message's terms first appear), so the log-odds are the same to the last bit. One message
(a mail filter started per delivery) looks its terms up by binary search in the sorted
UTF-8 vocabulary; a batch first builds a dictionary term -> weight and is scored by forked
worker processes that share it.
"""

from __future__ import annotations

import functools
import math
import operator
import os
import struct
import sys
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import compress, count, repeat

from ..errors import ModelFileError
from ..models.decision import Prediction, log_posterior_two, prediction
from ..store import container, schema
from ..text.features import Analyzer

TYPE_CHECKING = False
if TYPE_CHECKING:  # the one-message path imports neither: a filter started per delivery
    from typing import Any

    from ..mail.message import Message
    from ..models.model import Model

SCORE_CHUNK = 64  # messages scored as one piece of work: small, so that workers finish together


class ArrayScorer:
    """The scoring arrays of a model file (or of a Model in memory, `of_model`): enough to
    score messages, nothing to train."""

    def __init__(self, box: schema.ModelFile, path: str | os.PathLike[str]) -> None:
        header = box.header
        self.path = path
        self.labels: tuple[str, ...] = box.labels
        self.positive: str | None = box.training.positive if len(self.labels) == 2 else None
        self.cutoffs = box.cutoffs
        self.calibration = box.calibration
        self.tokenizer = box.tokenizer
        self.binary: bool = header["score"]["binary"]
        self.bias: float | None = header["score"]["bias"]
        # Robinson–Fisher: the rows of coef are ln f and ln(1 - f); the score is not linear
        self.fisher = header["score"].get("combine") == "fisher"
        self._box = box
        self._size = box.views["term_offsets"][2][0] - 1
        self._paged = PagedTable(path, box) if box.pages is not None else None
        if self._paged is None:
            self._terms = bytes(box.view("terms"))
            self._offsets = box.values("term_offsets")
        # the rows of coef (C, d), the intercept (C,) and the log-odds weights (d,)
        self._rows: list[Sequence[float]] = [
            self._vector("score_coef", c * self._size) for c in range(len(self.labels))
        ]
        self._intercept = box.values("score_intercept")
        self._weights: Sequence[float] | None = (
            self._vector("score_weights", 0) if self.positive and not self.fisher else None
        )
        self._analyzer = Analyzer(self.tokenizer)
        self._tables: list[dict[str, float]] | None = None
        # Fisher: the column of each clue (a word that is no clue is left out): one lookup
        # a term, and an int as small as the linear tables' floats
        self._clue_table: dict[str, int] | None = None
        self._index: dict[str, int] | None = None  # term -> column, where `of_model` made one

    @classmethod
    def of_model(cls, model: Model, index: dict[str, int] | None = None) -> ArrayScorer:
        """The scorer of an in-memory `model.Model` (one with `journal` or layer records
        applied): the scoring table `modelfile.save_model` would write for it, in memory,
        so the log-odds are the file's to the last bit. ``index`` maps each term of
        ``model.terms`` to its column (`vocabulary_index`); pass it to share one among
        models of the same vocabulary (a site model and its users' layers): each model then
        keeps only its weight vectors, 8 bytes a term."""
        import numpy as np

        from ..models.scoring_forms import FisherForm

        form = model.form
        self = cls.__new__(cls)
        self.path = None
        self.labels = tuple(model.labels)
        self.positive = model.training.positive if len(self.labels) == 2 else None
        self.cutoffs, self.calibration = model.cutoffs, model.calibration
        self.tokenizer = model.tokenizer
        self.fisher = isinstance(form, FisherForm)
        self.binary = form.binary
        self.bias = None if self.fisher else form.bias
        self._size = len(model.terms)
        self._index = vocabulary_index(model.terms) if index is None else index
        self._paged = None

        def whole(values) -> Sequence[float]:  # over the whole vocabulary, 0 where dropped
            vector = np.zeros(self._size)
            vector[form.kept] = values
            return memoryview(vector)

        linear_two = not self.fisher and self.positive is not None and form.weights is not None
        self._weights = whole(form.weights) if linear_two else None
        self._rows = [] if linear_two else [whole(row) for row in form.coef]
        self._intercept = np.asarray(form.intercept, np.float64).tolist()
        self._analyzer = Analyzer(self.tokenizer)
        self._tables = None
        self._clue_table = None
        return self

    def _vector(self, name: str, start: int) -> Sequence[float]:
        """The weights of array ``name`` from index ``start`` (d of them)."""
        if self._paged is not None:
            return PagedWeights(self._paged, name, start)
        return self._box.values(name)[start : start + self._size]

    def _vectors(self) -> list[Sequence[float]]:
        """The weight vectors a score sums: the log-odds weights of a two-class model, else
        each class's row of coef."""
        return self._rows if self._weights is None else [self._weights]

    def build_index(self) -> None:
        """Build, for each weight vector a score sums, a dictionary term -> weight, for
        scoring many messages: one lookup a term, no column in between."""
        if self._tables is None and self._index is None:
            if self._paged is not None:
                self._read_whole()
            terms = schema.terms(self.path, self._box)
            if self.fisher:  # the clues' terms and columns, chosen in C: no Python a term
                log_f = self._fisher_rows()[0]
                self._clue_table = dict(zip(compress(terms, log_f), compress(count(), log_f)))
                self._tables = []
            else:
                self._tables = [dict(zip(terms, vector)) for vector in self._vectors()]

    def _read_whole(self) -> None:
        """Read the weight vectors a score sums from a file read a page at a time, each page
        once and checked, the weights checked as `schema.read` checks them: the log-odds
        weights of a two-class linear model, else the rows of coef (read as one array)."""
        self._paged = None
        if self._weights is not None:
            self._weights = self._box.values("score_weights")
        else:
            coef, size = self._box.values("score_coef"), self._size
            self._rows = [coef[c * size : (c + 1) * size] for c in range(len(self.labels))]
        for vector in self._vectors():
            if not math.isfinite(sum(vector)):
                raise ModelFileError(
                    f"{self.path} is not a valid nbspam model: "
                    "the scoring table holds a number that is not finite"
                )

    def _fisher_rows(self) -> tuple[Sequence[float], Sequence[float]]:
        """(ln f, ln(1 - f)) of every term of a Fisher model: the rows of the positive and
        the other class; 0.0 for a term that is no clue."""
        positive = self.labels.index(self.positive)
        return self._rows[positive], self._rows[1 - positive]

    def column(self, term: str) -> int | None:
        """The column of ``term`` in the sorted vocabulary, None if absent, by binary search:
        UTF-8 byte order is code-point order, the order the vocabulary is sorted in. A lone
        surrogate, which UTF-8 has no code for, is encoded as if it had one: in no term."""
        if self._index is not None:
            return self._index.get(term)
        key = term.encode("utf-8", "surrogatepass")
        if self._paged is not None:
            return self._paged.column(key)
        terms, offsets = self._terms, self._offsets
        low, high = 0, self._size
        while low < high:
            mid = (low + high) // 2
            found = terms[offsets[mid] : offsets[mid + 1] - 1]
            if found < key:
                low = mid + 1
            elif found > key:
                high = mid
            else:
                return mid
        return None

    def predict_messages(
        self, messages: Iterable[Message], *, jobs: int = 1
    ) -> Iterator[Prediction]:
        """The predictions `model.score` gives for a stream of messages, by ``jobs`` workers
        (log-odds, verdicts and labels exactly; probabilities to about 1e-12)."""
        from ..core.parallel import chunks, imap_ordered

        self.build_index()  # before the workers are forked, so that they share it
        parts = ((None, [(m.id, m.data) for m in part]) for part in chunks(messages, SCORE_CHUNK))
        for _, predictions in imap_ordered(_predict_chunk, self, parts, jobs):
            yield from predictions

    def predict(self, message_id: str, data: bytes | str) -> Prediction:
        """The prediction `model.score` gives for this message: the same log-odds, verdict
        and label; probabilities computed with math instead of numpy, equal to ~1e-12."""
        tokens = self._analyzer.tokens(data)
        # the distinct terms in order of first appearance, with their counts (or presence)
        terms = dict.fromkeys(tokens, 1) if self.binary else Counter(tokens)
        log_odds = None
        if self.fisher:  # logit(I) from the sums of ln f and ln(1 - f) over the clues
            cols = self._clue_columns(terms)
            log_f, log_not_f = self._fisher_rows()
            sum_f = _dot(map(log_f.__getitem__, cols), None)
            sum_not_f = _dot(map(log_not_f.__getitem__, cols), None)
            from ..models.fisher import fisher_log_odds  # for a fisher model only

            log_odds = fisher_log_odds(sum_f, sum_not_f, len(cols))
            log_posterior = log_posterior_two(log_odds, self.labels.index(self.positive))
        elif self._weights is not None:  # two classes: the posteriors follow from the log-odds
            log_odds = self._sums(terms)[0] + self.bias
            log_posterior = log_posterior_two(log_odds, self.labels.index(self.positive))
        else:
            jll = [
                total + intercept for total, intercept in zip(self._sums(terms), self._intercept)
            ]
            top = max(jll)
            log_norm = top + math.log(sum(math.exp(j - top) for j in jll))
            log_posterior = [j - log_norm for j in jll]
        return prediction(
            message_id,
            self.labels,
            log_posterior,
            log_odds,
            positive=self.positive,
            cutoffs=self.cutoffs,
            calibration=self.calibration,
        )

    def _clue_columns(self, terms: dict[str, int]) -> list[int]:
        """The column of each term of a Fisher model that is a clue, in the order of
        ``terms``: their ln f and ln(1 - f) summed in that order give the batch scorer's
        sums to the bit (the other terms add 0.0 there)."""
        if len(terms) * self._size.bit_length() > self._size:
            self.build_index()
        if self._clue_table is not None:
            return [col for col in map(self._clue_table.get, terms) if col is not None]
        log_f = self._fisher_rows()[0]
        return [col for col in map(self.column, terms) if col is not None and log_f[col]]

    def _sums(self, terms: dict[str, int]) -> list[float]:
        """For each weight vector, the sum over the terms of count x weight (presence:
        weight), added in the order of ``terms``. A term the model lacks adds 0.0, which
        changes no sum (a sum that starts at +0.0 never becomes -0.0).

        A message with more distinct terms than the vocabulary has terms per step of a binary
        search (hundreds of thousands of header names) looks them up in the dictionary of
        `build_index`: building it reads each term once, fewer steps than the searches."""
        if len(terms) * self._size.bit_length() > self._size:
            self.build_index()
        factors = None if self.binary else terms.values()
        if self._tables is not None:
            return [_dot(map(table.get, terms, repeat(0.0)), factors) for table in self._tables]
        cols = list(map(self.column, terms))
        return [
            _dot((0.0 if col is None else vector[col] for col in cols), factors)
            for vector in self._vectors()
        ]


GROUP = 256  # terms whose offsets are read together by `PagedTable` in a file without groups
OLD_GROUP_BYTES = 1 << 18
"""The most bytes a group of `GROUP` terms of a file without term groups may span: 1 KiB a
term (the widest group of a 37 MB model of all word pairs spans 16.2 KiB), so that a lookup
reads at most 64 pages, whatever the file's offsets say."""
REMEMBERED = 1 << 15  # terms (and weights) a paged scorer remembers: a few MB at most


class Remembered:
    """The values of the keys last looked up, at most 2 x `REMEMBERED`: when the newer
    generation is full it becomes the older (the oldest is dropped), and a key found in the
    older is brought back into the newer, so the frequent keys stay (a server scores the
    same words in message after message) whatever the number of rare ones."""

    __slots__ = ("new", "old")

    def __init__(self) -> None:
        self.new: dict[Any, Any] = {}
        self.old: dict[Any, Any] = {}

    def get(self, key: Any, compute: Callable[[Any], Any]) -> Any:
        """The value of ``key``: remembered, or ``compute(key)`` remembered."""
        new = self.new
        if key in new:
            return new[key]
        old = self.old
        value = old[key] if key in old else compute(key)
        if len(new) >= REMEMBERED:
            self.old = new
            new = self.new = {}
        new[key] = value
        return value


class PagedTable:
    """The sorted vocabulary of a model file read a page at a time (`schema.paged`), to
    look terms up in. A file with term groups (`modelfile.term_groups`: the vocabulary cut
    at each 2 KiB of its terms) has the first term of every group read once, when it is
    opened; a lookup finds the group by binary search among them (in memory, in C), and a
    term other than the group's first among the rest of the group: one page. A file without
    groups is searched by a binary search over groups of `GROUP` terms by their first term
    (the first terms read are kept), then among the terms of the group, whose offsets and
    bytes are read in one piece each: about three pages a lookup. Either way a lookup reads
    a few pages, whatever the size of the model."""

    def __init__(self, path: str | os.PathLike[str] | None, box: schema.ModelFile) -> None:
        pages = box.pages
        assert pages is not None
        self.path, self.pages = path, pages
        self._terms_at, self._terms_size = pages.blob("terms")
        self._offsets_at, offsets_size = pages.blob("term_offsets")
        self._size = box.views["term_offsets"][2][0] - 1
        self._step = offsets_size // (self._size + 1)  # 4 or 8 bytes an offset
        self._code = "I" if self._step == 4 else "Q"
        self._groups = (self._size + GROUP - 1) // GROUP
        self._first: dict[int, bytes] = {}
        self._memo = Remembered()  # key -> column
        try:
            groups = schema.term_groups(box)
        except ValueError as exc:
            raise container.invalid(path, str(exc)) from None
        if groups is not None:
            self._firsts, self._columns, self._starts = groups
            self._column = self._grouped

    def _offsets(self, start: int, stop: int) -> tuple[int, ...]:
        """term_offsets[start:stop]."""
        data = self.pages.read(self._offsets_at + start * self._step, (stop - start) * self._step)
        return struct.unpack(f"<{stop - start}{self._code}", data)

    def _terms(self, low: int, high: int) -> bytes:
        """The bytes of the terms from offset ``low`` to ``high`` (one past the last's line
        break), which must lie inside the terms and hold at most `OLD_GROUP_BYTES` (a
        crafted file's offsets could make each lookup read all the terms)."""
        if not 0 <= low < high <= self._terms_size + 1:
            raise ModelFileError(
                f"{self.path} is not a valid nbspam model: the term offsets do not match the terms"
            )
        if high - low > OLD_GROUP_BYTES:
            raise container.invalid(
                self.path, f"a group of {GROUP} terms longer than {OLD_GROUP_BYTES >> 10} KiB"
            )
        return self.pages.read(self._terms_at + low, high - 1 - low)

    def first(self, group: int) -> bytes:
        """The first term of ``group`` (of `GROUP` terms)."""
        term = self._first.get(group)
        if term is None:
            term = self._first[group] = self._terms(
                *self._offsets(group * GROUP, group * GROUP + 2)
            )
        return term

    def column(self, key: bytes) -> int | None:
        """The column of the term whose UTF-8 is ``key``, None if it has none; the terms
        looked up last are remembered (`Remembered`: a server scores the same frequent
        words in message after message)."""
        return self._memo.get(key, self._column)

    def _grouped(self, key: bytes) -> int | None:
        """`column` in a file with term groups: the last group whose first term is <= key,
        then the key between line breaks among the group's terms, counted in line breaks
        from its first (no term holds a line break, so a key with one is in no term)."""
        group = bisect_right(self._firsts, key) - 1
        if group < 0 or b"\n" in key:
            return None
        column, stop = self._columns[group], self._columns[group + 1]
        low, high = self._starts[group], self._starts[group + 1]
        if not (column < stop <= self._size and low < high <= self._terms_size + 1):
            raise container.invalid(self.path, "the term groups do not fit the terms")
        first = self._firsts[group]
        if first == key:
            return column
        low += len(first) + 1  # the group's other terms: one page in a file nbspam wrote
        if low >= high:
            return None
        if high - low > schema.GROUP_REST:  # a crafted file: each lookup would read it all
            longer = f"a term group longer than {schema.GROUP_REST >> 10} KiB"
            raise container.invalid(self.path, longer)
        terms = self.pages.read(self._terms_at + low, high - 1 - low)
        found = (b"\n" + terms + b"\n").find(b"\n" + key + b"\n")
        if found < 0:
            return None
        column += 1 + terms.count(b"\n", 0, found)
        if column >= stop:  # a crafted file: line breaks where no term ends
            raise container.invalid(self.path, "the term groups do not fit the terms")
        return column

    def _column(self, key: bytes) -> int | None:
        """`column` in a file without term groups."""
        if not self._groups:
            return None
        low, high, known = 0, self._groups, self._first
        while high - low > 1:  # the last group whose first term is <= key
            mid = (low + high) // 2
            first = known.get(mid)
            if (self.first(mid) if first is None else first) <= key:
                low = mid
            else:
                high = mid
        start = low * GROUP
        offsets = self._offsets(start, min(start + GROUP, self._size) + 1)
        base = offsets[0]
        terms = self._terms(base, offsets[-1]) + b"\n"
        low, high = 0, len(offsets) - 1
        while low < high:  # as in a vocabulary read whole: offsets out of order only miss
            mid = (low + high) // 2
            found = terms[offsets[mid] - base : offsets[mid + 1] - 1 - base]
            if found < key:
                low = mid + 1
            elif found > key:
                high = mid
            else:
                return start + mid
        return None


_DOUBLE = struct.Struct("<d").unpack


class PagedWeights:
    """A vector of weights (d floats of one array from ``start``) read a value at a time
    from the pages of a `PagedTable`'s file, each value checked finite; the values read
    last are remembered (`Remembered`)."""

    def __init__(self, table: PagedTable, name: str, start: int) -> None:
        self._table, self._name = table, name
        self._at = table.pages.blob(name)[0] + 8 * start
        self._memo = Remembered()  # column -> weight

    def __getitem__(self, col: int) -> float:
        return self._memo.get(col, self._read)

    def _read(self, col: int) -> float:
        (value,) = _DOUBLE(self._table.pages.read(self._at + 8 * col, 8))
        if not math.isfinite(value):
            raise ModelFileError(
                f"{self._table.path} is not a valid nbspam model: "
                f"{self._name} holds a number that is not finite"
            )
        return value


def vocabulary_index(terms: Sequence[str]) -> dict[str, int]:
    """Each term of a vocabulary to its column, for `ArrayScorer.of_model`."""
    return {term: col for col, term in enumerate(terms)}


def _dot(weights: Iterable[float], factors: Iterable[int] | None) -> float:
    """sum over k of factors[k] * weights[k] (factors 1 when None), added one by one in the
    order given, as the batch scorer's sparse product adds them: the same float to the last
    bit (sum() of floats is compensated in newer Pythons, so it is not used)."""
    if factors is not None:
        weights = map(operator.mul, factors, weights)
    return functools.reduce(operator.add, weights, 0.0)


def _predict_chunk(scorer: ArrayScorer, work: list[tuple[str, bytes | str]]) -> list[Prediction]:
    return [scorer.predict(message_id, data) for message_id, data in work]


class ModelScorer:
    """A full Model behind the interface of `ArrayScorer`, for a model file without a
    scoring table (written before it existed, or read on a big-endian machine)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.labels = model.labels
        self.positive = model.training.positive if model.is_binary else None

    def predict(self, message_id: str, data: bytes | str) -> Prediction:
        from ..mail.message import Message

        return next(self.predict_messages([Message(message_id, data)]))

    def predict_messages(
        self, messages: Iterable[Message], *, jobs: int = 1
    ) -> Iterator[Prediction]:
        from ..models.model import score

        return score(self.model, messages, jobs=jobs)


def load_scorer(
    path: str | os.PathLike[str], layer: str | os.PathLike[str] | None = None
) -> ArrayScorer | ModelScorer:
    """What scores messages with the model file at ``path``: its scoring table where it has
    one and no `journal` records (no numpy or scipy), else the full model, with the user
    layer file ``layer`` over it if given (`layers`). Refuses a bad file as `schema.read`
    does."""
    if layer is not None:
        from ..store.layers import load_layered

        return ModelScorer(load_layered(path, layer))
    scorer = load_array_scorer(path)
    if scorer is not None:
        return scorer
    from ..store.modelfile import load_model

    return ModelScorer(load_model(path))


def load_array_scorer(path: str | os.PathLike[str]) -> ArrayScorer | None:
    """The scoring table of a model file, or None where this path cannot be used (a file
    without a table, with `journal` records not folded into it yet, a model of a typed
    table, or a big-endian machine); refuses a bad file as `schema.read` does. A file with
    page checksums is read a page at a time (`schema.paged`): one message reads the pages
    its terms lead to, a batch (`ArrayScorer.build_index`) every page of the table."""
    box = schema.paged(path) if sys.byteorder == "little" else None
    if box is None:  # a file without page checksums, or a table model: read whole
        box = schema.read(path, table_model=True)
    if box is None or sys.byteorder != "little" or not box.has_scoring_table:
        return None
    if _has_journal(path, box.fingerprint):  # the table is of the file, not its journal
        if box.pages is not None:
            box.pages.close()
        return None
    return ArrayScorer(box, path)


def _has_journal(path: str | os.PathLike[str], fingerprint: tuple[int, int]) -> bool:
    """`journal.has_records`, where there is a journal file at all: most models have none,
    and then the journal module is not even imported."""
    if not os.path.lexists(os.path.realpath(path) + container.JOURNAL_SUFFIX):
        return False
    from ..store.journal import has_records

    return has_records(path, fingerprint)
