"""Objects from the cache are read-only, whoever holds them: a lister's answer, what an
event handler and a predicate receive, what a reconcile reads. Changing one raises a
TypeError saying to copy; in a reconcile that is an error like any other (logged with its
traceback, retried with backoff), and the copy it then writes reaches the cache by watch.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from manager import Funcs, JsonDict, Manager, ManagerOptions, Request, Result, thaw
from manager.cache.informer import HandlerFuncs, SharedInformer, wait_for_cache_sync
from manager.cache.lister import Lister
from manager.cache.listwatch import ResourceListWatch
from manager.client import ClientOptions, KubeClient
from manager.keys import DeletedFinalStateUnknown
from manager.resources import builtin

CM = builtin("v1", "configmaps")
WAIT = 20.0  # real seconds: an upper bound for arrival over HTTP
LABELS = {"overseer-test": "read-only"}
SELECTOR = "overseer-test=read-only"


@pytest.fixture
def kube(kubeconfig_path: str) -> Iterator[KubeClient]:
    client = KubeClient.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0))
    try:
        yield client
    finally:
        client.close()


def _cm(name: str) -> JsonDict:
    return {"metadata": {"name": name, "labels": dict(LABELS)}, "data": {"k": "v"}}


def _try_changes(obj: JsonDict) -> list[str]:
    """Every change to ``obj`` that went through (none should)."""
    attempts: list[tuple[str, Callable[[], object]]] = [
        ("label", lambda: obj["metadata"]["labels"].__setitem__("x", "y")),
        ("annotations", lambda: obj["metadata"].setdefault("annotations", {})),
        ("data", lambda: obj["data"].update(k="changed")),
        ("managedFields", lambda: obj["metadata"].__setitem__("managedFields", [])),
        ("top", lambda: obj.pop("data", None)),
    ]
    went_through = []
    for name, attempt in attempts:
        try:
            attempt()
        except TypeError as exc:
            if "read-only" not in str(exc) or "copy.deepcopy(obj)" not in str(exc):
                went_through.append(f"{name}: {exc}")
        except Exception as exc:  # a change before this one broke the object
            went_through.append(f"{name}: {exc!r}")
        else:
            went_through.append(name)
    return went_through


class Probe:
    """An event handler that tries to change every object it receives."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.seen: list[str] = []
        self.changed: list[tuple[str, str, list[str]]] = []

    def _probe(self, kind: str, obj: JsonDict) -> None:
        went_through = _try_changes(obj)
        with self.cond:
            self.seen.append(f"{kind}:{obj['metadata']['name']}")
            if went_through:
                self.changed.append((kind, obj["metadata"]["name"], went_through))
            self.cond.notify_all()

    def handler(self) -> HandlerFuncs:
        def delete(obj: JsonDict | DeletedFinalStateUnknown) -> None:
            self._probe("delete", obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)

        return HandlerFuncs(
            add=lambda o: self._probe("add", o),
            update=lambda old, new: (self._probe("update-old", old), self._probe("update", new)),
            delete=delete,
        )

    def wait_for(self, entry: str) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: entry in self.seen, WAIT), (entry, self.seen)


def test_listers_and_event_handlers_get_objects_that_cannot_change(
    kube: KubeClient, namespace: str
) -> None:
    kube.create(CM, _cm("listed"), namespace)
    informer = SharedInformer(
        ResourceListWatch(kube, CM, namespace=namespace, label_selector=SELECTOR)
    )
    probe = Probe()
    informer.add_event_handler(probe.handler())
    lister = Lister(informer.indexer, CM, informer=informer)
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), name="test-informer")
    thread.start()
    try:
        assert wait_for_cache_sync(WAIT, informer)
        probe.wait_for("add:listed")  # from the list
        kube.create(CM, _cm("watched"), namespace)
        probe.wait_for("add:watched")  # from a watch event
        current = kube.get(CM, "watched", namespace)
        current["data"] = {"k": "new"}
        kube.replace(CM, current, namespace)
        probe.wait_for("update:watched")
        kube.delete(CM, "listed", namespace)
        probe.wait_for("delete:listed")

        obj = lister.get("watched", namespace)
        assert obj is not None
        assert _try_changes(obj) == []
        [listed] = lister.list(namespace, label_selector=LABELS)
        assert listed is obj  # the cached object itself, no copy per read
        assert probe.changed == []

        # what nothing could change is still what the server has
        assert obj["metadata"]["labels"] == LABELS and obj["data"] == {"k": "new"}
        assert (
            obj["metadata"]["resourceVersion"]
            == kube.get(CM, "watched", namespace)["metadata"]["resourceVersion"]
        )
        # copies are free to change, and change nothing in the cache
        for mine in (copy.deepcopy(obj), thaw(obj)):
            mine["metadata"]["labels"]["x"] = "y"
            mine["data"]["k"] = "mine"
        assert lister.get("watched", namespace) == obj
        assert obj["metadata"]["labels"] == LABELS and obj["data"] == {"k": "new"}
    finally:
        stop.set()
        thread.join(WAIT)
    assert not thread.is_alive()


def _options(namespace: str) -> ManagerOptions:
    return ManagerOptions(
        name="test-read-only",
        metrics_bind_address="0",
        health_probe_bind_address="0",
        leader_election=False,
        namespace=namespace,
        graceful_shutdown_timeout=10.0,
    )


def test_a_reconcile_that_changes_a_cached_object_fails_is_retried_and_can_write_a_copy(
    kube: KubeClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="manager.controller")
    mgr = Manager(kube, _options(namespace))
    # the cache for_() fills (same scope): a reconcile never reads one behind its event
    lister = mgr.lister(CM, label_selector=SELECTOR)
    lock = threading.Lock()
    predicate_changes: list[list[str]] = []
    attempts: list[str] = []
    done = threading.Event()

    def on_create(obj: JsonDict) -> bool:
        went_through = _try_changes(obj)
        with lock:
            predicate_changes.append(went_through)
        return obj["metadata"].get("labels") == LABELS

    class Labeller:
        def reconcile(self, request: Request) -> Result:
            obj = lister.get(request.name, request.namespace)
            if obj is None or obj["metadata"]["labels"].get("done") == "yes":
                if obj is not None:
                    done.set()
                return Result()
            with lock:
                attempts.append(request.name)
                first = len(attempts) == 1
            if first:
                obj["metadata"]["labels"]["done"] = "yes"  # the mistake: raises
            body = thaw(obj)
            body["metadata"]["labels"]["done"] = "yes"
            kube.replace(CM, body, request.namespace)
            return Result()

    mgr.controller("labeller", Labeller()).for_(
        CM, Funcs(on_create=on_create), label_selector=SELECTOR
    ).complete()
    kube.create(CM, _cm("target"), namespace)
    stop = threading.Event()
    rc: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: rc.setdefault("rc", mgr.run(stop)), name="test-mgr")
    thread.start()
    try:
        assert done.wait(WAIT), attempts
    finally:
        stop.set()
        thread.join(WAIT)
    assert not thread.is_alive() and rc.get("rc") == 0
    assert attempts == ["target", "target"]  # failed once, retried, then wrote a copy
    assert predicate_changes and all(went_through == [] for went_through in predicate_changes)
    failures = [
        r for r in caplog.records if r.getMessage() == "reconcile failed, requeued with backoff"
    ]
    assert len(failures) == 1
    assert failures[0].exc_info is not None
    exc = failures[0].exc_info[1]
    assert isinstance(exc, TypeError) and "read-only" in str(exc)
    assert kube.get(CM, "target", namespace)["metadata"]["labels"] == {**LABELS, "done": "yes"}
