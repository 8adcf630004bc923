"""The reflector against a scripted lister-watcher: list from "0", watch from the list's
resourceVersion, re-watch without relisting, relist on 410, back off on errors, transform
objects, stop promptly. Time is a FakeClock; every wait is signalled and bounded."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from manager.cache.backoff import Backoff
from manager.cache.frozen import FrozenDict, FrozenList
from manager.cache.reflector import (
    MAX_WATCH_TIMEOUT,
    MIN_WATCH_TIMEOUT,
    Reflector,
    drop_managed_fields,
)
from manager.clock import FakeClock, RealClock
from manager.errors import Gone, ServerError
from manager.keys import JsonDict
from tests.unit.cache.fakes import WAIT, FakeListerWatcher, FakeWatch, cm, wait_until


class RecordingSink:
    """Records what the reflector feeds: ("replace", {name: rv}, rv) / (kind, name, rv)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.calls: list[tuple[Any, ...]] = []
        self.objects: list[JsonDict] = []

    def _record(self, call: tuple[Any, ...], objs: list[JsonDict]) -> None:
        with self.cond:
            self.calls.append(call)
            self.objects.extend(objs)
            self.cond.notify_all()

    def replace(self, objs: list[JsonDict], resource_version: str) -> None:
        names = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in objs}
        self._record(("replace", names, resource_version), objs)

    def add(self, obj: JsonDict) -> None:
        self._record(("add", obj["metadata"]["name"], obj["metadata"]["resourceVersion"]), [obj])

    def update(self, obj: JsonDict) -> None:
        self._record(("update", obj["metadata"]["name"], obj["metadata"]["resourceVersion"]), [obj])

    def delete(self, obj: JsonDict) -> None:
        self._record(("delete", obj["metadata"]["name"], obj["metadata"]["resourceVersion"]), [obj])

    def wait_for(self, n: int) -> list[tuple[Any, ...]]:
        wait_until(self.cond, lambda: len(self.calls) >= n, f"{n} sink calls")
        with self.cond:
            return list(self.calls)


class Harness:
    def __init__(self, lw: FakeListerWatcher, **kwargs: Any) -> None:
        self.lw = lw
        self.sink = RecordingSink()
        self.clock: FakeClock = kwargs.pop("clock", FakeClock())
        self.backoff = kwargs.pop("backoff", Backoff(clock=self.clock, rand=lambda: 0.0))
        self.synced = threading.Event()
        self.reflector = Reflector(
            lw,
            self.sink,
            clock=self.clock,
            backoff=self.backoff,
            rand=lambda: 0.0,
            on_synced=self.synced.set,
            **kwargs,
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self.reflector.run, args=(self.stop,), name="test-reflector"
        )

    def start(self) -> Harness:
        self.thread.start()
        return self

    def shutdown(self) -> None:
        self.stop.set()
        self.reflector.stop()
        self.lw.close_all()
        if self.thread.ident is not None:
            self.thread.join(WAIT)
        assert not self.thread.is_alive(), "reflector did not stop"

    def parked_until(self, deadline: float) -> None:
        """The reflector is backing off, waiting on the clock until ``deadline``."""
        assert self.clock.wait_for_waiters(1, deadline=deadline, timeout=WAIT), (
            deadline,
            self.clock.waiter_deadlines(),
        )


@pytest.fixture
def make() -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def factory(lw: FakeListerWatcher | None = None, **kwargs: Any) -> Harness:
        h = Harness(lw or FakeListerWatcher(), **kwargs)
        made.append(h)
        return h

    yield factory
    for h in made:
        h.shutdown()


def lists(lw: FakeListerWatcher) -> list[str]:
    with lw.cond:
        return [c["resource_version"] for c in lw.list_calls]


# -- list, then watch ----------------------------------------------------------------


def test_first_list_uses_rv_0_and_watch_starts_from_the_lists_rv(
    make: Callable[..., Harness],
) -> None:
    lw = FakeListerWatcher([cm("a", "5"), cm("b", "6")], rv="10")
    h = make(lw).start()
    w = h.lw.next_watch()
    assert lw.list_calls == [{"resource_version": "0", "limit": None, "continue_": None}]
    assert w.resource_version == "10"
    assert h.sink.calls == [("replace", {"a": "5", "b": "6"}, "10")]
    assert h.synced.is_set()
    assert h.reflector.last_sync_resource_version == "10"


