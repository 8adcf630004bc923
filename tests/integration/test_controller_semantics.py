"""What a plugin's reconcile is woken by and finds, against an API server (README, "Write
your own controller", "Semantics, precisely"; issue 32, item 3's "anything else"):

* a watch's label selector is the API server's: an object that stops matching (its
  label removed) arrives as a *delete* carrying its previous state, one that matches
  again as a *create*; the reconcile finds nothing in the cache, as for a deleted one;
* a request whose object was deleted before a worker took it is still reconciled, once
  for all the events that came meanwhile, and finds nothing;
* predicates run on the informer's handler thread, reconciles on the controller's
  workers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from manager.client import ClientOptions, KubeClient
from manager.keys import JsonDict
from manager.manager import Manager, ManagerOptions
from manager.predicate import Funcs
from manager.reconcile import Request, Result
from manager.resources import builtin
from tests.integration.running import ManagerThread

CONFIGMAPS = builtin("v1", "configmaps")
LABEL = "semantics.overseer.io/selected"
SELECTOR = f"{LABEL}=yes"
WAIT = 30.0  # seconds: an upper bound, never an expected duration


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0)) as c:
        yield c


class Recorder:
    """Every event its predicate is asked about, every reconcile and what the cache
    held for it; the reconcile of "gate" holds its worker until ``release``."""

    def __init__(self, mgr: Manager) -> None:
        self.lister = mgr.lister(CONFIGMAPS, label_selector=SELECTOR)
        self.cond = threading.Condition()
        self.events: list[tuple[str, str, dict[str, str], str]] = []  # kind, name, labels, thread
        self.reconciles: list[tuple[str, bool, str]] = []  # name, found, thread
        self.holding = threading.Event()
        self.release = threading.Event()

    def _saw(self, kind: str, obj: JsonDict) -> bool:
        meta = obj["metadata"]
        with self.cond:
            entry = (kind, meta["name"], dict(meta.get("labels") or {}))
            self.events.append((*entry, threading.current_thread().name))
            self.cond.notify_all()
        return True

    def predicate(self) -> Funcs:
        return Funcs(
            on_create=lambda obj: self._saw("create", obj),
            on_update=lambda old, new: self._saw("update", new),
            on_delete=lambda obj: self._saw("delete", obj),
        )

    def reconcile(self, request: Request) -> Result:
        if request.name == "gate":
            self.holding.set()
            assert self.release.wait(WAIT)
        found = self.lister.get(request.name, request.namespace) is not None
        with self.cond:
            self.reconciles.append((request.name, found, threading.current_thread().name))
            self.cond.notify_all()
        return Result()

    def wait(self, what: str, check: Callable[[], bool]) -> None:
        with self.cond:
            assert self.cond.wait_for(check, WAIT), f"timed out waiting for {what}"

    def events_of(self, name: str) -> list[tuple[str, dict[str, str]]]:
        with self.cond:
            return [(kind, labels) for kind, n, labels, _ in self.events if n == name]

    def reconciles_of(self, name: str) -> list[bool]:
        with self.cond:
            return [found for n, found, _ in self.reconciles if n == name]


@pytest.fixture
def running(client: KubeClient, namespace: str) -> Iterator[Recorder]:
    mgr = Manager(
        client,
        ManagerOptions(
            name="test-semantics",
            leader_election=False,
            metrics_bind_address="0",
            health_probe_bind_address="0",
            namespace=namespace,
        ),
    )
    recorder = Recorder(mgr)
    mgr.controller("semantics", recorder, workers=1).for_(
        CONFIGMAPS, recorder.predicate(), label_selector=SELECTOR
    ).complete()
    thread = ManagerThread(mgr)
    try:
        yield recorder
    finally:
        assert thread.close(recorder.release) == 0


def _labelled(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {LABEL: "yes"}}}


def test_a_label_removed_is_a_delete_and_a_label_added_a_create(
    client: KubeClient, namespace: str, running: Recorder
) -> None:
    client.create(CONFIGMAPS, _labelled("b"), namespace)
    running.wait("b reconciled", lambda: running.reconciles_of("b") == [True])

    client.patch(CONFIGMAPS, "b", {"metadata": {"labels": {LABEL: None}}}, namespace=namespace)
    running.wait("b reconciled again", lambda: len(running.reconciles_of("b")) == 2)
    client.patch(CONFIGMAPS, "b", {"metadata": {"labels": {LABEL: "yes"}}}, namespace=namespace)
    running.wait("b reconciled a third time", lambda: len(running.reconciles_of("b")) == 3)

    # unlabelled: a delete of its last state that matched; the cache no longer has it
    assert running.events_of("b") == [
        ("create", {LABEL: "yes"}),
        ("delete", {LABEL: "yes"}),
        ("create", {LABEL: "yes"}),
    ]
    assert running.reconciles_of("b") == [True, False, True]


def test_an_object_deleted_before_its_reconcile_is_reconciled_once_and_not_found(
    client: KubeClient, namespace: str, running: Recorder
) -> None:
    client.create(CONFIGMAPS, _labelled("gate"), namespace)
    assert running.holding.wait(WAIT), "the gate's reconcile did not start"
    # the only worker is busy: "a" is created and deleted while its request waits
    client.create(CONFIGMAPS, _labelled("a"), namespace)
    client.delete(CONFIGMAPS, "a", namespace)
    running.wait(
        "a's delete", lambda: [k for k, _ in running.events_of("a")] == ["create", "delete"]
    )
    running.release.set()
    client.create(CONFIGMAPS, _labelled("last"), namespace)
    running.wait("last reconciled", lambda: running.reconciles_of("last") == [True])

    assert running.reconciles_of("a") == [False]  # two events, one reconcile, nothing cached
    with running.cond:
        predicate_threads = {thread for *_, thread in running.events}
        worker_threads = {thread for *_, thread in running.reconciles}
    assert all(t.startswith("handler/") for t in predicate_threads), predicate_threads
    assert worker_threads == {"worker/semantics/0"}
