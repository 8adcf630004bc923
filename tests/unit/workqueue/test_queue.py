"""The work queue's contract: de-duplication, one worker per item, blocking, shutdown."""

from __future__ import annotations

import functools
import random
import threading
from collections import Counter
from collections.abc import Callable

from manager.clock import FakeClock
from manager.workqueue import Queue, new_queue

JOIN = 5.0  # real seconds: a bound on joins, never a synchronisation


def start(target: Callable[[], object], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name)
    thread.start()
    return thread


def join(*threads: threading.Thread) -> None:
    for thread in threads:
        thread.join(JOIN)
        assert not thread.is_alive(), f"{thread.name} did not finish"


def test_item_added_many_times_while_queued_is_processed_once() -> None:
    q: Queue[str] = new_queue()
    for _ in range(1000):
        q.add("a")
    assert q.len() == 1

    assert q.get() == ("a", False)
    q.done("a")
    assert q.len() == 0
    q.shut_down()
    assert q.get() == (None, True)


def test_fifo_order() -> None:
    q: Queue[int] = new_queue()
    for i in range(5):
        q.add(i)
    got = []
    for _ in range(5):
        item, shutdown = q.get()
        assert not shutdown
        got.append(item)
    assert got == [0, 1, 2, 3, 4]


def test_item_readded_while_processing_is_processed_again_exactly_once_after_done() -> None:
    q: Queue[str] = new_queue()
    q.add("a")
    assert q.get() == ("a", False)

    q.add("a")
    q.add("a")
    # Dirty, but not handed to a second worker while the first holds it.
    assert q.len() == 0

    q.done("a")
    assert q.len() == 1
    assert q.get() == ("a", False)
    q.done("a")
    assert q.len() == 0


def test_other_items_flow_while_one_is_processing() -> None:
    q: Queue[str] = new_queue()
    q.add("a")
    q.add("b")
    assert q.get() == ("a", False)
    q.add("a")
    assert q.get() == ("b", False)
    assert q.len() == 0
    q.done("b")
    q.done("a")
    assert q.get() == ("a", False)


def test_never_processed_by_two_workers_at_once_stress() -> None:
    keys = 1000
    workers = 16
    # Key k is re-added by the worker processing it, k % 4 times over its life, so it
    # must be processed exactly 1 + k % 4 times, whatever the interleaving.
    expected = {k: 1 + k % 4 for k in range(keys)}
    total = sum(expected.values())

    q: Queue[int] = new_queue()
    lock = threading.Lock()
    in_flight: set[int] = set()
    overlaps: list[int] = []
    processed: Counter[int] = Counter()
    finished = 0
    all_done = threading.Event()

    def work(seed: int) -> None:
        nonlocal finished
        rng = random.Random(seed)
        while True:
            item, shutdown = q.get()
            if shutdown:
                return
            assert item is not None
            with lock:
                if item in in_flight:
                    overlaps.append(item)
                in_flight.add(item)
                processed[item] += 1
                readd = processed[item] < expected[item]
            if readd:
                # Re-add while processing, possibly several times: collapses to one.
                for _ in range(rng.randint(1, 3)):
                    q.add(item)
            with lock:
                in_flight.discard(item)
            q.done(item)
            with lock:
                finished += 1
                if finished == total:
                    all_done.set()

    threads = [start(functools.partial(work, i), f"worker/stress/{i}") for i in range(workers)]
    order = list(range(keys))
    random.Random(42).shuffle(order)
    for k in order:
        q.add(k)

    assert all_done.wait(JOIN)
    q.shut_down()
    join(*threads)

    assert overlaps == []
    assert processed == expected
    assert q.len() == 0


def test_get_blocks_until_add() -> None:
    clock = FakeClock()
    q: Queue[str] = new_queue(clock=clock)
    result: list[tuple[str | None, bool]] = []

    thread = start(lambda: result.append(q.get(timeout=60.0)), "getter")
    # The getter is parked on the clock: it is blocked inside get.
    assert clock.wait_for_waiters(1)
    assert result == []

    q.add("a")
    join(thread)
    assert result == [("a", False)]


