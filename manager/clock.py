"""Clocks: the one seam through which time enters Overseer.

Everything whose behaviour depends on time (rate limiters, the delaying queue's waiter,
leader election) takes a :class:`Clock` instead of calling :mod:`time` directly, so
tests drive time with a :class:`FakeClock` and never sleep. This plays the role of
``k8s.io/utils/clock`` (``Clock``, ``RealClock``, ``testing.FakeClock``) in client-go.

Contract:

* :meth:`Clock.now` is monotonic seconds, comparable only with other readings of the
  same clock.
* :meth:`Clock.sleep` blocks the calling thread for that many seconds of this clock.
* :meth:`Clock.wait` is :meth:`threading.Condition.wait` with the timeout measured on
  this clock. The caller holds the condition; the call releases it while waiting and
  holds it again on return. It returns when the condition is notified, when the timeout
  has passed on this clock, or spuriously; callers re-check their predicate in a loop.

:class:`FakeClock` only moves when told to (:meth:`FakeClock.step`,
:meth:`FakeClock.set`). A thread in :meth:`FakeClock.wait` is registered as a *waiter*
with a deadline; moving the clock to or past that deadline notifies the waiter's
condition. Tests synchronise with such threads through
:meth:`FakeClock.wait_for_waiters` (block, in real time, until a thread is parked on the
clock), which is event driven, not polling.

Both clocks are safe to share between threads. Do not move a :class:`FakeClock` while
holding the lock of a condition a waiter waits on: moving it acquires that lock to
notify.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Clock", "FakeClock", "RealClock"]


class Clock(Protocol):
    """A source of monotonic time that can also block on it."""

    def now(self) -> float:
        """Return the current monotonic time in seconds."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` of this clock."""
        ...

    def wait(self, cond: threading.Condition, timeout: float | None) -> bool:
        """Wait on ``cond`` (held by the caller) for at most ``timeout`` seconds.

        Args:
            cond: a condition the calling thread holds; released while waiting.
            timeout: seconds on this clock; ``None`` waits until notified.

        Returns:
            False if it returned because the timeout passed, True otherwise (notified or
            spurious). Callers must re-check what they wait for.
        """
        ...


class RealClock:
    """The process's monotonic clock (:func:`time.monotonic`)."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, cond: threading.Condition, timeout: float | None) -> bool:
        if timeout is None:
            return cond.wait()
        return cond.wait(max(timeout, 0.0))


@dataclass(eq=False, slots=True)
class _Waiter:
    deadline: float | None
    cond: threading.Condition
    fired: bool = False


class FakeClock:
    """A clock that moves only when told to; for tests.

    Args:
        start: the initial reading, in seconds.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._lock = threading.Lock()
        # Notified whenever time moves or a waiter comes or goes (for wait_for_waiters).
        self._changed = threading.Condition(self._lock)
        self._now = start
        self._waiters: dict[int, _Waiter] = {}
        self._ids = itertools.count()

    def now(self) -> float:
        with self._lock:
            return self._now

    def step(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` and wake the waiters now due."""
        if seconds < 0:
            raise ValueError(f"a monotonic clock cannot step backwards, got {seconds}")
        with self._lock:
            target = self._now + seconds
        self.set(target)

    def set(self, t: float) -> None:
        """Move the clock to ``t`` (not before the current reading); wake waiters due.

        Raises:
            ValueError: if ``t`` is earlier than the current reading.
        """
        with self._lock:
            if t < self._now:
                raise ValueError(f"a monotonic clock cannot go back from {self._now} to {t}")
            self._now = t
            due = [
                (key, w)
                for key, w in self._waiters.items()
                if w.deadline is not None and w.deadline <= t
            ]
            for key, w in due:
                w.fired = True
                del self._waiters[key]
            self._changed.notify_all()
        # Outside our lock: the waiter holds its condition while it registers with us.
        for _, w in due:
            with w.cond:
                w.cond.notify_all()

    def sleep(self, seconds: float) -> None:
        cond = threading.Condition()
        with cond:
            deadline = self.now() + seconds
            while (remaining := deadline - self.now()) > 0:
                self.wait(cond, remaining)

    def wait(self, cond: threading.Condition, timeout: float | None) -> bool:
        if timeout is not None and timeout <= 0:
            return False
        with self._lock:
            key = next(self._ids)
            waiter = _Waiter(None if timeout is None else self._now + timeout, cond)
            self._waiters[key] = waiter
            self._changed.notify_all()
        try:
            cond.wait()
        finally:
            with self._lock:
                self._waiters.pop(key, None)
                timed_out = waiter.fired or (
                    waiter.deadline is not None and self._now >= waiter.deadline
                )
                self._changed.notify_all()
        return not timed_out

    def has_waiters(self) -> bool:
        """Whether any thread is parked in :meth:`wait` or :meth:`sleep` right now."""
        with self._lock:
            return bool(self._waiters)

    def waiter_deadlines(self) -> list[float | None]:
        """The deadlines of the parked threads, earliest first (``None`` = no timeout)."""
        with self._lock:
            deadlines = [w.deadline for w in self._waiters.values()]
        return sorted(deadlines, key=lambda d: float("inf") if d is None else d)

    def wait_for_waiters(
        self, count: int = 1, *, deadline: float | None = None, timeout: float = 5.0
    ) -> bool:
        """Block until at least ``count`` threads are parked on this clock.

        Args:
            count: how many waiters to wait for.
            deadline: when given, count only waiters whose deadline is this reading
                (to within 1e-9 s).
            timeout: real seconds to wait at most (a safety bound for tests).

        Returns:
            True once enough waiters are parked, False if ``timeout`` passed first.
        """

        def matching() -> int:
            if deadline is None:
                return len(self._waiters)
            return sum(
                1
                for w in self._waiters.values()
                if w.deadline is not None and abs(w.deadline - deadline) <= 1e-9
            )

        with self._changed:
            return self._changed.wait_for(lambda: matching() >= count, timeout)
