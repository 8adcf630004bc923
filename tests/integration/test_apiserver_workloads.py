"""The local server's minimal workload controllers (embedded and demo modes).

Local only: a real cluster's kube-controller-manager does this (and more: rolling
updates, readiness), and the plain local server, like kube-apiserver alone, makes
nothing; these tests pin the switch between the two.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from apiserver.registry.workloads import pod_template_hash
from manager import KubeClient
from manager.testing import LocalApiServer

pytestmark = pytest.mark.local_only

DEPLOYMENTS = "apps/v1/deployments"


def _wait(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout} s: {check.__doc__}"
        time.sleep(0.05)


@pytest.fixture
def embedded() -> Iterator[tuple[LocalApiServer, KubeClient]]:
    with (
        LocalApiServer(workload_controllers=True) as server,
        KubeClient.from_kubeconfig(str(server.kubeconfig_path)) as client,
    ):
        yield server, client


def _deployment(replicas: int, image: str = "registry.k8s.io/pause:3.9") -> dict[str, Any]:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": image}]},
            },
        },
    }


def _http(server: LocalApiServer, method: str, path: str, body: Any = None) -> Any:
    import json
    import urllib.request

    request = urllib.request.Request(
        server.url + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def test_deployment_replicaset_pods(embedded: tuple[LocalApiServer, KubeClient]) -> None:
    server, _ = embedded
    ns = "default"
    base = f"/apis/apps/v1/namespaces/{ns}"
    made = _http(server, "POST", f"{base}/deployments", _deployment(2))
    uid = made["metadata"]["uid"]

    def replicasets() -> list[dict[str, Any]]:
        """the Deployment's ReplicaSets"""
        items = _http(server, "GET", f"{base}/replicasets")["items"]
        return [
            rs for rs in items if any(r["uid"] == uid for r in rs["metadata"]["ownerReferences"])
        ]

    def pods_of(rs: dict[str, Any]) -> list[dict[str, Any]]:
        items = _http(server, "GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        return [
            p
            for p in items
            if not p["metadata"].get("deletionTimestamp")
            and any(r["uid"] == rs["metadata"]["uid"] for r in p["metadata"]["ownerReferences"])
        ]

    (rs,) = _wait(replicasets)
    hashed = pod_template_hash(made["spec"]["template"])
    assert rs["metadata"]["name"] == f"web-{hashed}"
    assert rs["metadata"]["labels"] == {"app": "web", "pod-template-hash": hashed}
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": hashed}
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    ref = rs["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["controller"], ref["blockOwnerDeletion"]) == ("Deployment", True, True)
    pods = _wait(lambda: len(pods_of(rs)) == 2 and pods_of(rs))
    assert all(p["metadata"]["generateName"] == f"web-{hashed}-" for p in pods)
    assert all(p["status"]["phase"] == "Pending" for p in pods)
    assert all(p["metadata"]["labels"]["pod-template-hash"] == hashed for p in pods)

    def status_replicas() -> bool:
        """the Deployment's status counts 2 replicas"""
        status = _http(server, "GET", f"{base}/deployments/web").get("status") or {}
        return status.get("replicas") == 2 and status.get("updatedReplicas") == 2

    _wait(status_replicas)

    # scale down: one pod goes
    scaled = _http(server, "GET", f"{base}/deployments/web")
    scaled["spec"]["replicas"] = 1
    _http(server, "PUT", f"{base}/deployments/web", scaled)
    _wait(lambda: len(pods_of(rs)) == 1)

    # a new template: a second ReplicaSet with the pods, the first scaled to zero
    changed = _http(server, "GET", f"{base}/deployments/web")
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.10"
    _http(server, "PUT", f"{base}/deployments/web", changed)
    both = _wait(lambda: len(replicasets()) == 2 and replicasets())
    new = next(r for r in both if r["metadata"]["name"] != rs["metadata"]["name"])
    assert new["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    _wait(lambda: len(pods_of(new)) == 1 and not pods_of(rs))
    old = next(r for r in replicasets() if r["metadata"]["name"] == rs["metadata"]["name"])
    assert old["spec"]["replicas"] == 0

    # deleting the Deployment: the garbage collector takes the rest
    _http(server, "DELETE", f"{base}/deployments/web")
    _wait(lambda: not replicasets())
    _wait(lambda: not pods_of(new))


def test_replication_controller_pods(embedded: tuple[LocalApiServer, KubeClient]) -> None:
    server, _ = embedded
    path = "/api/v1/namespaces/default/replicationcontrollers"
    rc = _http(
        server,
        "POST",
        path,
        {
            "apiVersion": "v1",
            "kind": "ReplicationController",
            "metadata": {"name": "rc"},
            "spec": {
                "replicas": 3,
                "selector": {"app": "rc"},
                "template": {
                    "metadata": {"labels": {"app": "rc"}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
                },
            },
        },
    )

    def pods() -> list[dict[str, Any]]:
        """the RC's live pods"""
        items = _http(server, "GET", "/api/v1/namespaces/default/pods")["items"]
        return [
            p
            for p in items
            if not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["ownerReferences"][0]["uid"] == rc["metadata"]["uid"]
        ]

    made = _wait(lambda: len(pods()) == 3 and pods())
    assert {p["metadata"]["ownerReferences"][0]["kind"] for p in made} == {"ReplicationController"}
    # a pod deleted by someone is replaced
    _http(server, "DELETE", f"/api/v1/namespaces/default/pods/{made[0]['metadata']['name']}")
    _wait(
        lambda: (
            len(pods()) == 3
            and made[0]["metadata"]["name"] not in {p["metadata"]["name"] for p in pods()}
        )
    )
    _wait(lambda: (_http(server, "GET", f"{path}/rc").get("status") or {}).get("replicas") == 3)


def test_plain_server_makes_nothing(
    kube_client: KubeClient, namespace: str, local_server: Any
) -> None:
    """Like kube-apiserver without kube-controller-manager: no ReplicaSet, no Pod."""
    assert local_server.workloads is None
    from manager.resources import Resource

    deployments = Resource("apps", "v1", "deployments", "Deployment", True)
    replicasets = Resource("apps", "v1", "replicasets", "ReplicaSet", True)
    kube_client.create(deployments, _deployment(1), namespace)
    time.sleep(0.5)
    assert kube_client.list(replicasets, namespace)["items"] == []


def test_pod_template_hash_is_kube_shaped() -> None:
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}
    hashed = pod_template_hash(template)
    assert hashed == pod_template_hash(dict(template))
    assert set(hashed) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert 1 <= len(hashed) <= 10
    assert pod_template_hash(template, 1) != hashed
    assert pod_template_hash({**template, "spec": {"containers": [{"name": "x"}]}}) != hashed
