"""The shared informer against a real HTTP API server: KubeClient + ResourceListWatch +
SharedInformer on configmaps in the test namespace. Events arrive, the cache converges
to a fresh LIST, a dropped watch resumes without a relist, a compacted resourceVersion
costs exactly one relist (with tombstones), and failing LISTs at start do not prevent sync.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from manager.cache.informer import SharedInformer, wait_for_cache_sync
from manager.cache.listwatch import ResourceListWatch
from manager.client import ClientOptions, KubeClient
from manager.keys import DeletedFinalStateUnknown, JsonDict
from manager.resources import builtin

CM = builtin("v1", "configmaps")
WAIT = 20.0  # real seconds: an upper bound for arrival over HTTP
# The namespace holds objects of its own (kube-root-ca.crt): watch only ours.
LABELS = {"overseer-test": "informer"}
SELECTOR = "overseer-test=informer"


class Recorder:
    """Records every notification and keeps the handler's view of name -> rv."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.events: list[tuple[Any, ...]] = []
        self.view: dict[str, str] = {}

    def on_add(self, obj: JsonDict, is_in_initial_list: bool) -> None:
        meta = obj["metadata"]
        with self.cond:
            self.events.append(("add", meta["name"], meta["resourceVersion"], is_in_initial_list))
            self.view[meta["name"]] = meta["resourceVersion"]
            self.cond.notify_all()

    def on_update(self, old: JsonDict, new: JsonDict) -> None:
        name = new["metadata"]["name"]
        with self.cond:
            self.events.append(
                (
                    "update",
                    name,
                    old["metadata"]["resourceVersion"],
                    new["metadata"]["resourceVersion"],
                )
            )
            self.view[name] = new["metadata"]["resourceVersion"]
            self.cond.notify_all()

    def on_delete(self, obj: JsonDict | DeletedFinalStateUnknown) -> None:
        with self.cond:
            if isinstance(obj, DeletedFinalStateUnknown):
                meta = obj.obj["metadata"]
                self.events.append(("tombstone", meta["name"], meta["resourceVersion"]))
            else:
                meta = obj["metadata"]
                self.events.append(("delete", meta["name"], meta["resourceVersion"]))
            self.view.pop(meta["name"], None)
            self.cond.notify_all()

    def mark(self) -> int:
        with self.cond:
            return len(self.events)

    def since(self, mark: int) -> list[tuple[Any, ...]]:
        with self.cond:
            return list(self.events[mark:])

    def wait(self, predicate: Callable[[], bool], what: str) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, WAIT), f"timed out waiting for {what}"


class Running:
    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.informer = SharedInformer(
            ResourceListWatch(kube, CM, namespace=namespace, label_selector=SELECTOR)
        )
        self.handler = Recorder()
        self.informer.add_event_handler(self.handler)
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self.informer.run, args=(self.stop,), name="test-informer"
        )

    def start(self) -> Running:
        self.thread.start()
        assert wait_for_cache_sync(WAIT, self.informer), "informer did not sync"
        return self

    def shutdown(self) -> None:
        self.stop.set()
        if self.thread.ident is not None:
            self.thread.join(WAIT)
        assert not self.thread.is_alive(), "informer did not stop"

    def store(self) -> dict[str, str]:
        return {
            o["metadata"]["name"]: o["metadata"]["resourceVersion"]
            for o in self.informer.indexer.list()
        }

    def converge(self, expected: dict[str, str]) -> None:
        """Wait until both the cache and the handler's view equal ``expected``."""
        self.handler.wait(
            lambda: self.store() == expected and self.handler.view == expected,
            f"cache == {expected}",
        )


@pytest.fixture
def kube(kubeconfig_path: str) -> Iterator[KubeClient]:
    client = KubeClient.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def informer(kube: KubeClient, namespace: str) -> Iterator[Running]:
    r = Running(kube, namespace)
    yield r
    r.shutdown()


def fresh_list(kube: KubeClient, namespace: str) -> dict[str, str]:
    items = kube.list(CM, namespace, label_selector=SELECTOR)["items"]
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in items}


def create(kube: KubeClient, namespace: str, name: str, value: str = "0") -> str:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": LABELS},
        "data": {"v": value},
    }
    return str(kube.create(CM, body, namespace)["metadata"]["resourceVersion"])


def update(kube: KubeClient, namespace: str, name: str, value: str) -> str:
    patched = kube.patch(CM, name, {"data": {"v": value}}, namespace=namespace)
    return str(patched["metadata"]["resourceVersion"])