def test_get_without_timeout_is_woken_by_add_from_another_thread() -> None:
    q: Queue[str] = new_queue()
    got = threading.Event()
    result: list[tuple[str | None, bool]] = []

    def getter() -> None:
        result.append(q.get())
        got.set()

    thread = start(getter, "getter")
    q.add("a")
    assert got.wait(JOIN)
    join(thread)
    assert result == [("a", False)]


def test_get_times_out_on_the_queue_clock() -> None:
    clock = FakeClock()
    q: Queue[str] = new_queue(clock=clock)
    result: list[tuple[str | None, bool]] = []

    thread = start(lambda: result.append(q.get(timeout=2.0)), "getter")
    assert clock.wait_for_waiters(1, deadline=2.0)
    clock.step(1.0)
    assert result == []
    clock.step(1.0)
    join(thread)
    assert result == [(None, False)]


def test_shut_down_wakes_every_blocked_getter() -> None:
    clock = FakeClock()
    q: Queue[str] = new_queue(clock=clock)
    results: list[tuple[str | None, bool]] = []
    lock = threading.Lock()

    def getter() -> None:
        r = q.get(timeout=60.0)
        with lock:
            results.append(r)

    threads = [start(getter, f"getter/{i}") for i in range(4)]
    assert clock.wait_for_waiters(4)
    q.shut_down()
    join(*threads)
    assert results == [(None, True)] * 4
    assert q.shutting_down()


def test_adds_after_shut_down_are_ignored() -> None:
    q: Queue[str] = new_queue()
    q.add("a")
    q.shut_down()
    q.add("b")
    assert q.len() == 1
    # Already-queued items are still handed out (workers empty the queue), then shutdown.
    assert q.get() == ("a", False)
    q.add("a")
    q.done("a")
    assert q.get() == (None, True)


def test_shut_down_with_drain_waits_for_queued_and_in_flight_items() -> None:
    clock = FakeClock()
    q: Queue[str] = new_queue(clock=clock)
    q.add("a")
    q.add("b")
    assert q.get() == ("a", False)

    drained: list[bool] = []
    drainer = start(lambda: drained.append(q.shut_down_with_drain(timeout=60.0)), "drainer")
    assert clock.wait_for_waiters(1)  # the drainer is blocked

    assert q.shutting_down()
    q.add("c")  # ignored
    assert q.len() == 1

    assert q.get() == ("b", False)  # workers keep emptying the queue
    q.done("a")
    assert drained == []  # "b" is still in flight
    assert drainer.is_alive()

    q.done("b")
    join(drainer)
    assert drained == [True]
    assert q.get() == (None, True)


def test_shut_down_with_drain_returns_at_once_when_idle() -> None:
    q: Queue[str] = new_queue()
    assert q.shut_down_with_drain() is True
    assert q.get() == (None, True)


def test_shut_down_with_drain_times_out_on_the_queue_clock() -> None:
    clock = FakeClock()
    q: Queue[str] = new_queue(clock=clock)
    q.add("a")
    assert q.get() == ("a", False)

    drained: list[bool] = []
    drainer = start(lambda: drained.append(q.shut_down_with_drain(timeout=30.0)), "drainer")
    assert clock.wait_for_waiters(1, deadline=30.0)
    clock.step(30.0)
    join(drainer)
    assert drained == [False]


def test_shut_down_cuts_a_drain_short() -> None:
    clock = FakeClock()
    q: Queue[str] = new_queue(clock=clock)
    q.add("a")
    assert q.get() == ("a", False)

    drained: list[bool] = []
    drainer = start(lambda: drained.append(q.shut_down_with_drain(timeout=60.0)), "drainer")
    assert clock.wait_for_waiters(1)
    q.shut_down()
    join(drainer)
    assert drained == [False]


def test_shut_down_with_drain_waits_for_items_still_queued() -> None:
    clock = FakeClock()
    q: Queue[str] = new_queue(clock=clock)
    q.add("a")

    drained: list[bool] = []
    drainer = start(lambda: drained.append(q.shut_down_with_drain(timeout=60.0)), "drainer")
    assert clock.wait_for_waiters(1)  # nothing in flight, but "a" still waits for a worker
    assert q.get() == ("a", False)
    assert drainer.is_alive()
    q.done("a")
    join(drainer)
    assert drained == [True]
