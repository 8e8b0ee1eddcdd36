"""One writer at a time: an exclusive lock beside a model file while it is updated.

The lock is ``flock(2)`` on ``MODEL.lock``. The kernel releases it when its holder exits,
however it exits (even by SIGKILL), so a lock can never be left stale by a dead process;
a live holder that keeps it longer than the timeout makes the waiting command give up
with a one-line error that names its process id. Readers need no lock: model files are
replaced by an atomic rename, so a reader sees the old model or the new one.

The lock file is a file beside the model (`safefiles`): never opened through a symbolic
link, created exclusively with the model's mode and group, so that every user who may
write a shared model may also take its lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import LockError, os_reason
from .container import target
from .safefiles import check_model_path, check_side_path, open_side_file

DEFAULT_TIMEOUT = 60.0


@contextmanager
def model_lock(
    path: str | os.PathLike[str],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    beside: str | os.PathLike[str] | None = None,
) -> Iterator[None]:
    """Hold the exclusive lock of the model at ``path`` for the duration of the block.

    The lock is beside the model's `container.target` (through symbolic links), so that two
    writers reaching one file by different links exclude each other; a target that is not a
    regular file, or a link of another user on the way or a name another user made first in
    a folder anyone may write (`safefiles.check_model_path`), is
    refused before any lock file is made beside it. The lock of a file kept
    ``beside`` a model (`filter`'s state) is beside that file itself, which may not be a
    link, and takes the model's permissions.
    """
    if beside is None:
        check_model_path(path)
        real = target(path)
        like = real
    else:
        real = check_side_path(path, "state file")
        like = beside
    lock_path = real.with_name(real.name + ".lock")
    try:
        fd = open_side_file(lock_path, os.O_RDWR | os.O_CREAT, what="lock file", like=like)
    except OSError as exc:
        hint = ""
        if exc.errno == errno.EACCES and os.path.lexists(lock_path):  # made by an old nbspam
            hint = "; its owner can give it the model's mode (chmod g+rw), or remove it"
        raise LockError(f"cannot create lock file {lock_path}: {os_reason(exc)}{hint}") from None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
                    raise LockError(
                        f"{path} is being updated by another process (pid {holder}); gave up "
                        f"after {timeout:g} s"
                    ) from None
                time.sleep(0.02)
        # the pid first, then cut the rest: a waiting process never reads an empty file
        pid = f"{os.getpid()}\n".encode()
        try:
            os.pwrite(fd, pid, 0)
            os.ftruncate(fd, len(pid))
        except OSError as exc:  # a full disk: nothing is written, the model is untouched
            raise LockError(f"cannot write lock file {lock_path}: {os_reason(exc)}") from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