def test_events_arrive_and_cache_equals_a_fresh_list(
    kube: KubeClient, namespace: str, informer: Running
) -> None:
    expected = {n: create(kube, namespace, n) for n in ("a", "b", "c")}
    informer.start()
    assert informer.store() == expected  # the first list
    assert sorted(informer.handler.since(0)) == sorted(
        ("add", n, rv, True) for n, rv in expected.items()
    )

    mark = informer.handler.mark()
    expected["d"] = create(kube, namespace, "d")
    old_a = expected["a"]
    expected["a"] = update(kube, namespace, "a", "1")
    kube.delete(CM, "b", namespace)
    del expected["b"]
    informer.converge(expected)
    events = informer.handler.since(mark)
    assert events[0] == ("add", "d", expected["d"], False)
    assert events[1] == ("update", "a", old_a, expected["a"])
    assert events[2][:2] == ("delete", "b")
    assert len(events) == 3

    rng = random.Random(20240607)  # a fixed random sequence: reproducible
    names = [f"cm-{i}" for i in range(12)]
    for step in range(80):
        name = rng.choice(names)
        if name not in expected:
            expected[name] = create(kube, namespace, name, str(step))
        elif rng.random() < 0.6:
            expected[name] = update(kube, namespace, name, str(step))
        else:
            kube.delete(CM, name, namespace)
            del expected[name]
    informer.converge(expected)
    assert fresh_list(kube, namespace) == expected == informer.store()
    assert not any(e[0] == "tombstone" for e in informer.handler.since(0))


@pytest.mark.local_only
def test_dropped_watch_resumes_without_a_relist(
    kube: KubeClient, namespace: str, informer: Running, local_server: Any
) -> None:
    expected = {n: create(kube, namespace, n) for n in ("a", "b")}
    informer.start()
    expected["warm"] = create(kube, namespace, "warm")
    informer.converge(expected)  # the watch is open and delivering
    lists = local_server.request_count(verb="list", resource="configmaps")
    watches = local_server.request_count(verb="watch", resource="configmaps")
    mark = informer.handler.mark()

    assert local_server.faults.drop_watches() >= 1
    # changes made while the watch is (probably) down arrive via the re-watch
    expected["x"] = create(kube, namespace, "x")
    expected["a"] = update(kube, namespace, "a", "1")
    kube.delete(CM, "b", namespace)
    del expected["b"]
    informer.converge(expected)
    assert local_server.request_count(verb="watch", resource="configmaps") > watches
    assert local_server.request_count(verb="list", resource="configmaps") == lists

    expected["y"] = create(kube, namespace, "y")  # and later changes too
    informer.converge(expected)
    assert local_server.request_count(verb="list", resource="configmaps") == lists
    events = informer.handler.since(mark)
    assert [e[:2] for e in events] == [("add", "x"), ("update", "a"), ("delete", "b"), ("add", "y")]
    assert fresh_list(kube, namespace) == expected


@pytest.mark.local_only
def test_compacted_watch_relists_once_with_tombstones(
    kube: KubeClient, namespace: str, informer: Running, local_server: Any
) -> None:
    expected = {n: create(kube, namespace, n) for n in ("keep", "gone1", "gone2", "changed")}
    informer.start()
    expected["warm"] = create(kube, namespace, "warm")
    informer.converge(expected)
    last_known = dict(expected)
    lists = local_server.request_count(verb="list", resource="configmaps")
    mark = informer.handler.mark()

    # Keep the informer away until the history it needs is compacted away.
    local_server.faults.fail_next(1000, 403, verb="watch", resource="configmaps")
    assert local_server.faults.drop_watches() >= 1
    for name in ("gone1", "gone2"):
        kube.delete(CM, name, namespace)
        del expected[name]
    expected["changed"] = update(kube, namespace, "changed", "1")
    expected["new"] = create(kube, namespace, "new")
    local_server.compact()
    local_server.faults.clear()

    informer.converge(expected)
    assert local_server.request_count(verb="list", resource="configmaps") == lists + 1
    events = informer.handler.since(mark)
    assert sorted(e for e in events if e[0] == "tombstone") == [
        ("tombstone", "gone1", last_known["gone1"]),
        ("tombstone", "gone2", last_known["gone2"]),
    ]
    assert ("update", "changed", last_known["changed"], expected["changed"]) in events
    assert ("add", "new", expected["new"], False) in events
    assert not any(e[0] == "delete" for e in events)

    expected["after"] = create(kube, namespace, "after")  # watching again, no more lists
    informer.converge(expected)
    assert local_server.request_count(verb="list", resource="configmaps") == lists + 1
    assert fresh_list(kube, namespace) == expected == informer.store()


@pytest.mark.local_only
def test_failing_lists_at_start_still_sync(
    kube: KubeClient, namespace: str, informer: Running, local_server: Any
) -> None:
    expected = {n: create(kube, namespace, n) for n in ("a", "b")}
    lists = local_server.request_count(verb="list", resource="configmaps")
    local_server.faults.fail_next(2, 500, verb="list", resource="configmaps")
    informer.start()
    assert informer.store() == expected
    assert local_server.request_count(verb="list", resource="configmaps") == lists + 3
    expected["c"] = create(kube, namespace, "c")
    informer.converge(expected)
    assert fresh_list(kube, namespace) == expected


def test_stop_ends_the_informer_promptly_while_its_watch_is_idle(
    kube: KubeClient, namespace: str
) -> None:
    r = Running(kube, namespace).start()
    name = f"idle-{uuid.uuid4().hex[:6]}"
    rv = create(kube, namespace, name)
    r.converge({name: rv})  # the watch is open; now it idles in a blocking read
    r.stop.set()
    r.thread.join(5.0)  # far less than the watch's 5-10 minute timeout
    assert not r.thread.is_alive()
