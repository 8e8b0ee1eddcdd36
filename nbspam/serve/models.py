"""The models a server scores with: the site model once in memory, whatever the number of
connections, with its `journal` applied, and each user's `layers` over it; read again at a
message boundary when they change on disk.

What is on disk is told apart without reading it: the model file's identity (device, inode,
modification time, size; a model is replaced whole, by rename) and its journal's
`journal.version` (a learn appends to the journal, from the command line or a TELL). New
journal records are applied to the model in memory, in work proportional to them and one
copy of the arrays; a replaced file is read again. The files are looked at before a message
when `CHECK_EVERY` seconds have passed since the last look, and always after a TELL.

A user's layer (``--user-models`` with ``%u``, as the commands take it) is applied over the
site model: the user scores with exactly the model `nbspam predict --user` uses. A user
without a layer file scores with the site model itself; a user with one costs one weight
vector (8 bytes a term of the vocabulary) for as long as the user is among the
`MAX_USER_MODELS` most recently served.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..errors import NbspamError, ServeError
from ..service.array_scoring import ArrayScorer, load_array_scorer, vocabulary_index
from ..store import journal, layers
from ..store.layers import USER_NAME, layer_path
from ..store.safefiles import file_kind

MAX_USER_MODELS = 64  # users' scorers kept, the least recently used dropped first
CHECK_EVERY = 0.02  # seconds between two looks at the site model's files


def check_user(name: str) -> str:
    """``name`` if it is a user name a layer may have (`layers.USER_NAME`, never '..'), else
    ServeError."""
    if not USER_NAME.fullmatch(name) or ".." in name:
        raise ServeError(f"bad user name {name[:64]!r}: letters, digits and _ . + @ = - only")
    return name


def check_template(template: str) -> str:
    """A layer path template as the commands take it: ``%u`` once, in the file name, in a
    folder that exists and belongs to root or to the user running the server."""
    try:
        layer_path(template, "check")
    except NbspamError as error:
        raise ServeError(str(error)) from None
    return template


@dataclass
class Loaded:
    """A scorer and what it was made from: ``version`` (the files' identities then), the
    full ``model`` where it is in memory, the ``fingerprint`` of the model file its journal
    is bound to and the journal records ``applied`` to it."""

    version: tuple
    scorer: ArrayScorer
    model: Any = None
    fingerprint: tuple[int, int] | None = None
    applied: int = 0
    index: dict[str, int] | None = None
    layer: str | None = None  # the user layer over the site model, if any


def identity(path: str) -> tuple[int, int, int, int]:
    """(device, inode, mtime in ns, size) of the regular file at ``path``; ServeError for a
    missing file or one that is not a regular file."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ServeError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ServeError(f"model file {path}: {file_kind(st.st_mode)}, not a regular file")
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


def layer_version(path: str) -> tuple[int, int, int] | None:
    """(inode, mtime in ns, size) of the layer file at ``path``, None where there is none;
    ServeError where it is not a regular file (a link a user planted is never followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ServeError(f"cannot read layer {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ServeError(f"layer {path}: {file_kind(st.st_mode)}, not a regular file")
    return st.st_ino, st.st_mtime_ns, st.st_size


class Models:
    """The site model at ``site`` and, with a ``template``, each user's layer over it."""

    def __init__(self, site: str, template: str | None = None) -> None:
        self.site = site
        self.template = None if template is None else check_template(template)
        self._site: Loaded | None = None
        self._users: OrderedDict[str, Loaded] = OrderedDict()
        self._looked = 0.0  # when the site's files were last looked at (time.monotonic)
        self._lock = threading.Lock()  # reports and lessons run in threads
        self.reloads = 0

    # -- what scores a request ----------------------------------------------------------

    def layer_for(self, user: str | None) -> str | None:
        """The layer file of ``user`` (which may not exist), None without a template."""
        if user is None or self.template is None:
            return None
        try:
            return layer_path(self.template, check_user(user))
        except NbspamError as error:
            raise ServeError(str(error)) from None

    def scorer_for(self, user: str | None) -> Loaded:
        """What scores ``user``'s mail: the site model, with the user's layer over it where
        the user has one."""
        site = self.current()
        layer = self.layer_for(user)
        version = None if layer is None else layer_version(layer)
        if version is None:
            return site
        with self._lock:
            loaded = self._users.get(layer)
            if loaded is not None and loaded.version == (site.version, version):
                self._users.move_to_end(layer)
                return loaded
        records = layers.read(layer).records
        if not records:
            return site
        site = self._full(site)
        model = journal.apply(site.model, records)
        index = site.index if model.terms is site.model.terms else None
        scorer = ArrayScorer.of_model(model, index)
        loaded = Loaded((site.version, version), scorer, layer=layer)
        with self._lock:
            self._users[layer] = loaded
            self._users.move_to_end(layer)
            while len(self._users) > MAX_USER_MODELS:
                self._users.popitem(last=False)
        return loaded

    def current(self) -> Loaded:
        """The site model as it is on disk now (looked at most every `CHECK_EVERY` s)."""
        now = time.monotonic()
        site = self._site
        if site is not None and now - self._looked < CHECK_EVERY:
            return site
        version = (identity(self.site), journal.version(self.site))
        self._looked = now
        if site is not None and site.version == version:
            return site
        loaded = self._updated(site, version) if site is not None else None
        if loaded is None:
            loaded = self._read(version)
        with self._lock:
            if self._site is not None:
                self.reloads += 1
            self._site = loaded
        return loaded

    def labels(self) -> tuple[tuple[str, ...], str | None]:
        """(the site model's labels, its positive label) as last read: what a TELL needs,
        without applying the journal first (labels change only with a replaced model)."""
        site = self._site or self.current()
        return site.scorer.labels, site.scorer.positive

    def changed(self) -> None:
        """A TELL changed the files: look at them before the next message."""
        self._looked = 0.0

    def _read(self, version: tuple) -> Loaded:
        """The site model read anew: its scoring table alone where it has no journal records
        (read a page at a time as messages need them: a reload reads the header, whatever
        the size of the model), else the model with its journal applied."""
        scorer = load_array_scorer(self.site)
        if scorer is not None:
            return Loaded(version, scorer, fingerprint=scorer._box.fingerprint)
        return self._of_file(version)

    def _of_file(self, version: tuple) -> Loaded:
        from ..store.modelfile import load_journalled

        model, fingerprint, applied = load_journalled(self.site)
        index = vocabulary_index(model.terms)
        return Loaded(
            version, ArrayScorer.of_model(model, index), model, fingerprint, applied, index
        )

    def _updated(self, site: Loaded, version: tuple) -> Loaded | None:
        """``site`` with the journal records added since it was read, where the model file
        is the same and its journal only grew; None where it must be read anew."""
        if site.version[0] != version[0] or site.model is None:
            return None
        contents = journal.pending(self.site, site.fingerprint)
        if contents is None or len(contents.records) < site.applied:
            return None
        model = journal.apply(site.model, contents.records[site.applied :])
        index = site.index if model.terms is site.model.terms else vocabulary_index(model.terms)
        scorer = ArrayScorer.of_model(model, index)
        return Loaded(version, scorer, model, site.fingerprint, len(contents.records), index)

    def _full(self, site: Loaded) -> Loaded:
        """``site`` with its full model in memory (layers apply over it): read where the site
        was only a scoring table."""
        if site.model is not None:
            return site
        loaded = self._of_file(site.version)
        with self._lock:
            if self._site is site:
                self._site = loaded
        return loaded

    # -- reports, lessons, signals ------------------------------------------------------

    def full_model(self, loaded: Loaded) -> Any:
        """The full Model that ``loaded`` scores with, for explain's report: the site model,
        or the site model with the user's layer over it (made anew: reports are rare)."""
        if loaded.layer is None:
            return loaded.model if loaded.model is not None else self._full(loaded).model
        site = self._full(self.current())
        return journal.apply(site.model, layers.read(loaded.layer).records)

    def forget_all(self) -> None:
        """Drop every loaded model (SIGHUP): each is read again when next asked for."""
        with self._lock:
            self._site = None
            self._users.clear()

    def check(self) -> Loaded:
        """Read the site model, refusing one that cannot serve (`--check`)."""
        from ..service.filtering import require_two_classes

        loaded = self.current()
        require_two_classes(loaded.scorer.labels)
        return loaded
