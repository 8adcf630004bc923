"""WhenServed: waits for resources by discovery, says why once, wires once, and a wiring
that raises leaves the replica not ready with the error (the thread survives)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from manager.resources import Resource, UnknownResource
from manager.served import WhenServed

WIDGETS = Resource("example.com", "v1", "widgets", "Widget", namespaced=True)


class Discovery:
    """A client whose ``resource`` answers after ``misses`` unknown answers."""

    def __init__(self, misses: int) -> None:
        self.misses = misses
        self.asked = 0

    def resource(self, name: str) -> Resource:
        self.asked += 1
        if self.asked <= self.misses:
            raise UnknownResource(f"no resource {name!r} is served by https://kube")
        return WIDGETS


def run(waiter: WhenServed) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=waiter.run, args=(stop,))
    thread.start()
    thread.join(5)
    stop.set()
    assert not thread.is_alive()


def test_waits_says_why_once_then_wires(caplog: pytest.LogCaptureFixture) -> None:
    client = Discovery(misses=3)
    wired: list[Resource] = []
    waiter = WhenServed(client, "widgets", ["widgets.example.com"], wired.append, poll=0.01)  # type: ignore[arg-type]
    assert waiter.ready_reason() == "waiting for widgets.example.com to be served"
    with caplog.at_level(logging.INFO, logger="manager.served"):
        run(waiter)
    assert wired == [WIDGETS]
    assert waiter.ready_reason() is None
    waits = [r for r in caplog.records if r.getMessage() == "controller waits for a resource"]
    assert len(waits) == 1  # not once per poll
    assert client.asked == 4


def test_a_wiring_that_raises_is_not_ready_with_the_error() -> None:
    def wire(*resources: Any) -> None:
        raise ValueError("bad selector")

    waiter = WhenServed(Discovery(misses=0), "widgets", ["widgets.example.com"], wire)  # type: ignore[arg-type]
    run(waiter)
    assert waiter.ready_reason() == "wiring failed: ValueError: bad selector"
    assert not waiter.wired.is_set()


def test_no_names_is_refused() -> None:
    with pytest.raises(ValueError, match="no resource names"):
        WhenServed(Discovery(0), "widgets", [], print)  # type: ignore[arg-type]