def test_watch_timeout_is_randomised_in_5_to_10_minutes_with_a_longer_read_timeout() -> None:
    lw = FakeListerWatcher()
    seen = []
    for r in (0.0, 0.5, 0.9999):
        refl = Reflector(lw, RecordingSink(), clock=FakeClock(), rand=functools.partial(float, r))
        stop = threading.Event()
        t = threading.Thread(target=refl.run, args=(stop,))
        t.start()
        w = lw.next_watch()
        refl.stop()
        t.join(WAIT)
        assert not t.is_alive()
        assert MIN_WATCH_TIMEOUT <= w.timeout_seconds < MAX_WATCH_TIMEOUT
        assert w.read_timeout > w.timeout_seconds
        seen.append(w.timeout_seconds)
    assert seen == [300, 450, 599]


def test_watch_events_reach_the_sink_in_order_and_advance_the_rv(
    make: Callable[..., Harness],
) -> None:
    h = make(FakeListerWatcher([cm("a", "5")], rv="10")).start()
    w = h.lw.next_watch()
    w.send("ADDED", cm("b", "11"))
    w.send("MODIFIED", cm("a", "12"))
    w.send("DELETED", cm("b", "13"))
    calls = h.sink.wait_for(4)
    assert calls[1:] == [("add", "b", "11"), ("update", "a", "12"), ("delete", "b", "13")]
    assert h.reflector.last_sync_resource_version == "13"


def test_clean_watch_end_rewatches_from_last_rv_without_relisting(
    make: Callable[..., Harness],
) -> None:
    h = make(FakeListerWatcher([cm("a", "5")], rv="10")).start()
    w1 = h.lw.next_watch()
    w1.send("MODIFIED", cm("a", "17"))
    w1.end()
    w2 = h.lw.next_watch()
    assert w2.resource_version == "17"
    w2.send("ADDED", cm("c", "18"))
    w2.end()
    w3 = h.lw.next_watch()
    assert w3.resource_version == "18"
    assert lists(h.lw) == ["0"]  # one list, ever
    assert [c[0] for c in h.sink.calls] == ["replace", "update", "add"]


def test_bookmark_advances_the_rv_of_the_next_watch(make: Callable[..., Harness]) -> None:
    h = make(FakeListerWatcher([cm("a", "5")], rv="10")).start()
    w1 = h.lw.next_watch()
    w1.bookmark("40")
    w1.end()
    w2 = h.lw.next_watch()
    assert w2.resource_version == "40"
    assert h.reflector.last_sync_resource_version == "40"
    assert lists(h.lw) == ["0"]
    assert h.sink.calls == [("replace", {"a": "5"}, "10")]  # bookmarks never reach the sink


# -- 410 Gone ------------------------------------------------------------------------


def test_error_event_410_relists_once_with_empty_rv_and_replaces(
    make: Callable[..., Harness],
) -> None:
    lw = FakeListerWatcher([cm("a", "5"), cm("b", "6")], rv="10")
    h = make(lw).start()
    w1 = lw.next_watch()
    w1.send("ADDED", cm("c", "11"))
    h.sink.wait_for(2)
    lw.set_state([cm("a", "5"), cm("d", "30")], rv="31")
    w1.error(410)
    w2 = lw.next_watch()
    assert w1.closed.is_set()
    assert lists(lw) == ["0", ""]  # exactly one relist, a consistent one
    assert w2.resource_version == "31"
    assert h.sink.calls[-1] == ("replace", {"a": "5", "d": "30"}, "31")
    w2.send("ADDED", cm("e", "32"))
    w2.end()  # later re-watches do not relist again
    w2b = lw.next_watch()
    assert lists(lw) == ["0", ""]
    assert w2b.resource_version == "32"


def test_http_410_when_opening_the_watch_relists(make: Callable[..., Harness]) -> None:
    lw = FakeListerWatcher([cm("a", "5")], rv="10")
    h = make(lw).start()
    w1 = lw.next_watch()
    lw.fail_watch(Gone("too old resource version"))
    lw.set_state([cm("z", "50")], rv="51")
    w1.send("ADDED", cm("b", "11"))
    w1.end()
    w2 = lw.next_watch()
    assert [c["resource_version"] for c in lw.watch_calls] == ["10", "11", "51"]
    assert lists(lw) == ["0", ""]
    assert w2.resource_version == "51"
    assert h.sink.calls[-1] == ("replace", {"z": "50"}, "51")


