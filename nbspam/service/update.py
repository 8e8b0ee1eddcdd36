"""Learn, forget and merge: exact arithmetic on a model's counts and its record of messages.

A model is a sum over the messages it learned, so adding a message's counts (learn),
subtracting them (forget) or adding two models (merge) gives exactly the model trained on
the resulting set of messages. The record of learned messages (digest -> label) makes
learning a message twice a no-op and learning it under another label move its counts.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from ..core.parallel import CHUNK
from ..errors import NbspamError, TrainingError
from ..mail.headers import message_digest
from ..mail.message import Message
from ..models.model import (  # noqa: F401  (re-exported)
    AUTO_CHOSEN,
    UNKNOWN_TIME,
    ClassCountsBuilder,
    Model,
    apply_counts,
    largest_part,
    merge,
    merged_note,
    seen_map,
    times_map,
    utc_timestamp,
)
from ..store.journal import Change, Record, Writer, expired_note, terms_of  # noqa: F401  (re-exported)
from ..text.counts import ClassCounts

T = TypeVar("T")


def update_model_file(path: str, change: Callable[[Model], tuple[Model, T]]) -> tuple[Model, T]:
    """Apply ``change`` (Model -> (changed Model, what it did)) to the model file at ``path``
    under its lock: concurrent updates wait for each other, and the file is replaced whole
    (leftovers of a writer that was killed are removed first). Its three steps, loading,
    changing and writing, are a stage of progress."""
    from ..core.progress import stage
    from ..store.journal import discard
    from ..store.lock import model_lock
    from ..store.modelfile import load_model, remove_leftovers, save_model

    with model_lock(path), stage(f"{path}: read, changed, written", 3) as step:
        remove_leftovers(path)
        model = load_model(path)
        step(1)
        model, result = change(model)
        step(1)
        save_model(model, path)
        discard(path)  # its records are in the model now
        step(1)
    return model, result


def learn(model: Model, messages: Iterable[Message], label: str) -> tuple[Model, Change]:
    """Add messages to the model under ``label`` (a new label is allowed).

    A message already learned under ``label`` is left alone; one learned under another label
    has its counts moved. The result equals training on the old messages plus these.
    """
    learner = Learner(model)
    done = Counter(learner.learn(message, label) for message in messages)
    return learner.result(), Change(
        learned=done["learned"], relabelled=done["relabelled"], unchanged=done["unchanged"]
    )


CHUNK_BYTES = 16 << 20
"""The most bytes of messages a `Learner` holds before it counts them."""


class Learner:
    """Learn and forget messages one at a time, keeping their counts, not their bytes: they
    are tokenized and counted a chunk at a time (`parallel.CHUNK` messages or `CHUNK_BYTES`),
    so memory is bounded by the model and one chunk, whatever the number of messages.
    `result` gives the model with every change applied, exactly as `learn` and `forget`.
    With a ``journal`` (`journal.Writer`) each change is appended to it as a record instead
    (and `result` is not used): the model file's readers apply them."""

    def __init__(self, model: Model, journal: Writer | None = None) -> None:
        self.model = model
        self.journal = journal
        self.seen, self.times = seen_map(model), times_map(model)
        self._was = dict(self.seen), dict(self.times)
        self._now = int(time.time())
        self._counted = {1: ClassCountsBuilder(), -1: ClassCountsBuilder()}
        self._pending: dict[int, list[Message]] = {1: [], -1: []}
        self._bytes = 0
        self._clip = False
        self.changed = False

    def learn(self, message: Message, label: str, digest: bytes | None = None) -> str:
        """Learn ``message`` as ``label``: 'learned', 'relabelled' (its counts moved from
        another label) or 'unchanged' (already learned as ``label``)."""
        digest = digest or message_digest(message.data)
        old = self.seen.get(digest)
        if old == label:
            return "unchanged"
        self._set(message, digest, label)
        return "learned" if old is None else "relabelled"

    def replace(self, message: Message, digest: bytes) -> None:
        """Take out the message learned as ``digest`` whose text is gone (it was changed
        since), subtracting the counts of ``message``, its new text, instead: its label's
        message count is exact, its term counts off by what the change added or removed
        (never below zero)."""
        if digest in self.seen:
            self._clip = True
            self._set(message, digest, None)

    def undo(self, message: Message, digest: bytes | None = None) -> None:
        """Give ``message`` back the label (or absence) it had in the model at the start."""
        digest = digest or message_digest(message.data)
        was = self._was[0].get(digest)
        if self.seen.get(digest) != was:
            self._set(message, digest, was)
        if digest in self._was[1]:
            self.times[digest] = self._was[1][digest]

    def _set(self, message: Message, digest: bytes, label: str | None) -> None:
        old = self.seen.pop(digest, None)
        self.times.pop(digest, None)
        if self.journal is not None:
            terms = terms_of(self.model.tokenizer, message.data)
            self.journal.append(Record(digest, old, label, self._now, terms, self._clip))
            if label is not None:
                self.seen[digest], self.times[digest] = label, self._now
            self.changed = True
            return
        if old is not None:
            self._count(message, old, -1)
        if label is not None:
            self._count(message, label, 1)
            self.seen[digest], self.times[digest] = label, self._now
        self.changed = True

    def _count(self, message: Message, label: str, sign: int) -> None:
        self._pending[sign].append(message.replace(label=label))
        self._bytes += len(message.data)
        if self._bytes >= CHUNK_BYTES or len(self._pending[sign]) >= CHUNK:
            self._flush()

    def _flush(self) -> None:
        for sign, pending in self._pending.items():
            if pending:
                self._counted[sign].add(pending, self.model.tokenizer)
                pending.clear()
        self._bytes = 0

    def result(self) -> Model:
        """The model with every change made so far."""
        if not self.changed:
            return self.model
        self._flush()
        plus, minus = (table.totals() if table.labels else None for table in self._counted.values())
        return apply_counts(self.model, plus, minus, self.seen, self.times, clip=self._clip)


