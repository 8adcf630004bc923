"""Exponential backoff with jitter and reset (client-go ``wait.Backoff`` as the
reflector uses it: 800 ms doubling to 30 s, jittered, reset after a healthy period).

Thread-safe: no; each reflector owns its own.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from manager.clock import Clock, RealClock

__all__ = ["Backoff"]


class Backoff:
    """Delays that double from ``initial`` up to ``cap``; each jittered upward by up to
    ``jitter`` times the delay. A call after ``reset_after`` seconds without failure starts over.
    """

    def __init__(
        self,
        *,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 0.5,
        reset_after: float = 120.0,
        clock: Clock | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or cap < initial or factor < 1 or jitter < 0 or reset_after <= 0:
            raise ValueError("invalid backoff parameters")
        self._initial = initial
        self._cap = cap
        self._factor = factor
        self._jitter = jitter
        self._reset_after = reset_after
        self._clock = clock or RealClock()
        self._rand = rand
        self._current = 0.0
        self._last: float | None = None

    def next(self) -> float:
        """The delay to wait before the next attempt after a failure."""
        now = self._clock.now()
        if self._last is not None and now - self._last >= self._reset_after:
            self._current = 0.0
        self._last = now
        self._current = (
            self._initial if self._current == 0 else min(self._current * self._factor, self._cap)
        )
        return self._current + self._current * self._jitter * self._rand()

    def reset(self) -> None:
        """Start over from ``initial`` (after a healthy period)."""
        self._current = 0.0
        self._last = None

    @property
    def current(self) -> float:
        """The last un-jittered delay (0 after a reset)."""
        return self._current
