"""The rate-limiting queue: a delaying queue that asks a rate limiter how long to wait.

Ports client-go ``util/workqueue/rate_limiting_queue.go``. This is the queue a
controller uses: a failed item goes back with :meth:`RateLimitingQueue.add_rate_limited`
(delayed by :meth:`RateLimiter.when <manager.workqueue.limiters.RateLimiter.when>`,
which also counts the failure), a successful one is :meth:`RateLimitingQueue.forget`-ed
so that its next failure starts the backoff afresh. ``forget`` only clears the limiter's
history; the item must still be passed to ``done``.

Safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol, TypeVar

from manager.clock import Clock
from manager.workqueue.delaying import DelayingQueue, DelayingWorkQueue
from manager.workqueue.limiters import RateLimiter, default_controller_rate_limiter

__all__ = ["RateLimitingQueue", "RateLimitingWorkQueue", "new_rate_limiting_queue"]

T = TypeVar("T", bound=Hashable)


class RateLimitingQueue(DelayingQueue[T], Protocol[T]):
    """A :class:`~manager.workqueue.delaying.DelayingQueue` with per-item backoff
    (client-go ``TypedRateLimitingInterface``)."""

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` after the delay the rate limiter gives it (counts a retry)."""
        ...

    def forget(self, item: T) -> None:
        """Clear ``item``'s failure history in the rate limiter (it succeeded)."""
        ...

    def num_requeues(self, item: T) -> int:
        """Return how many failures the rate limiter has recorded for ``item``."""
        ...


class RateLimitingWorkQueue(DelayingWorkQueue[T]):
    """The implementation of :class:`RateLimitingQueue` (client-go ``rateLimitingType``).

    Args:
        rate_limiter: decides the delays; :func:`default_controller_rate_limiter` on the
            queue's clock when None.
        name: the queue's name; metrics are recorded only when it is not empty.
        controller: the owning controller, the ``controller`` label of the metrics.
        clock: the clock for delays, timeouts and metrics; the real one by default.
    """

    def __init__(
        self,
        rate_limiter: RateLimiter[T] | None = None,
        *,
        name: str = "",
        controller: str = "",
        clock: Clock | None = None,
    ) -> None:
        super().__init__(name=name, controller=controller, clock=clock)
        self.rate_limiter: RateLimiter[T] = (
            rate_limiter
            if rate_limiter is not None
            else default_controller_rate_limiter(clock=self._clock)
        )

    def add_rate_limited(self, item: T) -> None:
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.rate_limiter.num_requeues(item)


def new_rate_limiting_queue(
    rate_limiter: RateLimiter[T] | None = None,
    *,
    name: str = "",
    controller: str = "",
    clock: Clock | None = None,
) -> RateLimitingQueue[T]:
    """Return a new rate-limiting queue and start its waiter thread.

    Args:
        rate_limiter: decides the delays; :func:`default_controller_rate_limiter` on the
            queue's clock when None.
        name: the queue's name; metrics are recorded only when it is not empty.
        controller: the owning controller, the ``controller`` label of the metrics.
        clock: the clock for delays, timeouts and metrics; the real one by default.
    """
    return RateLimitingWorkQueue(rate_limiter, name=name, controller=controller, clock=clock)
