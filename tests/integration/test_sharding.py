"""Sharded controllers in managers run as threads against an API server (the local one,
or a real cluster): the keys are shared, each key is reconciled by one replica at a
time, a graceful stop hands its keys over, the shard Leases are what membership is.
The multi-process version with kill -9 and SIGSTOP is ``e2e/test_sharding.py``."""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from manager.client import ClientOptions, KubeClient
from manager.errors import Conflict, NotFound, WriteFenced
from manager.hashring import fnv1a_64
from manager.manager import Manager, ManagerOptions
from manager.reconcile import Request, Result
from manager.resources import builtin
from manager.sharding import APPLIED_ANNOTATION, RING_LABEL, ShardingOptions
from tests.integration.running import ManagerThread

CONFIGMAPS = builtin("v1", "configmaps")
LEASES = builtin("coordination.k8s.io/v1", "leases")
LABEL = "shard-test"


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0)) as c:
        yield c


class Journal:
    """Every reconcile of every replica: (replica, key, start, end), shared by the test."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[str, str, float, float]] = []

    def overlaps(self) -> list[str]:
        by_key: dict[str, list[tuple[float, float, str]]] = {}
        with self.lock:
            for who, key, start, end in self.entries:
                by_key.setdefault(key, []).append((start, end, who))
        bad = []
        for key, spans in by_key.items():
            spans.sort()
            for (s1, e1, w1), (s2, e2, w2) in itertools.pairwise(spans):
                if w1 != w2 and s2 < e1:
                    bad.append(f"{key}: {w1} [{s1:.3f}, {e1:.3f}] and {w2} [{s2:.3f}, {e2:.3f}]")
        return bad


class Marker:
    """Marks each labelled ConfigMap with the replica that reconciled it last."""

    def __init__(self, mgr: Manager, journal: Journal, who: str) -> None:
        self.client = mgr.client
        self.lister = mgr.lister(CONFIGMAPS, label_selector=LABEL, shard="primary")
        self.journal = journal
        self.who = who
        self.fenced = 0

    def reconcile(self, request: Request) -> Result:
        start = time.monotonic()
        try:
            obj = self.lister.get(request.name, request.namespace)
            if obj is None:
                return Result()
            time.sleep(0.01)  # a reconcile takes a while: overlaps would show
            ann = obj["metadata"].get("annotations") or {}
            want = (obj.get("data") or {}).get("tick", "")
            if ann.get("shard/by") == self.who and ann.get("shard/tick") == want:
                return Result()
            patch = {
                "metadata": {
                    "resourceVersion": obj["metadata"]["resourceVersion"],
                    "annotations": {"shard/by": self.who, "shard/tick": want},
                }
            }
            try:
                self.client.patch(CONFIGMAPS, request.name, patch, namespace=request.namespace)
            except Conflict:
                return Result(requeue=True)
            except WriteFenced:
                self.fenced += 1
                raise
            return Result()
        finally:
            with self.journal.lock:
                self.journal.entries.append((self.who, request.key, start, time.monotonic()))


def _options(namespace: str, ring: str) -> ManagerOptions:
    return ManagerOptions(
        name="test-sharding",
        leader_election=False,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        namespace=namespace,
        graceful_shutdown_timeout=10.0,
        sharding=ShardingOptions(
            ring_name=ring,
            namespace=namespace,
            lease_duration=2.0,
            renew_deadline=1.5,
            retry_period=0.3,
            drain_timeout=5.0,
        ),
    )


class Replica:
    def __init__(self, client: KubeClient, namespace: str, ring: str, journal: Journal) -> None:
        self.mgr = Manager(client, _options(namespace, ring))
        self.who = self.mgr.identity
        self.marker = Marker(self.mgr, journal, self.who)
        self.mgr.controller("marker", self.marker, workers=2, sharded=True).for_(
            CONFIGMAPS, label_selector=LABEL
        ).complete()
        self.running = ManagerThread(self.mgr)

    def close(self) -> int | None:
        return self.running.close()


def _eventually(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _marks(client: KubeClient, namespace: str) -> dict[str, str]:
    items = client.list(CONFIGMAPS, namespace, label_selector=LABEL)["items"]
    return {
        i["metadata"]["name"]: (i["metadata"].get("annotations") or {}).get("shard/by", "")
        for i in items
    }


def _all_ticked(client: KubeClient, namespace: str, tick: str) -> bool:
    items = client.list(CONFIGMAPS, namespace, label_selector=LABEL)["items"]
    return all(
        (i["metadata"].get("annotations") or {}).get("shard/tick") == tick for i in items
    ) and bool(items)


def test_two_replicas_share_the_keys_and_a_graceful_stop_hands_them_over(
    client: KubeClient, namespace: str
) -> None:
    ring = f"t{uuid.uuid4().hex[:6]}"
    journal = Journal()
    for i in range(60):
        body = {"metadata": {"name": f"k-{i}", "labels": {LABEL: "yes"}}, "data": {"tick": "1"}}
        client.create(CONFIGMAPS, body, namespace)
    a = Replica(client, namespace, ring, journal)
    b = Replica(client, namespace, ring, journal)
    closed: list[Replica] = []
    try:
        _eventually(lambda: _all_ticked(client, namespace, "1"))
        # both joined: new work is shared (the first may have done all of tick 1 alone)
        leases = client.list(LEASES, namespace, label_selector=f"{RING_LABEL}={ring}")["items"]
        assert len(leases) == 2
        for i in range(60):
            client.patch(CONFIGMAPS, f"k-{i}", {"data": {"tick": "2"}}, namespace=namespace)
        _eventually(lambda: _all_ticked(client, namespace, "2"))
        shares = {
            who: list(_marks(client, namespace).values()).count(who) for who in (a.who, b.who)
        }
        assert all(n >= 15 for n in shares.values()), shares
        published = {
            (lease["metadata"].get("annotations") or {}).get(APPLIED_ANNOTATION) for lease in leases
        }
        assert len(published) == 1 and None not in published  # both applied the same ring

        # a graceful stop: its keys move to the other replica, which then does everything
        assert a.close() == 0
        closed.append(a)
        for i in range(60):
            client.patch(CONFIGMAPS, f"k-{i}", {"data": {"tick": "3"}}, namespace=namespace)
        _eventually(lambda: _all_ticked(client, namespace, "3"))
        assert set(_marks(client, namespace).values()) == {b.who}
        released = client.get(LEASES, a.mgr.shards.lease_name, namespace)  # type: ignore[union-attr]
        assert (released["spec"].get("holderIdentity") or "") == ""
        assert journal.overlaps() == []
        assert a.marker.fenced == 0 and b.marker.fenced == 0
    finally:
        for r in (a, b):
            if r not in closed:
                r.close()
        for lease in client.list(LEASES, namespace, label_selector=f"{RING_LABEL}={ring}")["items"]:
            with contextlib.suppress(NotFound):
                client.delete(LEASES, lease["metadata"]["name"], namespace)


def test_podport_sharded_on_two_replicas_gives_every_pod_one_address(
    kubeconfig_path: str, client: KubeClient, namespace: str
) -> None:
    """The pod port creator's allocation shards: two replicas each allocate for their
    pods; an address is never held twice (LogicalPorts are named after it)."""
    from controllers.podport import PodPortPlugin
    from controllers.podport.crd import LOGICAL_PORTS
    from manager.testing import eventually, run_manager

    ring = f"t{uuid.uuid4().hex[:6]}"
    network = f"net{uuid.uuid4().hex[:6]}"
    config = {
        "watchNamespace": namespace,
        "sharding": {
            "ringName": ring,
            "namespace": namespace,
            "leaseDuration": 2.0,
            "renewDeadline": 1.5,
            "retryPeriod": 0.3,
        },
        "controllers": {
            "podport": {
                "sharded": True,
                "workers": 2,
                "installCrd": True,
                "networks": [{"name": network, "cidr": "10.254.0.0/24"}],
                "defaultNetwork": network,
            }
        },
    }

    pods = builtin("v1", "pods")
    with (
        run_manager(kubeconfig_path, {"podport": PodPortPlugin}, config) as first,
        run_manager(kubeconfig_path, {"podport": PodPortPlugin}, config) as second,
    ):
        shards = [m.manager.shards for m in (first, second)]
        assert all(s is not None for s in shards)
        eventually(lambda: all(s.ready_reason() is None for s in shards if s is not None))
        names = [f"p-{i}" for i in range(40)]
        for name in names:
            body = {
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            }
            client.create(pods, body, namespace)

        def allocated() -> list[str]:
            mine = [
                p["spec"]["ip"]
                for p in client.list(LOGICAL_PORTS)["items"]
                if p["spec"].get("network") == network
            ]
            assert len(mine) == len(names), len(mine)
            return mine

        addresses = eventually(allocated, timeout=60)
        assert len(set(addresses)) == len(names)
        uids = [p["metadata"]["uid"] for p in client.list(pods, namespace)["items"]]
        owners = {
            s.lease_name: sum(s.owns(fnv1a_64(uid)) for uid in uids)
            for s in shards
            if s is not None
        }
        assert all(n > 0 for n in owners.values()), owners  # both had pods to allocate for
    for port in client.list(LOGICAL_PORTS)["items"]:
        if port["spec"].get("network") == network:
            client.delete(LOGICAL_PORTS, port["metadata"]["name"])
