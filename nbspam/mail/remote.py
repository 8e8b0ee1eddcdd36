"""Messages named by a pattern or a URL: a local glob (``mail/2026-*/*.eml``) or an fsspec
URL (``s3://bucket/spam/*.mbox``, ``gs://``, ``https://``, ``memory://``), each file a
message or an mbox of messages, read as local files are (`messages`).

fsspec comes with the ``dask`` extra; the protocol's own back end (s3fs for ``s3://``,
gcsfs for ``gs://``) is the user's to install, and a missing one is said in one line.

Only the object stores and the web are read (`URL_SCHEMES`): any other scheme fsspec knows
(``ftp://``, ``sftp://``, ``reference://``, ``data://``, a chain of them with ``::``) is
refused in one line, never opened. Where paths come from others (the lines of
--files-from, a delivery pipe), the caller reads them as file names and never comes here
(`messages.read_messages` with ``literal``).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator

from ..errors import InputError
from .mbox import mbox_messages
from .message import MAX_MESSAGE_BYTES, Message, Problems, checked_message

_GLOB = set("*?[")
# the schemes read as URLs: object stores and the web (memory:// is fsspec's in-process store)
URL_SCHEMES = ("s3", "gs", "gcs", "az", "abfs", "http", "https", "memory")


def is_url(path: str) -> bool:
    """Whether ``path`` is a URL (``scheme://...``) rather than a local path."""
    scheme, sep, _ = path.partition("://")
    return bool(sep) and scheme.isidentifier() and not os.path.exists(path)


def is_glob(path: str) -> bool:
    """Whether ``path`` is a pattern of local files that is not itself a file's name."""
    return not _GLOB.isdisjoint(path) and not os.path.exists(path)


def local_glob(pattern: str) -> list[str]:
    """The local paths matching ``pattern`` (``**`` spans folders), sorted."""
    return sorted(glob.glob(os.path.expanduser(pattern), recursive=True))


def check_url(url: str) -> None:
    """Refuse (InputError) a URL whose scheme is not in `URL_SCHEMES`, or a chained one,
    before fsspec is asked."""
    scheme = url.partition("://")[0]
    if scheme.lower() not in URL_SCHEMES or "::" in url:
        raise InputError(
            f"{url}: no such file, and not a URL nbspam reads "
            f"(it reads s3://, gs://, az://, http:// and https://)"
        )


def url_files(url: str) -> list:
    """The fsspec files matching the URL (a pattern or one file), sorted by path; the
    scheme checked first (`check_url`)."""
    check_url(url)
    try:
        import fsspec
    except ImportError:
        raise InputError(
            f"{url}: reading URLs needs fsspec: pip install fsspec (it comes with 'dask[distributed]')"
        ) from None
    try:
        files = fsspec.open_files(url, mode="rb")
    except (ImportError, ValueError) as exc:  # no back end for the protocol, a bad URL
        raise InputError(f"{url}: {exc}") from None
    return sorted(files, key=lambda f: f.path)


def url_messages(url: str, problems: Problems) -> Iterator[Message]:
    """The messages of every file matching the URL (a pattern or one file), in sorted
    order; a file named .mbox holds many. Each is read up to `MAX_MESSAGE_BYTES`. A scheme
    not in `URL_SCHEMES` is refused (InputError), before fsspec is asked."""
    files = url_files(url)
    if not files:
        problems.skip(url, "no file matches")
        return
    for handle in files:
        name = handle.fs.unstrip_protocol(handle.path)
        try:
            with handle as f:
                if name.lower().endswith(".mbox"):
                    for number, (data, size) in enumerate(mbox_messages(f), start=1):
                        message = checked_message(f"{name}#{number}", data, problems, size)
                        if message is not None:
                            yield message
                    continue
                data = f.read(MAX_MESSAGE_BYTES + 1)
        except OSError as exc:
            problems.skip(name, str(exc) or type(exc).__name__)
            continue
        message = checked_message(name, data, problems)
        if message is not None:
            yield message
