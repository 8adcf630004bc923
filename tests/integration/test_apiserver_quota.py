"""Conformance: ResourceQuota, as quota admission and the quota controller keep it.

kube-controller-manager's resource quota controller fills ``status.hard`` and
``status.used``; kube-apiserver's quota admission charges each create to the quotas that
match it and refuses one that would go over (403, ``exceeded quota: ...``). These run on
both servers: a real cluster needs no node for any of it (pods stay Pending).
"""

from __future__ import annotations

from typing import Any

from tests.integration.rawhttp import MERGE, eventually, http, ok

TIMEOUT = 30.0
IMAGE = "registry.k8s.io/pause:3.9"


def _quota(api_client: Any, namespace: str, name: str, hard: dict[str, str], **spec: Any) -> str:
    body = {"metadata": {"name": name}, "spec": {"hard": hard, **spec}}
    ok(http(api_client, "POST", f"/api/v1/namespaces/{namespace}/resourcequotas", body=body), 201)
    return f"/api/v1/namespaces/{namespace}/resourcequotas/{name}"


def _status_is(api_client: Any, path: str, used: dict[str, str]) -> None:
    def settled() -> bool:
        quota = ok(http(api_client, "GET", path))
        status = quota.get("status") or {}
        return status.get("hard") == quota["spec"]["hard"] and status.get("used") == used

    eventually(
        settled,
        TIMEOUT,
        f"status.used == {used} (last: {http(api_client, 'GET', path).body.get('status')})",
    )


