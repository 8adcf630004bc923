"""The plugin-author traps of issue 13, against an API server: a reconciler reads the very
cache whose event woke it (1,000 rapid creates, none missed), ``owns()`` with a
cluster-scoped owner requests the owner by its own scope, and informers and controllers
added while the manager runs are started, synced and read."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from manager.client import ClientOptions, KubeClient
from manager.manager import Manager, ManagerOptions
from manager.reconcile import Request, Result
from manager.resources import builtin
from tests.integration.running import ManagerThread

CONFIGMAPS = builtin("v1", "configmaps")
NAMESPACES = builtin("v1", "namespaces")
SELECTOR = "wiring.overseer.io/team"


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0)) as c:
        yield c


def _manager(client: KubeClient, namespace: str | None) -> Manager:
    return Manager(
        client,
        ManagerOptions(
            name="test-wiring",
            leader_election=False,
            metrics_bind_address="0",
            health_probe_bind_address="127.0.0.1:0",
            namespace=namespace,
        ),
    )


def _eventually(check: Callable[[], object], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _readyz(mgr: Manager) -> int:
    address = mgr.health_probe_address
    if address is None:
        return 0
    try:
        with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/readyz", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


class Seen:
    """Records, per request, whether the cache it reads had the object."""

    def __init__(self, lister: Any) -> None:
        self.lister = lister
        self.lock = threading.Lock()
        self.found: set[Request] = set()
        self.missing: set[Request] = set()

    def reconcile(self, request: Request) -> Result:
        obj = self.lister.get(request.name, request.namespace or None)
        with self.lock:
            (self.found if obj is not None else self.missing).add(request)
        return Result()


def test_a_thousand_rapid_creates_are_all_read_from_the_cache_that_woke_them(
    client: KubeClient, namespace: str
) -> None:
    mgr = _manager(client, namespace)
    # the README pattern: the lister names the same scope as for_()
    seen = Seen(mgr.lister(CONFIGMAPS, label_selector=SELECTOR))
    mgr.controller("wiring", seen, workers=4).for_(CONFIGMAPS, label_selector=SELECTOR).complete()
    assert len(mgr.factory.informers()) == 1  # one cache, not a second unfiltered one
    client.create(CONFIGMAPS, {"metadata": {"name": "unlabelled"}}, namespace)
    running = ManagerThread(mgr)
    try:
        _eventually(lambda: _readyz(mgr) == 200)
        names = [f"cm-{i}" for i in range(1000)]

        def create(name: str) -> None:
            body = {"metadata": {"name": name, "labels": {SELECTOR: "payments"}}}
            client.create(CONFIGMAPS, body, namespace)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, names))
        wanted = {Request(namespace, n) for n in names}
        _eventually(lambda: wanted <= seen.found, 120)
        assert seen.missing == set(), sorted(seen.missing)[:10]
        # the selector keeps the cache to what the controller wants
        [informer] = mgr.factory.informers()
        assert informer.indexer.get_by_key(f"{namespace}/unlabelled") is None
    finally:
        assert running.close() == 0


def test_owns_with_a_cluster_scoped_owner_requests_the_owner_in_its_own_scope(
    client: KubeClient, namespace: str
) -> None:
    mgr = _manager(client, None)
    team = f"wiring-{namespace}"
    client.patch(NAMESPACES, namespace, {"metadata": {"labels": {SELECTOR: team}}})
    seen = Seen(mgr.lister(NAMESPACES, label_selector=f"{SELECTOR}={team}"))
    mgr.controller("namespaces", seen).for_(NAMESPACES, label_selector=f"{SELECTOR}={team}").owns(
        CONFIGMAPS
    ).complete()
    running = ManagerThread(mgr)
    try:
        owner = client.get(NAMESPACES, namespace)
        ref = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "name": namespace,
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
        _eventually(lambda: Request("", namespace) in seen.found)
        with seen.lock:
            seen.found.clear()
        client.create(
            CONFIGMAPS, {"metadata": {"name": "team-info", "ownerReferences": [ref]}}, namespace
        )
        _eventually(lambda: Request("", namespace) in seen.found)
        assert seen.missing == set()
        assert all(r.namespace == "" for r in seen.found | seen.missing)
    finally:
        assert running.close() == 0


def test_informers_and_controllers_added_while_running_start_sync_and_are_read(
    client: KubeClient, namespace: str
) -> None:
    mgr = _manager(client, namespace)
    mgr.controller("first", Seen(mgr.lister(CONFIGMAPS))).for_(CONFIGMAPS).complete()
    for i in range(5):
        client.create(
            CONFIGMAPS, {"metadata": {"name": f"late-{i}", "labels": {"late": "yes"}}}, namespace
        )
    running = ManagerThread(mgr)
    try:
        _eventually(lambda: _readyz(mgr) == 200)
        # a lister (and its informer) asked for after start: started, synced, read
        late = mgr.lister(CONFIGMAPS, label_selector="late=yes")
        assert late.get("late-3", namespace) is not None  # the read waits for the sync
        assert len(late.list(namespace)) == 5
        _eventually(lambda: _readyz(mgr) == 200)
        # a controller wired while running starts at once and sees every cached object
        seen = Seen(mgr.lister(CONFIGMAPS, label_selector="late=yes"))
        mgr.controller("late", seen).for_(CONFIGMAPS, label_selector="late=yes").complete()
        _eventually(lambda: len(seen.found) == 5)
        client.create(
            CONFIGMAPS, {"metadata": {"name": "late-5", "labels": {"late": "yes"}}}, namespace
        )
        _eventually(lambda: Request(namespace, "late-5") in seen.found)
        assert seen.missing == set()
    finally:
        assert running.close() == 0
