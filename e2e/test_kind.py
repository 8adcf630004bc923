"""Overseer deployed from ``deploy/`` (3 replicas as pods), end to end: run by
``e2e/kind.sh``, which sets ``OVERSEER_E2E_TARGET=kind``; skipped otherwise.

* the install: every replica Ready, spread over the schedulable nodes as the spread
  constraints promise (``e2e/spread.py``), exactly one leads;
* both controllers: an exposed Deployment gets its Service and Ingress, a pod its
  LogicalPort, released when the pod goes;
* metrics through the pod proxy: the leader reports leader status 1 and reconciles;
* failover: leader pod force-deleted (kill -9) and gracefully deleted (SIGTERM, Lease
  released), times printed, work continues;
* a rolling restart of all replicas loses nothing: every Deployment still exposed, every
  pod exactly one port, no orphan ports.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster import DEPLOYMENTS, NAMESPACE, PODS, TARGET, PodReplicas
from e2e.processes import wait_for
from e2e.spread import hard_constraints, spread_violations
from manager.client import KubeClient
from manager.errors import NotFound
from manager.resources import Resource, builtin

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        TARGET != "kind",
        reason="needs Overseer deployed as pods: run e2e/kind.sh (OVERSEER_E2E_TARGET=kind)",
    ),
]

NODES = builtin("v1", "nodes")
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
    # spread as deploy/'s hard constraints promise on the nodes this cluster has: one
    # schedulable node takes all three, two take 2 and 1, three or more one each
    assert hard_constraints(pods[0]["spec"]), "deploy/ no longer spreads the replicas"
    nodes = client.list(NODES)["items"]
    assert spread_violations(pods, nodes) == [], {
        p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods
    }
    leaders = [p for p in pods if replicas.holder().startswith(f"{p['metadata']['name']}_")]
    assert len(leaders) == 1
    for p in pods:
        assert p["spec"]["securityContext"]["runAsUser"] == 65532
