"""The reflector's backoff: 0.8 s doubling to 30 s, jittered upward, reset when healthy."""

from __future__ import annotations

import functools

import pytest

from manager.cache.backoff import Backoff
from manager.clock import FakeClock


def test_grows_from_800ms_doubling_capped_at_30s() -> None:
    b = Backoff(clock=FakeClock(), rand=lambda: 0.0)
    delays = [b.next() for _ in range(9)]
    assert delays == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0])
    assert b.current == pytest.approx(30.0)


def test_jitter_stays_within_bounds() -> None:
    # rand() in [0, 1): each delay lies in [base, base * (1 + jitter)]
    for r in (0.0, 0.25, 0.999999):
        b = Backoff(clock=FakeClock(), jitter=0.5, rand=functools.partial(float, r))
        for base in (0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0):
            d = b.next()
            assert base <= d <= base * 1.5
            assert d == pytest.approx(base * (1 + 0.5 * r))


def test_jitter_with_the_real_random_source() -> None:
    b = Backoff(clock=FakeClock())
    seen = []
    for _ in range(200):
        b.reset()
        seen.append(b.next())
    assert all(0.8 <= d <= 1.2 for d in seen)
    assert len(set(seen)) > 1  # actually jittered


def test_reset_after_a_healthy_period_on_the_clock() -> None:
    clock = FakeClock()
    b = Backoff(clock=clock, rand=lambda: 0.0, reset_after=120.0)
    assert [b.next() for _ in range(3)] == pytest.approx([0.8, 1.6, 3.2])
    clock.step(119.0)  # not long enough: keeps growing
    assert b.next() == pytest.approx(6.4)
    clock.step(120.0)  # 120 s without a failure: starts over
    assert b.next() == pytest.approx(0.8)
    assert b.next() == pytest.approx(1.6)


def test_explicit_reset() -> None:
    b = Backoff(clock=FakeClock(), rand=lambda: 0.0)
    b.next()
    b.next()
    b.reset()
    assert b.current == 0
    assert b.next() == pytest.approx(0.8)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial": 0},
        {"initial": 10, "cap": 5},
        {"factor": 0.5},
        {"jitter": -0.1},
        {"reset_after": 0},
    ],
)
def test_invalid_parameters(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)  # type: ignore[arg-type]
