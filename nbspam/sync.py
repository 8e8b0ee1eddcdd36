"""Folder-driven retraining (`nbspam sync`): a model learns what a person did with their mail.

The folders come with their labels (``spam=~/Maildir/.Junk ham=~/Maildir``). A run lists
them and learns every message it has not learned under its folder's label: a message new in
the Junk folder as spam, one moved from Junk to the inbox as ham, which moves its counts
(`update.learn`), so the model is exactly the one trained on the messages with the labels
their folders give them now.

A state file beside the model keeps, for each message, its key and the label it was learned
as. The key of a Maildir message is the unique part of its file name (before ``:2,``),
which stays when the mail server changes its flags, and which a move between folders of
one account keeps where the server links the file; elsewhere it is the file's path. A rerun
lists the folders and opens only the files whose key it has not seen under that label:
its cost grows with the changes, not with the mailbox.

Crashes lose nothing: the model is written (atomically, under its lock) before the state,
and learning a message the model already holds under that label changes nothing, so a
rerun after a kill anywhere learns what was missing and counts nothing twice. Mail
delivered or moved while a run goes on is for the next run: a file gone by the time it is
read is skipped, and found in its new place next time.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from . import messages
from .container import write_file
from .errors import ConfigError, NbspamError, os_reason
from .headers import message_digest
from .messages import Message, Problems, checked_message, folder_files

STATE_SUFFIX = ".sync"
_HEADER = "# nbspam sync state 1: key<TAB>label<TAB>digest"


@dataclass(frozen=True)
class SyncReport:
    """What a run did: messages found in the folders, files opened, learned per label,
    relabelled (moved from another label), already known, and keys dropped from the state
    (messages no longer in any folder: the model keeps them)."""

    found: int
    opened: int
    learned: dict[str, int]
    relabelled: int
    unchanged: int
    gone: int


def default_state_path(model_path: str) -> str:
    """``MODEL.sync`` beside the model."""
    return model_path + STATE_SUFFIX


def parse_folders(specs: Sequence[str], labels: Sequence[str]) -> list[tuple[str, str]]:
    """(label, folder) of each ``LABEL=FOLDER``; the labels must be the model's."""
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
        out.append((label, folder))
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
    `messages.folder_files` says. A message found under two labels at once (copied, not
    moved) is left out, reported: its folders disagree."""
    found: dict[str, tuple[str, str]] = {}
    clash: set[str] = set()
    for label, folder in folders:
        for path, part in folder_files(folder, problems, follow_links=follow_links):
            key = message_key(path, part)
            if key in found and found[key][1] != label:
                clash.add(key)
            found.setdefault(key, (path, label))
    for key in sorted(clash):
        problems.skip(found.pop(key)[0], "in folders of two labels at once, left as it was")
    return found


def load_state(path: str) -> dict[str, tuple[str, str]]:
    """key -> (label, digest hex) of the messages learned by earlier runs; a line a crash
    cut short, or one that cannot be read, is left out (its message is read again)."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise NbspamError(f"cannot read sync state {path}: {os_reason(exc)}") from None
    state = {}
    for line in lines:
        fields = line.split("\t")
        if len(fields) == 3 and len(fields[2]) == 32 and not line.startswith("#"):
            state[fields[0]] = (fields[1], fields[2])
    return state


def save_state(path: str, state: dict[str, tuple[str, str]]) -> None:
    """Write the state whole, atomically (`container.write_file`)."""
    lines = [_HEADER] + [
        f"{key}\t{label}\t{digest}" for key, (label, digest) in sorted(state.items())
    ]
    text = "\n".join(lines) + "\n"
    write_file(path, [text.encode("utf-8", "surrogateescape")], what="sync state")


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
    from .lock import model_lock
    from .modelfile import load_model, remove_leftovers, save_model
    from .update import learn

    with model_lock(model_path):
        remove_leftovers(model_path)
        model = load_model(model_path)
        found = list_folders(
            parse_folders(folders, model.labels), problems, follow_links=follow_links
        )
        state = load_state(state_path)
        todo = sorted(
            (path, label, key)
            for key, (path, label) in found.items()
            if state.get(key, ("",))[0] != label
        )
        learned: dict[str, list[tuple[str, Message]]] = {}
        for path, label, key in todo:
            try:
                data = messages.read_bytes(path)
            except FileNotFoundError:  # moved or deleted since the listing: next run
                continue
            except OSError as exc:
                problems.skip(path, os_reason(exc))
                continue
            message = checked_message(path, data, problems, len(data))
            if message is not None:
                learned.setdefault(label, []).append((key, message))
        changes = Counter()
        for label, keyed in sorted(learned.items()):
            model, change = learn(model, [m for _, m in keyed], label)
            changes["learned:" + label] += change.learned
            changes["relabelled"] += change.relabelled
            changes["unchanged"] += change.unchanged
        if learned:
            save_model(model, model_path)
        kept = {key: state[key] for key in found if key in state and state[key][0] == found[key][1]}
        for label, keyed in learned.items():
            for key, message in keyed:
                kept[key] = (label, message_digest(message.data).hex())
        gone = sum(1 for key in state if key not in found)
        save_state(state_path, kept)
    return SyncReport(
        found=len(found),
        opened=sum(map(len, learned.values())),
        learned={label: changes["learned:" + label] for label in sorted(learned)},
        relabelled=changes["relabelled"],
        unchanged=changes["unchanged"],
        gone=gone,
    )
