"""The models a server scores with: one copy of each in memory, whatever the number of
connections, reloaded at a message boundary when its file is replaced on disk.

A model file is replaced whole (`update`, `train`, `sync`, `restore` and `prune` write a
new file and rename it into place), so a file's identity (device, inode, modification time,
size) tells a new model from the old one without reading it: `Models.scorer` takes one
`stat` a message. A reader never sees half a file: it holds the old inode or the new one.

``model_for`` is the one seam between a request's user and the model that scores it: the
site-wide model, or a user's own model where a path template names one and it exists.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..errors import ServeError
from ..service.quick import ModelScorer, TableScorer, load_scorer
from ..store.safefiles import file_kind

USER_PLACE = "{user}"
MAX_USER_MODELS = 64  # user models kept loaded, the least recently used dropped first
_USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+@=-]{0,127}\Z")


def check_user(name: str) -> str:
    """``name`` if it is a user name a path can be made of: letters, digits and ``_ . + @ =
    -``, at most 128, not starting with a dot or a dash, so never '..', a hidden file or a
    path; else ServeError."""
    if not _USER_NAME.match(name) or ".." in name:
        raise ServeError(f"bad user name {name[:64]!r}: letters, digits and _ . + @ = - only")
    return name


def check_template(template: str) -> str:
    """A user-model path template: ``{user}`` once, in the last part of the path (so the user
    picks a file in one folder the administrator chose, never a folder)."""
    if template.count(USER_PLACE) != 1 or USER_PLACE not in os.path.basename(template):
        raise ServeError(
            f"the user-model template {template!r} needs {USER_PLACE} once, in the file name "
            "(as /var/lib/nbspam/users/{user}.nbm)"
        )
    return template


@dataclass
class Loaded:
    """A model in memory and the identity of the file it was read from."""

    path: str
    identity: tuple[int, int, int, int]
    scorer: TableScorer | ModelScorer
    full: Any = None  # the full Model, for reports and lessons: read the first time one asks


def identity(path: str, *, follow: bool = True) -> tuple[int, int, int, int]:
    """(device, inode, mtime in ns, size) of the regular file at ``path``; ServeError for a
    missing file or one that is not a regular file (a link too, where not ``follow``)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError as exc:
        raise ServeError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ServeError(f"model file {path}: {file_kind(st.st_mode)}, not a regular file")
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


class Models:
    """The site model at ``site`` and, with a ``template``, each user's own model."""

    def __init__(self, site: str, template: str | None = None) -> None:
        self.site = site
        self.template = None if template is None else check_template(template)
        self._loaded: OrderedDict[str, Loaded] = OrderedDict()
        self._lock = threading.Lock()  # reports and lessons load full models in threads
        self.reloads = 0

    def model_for(self, user: str | None) -> str:
        """The path of the model that scores ``user``'s mail: the user's own, where the
        template names one that exists, else the site model. A user's model must be a
        regular file, not a link (a user who may write the folder must not point the
        server at another user's model or at a device)."""
        if user is None or self.template is None:
            return self.site
        path = self.template.replace(USER_PLACE, check_user(user))
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return self.site
        except OSError as exc:
            raise ServeError(f"cannot read model file {path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(st.st_mode):
            raise ServeError(f"model file {path}: {file_kind(st.st_mode)}, not a regular file")
        return path

    def get(self, path: str) -> Loaded:
        """The model at ``path``, read again if the file was replaced since."""
        now = identity(path, follow=path == self.site)
        with self._lock:
            loaded = self._loaded.get(path)
            if loaded is not None and loaded.identity == now:
                self._loaded.move_to_end(path)
                return loaded
        loaded = Loaded(path, now, load_scorer(path))  # outside the lock: scoring goes on
        with self._lock:
            if path in self._loaded:
                self.reloads += 1
            self._loaded[path] = loaded
            self._loaded.move_to_end(path)
            while len(self._loaded) > MAX_USER_MODELS + 1:
                oldest = next(p for p in self._loaded if p != self.site)
                del self._loaded[oldest]
        return loaded

    def full_model(self, loaded: Loaded) -> Any:
        """The full Model of ``loaded`` (numpy and scipy), for explain's report; read once."""
        if loaded.full is None:
            from ..store.modelfile import load_model

            loaded.full = load_model(loaded.path)
        return loaded.full

    def forget_all(self) -> None:
        """Drop every loaded model (SIGHUP): each is read again when next asked for."""
        with self._lock:
            self._loaded.clear()

    def check(self) -> Loaded:
        """Read the site model, refusing one that cannot serve (`--check`)."""
        from ..service.filtering import require_two_classes

        loaded = self.get(self.site)
        require_two_classes(loaded.scorer.labels)
        return loaded
