"""The C allocator's arenas, capped at two.

glibc gives each thread that allocates while another holds the heap lock an arena of its own (up
to 8 per core), and memory freed in an arena stays with it. The operator runs each poll in a
worker thread of asyncio's pool, so over a few polls several threads each hold a poll's worth
of freed transient arrays: measured at 100,000 partitions, the operator process's peak RSS rose
poll after poll (309 MiB after 5 polls, 338 MiB after 8) with the default, and stayed lower with
two arenas (docs/benchmarks.md, "Fleet scale (a) on the real cluster again"). Capping the arenas
is what `MALLOC_ARENA_MAX=2` does; an explicit `MALLOC_ARENA_MAX` in the environment is left to
rule. Elsewhere (musl, macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_ARENA_MAX = -8  # mallopt's parameter number (glibc malloc.h)
ARENAS = 2


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at `arenas` (before the poll threads start); True when done."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))
