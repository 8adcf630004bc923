"""Waiting until a subject has finished what a workload caused.

A controller keeps working after the last object it handles becomes visible: Events are
posted by a sender thread, annotations are patched after the objects are created, the
watch events of its own writes wake more reconciles. CPU per handled object and requests
per handled object are only honest once that has ended, so :func:`wait_settled` waits
until, over one ``window``, the subject spent (almost) no CPU and the server counted no
new request on the resources of interest.

Thread-safe: pure waiting; the sampler and the counter are thread-safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from bench.requests import Counts, RequestCounter

IDLE_CPU = 0.01  # seconds of CPU per window that still count as idle (timers, bookmarks)
WINDOW = 0.5  # seconds


def wait_settled(
    cpu: Callable[[], float] | None,
    counter: RequestCounter,
    resources: Iterable[str],
    *,
    timeout: float = 60.0,
    window: float = WINDOW,
) -> tuple[float | None, Counts | None]:
    """Wait until quiet; return (the subject's CPU seconds, the request counts) then.

    ``cpu`` is the subject's cumulative CPU (None: no subject, only the counts settle).
    Gives up after ``timeout`` seconds and returns what it has (the caller's figures then
    include whatever was still going on).
    """
    wanted = tuple(resources)
    deadline = time.monotonic() + timeout
    last_cpu = cpu() if cpu is not None else None
    last_counts = counter.snapshot(wanted)
    while True:
        time.sleep(window)
        now_cpu = cpu() if cpu is not None else None
        now_counts = counter.snapshot(wanted)
        idle = now_cpu is None or last_cpu is None or now_cpu - last_cpu <= IDLE_CPU
        if (idle and now_counts == last_counts) or time.monotonic() > deadline:
            return now_cpu, now_counts
        last_cpu, last_counts = now_cpu, now_counts
