"""The model file: one versioned, checksummed file; no pickle; written atomically.

Layout (all integers little-endian)::

    magic      8 bytes   b"\\x89NBSPAM\\n"
    version    uint32    FORMAT_VERSION
    length     uint32    byte length of the JSON header
    header     JSON      settings, labels, training info, and where each array lies
    padding    to a multiple of 8 bytes
    arrays     raw little-endian arrays, each starting at a multiple of 8 bytes
    checksum   32 bytes  SHA-256 of everything before it

Arrays: ``terms`` (uint8, the sorted vocabulary as UTF-8 joined by line breaks),
``class_count`` (C,), ``term_count`` (C, d) and ``doc_count`` (C, d), int64;
``seen_digests`` (n, 16) uint8 and ``seen_labels`` (n,) int64, the messages learned.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import struct
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__
from .config import Settings, TokenizerConfig, TrainConfig
from .errors import ModelFileError
from .model import Model

MAGIC = b"\x89NBSPAM\n"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sII")
_DIGEST = 32
_ARRAYS = ("class_count", "term_count", "doc_count", "seen_labels")


def save_model(model: Model, path: str | os.PathLike[str]) -> None:
    """Write ``model`` to ``path`` atomically: a temporary file in the same folder, flushed to
    disk, then renamed over the target. A reader sees the old file or the new, never half."""
    path = Path(path)
    arrays = {"terms": np.frombuffer("\n".join(model.terms).encode("utf-8"), np.uint8)}
    arrays.update({name: getattr(model, name).astype("<i8") for name in _ARRAYS})
    arrays["seen_digests"] = np.ascontiguousarray(model.seen_digests, np.uint8)
    table, offset = {}, 0
    for name, array in arrays.items():
        table[name] = {"dtype": array.dtype.str, "shape": list(array.shape), "offset": offset}
        offset += _aligned(array.nbytes)
    header = {
        "format": "nbspam-model",
        "format_version": FORMAT_VERSION,
        "nbspam_version": __version__,
        "labels": list(model.labels),
        "tokenizer": dataclasses.asdict(model.tokenizer),
        "train": dataclasses.asdict(model.train),
        "info": model.info,
        "cutoffs": None if model.cutoffs is None else list(model.cutoffs),
        "calibration": None if model.calibration is None else list(model.calibration),
        "arrays": table,
    }
    head = json.dumps(header, sort_keys=True, ensure_ascii=False).encode("utf-8")
    parts = [_PREFIX.pack(MAGIC, FORMAT_VERSION, len(head)), head]
    parts.append(b"\0" * (_aligned(_PREFIX.size + len(head)) - _PREFIX.size - len(head)))
    for array in arrays.values():
        raw = array.tobytes()
        parts += [raw, b"\0" * (_aligned(len(raw)) - len(raw))]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    parts.append(digest.digest())
    _write_atomically(path, parts)


def load_model(path: str | os.PathLike[str]) -> Model:
    """Read a model file, refusing (ModelFileError) a missing, truncated, corrupt, foreign or
    newer-format file with a one-line reason. Arrays are never unpickled."""
    return _read(path)[1]


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The checked JSON header of a model file (format and nbspam versions, settings, info)."""
    return _read(path)[0]


def remove_leftovers(path: str | os.PathLike[str]) -> None:
    """Delete temporary files a killed writer of ``path`` left behind (call under the lock).

    Only names `_write_atomically` gives this very file match: ``.NAME.<8 random>.tmp``,
    not those of another model whose name merely starts with NAME.
    """
    path = Path(path)
    own = re.compile(re.escape(f".{path.name}.") + r"[a-z0-9_]{8}\.tmp")
    folder = path.parent if str(path.parent) else Path(".")
    for leftover in folder.iterdir():
        if own.fullmatch(leftover.name):
            leftover.unlink(missing_ok=True)


def _read(path: str | os.PathLike[str]) -> tuple[dict[str, Any], Model]:
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
    if hashlib.sha256(data[:-_DIGEST]).digest() != data[-_DIGEST:]:
        raise ModelFileError(f"{path} is corrupt (checksum mismatch) or truncated")
    try:
        header = json.loads(data[_PREFIX.size : _PREFIX.size + head_len])
        if header.get("format") != "nbspam-model":
            raise ValueError("not an nbspam model header")
        start = _aligned(_PREFIX.size + head_len)
        arrays = {name: _array(data, start, spec) for name, spec in header["arrays"].items()}
        terms = bytes(arrays["terms"]).decode("utf-8")
        settings = Settings(
            tokenizer=_config(TokenizerConfig, header["tokenizer"]),
            train=_config(TrainConfig, header["train"]),
        )
        return header, Model(
            labels=tuple(header["labels"]),
            terms=tuple(terms.split("\n")) if terms else (),
            class_count=arrays["class_count"],
            term_count=arrays["term_count"],
            doc_count=arrays["doc_count"],
            seen_digests=arrays["seen_digests"],
            seen_labels=arrays["seen_labels"],
            tokenizer=settings.tokenizer,
            train=settings.train,
            cutoffs=_pair(header.get("cutoffs")),
            calibration=_pair(header.get("calibration")),
            info=header.get("info", {}),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"{path} has a malformed header ({exc})") from None


def _array(data: bytes, start: int, spec: dict[str, Any]) -> np.ndarray:
    dtype = np.dtype(spec["dtype"])
    if dtype.hasobject:
        raise ValueError("object arrays are not allowed")
    shape = tuple(int(n) for n in spec["shape"])
    count = int(np.prod(shape))
    offset = start + int(spec["offset"])
    if offset < start or offset + count * dtype.itemsize > len(data) - _DIGEST:
        raise ValueError("an array lies outside the file")
    return np.frombuffer(data, dtype, count, offset).reshape(shape)


def _pair(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    first, second = value
    return float(first), float(second)


def _config(cls: type, values: dict[str, Any]) -> Any:
    """A frozen config from saved values; lists become tuples; unknown keys are an error."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - names
    if unknown:
        raise ValueError(f"unknown setting {sorted(unknown)[0]!r}")
    fixed = {k: _tuples(v) for k, v in values.items()}
    return cls(**fixed)


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _aligned(n: int) -> int:
    return (n + 7) // 8 * 8


def _write_atomically(path: Path, parts: list[bytes]) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    try:
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