def test_consistent_relist_paginates_when_asked(make: Callable[..., Harness]) -> None:
    lw = FakeListerWatcher([cm("a", "5")], rv="10")
    h = make(lw, page_size=2).start()
    w1 = lw.next_watch()
    lw.script_list(
        {"metadata": {"continue": "t1"}, "items": [cm("a", "5"), cm("b", "20")]},
        Gone("continue token expired"),  # the token expired: start over
        {"metadata": {"continue": "t2"}, "items": [cm("a", "5"), cm("b", "21")]},
        {"metadata": {"resourceVersion": "40"}, "items": [cm("c", "22")]},
    )
    w1.error(410)
    w2 = lw.next_watch()
    assert lw.list_calls == [
        {"resource_version": "0", "limit": None, "continue_": None},  # rv=0: unpaginated
        {"resource_version": "", "limit": 2, "continue_": None},
        {"resource_version": "", "limit": 2, "continue_": "t1"},
        {"resource_version": "", "limit": 2, "continue_": None},
        {"resource_version": "", "limit": 2, "continue_": "t2"},
    ]
    assert h.sink.calls[-1] == ("replace", {"a": "5", "b": "21", "c": "22"}, "40")
    assert w2.resource_version == "40"


# -- errors and backoff ----------------------------------------------------------------


def test_list_errors_back_off_with_growing_delays(make: Callable[..., Harness]) -> None:
    lw = FakeListerWatcher([cm("a", "5")], rv="10")
    lw.script_list(*(ServerError("boom") for _ in range(4)))
    h = make(lw).start()
    t = 0.0
    for n, delay in enumerate([0.8, 1.6, 3.2, 6.4], start=1):
        lw.wait_lists(n)
        t += delay
        h.parked_until(t)
        assert len(lw.list_calls) == n  # nothing is retried before the delay is over
        h.clock.set(t)
    w = lw.next_watch()
    assert lists(lw) == ["0"] * 5
    assert w.resource_version == "10"
    assert h.sink.calls == [("replace", {"a": "5"}, "10")]


def test_non_410_error_event_backs_off_then_rewatches_without_relist(
    make: Callable[..., Harness],
) -> None:
    lw = FakeListerWatcher([cm("a", "5")], rv="10")
    h = make(lw).start()
    w1 = lw.next_watch()
    w1.send("MODIFIED", cm("a", "12"))
    w1.error(500, "InternalError")
    h.parked_until(0.8)
    assert lw.no_watch_opened()
    h.clock.step(0.8)
    w2 = lw.next_watch()
    assert w2.resource_version == "12"
    assert lists(lw) == ["0"]


def test_watch_that_ends_at_once_without_events_counts_as_an_error(
    make: Callable[..., Harness],
) -> None:
    lw = FakeListerWatcher([cm("a", "5")], rv="10")
    h = make(lw).start()
    t = 0.0
    for delay in (0.8, 1.6, 3.2):
        lw.next_watch().end()
        t += delay
        h.parked_until(t)
        assert lw.no_watch_opened()
        h.clock.set(t)
    assert lw.next_watch().resource_version == "10"
    assert lists(lw) == ["0"]


def test_backoff_resets_after_a_healthy_watch(make: Callable[..., Harness]) -> None:
    lw = FakeListerWatcher([cm("a", "5")], rv="10")
    lw.script_list(ServerError("boom"), ServerError("boom"), ServerError("boom"))
    h = make(lw).start()
    t = 0.0
    for n, delay in enumerate([0.8, 1.6, 3.2], start=1):
        lw.wait_lists(n)
        t += delay
        h.parked_until(t)
        h.clock.set(t)
    w1 = lw.next_watch()
    h.clock.step(2.0)  # the watch stays open two seconds: healthy
    w1.send("MODIFIED", cm("a", "11"))
    w1.end()
    w2 = lw.next_watch()  # re-watch at once: a clean end is no error
    assert w2.resource_version == "11"
    lw.fail_watch(ServerError("boom"))
    w2.send("MODIFIED", cm("a", "12"))
    w2.end()
    h.parked_until(h.clock.now() + 0.8)  # started over at 0.8 s, not 6.4 s


