"""Conformance: discovery, CRUD, resourceVersion, errors, DELETE answers, status, defaults.

Every expectation here is what kube-apiserver 1.3x answers (DESIGN §5); the same tests run
against the local API server and, with ``OVERSEER_TEST_KUBECONFIG``, a real cluster.
Requests go over HTTP through the official client's connection pool, raw JSON in and out,
so that the exact shapes are asserted.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import pytest

from tests.integration.rawhttp import MERGE, STRATEGIC, http, ok, stream

PAUSE_IMAGE = "registry.k8s.io/pause:3.9"
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _deployment(name: str, replicas: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": PAUSE_IMAGE}]},
            },
        },
    }


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": PAUSE_IMAGE}], **spec},
    }


def _configmap(name: str, **data: str) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    if data:
        body["data"] = data
    return body


def _put_with_retry(
    api_client: Any, path: str, mutate: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """GET, mutate, PUT; retried on 409 (controllers on a real cluster write too)."""
    for _ in range(10):
        obj = ok(http(api_client, "GET", path), 200)
        mutate(obj)
        response = http(api_client, "PUT", path, body=obj)
        if response.status != 409:
            assert response.status == 200, f"HTTP {response.status}: {response.body}"
            return response.body
    raise AssertionError(f"PUT {path} kept conflicting")


# --------------------------------------------------------------------------- discovery


def test_discovery_api_lists_versions_without_api_version(api_client: Any) -> None:
    body = ok(http(api_client, "GET", "/api"), 200)
    assert body["kind"] == "APIVersions"
    assert "apiVersion" not in body
    assert body["versions"] == ["v1"]


def test_discovery_apis_lists_groups(api_client: Any) -> None:
    body = ok(http(api_client, "GET", "/apis"), 200)
    assert body["kind"] == "APIGroupList"
    assert body["apiVersion"] == "v1"
    groups = {g["name"]: g for g in body["groups"]}
    for name in (
        "apps",
        "networking.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
        "apiextensions.k8s.io",
    ):
        assert name in groups, f"{name} missing from /apis"
        assert {"groupVersion": f"{name}/v1", "version": "v1"} in groups[name]["versions"]
    assert groups["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}


def test_discovery_apps_v1_lists_deployments_and_status(api_client: Any) -> None:
    body = ok(http(api_client, "GET", "/apis/apps/v1"), 200)
    assert body["kind"] == "APIResourceList"
    assert body["groupVersion"] == "apps/v1"
    resources = {r["name"]: r for r in body["resources"]}
    deployments = resources["deployments"]
    assert deployments["kind"] == "Deployment"
    assert deployments["namespaced"] is True
    assert deployments["singularName"] == "deployment"
    assert set(deployments["verbs"]) == {
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    }
    assert "deploy" in deployments.get("shortNames", [])
    status = resources["deployments/status"]
    assert status["kind"] == "Deployment"
    assert set(status["verbs"]) == {"get", "patch", "update"}


def test_discovery_core_v1_lists_resources(api_client: Any) -> None:
    body = ok(http(api_client, "GET", "/api/v1"), 200)
    assert body["kind"] == "APIResourceList"
    assert body["groupVersion"] == "v1"
    resources = {r["name"]: r for r in body["resources"]}
    for name, kind in (
        ("configmaps", "ConfigMap"),
        ("pods", "Pod"),
        ("services", "Service"),
        ("serviceaccounts", "ServiceAccount"),
        ("events", "Event"),
    ):
        assert resources[name]["kind"] == kind
        assert resources[name]["namespaced"] is True
    assert resources["namespaces"]["namespaced"] is False
    assert "pods/status" in resources


@pytest.mark.parametrize(
    "path",
    ["/no-such-path-{hex}", "/apis/nosuch{hex}.example.com/v1", "/apis/nosuch{hex}.example.com"],
    ids=["top-level", "unknown-group", "unknown-group-root"],
)
def test_unknown_path_is_plain_text_404(api_client: Any, path: str) -> None:
    response = http(api_client, "GET", path.format(hex=uuid.uuid4().hex[:6]))
    assert response.status == 404
    assert response.headers["Content-Type"].startswith("text/plain")
    assert isinstance(response.body, str)
    assert response.body.strip() == "404 page not found"


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/default/nosuchthings{hex}",
        "/api/v1/nosuchthings{hex}",
        "/apis/apps/v1/nosuchthings{hex}",
        "/apis/apps/v1/namespaces/default/deployments/x/nosuchsub{hex}",
    ],
    ids=["core-namespaced", "core-cluster", "apps", "unknown-subresource"],
)
def test_unknown_resource_of_served_group_is_status_404(api_client: Any, path: str) -> None:
    """Under a built-in group-version, go-restful answers: a JSON Status, not plain text."""
    response = http(api_client, "GET", path.format(hex=uuid.uuid4().hex[:6]))
    assert response.status == 404
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound",
        "details": {},
        "code": 404,
    }


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/default/configmaps/nope-{hex}",
        "/no-such-path-{hex}",
        "/api/v1/namespaces",
    ],
    ids=["status", "plain-text", "list"],
)
def test_every_body_ends_with_a_newline(api_client: Any, path: str) -> None:
    resp = stream(api_client, "GET", path.format(hex=uuid.uuid4().hex[:6]))
    try:
        raw = resp.read()
    finally:
        resp.release_conn()
    assert raw.endswith(b"\n"), raw[-40:]


# --------------------------------------------------------------------------- CRUD per resource


def _ingress(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name},
        "spec": {
            "rules": [
                {
                    "host": f"{name}.example.com",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": name, "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ]
        },
    }


def _core_event(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "subject",
            "namespace": namespace,
        },
        "reason": "Tested",
        "message": "conformance test",
        "type": "Normal",
        "source": {"component": "overseer-test"},
    }


def _events_v1_event(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "overseer.io/test",
        "reportingInstance": "test-1",
        "action": "Testing",
        "reason": "Tested",
        "type": "Normal",
        "note": "conformance test",
        "regarding": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "subject",
            "namespace": namespace,
        },
    }


class Case(NamedTuple):
    """One resource: collection path under the namespace, kind, body, DELETE answer shape."""

    collection: str
    kind: str
    factory: Callable[[str, str], dict[str, Any]]
    delete_answer: str | None  # "Status", "object", or None (not asserted)


RESOURCES = [
    Case(
        "/api/v1/namespaces/{ns}/configmaps",
        "ConfigMap",
        lambda n, _: _configmap(n, a="1"),
        "Status",
    ),
    Case("/api/v1/namespaces/{ns}/pods", "Pod", lambda n, _: _pod(n), "object"),
    Case(
        "/api/v1/namespaces/{ns}/services",
        "Service",
        lambda n, _: {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": n},
            "spec": {"selector": {"app": n}, "ports": [{"port": 80}]},
        },
        "object",
    ),
    Case(
        "/api/v1/namespaces/{ns}/serviceaccounts",
        "ServiceAccount",
        lambda n, _: {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": n}},
        "object",
    ),
    Case("/api/v1/namespaces/{ns}/events", "Event", _core_event, None),
    Case(
        "/apis/apps/v1/namespaces/{ns}/deployments",
        "Deployment",
        lambda n, _: _deployment(n),
        "Status",
    ),
    Case(
        "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses",
        "Ingress",
        lambda n, _: _ingress(n),
        None,
    ),
    Case(
        "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
        "Lease",
        lambda n, _: {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": n},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
        },
        "Status",
    ),
    Case("/apis/events.k8s.io/v1/namespaces/{ns}/events", "Event", _events_v1_event, None),
]


@pytest.mark.parametrize(
    "case",
    RESOURCES,
    ids=[
        c.collection.split("/")[-1] + ("-new" if "events.k8s.io" in c.collection else "")
        for c in RESOURCES
    ],
)
def test_crud_round_trip(api_client: Any, namespace: str, case: Case) -> None:
    collection, kind, factory, delete_answer = case
    path = collection.format(ns=namespace)
    name = _unique("crud")
    created = ok(http(api_client, "POST", path, body=factory(name, namespace)), 201)
    meta = created["metadata"]
    assert created["kind"] == kind
    assert meta["name"] == name
    assert meta["namespace"] == namespace
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"])
    assert TIMESTAMP.match(meta["creationTimestamp"])
    assert meta["resourceVersion"].isdigit()

    got = ok(http(api_client, "GET", f"{path}/{name}"), 200)
    assert got["metadata"]["uid"] == meta["uid"]
    assert got["kind"] == kind

    listed = ok(http(api_client, "GET", path), 200)
    assert listed["kind"] == f"{kind}List"
    assert listed["metadata"]["resourceVersion"].isdigit()
    assert int(listed["metadata"]["resourceVersion"]) >= int(meta["resourceVersion"])
    assert name in [item["metadata"]["name"] for item in listed["items"]]

    answer = http(api_client, "DELETE", f"{path}/{name}", query={"gracePeriodSeconds": 0})
    assert answer.status == 200, answer.body
    if delete_answer == "Status":
        assert answer.body["kind"] == "Status"
        assert answer.body["status"] == "Success"
        assert answer.body["details"]["name"] == name
        assert answer.body["details"]["kind"] == path.rsplit("/", 1)[-1]
        assert answer.body["details"]["uid"] == meta["uid"]
    elif delete_answer == "object":
        assert answer.body["kind"] == kind
        assert answer.body["metadata"]["uid"] == meta["uid"]

    deadline = time.monotonic() + 30
    while http(api_client, "GET", f"{path}/{name}").status != 404:
        assert time.monotonic() < deadline, f"{kind} {name} still present after DELETE"
        time.sleep(0.1)


def test_list_items_carry_no_kind(api_client: Any, namespace: str) -> None:
    """Built-in lists name the kind once, on the list; items have no kind/apiVersion."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", path, body=_configmap("itemshape", a="1")), 201)
    listed = ok(http(api_client, "GET", path), 200)
    assert listed["apiVersion"] == "v1"
    item = next(i for i in listed["items"] if i["metadata"]["name"] == "itemshape")
    assert "kind" not in item
    assert "apiVersion" not in item
    assert item["data"] == {"a": "1"}


