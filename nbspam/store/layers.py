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

Standard library only, but for `layered`, which applies records to a `model.Model`.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

from ..errors import ConfigError, UnsafeFileError

USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+=-]{0,127}")
"""A user name a layer may have: letters, digits and ``_ . @ + = -``, 1 to 128 characters,
not starting with a dot or a dash (so never ``..``, a hidden file, or an option)."""


def layer_path(template: str, user: str) -> str:
    """The layer file of ``user`` by ``template`` (``%u`` in its file name is the user).
    Refuses (one line) a user name `USER_NAME` does not match or that holds ``..``, a
    template without exactly one ``%u`` in its file name or with one in its folder, and a
    folder that is missing, not a folder, or not owned by root or the running user (anyone
    else could plant or swap layers there)."""
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
    return os.path.join(folder, name.replace("%u", user))


def layered(model: Any, path: str | os.PathLike[str]) -> Any:
    """The `model.Model` ``model`` (a site model) with the user layer at ``path`` applied:
    it scores exactly as the site model would had it learned what the user taught. A
    missing layer file is an empty layer."""
    from . import journal

    return journal.apply(model, journal.read(path).records)


def load_layered(model_path: str | os.PathLike[str], path: str | os.PathLike[str]) -> Any:
    """The model file at ``model_path`` (with its journal) and the user layer at ``path``
    over it (`layered`)."""
    from .modelfile import load_model

    return layered(load_model(model_path), path)
