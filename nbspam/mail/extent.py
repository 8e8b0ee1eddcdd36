"""How much there is to read: the bytes of the messages below some paths, from their
listing alone (no file is opened), as the total of a progress bar.

Bytes, not messages: a folder's listing gives its files' sizes as cheaply as their number,
and an mbox or a table holds an unknown number of messages in a known number of bytes.
A reader's progress is then the bytes of the messages it has read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

from .messages import is_maildir, label_spec
from .remote import is_glob, is_url


def input_bytes(
    paths: Iterable[str], *, labelled: bool = False, literal: bool = False
) -> int | None:
    """The bytes of the files ``paths`` name (a folder: the files below it, as the readers
    find them), or None where that cannot be known from a listing: stdin ('-'), a URL or a
    glob (unless ``literal``). ``labelled``: the paths are training specs (``LABEL=PATH``).

    Symbolic links below a folder are not followed, so the count never leaves it; an
    entry that cannot be listed counts nothing."""
    total = 0
    for path in paths:
        if labelled:
            spec = label_spec(path)
            path = spec[1] if spec is not None else path
        if path == "-" or (not literal and (is_url(path) or is_glob(path))):
            return None
        try:
            st = os.stat(path)  # a path named by the user is read where its link leads
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            total += st.st_size
        elif stat.S_ISDIR(st.st_mode):
            total += _folder_bytes(path)
    return total


def _folder_bytes(folder: str) -> int:
    """The bytes of the regular files below ``folder``, as `messages.folder_files` finds
    them: no hidden name, of a Maildir only cur/ and new/; no link followed."""
    total = 0
    pending = [folder]
    while pending:
        current = pending.pop()
        only = ("cur", "new") if is_maildir(current) else None
        try:
            total += _entries_bytes(current, only, pending)
        except OSError:  # a folder that cannot be listed (or read to its end): none of its files
            continue
    return total


def _entries_bytes(folder: str, only: tuple[str, ...] | None, pending: list[str]) -> int:
    """The bytes of the regular files directly in ``folder`` (of ``only`` names, where
    given), its subfolders added to ``pending``. An entry at a time: a listing held whole
    kept every entry with its stat, some 900 bytes a file (13 MB for a folder of 14,712
    messages), memory that grew with the mail for a progress bar's total."""
    total = 0
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith(".") or (only is not None and entry.name not in only):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total
