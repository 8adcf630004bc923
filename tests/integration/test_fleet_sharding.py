"""A fleet sharded by cluster (issue 35): the shard ring's unit is the cluster, each
replica engages the clusters it owns, and a ring change hands a cluster over with the
drain and fence of a key — the old owner stops writing to it before the new one starts.

The shard Leases live in the home cluster (this suite's API server: the local one or the
real cluster of ``OVERSEER_TEST_KUBECONFIG``); the member is a local API server reached
under two cluster names, so that the ring can give one to each replica.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any

import pytest

from manager import Cluster, KubeClient, Manager, Request, Result, WriteFenced, builtin
from manager.fleet import FleetOptions, KubeconfigFile
from manager.fleet.sharded import ClusterShards, cluster_hash
from manager.hashring import RingParameters, SlotRing
from manager.manager import ManagerOptions
from manager.sharding import ShardingOptions, shard_lease_name
from manager.testing import eventually
from tests.integration.running import ManagerThread

CONFIGMAPS = builtin("v1", "configmaps")
LABEL = "fleet-shard-test"
BY = "fleet.overseer.io/by"
# test-only switch: the break-check (the cluster's fence without its ownership: only the
# shard Lease's validity); with it this test must fail
OWNERSHIP_FENCE_OFF = os.environ.get("OVERSEER_TEST_CLUSTER_FENCE_OFF") == "1"


class Journal:
    """Every write a replica's reconcilers sent to a cluster: who, which cluster, when it
    was sent and answered (one process, one monotonic clock), and how it ended."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.writes: list[tuple[str, str, float, float, str]] = []

    def add(self, who: str, cluster: str, sent: float, outcome: str) -> None:
        with self.lock:
            self.writes.append((who, cluster, sent, time.monotonic(), outcome))

    def of(self, who: str, cluster: str, outcome: str = "written") -> list[tuple[float, float]]:
        with self.lock:
            return [(s, e) for w, c, s, e, o in self.writes if (w, c, o) == (who, cluster, outcome)]


class Writer:
    """One cluster's reconciler on one replica: stamps the ConfigMaps named after its
    cluster with the replica's name; the first reconcile of ``<cluster>-hold`` of the
    cluster the replica holds (``holds``) waits for the test before it writes."""

    def __init__(self, cluster: Cluster, replica: Replica) -> None:
        self.cluster = cluster
        self.replica = replica

    def reconcile(self, request: Request) -> Result:
        name, replica = self.cluster.name, self.replica
        if not request.name.startswith(f"{name}-"):
            return Result()  # another cluster name's object (one server behind both)
        if (
            name == replica.holds
            and request.name == f"{name}-hold"
            and not replica.entered.is_set()
        ):
            replica.entered.set()
            replica.release.wait(30)
        sent = time.monotonic()
        try:
            self.cluster.client.patch(
                CONFIGMAPS,
                request.name,
                {"metadata": {"annotations": {BY: replica.who}}},
                namespace=request.namespace,
            )
        except WriteFenced as exc:
            replica.journal.add(replica.who, name, sent, f"fenced: {exc.reason}")
            raise
        replica.journal.add(replica.who, name, sent, "written")
        return Result()


class Replica:
    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        ring: str,
        who: str,
        *,
        clusters: tuple[KubeconfigFile, ...],
        journal: Journal,
        holds: str = "",
    ) -> None:
        self.who = who
        self.journal = journal
        self.holds = holds
        self.entered = threading.Event()
        self.release = threading.Event()
        self.mgr = Manager(
            client,
            ManagerOptions(
                name="test-fleet-sharding",
                identity=who,
                leader_election=False,
                metrics_bind_address="0",
                health_probe_bind_address="0",
                graceful_shutdown_timeout=10.0,
                sharding=ShardingOptions(
                    ring_name=ring,
                    namespace=namespace,
                    lease_duration=2.0,
                    renew_deadline=1.5,
                    retry_period=0.3,
                    drain_timeout=0.5,
                ),
                fleet=FleetOptions(kubeconfigs=clusters),
            ),
        )
        self.mgr.controller(
            "writer", lambda cluster: Writer(cluster, self), workers=2, fleet=True, sharded=True
        ).for_(CONFIGMAPS, label_selector=f"{LABEL}=yes").complete()
        self.running = ManagerThread(self.mgr)

    def held(self) -> list[str]:
        policy = self.mgr.fleet.policy
        assert isinstance(policy, ClusterShards)
        return policy.held()

    def close(self) -> int | None:
        return self.running.close(self.release)


def _names(ring: str, a: str, b: str) -> tuple[str, str]:
    """Two cluster names the ring of {a, b} places one on each: the one it gives b (it
    moves when b joins) and the one it gives a (it stays)."""
    pair = ("c0", "c1")
    placed = RingParameters(units=tuple(cluster_hash(n) for n in pair))
    both = SlotRing((shard_lease_name(ring, a), shard_lease_name(ring, b)), placed)
    owners = {n: both.owner_of(cluster_hash(n)) for n in pair}
    moving = next(n for n, o in owners.items() if o == shard_lease_name(ring, b))
    staying = next(n for n, o in owners.items() if o == shard_lease_name(ring, a))
    return moving, staying


