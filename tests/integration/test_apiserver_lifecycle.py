"""Conformance: finalizers, deletionTimestamp, propagation policies, ownerReference garbage
collection, deletecollection and namespace deletion.

On a real cluster kube-controller-manager does the collecting, so every wait is a bounded
poll (30 s for GC, 60 s for namespaces); the local server is expected to be much faster.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import urllib3

GC_TIMEOUT = 30.0
NAMESPACE_TIMEOUT = 60.0
MERGE = "application/merge-patch+json"


def _http(
    api_client: Any,
    method: str,
    path: str,
    *,
    query: dict[str, Any] | None = None,
    body: Any = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    """One request; (status, JSON body or text). Never raises on status."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    params = [(k, str(v)) for k, v in (query or {}).items()]
    api_client.update_params_for_auth(headers, params, ["BearerToken"], path, method, None)
    url = api_client.configuration.host + path + ("?" + urlencode(params) if params else "")
    resp = api_client.rest_client.pool_manager.request(
        method,
        url,
        body=None if body is None else json.dumps(body).encode(),
        headers=headers,
        timeout=urllib3.Timeout(connect=10, read=30),
        preload_content=False,
        retries=False,
    )
    try:
        raw = resp.read()
    finally:
        resp.release_conn()
    if "json" in resp.headers.get("Content-Type", ""):
        return resp.status, json.loads(raw)
    return resp.status, raw.decode()


def _ok(result: tuple[int, Any], *expected: int) -> Any:
    status, body = result
    assert status in (expected or (200, 201)), f"HTTP {status}: {body}"
    return body


def _eventually(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.1)


def _gone(api_client: Any, path: str) -> Callable[[], bool]:
    return lambda: _http(api_client, "GET", path)[0] == 404


def _configmap(
    api_client: Any,
    namespace: str,
    name: str,
    *,
    finalizers: list[str] | None = None,
    owner: dict[str, Any] | None = None,
    block: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if finalizers:
        meta["finalizers"] = finalizers
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "blockOwnerDeletion": block,
            }
        ]
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}
    return _ok(
        _http(api_client, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body), 201
    )


def _drop_finalizers(api_client: Any, path: str) -> dict[str, Any]:
    return _ok(
        _http(
            api_client, "PATCH", path, body={"metadata": {"finalizers": None}}, content_type=MERGE
        ),
        200,
    )


# --------------------------------------------------------------------------- finalizers


def test_finalizer_holds_deleted_object_until_removed(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/held"
    created = _configmap(api_client, namespace, "held", finalizers=["example.com/hold"])

    status, answer = _http(api_client, "DELETE", path)
    assert status == 200
    assert answer["kind"] == "ConfigMap"
    assert answer["metadata"]["uid"] == created["metadata"]["uid"]
    assert answer["metadata"]["deletionTimestamp"]
    assert answer["metadata"]["finalizers"] == ["example.com/hold"]

    stored = _ok(_http(api_client, "GET", path), 200)
    assert stored["metadata"]["deletionTimestamp"] == answer["metadata"]["deletionTimestamp"]
    assert stored["metadata"]["deletionGracePeriodSeconds"] == 0

    again_status, again = _http(api_client, "DELETE", path)
    assert again_status == 200
    assert again["metadata"]["deletionTimestamp"] == answer["metadata"]["deletionTimestamp"]

    status, body = _http(
        api_client,
        "PATCH",
        path,
        body={"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}},
        content_type=MERGE,
    )
    assert status == 422, "no new finalizers on an object being deleted"
    assert body["reason"] == "Invalid"

    _drop_finalizers(api_client, path)
    _eventually(_gone(api_client, path), 5, "object deleted once its last finalizer is removed")


def test_delete_preconditions(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/guarded"
    created = _configmap(api_client, namespace, "guarded")
    for preconditions in (
        {"uid": str(uuid.uuid4())},
        {"resourceVersion": str(int(created["metadata"]["resourceVersion"]) - 1)},
    ):
        status, body = _http(
            api_client,
            "DELETE",
            path,
            body={"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": preconditions},
        )
        assert status == 409, (preconditions, body)
        assert body["reason"] == "Conflict"
        assert _http(api_client, "GET", path)[0] == 200
    matching = {
        "uid": created["metadata"]["uid"],
        "resourceVersion": created["metadata"]["resourceVersion"],
    }
    status, _ = _http(
        api_client,
        "DELETE",
        path,
        body={"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": matching},
    )
    assert status == 200
    assert _http(api_client, "GET", path)[0] == 404


def test_bound_pod_deletion_is_graceful(api_client: Any, namespace: str) -> None:
    """A pod bound to a node is only marked (the kubelet finishes it); grace 0 forces it."""
    path = f"/api/v1/namespaces/{namespace}/pods/graceful"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "graceful"},
        "spec": {
            "nodeName": f"ovs-fake-node-{uuid.uuid4().hex[:6]}",
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}],
        },
    }
    _ok(_http(api_client, "POST", f"/api/v1/namespaces/{namespace}/pods", body=pod), 201)
    status, answer = _http(api_client, "DELETE", path)
    assert status == 200
    assert answer["kind"] == "Pod"
    assert answer["metadata"]["deletionTimestamp"]
    assert answer["metadata"]["deletionGracePeriodSeconds"] == 30
    terminating = _ok(_http(api_client, "GET", path), 200)
    assert terminating["metadata"]["deletionTimestamp"] == answer["metadata"]["deletionTimestamp"]

    status, forced = _http(api_client, "DELETE", path, query={"gracePeriodSeconds": 0})
    assert status == 200
    assert forced["kind"] == "Pod"
    _eventually(_gone(api_client, path), 5, "pod gone after grace period 0")


