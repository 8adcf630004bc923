"""Overseer deployed from ``deploy/`` (3 replicas as pods), end to end: run by
``e2e/kind.sh``, which sets ``OVERSEER_E2E_TARGET=kind``; skipped otherwise.

* the install: every replica Ready, spread over nodes, exactly one leads;
* both controllers: an exposed Deployment gets its Service and Ingress, a pod its
  LogicalPort, released when the pod goes;
* metrics through the pod proxy: the leader reports leader status 1 and reconciles;
* failover: leader pod force-deleted (kill -9) and gracefully deleted (SIGTERM, Lease
  released), times printed, work continues;
* a rolling restart of all replicas loses nothing: every Deployment still exposed, every
  pod exactly one port, no orphan ports.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from e2e.cluster import DEPLOYMENTS, NAMESPACE, PODS, TARGET, PodReplicas, sample
from e2e.processes import wait_for
from manager.errors import NotFound
from manager.kube import KubeClient
from manager.resources import Resource, builtin

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        TARGET != "kind",
        reason="needs Overseer deployed as pods: run e2e/kind.sh (OVERSEER_E2E_TARGET=kind)",
    ),
]

SERVICES = builtin("v1", "services")
INGRESSES = builtin("networking.k8s.io/v1", "ingresses")
LOGICAL_PORTS = Resource(
    "network.overseer.io", "v1alpha1", "logicalports", "LogicalPort", namespaced=False
)
IMAGE = "registry.k8s.io/pause:3.9"
# deploy/config/overseer.yaml: lease 15 s, retry 2 s
LEASE_DURATION, RETRY = 15.0, 2.0


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path) as c:
        yield c


@pytest.fixture
def replicas(client: KubeClient, kubeconfig_path: str) -> PodReplicas:
    r = PodReplicas(client, kubeconfig=kubeconfig_path)
    _wait_all_ready(client, r)
    wait_for(r.leader, 60, "a leading pod", step=0.2)
    return r


def _wait_all_ready(client: KubeClient, r: PodReplicas, timeout: float = 300) -> None:
    def done() -> bool:
        dep = client.get(DEPLOYMENTS, "overseer", NAMESPACE)
        want = dep["spec"]["replicas"]
        status = dep.get("status") or {}
        return bool(
            status.get("observedGeneration") == dep["metadata"]["generation"]
            and status.get("updatedReplicas") == want
            and status.get("readyReplicas") == want
            and status.get("replicas") == want
            and len(r.ready()) == want
        )

    wait_for(done, timeout, "the overseer Deployment rolled out and Ready", step=0.5)


def _expose(client: KubeClient, namespace: str, name: str) -> None:
    labels = {"app": name}
    client.create(
        DEPLOYMENTS,
        {
            "metadata": {"name": name, "annotations": {"overseer.io/expose": "true"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {"name": "c", "image": IMAGE, "ports": [{"containerPort": 8080}]}
                        ]
                    },
                },
            },
        },
        namespace,
    )


def _exposed(client: KubeClient, namespace: str, name: str) -> bool:
    try:
        client.get(SERVICES, name, namespace)
        client.get(INGRESSES, name, namespace)
    except NotFound:
        return False
    return True


def _pod(client: KubeClient, namespace: str, name: str) -> None:
    body = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": IMAGE}]}}
    client.create(PODS, body, namespace)


def _ports_of(client: KubeClient, namespace: str) -> dict[str, list[dict[str, Any]]]:
    """LogicalPorts by pod UID, for the pods of ``namespace``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for p in client.list(LOGICAL_PORTS)["items"]:
        if p["spec"]["podNamespace"] == namespace:
            out.setdefault(p["spec"]["podUID"], []).append(p)
    return out


def _has_port(client: KubeClient, namespace: str, name: str) -> bool:
    pod = client.get(PODS, name, namespace)
    ann = pod["metadata"].get("annotations") or {}
    return (
        "overseer.io/ip" in ann
        and len(_ports_of(client, namespace).get(pod["metadata"]["uid"], [])) == 1
    )


def test_install_ready_spread_one_leader(client: KubeClient, replicas: PodReplicas) -> None:
    pods = replicas.pods()
    assert len(pods) == 3
    nodes = {p["spec"].get("nodeName") for p in pods}
    assert len(nodes) >= 2, nodes
    leaders = [p for p in pods if replicas.holder().startswith(f"{p['metadata']['name']}_")]
    assert len(leaders) == 1
    for p in pods:
        assert p["spec"]["securityContext"]["runAsUser"] == 65532


