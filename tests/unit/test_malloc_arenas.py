"""``overseer run`` caps glibc's malloc arenas (as MALLOC_ARENA_MAX=2 does): glibc gives
each thread that allocates an arena of its own, up to 8 per core, and what is freed in
them stays there — a replica's informer, worker and engagement threads kept a fifth more
memory (bench ``fleet``). Counted with glibc's own ``malloc_info``, in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from manager.malloc import glibc

pytestmark = pytest.mark.skipif(not glibc(), reason="not glibc: its malloc has no arenas to cap")

CHILD = textwrap.dedent(
    """
    import ctypes, os, sys, tempfile, threading
    from manager.malloc import limit_arenas
    applied = limit_arenas() if sys.argv[1] == "limit" else False
    blocks = []
    together = threading.Barrier(6)
    def allocate():
        # malloc's, not pymalloc's (over 512 bytes), under mmap's threshold: in this
        # thread's arena; all six alive at once (an exited thread's arena is reused)
        blocks.append([bytearray(2048) for _ in range(100)])
        together.wait()
    threads = [threading.Thread(target=allocate) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    libc = ctypes.CDLL(None)
    libc.fdopen.restype = ctypes.c_void_p
    with tempfile.TemporaryFile() as f:
        fp = libc.fdopen(os.dup(f.fileno()), b"w")
        libc.malloc_info(0, ctypes.c_void_p(fp))
        libc.fclose(ctypes.c_void_p(fp))
        f.seek(0)
        heaps = f.read().count(b"<heap nr=")
    print(applied, heaps)
    """
)


def _heaps(mode: str, env: dict[str, str] | None = None) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    ).stdout.split()
    return out[0], int(out[1])


def test_threads_share_two_arenas_once_capped() -> None:
    applied, capped = _heaps("limit")
    assert applied == "True"
    assert capped <= 2
    _, free = _heaps("none")
    assert free > capped  # what the cap is for: a thread, an arena


def test_the_environment_decides_when_it_says() -> None:
    applied, heaps = _heaps("limit", {"MALLOC_ARENA_MAX": "4"})
    assert applied == "False"
    assert 2 < heaps <= 4
