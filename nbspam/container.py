"""The binary container of a model file: versioned, checksummed, written atomically.

Layout (all integers little-endian)::

    magic      8 bytes   b"\\x89NBSPAM\\n"
    version    uint32    FORMAT_VERSION
    length     uint32    byte length of the JSON header
    header     JSON      anything, plus "arrays": where each named blob lies
    padding    to a multiple of 8 bytes
    blobs      raw little-endian arrays, each starting at a multiple of 8 bytes
    checksum   4 bytes   CRC-32 of everything before it (uint32)

Standard library only, so that scoring one message needs neither numpy nor scipy.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .errors import ModelFileError

MAGIC = b"\x89NBSPAM\n"
FORMAT_VERSION = 1
FORMAT_NAME = "nbspam-model"
_PREFIX = struct.Struct("<8sII")
_DIGEST = 4  # a CRC-32: it catches corruption; truncation is caught by the sizes too


@dataclass(frozen=True)
class Blob:
    """One array to store: its raw bytes, its dtype string (e.g. '<f8') and shape."""

    data: bytes
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Container:
    """A checked model file: its JSON header and its blobs' bytes by name (zero-copy views)."""

    header: dict[str, Any]
    views: dict[str, tuple[memoryview, str, tuple[int, ...]]]

    def view(self, name: str) -> memoryview:
        """The bytes of blob ``name``."""
        return self.views[name][0]


def write(path: str | os.PathLike[str], header: dict[str, Any], blobs: dict[str, Blob]) -> None:
    """Write a container atomically: a temporary file in the same folder, flushed to disk,
    then renamed over the target. A reader sees the old file or the new, never half."""
    table, offset = {}, 0
    for name, blob in blobs.items():
        table[name] = {"dtype": blob.dtype, "shape": list(blob.shape), "offset": offset}
        offset += _aligned(len(blob.data))
    header = {
        **header,
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "nbspam_version": __version__,
        "arrays": table,
    }
    head = json.dumps(header, sort_keys=True, ensure_ascii=False).encode("utf-8")
    parts = [_PREFIX.pack(MAGIC, FORMAT_VERSION, len(head)), head]
    parts.append(b"\0" * (_aligned(_PREFIX.size + len(head)) - _PREFIX.size - len(head)))
    for blob in blobs.values():
        parts += [blob.data, b"\0" * (_aligned(len(blob.data)) - len(blob.data))]
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    parts.append(struct.pack("<I", crc))
    _write_atomically(Path(path), parts)


def read(path: str | os.PathLike[str]) -> Container:
    """Read and check a container, refusing (ModelFileError) a missing, truncated, corrupt,
    foreign or newer-format file with a one-line reason."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ModelFileError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    if len(data) < _PREFIX.size or not data.startswith(MAGIC):
        raise ModelFileError(f"{path} is not an nbspam model file")
    _, version, head_len = _PREFIX.unpack_from(data)
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"{path} is a model of format {version}, newer than this nbspam {__version__} "
            f"reads ({FORMAT_VERSION}); upgrade nbspam"
        )
    if len(data) < _PREFIX.size + head_len + _DIGEST:
        raise ModelFileError(f"{path} is truncated")
    if zlib.crc32(memoryview(data)[:-_DIGEST]) != struct.unpack("<I", data[-_DIGEST:])[0]:
        raise ModelFileError(f"{path} is corrupt (checksum mismatch) or truncated")
    try:
        header = json.loads(data[_PREFIX.size : _PREFIX.size + head_len])
        if header.get("format") != FORMAT_NAME:
            raise ValueError("not an nbspam model header")
        start = _aligned(_PREFIX.size + head_len)
        whole = memoryview(data)
        views = {}
        for name, spec in header["arrays"].items():
            dtype, shape = str(spec["dtype"]), tuple(int(n) for n in spec["shape"])
            size = _itemsize(dtype) * _product(shape)
            offset = start + int(spec["offset"])
            if offset < start or offset + size > len(data) - _DIGEST:
                raise ValueError(f"array {name} lies outside the file")
            views[name] = (whole[offset : offset + size], dtype, shape)
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"{path} has a malformed header ({exc})") from None
    return Container(header, views)


def remove_leftovers(path: str | os.PathLike[str]) -> None:
    """Delete temporary files a killed writer of ``path`` left behind (call under the lock).

    Only names `write` gives this very file match: ``.NAME.<8 random>.tmp``, not those of
    another model whose name merely starts with NAME.
    """
    path = Path(path)
    own = re.compile(re.escape(f".{path.name}.") + r"[a-z0-9_]{8}\.tmp")
    folder = path.parent if str(path.parent) else Path(".")
    for leftover in folder.iterdir():
        if own.fullmatch(leftover.name):
            leftover.unlink(missing_ok=True)


_ITEMSIZE = {
    "u1": 1,
    "i1": 1,
    "u2": 2,
    "i2": 2,
    "u4": 4,
    "i4": 4,
    "f4": 4,
    "u8": 8,
    "i8": 8,
    "f8": 8,
}


def _itemsize(dtype: str) -> int:
    """Bytes per item of a little-endian (or byte) numeric dtype string such as '<f8' or '|u1'."""
    if dtype[:1] not in "<|" or dtype[1:] not in _ITEMSIZE:
        raise ValueError(f"unsupported array type {dtype!r}")
    return _ITEMSIZE[dtype[1:]]


def _product(shape: tuple[int, ...]) -> int:
    n = 1
    for size in shape:
        if size < 0:
            raise ValueError("negative array size")
        n *= size
    return n


def _aligned(n: int) -> int:
    return (n + 7) // 8 * 8


def _write_atomically(path: Path, parts: list[bytes]) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    try:
        import tempfile  # writing only: reading a model (a cold start) does without it

        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise ModelFileError(f"cannot write model file {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ModelFileError(f"cannot write model file {path}: {exc.strerror or exc}") from None
        raise
    _fsync_folder(folder)


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (where the platform allows opening folders)."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def _mode_for(path: Path) -> int:
    """Keep an existing file's permissions; a new file gets 0o666 less the umask."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
