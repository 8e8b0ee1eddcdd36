"""The binary container of a model file: versioned, checksummed, written atomically.

Layout (all integers little-endian)::

    magic      8 bytes   b"\\x89NBSPAM\\n"
    version    uint32    FORMAT_VERSION
    length     uint32    byte length of the JSON header
    header     JSON      anything, plus "arrays": where each named blob lies
    padding    to a multiple of 8 bytes
    blobs      raw little-endian arrays, each starting at a multiple of 8 bytes
    checksum   4 bytes   CRC-32 of everything before it (uint32)

A model file also ends its blobs with ``page_crc`` (uint32, `PAGES`): the CRC-32 of the
magic, version, length, header and padding, then of each `PAGE` bytes of the blobs before
it. A reader of a few values (`open_paged`: scoring one message) reads the header and the
pages that hold them, each checked against its CRC-32, so that its time and memory follow
the message, not the file; a file without page checksums is read whole.

Standard library only, so that scoring one message needs neither numpy nor scipy.
"""

from __future__ import annotations

import json
import os
import re
import stat
import struct
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator

from .. import __version__
from ..core.trust import ANY_GROUP, check_file
from ..errors import ModelFileError, NbspamError, os_reason
from .safefiles import (
    apply_permissions,
    check_model_path,
    check_output_path,
    check_side_path,
    create_temporary,
    file_kind,
    permissions_of,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

MAGIC = b"\x89NBSPAM\n"
FORMAT_VERSION = 1
FORMAT_NAME = "nbspam-model"
_PREFIX = struct.Struct("<8sII")
_DIGEST = 4  # a CRC-32: it catches corruption; truncation is caught by the sizes too
MAX_HEADER = 16 * 2**20  # bytes of JSON: settings, labels and history need far less
JOURNAL_SUFFIX = ".journal"  # the name of a model's journal: the model's, and this
PAGE = 4096  # bytes of blobs under one CRC-32 of `PAGES`
PAGES = "page_crc"
_CRC = struct.Struct("<I")
_CRCS = PAGE // 4  # entries of `PAGES` in a page of it

# (Plain classes, not dataclasses: importing dataclasses costs the one-message path more
# than scoring the message.)


class Blob:
    """One array to store: its raw bytes, its dtype string (e.g. '<f8') and shape; or,
    in place of the bytes, ``chunks``: pieces of them, read as the file is written, whose
    lengths add up to the array's size (a large array need not be held whole)."""

    __slots__ = ("data", "dtype", "shape", "chunks")

    def __init__(
        self,
        data: bytes,
        dtype: str,
        shape: tuple[int, ...],
        *,
        chunks: Iterable[bytes] | None = None,
    ) -> None:
        self.data, self.dtype, self.shape, self.chunks = data, dtype, shape, chunks

    @property
    def size(self) -> int:
        if self.chunks is None:
            return len(self.data)
        return _itemsize("blob", self.dtype) * _product(self.shape)


class Container:
    """A checked model file: its JSON header and its blobs by name, as (bytes, dtype,
    shape): zero-copy views of a file read whole, or None where `pages` reads them."""

    __slots__ = ("header", "views", "fingerprint", "pages")

    def __init__(
        self,
        header: dict[str, Any],
        views: dict[str, tuple[Any, str, tuple[int, ...]]],
        fingerprint: tuple[int, int] = (0, 0),
        pages: Pages | None = None,
    ) -> None:
        self.header, self.views = header, views
        self.fingerprint = fingerprint
        """(size, stored CRC-32) of the file: what a `journal` beside it is bound to."""
        self.pages = pages
        """Of a file read a page at a time (`open_paged`): what reads and checks them."""

    def view(self, name: str) -> memoryview:
        """The bytes of blob ``name``."""
        return self.views[name][0]


def write(
    path: str | os.PathLike[str],
    header: dict[str, Any],
    blobs: dict[str, Blob],
    *,
    pages: bool = False,
) -> None:
    """Write a container atomically: a temporary file in the folder of the `target`, flushed
    to disk, then renamed over it. A reader sees the old file or the new, never half; a
    symbolic link stays a link to the new file. With ``pages``, the blobs end with
    `PAGES`, the checksums of the header and of each page of the blobs."""
    table, offset = {}, 0
    for name, blob in blobs.items():
        table[name] = {"dtype": blob.dtype, "shape": list(blob.shape), "offset": offset}
        offset += _aligned(blob.size)
    if pages:
        table[PAGES] = {"dtype": "<u4", "shape": [_page_count(offset)], "offset": offset}
    header = {
        **header,
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "nbspam_version": __version__,
        "arrays": table,
    }
    head = json.dumps(header, sort_keys=True, ensure_ascii=False, allow_nan=False).encode("utf-8")
    _check_header_size(path, len(head))
    start = _PREFIX.pack(MAGIC, FORMAT_VERSION, len(head)) + head
    start += b"\0" * (_aligned(len(start)) - len(start))
    write_file(path, _parts(start, list(blobs.values()), pages))
    # a journal beside the file it replaces belongs to that file: its records are in this
    # one (a fold), or this one replaces them (train -o, restore)
    real = target(path)
    real.with_name(real.name + JOURNAL_SUFFIX).unlink(missing_ok=True)


def _check_header_size(path: str | os.PathLike[str], size: int) -> None:
    """Refuse a header past `MAX_HEADER` before anything is written: every reader refuses
    such a file, so writing it would replace a model (or fail to make one) with a file no
    command can read. A table model keeps all its statistics there: each category and each
    term of a text column."""
    if size > MAX_HEADER:
        raise ModelFileError(
            f"cannot write {path}: its header would take {size:,} bytes, more than the "
            f"{MAX_HEADER:,} a model file may hold (a table model keeps every category and "
            "term of its columns there); nothing was written"
        )


def _parts(start: bytes, blobs: list[Blob], pages: bool) -> Iterator[bytes]:
    """The bytes of a container after its header block ``start``, as `write` lays them
    out, made as they are written: each blob (its bytes or its chunks) padded to 8 bytes,
    with pages, the checksums of the header block and of each `PAGE` of the blobs, and
    the CRC-32 of all."""
    crc, page = zlib.crc32(start), _PageCrcs()
    yield start
    for blob in blobs:
        size = 0
        for piece in [blob.data] if blob.chunks is None else blob.chunks:
            size += len(piece)
            crc = zlib.crc32(piece, crc)
            page.feed(piece)
            yield piece
        if size != blob.size:
            raise ValueError(f"a blob of {blob.size} bytes was given {size}")
        pad = b"\0" * (_aligned(size) - size)
        crc = zlib.crc32(pad, crc)
        page.feed(pad)
        yield pad
    if pages:
        crcs = [zlib.crc32(start), *page.done()]
        data = struct.pack(f"<{len(crcs)}I", *crcs)
        data += b"\0" * (_aligned(len(data)) - len(data))
        crc = zlib.crc32(data, crc)
        yield data
    yield struct.pack("<I", crc)


class _PageCrcs:
    """The CRC-32 of each `PAGE` of bytes fed in pieces of any length."""

    def __init__(self) -> None:
        self.crcs: list[int] = []
        self.crc = self.filled = 0

    def feed(self, data: bytes) -> None:
        view = memoryview(data).cast("B")
        while len(view):
            take = min(PAGE - self.filled, len(view))
            self.crc = zlib.crc32(view[:take], self.crc)
            self.filled += take
            view = view[take:]
            if self.filled == PAGE:
                self.crcs.append(self.crc)
                self.crc = self.filled = 0

    def done(self) -> list[int]:
        return self.crcs + [self.crc] if self.filled else self.crcs


def read(path: str | os.PathLike[str]) -> Container:
    """Read and check a container, refusing (ModelFileError) a missing, special, truncated,
    corrupt, foreign or newer-format file with a one-line reason.

    Never reads more than the header promises: the file must be a regular file (a FIFO or
    a device would block or never end) whose size is exactly what its array table adds up to.
    """
    f = _open(path)
    try:
        return _read(path, f)
    except OSError as exc:
        raise ModelFileError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    finally:
        f.close()


def file_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the model file at ``path``, opened once and checked as `read` opens it
    (a regular file others may not write, `_open`), not parsed: what is sent to the
    workers of a cluster, which read it as a model file."""
    f = _open(path)
    try:
        return f.readall()
    except OSError as exc:
        raise ModelFileError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    finally:
        f.close()


def open_paged(path: str | os.PathLike[str]) -> Container | None:
    """The container at ``path`` with its header checked as by `read` (the header's own
    checksum included) and its blobs left unread: its `Container.pages` reads them a page
    at a time, each checked against its checksum. None for a file without page checksums,
    which `read` reads whole. The file stays open while the pages are in use."""
    f = _open(path)
    try:
        header, start, table, size = _head(path, f)
        if PAGES not in table:
            f.close()
            return None
        pages = Pages(path, f, start, table)
        crc = _CRC.unpack(pages.pread(_DIGEST, size - _DIGEST))[0]
    except OSError as exc:
        f.close()
        raise ModelFileError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    except BaseException:
        f.close()
        raise
    views = {name: (None, dtype, shape) for name, (dtype, shape, _, _) in table.items()}
    return Container(header, views, (size, crc), pages)


class Pages:
    """The blobs of an open model file read a `PAGE` at a time (`open_paged`), each page
    checked against its CRC-32 in `PAGES` when it is read: a corrupt page a reader reads is
    refused as a corrupt file is, and what it reads costs time in proportion to the pages
    it touches. The last `KEPT` pages read are kept, so memory does not grow with the file."""

    KEPT = 256  # pages (1 MiB)

    def __init__(
        self,
        path: str | os.PathLike[str],
        f: Any,
        start: int,
        table: dict[str, tuple[str, tuple[int, ...], int, int]],
    ) -> None:
        self.path, self._file, self._start = path, f, start
        self._fd = f.fileno()
        self._blobs = {name: (offset, nbytes) for name, (_, _, offset, nbytes) in table.items()}
        dtype, shape, self._end, _ = table[PAGES]  # the pages cover the blobs before it
        if dtype != "<u4" or shape != (_page_count(self._end),):
            raise invalid(path, f"array {PAGES} does not fit the arrays before it")
        self._pages: OrderedDict[int, bytes] = OrderedDict()
        self.reads = 0  # pages read (and checked) so far
        self._crcs: dict[int, tuple[int, ...]] = {}  # a page of checksums, by its number
        if zlib.crc32(self.pread(start, 0)) != self._crc(0):
            raise ModelFileError(f"{path} is corrupt (checksum mismatch)")

    def pread(self, size: int, at: int) -> bytes:
        """``size`` bytes of the file from ``at``, unchecked; a file cut short is truncated."""
        data = os.pread(self._fd, size, at)
        if len(data) != size:
            raise ModelFileError(f"{self.path} is truncated")
        return data

    def blob(self, name: str) -> tuple[int, int]:
        """(where blob ``name`` starts among the blobs, its bytes)."""
        return self._blobs[name]

    def read(self, at: int, size: int) -> bytes:
        """``size`` bytes of the blobs from ``at`` (as `blob` places them), checked."""
        if at < 0 or size < 0 or at + size > self._end:
            raise invalid(self.path, "a read outside its arrays")
        if not size:
            return b""
        first, last = at // PAGE, (at + size - 1) // PAGE
        at -= first * PAGE
        if first == last:
            page = self._pages.get(first) or self._page(first)
            return page[at : at + size]
        return b"".join(map(self._page, range(first, last + 1)))[at : at + size]

    def _page(self, number: int) -> bytes:
        pages = self._pages
        page = pages.get(number)
        if page is None:  # (the one-message path reads a few hundred: kept short)
            at = number * PAGE
            page = self.pread(min(PAGE, self._end - at), self._start + at)
            crcs = self._crcs.get((number + 1) // _CRCS)
            crc = self._crc(number + 1) if crcs is None else crcs[(number + 1) % _CRCS]
            if zlib.crc32(page) != crc:
                raise ModelFileError(f"{self.path} is corrupt (checksum mismatch)")
            if len(pages) >= self.KEPT:
                pages.popitem(last=False)  # the oldest
            pages[number] = page
            self.reads += 1
        return page

    def _crc(self, index: int) -> int:
        """Entry ``index`` of `PAGES`, read with the entries beside it (a page of them)."""
        group, count = divmod(index, _CRCS)
        crcs = self._crcs.get(group)
        if crcs is None:
            entries = min(_CRCS, _page_count(self._end) - group * _CRCS)
            data = self.pread(4 * entries, self._start + self._end + group * PAGE)
            crcs = self._crcs[group] = struct.unpack(f"<{entries}I", data)
        return crcs[count]

    def close(self) -> None:
        self._file.close()


def _open(path: str | os.PathLike[str]) -> Any:
    """The model file at ``path`` open for reading (unbuffered), refused (ModelFileError)
    where it cannot be read or is not a regular file (a FIFO or a device would block or
    never end), and (UnsafeFileError, `_check_writers`) where others may write it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ModelFileError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    try:
        stats = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise ModelFileError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(stats.st_mode):
        os.close(fd)
        kind = file_kind(stats.st_mode)
        raise ModelFileError(f"cannot read model file {path}: {kind}, not a regular file")
    try:
        _check_writers(stats, path, fd)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb", buffering=0)


def _check_writers(stats: os.stat_result, path: str | os.PathLike[str], fd: int) -> None:
    """Refuse the model file at ``path`` (open as ``fd``, its `os.stat` ``stats``) where
    others may write it (by its mode or its ACL) or, through a folder they may write
    without the sticky bit, replace it (`trust`): it decides how every user of it is
    scored. Any group may write it (a shared model's), and it may belong to anyone (the
    member who last replaced it)."""
    check_file(stats, path, "model file", group=ANY_GROUP, fd=fd)


def _page_count(blobs: int) -> int:
    """The entries of `PAGES` for ``blobs`` bytes of blobs: the header's, and a page's each."""
    return 1 + (blobs + PAGE - 1) // PAGE


def is_table_model(path: str | os.PathLike[str]) -> bool:
    """Whether the file at ``path`` is a model of a typed table (`table_model`): its header has a
    "table" field. Reads the header only, and only of a regular file; False for anything
    else, which `read` then refuses or reads. Standard library only, as all of this module:
    `predict` asks before it scores one message without numpy."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or a device: never read here
            return False
        with os.fdopen(fd, "rb", buffering=0, closefd=False) as f:
            prefix = f.read(_PREFIX.size)
            if len(prefix) < _PREFIX.size or not prefix.startswith(MAGIC):
                return False
            _, _, head_len = _PREFIX.unpack(prefix)
            if head_len > MAX_HEADER:
                return False
            header = json.loads(f.read(head_len))
    except (OSError, ValueError, RecursionError):  # the usual reader then says what is wrong
        return False
    finally:
        os.close(fd)
    return isinstance(header, dict) and "table" in header


def not_a_model(path: str | os.PathLike[str], prefix: bytes) -> ModelFileError:
    """The error for a file that is no model file (its first bytes ``prefix``), pointing to
    `restore` where it is a text dump of one."""
    hint = (
        "; a text dump is read back with 'nbspam restore'"
        if prefix.startswith(b"# nbspam dump")
        else ""
    )
    return ModelFileError(f"{path} is not an nbspam model file{hint}")


def invalid(path: str | os.PathLike[str], what: str) -> ModelFileError:
    """The error for a model file that passed the checksum but breaks the format."""
    return ModelFileError(f"{path} is not a valid nbspam model: {what}")


def _head(
    path: str | os.PathLike[str], f: Any
) -> tuple[dict[str, Any], int, dict[str, tuple[str, tuple[int, ...], int, int]], int]:
    """(the header, where the blobs start, the array table, the file's size) of the model
    file open as ``f``, checked: what it is, its format, its sizes."""
    size = os.fstat(f.fileno()).st_size
    prefix = f.read(_PREFIX.size)
    if len(prefix) < _PREFIX.size or not prefix.startswith(MAGIC):
        raise not_a_model(path, prefix)
    _, version, head_len = _PREFIX.unpack(prefix)
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"{path} is a model of format {version}, newer than this nbspam {__version__} "
            f"reads ({FORMAT_VERSION}); upgrade nbspam"
        )
    if size < _PREFIX.size + head_len + _DIGEST:
        raise ModelFileError(f"{path} is truncated")
    if head_len > MAX_HEADER:
        raise invalid(path, f"a header of {head_len:,} bytes (at most {MAX_HEADER:,})")
    head = f.read(head_len)
    if len(head) < head_len:
        raise ModelFileError(f"{path} is truncated")
    try:
        header = json.loads(head, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # RecursionError: nested too deep
        raise invalid(path, "the header is not JSON") from None
    if not isinstance(header, dict):
        raise invalid(path, "the header is not a JSON object")
    if header.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{path} is not an nbspam model file")
    start = _aligned(_PREFIX.size + head_len)
    try:
        table, length = _layout(header.get("arrays"))
    except ValueError as exc:
        raise invalid(path, str(exc)) from None
    expected = start + length + _DIGEST
    if size < expected:
        raise ModelFileError(f"{path} is truncated")
    if size > expected:
        raise invalid(path, f"{size - expected:,} bytes more than its header describes")
    return header, start, table, size


def _read(path: str | os.PathLike[str], f: Any) -> Container:
    header, start, table, expected = _head(path, f)
    f.seek(0)
    parts, left = [], expected
    while left:  # one read, but where the system gives less (2 GB at most on Linux)
        part = f.read(left)
        if not part:
            raise ModelFileError(f"{path} is truncated")
        parts.append(part)
        left -= len(part)
    whole = memoryview(parts[0] if len(parts) == 1 else b"".join(parts))
    if zlib.crc32(whole[:-_DIGEST]) != struct.unpack("<I", whole[-_DIGEST:])[0]:
        raise ModelFileError(f"{path} is corrupt (checksum mismatch)")
    views = {
        name: (whole[start + offset : start + offset + nbytes], dtype, shape)
        for name, (dtype, shape, offset, nbytes) in table.items()
    }
    return Container(header, views, (expected, struct.unpack("<I", whole[-_DIGEST:])[0]))


def open_mapped(path: str | os.PathLike[str]) -> Container:
    """The container at ``path`` memory-mapped, its checksum NOT verified: what a writer
    that appends to the model's `journal` reads, in time that does not grow with the model
    (its header, and a binary search of its digests). Sizes and layout are checked as by
    `read`; the file's readers verify the checksum."""
    import mmap

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ModelFileError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    try:
        stats = os.fstat(fd)
        size = stats.st_size
        if not stat.S_ISREG(stats.st_mode):
            raise ModelFileError(f"cannot read model file {path}: not a regular file")
        _check_writers(stats, path, fd)
        prefix = os.pread(fd, _PREFIX.size, 0)
        if len(prefix) < _PREFIX.size or not prefix.startswith(MAGIC):
            raise not_a_model(path, prefix)
        _, version, head_len = _PREFIX.unpack(prefix)
        if version > FORMAT_VERSION or head_len > MAX_HEADER:
            raise ModelFileError(f"{path} is not a model this nbspam {__version__} reads")
        try:
            header = json.loads(os.pread(fd, head_len, _PREFIX.size), parse_constant=_no_constant)
            table, length = _layout(header.get("arrays"))
        except (ValueError, RecursionError, AttributeError):
            raise invalid(path, "the header is not a valid JSON object") from None
        start = _aligned(_PREFIX.size + head_len)
        if size != start + length + _DIGEST:
            raise ModelFileError(f"{path} is truncated or corrupt (its size)")
        whole = memoryview(mmap.mmap(fd, size, prot=mmap.PROT_READ))
    except OSError as exc:
        raise ModelFileError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    views = {
        name: (whole[start + offset : start + offset + nbytes], dtype, shape)
        for name, (dtype, shape, offset, nbytes) in table.items()
    }
    crc = struct.unpack("<I", whole[-_DIGEST:])[0]
    return Container(header, views, (size, crc))


def fingerprint(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(size, stored CRC-32) of the model file at ``path`` now, or None if it cannot be
    read: two reads of the end of the file, whatever its size."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        tail = os.pread(fd, _DIGEST, size - _DIGEST) if size >= _DIGEST else b""
    except OSError:
        return None
    finally:
        os.close(fd)
    return (size, struct.unpack("<I", tail)[0]) if len(tail) == _DIGEST else None


def _layout(arrays: Any) -> tuple[dict[str, tuple[str, tuple[int, ...], int, int]], int]:
    """(name -> (dtype, shape, offset, bytes), the length of all blobs) from the header's
    array table, whose blobs must follow each other as `write` lays them out."""
    if not isinstance(arrays, dict):
        raise ValueError("'arrays' is not a table of arrays")
    table = {}
    for name, spec in arrays.items():
        if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "offset"}:
            raise ValueError(f"array {name} is not described by dtype, shape and offset")
        dtype, shape, offset = spec["dtype"], spec["shape"], spec["offset"]
        if not isinstance(dtype, str) or not isinstance(shape, list) or not _count(offset):
            raise ValueError(f"array {name} has a bad dtype, shape or offset")
        if not all(map(_count, shape)):
            raise ValueError(f"array {name} has a bad shape {shape}")
        table[name] = (dtype, tuple(shape), offset, _itemsize(name, dtype) * _product(shape))
    length = 0
    for name, (_, _, offset, nbytes) in sorted(table.items(), key=lambda item: item[1][2:]):
        if offset != length:
            raise ValueError(f"array {name} does not start where the one before it ends")
        length += _aligned(nbytes)
    return table, length


def _count(value: Any) -> bool:
    """True for a whole number >= 0 (JSON true and false are not numbers here)."""
    return type(value) is int and value >= 0


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number")


def target(path: str | os.PathLike[str]) -> Path:
    """Where writing ``path`` (a model, or a file updated under its `lock`) goes: through
    symbolic links to the final target, which must be a regular file if it exists (a
    device, a FIFO or a folder is never replaced)."""
    from pathlib import Path  # not at import: scoring one message never writes

    real = Path(os.path.realpath(path))
    try:
        mode = real.stat().st_mode
    except FileNotFoundError:
        return real
    except OSError as exc:
        raise ModelFileError(f"cannot write {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise ModelFileError(f"cannot write {path}: {file_kind(mode)}, not a regular file")
    return real


def remove_leftovers(path: str | os.PathLike[str]) -> None:
    """Delete temporary files a killed writer of ``path`` left behind (call under the lock).

    Only names `write` gives this very file match: ``.NAME.<8 random>.tmp``, not those of
    another model whose name merely starts with NAME.
    """
    from pathlib import Path

    real = Path(os.path.realpath(path))  # where `write` puts them: beside the target
    own = re.compile(re.escape(f".{real.name}.") + r"[a-z0-9_]{8}\.tmp")
    for leftover in real.parent.iterdir():
        if own.fullmatch(leftover.name):
            leftover.unlink(missing_ok=True)


#: The array types a container holds: bytes, little-endian integers and doubles.
_ITEMSIZE = {"|u1": 1, "<i4": 4, "<u4": 4, "<i8": 8, "<u8": 8, "<f8": 8}


def _itemsize(name: str, dtype: str) -> int:
    if dtype not in _ITEMSIZE:
        raise ValueError(f"array {name} has the unsupported type {dtype!r}")
    return _ITEMSIZE[dtype]


def _product(shape: tuple[int, ...]) -> int:
    n = 1
    for size in shape:
        n *= size
    return n


def _aligned(n: int) -> int:
    return (n + 7) // 8 * 8


def write_file(
    path: str | os.PathLike[str],
    parts: Iterable[bytes],
    *,
    what: str = "model file",
    beside: str | os.PathLike[str] | None = None,
    error: type[NbspamError] = ModelFileError,
    output: bool = False,
) -> None:
    """Write ``parts`` to ``path`` atomically: a temporary file beside its `target`,
    flushed to disk, then renamed over it, so a reader sees the old file or the new and a
    failure leaves the old one; ``what`` names the file in the one-line ``error``.

    The new file keeps the mode and group of the file it replaces (`safefiles`); a link of
    another user at ``path``, or a name another user made first in a folder anyone may
    write, is refused (`check_model_path`). A file kept ``beside`` a
    model (a sync state) is written at ``path`` itself, never through a link, with the
    model's mode and group; an ``output`` as well, refused where another user made its name
    first in a folder anyone may write (`check_output_path`).
    """
    if beside is None:
        check_model_path(path)
        real = target(path)
        permissions = permissions_of(real)
    else:
        real = (check_output_path if output else check_side_path)(path, what)
        permissions = permissions_of(beside)
    folder = real.parent
    try:
        fd, tmp = create_temporary(folder, real.name)
    except OSError as exc:
        raise error(f"cannot write {what} {path}: {os_reason(exc)}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
            f.flush()
            apply_permissions(f.fileno(), permissions)
            os.fsync(f.fileno())
        os.replace(tmp, real)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise error(f"cannot write {what} {path}: {os_reason(exc)}") from None
        raise
    fsync_folder(folder)


def write_output(
    path: str | os.PathLike[str],
    parts: Iterable[bytes],
    *,
    what: str,
    error: type[NbspamError] = NbspamError,
) -> None:
    """Write ``parts`` to ``path``, an output of a command that is not a model (a scores
    file, a plot, a dump), as `write_file` writes a file beside a model: at ``path`` itself,
    refusing a symbolic link or anything but a regular file there (`check_output_path`: a
    neighbour who may write the folder could have planted a link to a file of root's, or
    made the name first in a folder anyone may write), replaced by a rename (a hard link planted there keeps its contents) and never left
    half-written. It keeps the mode and group of the file it replaces (and its owner, when
    root replaces it); a new file gets `safefiles.default_mode`. A failure is one line,
    ``error`` ("cannot write WHAT PATH: reason")."""
    write_file(path, parts, what=what, beside=path, error=error, output=True)


def fsync_folder(folder: str | os.PathLike[str]) -> None:
    """Make the renames and new names in ``folder`` durable (where the platform allows
    opening folders); '' is the current folder."""
    try:
        dir_fd = os.open(folder or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
