"""The journal beside a model: learn and forget in time proportional to the message.

``MODEL.journal`` holds one checksummed record per change of a learned message: its digest,
the label whose counts it leaves (or none), the label it is learned as (or none: forgotten),
when, and its term counts. `learn` and `forget` append records under the model's lock and
fsync them before they report success, instead of rewriting the model; every reader
(`modelfile.load_model`, and so every scorer) applies them, so all see the same counts:
model + journal equals the model trained on the same messages, exactly.

A writer never loads the model: it reads the model's header and binary-searches its sorted
digest table in a memory map (`schema.mapped`), then the journal's own records.

The journal is bound to the model file it extends by the file's size and stored CRC-32 (its
*base*). Compaction (`compact`, and automatically when the journal passes `COMPACT_BYTES`)
writes the model with the records folded in, whose info gets a fresh random id, then
removes the journal: a crash between the two leaves a journal whose base is no longer the
model, which readers ignore and the next writer empties; no record is applied twice. A
model replaced otherwise (train -o, prune, restore) likewise makes its old journal stale.

Layout (little-endian)::

    magic    8 bytes   b"\\x89NBSJNL\\n"
    base     uint64 size, uint32 CRC-32 of the model file (0, 0: a user layer, any model)
    check    uint32    CRC-32 of the 20 bytes before it
    records  each: uint32 length, uint32 CRC-32 of the payload, payload (JSON, UTF-8)

Each update (a learn of many messages, a sync) ends its records with a commit record
(payload ``{"commit": N}``, N its records) before its fsync: readers apply only records
followed by a commit, so an update is seen whole or not at all. Records after the last
commit (an update killed before it ended, so never acknowledged) and a record whose length
or checksum does not hold at the end of the file (a torn append) are dropped by readers and
cut off by the next writer. A record that does not hold with records after it is
corruption, refused in one line.

Standard library only (numpy is imported where records are applied), so that the
one-message scorer can ask whether a journal holds records.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ModelFileError, NbspamError, TrainingError, os_reason
from .container import JOURNAL_SUFFIX, fsync_folder, target
from .safefiles import model_writers, open_side_file

MAGIC = b"\x89NBSJNL\n"
_HEAD = struct.Struct("<8sQI")
HEADER_BYTES = _HEAD.size + 4
_RECORD = struct.Struct("<II")
LAYER = (0, 0)
"""The base of a user layer (`layers`): records that apply over any model."""

COMPACT_BYTES = 1 << 20
"""A writer folds the journal into the model when it passes this many bytes (1 MiB: a few
hundred messages; the fold costs one rewrite of the model)."""
MAX_JOURNAL = 256 << 20
"""The most bytes of journal a reader reads (a user layer is never folded: it is refused
past this, with a one-line error)."""
SUFFIX = JOURNAL_SUFFIX
MAX_COUNT = 1 << 32
"""A record's term counts are below this (a message of `MAX_MESSAGE_BYTES` holds far
fewer terms), so that no sum of a journal's records passes an int64 count."""


@dataclass(frozen=True)
class Record:
    """One change of a learned message: its counts leave ``old`` (None: it was not learned)
    and join ``new`` (None: forgotten). ``terms`` maps each of its terms to its count;
    ``clip`` says the counts may not be exactly the message's (`update.Learner.replace`)."""

    digest: bytes
    old: str | None
    new: str | None
    time: int
    terms: dict[str, int]
    clip: bool = False

    def encode(self) -> bytes:
        payload = json.dumps(
            {
                "d": self.digest.hex(),
                "o": self.old,
                "n": self.new,
                "t": self.time,
                "w": self.terms,
                "c": self.clip,
            },
            separators=(",", ":"),
        ).encode("ascii")
        return _RECORD.pack(len(payload), zlib.crc32(payload)) + payload


def _decode(payload: bytes) -> Record:
    """A record from its checked payload; ValueError where it is not one nbspam writes."""
    data = json.loads(payload)
    if not isinstance(data, dict):
        raise ValueError("a record is not a JSON object")
    digest = bytes.fromhex(data["d"])
    terms = data["w"]
    labels = data["o"], data["n"]
    if (
        len(digest) != 16
        or not all(label is None or (isinstance(label, str) and label) for label in labels)
        or type(data["t"]) is not int
        or not -1 <= data["t"] < 1 << 63  # a time of the model's int64 times, -1 unknown
        or not isinstance(terms, dict)
        or not all(type(n) is int and 0 < n < MAX_COUNT for n in terms.values())
        or "" in terms
    ):
        raise ValueError("a record has a field of the wrong type")
    return Record(digest, labels[0], labels[1], data["t"], terms, data["c"] is True)