def test_foreground_delete_adds_foreground_finalizer(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/fg"
    _configmap(api_client, namespace, "fg")
    status, answer = _http(
        api_client,
        "DELETE",
        path,
        body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"},
    )
    assert status == 200
    assert answer["kind"] == "ConfigMap"
    assert "foregroundDeletion" in answer["metadata"]["finalizers"]
    assert answer["metadata"]["deletionTimestamp"]
    _eventually(_gone(api_client, path), GC_TIMEOUT, "foreground delete without dependents")


def test_orphan_delete_adds_orphan_finalizer(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/orph"
    _configmap(api_client, namespace, "orph")
    status, answer = _http(api_client, "DELETE", path, query={"propagationPolicy": "Orphan"})
    assert status == 200
    assert answer["kind"] == "ConfigMap"
    assert "orphan" in answer["metadata"]["finalizers"]
    assert answer["metadata"]["deletionTimestamp"]
    _eventually(_gone(api_client, path), GC_TIMEOUT, "orphan delete without dependents")


def test_deletecollection_returns_deleted_items(api_client: Any, namespace: str) -> None:
    tag = uuid.uuid4().hex[:8]
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    for name in ("dc-1", "dc-2", "dc-3"):
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"dc": tag}},
        }
        _ok(_http(api_client, "POST", collection, body=body), 201)
    _configmap(api_client, namespace, "dc-keep")

    status, answer = _http(api_client, "DELETE", collection, query={"labelSelector": f"dc={tag}"})
    assert status == 200
    assert answer["kind"] == "ConfigMapList"
    assert sorted(i["metadata"]["name"] for i in answer["items"]) == ["dc-1", "dc-2", "dc-3"]
    left = _ok(_http(api_client, "GET", collection, query={"labelSelector": f"dc={tag}"}), 200)
    assert left["items"] == []
    assert _http(api_client, "GET", f"{collection}/dc-keep")[0] == 200


# --------------------------------------------------------------------------- garbage collection