def test_backoff_keeps_growing_without_a_healthy_watch(make: Callable[..., Harness]) -> None:
    lw = FakeListerWatcher([cm("a", "5")], rv="10")
    lw.script_list(ServerError("boom"), ServerError("boom"), ServerError("boom"))
    h = make(lw).start()
    t = 0.0
    for n, delay in enumerate([0.8, 1.6, 3.2], start=1):
        lw.wait_lists(n)
        t += delay
        h.parked_until(t)
        h.clock.set(t)
    lw.next_watch().end()  # at once, nothing delivered: another failure
    h.parked_until(t + 6.4)


# -- transform -----------------------------------------------------------------------


def with_managed_fields(name: str, rv: str) -> JsonDict:
    return cm(
        name,
        rv,
        metadata={"managedFields": [{"manager": "kubectl"}], "labels": {"app": "x"}},
        data={"k": "v"},
    )


def test_default_transform_drops_managed_fields(make: Callable[..., Harness]) -> None:
    lw = FakeListerWatcher([with_managed_fields("a", "5")], rv="10")
    h = make(lw).start()
    w = lw.next_watch()
    w.send("ADDED", with_managed_fields("b", "11"))
    w.send("MODIFIED", with_managed_fields("a", "12"))
    h.sink.wait_for(3)
    assert len(h.sink.objects) == 3
    for o in h.sink.objects:
        assert "managedFields" not in o["metadata"]
        assert o["metadata"]["labels"] == {"app": "x"}
        assert o["data"] == {"k": "v"}


def test_drop_managed_fields_tolerates_objects_without_metadata() -> None:
    assert drop_managed_fields({"kind": "X"}) == {"kind": "X"}


def test_custom_transform_is_applied_to_listed_and_watched_objects(
    make: Callable[..., Harness],
) -> None:
    def slim(obj: JsonDict) -> JsonDict:
        return {"metadata": obj["metadata"], "slim": True}

    lw = FakeListerWatcher([with_managed_fields("a", "5")], rv="10")
    h = make(lw, transform=slim).start()
    w = lw.next_watch()
    w.send("ADDED", with_managed_fields("b", "11"))
    w.send("DELETED", with_managed_fields("a", "12"))
    h.sink.wait_for(3)
    assert all(o.get("slim") is True and "data" not in o for o in h.sink.objects)
    # a custom transform replaces the default: managedFields are kept
    assert all("managedFields" in o["metadata"] for o in h.sink.objects)


def test_no_transform_keeps_objects_as_received(make: Callable[..., Harness]) -> None:
    lw = FakeListerWatcher([with_managed_fields("a", "5")], rv="10")
    h = make(lw, transform=None).start()
    lw.next_watch()
    assert h.sink.objects[0]["metadata"]["managedFields"] == [{"manager": "kubectl"}]


# -- read-only objects ---------------------------------------------------------------


def _assert_frozen(obj: Any) -> None:
    assert type(obj) in (FrozenDict, FrozenList), type(obj)
    for v in obj.values() if isinstance(obj, dict) else obj:
        if isinstance(v, dict | list):
            _assert_frozen(v)


def test_every_object_reaches_the_sink_read_only(make: Callable[..., Harness]) -> None:
    """First list, watch events of every kind and a relist: what the sink gets (and so
    the store, handlers and listers) cannot be changed, after the transform ran."""
    lw = FakeListerWatcher([with_managed_fields("a", "5")], rv="10")
    h = make(lw).start()
    w1 = lw.next_watch()
    w1.send("ADDED", with_managed_fields("b", "11"))
    w1.send("MODIFIED", with_managed_fields("a", "12"))
    w1.send("DELETED", with_managed_fields("b", "13"))
    h.sink.wait_for(4)
    lw.set_state([with_managed_fields("a", "14"), with_managed_fields("c", "15")], rv="16")
    w1.error(410)
    lw.next_watch()
    h.sink.wait_for(5)
    assert len(h.sink.objects) == 6
    for o in h.sink.objects:
        _assert_frozen(o)
        assert "managedFields" not in o["metadata"]  # the transform saw a plain object
        with pytest.raises(TypeError, match="read-only"):
            o["metadata"]["labels"]["x"] = "y"


