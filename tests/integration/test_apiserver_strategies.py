"""Conformance: what kube-apiserver's registry strategies check and answer beyond schemas.

Pod update rules, host ports, Service IP and node port allocation, Secret data, Lease
times, events.k8s.io rules, finalizers on deleting objects, list options, generateName,
DELETE answers, graceful pod deletion, namespace deletion, watch edge cases.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import time
from typing import Any

import pytest

from tests.integration.rawhttp import MERGE, eventually, gone, http, ok, watching
from tests.integration.test_apiserver_crd import make_crd  # noqa: F401  (fixture)

PAUSE_IMAGE = "registry.k8s.io/pause:3.9"


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": PAUSE_IMAGE}], **spec},
    }


def _service(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"ports": [{"port": 80}], **spec},
    }


def _causes(body: dict[str, Any]) -> list[str]:
    return [c.get("field", "") for c in body.get("details", {}).get("causes", [])]


# --------------------------------------------------------------------------- pods


def test_pod_update_may_change_only_mutable_fields(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    pod = ok(http(api_client, "POST", base, body=_pod("p")))
    pod["spec"]["restartPolicy"] = "Never"
    response = http(api_client, "PUT", f"{base}/p", body=pod)
    assert response.status == 422, response.body
    assert response.body["message"].startswith(
        'Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than '
        "`spec.containers[*].image`,"
    )
    assert _causes(response.body) == ["spec"]
    current = ok(http(api_client, "GET", f"{base}/p"))
    current["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.10"
    current["metadata"]["labels"] = {"changed": "yes"}
    updated = ok(http(api_client, "PUT", f"{base}/p", body=current), 200)
    assert updated["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"


def test_host_port_must_match_container_port_with_host_network(
    api_client: Any, namespace: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    bad = _pod("bad", hostNetwork=True)
    bad["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8081}]
    response = http(api_client, "POST", base, body=bad)
    assert response.status == 422, response.body
    assert response.body["message"] == (
        'Pod "bad" is invalid: spec.containers[0].ports[0].hostPort: Invalid value: 8081: '
        "must match `containerPort` when `hostNetwork` is true"
    )
    good = _pod("good", hostNetwork=True)
    good["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    created = ok(http(api_client, "POST", base, body=good), 201)
    assert created["spec"]["containers"][0]["ports"][0]["hostPort"] == 8080


def _bind(api_client: Any, namespace: str, name: str) -> dict[str, Any]:
    """A pod bound to a node (that does not exist): its deletion is graceful."""
    base = f"/api/v1/namespaces/{namespace}/pods"
    return ok(
        http(
            api_client,
            "POST",
            base,
            body=_pod(name, nodeName="ovs-no-such-node", terminationGracePeriodSeconds=60),
        ),
        201,
    )


def _when(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_graceful_pod_deletion_and_a_shorter_grace(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods/p"
    _bind(api_client, namespace, "p")
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    first = ok(http(api_client, "DELETE", path), 200)
    assert first["kind"] == "Pod"
    assert first["metadata"]["deletionGracePeriodSeconds"] == 60
    deadline = _when(first["metadata"]["deletionTimestamp"])
    assert before + dt.timedelta(seconds=59) <= deadline <= before + dt.timedelta(seconds=62)
    second = ok(http(api_client, "DELETE", path, query={"gracePeriodSeconds": 10}), 200)
    assert second["metadata"]["deletionGracePeriodSeconds"] == 10
    assert _when(second["metadata"]["deletionTimestamp"]) == deadline - dt.timedelta(seconds=50)
    longer = ok(http(api_client, "DELETE", path, query={"gracePeriodSeconds": 30}), 200)
    assert longer["metadata"]["deletionGracePeriodSeconds"] == 10
    ok(http(api_client, "DELETE", path, query={"gracePeriodSeconds": 0}), 200)
    assert http(api_client, "GET", path).status == 404


def test_unscheduled_pod_is_deleted_at_once(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    ok(http(api_client, "POST", base, body=_pod("p")))
    answer = ok(http(api_client, "DELETE", f"{base}/p"), 200)
    assert answer["kind"] == "Pod"
    assert http(api_client, "GET", f"{base}/p").status == 404


# --------------------------------------------------------------------------- services


def test_service_gets_an_empty_load_balancer_status(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/services"
    created = ok(http(api_client, "POST", base, body=_service("s")))
    assert created["status"] == {"loadBalancer": {}}


def test_cluster_ip_outside_the_service_range_is_refused(api_client: Any, namespace: str) -> None:
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): in no cluster's service range. Why the IP is
    # refused is worded by the cluster's allocator (1.36's ServiceCIDR allocator: "the
    # provided network does not match the current range"; the legacy one names the range).
    base = f"/api/v1/namespaces/{namespace}/services"
    response = http(api_client, "POST", base, body=_service("s", clusterIP="192.0.2.10"))
    assert response.status == 422, response.body
    assert response.body["reason"] == "Invalid"
    assert response.body["message"].startswith(  # service/storage/alloc.go allocIPs
        'Service "s" is invalid: spec.clusterIPs: Invalid value: ["192.0.2.10"]: '
        "failed to allocate IP 192.0.2.10: "
    )
    causes = response.body["details"]["causes"]
    assert [(c["reason"], c["field"]) for c in causes] == [("FieldValueInvalid", "spec.clusterIPs")]


def test_a_cluster_ip_in_use_is_refused(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/services"
    first = ok(http(api_client, "POST", base, body=_service("a")))
    ip = first["spec"]["clusterIP"]  # from the cluster's own range, whatever it is
    response = http(api_client, "POST", base, body=_service("b", clusterIP=ip))
    assert response.status == 422, response.body
    assert response.body["reason"] == "Invalid"
    # alloc.go allocIPs around ipallocator.ErrAllocated (the IPAddress already exists)
    assert response.body["message"] == (
        f'Service "b" is invalid: spec.clusterIPs: Invalid value: ["{ip}"]: '
        f"failed to allocate IP {ip}: provided IP is already allocated"
    )
    assert _causes(response.body) == ["spec.clusterIPs"]


@pytest.mark.parametrize("kind", ["NodePort", "LoadBalancer"])
def test_node_ports_are_allocated(api_client: Any, namespace: str, kind: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/services"
    created = ok(http(api_client, "POST", base, body=_service("s", type=kind)))
    node_port = created["spec"]["ports"][0]["nodePort"]
    assert 30000 <= node_port <= 32767
    again = dict(created)
    allocated = ("clusterIP", "clusterIPs")
    again["spec"] = {k: v for k, v in created["spec"].items() if k not in allocated}
    again["spec"]["ports"] = [{"port": 80}]  # a PUT that omits it keeps it
    updated = ok(http(api_client, "PUT", f"{base}/s", body=again), 200)
    assert updated["spec"]["ports"][0]["nodePort"] == node_port
    clash = _service("t", type="NodePort", ports=[{"port": 80, "nodePort": node_port}])
    response = http(api_client, "POST", base, body=clash)
    assert response.status == 422, response.body
    assert response.body["message"] == (
        f'Service "t" is invalid: spec.ports[0].nodePort: Invalid value: {node_port}: '
        "provided port is already allocated"
    )


def test_update_to_node_port_allocates_one(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/services"
    ok(http(api_client, "POST", base, body=_service("s")))
    patched = ok(
        http(
            api_client,
            "PATCH",
            f"{base}/s",
            body={"spec": {"type": "NodePort"}},
            content_type=MERGE,
        ),
        200,
    )
    assert 30000 <= patched["spec"]["ports"][0]["nodePort"] <= 32767


# --------------------------------------------------------------------------- secrets, leases


def test_secret_string_data_is_merged_into_data(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/secrets"
    body = {
        "metadata": {"name": "s"},
        "data": {"a": base64.b64encode(b"one").decode()},
        "stringData": {"b": "two", "a": "uno"},
    }
    created = ok(http(api_client, "POST", base, body=body))
    assert "stringData" not in created
    assert created["data"] == {
        "a": base64.b64encode(b"uno").decode(),
        "b": base64.b64encode(b"two").decode(),
    }


def test_secret_data_must_be_base64(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/secrets"
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"a": "@@@@"}}
    response = http(api_client, "POST", base, body=body)
    assert response.status == 400, response.body
    assert response.body["message"] == (
        'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 0'
    )


def test_lease_times_are_micro_times(api_client: Any, namespace: str) -> None:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l"},
        "spec": {"renewTime": "2026-01-02T03:04:05Z"},
    }
    response = http(api_client, "POST", base, body=body)
    assert response.status == 400, response.body
    assert response.body["message"] == (
        'Lease in version "v1" cannot be handled as a Lease: parsing time '
        '"2026-01-02T03:04:05Z" as "2006-01-02T15:04:05.000000Z07:00": '
        'cannot parse "Z" as ".000000"'
    )
    body["spec"]["renewTime"] = "2026-01-02T03:04:05.123456Z"
    created = ok(http(api_client, "POST", base, body=body))
    assert created["spec"]["renewTime"] == "2026-01-02T03:04:05.123456Z"


def test_events_v1_requires_event_time(api_client: Any, namespace: str) -> None:
    base = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e"},
        "regarding": {"kind": "Pod", "name": "p", "namespace": namespace},
        "reason": "Started",
        "action": "Start",
        "type": "Normal",
        "reportingController": "example.com/ctl",
        "reportingInstance": "ctl-1",
    }
    response = http(api_client, "POST", base, body=body)
    assert response.status == 422, response.body
    assert response.body["message"] == ('Event "e" is invalid: eventTime: Required value')
    assert _causes(response.body) == ["eventTime"]
    body["eventTime"] = "2026-01-02T03:04:05.000000Z"
    ok(http(api_client, "POST", base, body=body), 201)


# --------------------------------------------------------------------------- metadata


def test_no_new_finalizers_on_an_object_being_deleted(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", base, body={"metadata": {"name": "cm", "finalizers": ["a.io/x"]}}))
    try:
        ok(http(api_client, "DELETE", f"{base}/cm"), 200)
        response = http(
            api_client,
            "PATCH",
            f"{base}/cm",
            body={"metadata": {"finalizers": ["a.io/x", "b.io/y"]}},
            content_type=MERGE,
        )
        assert response.status == 422, response.body
        assert response.body["reason"] == "Invalid"
        # apimachinery's ValidateNoNewFinalizers (%#v of the new ones, in its detail)
        assert response.body["message"] == (
            'ConfigMap "cm" is invalid: metadata.finalizers: Forbidden: no new finalizers can '
            'be added if the object is being deleted, found new finalizers []string{"b.io/y"}'
        )
        # once by rest.BeforeUpdate's common checks, once by ValidateConfigMapUpdate's own
        # ValidateObjectMetaUpdate: kube reports the cause twice (the message once)
        causes = response.body["details"]["causes"]
        assert [(c["reason"], c["field"]) for c in causes] == [
            ("FieldValueForbidden", "metadata.finalizers")
        ] * 2
    finally:
        merge = {"metadata": {"finalizers": None}}
        ok(http(api_client, "PATCH", f"{base}/cm", body=merge, content_type=MERGE), 200)
    eventually(gone(api_client, f"{base}/cm"), 10.0, "the ConfigMap goes once its finalizer")


def test_generate_name_leaves_room_for_the_suffix(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    created = ok(http(api_client, "POST", base, body={"metadata": {"generateName": "a" * 70}}))
    name = created["metadata"]["name"]
    assert len(name) == 63
    assert name.startswith("a" * 58)


def test_delete_answers_a_status_without_code(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    created = ok(http(api_client, "POST", base, body={"metadata": {"name": "cm"}}))
    answer = ok(http(api_client, "DELETE", f"{base}/cm"), 200)
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "cm", "kind": "configmaps", "uid": created["metadata"]["uid"]},
    }


def test_namespace_deletion_answers_a_terminating_namespace(api_client: Any) -> None:
    name = f"ovs-test-del-{int(time.time() * 1000) % 100000}"
    ok(http(api_client, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}}))
    answer = ok(http(api_client, "DELETE", f"/api/v1/namespaces/{name}"), 200)
    assert answer["kind"] == "Namespace"
    assert answer["status"]["phase"] == "Terminating"
    assert answer["spec"]["finalizers"] == ["kubernetes"]
    assert answer["metadata"]["deletionTimestamp"]


# --------------------------------------------------------------------------- lists


def test_list_option_errors(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(3):
        ok(http(api_client, "POST", base, body={"metadata": {"name": f"cm{i}"}}))
    page = ok(http(api_client, "GET", base, query={"limit": 1}), 200)
    token = page["metadata"]["continue"]
    response = http(api_client, "GET", base, query={"continue": token, "resourceVersion": "1"})
    assert response.status == 400, response.body
    assert response.body["message"] == (
        "specifying resource version is not allowed when using continue"
    )
    response = http(
        api_client,
        "GET",
        base,
        query={"continue": token, "resourceVersion": "1", "resourceVersionMatch": "Exact"},
    )
    assert response.status == 422, response.body
    assert response.body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden when continue is provided"
    )
    response = http(
        api_client, "GET", base, query={"resourceVersion": "0", "resourceVersionMatch": "Exact"}
    )
    assert response.status == 422, response.body
    assert response.body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
    )
    response = http(
        api_client, "GET", base, query={"resourceVersion": "5", "resourceVersionMatch": "Newest"}
    )
    assert response.status == 422, response.body
    assert response.body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: '
        '"Newest": supported values: "Exact", "NotOlderThan", ""'
    )


def test_list_at_a_future_resource_version_times_out(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    current = int(ok(http(api_client, "GET", base), 200)["metadata"]["resourceVersion"])
    future = current + 1_000_000
    started = time.monotonic()
    response = http(api_client, "GET", base, query={"resourceVersion": str(future)})
    waited = time.monotonic() - started
    assert response.status == 504, response.body
    body = response.body
    assert body["reason"] == "Timeout"
    assert body["message"].startswith(f"Timeout: Too large resource version: {future}, current: ")
    assert body["details"]["causes"] == [
        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    ]
    assert body["details"]["retryAfterSeconds"] == 1
    assert 2.0 <= waited <= 10.0


# --------------------------------------------------------------------------- watch


def _lines(resp: Any, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    buffer = b""
    while len(out) < count:
        chunk = resp.read1(65536)
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                out.append(json.loads(line))
    return out


def test_watch_with_timeout_and_no_resource_version_ends(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", base, body={"metadata": {"name": "cm"}}))
    started = time.monotonic()
    with watching(api_client, base, read_timeout=30, timeoutSeconds=1) as resp:
        assert resp.status == 200
        events = _lines(resp, 100)
    assert time.monotonic() - started < 15
    names = [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"]
    assert "cm" in names


def test_send_initial_events_false_starts_from_now(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", base, body={"metadata": {"name": "old"}}))
    listed = ok(http(api_client, "GET", base), 200)
    with watching(
        api_client,
        base,
        read_timeout=30,
        timeoutSeconds=5,
        resourceVersion=listed["metadata"]["resourceVersion"],
        resourceVersionMatch="NotOlderThan",
        sendInitialEvents=False,
    ) as resp:
        assert resp.status == 200
        ok(http(api_client, "POST", base, body={"metadata": {"name": "new"}}))
        events = _lines(resp, 1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "new")]


def test_custom_resource_watch_from_too_old_a_version_is_an_error_event(
    api_client: Any, namespace: str, request: pytest.FixtureRequest
) -> None:
    crd = request.getfixturevalue("make_crd")()
    collection = crd.collection(namespace)
    ok(http(api_client, "POST", collection, body=crd.body("w", size=1)), 201)
    if not os.environ.get("OVERSEER_TEST_KUBECONFIG"):  # a real cluster has compacted
        request.getfixturevalue("local_server").compact()
    with watching(api_client, collection, read_timeout=30, resourceVersion="1") as resp:
        assert resp.status == 200
        events = _lines(resp, 1)
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status"
    assert status["code"] == 410
    assert status["reason"] in ("Expired", "Gone")


def test_namespace_deletion_reports_what_remains(api_client: Any) -> None:
    name = f"ovs-test-rem-{int(time.time() * 1000) % 100000}"
    ok(http(api_client, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}}))
    cms = f"/api/v1/namespaces/{name}/configmaps"
    try:
        _held_namespace_reports_what_remains(api_client, name, cms)
    finally:  # whatever failed, the namespace goes: no finalizer, no namespace left
        patch = {"metadata": {"finalizers": None}}
        http(api_client, "PATCH", f"{cms}/held", body=patch, content_type=MERGE)
        http(api_client, "DELETE", f"/api/v1/namespaces/{name}")
    eventually(gone(api_client, f"/api/v1/namespaces/{name}"), 60, "namespace deleted")


def _held_namespace_reports_what_remains(api_client: Any, name: str, cms: str) -> None:
    held = {"metadata": {"name": "held", "finalizers": ["a.io/x"]}}
    ok(http(api_client, "POST", cms, body=held))
    ok(http(api_client, "DELETE", f"/api/v1/namespaces/{name}"), 200)
    expected = {
        "NamespaceContentRemaining": (
            "True",
            "SomeResourcesRemain",
            "Some resources are remaining: configmaps. has 1 resource instances",
        ),
        "NamespaceFinalizersRemaining": (
            "True",
            "SomeFinalizersRemain",
            "Some content in the namespace has finalizers remaining: a.io/x in 1 resource "
            "instances",
        ),
        "NamespaceDeletionContentFailure": (
            "False",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
        ),
    }

    def reported() -> bool:
        ns = ok(http(api_client, "GET", f"/api/v1/namespaces/{name}"), 200)
        conditions = {
            c["type"]: (c["status"], c.get("reason"), c.get("message"))
            for c in ns.get("status", {}).get("conditions") or []
        }
        return all(conditions.get(k) == v for k, v in expected.items())

    eventually(reported, 30, "namespace conditions name the remaining content")


# --------------------------------------------------------------------------- error details


def _deployment(name: str, **spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": PAUSE_IMAGE}]},
            },
            **spec,
        },
    }


def test_error_details_per_error_type(api_client: Any, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    missing = http(api_client, "GET", f"{base}/nope")
    assert missing.status == 404
    assert missing.body["message"] == 'deployments.apps "nope" not found'
    assert missing.body["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}

    created = ok(http(api_client, "POST", base, body=_deployment("web")))
    again = http(api_client, "POST", base, body=_deployment("web"))
    assert again.status == 409
    assert again.body["reason"] == "AlreadyExists"
    assert again.body["message"] == 'deployments.apps "web" already exists'
    assert again.body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}

    stale = dict(created)
    stale["metadata"] = {**created["metadata"], "resourceVersion": "1"}
    conflict = http(api_client, "PUT", f"{base}/web", body=stale)
    assert conflict.status == 409
    assert conflict.body["reason"] == "Conflict"
    assert conflict.body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}

    invalid = http(api_client, "POST", base, body=_deployment("bad", replicas=-1))
    assert invalid.status == 422
    details = invalid.body["details"]
    assert (details["name"], details["group"], details["kind"]) == ("bad", "apps", "Deployment")
    assert details["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: -1: must be greater than or equal to 0",
            "field": "spec.replicas",
        }
    ]

    nowhere = http(
        api_client,
        "POST",
        "/api/v1/namespaces/ovs-no-such-namespace/configmaps",
        body={"metadata": {"name": "cm"}},
    )
    assert nowhere.status == 404
    assert nowhere.body["message"] == 'namespaces "ovs-no-such-namespace" not found'
    assert nowhere.body["details"] == {"name": "ovs-no-such-namespace", "kind": "namespaces"}
