"""Giving freed memory back to the system, in a serving process on glibc.

CPython hands allocations over 512 bytes (SQLite's pages, a log page's bytes, a compile's
large lists and strings) to the C library's `malloc`. glibc gives each thread that
allocates under contention an arena of its own (up to eight per core), and keeps what is
freed inside an arena for reuse instead of returning it: a serving process's event loop,
its compile threads and its store's threads each grew one to its own peak, and the pages
freed when an old revision's snapshot was dropped stayed resident. Under mixed load with
an upload every few seconds that was some 20 MB more resident memory a revision, most of
it free inside the arenas.

So a serving process keeps to `ARENAS` arenas (`limit_arenas`, at start), and after a
snapshot leaves the cache the freed pages of every arena are handed back
(`release_freed`, glibc's `malloc_trim(0)`: a few milliseconds, on the compiling thread).
Elsewhere (macOS, musl) both do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


_LIBC = _libc()


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most `arenas` malloc arenas from now on; whether the C library took it."""
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(ctypes.c_int(_M_ARENA_MAX), ctypes.c_int(arenas)))


def release_freed() -> bool:
    """Hand the free pages of every malloc arena back to the system; whether any were."""
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(ctypes.c_size_t(0)))
