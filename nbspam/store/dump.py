r"""A model as text and back (`nbspam dump`, `nbspam restore`), every line checked.

A dump holds everything a model file holds but its scoring table, which is derived from
the counts: restoring it and writing the model gives the very bytes of the file that was
dumped (by the same version of nbspam, which every model file records). It is for
backups, for moving a model between versions of nbspam, and for reading a model with
shell tools, as bogofilter's ``bogoutil -d/-l`` and SpamAssassin's ``sa-learn
--backup/--restore`` are.

Format 1: UTF-8 text, every line ending in a line feed, fields separated by tabs::

    # nbspam dump 1                    the first line, exactly
    # ...                              comments: lines starting with #, in the header only
    tokenizer  {...}                   the tokenizer's settings   \
    train      {...}                   the training settings       | one line each, in any
    cutoffs    [-5.0, 5.0] or null     the ham and spam cutoffs    | order, each a JSON value
    calibration [1.2, -0.3] or null    Platt's a and b             | on one line
    info       {...}                   the history: created, ...  /
    class  LABEL  MESSAGES             one line per class, labels sorted, at least two
    terms  term  occurrences_LABEL ...  documents_LABEL ...      the column headings
    TERM  OCCURRENCES ...  DOCUMENTS ...    one line per term: its occurrences in each
                                       class, then the messages of each class holding it
                                       (classes in the order of the class lines); terms
                                       sorted by code point, each once
    digests  digest  label  learned    the column headings
    DIGEST  LABEL  LEARNED             one line per message learned: the 16-byte digest
                                       of the message as 32 lowercase hex digits, the
                                       label it was learned as, and when (seconds since
                                       1970, -1 unknown); sorted by digest. (Dumps written
                                       before learn times have no learned column: unknown.)
    end                                the last line: a dump without it is cut short

A term or a label is written with backslash, tab, line feed and carriage return escaped
as ``\\``, ``\t``, ``\n``, ``\r`` (as the TSV of `render` escapes them), and every other
control character (U+0000-U+001F, U+007F-U+009F), U+2028, U+2029 and any lone surrogate
as ``\uXXXX``; nothing else is escaped. JSON floats are written as Python's repr, the
shortest text that reads back as the same number, so cutoffs, calibration and settings
come back exact.

`restore` reads a dump as strictly as `schema` reads a model file (the same limits on
labels, settings, cutoffs and counts, and a header no larger than a model file holds),
and checks the counts as nbspam makes them: whole numbers from 0 to 2^63 - 1, a term's
documents in a class at most its occurrences there (and not 0 where it occurs) and at
most the class's messages, every class with a message, and no total of counts reaching
2^63. So a dump that restores gives a model `nbspam info` reads. Anything else is
refused with one `InputError` ``line N: what``, reading at most `MAX_LINE` bytes of any
line. A model whose scoring table would not be finite is refused at its end line.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

from .. import __version__
from ..core.settings import (
    MAX_LABEL_CHARS,
    MAX_LABELS,
    TokenizerConfig,
    TrainConfig,
    config_from_dict,
    parse_cutoffs,
)
from ..errors import ConfigError, InputError
from ..models.decision import read_cutoffs, stored_cutoffs
from ..models.model import Model
from ..models.scoring_forms import LinearForm
from .container import MAGIC, MAX_HEADER
from .schema import checked_info, number_pair

FORMAT_VERSION = 1
FIRST_LINE = f"# nbspam dump {FORMAT_VERSION}"
MAX_LINE = MAX_HEADER
"""The longest line a dump may have, in bytes: the most a model file's header holds."""
HEADER_ROOM = MAX_HEADER - 2**16
"""What the labels and the JSON values may take of a model file's header (the rest is
for the array table, the scoring table's header and the versions)."""
MAX_COUNT = 2**63 - 1

KEYS = ("tokenizer", "train", "cutoffs", "calibration", "info")
DIGEST_HEADINGS = "digests\tdigest\tlabel\tlearned"
UNTIMED_HEADINGS = "digests\tdigest\tlabel"
"""The digest headings of dumps written before learn times were recorded."""
END = "end"

