"""The pod-target helpers of ``e2e/cluster.py`` (what ``e2e/test_kind.py`` relies on),
against any API server: pods and a Lease made by hand stand in for the Deployment."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from e2e.cluster import LEASES, PODS, PodReplicas, sample
from e2e.processes import wait_for
from manager.client import KubeClient
from manager.errors import NotFound

LABELS = {"app.kubernetes.io/name": "overseer"}


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path) as c:
        yield c


def _pod(client: KubeClient, namespace: str, name: str) -> None:
    body = {
        "metadata": {"name": name, "labels": LABELS},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9"}]},
    }
    client.create(PODS, body, namespace)


def test_leader_pod_is_found_by_identity_prefix_and_killed(
    client: KubeClient, namespace: str
) -> None:
    for name in ("overseer-7d9-a", "overseer-7d9-ab", "other"):
        _pod(client, namespace, name)
    client.patch(
        PODS,
        "other",
        {"metadata": {"labels": {"app.kubernetes.io/name": "x"}}},
        namespace=namespace,
    )
    replicas = PodReplicas(client, namespace=namespace, lease="overseer-leader")
    assert [p["metadata"]["name"] for p in replicas.pods()] == ["overseer-7d9-a", "overseer-7d9-ab"]
    assert replicas.leader() is None  # no Lease yet
    client.create(
        LEASES,
        {
            "metadata": {"name": "overseer-leader"},
            "spec": {"holderIdentity": "overseer-7d9-ab_0f3c"},
        },
        namespace,
    )
    # "overseer-7d9-a" is a prefix of the name, not of "<name>_": not the leader
    assert replicas.leader() == "overseer-7d9-ab"
    replicas.kill("overseer-7d9-ab")

    def gone() -> bool:
        with contextlib.suppress(NotFound):
            pod = client.get(PODS, "overseer-7d9-ab", namespace)
            return bool(pod["metadata"].get("deletionTimestamp"))
        return True

    wait_for(gone, 30, "the killed pod to go")
    assert replicas.leader() is None  # the holder's pod is gone
    assert replicas.pod_of("overseer-7d9-a_1234") == "overseer-7d9-a"
    lease = client.get(LEASES, "overseer-leader", namespace)
    lease["spec"]["holderIdentity"] = "overseer-7d9-a_99"
    client.replace(LEASES, lease, namespace)
    assert replicas.wait_for_new_leader("overseer-7d9-ab_0f3c", timeout=5) == "overseer-7d9-a_99"
    replicas.terminate("overseer-7d9-a")
    replicas.kill("not-there")  # already gone: no error


def test_sample_reads_prometheus_text() -> None:
    text = "\n".join(
        [
            "# HELP leader_election_master_status leading",
            'leader_election_master_status{name="overseer-leader"} 1.0',
            'controller_runtime_reconcile_total{controller="exposer",result="success"} 7.0',
            'controller_runtime_reconcile_total{controller="podport",result="success"} 3.0',
        ]
    )
    assert sample(text, "leader_election_master_status", name="overseer-leader") == 1.0
    assert sample(text, "controller_runtime_reconcile_total", controller="podport") == 3.0
    assert sample(text, "controller_runtime_reconcile_total", controller="nope") is None
    assert sample(text, "leader_election_master") is None