def test_a_custom_transform_gets_a_changeable_object(make: Callable[..., Harness]) -> None:
    def label(obj: JsonDict) -> JsonDict:
        obj["metadata"].setdefault("labels", {})["seen"] = "yes"
        return obj

    lw = FakeListerWatcher([cm("a", "5")], rv="10")
    h = make(lw, transform=label).start()
    lw.next_watch().send("ADDED", cm("b", "11"))
    h.sink.wait_for(2)
    for o in h.sink.objects:
        assert o["metadata"]["labels"] == {"seen": "yes"}
        _assert_frozen(o)


def test_what_an_update_did_not_change_is_shared_with_the_cached_version(
    make: Callable[..., Harness],
) -> None:
    cache: dict[str, JsonDict] = {}

    def cached(obj: JsonDict) -> JsonDict | None:
        return cache.get(obj["metadata"]["name"])

    lw = FakeListerWatcher([cm("a", "5", data={"k": "v"}, metadata={"labels": {"x": "1"}})])
    h = make(lw, cached=cached).start()
    w = lw.next_watch()
    first = h.sink.objects[0]
    cache["a"] = first
    w.send("MODIFIED", cm("a", "6", data={"k": "v"}, metadata={"labels": {"x": "2"}}))
    h.sink.wait_for(2)
    second = h.sink.objects[1]
    _assert_frozen(second)
    assert second["data"] is first["data"]  # unchanged: shared, not converted again
    assert second["metadata"]["labels"] == {"x": "2"} and first["metadata"]["labels"] == {"x": "1"}


# -- stop ----------------------------------------------------------------------------


def test_stop_ends_run_while_blocked_in_a_watch_read(make: Callable[..., Harness]) -> None:
    h = make(FakeListerWatcher([cm("a", "5")], rv="10")).start()
    w = h.lw.next_watch()  # the reflector is now blocked reading w
    h.reflector.stop()
    h.thread.join(WAIT)
    assert not h.thread.is_alive()
    assert w.closed.is_set()


def test_run_after_stop_returns_without_listing() -> None:
    lw = FakeListerWatcher([cm("a", "5")], rv="10")
    refl = Reflector(lw, RecordingSink(), clock=FakeClock())
    refl.stop()  # before run: run returns without listing
    stop = threading.Event()
    refl.run(stop)
    assert lw.list_calls == []


def test_stop_ends_run_promptly_during_a_backoff_wait(make: Callable[..., Harness]) -> None:
    lw = FakeListerWatcher()
    lw.script_list(ServerError("boom"))
    h = make(lw).start()
    h.parked_until(0.8)
    h.reflector.stop()  # the clock does not move: only stop() can end the wait
    h.thread.join(WAIT)
    assert not h.thread.is_alive()
    assert len(lw.list_calls) == 1


def test_stop_ends_run_promptly_during_a_long_real_backoff_wait() -> None:
    lw = FakeListerWatcher()
    lw.script_list(ServerError("boom"))
    clock = RealClock()
    refl = Reflector(
        lw,
        RecordingSink(),
        clock=clock,
        backoff=Backoff(initial=30.0, cap=30.0, clock=clock, rand=lambda: 0.0),
    )
    stop = threading.Event()
    t = threading.Thread(target=refl.run, args=(stop,))
    t.start()
    lw.wait_lists(1)
    refl.stop()
    t.join(WAIT)  # far less than the 30 s backoff
    alive = t.is_alive()
    if alive:  # leave no thread behind, whatever happened
        stop.set()
        t.join(WAIT)
    assert not alive, "stop() did not interrupt the backoff wait"


def test_stop_event_ends_run_during_a_real_backoff_wait() -> None:
    lw = FakeListerWatcher()
    lw.script_list(ServerError("boom"))
    clock = RealClock()
    refl = Reflector(
        lw,
        RecordingSink(),
        clock=clock,
        backoff=Backoff(initial=30.0, cap=30.0, clock=clock, rand=lambda: 0.0),
    )
    stop = threading.Event()
    t = threading.Thread(target=refl.run, args=(stop,))
    t.start()
    lw.wait_lists(1)
    stop.set()
    t.join(WAIT)
    assert not t.is_alive()