def test_controllers_end_to_end(client: KubeClient, replicas: PodReplicas, namespace: str) -> None:
    _expose(client, namespace, "web")
    _pod(client, namespace, "p-0")
    wait_for(lambda: _exposed(client, namespace, "web"), 60, "web exposed", step=0.2)
    wait_for(lambda: _has_port(client, namespace, "p-0"), 60, "p-0 has a port", step=0.2)
    uid = client.get(PODS, "p-0", namespace)["metadata"]["uid"]
    client.delete(PODS, "p-0", namespace, grace_period_seconds=0)
    wait_for(lambda: uid not in _ports_of(client, namespace), 60, "p-0's port released", step=0.2)


def test_metrics_show_leader_status_and_reconciles(
    client: KubeClient, replicas: PodReplicas, namespace: str
) -> None:
    _expose(client, namespace, "metered")
    wait_for(lambda: _exposed(client, namespace, "metered"), 60, "exposed", step=0.2)
    leader = replicas.leader()
    assert leader is not None
    text = replicas.metrics(leader)
    assert sample(text, "leader_election_master_status", name=replicas.lease) == 1.0
    reconciles = sample(
        text, "controller_runtime_reconcile_total", controller="exposer", result="success"
    )
    assert reconciles is not None and reconciles >= 1, text[:2000]
    for p in replicas.pods():
        name = p["metadata"]["name"]
        if name != leader:
            standby = sample(replicas.metrics(name), "leader_election_master_status")
            assert standby in (None, 0.0), name


def test_failover_kill9_and_graceful(
    client: KubeClient, replicas: PodReplicas, namespace: str
) -> None:
    first = replicas.holder()
    leader = replicas.pod_of(first)
    assert leader is not None
    killed_at = time.monotonic()
    replicas.kill(leader)
    second = replicas.wait_for_new_leader(first, LEASE_DURATION + 2 * RETRY + 10)
    kill_failover = time.monotonic() - killed_at
    _expose(client, namespace, "after-kill")
    wait_for(lambda: _exposed(client, namespace, "after-kill"), 60, "exposed after kill -9")
    _wait_all_ready(client, replicas)  # the Deployment replaced the killed pod

    new_leader = replicas.pod_of(second)
    assert new_leader is not None
    termed_at = time.monotonic()
    replicas.terminate(new_leader)
    third = replicas.wait_for_new_leader(second, 20)
    handover = time.monotonic() - termed_at
    _expose(client, namespace, "after-term")
    wait_for(lambda: _exposed(client, namespace, "after-term"), 60, "exposed after SIGTERM")
    print(
        f"\nkind failover: pod force-deleted -> new leader in {kill_failover:.1f} s "
        f"(bound {LEASE_DURATION + 2 * RETRY} s); graceful delete -> {handover:.1f} s"
    )
    assert kill_failover <= LEASE_DURATION + 2 * RETRY + 5
    assert handover <= 2 * RETRY + 5  # released on shutdown: about one retry period
    assert third not in (first, second)
    _wait_all_ready(client, replicas)


def test_rolling_restart_loses_nothing(
    client: KubeClient, replicas: PodReplicas, namespace: str
) -> None:
    names = [f"d{i}" for i in range(5)]
    pods = [f"p{i}" for i in range(5)]
    for n in names:
        _expose(client, namespace, n)
    for p in pods:
        _pod(client, namespace, p)
    for n in names:
        wait_for(partial(_exposed, client, namespace, n), 60, f"{n} exposed", step=0.2)
    for p in pods:
        wait_for(partial(_has_port, client, namespace, p), 60, f"{p} has a port", step=0.2)
    restarted = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    client.patch(
        DEPLOYMENTS,
        "overseer",
        {
            "spec": {
                "template": {
                    "metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": restarted}}
                }
            }
        },
        namespace=NAMESPACE,
    )
    # work arriving during the restart is not lost either
    late = f"late-{uuid.uuid4().hex[:4]}"
    _expose(client, namespace, late)
    _pod(client, namespace, late)
    _wait_all_ready(client, replicas)
    for n in [*names, late]:
        wait_for(partial(_exposed, client, namespace, n), 60, f"{n} exposed after restart")
    for p in [*pods, late]:
        wait_for(partial(_has_port, client, namespace, p), 60, f"{p} has one port after")
    live = {client.get(PODS, p, namespace)["metadata"]["uid"] for p in [*pods, late]}
    by_uid = _ports_of(client, namespace)
    assert set(by_uid) == live, "orphan LogicalPorts or pods without one"
    assert all(len(v) == 1 for v in by_uid.values())
    with contextlib.suppress(NotFound):
        for p in [*pods, late]:
            client.delete(PODS, p, namespace, grace_period_seconds=0)
