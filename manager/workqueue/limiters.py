"""Rate limiters: how long to wait before an item is retried.

Ports client-go ``util/workqueue/default_rate_limiters.go``. A :class:`RateLimiter`
answers :meth:`~RateLimiter.when` with a delay in seconds, and counts the call as a
failure of that item; :meth:`~RateLimiter.forget` clears an item's history (call it when
the item succeeded); :meth:`~RateLimiter.num_requeues` says how many failures are
recorded for it.

* :class:`ItemExponentialFailureRateLimiter`: per item, ``base_delay * 2^failures``,
  capped at ``max_delay`` (5 ms doubling to 1000 s by default); no overflow however many
  failures.
* :class:`BucketRateLimiter`: one token bucket shared by all items (10 qps, burst 100
  by default), with the reservation semantics of ``golang.org/x/time/rate``: each call
  takes a token and returns how long until that token exists, so once the burst is
  spent the delays grow by ``1 / qps`` per call, and tokens refill at ``qps`` per
  second on the limiter's clock up to ``burst``.
* :class:`ItemFastSlowRateLimiter`: a fast delay for the first attempts, then a slow one.
* :class:`MaxOfRateLimiter`: asks every limiter and returns the longest delay.
* :class:`WithMaxWaitRateLimiter`: caps another limiter's delay.
* :func:`default_controller_rate_limiter`: the controller default, the max of the
  exponential (5 ms, 1000 s) and the bucket (10 qps, burst 100) limiters.

Every limiter here is safe to share between threads.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Protocol, TypeVar

from manager.clock import Clock, RealClock

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "WithMaxWaitRateLimiter",
    "default_controller_rate_limiter",
]

T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)

# Past this many doublings 2**n is no longer a finite float; any cap is reached long before.
_MAX_EXPONENT = 1023


class RateLimiter(Protocol[T_contra]):
    """Decides how long an item waits before it is retried (client-go ``TypedRateLimiter``)."""

    def when(self, item: T_contra) -> float:
        """Record a failure of ``item`` and return how long to wait, in seconds."""
        ...

    def forget(self, item: T_contra) -> None:
        """Stop tracking ``item`` (it succeeded, or was given up on)."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """Return how many failures are recorded for ``item``."""
        ...


class ItemExponentialFailureRateLimiter:
    """Per-item exponential backoff: ``base_delay * 2^failures``, capped at ``max_delay``.

    Args:
        base_delay: the first delay, in seconds.
        max_delay: the largest delay, in seconds.
    """

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay < 0 or max_delay < 0:
            raise ValueError("base_delay and max_delay must not be negative")
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._lock = threading.Lock()
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        with self._lock:
            exponent = self._failures.get(item, 0)
            self._failures[item] = exponent + 1
        if exponent > _MAX_EXPONENT:
            return self.max_delay
        return min(self.base_delay * 2.0**exponent, self.max_delay)

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)


class ItemFastSlowRateLimiter:
    """``fast_delay`` for an item's first ``max_fast_attempts`` failures, then ``slow_delay``.

    Args:
        fast_delay: seconds to wait for the first attempts.
        slow_delay: seconds to wait afterwards.
        max_fast_attempts: how many attempts get ``fast_delay``.
    """

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self.fast_delay = fast_delay
        self.slow_delay = slow_delay
        self.max_fast_attempts = max_fast_attempts
        self._lock = threading.Lock()
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        with self._lock:
            failures = self._failures.get(item, 0) + 1
            self._failures[item] = failures
        return self.fast_delay if failures <= self.max_fast_attempts else self.slow_delay

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)


class BucketRateLimiter:
    """A token bucket shared by all items (``golang.org/x/time/rate`` reservations).

    The bucket starts full. Each :meth:`when` takes one token, letting the count go
    negative, and returns how long until that token will have been refilled: zero while
    the burst lasts, then ``1 / qps``, ``2 / qps``, ... for calls made at the same time.
    It tracks no items: :meth:`forget` does nothing and :meth:`num_requeues` is 0.

    Args:
        qps: tokens added per second of the clock.
        burst: the bucket's size.
        clock: the clock that refills the bucket; the real one by default.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be positive, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self.qps = qps
        self.burst = burst
        self._clock: Clock = clock if clock is not None else RealClock()
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last = self._clock.now()

    def when(self, item: Hashable) -> float:
        with self._lock:
            now = self._clock.now()
            elapsed = max(now - self._last, 0.0)
            tokens = min(self._tokens + elapsed * self.qps, float(self.burst)) - 1.0
            self._tokens = tokens
            self._last = max(now, self._last)
        return -tokens / self.qps if tokens < 0 else 0.0

    def forget(self, item: Hashable) -> None:
        return

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """Asks every limiter and returns the longest delay (client-go ``MaxOfRateLimiter``).

    :meth:`when` and :meth:`forget` reach every limiter; :meth:`num_requeues` is the
    largest count any of them reports.

    Args:
        limiters: the limiters to combine; at least one.
    """

    def __init__(self, *limiters: RateLimiter[Hashable]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max([limiter.when(item) for limiter in self.limiters])

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


class WithMaxWaitRateLimiter:
    """Caps the delay of another limiter at ``max_delay`` seconds.

    Args:
        limiter: the limiter whose delays are capped.
        max_delay: the largest delay, in seconds.
    """

    def __init__(self, limiter: RateLimiter[Hashable], max_delay: float) -> None:
        self.limiter = limiter
        self.max_delay = max_delay

    def when(self, item: Hashable) -> float:
        return min(self.limiter.when(item), self.max_delay)

    def forget(self, item: Hashable) -> None:
        self.limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.limiter.num_requeues(item)


def default_controller_rate_limiter(clock: Clock | None = None) -> RateLimiter[Hashable]:
    """Return the controller default: max of exponential (5 ms → 1000 s) and bucket
    (10 qps, burst 100) limiters (client-go ``DefaultTypedControllerRateLimiter``).

    Args:
        clock: the bucket's clock; the real one by default.
    """
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )
