"""Per-user layers over a site-wide model: what one user taught, kept apart.

A user layer is a `journal` file of its own (base `journal.LAYER`: it applies over any
model), holding the records of what the user learned and forgot, resolved against the site
model and the layer at the time. Scoring with a layer uses the site model's counts plus the
layer's changes: exactly the model the site model would be had it learned the user's
corrections (`layered`), so a user's correction moves that user's scores only. A layer is
never folded into the site model; it grows with what its user teaches (at most
`journal.MAX_JOURNAL` bytes).

Its path comes from a template whose file name holds ``%u`` (``/var/lib/nbspam/users/%u.nbj``)
and a user name that is checked strictly (`layer_path`): the file is always in the
template's folder, which must exist and belong to root or to the user running nbspam.

Where every mail user writes their own layer (Dovecot runs the wrapper as the user), the
folder is one they all may write: with the sticky bit, so that none can rename another's
layer away and put one of their own in its place (a folder a group or others may write
without it is refused, `trust.check_folder`). A user may still make the layer of another
who has none yet, so a layer found by the template (`LayerPath`) is read only where it
belongs to root, to the user running nbspam or to the user it is for; no group but its
owner's private one may write any layer (`trust.check_file`), and a new one is made so.

Standard library only, but for `layered`, which applies records to a `model.Model`.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

from ..core.trust import check_folder, user_id
from ..errors import ConfigError, UnsafeFileError

USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+=-]{0,127}")
"""A user name a layer may have: letters, digits and ``_ . @ + = -``, 1 to 128 characters,
not starting with a dot or a dash (so never ``..``, a hidden file, or an option)."""


class LayerPath(str):
    """The path of a user's layer, as a `str`, that knows its ``user``: who may own the file
    besides root and the user running nbspam (`writers`)."""

    user: str

    def __new__(cls, path: str, user: str) -> LayerPath:
        self = super().__new__(cls, path)
        self.user = user
        return self

    def __reduce__(self) -> tuple:
        return LayerPath, (str(self), self.user)


def writers(layer: str | os.PathLike[str]) -> tuple[frozenset[int] | None, None]:
    """(owners, group) a layer may have, as `safefiles.open_side_file` takes them: no group
    (but its owner's private one), and of a `LayerPath` (a user's, by the template) the user
    it is for where that is a user of this host (root and the user running nbspam always
    may own it); any owner where the caller named the file itself, as for a model."""
    if not isinstance(layer, LayerPath):
        return None, None
    uid = user_id(layer.user)
    return frozenset() if uid is None else frozenset({uid}), None


def read(layer: str | os.PathLike[str]) -> Any:
    """The `journal.Contents` of the layer file ``layer`` (empty where there is none),
    refused where others than those `writers` allows may write it."""
    from . import journal

    return journal.read(layer, writers=writers(layer), what="layer")


def layer_path(template: str, user: str) -> LayerPath:
    """The layer file of ``user`` by ``template`` (``%u`` in its file name is the user).
    Refuses (one line) a user name `USER_NAME` does not match or that holds ``..``, a
    template without exactly one ``%u`` in its file name or with one in its folder, and a
    folder that is missing, not a folder, not owned by root or the running user (anyone
    else could plant or swap layers there), or that a group or others may write without
    the sticky bit (one user could swap another's layer)."""
    if not USER_NAME.fullmatch(user) or ".." in user:
        raise ConfigError(
            f"--user {user!r} is not a user name nbspam accepts: 1 to 128 letters, digits "
            "or _ . @ + = -, not starting with . or -, without '..'"
        )
    folder, name = os.path.split(template)
    if name.count("%u") != 1 or "%u" in folder:
        raise ConfigError(
            f"--user-models {template!r} must hold %u once, in its file name "
            "(e.g. /var/lib/nbspam/users/%u.nbj)"
        )
    try:
        stats = os.stat(folder or ".")
    except OSError as exc:
        raise ConfigError(
            f"--user-models {template!r}: its folder: {exc.strerror or exc}"
        ) from None
    if not stat.S_ISDIR(stats.st_mode):
        raise ConfigError(f"--user-models {template!r}: {folder} is not a folder")
    if stats.st_uid not in (0, os.geteuid()):
        raise UnsafeFileError(
            f"--user-models {template!r}: {folder or '.'} belongs to user {stats.st_uid}, "
            "not to root or to the user running nbspam: refusing to keep layers there"
        )
    check_folder(stats, folder or ".", f"--user-models {template!r}: its folder")
    return LayerPath(os.path.join(folder, name.replace("%u", user)), user)


def layered(model: Any, path: str | os.PathLike[str]) -> Any:
    """The `model.Model` ``model`` (a site model) with the user layer at ``path`` applied:
    it scores exactly as the site model would had it learned what the user taught. A
    missing layer file is an empty layer; one others may write is refused (`read`)."""
    from . import journal

    return journal.apply(model, read(path).records)


def load_layered(model_path: str | os.PathLike[str], path: str | os.PathLike[str]) -> Any:
    """The model file at ``model_path`` (with its journal) and the user layer at ``path``
    over it (`layered`)."""
    from .modelfile import load_model

    return layered(load_model(model_path), path)