@dataclass(frozen=True)
class Change:
    """What an update did: messages newly learned, relabelled, forgotten, already known."""

    learned: int = 0
    relabelled: int = 0
    forgotten: int = 0
    unchanged: int = 0
    unknown: list[str] = dataclasses.field(default_factory=list)


def expired_note(model: Any) -> str | None:
    """Why a message the model does not remember may still have been learned: digests were
    expired by prune (how many, and when last), or None if none ever were."""
    expired = model.info.get("expired")
    if not isinstance(expired, dict) or not expired.get("digests"):
        return None
    count = expired["digests"]
    count = f"{count:,}" if type(count) is int else "some"  # info is free-form in a file
    return (
        f"prune expired {count} digest(s) of this model, last on "
        f"{expired.get('last', 'an unknown date')}"
    )


@dataclass
class Contents:
    """A journal file as read: its base (None: no complete header), its valid records, the
    bytes they take with the header (``good``) and the file's size."""

    base: tuple[int, int] | None = None
    records: list[Record] = field(default_factory=list)
    good: int = 0
    size: int = 0


def journal_path(model_path: str | os.PathLike[str]) -> Path:
    """Where the journal of the model at ``model_path`` is: beside its `container.target`."""
    real = target(model_path)
    return real.with_name(real.name + SUFFIX)


_PARSED: dict[str, tuple[int, int, Contents]] = {}
"""Per journal path, the last contents parsed by `parse_again`: (bytes up to the last
commit, their CRC-32, the contents), so that a process that reads a journal again (a
server's TELL, its reload) decodes only the records appended since."""
PARSED_PATHS = 16


def parse_again(data: bytes, path: str | os.PathLike[str]) -> Contents:
    """`parse`, decoding only what follows the bytes parsed last time for ``path`` where
    the file still starts with them (checked by their CRC-32: a journal emptied or
    replaced is parsed whole)."""
    key = os.fspath(path)
    cached = _PARSED.pop(key, None)
    contents = None
    if cached is not None:
        good, crc, known = cached
        if len(data) >= good and zlib.crc32(memoryview(data)[:good]) == crc:
            contents = parse(data, path, known)
    if contents is None:
        contents = parse(data, path)
    if contents.base is not None:
        _PARSED[key] = (contents.good, zlib.crc32(memoryview(data)[: contents.good]), contents)
        while len(_PARSED) > PARSED_PATHS:
            del _PARSED[next(iter(_PARSED))]
    return contents


def parse(data: bytes, path: str | os.PathLike[str], known: Contents | None = None) -> Contents:
    """The contents of a journal file's bytes (see the module's layout); with ``known``,
    the contents of the bytes up to ``known.good``, only the bytes after them."""
    if known is not None:
        contents = Contents(known.base, list(known.records), known.good, len(data))
        return _records(data, path, contents, known.good)
    if len(data) < HEADER_BYTES:  # none, or a header torn when it was created
        if data and not MAGIC.startswith(data[:8]):
            raise ModelFileError(f"{path} is not an nbspam journal")
        return Contents(size=len(data))
    magic, size, crc = _HEAD.unpack_from(data)
    (check,) = struct.unpack_from("<I", data, _HEAD.size)
    if magic != MAGIC or zlib.crc32(data[: _HEAD.size]) != check:
        raise ModelFileError(f"{path} is not an nbspam journal")
    contents = Contents((size, crc), [], HEADER_BYTES, len(data))
    return _records(data, path, contents, HEADER_BYTES)


def _records(data: bytes, path: str | os.PathLike[str], contents: Contents, at: int) -> Contents:
    """``contents`` with the committed records of ``data`` from offset ``at`` added."""
    uncommitted: list[Record] = []
    while at < len(data):
        if at + _RECORD.size > len(data):
            break  # a torn length
        length, check = _RECORD.unpack_from(data, at)
        end = at + _RECORD.size + length
        payload = data[at + _RECORD.size : end]
        if end > len(data) or zlib.crc32(payload) != check:
            if end >= len(data):
                break  # a torn last record: never acknowledged
            raise ModelFileError(f"{path} is corrupt (a record's checksum does not match)")
        try:
            if payload.startswith(b'{"commit":'):
                contents.records += uncommitted
                uncommitted, contents.good = [], end
            else:
                uncommitted.append(_decode(payload))
        except (ValueError, KeyError, TypeError, RecursionError):
            raise ModelFileError(f"{path} is corrupt (a record nbspam does not write)") from None
        at = end
    return contents


