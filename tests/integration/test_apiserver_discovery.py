"""Conformance: discovery lists what a 1.36 server serves, and what every cluster has.

The group-versions and resources are those kube-apiserver 1.36 enables by default
(pkg/controlplane's stable resources: ``kubectl api-versions`` prints these 22 and
``kubectl api-resources`` 67 kinds on a 1.36 cluster); a real cluster may serve more
(aggregated APIs, CRDs), never less.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.rawhttp import http, ok

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

SERVED_1_36: dict[str, set[str]] = {
    "v1": {
        "bindings", "componentstatuses", "configmaps", "endpoints", "events", "limitranges",
        "namespaces", "nodes", "persistentvolumeclaims", "persistentvolumes", "pods",
        "podtemplates", "replicationcontrollers", "resourcequotas", "secrets",
        "serviceaccounts", "services",
    },
    "admissionregistration.k8s.io/v1": {
        "mutatingadmissionpolicies", "mutatingadmissionpolicybindings",
        "mutatingwebhookconfigurations", "validatingadmissionpolicies",
        "validatingadmissionpolicybindings", "validatingwebhookconfigurations",
    },
    "apiextensions.k8s.io/v1": {"customresourcedefinitions"},
    "apiregistration.k8s.io/v1": {"apiservices"},
    "apps/v1": {"controllerrevisions", "daemonsets", "deployments", "replicasets", "statefulsets"},
    "authentication.k8s.io/v1": {"selfsubjectreviews", "tokenreviews"},
    "authorization.k8s.io/v1": {
        "localsubjectaccessreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews",
        "subjectaccessreviews",
    },
    "autoscaling/v1": {"horizontalpodautoscalers"},
    "autoscaling/v2": {"horizontalpodautoscalers"},
    "batch/v1": {"cronjobs", "jobs"},
    "certificates.k8s.io/v1": {"certificatesigningrequests"},
    "coordination.k8s.io/v1": {"leases"},
    "discovery.k8s.io/v1": {"endpointslices"},
    "events.k8s.io/v1": {"events"},
    "flowcontrol.apiserver.k8s.io/v1": {"flowschemas", "prioritylevelconfigurations"},
    "networking.k8s.io/v1": {
        "ingressclasses", "ingresses", "ipaddresses", "networkpolicies", "servicecidrs",
    },
    "node.k8s.io/v1": {"runtimeclasses"},
    "policy/v1": {"poddisruptionbudgets"},
    "rbac.authorization.k8s.io/v1": {
        "clusterrolebindings", "clusterroles", "rolebindings", "roles",
    },
    "resource.k8s.io/v1": {
        "deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices",
    },
    "scheduling.k8s.io/v1": {"priorityclasses"},
    "storage.k8s.io/v1": {
        "csidrivers", "csinodes", "csistoragecapacities", "storageclasses",
        "volumeattachments", "volumeattributesclasses",
    },
}  # fmt: skip


def test_the_1_36_lists_add_up() -> None:
    kinds = {
        (gv.split("/")[0] if "/" in gv else "", r) for gv, rs in SERVED_1_36.items() for r in rs
    }
    assert len(SERVED_1_36) == 22  # kubectl api-versions
    assert len(kinds) == 67  # kubectl api-resources: one row per group and resource


@pytest.mark.parametrize("group_version", sorted(SERVED_1_36))
def test_every_1_36_group_version_is_discovered(api_client: Any, group_version: str) -> None:
    path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    listed = ok(http(api_client, "GET", path), 200)
    assert listed["groupVersion"] == group_version
    names = {r["name"] for r in listed["resources"] if "/" not in r["name"]}
    assert SERVED_1_36[group_version] <= names
    groups = ok(http(api_client, "GET", "/apis"), 200)["groups"]
    versions = {v["groupVersion"] for g in groups for v in g["versions"]} | {"v1"}
    assert group_version in versions
    aggregated = ok(
        http(
            api_client,
            "GET",
            "/api" if group_version == "v1" else "/apis",
            headers={"Accept": AGGREGATED},
        ),
        200,
    )
    group, _, version = group_version.rpartition("/")
    entry = next(g for g in aggregated["items"] if g["metadata"].get("name", "") == group)
    served = next(v for v in entry["versions"] if v["version"] == version)
    assert SERVED_1_36[group_version] <= {r["resource"] for r in served["resources"]}


def test_preferred_versions(api_client: Any) -> None:
    """Each group's preferred version is its first, by kube's version priority."""
    for group in ok(http(api_client, "GET", "/apis"), 200)["groups"]:
        assert group["preferredVersion"] == group["versions"][0], group["name"]
        if group["name"] == "autoscaling":
            assert group["preferredVersion"]["version"] == "v2"


def test_the_kubernetes_service_exists(api_client: Any) -> None:
    service = ok(http(api_client, "GET", "/api/v1/namespaces/default/services/kubernetes"), 200)
    assert service["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    assert service["spec"]["type"] == "ClusterIP"
    assert [(p["name"], p["port"], p["protocol"]) for p in service["spec"]["ports"]] == [
        ("https", 443, "TCP")
    ]
    target = service["spec"]["ports"][0]["targetPort"]
    endpoints = ok(http(api_client, "GET", "/api/v1/namespaces/default/endpoints/kubernetes"), 200)
    assert [p["port"] for s in endpoints["subsets"] for p in s["ports"]] == [target]
    assert endpoints["subsets"][0]["addresses"]
    slices = ok(
        http(
            api_client,
            "GET",
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            query={"labelSelector": "kubernetes.io/service-name=kubernetes"},
        ),
        200,
    )["items"]
    assert slices
    assert slices[0]["ports"][0]["port"] == target


def test_component_statuses_are_listed(api_client: Any) -> None:
    listed = ok(http(api_client, "GET", "/api/v1/componentstatuses"), 200)
    assert listed["kind"] == "ComponentStatusList"
    names = {i["metadata"]["name"] for i in listed["items"]}
    assert "etcd-0" in names
    etcd = ok(http(api_client, "GET", "/api/v1/componentstatuses/etcd-0"), 200)
    assert etcd["conditions"][0]["type"] == "Healthy"
    assert (
        http(
            api_client, "POST", "/api/v1/componentstatuses", body={"metadata": {"name": "x"}}
        ).status
        == 405
    )
