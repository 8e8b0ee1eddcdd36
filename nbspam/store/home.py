"""The model a command uses when none is named: ``$NBSPAM_MODEL``, else ``spam.nbm`` in
``$NBSPAM_DIR``, else in ``~/.nbspam`` (as bogofilter keeps ``~/.bogofilter`` and sa-learn
``~/.spamassassin``). The folder is made private (0700): the model holds the words of one's
mail."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

from ..errors import ModelFileError, os_reason

MODEL_NAME = "spam.nbm"
#: How the default is found, as --help and errors say it.
DEFAULT_MODEL_HELP = "$NBSPAM_MODEL, else $NBSPAM_DIR/spam.nbm, else ~/.nbspam/spam.nbm"


def default_model_path(environ: Mapping[str, str] | None = None) -> str:
    """The default model file, by the environment (``os.environ`` unless given)."""
    env = os.environ if environ is None else environ
    if env.get("NBSPAM_MODEL"):
        return os.path.expanduser(env["NBSPAM_MODEL"])
    return os.path.join(_default_folder(env), MODEL_NAME)


def _default_folder(env: Mapping[str, str]) -> str:
    if env.get("NBSPAM_DIR"):
        return os.path.expanduser(env["NBSPAM_DIR"])
    return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".nbspam")


def make_default_folder(environ: Mapping[str, str] | None = None) -> None:
    """Create the folder of the default model (``$NBSPAM_DIR`` or ``~/.nbspam``, not that of
    ``$NBSPAM_MODEL``, which the user chose) if it is missing, with mode 0700. A symbolic
    link there that another user owns is refused: it could send the model elsewhere."""
    env = os.environ if environ is None else environ
    if env.get("NBSPAM_MODEL"):
        return
    folder = _default_folder(env)
    try:
        os.mkdir(folder, 0o700)
        return
    except FileExistsError:
        pass
    except OSError as exc:
        raise ModelFileError(f"cannot create {folder}: {os_reason(exc)}") from None
    info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode) and info.st_uid != os.geteuid():
        raise ModelFileError(
            f"{folder} is a symbolic link of another user: refusing to write the model "
            "through it; remove it, or give -o"
        )
    if not os.path.isdir(folder):
        raise ModelFileError(f"{folder} is not a folder: the default model cannot go there")
