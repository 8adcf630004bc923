"""The work queue: a FIFO of keys that hands each key to at most one worker at a time.

Ports client-go ``util/workqueue/queue.go``. Three structures under one lock:

* the *queue*, a FIFO of items waiting for a worker;
* the *dirty* set, every item that needs processing (queued, or re-added while being
  processed); an item is held at most once, so adding a queued item again is a no-op;
* the *processing* set, items handed out by :meth:`Queue.get` and not yet
  :meth:`Queue.done`. An item being processed is never handed to a second worker: if it
  is added again meanwhile, it is only marked dirty, and :meth:`Queue.done` queues it
  again, so it is processed exactly once more.

Shutting down: after :meth:`Queue.shut_down` or :meth:`Queue.shut_down_with_drain`,
adds are ignored; :meth:`Queue.get` still hands out the items already queued (workers
empty the queue, as in client-go) and returns ``(None, True)`` once the queue is empty,
which tells a worker to exit. :meth:`Queue.shut_down_with_drain` also waits until every
queued item has been handed out and every handed-out item is done (client-go waits for
the processing set only; waiting for the queued items too means "drained" holds when it
returns). Calling :meth:`Queue.shut_down` ends such a wait at once.

Timeouts given to :meth:`Queue.get` and :meth:`Queue.shut_down_with_drain` are measured
on the queue's clock (:mod:`manager.clock`).

Items must be hashable. A queue is safe to share between any number of producer and
worker threads.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from manager.clock import Clock, RealClock
from manager.workqueue.metrics import new_queue_metrics

__all__ = ["Queue", "WorkQueue", "new_queue"]

T = TypeVar("T", bound=Hashable)


class Queue(Protocol[T]):
    """A de-duplicating FIFO work queue (client-go ``TypedInterface``).

    Contract: an item is held at most once; an item handed out by :meth:`get` is not
    handed out again until :meth:`done` is called for it; an item added while being
    processed is queued again by :meth:`done`. Every item returned by :meth:`get` must
    be passed to :meth:`done` exactly once.
    """

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing; ignored once shutting down."""
        ...

    def len(self) -> int:
        """Return how many items wait in the queue (for information only)."""
        ...

    def get(self, timeout: float | None = None) -> tuple[T | None, bool]:
        """Block until an item is available or the queue is shut down.

        Args:
            timeout: seconds (on the queue's clock) to wait at most; ``None`` waits
                until an item or shutdown.

        Returns:
            ``(item, False)`` for an item to process (call :meth:`done` with it);
            ``(None, True)`` when the queue is shut down and empty (exit the worker);
            ``(None, False)`` when ``timeout`` passed without either.
        """
        ...

    def done(self, item: T) -> None:
        """Mark ``item`` as processed; queue it again if it was added meanwhile."""
        ...

    def shut_down(self) -> None:
        """Ignore further adds and wake every blocked :meth:`get` at once."""
        ...

    def shut_down_with_drain(self, timeout: float | None = None) -> bool:
        """Ignore further adds and wait until the queued and in-flight items are done.

        Workers must keep calling :meth:`get` and :meth:`done` for this to return.

        Args:
            timeout: seconds (on the queue's clock) to wait at most; ``None`` waits
                until drained (or until :meth:`shut_down` is called).

        Returns:
            True if the queue drained, False on timeout or when :meth:`shut_down` cut
            the wait short.
        """
        ...

    def shutting_down(self) -> bool:
        """Whether :meth:`shut_down` or :meth:`shut_down_with_drain` was called."""
        ...


class WorkQueue(Generic[T]):
    """The implementation of :class:`Queue` (client-go ``Typed``).

    Args:
        name: the queue's name; metrics are recorded only when it is not empty.
        controller: the owning controller, the ``controller`` label of the metrics.
        clock: the clock for timeouts and metrics; the real one by default.
    """

    def __init__(self, *, name: str = "", controller: str = "", clock: Clock | None = None):
        self.name = name
        self.controller = controller
        self._clock: Clock = clock if clock is not None else RealClock()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._shutting_down = False
        self._drain = False
        self._metrics = new_queue_metrics(name, controller, self._clock, self._lock)

    def add(self, item: T) -> None:
        with self._cond:
            if self._shutting_down or item in self._dirty:
                return
            self._metrics.add(item)
            self._dirty.add(item)
            if item in self._processing:
                return
            self._queue.append(item)
            self._cond.notify()

    def len(self) -> int:
        with self._cond:
            return len(self._queue)

    def __len__(self) -> int:
        return self.len()

    def get(self, timeout: float | None = None) -> tuple[T | None, bool]:
        with self._cond:
            if timeout is None:
                while not self._queue and not self._shutting_down:
                    self._cond.wait()
            else:
                deadline = self._clock.now() + timeout
                while not self._queue and not self._shutting_down:
                    remaining = deadline - self._clock.now()
                    if remaining <= 0:
                        return None, False
                    self._clock.wait(self._cond, remaining)
            if not self._queue:
                return None, True
            item = self._queue.popleft()
            self._metrics.get(item)
            self._processing.add(item)
            self._dirty.discard(item)
            return item, False

    def done(self, item: T) -> None:
        with self._cond:
            self._metrics.done(item)
            self._processing.discard(item)
            if item in self._dirty:
                self._queue.append(item)
                self._cond.notify()
            elif self._shutting_down and not self._processing:
                # Wake the drains. While shutting down, getters never block (they return
                # at once on an empty queue), so drains are the only waiters then.
                self._cond.notify_all()

    def shut_down(self) -> None:
        self._begin_shut_down(drain=False)

    def shut_down_with_drain(self, timeout: float | None = None) -> bool:
        self._begin_shut_down(drain=True)
        return self._wait_drained(timeout)

    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down

    def _begin_shut_down(self, *, drain: bool) -> None:
        with self._cond:
            self._drain = drain
            self._shutting_down = True
            self._cond.notify_all()

    def _wait_drained(self, timeout: float | None) -> bool:
        with self._cond:
            deadline = None if timeout is None else self._clock.now() + timeout
            while self._drain and (self._processing or self._queue):
                if deadline is None:
                    self._cond.wait()
                    continue
                remaining = deadline - self._clock.now()
                if remaining <= 0:
                    break
                self._clock.wait(self._cond, remaining)
            return not self._processing and not self._queue


def new_queue(*, name: str = "", controller: str = "", clock: Clock | None = None) -> Queue[T]:
    """Return a new work queue (client-go ``NewTypedWithConfig``).

    Args:
        name: the queue's name; metrics are recorded only when it is not empty.
        controller: the owning controller, the ``controller`` label of the metrics.
        clock: the clock for timeouts and metrics; the real one by default.
    """
    return WorkQueue(name=name, controller=controller, clock=clock)
