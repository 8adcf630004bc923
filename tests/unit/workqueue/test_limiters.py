"""Rate limiters: exact delays, on a fake clock where time matters."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from manager.clock import FakeClock
from manager.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
)


def test_exponential_doubles_from_5ms_and_caps_at_1000s() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("a") for _ in range(41)]
    for n, delay in enumerate(delays):
        assert delay == min(0.005 * 2**n, 1000.0), n
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[17] == pytest.approx(655.36)
    assert delays[18:] == [1000.0] * 23
    assert limiter.num_requeues("a") == 41


def test_exponential_never_overflows() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    for _ in range(5000):
        delay = limiter.when("a")
    assert delay == 1000.0
    assert limiter.num_requeues("a") == 5000


def test_exponential_is_per_item_and_forget_resets() -> None:
    limiter = ItemExponentialFailureRateLimiter(base_delay=1.0, max_delay=60.0)
    assert [limiter.when("a") for _ in range(3)] == [1.0, 2.0, 4.0]
    assert limiter.when("b") == 1.0
    assert limiter.num_requeues("a") == 3

    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 1.0
    assert limiter.num_requeues("b") == 1


def test_bucket_burst_then_one_token_per_tenth_of_a_second() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert [limiter.when(i) for i in range(3)] == [0.1, 0.2, 0.3]
    assert limiter.num_requeues(0) == 0


def test_bucket_refills_over_time_up_to_the_burst() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10, burst=100, clock=clock)
    for i in range(103):
        limiter.when(i)  # 3 tokens in debt

    clock.step(1.0)  # +10 tokens: 7 available
    assert [limiter.when("x") for _ in range(8)] == [0.0] * 7 + [0.1]

    clock.step(1000.0)  # refill is capped at the burst
    assert [limiter.when("x") for _ in range(101)] == [0.0] * 100 + [0.1]


def test_bucket_forget_is_a_no_op() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=1, burst=1, clock=clock)
    assert limiter.when("a") == 0.0
    limiter.forget("a")
    assert limiter.when("a") == 1.0


def test_bucket_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="qps"):
        BucketRateLimiter(qps=0)
    with pytest.raises(ValueError, match="burst"):
        BucketRateLimiter(burst=0)


class _Recording:
    """A limiter with a fixed answer that records what it was asked."""

    def __init__(self, delay: float, requeues: int) -> None:
        self.delay = delay
        self.requeues = requeues
        self.asked: list[Hashable] = []
        self.forgotten: list[Hashable] = []

    def when(self, item: Hashable) -> float:
        self.asked.append(item)
        return self.delay

    def forget(self, item: Hashable) -> None:
        self.forgotten.append(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.requeues


def test_max_of_asks_every_limiter_and_returns_the_longest() -> None:
    short, long_ = _Recording(1.0, 5), _Recording(3.0, 2)
    limiter = MaxOfRateLimiter(short, long_)
    assert limiter.when("a") == 3.0
    assert short.asked == ["a"]
    assert long_.asked == ["a"]
    assert limiter.num_requeues("a") == 5

    limiter.forget("a")
    assert short.forgotten == ["a"]
    assert long_.forgotten == ["a"]


def test_max_of_with_real_limiters_forget_propagates() -> None:
    clock = FakeClock()
    limiter = MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base_delay=0.01, max_delay=1.0),
        BucketRateLimiter(qps=1, burst=1, clock=clock),
    )
    assert limiter.when("a") == 0.01  # bucket: 0, exponential: 0.01
    assert limiter.when("a") == 1.0  # bucket: 1.0, exponential: 0.02
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


def test_default_controller_rate_limiter() -> None:
    clock = FakeClock()
    limiter: RateLimiter[str] = default_controller_rate_limiter(clock=clock)
    # Per item exponential while the bucket has tokens...
    assert [limiter.when("a") for _ in range(3)] == [0.005, 0.01, 0.02]
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    # ...and the bucket once the burst of 100 is spent.
    for i in range(97):
        assert limiter.when(f"item-{i}") == 0.005
    assert limiter.when("b") == 0.1


def test_fast_slow() -> None:
    limiter = ItemFastSlowRateLimiter(fast_delay=0.5, slow_delay=10.0, max_fast_attempts=2)
    assert [limiter.when("a") for _ in range(4)] == [0.5, 0.5, 10.0, 10.0]
    assert limiter.num_requeues("a") == 4
    limiter.forget("a")
    assert limiter.when("a") == 0.5


def test_with_max_wait_caps_the_delay() -> None:
    limiter = WithMaxWaitRateLimiter(
        ItemExponentialFailureRateLimiter(base_delay=1.0, max_delay=100.0), max_delay=3.0
    )
    assert [limiter.when("a") for _ in range(4)] == [1.0, 2.0, 3.0, 3.0]
    assert limiter.num_requeues("a") == 4
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