def test_background_gc_deletes_dependents(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    owner = _configmap(api_client, namespace, "owner")
    _configmap(api_client, namespace, "child-1", owner=owner)
    _configmap(api_client, namespace, "child-2", owner=owner, block=True)
    bystander = _configmap(api_client, namespace, "bystander")

    answer = _ok(_http(api_client, "DELETE", f"{base}/owner"), 200)
    assert answer["kind"] == "Status"
    assert _http(api_client, "GET", f"{base}/owner")[0] == 404
    _eventually(_gone(api_client, f"{base}/child-1"), GC_TIMEOUT, "child-1 collected")
    _eventually(_gone(api_client, f"{base}/child-2"), GC_TIMEOUT, "child-2 collected")
    still = _ok(_http(api_client, "GET", f"{base}/bystander"), 200)
    assert still["metadata"]["uid"] == bystander["metadata"]["uid"]


def test_gc_deletes_dependent_of_missing_owner(api_client: Any, namespace: str) -> None:
    ghost = {"metadata": {"name": "ghost", "uid": str(uuid.uuid4())}}
    _configmap(api_client, namespace, "haunted", owner=ghost)
    _eventually(
        _gone(api_client, f"/api/v1/namespaces/{namespace}/configmaps/haunted"),
        GC_TIMEOUT,
        "dependent whose owner never existed is collected",
    )


def test_foreground_gc_owner_waits_for_dependents(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    owner = _configmap(api_client, namespace, "fg-owner")
    _configmap(
        api_client,
        namespace,
        "fg-child",
        owner=owner,
        block=True,
        finalizers=["example.com/hold"],
    )

    answer = _ok(
        _http(api_client, "DELETE", f"{base}/fg-owner", query={"propagationPolicy": "Foreground"}),
        200,
    )
    assert "foregroundDeletion" in answer["metadata"]["finalizers"]

    def child_terminating() -> bool:
        status, child = _http(api_client, "GET", f"{base}/fg-child")
        return status == 200 and bool(child["metadata"].get("deletionTimestamp"))

    _eventually(child_terminating, GC_TIMEOUT, "GC deletes the dependent first")
    status, held = _http(api_client, "GET", f"{base}/fg-owner")
    assert status == 200, "owner must wait while a blocking dependent exists"
    assert held["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in held["metadata"]["finalizers"]

    _drop_finalizers(api_client, f"{base}/fg-child")
    _eventually(_gone(api_client, f"{base}/fg-child"), GC_TIMEOUT, "dependent gone")
    _eventually(_gone(api_client, f"{base}/fg-owner"), GC_TIMEOUT, "owner gone after dependents")


def test_orphan_gc_keeps_dependents_and_strips_owner_reference(
    api_client: Any, namespace: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    owner = _configmap(api_client, namespace, "or-owner")
    child = _configmap(api_client, namespace, "or-child", owner=owner)

    answer = _ok(
        _http(api_client, "DELETE", f"{base}/or-owner", query={"propagationPolicy": "Orphan"}),
        200,
    )
    assert "orphan" in answer["metadata"]["finalizers"]
    _eventually(_gone(api_client, f"{base}/or-owner"), GC_TIMEOUT, "owner deleted")

    def orphaned() -> bool:
        body = _ok(_http(api_client, "GET", f"{base}/or-child"), 200)
        return not body["metadata"].get("ownerReferences")

    _eventually(orphaned, GC_TIMEOUT, "ownerReference removed from the orphan")
    kept = _ok(_http(api_client, "GET", f"{base}/or-child"), 200)
    assert kept["metadata"]["uid"] == child["metadata"]["uid"]
    assert not kept["metadata"].get("deletionTimestamp")


# --------------------------------------------------------------------------- namespaces


def test_namespace_deletion_removes_contents(api_client: Any, namespace: str) -> None:
    _configmap(api_client, namespace, "inside")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "inside"},
        "spec": {"holderIdentity": "x"},
    }
    _ok(
        _http(
            api_client,
            "POST",
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
            body=lease,
        ),
        201,
    )

    status, answer = _http(api_client, "DELETE", f"/api/v1/namespaces/{namespace}")
    assert status == 200
    assert answer["kind"] == "Namespace"
    assert answer["metadata"]["deletionTimestamp"]
    assert answer["status"]["phase"] == "Terminating"

    _eventually(
        _gone(api_client, f"/api/v1/namespaces/{namespace}"),
        NAMESPACE_TIMEOUT,
        "namespace deleted",
    )
    assert _http(api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps/inside")[0] == 404
    leases = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/inside"
    assert _http(api_client, "GET", leases)[0] == 404


def test_terminating_namespace_refuses_new_content(api_client: Any, namespace: str) -> None:
    held = f"/api/v1/namespaces/{namespace}/configmaps/blocker"
    _configmap(api_client, namespace, "blocker", finalizers=["example.com/hold"])
    _ok(_http(api_client, "DELETE", f"/api/v1/namespaces/{namespace}"), 200)

    def blocker_terminating() -> bool:
        return bool(_ok(_http(api_client, "GET", held), 200)["metadata"].get("deletionTimestamp"))

    _eventually(blocker_terminating, NAMESPACE_TIMEOUT, "namespace deletion reaches its content")
    ns = _ok(_http(api_client, "GET", f"/api/v1/namespaces/{namespace}"), 200)
    assert ns["status"]["phase"] == "Terminating"

    status, body = _http(
        api_client,
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps",
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}},
    )
    assert status == 403
    assert body["reason"] == "Forbidden"
    assert "being terminated" in body["message"]

    _drop_finalizers(api_client, held)
    _eventually(
        _gone(api_client, f"/api/v1/namespaces/{namespace}"),
        NAMESPACE_TIMEOUT,
        "namespace deleted once its content is gone",
    )
