"""glibc's malloc told to give freed arrays back to the system, for a process that trains.

glibc serves a block of at least its mmap threshold from a mapping of its own, unmapped when
the block is freed; smaller blocks are carved from heaps it keeps. The threshold starts at
128 KiB and moves up (to 32 MiB) each time a mapped block is freed, so after a few arrays
the size of a model are freed, the next ones are carved from the heaps, and what is freed
between the arrays that live on stays in the process as holes: training's peak held tens
of megabytes freed (docs/speed.md, "Memory"). `return_freed_arrays` fixes the threshold at
`MMAP_THRESHOLD`, and lets a heap's free top go back from 4 times that. Elsewhere (not
glibc) nothing is changed.
"""

from __future__ import annotations

MMAP_THRESHOLD = 1 << 16
"""Bytes from which a block gets a mapping of its own (given back when freed)."""

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)
_set: list[bool] = []


def return_freed_arrays() -> None:
    """Set this process's allocator as the module says, for good (once; forked workers
    inherit it). Glibc alone: elsewhere, or where libc cannot be loaded, nothing."""
    if _set:
        return
    _set.append(True)
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)  # fixed: it no longer moves up
        libc.mallopt(_M_TRIM_THRESHOLD, 4 * MMAP_THRESHOLD)  # a heap's free top goes back
    except (OSError, AttributeError):  # not glibc
        pass