def test_unconditional_update_without_resource_version(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = ok(http(api_client, "POST", path, body=_configmap("uncond", a="1")), 201)
    body = _configmap("uncond", a="2")
    updated = ok(http(api_client, "PUT", f"{path}/uncond", body=body), 200)
    assert updated["data"] == {"a": "2"}
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


def test_put_to_missing_object_is_not_found(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/never-created"
    response = http(api_client, "PUT", path, body=_configmap("never-created"))
    assert response.status == 404
    assert response.body["details"] == {"name": "never-created", "kind": "configmaps"}


def test_unsupported_method_is_405(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", path, body=_configmap("m405")), 201)
    response = http(api_client, "POST", f"{path}/m405", body=_configmap("m405"))
    assert response.status == 405
    assert response.body["kind"] == "Status"
    assert response.body["reason"] == "MethodNotAllowed"


def test_server_assigns_uid_and_creation_timestamp(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    body = _configmap("sysfields")
    body["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    body["metadata"]["creationTimestamp"] = "2001-01-01T00:00:00Z"
    created = ok(http(api_client, "POST", path, body=body), 201)
    assert created["metadata"]["uid"] != "00000000-0000-0000-0000-000000000000"
    assert created["metadata"]["creationTimestamp"] != "2001-01-01T00:00:00Z"


def test_events_api_and_core_events_share_storage(api_client: Any, namespace: str) -> None:
    """An events.k8s.io/v1 Event is the same object as a core v1 Event, fields mapped."""
    new_api = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
    ok(http(api_client, "POST", new_api, body=_events_v1_event("shared", namespace)), 201)
    core = ok(http(api_client, "GET", f"/api/v1/namespaces/{namespace}/events/shared"), 200)
    assert core["kind"] == "Event"
    assert core["apiVersion"] == "v1"
    assert core["reason"] == "Tested"
    assert core["message"] == "conformance test"
    assert core["involvedObject"]["name"] == "subject"
    assert core["reportingComponent"] == "overseer.io/test"

    ok(
        http(
            api_client,
            "POST",
            f"/api/v1/namespaces/{namespace}/events",
            body=_core_event("legacy", namespace),
        ),
        201,
    )
    modern = ok(http(api_client, "GET", f"{new_api}/legacy"), 200)
    assert modern["apiVersion"] == "events.k8s.io/v1"
    assert modern["note"] == "conformance test"
    assert modern["regarding"]["name"] == "subject"


def test_deployment_created_with_generation_one(api_client: Any, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    created = ok(http(api_client, "POST", path, body=_deployment(_unique("gen"))), 201)
    assert created["metadata"]["generation"] == 1


def test_resource_version_is_monotonic_across_writes(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    seen = []
    first = ok(http(api_client, "POST", path, body=_configmap("rv-a", k="1")), 201)
    seen.append(int(first["metadata"]["resourceVersion"]))
    first["data"] = {"k": "2"}
    updated = ok(http(api_client, "PUT", f"{path}/rv-a", body=first), 200)
    seen.append(int(updated["metadata"]["resourceVersion"]))
    second = ok(http(api_client, "POST", path, body=_configmap("rv-b")), 201)
    seen.append(int(second["metadata"]["resourceVersion"]))
    patched = ok(
        http(
            api_client,
            "PATCH",
            f"{path}/rv-a",
            body={"data": {"k": "3"}},
            content_type=MERGE,
        ),
        200,
    )
    seen.append(int(patched["metadata"]["resourceVersion"]))
    assert seen == sorted(seen)
    assert len(set(seen)) == len(seen), f"resourceVersions repeat: {seen}"
    listed = ok(http(api_client, "GET", path), 200)
    assert int(listed["metadata"]["resourceVersion"]) >= seen[-1]


def test_unchanged_update_keeps_resource_version(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = ok(http(api_client, "POST", path, body=_configmap("noop", k="1")), 201)
    again = ok(http(api_client, "PUT", f"{path}/noop", body=created), 200)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_generate_name(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}
    names = set()
    for _ in range(2):
        created = ok(http(api_client, "POST", path, body=body), 201)
        name = created["metadata"]["name"]
        assert re.fullmatch(r"gen-[a-z0-9]{5}", name), name
        assert created["metadata"]["generateName"] == "gen-"
        assert http(api_client, "GET", f"{path}/{name}").status == 200
        names.add(name)
    assert len(names) == 2


# --------------------------------------------------------------------------- errors


def test_stale_update_is_conflict_with_plural_kind(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = ok(http(api_client, "POST", path, body=_configmap("stale", k="1")), 201)
    fresh = dict(created, data={"k": "2"})
    ok(http(api_client, "PUT", f"{path}/stale", body=fresh), 200)
    created["data"] = {"k": "3"}
    response = http(api_client, "PUT", f"{path}/stale", body=created)
    assert response.status == 409
    assert response.body["kind"] == "Status"
    assert response.body["reason"] == "Conflict"
    assert response.body["code"] == 409
    assert response.body["details"]["kind"] == "configmaps"
    assert response.body["details"]["name"] == "stale"
    current = ok(http(api_client, "GET", f"{path}/stale"), 200)
    assert current["data"] == {"k": "2"}


def test_stale_deployment_update_conflict_names_group(api_client: Any, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    created = ok(http(api_client, "POST", path, body=_deployment("stale-deploy")), 201)
    created["metadata"]["resourceVersion"] = str(int(created["metadata"]["resourceVersion"]) - 1)
    response = http(api_client, "PUT", f"{path}/stale-deploy", body=created)
    assert response.status == 409
    assert response.body["reason"] == "Conflict"
    assert response.body["details"] == {
        "name": "stale-deploy",
        "group": "apps",
        "kind": "deployments",
    }


def test_create_existing_is_already_exists(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", path, body=_configmap("twice")), 201)
    response = http(api_client, "POST", path, body=_configmap("twice", x="y"))
    assert response.status == 409
    assert response.body["kind"] == "Status"
    assert response.body["reason"] == "AlreadyExists"
    assert response.body["details"] == {"name": "twice", "kind": "configmaps"}
    assert not ok(http(api_client, "GET", f"{path}/twice"), 200).get("data")


def test_missing_object_is_not_found(api_client: Any, namespace: str) -> None:
    response = http(api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps/nope")
    assert response.status == 404
    assert response.body["kind"] == "Status"
    assert response.body["status"] == "Failure"
    assert response.body["reason"] == "NotFound"
    assert response.body["code"] == 404
    assert response.body["details"] == {"name": "nope", "kind": "configmaps"}

    response = http(api_client, "GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/nope")
    assert response.status == 404
    assert response.body["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}

    response = http(api_client, "DELETE", f"/api/v1/namespaces/{namespace}/configmaps/nope")
    assert response.status == 404
    assert response.body["reason"] == "NotFound"


def test_create_in_missing_namespace_is_not_found(api_client: Any) -> None:
    missing = _unique("ovs-missing")
    response = http(
        api_client, "POST", f"/api/v1/namespaces/{missing}/configmaps", body=_configmap("x")
    )
    assert response.status == 404
    assert response.body["reason"] == "NotFound"
    assert response.body["details"] == {"name": missing, "kind": "namespaces"}


# --------------------------------------------------------------------------- generation & status


def test_deployment_generation_bumps_on_spec_and_annotations_not_labels(
    api_client: Any, namespace: str
) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/gen-bump"
    ok(
        http(
            api_client,
            "POST",
            f"/apis/apps/v1/namespaces/{namespace}/deployments",
            body=_deployment("gen-bump"),
        ),
        201,
    )

    def merge(patch: dict[str, Any]) -> int:
        body = ok(
            http(
                api_client,
                "PATCH",
                path,
                body=patch,
                content_type=MERGE,
            ),
            200,
        )
        return int(body["metadata"]["generation"])

    assert merge({"spec": {"replicas": 1}}) == 2
    assert merge({"metadata": {"annotations": {"example.com/note": "x"}}}) == 3
    assert merge({"metadata": {"labels": {"extra": "label"}}}) == 3
    assert merge({"spec": {"minReadySeconds": 5}}) == 4


def test_deployment_put_ignores_status(api_client: Any, namespace: str) -> None:
    collection = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    ok(http(api_client, "POST", collection, body=_deployment("put-status")), 201)

    def mutate(obj: dict[str, Any]) -> None:
        obj["spec"]["minReadySeconds"] = 7
        obj["status"] = {"observedGeneration": 99, "replicas": 5, "collisionCount": 4}

    updated = _put_with_retry(api_client, f"{collection}/put-status", mutate)
    assert updated["spec"]["minReadySeconds"] == 7
    assert updated["status"].get("observedGeneration") != 99
    assert updated["status"].get("collisionCount") != 4
    stored = ok(http(api_client, "GET", f"{collection}/put-status"), 200)
    assert stored["status"].get("collisionCount") != 4


def test_deployment_status_put_ignores_spec_and_labels(api_client: Any, namespace: str) -> None:
    collection = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    ok(http(api_client, "POST", collection, body=_deployment("status-put")), 201)

    def mutate(obj: dict[str, Any]) -> None:
        obj["spec"]["minReadySeconds"] = 9
        obj["metadata"]["labels"]["changed"] = "yes"
        obj.setdefault("status", {})["collisionCount"] = 3

    updated = _put_with_retry(api_client, f"{collection}/status-put/status", mutate)
    assert updated["status"]["collisionCount"] == 3
    assert updated["spec"].get("minReadySeconds", 0) == 0
    assert "changed" not in updated["metadata"]["labels"]
    assert updated["metadata"]["generation"] == 1
    stored = ok(http(api_client, "GET", f"{collection}/status-put"), 200)
    assert stored["status"]["collisionCount"] == 3
    assert stored["spec"].get("minReadySeconds", 0) == 0


def test_deployment_status_put_keeps_annotations(api_client: Any, namespace: str) -> None:
    """kube-apiserver resets only spec and labels on deployments/status (strategy.go):
    annotations written through /status are stored, without a generation bump."""
    collection = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    ok(http(api_client, "POST", collection, body=_deployment("status-annotated")), 201)

    def mutate(obj: dict[str, Any]) -> None:
        obj["metadata"].setdefault("annotations", {})["example.com/via-status"] = "kept"

    updated = _put_with_retry(api_client, f"{collection}/status-annotated/status", mutate)
    assert updated["metadata"].get("annotations", {}).get("example.com/via-status") == "kept"
    assert updated["metadata"]["generation"] == 1


def test_pod_status_subresource(api_client: Any, namespace: str) -> None:
    collection = f"/api/v1/namespaces/{namespace}/pods"
    ok(http(api_client, "POST", collection, body=_pod("status-pod")), 201)
    patched = ok(
        http(
            api_client,
            "PATCH",
            f"{collection}/status-pod/status",
            body={
                "spec": {"activeDeadlineSeconds": 77},
                "status": {"conditions": [{"type": "example.com/Probe", "status": "True"}]},
            },
            content_type=STRATEGIC,
        ),
        200,
    )
    assert "activeDeadlineSeconds" not in patched["spec"]
    types = {c["type"]: c["status"] for c in patched["status"]["conditions"]}
    assert types["example.com/Probe"] == "True"

    status_view = ok(http(api_client, "GET", f"{collection}/status-pod/status"), 200)
    assert status_view["kind"] == "Pod"
    assert "example.com/Probe" in {c["type"] for c in status_view["status"]["conditions"]}

    def mutate(obj: dict[str, Any]) -> None:
        obj["metadata"].setdefault("labels", {})["touched"] = "yes"
        obj["status"]["conditions"] = [{"type": "example.com/Other", "status": "False"}]

    updated = _put_with_retry(api_client, f"{collection}/status-pod", mutate)
    assert updated["metadata"]["labels"]["touched"] == "yes"
    conditions = {c["type"] for c in updated["status"].get("conditions", [])}
    assert "example.com/Other" not in conditions
    assert "example.com/Probe" in conditions


# --------------------------------------------------------------------------- defaulting


def test_pod_defaults(api_client: Any, namespace: str) -> None:
    created = ok(
        http(api_client, "POST", f"/api/v1/namespaces/{namespace}/pods", body=_pod("defaults")),
        201,
    )
    spec = created["spec"]
    assert spec["serviceAccountName"] == "default"
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["schedulerName"] == "default-scheduler"
    tolerations = {t["key"]: t for t in spec["tolerations"]}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        assert tolerations[key] == {
            "key": key,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        }
    token_volumes = [
        v for v in spec["volumes"] if v["name"].startswith("kube-api-access-") and "projected" in v
    ]
    assert len(token_volumes) == 1
    sources = token_volumes[0]["projected"]["sources"]
    token = next(s["serviceAccountToken"] for s in sources if "serviceAccountToken" in s)
    assert token["path"] == "token"
    assert token["expirationSeconds"] == 3607
    assert any(s.get("configMap", {}).get("name") == "kube-root-ca.crt" for s in sources)
    mounts = spec["containers"][0]["volumeMounts"]
    assert {
        "name": token_volumes[0]["name"],
        "readOnly": True,
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
    } in mounts
    container = spec["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert created["status"]["phase"] == "Pending"


def test_pod_with_missing_service_account_is_forbidden(api_client: Any, namespace: str) -> None:
    response = http(
        api_client,
        "POST",
        f"/api/v1/namespaces/{namespace}/pods",
        body=_pod("no-sa", serviceAccountName="does-not-exist"),
    )
    assert response.status == 403
    assert response.body["reason"] == "Forbidden"
    assert http(api_client, "GET", f"/api/v1/namespaces/{namespace}/pods/no-sa").status == 404


def test_service_defaults_and_cluster_ip_kept_across_put(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/services"
    created = ok(
        http(
            api_client,
            "POST",
            path,
            body={
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "svc"},
                "spec": {
                    "selector": {"app": "svc"},
                    "ports": [
                        {"name": "http", "port": 80},
                        {"name": "alt", "port": 81, "targetPort": "web"},
                    ],
                },
            },
        ),
        201,
    )
    spec = created["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["ports"][0]["protocol"] == "TCP"
    assert spec["ports"][0]["targetPort"] == 80
    assert spec["ports"][1]["targetPort"] == "web"
    cluster_ip = spec["clusterIP"]
    assert re.fullmatch(r"[0-9a-f.:]+", cluster_ip), cluster_ip
    assert spec["clusterIPs"] == [cluster_ip]

    def mutate(obj: dict[str, Any]) -> None:
        obj["spec"].pop("clusterIP", None)
        obj["spec"].pop("clusterIPs", None)
        obj["spec"]["ports"] = [{"name": "http", "port": 8080}]

    updated = _put_with_retry(api_client, f"{path}/svc", mutate)
    assert updated["spec"]["clusterIP"] == cluster_ip
    assert updated["spec"]["ports"] == [
        {"name": "http", "port": 8080, "protocol": "TCP", "targetPort": 8080}
    ]


# --------------------------------------------------------------------------- leases


def test_lease_update_with_resource_version_and_race(api_client: Any, namespace: str) -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0},
    }
    created = ok(http(api_client, "POST", path, body=lease), 201)
    assert created["spec"]["holderIdentity"] == "a"

    renewed = dict(created, spec=dict(created["spec"], renewTime="2026-01-01T00:00:00.000000Z"))
    renewed = ok(http(api_client, "PUT", f"{path}/leader", body=renewed), 200)
    assert renewed["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z"
    assert int(renewed["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])

    def attempt(holder: str) -> tuple[str, int, Any]:
        body = dict(renewed, spec=dict(renewed["spec"], holderIdentity=holder, leaseTransitions=1))
        answer = http(api_client, "PUT", f"{path}/leader", body=body)
        return holder, answer.status, answer.body

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(attempt, ["b", "c"]))
    assert sorted(status for _, status, _ in outcomes) == [200, 409], outcomes
    winner = next(holder for holder, status, _ in outcomes if status == 200)
    loser = next(answer for _, status, answer in outcomes if status == 409)
    assert loser["reason"] == "Conflict"
    assert loser["details"]["kind"] == "leases"
    assert loser["details"]["group"] == "coordination.k8s.io"
    stored = ok(http(api_client, "GET", f"{path}/leader"), 200)
    assert stored["spec"]["holderIdentity"] == winner