def test_a_ring_change_hands_a_cluster_over_without_overlap(
    kubeconfig_path: str, namespace: str, local_servers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replica a engages both clusters alone; b joins and the ring gives it one of them.
    a's reconcile of that cluster is held past the drain timeout: the ring moves anyway,
    b engages the cluster and writes, and a's held write is then refused by the cluster's
    fence (a's ring no longer gives it the cluster). Every write a made to the moved
    cluster was answered before b sent its first one. With the ownership part of the fence
    off (``OVERSEER_TEST_CLUSTER_FENCE_OFF=1``, test-only) a's late write lands and this
    test fails."""
    if OWNERSHIP_FENCE_OFF:
        from manager.sharding import ShardRing

        monkeypatch.setattr(ShardRing, "_key_valid_for", lambda self, h: self._elector.valid_for())
    ring = f"f{uuid.uuid4().hex[:6]}"
    a_name, b_name = f"{ring}-a", f"{ring}-b"
    moving, staying = _names(ring, a_name, b_name)
    (member,) = local_servers(1)
    clusters = tuple(
        KubeconfigFile(name=n, path=str(member.kubeconfig_path)) for n in (moving, staying)
    )
    with KubeClient.from_kubeconfig(member.kubeconfig_path) as admin:
        for cluster in (moving, staying):
            for suffix in ("hold", "x"):
                body = {"metadata": {"name": f"{cluster}-{suffix}", "labels": {LABEL: "yes"}}}
                admin.create(CONFIGMAPS, body, "default")

        def by(name: str) -> str | None:
            got = admin.get(CONFIGMAPS, name, "default")
            return (got["metadata"].get("annotations") or {}).get(BY)

        journal = Journal()
        client = KubeClient.from_kubeconfig(kubeconfig_path)
        a = Replica(
            client, namespace, ring, a_name, clusters=clusters, journal=journal, holds=moving
        )
        b: Replica | None = None
        try:
            # a alone: both clusters are its; its reconcile of moving-hold waits
            assert a.entered.wait(20), "replica a never reconciled the moving cluster"
            eventually(lambda: by(f"{staying}-hold") == a_name, what="a writes in both")
            eventually(lambda: by(f"{moving}-x") == a_name, what="a writes in the moving one")
            assert a.held() == sorted([moving, staying])
            b = Replica(client, namespace, ring, b_name, clusters=clusters, journal=journal)
            # the drain times out (a's reconcile is held): the cluster moves to b anyway
            eventually(lambda: by(f"{moving}-hold") == b_name, timeout=20, what="b's write")
            assert b.held() == [moving]
            a.release.set()
            eventually(
                lambda: (
                    journal.of(a_name, moving, "fenced: not_owner")
                    or journal.of(a_name, moving)[1:]
                ),
                what="a's held write",
            )
            eventually(lambda: a.held() == [staying], what="a lets the moved cluster go")
            assert by(f"{moving}-hold") == b_name  # a's late write did not land
            a_done = max(end for _, end in journal.of(a_name, moving))
            b_first = min(sent for sent, _ in journal.of(b_name, moving))
            assert a_done < b_first, "a wrote to the moved cluster after b had begun"
            assert journal.of(a_name, moving, "fenced: not_owner"), journal.writes
            assert journal.of(b_name, staying) == []  # b never wrote in a's cluster
        finally:
            codes = [r.close() for r in (b, a) if r is not None]
            client.close()
        assert codes == [0, 0]  # both stopped gracefully: no shard Lease was lost


def _unevenly_hashed(ring: str, replicas: list[str], n: int) -> list[str]:
    """``n`` cluster names that hashing alone (each by the slot of its hash) would not
    spread evenly over ``replicas``: one of them would get more than its share."""
    plain = SlotRing([shard_lease_name(ring, r) for r in replicas], RingParameters())
    names: list[str] = []
    for i in range(1000):
        names.append(f"c{i}")
        if len(names) < n:
            continue
        window = names[-n:]
        loads: dict[str, int] = {}
        for name in window:
            owner = plain.owner_of(cluster_hash(name))
            loads[owner] = loads.get(owner, 0) + 1
        if max(loads.values()) > -(-n // len(replicas)):
            return window
    raise AssertionError("no uneven window of names")


def test_clusters_are_placed_evenly_over_the_replicas(
    kubeconfig_path: str, namespace: str, local_servers: Any
) -> None:
    """Six clusters on three replicas: two each, whatever their hashes (memory divides
    by replica count only if the busiest replica holds no more than its share). The
    names are ones hashing alone would place three or more on one replica."""
    ring = f"f{uuid.uuid4().hex[:6]}"
    whos = [f"{ring}-{x}" for x in ("a", "b", "c")]
    names = _unevenly_hashed(ring, whos, 6)
    (member,) = local_servers(1)
    clusters = tuple(KubeconfigFile(name=n, path=str(member.kubeconfig_path)) for n in names)
    journal = Journal()
    client = KubeClient.from_kubeconfig(kubeconfig_path)
    replicas: list[Replica] = []
    try:
        replicas = [
            Replica(client, namespace, ring, who, clusters=clusters, journal=journal)
            for who in whos
        ]

        def placed() -> bool:
            held = [r.held() for r in replicas]
            return [len(h) for h in held] == [2, 2, 2] and sorted(
                c for h in held for c in h
            ) == sorted(names)

        eventually(placed, timeout=30, what=f"two clusters on each replica: {names}")
    finally:
        codes = [r.close() for r in reversed(replicas)]
        client.close()
    assert codes == [0, 0, 0]
