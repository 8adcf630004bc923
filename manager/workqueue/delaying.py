"""The delaying queue: a work queue that can also add an item after a delay.

Ports client-go ``util/workqueue/delaying_queue.go``. :meth:`DelayingQueue.add_after`
puts the item on a heap ordered by the time it is due (on the queue's clock); one waiter
thread, ``workqueue/<name>/delay``, adds the items that are due to the queue, in order
of that time, and otherwise waits until the earliest is due, an earlier one is
scheduled, or the queue shuts down. Like client-go it also wakes at least every
:data:`MAX_WAIT` seconds, as insurance.

Contract (as client-go):

* ``add_after(item, seconds)`` with ``seconds <= 0`` adds the item at once;
* an item scheduled twice is added once, at the earlier of the two times (a later
  schedule never postpones it);
* every ``add_after`` while not shutting down counts one retry
  (``workqueue_retries_total``); after shutdown it is ignored;
* shutting down (either way) stops and joins the waiter thread and drops the items still
  waiting for their time.

The waiter thread is started by the constructor and is not a daemon: shut the queue
down. Safe to share between threads.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Hashable
from typing import Protocol, TypeVar

from manager.clock import Clock
from manager.workqueue.metrics import new_retry_metrics
from manager.workqueue.queue import Queue, WorkQueue

__all__ = ["MAX_WAIT", "DelayingQueue", "DelayingWorkQueue", "new_delaying_queue"]

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=Hashable)

MAX_WAIT = 10.0
"""The longest the waiter sleeps between checks of the heap, in seconds."""


class DelayingQueue(Queue[T], Protocol[T]):
    """A :class:`~manager.workqueue.queue.Queue` that can add items later
    (client-go ``TypedDelayingInterface``)."""

    def add_after(self, item: T, seconds: float) -> None:
        """Add ``item`` once ``seconds`` have passed on the queue's clock.

        ``seconds <= 0`` adds it now. If ``item`` is already waiting, the earlier time
        wins. Ignored once the queue is shutting down.
        """
        ...


class DelayingWorkQueue(WorkQueue[T]):
    """The implementation of :class:`DelayingQueue` (client-go ``delayingType``).

    Args:
        name: the queue's name; metrics are recorded only when it is not empty. The
            waiter thread is named ``workqueue/<name>/delay``.
        controller: the owning controller, the ``controller`` label of the metrics.
        clock: the clock that decides when items are due; the real one by default.
    """

    def __init__(self, *, name: str = "", controller: str = "", clock: Clock | None = None):
        super().__init__(name=name, controller=controller, clock=clock)
        self._retries = new_retry_metrics(name, controller)
        self._waiting = threading.Condition()
        # (ready_at, sequence, item); entries whose ready_at no longer matches
        # self._ready_at[item] are stale (superseded by an earlier add_after) and skipped.
        self._heap: list[tuple[float, int, T]] = []
        self._ready_at: dict[T, float] = {}
        self._sequence = itertools.count()
        self._stopping = False
        self._waiter = threading.Thread(
            target=self._waiting_loop,
            name=f"workqueue/{name}/delay" if name else "workqueue/delay",
            daemon=False,
        )
        self._waiter.start()

    def add_after(self, item: T, seconds: float) -> None:
        if self.shutting_down():
            return
        self._retries.retry()
        if seconds <= 0:
            self.add(item)
            return
        with self._waiting:
            if self._stopping:
                return
            ready_at = self._clock.now() + seconds
            current = self._ready_at.get(item)
            if current is not None and current <= ready_at:
                return
            self._ready_at[item] = ready_at
            heapq.heappush(self._heap, (ready_at, next(self._sequence), item))
            self._waiting.notify_all()

    def shut_down(self) -> None:
        super().shut_down()
        self._stop_waiter()

    def shut_down_with_drain(self, timeout: float | None = None) -> bool:
        self._begin_shut_down(drain=True)
        self._stop_waiter()
        return self._wait_drained(timeout)

    def _stop_waiter(self) -> None:
        with self._waiting:
            self._stopping = True
            self._heap.clear()
            self._ready_at.clear()
            self._waiting.notify_all()
        if threading.current_thread() is not self._waiter:
            self._waiter.join()

    def _waiting_loop(self) -> None:
        try:
            with self._waiting:
                while not self._stopping:
                    now = self._clock.now()
                    self._add_due(now)
                    timeout = MAX_WAIT
                    if self._heap:
                        timeout = min(self._heap[0][0] - now, MAX_WAIT)
                    self._clock.wait(self._waiting, timeout)
        except Exception:
            logger.exception("delaying queue waiter crashed", extra={"queue": self.name})
            raise

    def _add_due(self, now: float) -> None:
        """Move the items due at ``now`` to the queue, earliest first; drop stale entries.

        Called with ``self._waiting`` held (lock order: waiting, then the queue's lock).
        """
        while self._heap:
            ready_at, _, item = self._heap[0]
            if self._ready_at.get(item) != ready_at:
                heapq.heappop(self._heap)
                continue
            if ready_at > now:
                return
            heapq.heappop(self._heap)
            del self._ready_at[item]
            self.add(item)


def new_delaying_queue(
    *, name: str = "", controller: str = "", clock: Clock | None = None
) -> DelayingQueue[T]:
    """Return a new delaying queue and start its waiter thread.

    Args:
        name: the queue's name; metrics are recorded only when it is not empty.
        controller: the owning controller, the ``controller`` label of the metrics.
        clock: the clock that decides when items are due; the real one by default.
    """
    return DelayingWorkQueue(name=name, controller=controller, clock=clock)