def test_stop_right_after_a_rewatch_closes_the_new_stream(
    make: Callable[..., Harness],
) -> None:
    # stop() while the reflector sits in a re-opened watch: that stream is closed, run ends.
    h = make(FakeListerWatcher([cm("a", "5")], rv="10")).start()
    w1: FakeWatch = h.lw.next_watch()
    w1.send("ADDED", cm("b", "11"))
    w1.end()
    w2 = h.lw.next_watch()
    h.reflector.stop()
    h.thread.join(WAIT)
    assert not h.thread.is_alive()
    assert w2.closed.is_set()
    assert h.sink.calls[-1] == ("add", "b", "11")


def test_410_right_after_a_relist_backs_off_instead_of_spinning(
    make: Callable[..., Harness],
) -> None:
    lw = FakeListerWatcher([cm("a", "5")], rv="10")
    h = make(lw).start()
    lw.next_watch().error(410)  # expired: one immediate relist
    w2 = lw.next_watch()
    assert lists(lw) == ["0", ""]
    w2.error(410)  # expired again before any event: this must not relist at once
    h.parked_until(h.clock.now() + 0.8)
    assert lists(lw) == ["0", ""]
    h.clock.step(0.8)
    lw.next_watch()
    assert lists(lw) == ["0", "", ""]


def test_relist_and_error_series_exist_at_zero_before_the_first() -> None:
    # the dashboard's relist/error panel and any rate() over them need a series at once
    from manager.metrics import REGISTRY

    lw = FakeListerWatcher()
    lw.description = f"v1/zero-{threading.get_ident()}-{id(lw)}"
    Harness(lw)
    for name in (
        "overseer_informer_relists_total",
        "overseer_informer_errors_total",
        "overseer_informer_lists_total",
        "overseer_informer_watches_total",
    ):
        assert REGISTRY.get_sample_value(name, {"resource": lw.description}) == 0.0, name


def test_objects_listed_and_watch_events_received_are_counted_before_any_filter(
    make: Callable[..., Harness],
) -> None:
    # what the server sent, not what the cache kept: the sharding bench compares the
    # watch traffic of server-side sharding (divided) with the client filter (not)
    from manager.metrics import REGISTRY

    lw = FakeListerWatcher([cm("a", "5"), cm("b", "6")], rv="10")
    lw.description = f"v1/received-{threading.get_ident()}-{id(lw)}"
    labels = {"resource": lw.description}
    h = make(lw).start()
    w = h.lw.next_watch()
    w.send("ADDED", cm("c", "11"))
    w.bookmark("12")  # a bookmark carries no object: not an event received
    w.send("MODIFIED", cm("a", "13"))
    h.sink.wait_for(3)
    assert REGISTRY.get_sample_value("overseer_informer_listed_objects_total", labels) == 2.0
    assert REGISTRY.get_sample_value("overseer_informer_watch_events_total", labels) == 2.0


def test_paged_lists_with_a_keep_filter_hold_one_page_of_what_is_dropped(
    make: Callable[..., Harness],
) -> None:
    # a cache that keeps a share of what the server cannot filter (owned objects by
    # their owner's uid) lists in pages and drops the rest page by page: its peak
    # memory is its share and one page, not the whole resource parsed at once
    from manager.metrics import REGISTRY

    lw = FakeListerWatcher([], rv="10")
    lw.description = f"v1/keep-{threading.get_ident()}-{id(lw)}"
    lw.script_list(
        {"metadata": {"continue": "t1"}, "items": [cm("a", "5"), cm("b", "6")]},
        {"metadata": {"resourceVersion": "40"}, "items": [cm("c", "7")]},
    )
    h = make(lw, page_size=2, paged_lists=True, keep=lambda o: o["metadata"]["name"] != "b").start()
    w = lw.next_watch()
    assert lw.list_calls == [
        {"resource_version": "", "limit": 2, "continue_": None},
        {"resource_version": "", "limit": 2, "continue_": "t1"},
    ]
    assert h.sink.calls == [("replace", {"a": "5", "c": "7"}, "40")]
    assert w.resource_version == "40"
    labels = {"resource": lw.description}
    assert REGISTRY.get_sample_value("overseer_informer_listed_objects_total", labels) == 3.0
