"""Short garbage-collector pauses for a local API server running in its own process.

The server keeps every object, its history and its watchers' buffers in Python objects
that live as long as the process; CPython's full (generation 2) collections scan all of
them, and with a few hundred thousand of them a full collection stops every request and
watch for 0.1-0.3 s (measured: 150-330 ms pauses during the steady-events benchmark, the
whole of its latency tail). :func:`freeze_after_full_collections` moves what survived a
full collection to the permanent generation, so the next one scans only what came since:
objects freed by reference counting (every stored object is a tree of dicts, lists and
strings) are still freed; only a reference cycle among frozen objects would never be.

For the standalone server (``overseer apiserver``, ``python -m bench.localserver``), not
for a server started inside a test process.
"""

from __future__ import annotations

import gc
from typing import Any

_installed = False


def _freeze_survivors(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info.get("generation") == 2:
        gc.freeze()


def freeze_after_full_collections() -> None:
    """Install the callback (once per process)."""
    global _installed
    if not _installed:
        gc.callbacks.append(_freeze_survivors)
        _installed = True