def forget(model: Model, messages: Iterable[Message]) -> tuple[Model, Change]:
    """Remove learned messages from the model; ones it never learned are listed as unknown.
    If prune expired digests of the model, a message it does not remember is refused
    (`NbspamError`, nothing forgotten): it may have been learned.

    The result equals training on the model's messages less these.
    """
    seen = seen_map(model)
    expired = expired_note(model)
    minus, unknown = [], []
    for message in messages:
        label = seen.pop(message_digest(message.data), None)
        if label is None and expired is not None:
            raise NbspamError(
                f"{message.id}: cannot forget: the model does not remember this message, "
                f"but {expired}, so it may have been learned and its counts cannot be "
                "told apart; nothing was forgotten"
            )
        if label is None:
            unknown.append(message.id)
        else:
            minus.append(message.replace(label=label))
    updated = apply_counts(model, None, _counted(minus, model), seen, times_map(model))
    return updated, Change(forgotten=len(minus), unknown=unknown)


#: The training settings that ``--event-model auto`` chooses (`selection`): parts whose
#: event model and settings auto chose may differ in these, and merge still adds them.
def _counted(messages: list[Message], model: Model) -> ClassCounts | None:
    """The counts of labelled messages, tokenized as the model does (None for none)."""
    if not messages:
        return None
    table = ClassCountsBuilder()
    table.add(messages, model.tokenizer)
    return table.totals()


PRUNE_NOTE = (
    "after pruning the counts of the terms dropped are gone: learning such a word again "
    "counts it from zero, and forgetting a message subtracts only the terms still in the "
    "model (never below zero); forgetting or relabelling a message whose digest expired is "
    "not possible (learning it again counts it twice); the class counts stay exact"
)
"""What stops being exact once a model is pruned (shown by `info` and `prune --help`)."""


@dataclass(frozen=True)
class Pruning:
    """What `prune` did: terms kept and dropped, digests kept and expired."""

    terms_kept: int
    terms_dropped: int
    digests_kept: int
    digests_expired: int


def prune(
    model: Model,
    *,
    min_docs: int | None = None,
    max_terms: int | None = None,
    expire_before: int | None = None,
    keep_digests: int | None = None,
) -> tuple[Model, Pruning]:
    """The model with fewer terms and fewer digests of learned messages, to bound its size.

    Terms: those in fewer than ``min_docs`` messages are dropped, then of the rest only the
    ``max_terms`` in most messages are kept (ties: in term order). Their counts are gone
    (`PRUNE_NOTE` says what that changes); the class counts stay. Digests: those learned
    before ``expire_before`` (seconds since 1970) are expired, then all but the newest
    ``keep_digests`` (ties in digest order; a digest of unknown time counts as oldest, and is
    kept by ``expire_before``, which cannot tell its age). The model's info records how many
    terms were dropped and digests expired, and when, so that `forget` can tell why a
    message is unknown. Cutoffs and calibration stay, as after `learn`.
    """
    import numpy as np

    from ..text.vocabulary import select_terms

    # the filters a model scores with, applied for good (every term is in a message)
    keep = select_terms(
        model.doc_count.sum(axis=0),
        int(model.class_count.sum()),
        min_count=min_docs or 1,
        max_features=max_terms,
    )
    cols = np.flatnonzero(keep)
    times = model.seen_times
    alive = np.ones(len(times), bool)
    if expire_before is not None:
        alive &= ~((times != UNKNOWN_TIME) & (times < expire_before))
    if keep_digests is not None and alive.sum() > keep_digests:
        left = np.flatnonzero(alive)
        newest = left[np.lexsort((left, -times[left]))[:keep_digests]]
        alive = np.zeros(len(times), bool)
        alive[newest] = True
    done = Pruning(
        terms_kept=int(cols.size),
        terms_dropped=len(model.terms) - int(cols.size),
        digests_kept=int(alive.sum()),
        digests_expired=len(times) - int(alive.sum()),
    )
    info = dict(model.info)
    now = utc_timestamp()
    if done.terms_dropped:
        before = info.get("pruned", {}).get("terms_dropped", 0)
        info["pruned"] = {"terms_dropped": before + done.terms_dropped, "last": now}
    if done.digests_expired:
        before = info.get("expired", {}).get("digests", 0)
        info["expired"] = {"digests": before + done.digests_expired, "last": now}
    pruned = dataclasses.replace(
        model,
        terms=tuple(model.terms[j] for j in cols.tolist()),
        term_count=np.ascontiguousarray(model.term_count[:, cols]),
        doc_count=np.ascontiguousarray(model.doc_count[:, cols]),
        seen_digests=np.ascontiguousarray(model.seen_digests[alive]),
        seen_labels=model.seen_labels[alive],
        seen_times=model.seen_times[alive],
        info=info,
    )
    if not pruned.form.kept.size:
        raise TrainingError(
            "no terms would be left for the model to score with; keep more terms "
            "(a lower --min-docs or a higher --max-terms)"
        )
    return pruned, done


def expired_count(model: Model) -> int:
    """How many digests prune expired from the model, all told (0 if none, or not known)."""
    expired = model.info.get("expired")
    count = expired.get("digests") if isinstance(expired, dict) else 0
    return count if type(count) is int and count > 0 else 0
