"""Client-side request throttling: a token bucket shared by every request of a client.

Port of client-go ``util/flowcontrol`` (``throttle.go``). A :class:`RateLimiter` admits
requests at a steady ``qps`` with bursts of up to ``burst`` requests; ``accept()`` blocks
the caller until its request may go. :class:`TokenBucket` is the implementation: the
bucket starts full, refills at ``qps`` tokens per second up to ``burst``, and a caller
that finds it empty *reserves* the next token (the count goes negative) and sleeps until
that token exists. Reserving under the lock and sleeping outside it spaces concurrent
callers ``1/qps`` apart in arrival order, as ``golang.org/x/time/rate`` does.

A ``qps`` of zero or less disables throttling (client-go: a negative QPS means no limiter).

Thread-safety: safe to share between threads; one bucket is meant to be shared by all
requests of one client. Time is read from an injectable ``clock`` and waits go through an
injectable ``sleep`` so tests run on a fake clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["RateLimiter", "TokenBucket"]


class RateLimiter(Protocol):
    """Admits requests at a bounded rate (client-go ``flowcontrol.RateLimiter``).

    ``accept()`` blocks until one request may proceed; ``try_accept()`` takes a token
    only if one is available now and never blocks. ``qps`` is the steady rate.
    """

    @property
    def qps(self) -> float:
        """The steady admission rate, requests per second (0 when unlimited)."""
        ...

    def accept(self) -> None:
        """Block until one request may proceed."""
        ...

    def try_accept(self) -> bool:
        """Take a token if one is available now; ``False`` (and no token) otherwise."""
        ...


class TokenBucket:
    """A token bucket of ``burst`` tokens refilled at ``qps`` per second.

    Args:
        qps: steady rate in requests per second; ``<= 0`` admits everything at once.
        burst: bucket size, requests that may go back to back after an idle period (>= 1).
        clock: monotonic time source in seconds (default ``time.monotonic``).
        sleep: how to wait, given seconds (default ``time.sleep``).
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self._qps = max(float(qps), 0.0)
        self._burst = burst
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last = clock()

    @property
    def qps(self) -> float:
        """The steady admission rate, requests per second (0 when unlimited)."""
        return self._qps

    @property
    def burst(self) -> int:
        """The bucket size."""
        return self._burst

    def _refill(self, now: float) -> None:
        # Caller holds the lock.
        elapsed = max(now - self._last, 0.0)
        self._last = now
        self._tokens = min(float(self._burst), self._tokens + elapsed * self._qps)

    def reserve(self) -> float:
        """Take the next token now and return how many seconds to wait before using it."""
        if self._qps <= 0:
            return 0.0
        with self._lock:
            self._refill(self._clock())
            self._tokens -= 1.0
            if self._tokens >= 0:
                return 0.0
            return -self._tokens / self._qps

    def accept(self) -> None:
        """Block until one request may proceed."""
        delay = self.reserve()
        if delay > 0:
            self._sleep(delay)

    def try_accept(self) -> bool:
        """Take a token if one is available now; ``False`` (and no token) otherwise."""
        if self._qps <= 0:
            return True
        with self._lock:
            self._refill(self._clock())
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False