def read(
    path: str | os.PathLike[str],
    *,
    writers: tuple[frozenset[int] | None, int | None] | None = None,
    what: str = "journal",
) -> Contents:
    """The contents of the journal file at ``path`` (empty where there is none), read
    never through a symbolic link and never past `MAX_JOURNAL`; with ``writers``, refused
    where others than they may write it (`safefiles.open_side_file`, naming it ``what``)."""
    try:
        fd = open_side_file(path, os.O_RDONLY, what=what, writers=writers)
    except FileNotFoundError:
        return Contents()
    except OSError as exc:
        raise ModelFileError(f"cannot read journal {path}: {os_reason(exc)}") from None
    try:
        return parse_again(_read_all(fd, path), path)
    finally:
        os.close(fd)


def file_bytes(model_path: str | os.PathLike[str]) -> bytes | None:
    """The bytes of the journal of the model at ``model_path`` as `pending` reads it (refused
    where others than those who may write the model may write it), not parsed; None where
    there is none: what is sent, with the model file's, to the workers of a cluster."""
    path = journal_path(model_path)
    try:
        fd = open_side_file(path, os.O_RDONLY, what="journal", writers=model_writers(model_path))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ModelFileError(f"cannot read journal {path}: {os_reason(exc)}") from None
    try:
        return _read_all(fd, path)
    finally:
        os.close(fd)


def _read_all(fd: int, path: str | os.PathLike[str]) -> bytes:
    size = os.fstat(fd).st_size
    if size > MAX_JOURNAL:
        raise ModelFileError(
            f"journal {path} holds {size:,} bytes, more than {MAX_JOURNAL:,}: "
            "fold it with 'nbspam compact'"
        )
    parts, at = [], 0
    while at < size:
        part = os.pread(fd, size - at, at)
        if not part:
            break
        parts.append(part)
        at += len(part)
    return b"".join(parts)


def pending(model_path: str | os.PathLike[str], base: tuple[int, int]) -> Contents | None:
    """The journal of the model whose file has fingerprint ``base``, or None where there is
    none, or it belongs to another version of the file (stale). Refused where others than
    those who may write the model may write it: its records change every user's scores."""
    contents = read(journal_path(model_path), writers=model_writers(model_path))
    return contents if contents.base == base else None


def has_records(model_path: str | os.PathLike[str], base: tuple[int, int]) -> bool:
    """Whether the model whose file has fingerprint ``base`` has a journal with records:
    reads its header only (the one-message scorer then reads the full model)."""
    try:
        fd = open_side_file(
            journal_path(model_path),
            os.O_RDONLY,
            what="journal",
            writers=model_writers(model_path),
        )
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ModelFileError(f"cannot read journal of {model_path}: {os_reason(exc)}") from None
    try:
        head = os.pread(fd, HEADER_BYTES, 0)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if len(head) < HEADER_BYTES or size <= HEADER_BYTES:
        return False
    magic, *stored = _HEAD.unpack_from(head)
    return magic == MAGIC and tuple(stored) == base


def apply(model: Any, records: list[Record]) -> Any:
    """The `model.Model` with the ``records`` applied in order: exactly the model trained on
    its messages changed as they say (a message counted under ``old`` is taken out, and
    counted under ``new``). Counts a record would take below zero (a model retrained or
    pruned since) stop at zero. Where the labels stay, the work beyond copying the arrays
    is proportional to the records (`_added`); else the counts are summed as `update` does."""
    if not records:
        return model
    import dataclasses

    plus, minus = _Sum(), _Sum()
    final: dict[bytes, Record] = {}
    for record in records:
        final[record.digest] = record
        if record.old is not None:
            minus.add(record.old, record.terms)
        if record.new is not None:
            plus.add(record.new, record.terms)
    clip = any(record.clip for record in records)
    updated = _added(model, plus, minus, final, clip)
    if updated is None:
        updated = _summed(model, plus, minus, final, clip)
    folded = model.info.get("journal") if isinstance(model.info.get("journal"), dict) else {}
    records_before = folded.get("records", 0) if type(folded.get("records", 0)) is int else 0
    # a fresh id: the model written with these records folded never has the base again
    info = {
        **updated.info,
        "journal": {"records": records_before + len(records), "id": os.urandom(8).hex()},
    }
    return dataclasses.replace(updated, info=info)


def _summed(model: Any, plus: _Sum, minus: _Sum, final: dict[bytes, Record], clip: bool) -> Any:
    """`apply` by `model.apply_counts`: the counts summed over the union of labels and terms."""
    from ..models.model import apply_counts, seen_map, times_map

    seen, times = seen_map(model), times_map(model)
    for digest, record in final.items():
        seen.pop(digest, None)
        times.pop(digest, None)
        if record.new is not None:
            seen[digest], times[digest] = record.new, record.time
    try:
        return apply_counts(model, plus.counts(), minus.counts(), seen, times, clip=clip)
    except TrainingError:
        if clip:
            raise
        return apply_counts(model, plus.counts(), minus.counts(), seen, times, clip=True)


def _added(model: Any, plus: _Sum, minus: _Sum, final: dict[bytes, Record], clip: bool) -> Any:
    """`apply` where every label of the records is one of the model's and every label keeps
    messages: the records' counts added into copies of the model's arrays (new terms
    inserted in order, terms left in no message dropped), as `model.apply_counts` would give
    them; None where that does not hold."""
    import bisect
    import dataclasses

    import numpy as np

    from ..models.model import utc_timestamp

    labels = model.labels
    if not set(plus.labels) | set(minus.labels) <= set(labels):
        return None
    pruned = "pruned" in model.info
    terms = model.terms
    new = sorted(t for t in plus.terms if not _has(terms, t))
    class_count = model.class_count.copy()
    term_count, doc_count = model.term_count, model.doc_count
    if new:
        at = [bisect.bisect_left(terms, t) for t in new]
        term_count = np.insert(term_count, at, 0, axis=1)
        doc_count = np.insert(doc_count, at, 0, axis=1)
        merged = list(terms)
        for offset, (where, term) in enumerate(zip(at, new)):
            merged.insert(where + offset, term)
        terms = tuple(merged)
    else:
        term_count, doc_count = term_count.copy(), doc_count.copy()
    for part, sign in ((plus, 1), (minus, -1)):
        for label, row in part.labels.items():
            class_count[labels.index(label)] += sign * part.messages.get(row, 0)
        names = list(part.terms)
        for (row, col), (occurrences, messages) in part.cells.items():
            term = names[col]
            if sign < 0 and pruned and not _has(model.terms, term):
                continue  # a term prune dropped: not there to subtract
            j = bisect.bisect_left(terms, term)
            i = labels.index(part.label_names[row])
            term_count[i, j] += sign * occurrences
            doc_count[i, j] += sign * messages
    if (class_count <= 0).any():
        return None  # a label left without messages: the labels change
    if pruned or clip or (term_count < 0).any() or (doc_count < 0).any():
        term_count = np.maximum(term_count, 0)
        doc_count = np.minimum(np.maximum(doc_count, 0), term_count)
    cols = np.flatnonzero(doc_count.sum(axis=0) > 0)
    if cols.size < len(terms):
        term_count, doc_count = term_count[:, cols], doc_count[:, cols]
        terms = tuple(terms[j] for j in cols.tolist())
    digests, seen_labels, times = _digests(model, final)
    return dataclasses.replace(
        model,
        terms=terms,
        class_count=class_count,
        term_count=np.ascontiguousarray(term_count),
        doc_count=np.ascontiguousarray(doc_count),
        seen_digests=digests,
        seen_labels=seen_labels,
        seen_times=times,
        info={**model.info, "updated": utc_timestamp()},
    )


def _has(terms: tuple[str, ...], term: str) -> bool:
    import bisect

    j = bisect.bisect_left(terms, term)
    return j < len(terms) and terms[j] == term


def _digests(model: Any, final: dict[bytes, Record]) -> tuple[Any, Any, Any]:
    """The model's sorted digests, their labels and times, with the records' final states."""
    import numpy as np

    keys = np.ascontiguousarray(model.seen_digests, np.uint8).view("S16").ravel()
    touched = np.array(sorted(final), dtype="S16") if final else np.zeros(0, "S16")
    keep = ~np.isin(keys, touched)
    kept = [r for r in final.values() if r.new is not None]
    all_keys = np.concatenate([keys[keep], np.array([r.digest for r in kept], dtype="S16")])
    labels = np.concatenate(
        [model.seen_labels[keep], np.array([model.labels.index(r.new) for r in kept], np.int64)]
    )
    times = np.concatenate([model.seen_times[keep], np.array([r.time for r in kept], np.int64)])
    order = np.argsort(all_keys, kind="stable")
    digests = np.ascontiguousarray(all_keys[order]).view(np.uint8).reshape(-1, 16)
    return digests, labels[order], times[order]