_CHUNK = 4096  # terms or digests per chunk of the dump


# -- writing ---------------------------------------------------------------------------------


def dump_lines(model: Model) -> Iterator[str]:
    """The lines of ``model``'s dump, without their line feeds, a chunk of terms at a time."""
    yield FIRST_LINE
    yield f"# a model of nbspam, written by nbspam {__version__}; 'nbspam restore' reads it back"
    header = {
        "tokenizer": model.tokenizer.as_dict(),
        "train": model.training.as_dict(),
        "cutoffs": stored_cutoffs(model.cutoffs),
        "calibration": None if model.calibration is None else list(model.calibration),
        "info": model.info,
    }
    for key in KEYS:
        yield f"{key}\t{_json(header[key])}"
    labels = [escape(label) for label in model.labels]
    for label, n in zip(labels, model.class_count.tolist()):
        yield f"class\t{label}\t{n}"
    yield term_headings(labels)
    for start in range(0, len(model.terms), _CHUNK):
        part = slice(start, start + _CHUNK)
        rows = np.concatenate([model.term_count[:, part], model.doc_count[:, part]]).T.tolist()
        for term, row in zip(model.terms[part], rows):
            yield f"{escape(term)}\t" + "\t".join(map(str, row))
    yield DIGEST_HEADINGS
    digests, seen = model.seen_digests, model.seen_labels.tolist()
    times = model.seen_times.tolist()
    for start in range(0, len(seen), _CHUNK):
        block = np.ascontiguousarray(digests[start : start + _CHUNK], np.uint8).tobytes().hex()
        for i, k in enumerate(seen[start : start + _CHUNK]):
            yield f"{block[32 * i : 32 * i + 32]}\t{labels[k]}\t{times[start + i]}"
    yield END


def dump_chunks(model: Model, size: int = 2**20) -> Iterator[bytes]:
    """The dump of ``model`` as UTF-8, in chunks of about ``size`` bytes."""
    part: list[str] = []
    length = 0
    for line in dump_lines(model):
        part.append(line)
        length += len(line) + 1
        if length >= size:
            yield ("\n".join(part) + "\n").encode("utf-8")
            part, length = [], 0
    if part:
        yield ("\n".join(part) + "\n").encode("utf-8")


def term_headings(escaped_labels: list[str]) -> str:
    """The line that opens the terms: the column headings of the term lines."""
    return "\t".join(
        ["terms", "term"]
        + [f"occurrences_{label}" for label in escaped_labels]
        + [f"documents_{label}" for label in escaped_labels]
    )


