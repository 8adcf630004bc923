"""The shared informer over a scripted lister-watcher: store first, then every handler in
order; late handlers get synthetic adds; slow handlers block nobody; tombstones after a
relist; resync; has_synced. Synchronised with conditions and events, bounded joins."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from manager.cache.informer import HandlerFuncs, SharedInformer, wait_for_cache_sync
from manager.clock import FakeClock
from manager.keys import DeletedFinalStateUnknown, JsonDict
from tests.unit.cache.fakes import WAIT, FakeListerWatcher, cm, wait_until


def _name(o: JsonDict) -> str:
    return str(o["metadata"]["name"])


def _rv(o: JsonDict) -> str:
    return str(o["metadata"]["resourceVersion"])


class Recorder:
    """An EventHandler that records ("add", name, rv, initial) / ("update", name, old_rv,
    new_rv) / ("delete", name, rv) / ("tombstone", key, last_rv).

    ``gate``: the first notification blocks until it is set (``entered`` is set then).
    """

    def __init__(self, gate: threading.Event | None = None, fail_on: str | None = None) -> None:
        self.cond = threading.Condition()
        self.events: list[tuple[Any, ...]] = []
        self.gate = gate
        self.entered = threading.Event()
        self.fail_on = fail_on
        self.thread_names: set[str] = set()

    def _record(self, event: tuple[Any, ...]) -> None:
        self.thread_names.add(threading.current_thread().name)
        if self.gate is not None:
            self.entered.set()
            assert self.gate.wait(WAIT * 2), "gate never opened"
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()
        if self.fail_on is not None and event[1] == self.fail_on:
            raise RuntimeError(f"handler fails on {self.fail_on}")

    def on_add(self, obj: JsonDict, is_in_initial_list: bool) -> None:
        self._record(("add", _name(obj), _rv(obj), is_in_initial_list))

    def on_update(self, old: JsonDict, new: JsonDict) -> None:
        self._record(("update", _name(new), _rv(old), _rv(new)))

    def on_delete(self, obj: JsonDict | DeletedFinalStateUnknown) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self._record(("tombstone", obj.key, _rv(obj.obj)))
        else:
            self._record(("delete", _name(obj), _rv(obj)))

    def wait_for(self, n: int) -> list[tuple[Any, ...]]:
        wait_until(self.cond, lambda: len(self.events) >= n, f"{n} handler events")
        with self.cond:
            return list(self.events)

    def snapshot(self) -> list[tuple[Any, ...]]:
        with self.cond:
            return list(self.events)


class Running:
    def __init__(self, informer: SharedInformer, clock: FakeClock | None) -> None:
        self.informer = informer
        self.clock = clock
        self.stop = threading.Event()
        self.thread = threading.Thread(target=informer.run, args=(self.stop,), name="test-informer")
        self.thread.start()

    def shutdown(self) -> None:
        self.stop.set()
        if self.clock is not None:
            # The resync loop parks on the fake clock (at most 1 s ahead); a stop event
            # cannot wake it, moving the clock does.
            for _ in range(int(WAIT / 0.1)):
                if not self.thread.is_alive():
                    break
                if self.clock.wait_for_waiters(1, timeout=0.1):
                    self.clock.step(1.0)
                self.thread.join(0.1)
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "informer did not stop"


@pytest.fixture
def run() -> Iterator[Callable[..., Running]]:
    started: list[Running] = []

    def start(informer: SharedInformer, clock: FakeClock | None = None) -> Running:
        r = Running(informer, clock)
        started.append(r)
        return r

    yield start
    for r in started:
        r.shutdown()


def synced(informer: SharedInformer) -> None:
    assert wait_for_cache_sync(WAIT, informer), "informer did not sync"


# -- delivery ------------------------------------------------------------------------


def test_handlers_get_add_update_delete_in_order(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher([cm("a", "1")], rv="10")
    inf = SharedInformer(lw)
    h1, h2 = Recorder(), Recorder()
    inf.add_event_handler(h1)
    inf.add_event_handler(h2)
    run(inf)
    w = lw.next_watch()
    w.send("ADDED", cm("b", "11"))
    w.send("MODIFIED", cm("a", "12"))
    w.send("MODIFIED", cm("b", "13"))
    w.send("DELETED", cm("b", "14"))
    w.send("ADDED", cm("c", "15"))
    expected = [
        ("add", "a", "1", True),
        ("add", "b", "11", False),
        ("update", "a", "1", "12"),
        ("update", "b", "11", "13"),
        ("delete", "b", "14"),
        ("add", "c", "15", False),
    ]
    assert h1.wait_for(6) == expected
    assert h2.wait_for(6) == expected
    # the store was updated before the handlers heard of it
    assert sorted(o["metadata"]["name"] for o in inf.indexer.list()) == ["a", "c"]
    assert inf.indexer.get_by_key("default/a")["metadata"]["resourceVersion"] == "12"  # type: ignore[index]
    assert inf.last_sync_resource_version == "15"
    # each handler runs on its own thread, not the reflector's
    assert len(h1.thread_names) == 1 and len(h2.thread_names) == 1
    assert h1.thread_names != h2.thread_names
    assert not any(n.startswith("reflector/") for n in h1.thread_names | h2.thread_names)


def test_added_event_for_a_cached_object_is_an_update(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher([cm("a", "1")], rv="10")
    inf = SharedInformer(lw)
    h = Recorder()
    inf.add_event_handler(h)
    run(inf)
    lw.next_watch().send("ADDED", cm("a", "11"))
    assert h.wait_for(2)[1] == ("update", "a", "1", "11")


def test_handler_functions(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher([cm("a", "1")], rv="10")
    inf = SharedInformer(lw)
    seen: list[str] = []
    done = threading.Event()

    def on_delete(o: JsonDict | DeletedFinalStateUnknown) -> None:
        seen.append("delete")
        done.set()

    inf.add_event_handler(
        HandlerFuncs(add=lambda o: seen.append("add " + _name(o)), delete=on_delete)
    )
    run(inf)
    w = lw.next_watch()
    w.send("MODIFIED", cm("a", "2"))  # no update function: ignored
    w.send("DELETED", cm("a", "3"))
    assert done.wait(WAIT)
    assert seen == ["add a", "delete"]


def test_late_handler_gets_synthetic_adds_then_live_events(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher([cm("a", "1"), cm("b", "2"), cm("c", "3")], rv="10")
    inf = SharedInformer(lw)
    early = Recorder()
    inf.add_event_handler(early)
    run(inf)
    w = lw.next_watch()
    w.send("MODIFIED", cm("b", "11"))
    early.wait_for(4)
    late = Recorder()
    reg = inf.add_event_handler(late)
    w.send("ADDED", cm("d", "12"))
    events = late.wait_for(4)
    assert sorted(events[:3]) == [
        ("add", "a", "1", True),
        ("add", "b", "11", True),
        ("add", "c", "3", True),
    ]
    assert events[3:] == [("add", "d", "12", False)]
    wait_until(late.cond, reg.has_synced, "late handler synced")
    assert early.wait_for(5)[3:] == [("update", "b", "2", "11"), ("add", "d", "12", False)]
    assert len(early.snapshot()) == 5  # no replay for the handlers already there


def test_handler_added_before_any_list_gets_the_initial_list(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher([cm("a", "1")], rv="10")
    lw.script_list(RuntimeError("not yet"))  # first list fails: run is up, not listed
    inf = SharedInformer(lw)
    r = run(inf)
    lw.wait_lists(1)
    h = Recorder()
    reg = inf.add_event_handler(h)
    assert not inf.has_synced()
    # the reflector backs off ~1 s (real clock) and lists again
    assert h.wait_for(1) == [("add", "a", "1", True)]
    synced(inf)
    assert reg.has_synced()
    assert r.thread.is_alive()


def test_slow_handler_does_not_delay_the_others(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher([cm("a", "1")], rv="10")
    inf = SharedInformer(lw)
    gate = threading.Event()
    slow, fast = Recorder(gate=gate), Recorder()
    inf.add_event_handler(slow)
    inf.add_event_handler(fast)
    run(inf)
    assert slow.entered.wait(WAIT)  # blocked in its first add
    w = lw.next_watch()
    n = 50
    for i in range(n):
        w.send("ADDED", cm(f"x{i}", str(100 + i)))
    fast_events = fast.wait_for(n + 1)
    assert fast_events[-1] == ("add", f"x{n - 1}", str(100 + n - 1), False)
    assert len(inf.indexer) == n + 1  # nor the store
    assert not gate.is_set() and slow.snapshot() == []  # slow is still stuck
    gate.set()
    assert slow.wait_for(n + 1) == fast_events


def test_has_synced_waits_for_handlers_registered_before_start(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher([cm("a", "1"), cm("b", "2")], rv="10")
    inf = SharedInformer(lw)
    gate = threading.Event()
    h = Recorder(gate=gate)
    reg = inf.add_event_handler(h)
    assert not inf.has_synced()
    run(inf)
    assert h.entered.wait(WAIT)
    lw.next_watch()
    assert len(inf.indexer) == 2  # listed into the store ...
    assert not inf.has_synced()  # ... but not yet delivered to the handler
    assert not reg.has_synced()
    assert not wait_for_cache_sync(0.05, inf)
    gate.set()
    synced(inf)
    assert reg.has_synced()
    assert h.wait_for(2)


def test_has_synced_without_handlers_after_first_list(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher([], rv="10")
    inf = SharedInformer(lw)
    assert not inf.has_synced()
    run(inf)
    synced(inf)


def test_wait_for_cache_sync_over_many_informers(run: Callable[..., Running]) -> None:
    lw1, lw2 = FakeListerWatcher([cm("a", "1")], rv="5"), FakeListerWatcher([], rv="7")
    inf1, inf2 = SharedInformer(lw1), SharedInformer(lw2)
    run(inf1)
    assert not wait_for_cache_sync(0.05, inf1, inf2)  # inf2 never runs yet
    stop = threading.Event()
    stop.set()
    assert not wait_for_cache_sync(WAIT, inf2, stop=stop)  # a set stop ends the wait
    run(inf2)
    assert wait_for_cache_sync(WAIT, inf1, inf2)
    assert wait_for_cache_sync(WAIT)  # nothing to wait for


# -- relist --------------------------------------------------------------------------


def test_relist_after_410_delivers_tombstones_updates_and_adds(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher([cm("a", "1"), cm("b", "2"), cm("c", "3")], rv="10")
    inf = SharedInformer(lw)
    h = Recorder()
    inf.add_event_handler(h)
    run(inf)
    w1 = lw.next_watch()
    w1.send("MODIFIED", cm("c", "11"))  # the last state the cache knows of c
    h.wait_for(4)
    # while "disconnected": c deleted, b changed, d created; a unchanged
    lw.set_state([cm("a", "1"), cm("b", "20"), cm("d", "21")], rv="30")
    w1.error(410)
    w2 = lw.next_watch()
    assert [c["resource_version"] for c in lw.list_calls] == ["0", ""]
    assert w2.resource_version == "30"
    events = h.wait_for(8)
    assert sorted(events[4:]) == sorted(
        [
            ("update", "a", "1", "1"),
            ("update", "b", "2", "20"),
            ("add", "d", "21", False),
            ("tombstone", "default/c", "11"),
        ]
    )
    assert sorted(inf.indexer.list_keys()) == ["default/a", "default/b", "default/d"]
    w2.send("ADDED", cm("e", "31"))  # live events continue after the relist
    assert h.wait_for(9)[8] == ("add", "e", "31", False)
    assert len(lw.list_calls) == 2


def test_tombstone_carries_the_whole_last_known_object(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher([cm("a", "1", data={"k": "v"})], rv="10")
    inf = SharedInformer(lw)
    got: list[object] = []
    deleted = threading.Event()

    def on_delete(o: JsonDict | DeletedFinalStateUnknown) -> None:
        got.append(o)
        deleted.set()

    inf.add_event_handler(HandlerFuncs(delete=on_delete))
    run(inf)
    w = lw.next_watch()
    lw.set_state([], rv="20")
    w.error(410)
    assert deleted.wait(WAIT)
    (tomb,) = got
    assert isinstance(tomb, DeletedFinalStateUnknown)
    assert tomb.key == "default/a"
    assert tomb.obj["data"] == {"k": "v"}
    assert tomb.obj["metadata"]["resourceVersion"] == "1"


def test_updates_and_relists_share_what_did_not_change_with_the_cached_object(
    run: Callable[..., Running],
) -> None:
    spec = {"containers": [{"name": "main", "ports": [{"containerPort": 80}]}]}
    lw = FakeListerWatcher([cm("a", "1", spec=spec, status={"phase": "Pending"})], rv="10")
    inf = SharedInformer(lw)
    h = Recorder()
    inf.add_event_handler(h)
    run(inf)
    w = lw.next_watch()
    first = inf.indexer.get_by_key("default/a")
    assert first is not None
    w.send("MODIFIED", cm("a", "11", spec=spec, status={"phase": "Running"}))
    h.wait_for(2)
    second = inf.indexer.get_by_key("default/a")
    assert second is not None and second["status"] == {"phase": "Running"}
    assert second["spec"] is first["spec"]  # unchanged: taken from the cached version
    lw.set_state([cm("a", "1", spec=spec, status={"phase": "Running"})], rv="20")
    w.error(410)  # a relist shares too
    lw.next_watch()
    h.wait_for(3)
    third = inf.indexer.get_by_key("default/a")
    assert third is not None and third is not second
    assert third["spec"] is first["spec"] and third["status"] is second["status"]
    with pytest.raises(TypeError, match="read-only"):
        third["spec"]["containers"][0]["ports"].append({})


# -- resync --------------------------------------------------------------------------


def test_resync_redelivers_every_object_per_handler_period(run: Callable[..., Running]) -> None:
    clock = FakeClock()
    lw = FakeListerWatcher([cm("a", "1"), cm("b", "2")], rv="10")
    inf = SharedInformer(lw, clock=clock)
    off, every5, every10 = Recorder(), Recorder(), Recorder()
    # registration order matters for the barrier below: "off" would be served first
    inf.add_event_handler(off, resync_period=0)
    inf.add_event_handler(every5, resync_period=5.0)
    inf.add_event_handler(every10, resync_period=10.0)
    run(inf, clock)
    synced(inf)
    w = lw.next_watch()
    initial = [("add", "a", "1", True), ("add", "b", "2", True)]

    clock.step(5.0)
    events5 = every5.wait_for(4)
    assert sorted(events5[2:]) == [("update", "a", "1", "1"), ("update", "b", "2", "2")]
    # barrier: a live event after the resync reaches everyone
    w.send("ADDED", cm("c", "11"))
    assert off.wait_for(3) == [*initial, ("add", "c", "11", False)]
    assert every10.wait_for(3) == [*initial, ("add", "c", "11", False)]

    clock.step(5.0)  # t=10: both periodic handlers are due
    assert sorted(every10.wait_for(6)[3:]) == [
        ("update", "a", "1", "1"),
        ("update", "b", "2", "2"),
        ("update", "c", "11", "11"),
    ]
    assert sorted(every5.wait_for(8)[5:]) == [
        ("update", "a", "1", "1"),
        ("update", "b", "2", "2"),
        ("update", "c", "11", "11"),
    ]
    w.send("DELETED", cm("c", "12"))
    assert off.wait_for(4)[3] == ("delete", "c", "12")
    assert len(off.snapshot()) == 4  # period 0: never resynced
    assert every5.wait_for(9)[8] == ("delete", "c", "12")
    assert len(every5.snapshot()) == 9
    assert len(every10.wait_for(7)) == 7


def test_negative_resync_period_is_rejected() -> None:
    inf = SharedInformer(FakeListerWatcher())
    with pytest.raises(ValueError):
        inf.add_event_handler(Recorder(), resync_period=-1)


# -- failures and lifecycle ------------------------------------------------------------


def test_handler_exception_is_logged_and_the_handler_keeps_going(
    run: Callable[..., Running], caplog: pytest.LogCaptureFixture
) -> None:
    lw = FakeListerWatcher([cm("a", "1"), cm("b", "2")], rv="10")
    inf = SharedInformer(lw)
    h = Recorder(fail_on="a")
    inf.add_event_handler(h)
    with caplog.at_level(logging.ERROR, logger="manager.cache.informer"):
        run(inf)
        w = lw.next_watch()
        w.send("MODIFIED", cm("a", "11"))  # fails again
        w.send("ADDED", cm("c", "12"))
        events = h.wait_for(4)
    assert events[2:] == [("update", "a", "1", "11"), ("add", "c", "12", False)]
    synced(inf)  # the failing add still counts as delivered
    failures = [r for r in caplog.records if r.message == "informer event handler raised"]
    assert len(failures) == 2
    assert all(r.exc_info and isinstance(r.exc_info[1], RuntimeError) for r in failures)


def test_default_transform_drops_managed_fields_and_custom_one_applies(
    run: Callable[..., Running],
) -> None:
    def obj(name: str, rv: str) -> JsonDict:
        return cm(name, rv, metadata={"managedFields": [{"manager": "m"}]})

    lw1 = FakeListerWatcher([obj("a", "1")], rv="10")
    lw2 = FakeListerWatcher([obj("a", "1")], rv="10")
    default = SharedInformer(lw1)

    def mark(o: JsonDict) -> JsonDict:
        return {**o, "transformed": True}

    custom = SharedInformer(lw2, transform=mark)
    run(default)
    run(custom)
    synced(default)
    synced(custom)
    lw1.next_watch()
    lw2.next_watch()
    a1 = default.indexer.get_by_key("default/a")
    a2 = custom.indexer.get_by_key("default/a")
    assert a1 is not None and "managedFields" not in a1["metadata"]
    assert a2 is not None and a2["transformed"] is True


def test_indexers_on_the_informer(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher(
        [cm("a", "1", metadata={"labels": {"app": "web"}}), cm("b", "2", "other")], rv="10"
    )
    inf = SharedInformer(lw)
    run(inf)
    synced(inf)
    assert [o["metadata"]["name"] for o in inf.indexer.by_index("namespace", "other")] == ["b"]
    inf.add_indexers({"app": lambda o: [o["metadata"].get("labels", {}).get("app", "")]})
    assert inf.indexer.index_keys("app", "web") == ["default/a"]


def test_run_twice_and_handlers_after_stop_are_errors(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher([], rv="10")
    inf = SharedInformer(lw)
    r = run(inf)
    synced(inf)
    with pytest.raises(RuntimeError):
        inf.run(threading.Event())
    r.shutdown()
    with pytest.raises(RuntimeError):
        inf.add_event_handler(Recorder())


def test_stop_ends_run_promptly_while_the_watch_is_idle(run: Callable[..., Running]) -> None:
    lw = FakeListerWatcher([cm("a", "1")], rv="10")
    inf = SharedInformer(lw)
    h = Recorder()
    inf.add_event_handler(h)
    r = run(inf)
    w = lw.next_watch()  # reflector blocked reading the watch, handler idle
    h.wait_for(1)
    r.stop.set()
    r.thread.join(WAIT)
    assert not r.thread.is_alive()
    assert w.closed.is_set()