class _Sum:
    """The counts of records under their labels, as `counts.ClassCounts`: each record is
    one message, so each of its terms is in one message."""

    def __init__(self) -> None:
        self.labels: dict[str, int] = {}
        self.label_names: list[str] = []
        self.terms: dict[str, int] = {}
        self.cells: dict[tuple[int, int], list[int]] = {}  # [occurrences, messages]
        self.messages: dict[int, int] = {}

    def add(self, label: str, terms: dict[str, int]) -> None:
        if label not in self.labels:
            self.labels[label] = len(self.labels)
            self.label_names.append(label)
        row = self.labels[label]
        self.messages[row] = self.messages.get(row, 0) + 1
        for term, count in terms.items():
            cell = self.cells.setdefault(
                (row, self.terms.setdefault(term, len(self.terms))), [0, 0]
            )
            cell[0] += count
            cell[1] += 1

    def counts(self) -> Any:
        if not self.labels:
            return None
        import numpy as np

        from ..text.counts import ClassCounts

        shape = (len(self.labels), len(self.terms))
        class_count = np.zeros(shape[0], np.int64)
        class_count[list(self.messages)] = list(self.messages.values())
        term_count, doc_count = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
        if self.cells:
            rows, cols = np.array(list(self.cells), np.int64).T
            values = np.array(list(self.cells.values()), np.int64)
            term_count[rows, cols], doc_count[rows, cols] = values[:, 0], values[:, 1]
        return ClassCounts(
            tuple(self.labels), tuple(self.terms), class_count, term_count, doc_count
        )


def terms_of(tokenizer: Any, data: bytes | str) -> dict[str, int]:
    """The term counts of one message, as training counts them (no numpy)."""
    from ..text.counting import count_chunk

    counted = count_chunk(tokenizer, [data])
    return {counted.terms[col]: n for col, n in zip(counted.cols, counted.counts)}


