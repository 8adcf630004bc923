"""The rate-limiting queue: the limiter's delay decides when a failed item comes back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from manager.clock import FakeClock
from manager.workqueue import (
    ItemExponentialFailureRateLimiter,
    RateLimitingQueue,
    new_rate_limiting_queue,
)
from manager.workqueue.delaying import MAX_WAIT


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(clock: FakeClock) -> Iterator[RateLimitingQueue[str]]:
    limiter = ItemExponentialFailureRateLimiter(base_delay=1.0, max_delay=8.0)
    queue: RateLimitingQueue[str] = new_rate_limiting_queue(limiter, clock=clock)
    try:
        yield queue
    finally:
        queue.shut_down()


def test_add_rate_limited_waits_the_limiter_delay(
    clock: FakeClock, q: RateLimitingQueue[str]
) -> None:
    q.add_rate_limited("a")  # 1 s
    assert clock.wait_for_waiters(1, deadline=1.0)
    assert q.len() == 0
    clock.set(1.0)
    assert q.get() == ("a", False)
    q.done("a")

    q.add_rate_limited("a")  # 2 s
    assert clock.wait_for_waiters(1, deadline=3.0)
    clock.set(2.5)
    assert clock.wait_for_waiters(1, deadline=3.0)
    assert q.len() == 0
    clock.set(3.0)
    assert q.get() == ("a", False)
    assert q.num_requeues("a") == 2


def test_forget_resets_the_backoff(clock: FakeClock, q: RateLimitingQueue[str]) -> None:
    q.add_rate_limited("a")
    q.add_rate_limited("a")  # 2 s, but the earlier 1 s schedule wins
    assert q.num_requeues("a") == 2
    q.forget("a")
    assert q.num_requeues("a") == 0

    assert clock.wait_for_waiters(1, deadline=1.0)
    clock.set(1.0)
    assert q.get() == ("a", False)
    q.done("a")
    assert clock.wait_for_waiters(1, deadline=1.0 + MAX_WAIT)
    assert q.len() == 0

    q.add_rate_limited("a")  # back to the base delay: 1 s
    assert clock.wait_for_waiters(1, deadline=2.0)


def test_default_limiter_uses_the_queue_clock(clock: FakeClock) -> None:
    q: RateLimitingQueue[str] = new_rate_limiting_queue(clock=clock)
    try:
        q.add_rate_limited("a")  # 5 ms
        assert clock.wait_for_waiters(1, deadline=0.005)
        clock.set(0.005)
        assert q.get() == ("a", False)
        assert q.num_requeues("a") == 1
    finally:
        q.shut_down()
