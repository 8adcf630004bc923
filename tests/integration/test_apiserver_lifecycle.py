"""Conformance: finalizers, deletionTimestamp, propagation policies, ownerReference garbage
collection, deletecollection and namespace deletion.

On a real cluster kube-controller-manager does the collecting, so every wait is a bounded
poll (30 s for GC, 60 s for namespaces); the local server is expected to be much faster.
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.integration.rawhttp import MERGE, STRATEGIC, eventually, gone, http, merge_patch, ok

GC_TIMEOUT = 30.0
NAMESPACE_TIMEOUT = 60.0


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
    return ok(
        http(api_client, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body), 201
    )


def _drop_finalizers(api_client: Any, path: str) -> dict[str, Any]:
    return merge_patch(api_client, path, {"metadata": {"finalizers": None}})


# --------------------------------------------------------------------------- finalizers


def test_finalizer_holds_deleted_object_until_removed(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/held"
    created = _configmap(api_client, namespace, "held", finalizers=["example.com/hold"])

    answer = http(api_client, "DELETE", path)
    assert answer.status == 200
    assert answer.body["kind"] == "ConfigMap"
    assert answer.body["metadata"]["uid"] == created["metadata"]["uid"]
    assert answer.body["metadata"]["deletionTimestamp"]
    assert answer.body["metadata"]["finalizers"] == ["example.com/hold"]

    stored = ok(http(api_client, "GET", path), 200)
    assert stored["metadata"]["deletionTimestamp"] == answer.body["metadata"]["deletionTimestamp"]
    assert stored["metadata"]["deletionGracePeriodSeconds"] == 0

    again = http(api_client, "DELETE", path)
    assert again.status == 200
    assert (
        again.body["metadata"]["deletionTimestamp"] == answer.body["metadata"]["deletionTimestamp"]
    )

    response = http(
        api_client,
        "PATCH",
        path,
        body={"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}},
        content_type=MERGE,
    )
    assert response.status == 422, "no new finalizers on an object being deleted"
    assert response.body["reason"] == "Invalid"

    _drop_finalizers(api_client, path)
    eventually(gone(api_client, path), 5, "object deleted once its last finalizer is removed")


def test_delete_preconditions(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/guarded"
    created = _configmap(api_client, namespace, "guarded")
    for preconditions in (
        {"uid": str(uuid.uuid4())},
        {"resourceVersion": str(int(created["metadata"]["resourceVersion"]) - 1)},
    ):
        response = http(
            api_client,
            "DELETE",
            path,
            body={"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": preconditions},
        )
        assert response.status == 409, (preconditions, response.body)
        assert response.body["reason"] == "Conflict"
        assert http(api_client, "GET", path).status == 200
    matching = {
        "uid": created["metadata"]["uid"],
        "resourceVersion": created["metadata"]["resourceVersion"],
    }
    response = http(
        api_client,
        "DELETE",
        path,
        body={"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": matching},
    )
    assert response.status == 200
    assert http(api_client, "GET", path).status == 404


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
    ok(http(api_client, "POST", f"/api/v1/namespaces/{namespace}/pods", body=pod), 201)
    answer = http(api_client, "DELETE", path)
    assert answer.status == 200
    assert answer.body["kind"] == "Pod"
    assert answer.body["metadata"]["deletionTimestamp"]
    assert answer.body["metadata"]["deletionGracePeriodSeconds"] == 30
    terminating = ok(http(api_client, "GET", path), 200)
    assert (
        terminating["metadata"]["deletionTimestamp"] == answer.body["metadata"]["deletionTimestamp"]
    )

    forced = http(api_client, "DELETE", path, query={"gracePeriodSeconds": 0})
    assert forced.status == 200
    assert forced.body["kind"] == "Pod"
    eventually(gone(api_client, path), 5, "pod gone after grace period 0")


def test_foreground_delete_adds_foreground_finalizer(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/fg"
    _configmap(api_client, namespace, "fg")
    answer = http(
        api_client,
        "DELETE",
        path,
        body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"},
    )
    assert answer.status == 200
    assert answer.body["kind"] == "ConfigMap"
    assert "foregroundDeletion" in answer.body["metadata"]["finalizers"]
    assert answer.body["metadata"]["deletionTimestamp"]
    eventually(gone(api_client, path), GC_TIMEOUT, "foreground delete without dependents")


def test_orphan_delete_adds_orphan_finalizer(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/orph"
    _configmap(api_client, namespace, "orph")
    answer = http(api_client, "DELETE", path, query={"propagationPolicy": "Orphan"})
    assert answer.status == 200
    assert answer.body["kind"] == "ConfigMap"
    assert "orphan" in answer.body["metadata"]["finalizers"]
    assert answer.body["metadata"]["deletionTimestamp"]
    eventually(gone(api_client, path), GC_TIMEOUT, "orphan delete without dependents")


def test_deletecollection_returns_deleted_items(api_client: Any, namespace: str) -> None:
    tag = uuid.uuid4().hex[:8]
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    for name in ("dc-1", "dc-2", "dc-3"):
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"dc": tag}},
        }
        ok(http(api_client, "POST", collection, body=body), 201)
    _configmap(api_client, namespace, "dc-keep")

    answer = http(api_client, "DELETE", collection, query={"labelSelector": f"dc={tag}"})
    assert answer.status == 200
    assert answer.body["kind"] == "ConfigMapList"
    assert sorted(i["metadata"]["name"] for i in answer.body["items"]) == ["dc-1", "dc-2", "dc-3"]
    left = ok(http(api_client, "GET", collection, query={"labelSelector": f"dc={tag}"}), 200)
    assert left["items"] == []
    assert http(api_client, "GET", f"{collection}/dc-keep").status == 200


# --------------------------------------------------------------------------- garbage collection


def test_background_gc_deletes_dependents(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    owner = _configmap(api_client, namespace, "owner")
    _configmap(api_client, namespace, "child-1", owner=owner)
    _configmap(api_client, namespace, "child-2", owner=owner, block=True)
    bystander = _configmap(api_client, namespace, "bystander")

    answer = ok(http(api_client, "DELETE", f"{base}/owner"), 200)
    assert answer["kind"] == "Status"
    assert http(api_client, "GET", f"{base}/owner").status == 404
    eventually(gone(api_client, f"{base}/child-1"), GC_TIMEOUT, "child-1 collected")
    eventually(gone(api_client, f"{base}/child-2"), GC_TIMEOUT, "child-2 collected")
    still = ok(http(api_client, "GET", f"{base}/bystander"), 200)
    assert still["metadata"]["uid"] == bystander["metadata"]["uid"]


def test_gc_deletes_dependent_of_missing_owner(api_client: Any, namespace: str) -> None:
    ghost = {"metadata": {"name": "ghost", "uid": str(uuid.uuid4())}}
    _configmap(api_client, namespace, "haunted", owner=ghost)
    eventually(
        gone(api_client, f"/api/v1/namespaces/{namespace}/configmaps/haunted"),
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

    answer = ok(
        http(api_client, "DELETE", f"{base}/fg-owner", query={"propagationPolicy": "Foreground"}),
        200,
    )
    assert "foregroundDeletion" in answer["metadata"]["finalizers"]

    def child_terminating() -> bool:
        child = http(api_client, "GET", f"{base}/fg-child")
        return child.status == 200 and bool(child.body["metadata"].get("deletionTimestamp"))

    eventually(child_terminating, GC_TIMEOUT, "GC deletes the dependent first")
    held = http(api_client, "GET", f"{base}/fg-owner")
    assert held.status == 200, "owner must wait while a blocking dependent exists"
    assert held.body["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in held.body["metadata"]["finalizers"]

    _drop_finalizers(api_client, f"{base}/fg-child")
    eventually(gone(api_client, f"{base}/fg-child"), GC_TIMEOUT, "dependent gone")
    eventually(gone(api_client, f"{base}/fg-owner"), GC_TIMEOUT, "owner gone after dependents")


def test_orphan_gc_keeps_dependents_and_strips_owner_reference(
    api_client: Any, namespace: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    owner = _configmap(api_client, namespace, "or-owner")
    child = _configmap(api_client, namespace, "or-child", owner=owner)

    answer = ok(
        http(api_client, "DELETE", f"{base}/or-owner", query={"propagationPolicy": "Orphan"}),
        200,
    )
    assert "orphan" in answer["metadata"]["finalizers"]
    eventually(gone(api_client, f"{base}/or-owner"), GC_TIMEOUT, "owner deleted")

    def orphaned() -> bool:
        body = ok(http(api_client, "GET", f"{base}/or-child"), 200)
        return not body["metadata"].get("ownerReferences")

    eventually(orphaned, GC_TIMEOUT, "ownerReference removed from the orphan")
    kept = ok(http(api_client, "GET", f"{base}/or-child"), 200)
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
    ok(
        http(
            api_client,
            "POST",
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
            body=lease,
        ),
        201,
    )

    answer = http(api_client, "DELETE", f"/api/v1/namespaces/{namespace}")
    assert answer.status == 200
    assert answer.body["kind"] == "Namespace"
    assert answer.body["metadata"]["deletionTimestamp"]
    assert answer.body["status"]["phase"] == "Terminating"

    eventually(
        gone(api_client, f"/api/v1/namespaces/{namespace}"),
        NAMESPACE_TIMEOUT,
        "namespace deleted",
    )
    assert (
        http(api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps/inside").status == 404
    )
    leases = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/inside"
    assert http(api_client, "GET", leases).status == 404


def test_terminating_namespace_refuses_new_content(api_client: Any, namespace: str) -> None:
    held = f"/api/v1/namespaces/{namespace}/configmaps/blocker"
    _configmap(api_client, namespace, "blocker", finalizers=["example.com/hold"])
    ok(http(api_client, "DELETE", f"/api/v1/namespaces/{namespace}"), 200)

    def blocker_terminating() -> bool:
        return bool(ok(http(api_client, "GET", held), 200)["metadata"].get("deletionTimestamp"))

    eventually(blocker_terminating, NAMESPACE_TIMEOUT, "namespace deletion reaches its content")
    ns = ok(http(api_client, "GET", f"/api/v1/namespaces/{namespace}"), 200)
    assert ns["status"]["phase"] == "Terminating"

    response = http(
        api_client,
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps",
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}},
    )
    assert response.status == 403
    assert response.body["reason"] == "Forbidden"
    assert "being terminated" in response.body["message"]

    _drop_finalizers(api_client, held)
    eventually(
        gone(api_client, f"/api/v1/namespaces/{namespace}"),
        NAMESPACE_TIMEOUT,
        "namespace deleted once its content is gone",
    )


def test_terminating_namespace_refusal_names_the_object_and_the_cause(
    api_client: Any, namespace: str
) -> None:
    """NamespaceLifecycle admission's answer, as kube-apiserver builds it
    (``admission.NewForbidden`` + a ``NamespaceTerminating`` cause): controllers tell a
    terminating namespace from an RBAC refusal by the cause."""
    held = f"/api/v1/namespaces/{namespace}/configmaps/blocker"
    _configmap(api_client, namespace, "blocker", finalizers=["example.com/hold"])
    ok(http(api_client, "DELETE", f"/api/v1/namespaces/{namespace}"), 200)
    try:
        eventually(
            lambda: bool(
                ok(http(api_client, "GET", held), 200)["metadata"].get("deletionTimestamp")
            ),
            NAMESPACE_TIMEOUT,
            "namespace deletion reaches its content",
        )
        cause = {
            "reason": "NamespaceTerminating",
            "message": f"namespace {namespace} is being terminated",
            "field": "metadata.namespace",
        }
        tail = (
            f"unable to create new content in namespace {namespace} because it is being terminated"
        )
        service = http(
            api_client,
            "POST",
            f"/api/v1/namespaces/{namespace}/services",
            body={
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "late"},
                "spec": {"ports": [{"port": 80}]},
            },
        )
        assert service.status == 403
        assert service.body["reason"] == "Forbidden"
        assert service.body["message"] == f'services "late" is forbidden: {tail}'
        assert service.body["details"] == {"name": "late", "kind": "services", "causes": [cause]}
        ingress = http(
            api_client,
            "POST",
            f"/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses",
            body={
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {"generateName": "late-"},
                "spec": {"defaultBackend": {"service": {"name": "x", "port": {"number": 80}}}},
            },
        )
        assert ingress.status == 403
        assert (
            ingress.body["message"] == f'ingresses.networking.k8s.io "late-" is forbidden: {tail}'
        )
        assert ingress.body["details"] == {
            "name": "late-",
            "group": "networking.k8s.io",
            "kind": "ingresses",
            "causes": [cause],
        }
    finally:
        _drop_finalizers(api_client, held)


def _owned_by(kind: str, owner: dict[str, Any]) -> dict[str, Any]:
    """A strategic merge patch that makes ``owner`` the blocking controller."""
    ref = {
        "apiVersion": "v1",
        "kind": kind,
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {"metadata": {"ownerReferences": [ref]}}


def test_foreground_deletion_is_not_blocked_by_an_ownership_cycle(
    api_client: Any, namespace: str
) -> None:
    """kube's e2e "should not be blocked by dependency circle": pod1 ← pod2 ← pod3 ← pod1,
    every reference blocking, pod1 deleted in the foreground. The garbage collector
    deletes the dependents in the foreground too, and one that would wait on an owner
    already waiting for its dependents gets its references unblocked first
    (attemptToDeleteItem), so all three go."""
    base = f"/api/v1/namespaces/{namespace}/pods"
    pods = []
    for name in ("pod1", "pod2", "pod3"):
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
        }
        pods.append(ok(http(api_client, "POST", base, body=body), 201))
    for pod, owner in ((pods[0], pods[2]), (pods[1], pods[0]), (pods[2], pods[1])):
        path = f"{base}/{pod['metadata']['name']}"
        ok(http(api_client, "PATCH", path, body=_owned_by("Pod", owner), content_type=STRATEGIC))
    options = {
        "propagationPolicy": "Foreground",
        "preconditions": {"uid": pods[0]["metadata"]["uid"]},
    }
    ok(http(api_client, "DELETE", f"{base}/pod1", body=options))

    def all_gone() -> bool:
        return not ok(http(api_client, "GET", base))["items"]

    eventually(all_gone, GC_TIMEOUT, "every pod of the cycle gone")


def test_foreground_deletion_keeps_a_dependent_with_another_owner(
    api_client: Any, namespace: str
) -> None:
    """A dependent with an owner that is not going (a solid owner) is not deleted: it
    loses the reference to the owner waiting for it, and that owner goes."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    going = _configmap(api_client, namespace, "going")
    staying = _configmap(api_client, namespace, "staying")
    child = _configmap(api_client, namespace, "child", owner=going, block=True)
    refs = child["metadata"]["ownerReferences"] + [
        {
            **child["metadata"]["ownerReferences"][0],
            "name": "staying",
            "uid": staying["metadata"]["uid"],
        }
    ]
    ok(
        http(
            api_client,
            "PATCH",
            f"{base}/child",
            body={"metadata": {"ownerReferences": refs}},
            content_type=MERGE,
        )
    )
    ok(http(api_client, "DELETE", f"{base}/going", query={"propagationPolicy": "Foreground"}))
    eventually(gone(api_client, f"{base}/going"), GC_TIMEOUT, "the owner gone")
    kept = ok(http(api_client, "GET", f"{base}/child"))
    assert not kept["metadata"].get("deletionTimestamp")
    assert [r["name"] for r in kept["metadata"]["ownerReferences"]] == ["staying"]