class Writer:
    """Appends records to the journal file at ``path`` (of the model whose file has
    fingerprint ``base``, or `LAYER`), under the lock of what it belongs to: a journal of
    another base (stale: its records are in the model already) is emptied first, a torn
    last record cut off. New files get the permissions of ``like`` (`safefiles`); one that
    others than ``writers`` may write is refused (`safefiles.open_side_file`, naming it
    ``what``)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        base: tuple[int, int],
        *,
        like: Any = None,
        writers: tuple[frozenset[int] | None, int | None] | None = None,
        what: str = "journal",
    ) -> None:
        self.path = Path(path)
        try:
            flags = os.O_RDWR | os.O_CREAT
            self.fd = open_side_file(path, flags, what=what, like=like, writers=writers)
        except OSError as exc:
            raise ModelFileError(f"cannot write journal {path}: {os_reason(exc)}") from None
        try:
            data = _read_all(self.fd, path)
            head = parse(data[:HEADER_BYTES], path)
            self.contents = parse_again(data, path) if head.base == base else Contents()
            self.created = self.contents.base is None
            if self.created:
                os.ftruncate(self.fd, 0)
                head_bytes = _HEAD.pack(MAGIC, *base)
                self._write(head_bytes + struct.pack("<I", zlib.crc32(head_bytes)), 0)
                self.contents = Contents(base, [], HEADER_BYTES, HEADER_BYTES)
            elif self.contents.good < self.contents.size:  # a torn record: never acknowledged
                os.ftruncate(self.fd, self.contents.good)
        except BaseException:
            os.close(self.fd)
            raise
        self.offset = self.start = self.contents.good
        self.committed, self.appended = False, 0

    def append(self, record: Record) -> None:
        """Write ``record`` after the others (durable only after `commit`)."""
        self._append(record.encode())
        self.appended += 1

    def _append(self, data: bytes) -> None:
        self._write(data, self.offset)
        self.offset += len(data)

    def commit(self) -> None:
        """End the records appended with a commit record and make them durable: readers
        see them from the commit on, and a change is acknowledged only after this."""
        if self.appended:
            payload = b'{"commit":%d}' % self.appended
            self._append(_RECORD.pack(len(payload), zlib.crc32(payload)) + payload)
        try:
            os.fsync(self.fd)
        except OSError as exc:
            raise ModelFileError(f"cannot write journal {self.path}: {os_reason(exc)}") from None
        if self.created:
            fsync_folder(self.path.parent)
        self.committed = True

    def close(self) -> None:
        """Close the file; records appended but not committed (a failed update) are cut off."""
        try:
            if not self.committed:
                os.ftruncate(self.fd, self.start)
        finally:
            os.close(self.fd)

    def _write(self, data: bytes, at: int) -> None:
        view = memoryview(data)
        try:
            while view:
                done = os.pwrite(self.fd, view, at)
                view, at = view[done:], at + done
        except OSError as exc:  # a full disk: the torn record is cut off by the next writer
            raise ModelFileError(f"cannot write journal {self.path}: {os_reason(exc)}") from None


class Known:
    """Which label each message is learned as, without loading the model: the model's
    sorted digest table searched in place, then the changes of journal records."""

    def __init__(self, box: Any) -> None:
        self.box = box
        self.changed: dict[bytes, str | None] = {}
        self.classes = dict(zip(box.labels, box.values("class_count")))
        self._digests = box.view("seen_digests")
        self._labels = box.values("seen_labels")

    def label(self, digest: bytes) -> str | None:
        if digest in self.changed:
            return self.changed[digest]
        low, high, digests = 0, len(self._labels), self._digests
        while low < high:
            mid = (low + high) // 2
            found = bytes(digests[mid * 16 : mid * 16 + 16])
            if found < digest:
                low = mid + 1
            elif found > digest:
                high = mid
            else:
                index = self._labels[mid]
                return self.box.labels[index] if 0 <= index < len(self.box.labels) else None
        return None

    def change(self, record: Record) -> None:
        self.changed[record.digest] = record.new
        for label, step in ((record.old, -1), (record.new, 1)):
            if label is not None:
                self.classes[label] = self.classes.get(label, 0) + step

    def labels(self) -> list[str]:
        """The labels that have messages (those a model keeps)."""
        return sorted(label for label, n in self.classes.items() if n > 0)


def append_learned(
    box: Any, known: Known, messages: Iterable[Any], label: str, writer: Writer, only_new: bool
) -> Any:
    from ..mail.headers import message_digest

    done = {"learned": 0, "relabelled": 0, "unchanged": 0}
    now = int(time.time())
    for message in messages:
        digest = message_digest(message.data)
        old = known.label(digest)
        if old == label or (only_new and old is not None):
            done["unchanged"] += 1
            continue
        record = Record(digest, old, label, now, terms_of(box.tokenizer, message.data))
        writer.append(record)
        known.change(record)
        done["learned" if old is None else "relabelled"] += 1
    if len(known.labels()) < 2:
        raise TrainingError(
            f"need messages of at least two labels to train, found only {', '.join(known.labels()) or 'none'}; "
            "nothing was learned"
        )
    return Change(**done)


def append_forgotten(
    model_path: Any, box: Any, known: Known, messages: Iterable[Any], writer: Writer
) -> Any:
    from ..mail.headers import message_digest

    expired = expired_note(box)
    records, unknown = [], []
    now = int(time.time())
    for message in messages:
        digest = message_digest(message.data)
        old = known.label(digest)
        if old is None and expired is not None:
            raise NbspamError(
                f"{message.id}: cannot forget: the model does not remember this message, "
                f"but {expired}, so it may have been learned and its counts cannot be "
                "told apart; nothing was forgotten"
            )
        if old is None:
            unknown.append(message.id)
            continue
        record = Record(digest, old, None, now, terms_of(box.tokenizer, message.data))
        known.change(record)
        records.append(record)
    if len(known.labels()) < 2:
        raise TrainingError(
            f"need messages of at least two labels to train, found only {', '.join(known.labels()) or 'none'}; "
            "nothing was forgotten"
        )
    for record in records:
        writer.append(record)
    return Change(forgotten=len(records), unknown=unknown)


def discard(model_path: str | os.PathLike[str]) -> None:
    """Remove the journal of the model (under its lock, once its records are in the model
    file, or the model file was replaced)."""
    path = journal_path(model_path)
    try:
        path.unlink()
    except FileNotFoundError:
        return
    fsync_folder(path.parent)


def version(model_path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(inode, size) of the model's journal now, or None where there is none: what a
    long-running reader (a daemon) compares, beside the model file's own identity, to know
    that it must read the model again (a learn changes the journal, not the model)."""
    try:
        stats = os.lstat(journal_path(model_path))
    except OSError:
        return None
    return stats.st_ino, stats.st_size
