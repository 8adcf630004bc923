"""Workqueue metrics, read back from Overseer's registry; one unique queue name per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from manager.clock import FakeClock
from manager.metrics import REGISTRY
from manager.workqueue import (
    ItemExponentialFailureRateLimiter,
    Queue,
    RateLimitingQueue,
    new_queue,
    new_rate_limiting_queue,
)

CONTROLLER = "test-controller"


@pytest.fixture
def name() -> str:
    return f"wq-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=100.0)


def sample(metric: str, name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(metric, {"name": name, "controller": CONTROLLER, **labels})


@pytest.fixture
def q(name: str, clock: FakeClock) -> Queue[str]:
    return new_queue(name=name, controller=CONTROLLER, clock=clock)


@pytest.fixture
def rq(name: str, clock: FakeClock) -> Iterator[RateLimitingQueue[str]]:
    limiter = ItemExponentialFailureRateLimiter(base_delay=1.0, max_delay=8.0)
    queue: RateLimitingQueue[str] = new_rate_limiting_queue(
        limiter, name=name, controller=CONTROLLER, clock=clock
    )
    try:
        yield queue
    finally:
        queue.shut_down()


def test_depth_and_adds(q: Queue[str], name: str) -> None:
    assert sample("workqueue_depth", name) == 0.0
    q.add("a")
    q.add("b")
    q.add("a")  # de-duplicated: not an add
    assert sample("workqueue_depth", name) == 2.0
    assert sample("workqueue_adds_total", name) == 2.0

    q.get()
    assert sample("workqueue_depth", name) == 1.0
    q.add("a")  # re-added while processing: an add, held dirty
    assert sample("workqueue_adds_total", name) == 3.0
    assert sample("workqueue_depth", name) == 2.0
    q.done("a")
    q.get()
    q.get()
    assert sample("workqueue_depth", name) == 0.0


def test_queue_duration_is_observed_on_get(q: Queue[str], name: str, clock: FakeClock) -> None:
    q.add("a")
    clock.step(2.0)
    q.add("a")  # a duplicate add does not restart the timer
    clock.step(0.5)
    q.get()
    assert sample("workqueue_queue_duration_seconds_count", name) == 1.0
    assert sample("workqueue_queue_duration_seconds_sum", name) == 2.5
    assert sample("workqueue_queue_duration_seconds_bucket", name, le="1.0") == 0.0
    assert sample("workqueue_queue_duration_seconds_bucket", name, le="10.0") == 1.0


def test_client_go_buckets(q: Queue[str], name: str) -> None:
    expected = ["1e-08", "1e-07", "1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1", "1.0"]
    expected += ["10.0", "+Inf"]
    q.add("a")
    q.get()
    for le in expected:
        assert sample("workqueue_queue_duration_seconds_bucket", name, le=le) == 1.0, le


def test_work_duration_is_observed_on_done(q: Queue[str], name: str, clock: FakeClock) -> None:
    q.add("a")
    q.get()
    clock.step(3.0)
    assert sample("workqueue_work_duration_seconds_count", name) == 0.0
    q.done("a")
    assert sample("workqueue_work_duration_seconds_count", name) == 1.0
    assert sample("workqueue_work_duration_seconds_sum", name) == 3.0


def test_unfinished_work_and_longest_running_follow_the_clock(
    q: Queue[str], name: str, clock: FakeClock
) -> None:
    assert sample("workqueue_unfinished_work_seconds", name) == 0.0
    assert sample("workqueue_longest_running_processor_seconds", name) == 0.0
    q.add("a")
    q.add("b")
    q.get()
    clock.step(1.0)
    q.get()
    clock.step(2.0)
    assert sample("workqueue_unfinished_work_seconds", name) == 5.0  # 3 + 2
    assert sample("workqueue_longest_running_processor_seconds", name) == 3.0

    q.done("a")
    assert sample("workqueue_unfinished_work_seconds", name) == 2.0
    assert sample("workqueue_longest_running_processor_seconds", name) == 2.0
    q.done("b")
    assert sample("workqueue_unfinished_work_seconds", name) == 0.0
    assert sample("workqueue_longest_running_processor_seconds", name) == 0.0


def test_retries_count_add_rate_limited(
    rq: RateLimitingQueue[str], name: str, clock: FakeClock
) -> None:
    assert sample("workqueue_retries_total", name) == 0.0
    rq.add_rate_limited("a")
    rq.add_rate_limited("b")
    assert sample("workqueue_retries_total", name) == 2.0
    rq.add_after("c", 0.0)  # every add_after is a retry, as in client-go
    assert sample("workqueue_retries_total", name) == 3.0
    rq.add("d")  # a plain add is not
    assert sample("workqueue_retries_total", name) == 3.0

    rq.shut_down()
    rq.add_rate_limited("a")  # ignored after shutdown
    assert sample("workqueue_retries_total", name) == 3.0


def test_delayed_item_counts_in_depth_only_once_due(
    rq: RateLimitingQueue[str], name: str, clock: FakeClock
) -> None:
    rq.add_rate_limited("a")
    assert clock.wait_for_waiters(1, deadline=101.0)
    assert sample("workqueue_depth", name) == 0.0
    clock.set(101.0)
    assert rq.get() == ("a", False)
    assert sample("workqueue_adds_total", name) == 1.0
    assert sample("workqueue_queue_duration_seconds_sum", name) == 0.0


def test_unnamed_queue_records_nothing() -> None:
    q: Queue[str] = new_queue(controller=CONTROLLER)
    q.add("a")
    q.get()
    q.done("a")
    assert sample("workqueue_adds_total", "") is None
    assert sample("workqueue_depth", "") is None
    assert sample("workqueue_unfinished_work_seconds", "") is None