_SPECIAL = re.compile("[\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escape(text: str) -> str:
    """A term or label as one tab-free, line-free field (see the module's docstring)."""
    if not _SPECIAL.search(text):
        return text
    return _SPECIAL.sub(lambda m: _ESCAPES.get(m.group()) or f"\\u{ord(m.group()):04x}", text)


def _json(value: Any) -> str:
    """One line of JSON: keys sorted, floats exact; text as UTF-8 where it can be encoded
    (a lone surrogate cannot: it is escaped, and `restore` refuses it, as a model file
    cannot hold it)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, sort_keys=True, allow_nan=False)
    return text


# -- reading ---------------------------------------------------------------------------------


def restore(stream: IO[bytes]) -> Model:
    """The Model a dump describes, read from a binary stream; `InputError` ``line N: ...``
    for anything but a whole, well-formed dump. No line is read beyond `MAX_LINE` bytes."""
    return _Reader(stream).model()


class _Reader:
    """One pass over a dump: the header, the terms, the digests, the end line."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.number = 0  # of the line read last
        self.values: dict[str, Any] = {}
        self.where: dict[str, int] = {}  # header key -> its line
        self.labels: list[str] = []
        self.class_count: list[int] = []
        self.header_bytes = 0
        self.first_term = 0  # the line of the first term
        self.end_line = 0
        self.timed = True  # the digest lines have a learned column

    def fail(self, what: str, number: int | None = None) -> InputError:
        return InputError(f"line {self.number if number is None else number}: {what}")

    def lines(self) -> Iterator[str]:
        """The lines after the first, as text without their line feed."""
        while True:
            raw = self.stream.readline(MAX_LINE + 1)
            if not raw:
                return
            self.number += 1
            if not raw.endswith(b"\n"):
                if len(raw) > MAX_LINE:
                    raise self.fail(f"longer than {MAX_LINE:,} bytes, the most a line may have")
                raise self.fail("cut short (no line feed at its end): the dump is truncated")
            try:
                yield raw[:-1].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise self.fail(f"not UTF-8 text (byte {exc.start + 1} of the line)") from None

    def model(self) -> Model:
        self.first_line()
        lines = self.lines()
        self.header(lines)
        terms, counts = self.terms(lines)
        digests, seen, times = self.digests(lines)
        for _ in lines:
            raise self.fail(f"more after the {END!r} line, which ends a dump")
        return self.built(terms, counts, digests, seen, times)

    # -- the parts, in order

    def first_line(self) -> None:
        raw = self.stream.readline(len(FIRST_LINE) + 32)
        self.number = 1
        if not raw:
            raise self.fail("the input is empty, not an nbspam dump")
        if raw.startswith(MAGIC):
            raise self.fail(
                "this is a model file, not a dump ('nbspam dump -m MODEL' makes a dump of it)"
            )
        found = re.fullmatch(rb"# nbspam dump ([1-9][0-9]{0,8})\n", raw)
        if found is None:
            raise self.fail(f"not an nbspam dump: it must start with the line {FIRST_LINE!r}")
        version = int(found.group(1))
        if version != FORMAT_VERSION:
            newer = version > FORMAT_VERSION
            raise self.fail(
                f"a dump of format {version}, "
                + ("newer than" if newer else "not one")
                + f" this nbspam {__version__} reads ({FORMAT_VERSION})"
                + ("; upgrade nbspam" if newer else "")
            )

    def header(self, lines: Iterator[str]) -> None:
        """The header, up to and including the line that opens the terms."""
        for text in lines:
            if text.startswith("#"):
                continue
            fields = text.split("\t")
            key = fields[0]
            if key == "terms":
                self.header_done(text)
                return
            if key == "class":
                self.class_line(fields)
            elif key in KEYS:
                if len(fields) != 2:
                    raise self.fail(f"{key}: {len(fields)} fields, not 2 ({key}, a JSON value)")
                if key in self.values:
                    raise self.fail(f"{key} again (first on line {self.where[key]})")
                self.values[key] = self.value(key, fields[1])
                self.where[key] = self.number
            elif not text:
                raise self.fail("an empty line")
            else:
                known = ", ".join([*KEYS, "class", "terms"])
                raise self.fail(f"unknown header field {_shown(key)} (the header has {known})")
        raise self.cut_short("header")

    def cut_short(self, part: str) -> InputError:
        return self.fail(
            f"the dump ends in its {part}, without its {END!r} line: it is truncated",
            self.number + 1,
        )

    def value(self, key: str, text: str) -> Any:
        """The checked value of a header field."""
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise self.fail(f"{key}: not JSON ({exc.msg} at character {exc.pos + 1})") from None
        except (ValueError, RecursionError) as exc:  # a constant, or nested too deep
            reason = str(exc) if isinstance(exc, ValueError) else "nested too deep"
            raise self.fail(f"{key}: not JSON ({reason})") from None
        try:
            as_saved = json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8")
        except UnicodeEncodeError:
            raise self.fail(
                f"{key}: text with a lone surrogate, which a model cannot hold"
            ) from None
        self.count_header(len(as_saved) + len(key) + 4)
        try:
            if key == "tokenizer":
                return config_from_dict(TokenizerConfig, value)
            if key == "train":
                return config_from_dict(TrainConfig, value)
            if key == "info":
                try:
                    return checked_info(value)
                except ValueError as exc:
                    raise self.fail(_cut(str(exc))) from None
            try:
                pair = number_pair(value, "must be null or two finite numbers")
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
            if key == "cutoffs" and pair:
                return read_cutoffs(parse_cutoffs(list(pair)))
            return pair
        except ConfigError as exc:
            raise self.fail(f"{key}: {_cut(str(exc))}") from None

    def count_header(self, size: int) -> None:
        """Count what a header value takes of a model file's header."""
        self.header_bytes += size
        if self.header_bytes > HEADER_ROOM:
            raise self.fail(
                f"the settings, info and labels take more than the {HEADER_ROOM:,} bytes a "
                f"model file has room for"
            )

    def class_line(self, fields: list[str]) -> None:
        if len(fields) != 3:
            raise self.fail(
                f"a class line with {len(fields)} fields, not 3 (class, label, messages)"
            )
        label = self.unescape(fields[1], "label")
        if not 0 < len(label) <= MAX_LABEL_CHARS:
            raise self.fail(f"a label must have 1 to {MAX_LABEL_CHARS:,} characters")
        if _SURROGATE.search(label):
            raise self.fail(
                f"the label {_shown(label)} holds a lone surrogate, which a model cannot hold"
            )
        if self.labels and label <= self.labels[-1]:
            again = label == self.labels[-1]
            raise self.fail(
                f"the class {_shown(label)} "
                + ("again" if again else f"after {_shown(self.labels[-1])}")
                + ": classes are sorted by label, each once"
            )
        if len(self.labels) == MAX_LABELS:
            raise self.fail(f"more than {MAX_LABELS:,} classes, the most a model holds")
        documents = self.count(fields[2], f"the messages of class {_shown(label)}")
        if documents == 0:
            raise self.fail(f"the class {_shown(label)} has no messages: a class has at least one")
        if sum(self.class_count) + documents > MAX_COUNT:
            raise self.fail("the classes' messages add up to 2^63 or more")
        self.count_header(len(json.dumps(label, ensure_ascii=False).encode("utf-8")) + 2)
        self.labels.append(label)
        self.class_count.append(documents)

    def header_done(self, text: str) -> None:
        """Check the header as a whole, at the line that opens the terms."""
        missing = [key for key in KEYS if key not in self.values]
        if missing:
            raise self.fail(f"the terms begin, but the header has no {missing[0]} line")
        if len(self.labels) < 2:
            raise self.fail(
                f"the terms begin after {len(self.labels)} class line(s): a model has at least 2"
            )
        labels = self.labels
        train: TrainConfig = self.values["train"]
        at = self.where["train"]
        if len(labels) == 2 and train.positive is None:
            raise self.fail("train: a two-class model needs a positive label", at)
        if train.positive is not None and train.positive not in labels:
            raise self.fail(
                f"train: the positive label {_shown(train.positive)} is not a class", at
            )
        if isinstance(train.prior, tuple) and {label for label, _ in train.prior} != set(labels):
            raise self.fail("train: the prior names other labels than the classes", at)
        if train.event_model == "fisher" and len(labels) != 2:
            raise self.fail(
                f"train: the fisher event model needs two classes, not {len(labels)}", at
            )
        expected = term_headings([escape(label) for label in labels])
        if text != expected:
            raise self.fail(f"the column headings of the terms must be {_shown(expected, 300)}")

    def terms(self, lines: Iterator[str]) -> tuple[list[str], np.ndarray]:
        """The term lines, to the line that opens the digests: (terms, counts (d, 2C))."""
        C = len(self.labels)
        counts_only = re.compile(r"[0-9]+(?:\t[0-9]+)" + f"{{{2 * C - 1}}}")
        self.first_term = self.number + 1
        terms: list[str] = []
        counts = array("q")
        previous = ""
        for text in lines:
            term, _, tail = text.partition("\t")
            if counts_only.fullmatch(tail) is None:
                if text in (DIGEST_HEADINGS, UNTIMED_HEADINGS):
                    self.timed = text == DIGEST_HEADINGS
                    return terms, self.checked_counts(terms, counts)
                self.bad_term_line(text)
            if "\\" in term:
                term = self.unescape(term, "term")
            if term <= previous:
                self.bad_term_order(term, previous)
            try:
                counts.extend(map(int, tail.split("\t")))
            except (OverflowError, ValueError):  # ValueError: more digits than int() reads
                raise self.fail(f"a count of the term {_shown(term)} is over 2^63 - 1") from None
            terms.append(term)
            previous = term
        raise self.cut_short("terms")

    def bad_term_line(self, text: str) -> None:
        C = len(self.labels)
        if text == END:
            raise self.fail(
                f"the {END!r} line before the digests: the line {DIGEST_HEADINGS!r} is missing"
            )
        fields = text.split("\t")
        if len(fields) != 2 * C + 1:
            raise self.fail(
                f"{len(fields)} field(s), but a term line has {2 * C + 1}: the term, its "
                f"occurrences in each of the {C} classes, then its documents in each"
            )
        headings = term_headings(self.labels).split("\t")[2:]
        for heading, value in zip(headings, fields[1:]):
            if _COUNT.fullmatch(value) is None:
                raise self.fail(
                    f"{heading} of the term {_shown(fields[0])} is not a whole number >= 0: {_shown(value)}"
                )

    def bad_term_order(self, term: str, previous: str) -> None:
        if not term:
            raise self.fail("an empty term")
        if term == previous:
            raise self.fail(f"the term {_shown(term)} again: each term has one line")
        raise self.fail(
            f"the term {_shown(term)} after {_shown(previous)}: terms are sorted by code point"
        )

    def checked_counts(self, terms: list[str], counts: array) -> np.ndarray:
        """The counts (d, 2C) of the terms, checked as nbspam makes them: a term's documents
        at most its occurrences, none only where it does not occur, at most the class's
        messages; and no total of counts reaching 2^63."""
        C = len(self.labels)
        M = np.frombuffer(counts, np.int64).reshape(len(terms), 2 * C)
        occurrences, documents = M[:, :C], M[:, C:]
        classes = np.array(self.class_count, np.int64)
        bad = (
            (documents > occurrences)
            | ((occurrences > 0) & (documents == 0))
            | (documents > classes)
        ).any(axis=1)
        if bad.any():
            j = int(np.argmax(bad))
            self.bad_counts(j, terms[j], occurrences[j].tolist(), documents[j].tolist())
        for name, part in (("occurrences", occurrences), ("documents", documents)):
            running = np.cumsum(part.sum(axis=1, dtype=np.float64))
            if running.size and running[-1] >= 2.0**63:
                j = int(np.argmax(running >= 2.0**63))
                raise self.fail(
                    f"the {name} of all terms so far add up to 2^63 or more", self.first_term + j
                )
        return M

    def bad_counts(self, j: int, term: str, occurrences: list[int], documents: list[int]) -> None:
        number = self.first_term + j
        for label, n, k, total in zip(self.labels, occurrences, documents, self.class_count):
            if k > n:
                what = f"is in {k:,} {label} messages but occurs only {n:,} times there"
            elif n and not k:
                what = f"occurs {n:,} times in {label} but in no {label} message"
            elif k > total:
                what = f"is in {k:,} {label} messages, but the class has {total:,}"
            else:
                continue
            raise self.fail(f"the term {_shown(term)} {what}", number)

    def digests(self, lines: Iterator[str]) -> tuple[bytes, list[int], list[int]]:
        """The digest lines, to the end line: (the digests, the label index of each, when
        each was learned)."""
        index = {label: k for k, label in enumerate(self.labels)}
        escaped = {escape(label): k for k, label in enumerate(self.labels)}
        hexes: list[str] = []
        seen: list[int] = []
        times: list[int] = []
        previous = ""
        for text in lines:
            digest, tab, label = text.partition("\t")
            when = "-1"
            if self.timed:
                label, _, when = label.rpartition("\t")
            k = escaped.get(label)
            if (
                k is None
                or _DIGEST.fullmatch(digest) is None
                or digest <= previous
                or _TIME.fullmatch(when) is None
            ):
                if text == END:
                    self.end_line = self.number
                    return bytes.fromhex("".join(hexes)), seen, times
                k = self.bad_digest_line(text, index)
                if digest <= previous:
                    what = "again" if digest == previous else f"after {previous}"
                    raise self.fail(f"the digest {digest} {what}: digests are sorted, each once")
            hexes.append(digest)
            seen.append(k)
            times.append(int(when))
            previous = digest
        raise self.cut_short("digests")

    def bad_digest_line(self, text: str, index: dict[str, int]) -> int:
        fields = text.split("\t")
        if self.timed:
            if len(fields) != 3:
                raise self.fail(
                    f"{len(fields)} field(s), but a digest line has 3: the digest, the label "
                    "and when it was learned"
                )
            if _TIME.fullmatch(fields[2]) is None:
                raise self.fail(
                    f"not a learn time (seconds since 1970, or -1): {_shown(fields[2])}"
                )
            fields = fields[:2]
        elif len(fields) != 2:
            raise self.fail(
                f"{len(fields)} field(s), but a digest line has 2: the digest and the label"
            )
        digest, label = fields
        if _DIGEST.fullmatch(digest) is None:
            raise self.fail(f"not a digest of 32 lowercase hex digits: {_shown(digest)}")
        label = self.unescape(label, "label")
        if label not in index:
            raise self.fail(f"the label {_shown(label)} is not a class")
        return index[label]

    def built(
        self,
        terms: list[str],
        counts: np.ndarray,
        digests: bytes,
        seen: list[int],
        times: list[int],
    ) -> Model:
        C = len(self.labels)
        model = Model(
            labels=tuple(self.labels),
            terms=tuple(terms),
            class_count=np.array(self.class_count, np.int64),
            term_count=np.ascontiguousarray(counts[:, :C].T),
            doc_count=np.ascontiguousarray(counts[:, C:].T),
            tokenizer=self.values["tokenizer"],
            training=self.values["train"],
            seen_digests=np.frombuffer(digests, np.uint8).reshape(-1, 16),
            seen_labels=np.array(seen, np.int64),
            seen_times=np.array(times, np.int64),
            cutoffs=self.values["cutoffs"],
            calibration=self.values["calibration"],
            info=self.values["info"],
        )
        form = model.form
        parts = [form.coef, form.intercept]
        if isinstance(form, LinearForm):
            parts += [x for x in (form.weights, form.bias) if x is not None]
        if not all(np.isfinite(part).all() for part in parts):
            raise self.fail(
                "these counts and settings give scores that are not finite numbers",
                self.end_line,
            )
        return model

    # -- fields

    def count(self, text: str, what: str) -> int:
        if _COUNT.fullmatch(text) is None:
            raise self.fail(f"{what} is not a whole number >= 0: {_shown(text)}")
        if len(text.lstrip("0")) > len(str(MAX_COUNT)) or int(text) > MAX_COUNT:
            raise self.fail(f"{what} is over 2^63 - 1: {_shown(text)}")
        return int(text)

    def unescape(self, text: str, what: str) -> str:
        """A term or label with its escapes undone (see `escape`)."""

        def undo(match: re.Match[str]) -> str:
            code = match.group(1)
            if code in _UNESCAPES:
                return _UNESCAPES[code]
            if code and code[0] == "u" and len(code) == 5:
                return chr(int(code[1:], 16))
            if not code:
                raise self.fail(f"the {what} {_shown(text)} ends in a lone backslash")
            raise self.fail(f"the {what} {_shown(text)} has an unknown escape \\{code}")

        result = _ESCAPE.sub(undo, text)
        if what == "term":
            if "\n" in result:
                raise self.fail(
                    f"the term {_shown(text)} holds a line feed, which a model's terms cannot"
                )
            if _SURROGATE.search(result):
                raise self.fail(
                    f"the term {_shown(text)} holds a lone surrogate, which a model cannot hold"
                )
        return result


_COUNT = re.compile("[0-9]+")
_DIGEST = re.compile("[0-9a-f]{32}")
_TIME = re.compile("-1|0|[1-9][0-9]{0,17}")
_ESCAPE = re.compile(r"\\(u[0-9A-Fa-f]{4}|.?)", re.DOTALL)
_UNESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
_SURROGATE = re.compile("[\ud800-\udfff]")


def _shown(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message, its first ``limit`` characters where it is longer."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def _cut(message: str, limit: int = 300) -> str:
    """A message cut to ``limit`` characters (one about a value of any length)."""
    return message if len(message) <= limit else message[:limit] + "..."


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number")