def _pod(name: str, resources: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": IMAGE}
    if resources is not None:
        container["resources"] = resources
    return {"metadata": {"name": name}, "spec": {"containers": [container], **spec}}


BURSTABLE = {
    "requests": {"cpu": "500m", "memory": "512Mi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}


def test_quota_counts_pods_and_their_compute_resources(api_client: Any, namespace: str) -> None:
    hard = {
        "pods": "2",
        "requests.cpu": "1",
        "requests.memory": "1Gi",
        "limits.cpu": "2",
        "limits.memory": "2Gi",
    }
    path = _quota(api_client, namespace, "compute", hard)
    zero = dict.fromkeys(hard, "0")
    _status_is(api_client, path, zero)
    pods = f"/api/v1/namespaces/{namespace}/pods"
    for name in ("p1", "p2"):
        ok(http(api_client, "POST", pods, body=_pod(name, BURSTABLE)), 201)
    full = {
        "pods": "2",
        "requests.cpu": "1",
        "requests.memory": "1Gi",
        "limits.cpu": "2",
        "limits.memory": "2Gi",
    }
    _status_is(api_client, path, full)
    refused = http(api_client, "POST", pods, body=_pod("p3", BURSTABLE))
    assert refused.status == 403, refused.body
    assert refused.body["reason"] == "Forbidden"
    assert refused.body["message"] == (
        'pods "p3" is forbidden: exceeded quota: compute, requested: limits.cpu=1,'
        "limits.memory=1Gi,pods=1,requests.cpu=500m,requests.memory=512Mi, used: "
        "limits.cpu=2,limits.memory=2Gi,pods=2,requests.cpu=1,requests.memory=1Gi, "
        "limited: limits.cpu=2,limits.memory=2Gi,pods=2,requests.cpu=1,requests.memory=1Gi"
    )
    unset = http(api_client, "POST", pods, body=_pod("p4"))
    assert unset.status == 403, unset.body
    assert unset.body["message"] == (
        'pods "p4" is forbidden: failed quota: compute: must specify limits.cpu for: main; '
        "limits.memory for: main; requests.cpu for: main; requests.memory for: main"
    )
    ok(http(api_client, "DELETE", f"{pods}/p1", query={"gracePeriodSeconds": 0}))
    half = {
        "pods": "1",
        "requests.cpu": "500m",
        "requests.memory": "512Mi",
        "limits.cpu": "1",
        "limits.memory": "1Gi",
    }
    _status_is(api_client, path, half)


def _names(api_client: Any, namespace: str, resource: str) -> list[str]:
    listed = ok(http(api_client, "GET", f"/api/v1/namespaces/{namespace}/{resource}"), 200)
    return [item["metadata"]["name"] for item in listed["items"]]


def test_quota_counts_objects(api_client: Any, namespace: str) -> None:
    """The quota counts what the namespace already holds: its ``kube-root-ca.crt`` (a
    distribution's controllers may publish more, e.g. OpenShift's service CA bundle), then
    each create and delete; a create past ``hard`` is refused."""
    hard = {"configmaps": "50", "count/secrets": "50", "services": "2", "services.nodeports": "1"}
    path = _quota(api_client, namespace, "objects", hard)
    held: dict[str, int] = {}

    def counted() -> bool:
        configmaps = _names(api_client, namespace, "configmaps")
        secrets = _names(api_client, namespace, "secrets")
        held.update(configmaps=len(configmaps), secrets=len(secrets))
        used = ok(http(api_client, "GET", path)).get("status", {}).get("used")
        return "kube-root-ca.crt" in configmaps and used == {
            "configmaps": str(len(configmaps)),
            "count/secrets": str(len(secrets)),
            "services": "0",
            "services.nodeports": "0",
        }

    eventually(counted, TIMEOUT, f"status.used counts what {namespace} holds")
    configmaps, secrets = held["configmaps"] + 1, held["secrets"] + 1
    hard = {**hard, "configmaps": str(configmaps), "count/secrets": str(secrets)}
    ok(http(api_client, "PATCH", path, body={"spec": {"hard": hard}}, content_type=MERGE), 200)
    base = f"/api/v1/namespaces/{namespace}"
    ok(http(api_client, "POST", f"{base}/configmaps", body={"metadata": {"name": "c1"}}), 201)
    ok(http(api_client, "POST", f"{base}/secrets", body={"metadata": {"name": "s1"}}), 201)
    port = {"ports": [{"port": 80}]}
    node_port = {"metadata": {"name": "np"}, "spec": {"type": "NodePort", **port}}
    ok(http(api_client, "POST", f"{base}/services", body=node_port), 201)
    _status_is(
        api_client,
        path,
        {
            "configmaps": str(configmaps),
            "count/secrets": str(secrets),
            "services": "1",
            "services.nodeports": "1",
        },
    )
    refused = http(api_client, "POST", f"{base}/configmaps", body={"metadata": {"name": "c2"}})
    assert refused.status == 403, refused.body
    assert refused.body["message"] == (
        'configmaps "c2" is forbidden: exceeded quota: objects, requested: configmaps=1, '
        f"used: configmaps={configmaps}, limited: configmaps={configmaps}"
    )
    second = {"metadata": {"name": "np2"}, "spec": {"type": "NodePort", **port}}
    refused = http(api_client, "POST", f"{base}/services", body=second)
    assert refused.status == 403, refused.body
    assert refused.body["message"] == (
        'services "np2" is forbidden: exceeded quota: objects, requested: services.nodeports=1, '
        "used: services.nodeports=1, limited: services.nodeports=1"
    )
    ok(http(api_client, "DELETE", f"{base}/secrets/s1"))
    _status_is(
        api_client,
        path,
        {
            "configmaps": str(configmaps),
            "count/secrets": str(secrets - 1),
            "services": "1",
            "services.nodeports": "1",
        },
    )


def test_quota_scopes_select_pods_as_kube_evaluates_them(api_client: Any, namespace: str) -> None:
    """BestEffort: no container requests or limits cpu or memory; Terminating: an
    ``activeDeadlineSeconds``. Each scoped quota counts only the pods its scopes select."""
    best = _quota(api_client, namespace, "best", {"pods": "1"}, scopes=["BestEffort"])
    not_best = _quota(api_client, namespace, "not-best", {"pods": "5"}, scopes=["NotBestEffort"])
    terminating = _quota(
        api_client,
        namespace,
        "terminating",
        {"pods": "5"},
        scopeSelector={"matchExpressions": [{"scopeName": "Terminating", "operator": "Exists"}]},
    )
    lasting = _quota(api_client, namespace, "lasting", {"pods": "5"}, scopes=["NotTerminating"])
    for path in (best, not_best, terminating, lasting):
        _status_is(api_client, path, {"pods": "0"})
    pods = f"/api/v1/namespaces/{namespace}/pods"
    ok(http(api_client, "POST", pods, body=_pod("plain")), 201)
    ok(http(api_client, "POST", pods, body=_pod("sized", BURSTABLE, activeDeadlineSeconds=60)), 201)
    _status_is(api_client, best, {"pods": "1"})
    _status_is(api_client, not_best, {"pods": "1"})
    _status_is(api_client, terminating, {"pods": "1"})
    _status_is(api_client, lasting, {"pods": "1"})
    refused = http(api_client, "POST", pods, body=_pod("plain2"))
    assert refused.status == 403, refused.body
    assert refused.body["message"] == (
        'pods "plain2" is forbidden: exceeded quota: best, requested: pods=1, used: pods=1, '
        "limited: pods=1"
    )
    ok(http(api_client, "POST", pods, body=_pod("sized2", BURSTABLE)), 201)
    _status_is(api_client, not_best, {"pods": "2"})
    _status_is(api_client, lasting, {"pods": "2"})
    _status_is(api_client, terminating, {"pods": "1"})
