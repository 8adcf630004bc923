"""glibc's malloc arenas, capped for a long-running manager (what ``MALLOC_ARENA_MAX=2``
does, as gunicorn and many Python services set it).

glibc gives each thread that allocates an arena of its own, up to 8 per core, and memory
freed in an arena stays there for that arena's next allocations. A manager runs many
threads that allocate in bursts — a reflector per informer decoding its lists, a worker
pool per controller, a thread per engaged cluster — so each keeps its own high-water
mark: ``python -m bench fleet`` (20 clusters x 1,000 ConfigMaps) peaked at 121 MiB with
the default and at 97 MiB with two arenas, at the same throughput (bench/RESULTS.md).
Python code allocates under the GIL anyway, so more arenas buy little concurrency.

:func:`limit_arenas` is called by ``overseer run`` before it starts any thread: the
process is the command's, and a library never changes it on import. The environment's
word wins: with ``MALLOC_ARENA_MAX`` set, glibc has read it at start and nothing is done.
Elsewhere than glibc (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import os
from typing import Final

__all__ = ["ARENAS", "glibc", "limit_arenas"]

logger = logging.getLogger(__name__)

ARENAS: Final = 2
_M_ARENA_MAX: Final = -8  # mallopt's parameter number (glibc malloc.h)


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    return libc if hasattr(libc, "gnu_get_libc_version") else None


def glibc() -> bool:
    """Whether this process's C library is glibc."""
    return _libc() is not None


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap the process's malloc arenas at ``arenas`` (threads started from now on share
    them); True if done. Not done elsewhere than glibc, nor when ``MALLOC_ARENA_MAX`` is
    set (the environment decided)."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    libc = _libc()
    if libc is None:
        return False
    if not libc.mallopt(_M_ARENA_MAX, arenas):
        logger.warning("glibc refused to cap its malloc arenas", extra={"arenas": arenas})
        return False
    return True
