"""Folder-driven retraining (`nbspam sync`): a model learns what a person did with their mail.

The folders come with their labels (``spam=~/Maildir/.Junk ham=~/Maildir``). A run lists
them and learns every message it has not learned under its folder's label: a message new in
the Junk folder as spam, one moved from Junk to the inbox as ham, which moves its counts
(`update.Learner`), so the model is the one trained on the messages with the labels their
folders give them now, plus the messages deleted from every folder since they were learned
(the model keeps them), plus what was learned outside sync of messages not in the folders.
A file found through two of the folders (``spam=mail/Junk ham=mail``) is in the more
specific one, the folder inside the other. A message whose copies are in folders of two
labels is left as the model had it, and reported.

A state file beside the model keeps, for each message, its key and the label and digest it
was learned as. The key of a Maildir message is the unique part of its file name (before
``:2,``), which stays when the mail server changes its flags, and which a move between
folders of one account keeps where the server links the file; elsewhere it is the file's
path. A rerun lists the folders and opens only the files whose key it has not seen under
that label: its cost grows with the changes, not with the mailbox.

The state is checked against the model at every run: a message the state says sync learned
counts as learned only while the model holds its digest under that label. When the model
was retrained (`train -o`), restored, or changed by `learn` or `forget`, the messages it
no longer holds as sync learned them are read and learned again (said in one note), so a
stale state never stops learning; messages the model still holds are not read. A digest
`prune` expired is not held either, though its counts are: the state keeps the model's
count of expired digests, and an entry whose digest went missing while that count grew is
marked expired and trusted from then on (learning it again would count it twice), until
the model's count falls below the state's (another model put in its place).

A message changed since it was learned (same key, other digest) is noticed when it moves to
another label: its old text is gone, so its old counts are taken out by subtracting its new
text (`update.Learner.replace`): the message counts per label stay exact, the term counts
are off by what the change added or removed. A change in place is not looked for.

Crashes lose nothing: the model is written (atomically, under its lock) before the state,
and learning a message the model already holds under that label changes nothing, so a
rerun after a kill anywhere learns what was missing and counts nothing twice. Mail
delivered or moved while a run goes on is for the next run: a file gone by the time it is
read is skipped, and found in its new place next time. Messages are counted as they are
read (`update.Learner`): memory does not grow with the size of the folders.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.digits import ascii_number
from ..core.progress import counted
from ..errors import ConfigError, NbspamError, os_reason
from ..mail import messages
from ..mail.headers import message_digest
from ..mail.message import Message, Problems, checked_message
from ..mail.messages import folder_files
from ..store.container import write_file
from ..store.safefiles import model_writers, open_side_file

if TYPE_CHECKING:
    from .update import Learner

STATE_SUFFIX = ".sync"
_HEADER = "# nbspam sync state 2: key<TAB>label<TAB>digest[<TAB>expired]"
_EXPIRED = "# expired digests of the model: "
EXPIRED_MARK = "expired"
_COPIES = "in folders of two labels at once (a copy), left as it was"


@dataclass(frozen=True)
class SyncReport:
    """What a run did: messages found in the folders, files opened, learned per label,
    relabelled (moved from another label), already known, keys dropped from the state
    (messages no longer in any folder: the model keeps them), and entries of the state read
    again because the model did not hold them as sync learned them."""

    found: int
    opened: int
    learned: dict[str, int]
    relabelled: int
    unchanged: int
    gone: int
    stale: int = 0


@dataclass
class SyncState:
    """key -> (label, digest hex, expired) of the messages sync learned, and the model's
    count of expired digests when it was written (`update.expired_count`)."""

    entries: dict[str, tuple[str, str, bool]] = field(default_factory=dict)
    expired: int = 0


def default_state_path(model_path: str) -> str:
    """``MODEL.sync`` beside the model."""
    return model_path + STATE_SUFFIX


def parse_folders(specs: Sequence[str], labels: Sequence[str]) -> list[tuple[str, str]]:
    """(label, folder) of each ``LABEL=FOLDER``; the labels must be the model's. A ``~``
    that starts FOLDER is the home folder, as `messages.label_spec` says."""
    out = []
    for spec in specs:
        label, sep, folder = spec.partition("=")
        if not sep or not label or not folder:
            raise ConfigError(
                f"give each folder as LABEL=FOLDER (spam=~/Maildir/.Junk), not {spec!r}"
            )
        if label not in labels:
            raise ConfigError(
                f"{spec}: the model has no label {label!r} (its labels: {', '.join(labels)})"
            )
        out.append((label, os.path.expanduser(folder) if folder.startswith("~") else folder))
    if not out:
        raise ConfigError("give the folders to follow as LABEL=FOLDER, e.g. spam=~/Maildir/.Junk")
    return out


def message_key(path: str, part: str | None) -> str:
    """The key of a message file: in a Maildir the unique part of its name, else its path."""
    if part is None:
        return os.path.abspath(path)
    return "maildir:" + os.path.basename(path).split(":2,", 1)[0]


def list_folders(
    folders: Iterable[tuple[str, str]], problems: Problems, *, follow_links: bool = False
) -> dict[str, tuple[str, str]]:
    """key -> (path, label) of every message in the folders, symbolic links followed as
    `messages.folder_files` says. A file reached through two of the folders (one inside the
    other) is in the more specific one, the longer path. A message found under two labels at
    once in two files (copied, not moved) is left out, reported: its folders disagree."""
    found: dict[str, tuple[str, str, int]] = {}
    clash: set[str] = set()
    for label, folder in folders:
        depth = len(os.path.abspath(folder))
        for path, part in folder_files(folder, problems, follow_links=follow_links):
            key = message_key(path, part)
            there = found.get(key)
            if there is None:
                found[key] = (path, label, depth)
            elif os.path.abspath(there[0]) == os.path.abspath(path):
                if depth > there[2]:  # the same file, in a folder inside the other
                    found[key] = (path, label, depth)
                elif depth == there[2] and label != there[1]:
                    clash.add(key)  # one folder given with two labels
            elif there[1] != label:
                clash.add(key)
    for key in sorted(clash):
        problems.skip(found.pop(key)[0], "in folders of two labels at once, left as it was")
    return {key: (path, label) for key, (path, label, _) in found.items()}


def load_state(path: str, *, model: str | None = None) -> SyncState:
    """What earlier runs learned (`SyncState`); a line a crash cut short, or one that cannot
    be read, is left out (its message is read again). A state written before expired digests
    were counted reads as 0. Never read through a symbolic link (`safefiles`); with the
    ``model`` it steers, refused where others than those who may write that model may
    write it (`safefiles.model_writers`): whoever writes it decides what sync learns."""
    writers = None if model is None else model_writers(model)
    try:
        fd = open_side_file(path, os.O_RDONLY, what="sync state", writers=writers)
        # newline="": split only where save_state joins; a carriage return in a file's
        # name (its key) would otherwise end a line there, one of that name's making
        with open(fd, encoding="utf-8", errors="surrogateescape", newline="") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return SyncState()
    except OSError as exc:
        raise NbspamError(f"cannot read sync state {path}: {os_reason(exc)}") from None
    state = SyncState()
    for line in lines:
        fields = line.split("\t")
        expired = (
            ascii_number(line.removeprefix(_EXPIRED), 18) if line.startswith(_EXPIRED) else None
        )
        if expired is not None:
            state.expired = expired
        elif line.startswith("#") or len(fields) not in (3, 4) or not _HEX.fullmatch(fields[2]):
            continue
        elif len(fields) == 3 or fields[3] == EXPIRED_MARK:
            state.entries[fields[0]] = (fields[1], fields[2], len(fields) == 4)
    return state


_HEX = re.compile("[0-9a-f]{32}")


def save_state(path: str, state: SyncState, *, model: str | None = None) -> None:
    """Write the state whole, atomically (`container.write_file`), at ``path`` itself (never
    through a link) with the permissions of the file at ``model``.

    An entry whose key holds a tab or a line break is left out: a file's name is its key,
    and whoever may name a file in a folder could otherwise write lines of their own, such
    as one that marks another message as learned. Its message is read again at each run:
    nothing is learned twice while the model holds its digest, but once `prune` expired
    that digest it is learned again and counted twice (no entry marks it expired)."""
    lines = [_HEADER, f"{_EXPIRED}{state.expired}"] + [
        f"{key}\t{label}\t{digest}" + (f"\t{EXPIRED_MARK}" if expired else "")
        for key, (label, digest, expired) in sorted(state.entries.items())
        if "\t" not in key and "\n" not in key
    ]
    text = "\n".join(lines) + "\n"
    write_file(
        path, [text.encode("utf-8", "surrogateescape")], what="sync state", beside=model or path
    )


def checked_entries(
    state: SyncState, found: dict[str, tuple[str, str]], held: dict[bytes, str], expired: int
) -> tuple[dict[str, tuple[str, str, bool]], int]:
    """(the entries of the state that still hold, how many do not): those of messages still
    in a folder of the label they were learned as, whose digest the model holds under that
    label, or which prune expired (see the module's notes); ``held`` is the model's record
    of learned messages, ``expired`` its count of expired digests."""
    kept, stale = {}, 0
    for key, (label, digest, was_expired) in state.entries.items():
        if key not in found or found[key][1] != label:
            continue  # gone, or moved: learned again under its new label
        model_label = held.get(bytes.fromhex(digest))
        if model_label == label:
            kept[key] = (label, digest, False)
        elif (
            model_label is None
            and expired >= state.expired
            and (was_expired or expired > state.expired)
        ):
            kept[key] = (label, digest, True)
        else:
            stale += 1
    return kept, stale


def sync(
    model_path: str,
    folders: Sequence[str],
    state_path: str,
    problems: Problems,
    *,
    follow_links: bool = False,
) -> SyncReport:
    """Learn what is new or moved in ``folders`` (``LABEL=FOLDER`` each) into the model at
    ``model_path``, under its lock, and record it in the state file at ``state_path``.
    ``follow_links``: as for `list_folders`."""
    from ..service.journalled import writing
    from ..store.lock import model_lock
    from ..store.modelfile import load_journalled, remove_leftovers
    from .update import Learner

    with model_lock(model_path):
        remove_leftovers(model_path)
        model, base, _ = load_journalled(model_path)
        found = list_folders(
            parse_folders(folders, model.labels), problems, follow_links=follow_links
        )
        state = load_state(state_path, model=model_path)
        with writing(model_path, base) as journal:
            report = _learn_folders(model, found, state, problems, Learner(model, journal))
        save_state(state_path, report.pop("state"), model=model_path)
    return SyncReport(**report)


def _learn_folders(
    model: Any, found: dict, state: SyncState, problems: Problems, learner: Any
) -> dict[str, Any]:
    """Learn what is new or moved in the ``found`` messages by ``learner``: the fields of a
    `SyncReport`, and the new state (``state``)."""
    from .update import expired_count

    expired = expired_count(model)
    kept, stale = checked_entries(state, found, learner.seen, expired)
    if stale:
        problems.note(
            f"{stale:,} message(s) in the sync state are not in the model as sync learned "
            "them (it was retrained or restored, or learn or forget changed them): "
            "reading them again"
        )
    # digest -> (label, key) of every message in the folders known so far
    where = {bytes.fromhex(d): (label, key) for key, (label, d, _) in kept.items()}
    todo = sorted((path, label, key) for key, (path, label) in found.items() if key not in kept)
    done: Counter[str] = Counter()
    # key -> (label, digest, the digest it replaced, outcome) of each message learned
    learned: dict[str, tuple[str, bytes, bytes | None, str]] = {}
    clashed: set[bytes] = set()
    opened = 0
    for path, label, key in counted("messages synced", todo):
        try:
            data = messages.read_bytes(path)
        except FileNotFoundError:  # moved or deleted since the listing: next run
            continue
        except OSError as exc:
            problems.skip(path, os_reason(exc))
            continue
        message = checked_message(path, data, problems, len(data))
        if message is None:
            continue
        opened += 1
        digest = message_digest(message.data)
        other = where.get(digest)
        if digest in clashed or (other is not None and other[0] != label):
            problems.skip(path, _COPIES)
            if digest not in clashed:  # the other copy too is left as the model had it
                clashed.add(digest)
                problems.skip(found[other[1]][0], _COPIES)
                kept.pop(other[1], None)
                if other[1] in learned:
                    _undo(learner, message, learned.pop(other[1]), done)
            continue
        where[digest] = (label, key)
        replaced = _changed_since(state, key, digest, where, learner.seen)
        if replaced is not None:
            learner.replace(message, replaced)
        outcome = learner.learn(message, label, digest)
        outcome += ":" + label if outcome == "learned" else ""
        done[outcome] += 1
        learned[key] = (label, digest, replaced, outcome)
    for key, (label, digest, _, _) in learned.items():
        kept[key] = (label, digest.hex(), False)
    gone = sum(1 for key in state.entries if key not in found)
    labels = sorted({label for label, _, _, _ in learned.values()})
    return dict(
        found=len(found),
        opened=opened,
        learned={label: done["learned:" + label] for label in labels},
        relabelled=done["relabelled"],
        unchanged=done["unchanged"],
        gone=gone,
        stale=stale,
        state=SyncState(kept, expired),
    )


def _changed_since(
    state: SyncState,
    key: str,
    digest: bytes,
    where: dict[bytes, tuple[str, str]],
    held: dict[bytes, str],
) -> bytes | None:
    """The digest this message was learned as by sync, if it was changed since (another
    digest), and the model still holds that one as sync learned it, and no other message in
    the folders has it; else None."""
    entry = state.entries.get(key)
    if entry is None or entry[1] == digest.hex():
        return None
    old = bytes.fromhex(entry[1])
    if held.get(old) != entry[0] or old in where:
        return None
    return old


def _undo(
    learner: Learner, message: Message, learned: tuple[str, bytes, bytes | None, str], done: Counter
) -> None:
    """Put back what learning a message did this run, by a copy of it (``message``)."""
    _, digest, replaced, outcome = learned
    learner.undo(message, digest)
    if replaced is not None:
        learner.undo(message, replaced)
    done[outcome] -= 1
