"""The fake clock the workqueue tests rely on: waiters wake when time reaches them."""

from __future__ import annotations

import threading

import pytest

from manager.clock import FakeClock, RealClock


def test_fake_clock_moves_only_when_told() -> None:
    clock = FakeClock(start=5.0)
    assert clock.now() == 5.0
    clock.step(1.5)
    assert clock.now() == 6.5
    clock.set(10.0)
    assert clock.now() == 10.0
    with pytest.raises(ValueError, match="back"):
        clock.set(9.0)
    with pytest.raises(ValueError, match="backwards"):
        clock.step(-1.0)


def test_wait_returns_false_once_time_reaches_the_deadline() -> None:
    clock = FakeClock()
    cond = threading.Condition()
    result: list[bool] = []

    def waiter() -> None:
        with cond:
            result.append(clock.wait(cond, 2.0))

    thread = threading.Thread(target=waiter, name="waiter")
    thread.start()
    assert clock.wait_for_waiters(1, deadline=2.0)
    assert clock.has_waiters()
    clock.step(1.0)
    assert clock.waiter_deadlines() == [2.0]
    clock.step(1.0)
    thread.join(5.0)
    assert not thread.is_alive()
    assert result == [False]
    assert not clock.has_waiters()


def test_wait_returns_true_when_notified() -> None:
    clock = FakeClock()
    cond = threading.Condition()
    result: list[bool] = []

    def waiter() -> None:
        with cond:
            result.append(clock.wait(cond, None))

    thread = threading.Thread(target=waiter, name="waiter")
    thread.start()
    assert clock.wait_for_waiters(1)
    assert clock.waiter_deadlines() == [None]
    clock.step(1000.0)  # no deadline: time alone never wakes it
    assert clock.waiter_deadlines() == [None]
    with cond:
        cond.notify_all()
    thread.join(5.0)
    assert not thread.is_alive()
    assert result == [True]


def test_sleep_returns_once_time_has_passed() -> None:
    clock = FakeClock()
    thread = threading.Thread(target=lambda: clock.sleep(3.0), name="sleeper")
    thread.start()
    assert clock.wait_for_waiters(1, deadline=3.0)
    clock.step(3.0)
    thread.join(5.0)
    assert not thread.is_alive()


def test_wait_for_waiters_times_out() -> None:
    assert FakeClock().wait_for_waiters(1, timeout=0.0) is False


def test_real_clock_zero_timeout_does_not_block() -> None:
    clock = RealClock()
    cond = threading.Condition()
    before = clock.now()
    with cond:
        assert clock.wait(cond, 0.0) is False
        assert clock.wait(cond, -1.0) is False
    assert clock.now() >= before
