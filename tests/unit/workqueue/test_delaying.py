"""The delaying queue, driven by a fake clock: items appear when due, and only then."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from manager.clock import FakeClock
from manager.workqueue import DelayingQueue, new_delaying_queue
from manager.workqueue.delaying import MAX_WAIT


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(clock: FakeClock) -> Iterator[DelayingQueue[str]]:
    queue: DelayingQueue[str] = new_delaying_queue(clock=clock)
    try:
        yield queue
    finally:
        queue.shut_down()


def parked_until(clock: FakeClock, deadline: float) -> None:
    """Wait until the waiter thread is parked on the clock until ``deadline``."""
    assert clock.wait_for_waiters(1, deadline=deadline), clock.waiter_deadlines()


def test_item_appears_only_after_its_time(clock: FakeClock, q: DelayingQueue[str]) -> None:
    parked_until(clock, MAX_WAIT)  # idle: heartbeat only
    q.add_after("a", 5.0)
    parked_until(clock, 5.0)

    clock.step(4.5)
    parked_until(clock, 5.0)
    assert q.len() == 0

    clock.step(0.5)
    assert q.get() == ("a", False)  # blocks until the waiter adds it
    q.done("a")


def test_items_come_out_in_order_of_ready_time(clock: FakeClock, q: DelayingQueue[str]) -> None:
    q.add_after("c", 3.0)
    q.add_after("a", 1.0)
    q.add_after("b", 2.0)
    parked_until(clock, 1.0)

    clock.set(3.0)
    assert [q.get()[0] for _ in range(3)] == ["a", "b", "c"]


def test_items_become_due_one_by_one(clock: FakeClock, q: DelayingQueue[str]) -> None:
    q.add_after("a", 1.0)
    q.add_after("b", 2.0)
    parked_until(clock, 1.0)

    clock.set(1.0)
    assert q.get() == ("a", False)
    parked_until(clock, 2.0)
    assert q.len() == 0

    clock.set(2.0)
    assert q.get() == ("b", False)


def test_duplicate_add_after_keeps_the_earliest_time(
    clock: FakeClock, q: DelayingQueue[str]
) -> None:
    q.add_after("a", 5.0)
    q.add_after("a", 2.0)
    q.add_after("a", 8.0)  # later: does not postpone
    parked_until(clock, 2.0)

    clock.set(2.0)
    assert q.get() == ("a", False)
    q.done("a")

    # The superseded schedules are gone: nothing is due any more, the waiter idles.
    parked_until(clock, 2.0 + MAX_WAIT)
    clock.set(9.0)
    parked_until(clock, 2.0 + MAX_WAIT)
    assert q.len() == 0


def test_add_after_can_schedule_an_item_again_once_it_fired(
    clock: FakeClock, q: DelayingQueue[str]
) -> None:
    q.add_after("a", 1.0)
    parked_until(clock, 1.0)
    clock.set(1.0)
    assert q.get() == ("a", False)
    q.done("a")

    q.add_after("a", 1.0)
    parked_until(clock, 2.0)
    clock.set(2.0)
    assert q.get() == ("a", False)


def test_non_positive_delay_adds_at_once(q: DelayingQueue[str]) -> None:
    q.add_after("a", 0.0)
    q.add_after("b", -1.0)
    assert q.len() == 2


def test_add_after_while_shutting_down_is_ignored(clock: FakeClock) -> None:
    q: DelayingQueue[str] = new_delaying_queue(clock=clock)
    q.shut_down()
    q.add_after("a", 0.0)
    q.add_after("b", 1.0)
    assert q.len() == 0
    assert q.get() == (None, True)


def test_shut_down_joins_the_waiter_thread(clock: FakeClock) -> None:
    name = f"delay-{uuid.uuid4().hex[:8]}"
    q: DelayingQueue[str] = new_delaying_queue(name=name, clock=clock)
    thread_name = f"workqueue/{name}/delay"
    waiter = [t for t in threading.enumerate() if t.name == thread_name]
    assert len(waiter) == 1
    assert not waiter[0].daemon

    q.add_after("a", 100.0)
    q.shut_down()
    assert not waiter[0].is_alive()
    q.shut_down()  # idempotent


def test_shut_down_with_drain_joins_the_waiter_and_drops_pending_items(
    clock: FakeClock,
) -> None:
    name = f"drain-{uuid.uuid4().hex[:8]}"
    q: DelayingQueue[str] = new_delaying_queue(name=name, clock=clock)
    q.add_after("late", 1.0)
    q.add("now")
    assert q.get() == ("now", False)

    drained: list[bool] = []
    drainer = threading.Thread(
        target=lambda: drained.append(q.shut_down_with_drain(timeout=60.0)), name="drainer"
    )
    drainer.start()
    # The drainer parks on the clock once the waiter thread has been stopped and joined.
    assert clock.wait_for_waiters(1, deadline=60.0)
    assert not [t for t in threading.enumerate() if t.name == f"workqueue/{name}/delay"]
    clock.set(1.0)  # "late" is dropped: the waiter is gone
    q.done("now")
    drainer.join(5.0)
    assert not drainer.is_alive()
    assert drained == [True]
    assert q.get() == (None, True)
