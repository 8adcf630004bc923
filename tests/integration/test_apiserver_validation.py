"""Conformance: request validation — malformed bodies (400), invalid objects (422 Invalid).

After every rejected write the object must not exist: a rejection stores nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.rawhttp import MERGE, Response, http, ok

PAUSE_IMAGE = "registry.k8s.io/pause:3.9"


def _assert_invalid(
    response: Response, kind: str, field: str, group: str | None = None
) -> dict[str, Any]:
    status, body = response.status, response.body
    assert status == 422, f"HTTP {status}: {body}"
    assert body["kind"] == "Status"
    assert body["status"] == "Failure"
    assert body["reason"] == "Invalid"
    assert body["code"] == 422
    details = body["details"]
    assert details["kind"] == kind
    if group is not None:
        assert details["group"] == group
    fields = [c.get("field") for c in details.get("causes", [])]
    assert any(f == field or f.startswith(field) for f in fields if f), (field, fields)
    return details


def _deployment(name: str, **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "replicas": 0,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "main", "image": PAUSE_IMAGE}]},
        },
    }
    base.update(spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {k: v for k, v in base.items() if v is not None},
    }


# --------------------------------------------------------------------------- 400 Bad Request


def test_malformed_json_is_bad_request(api_client: Any, namespace: str) -> None:
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    response = http(
        api_client,
        "POST",
        collection,
        body=b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "broken"}',
    )
    assert response.status == 400, response.body
    assert response.body["kind"] == "Status"
    assert response.body["reason"] == "BadRequest"
    assert response.body["code"] == 400
    assert http(api_client, "GET", f"{collection}/broken").status == 404


def test_kind_not_matching_url_is_bad_request(api_client: Any, namespace: str) -> None:
    response = http(
        api_client,
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps",
        body={
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "mismatch"},
            "stringData": {"a": "b"},
        },
    )
    assert response.status == 400, response.body
    assert response.body["reason"] == "BadRequest"
    assert (
        http(api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps/mismatch").status == 404
    )
    assert http(api_client, "GET", f"/api/v1/namespaces/{namespace}/secrets/mismatch").status == 404


def test_namespace_in_body_not_matching_url_is_bad_request(api_client: Any, namespace: str) -> None:
    response = http(
        api_client,
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps",
        body={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "elsewhere", "namespace": "some-other-namespace"},
        },
    )
    assert response.status == 400, response.body
    assert response.body["reason"] == "BadRequest"
    assert (
        http(api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps/elsewhere").status
        == 404
    )


def test_name_in_body_not_matching_url_on_update_is_bad_request(
    api_client: Any, namespace: str
) -> None:
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    created = ok(
        http(
            api_client,
            "POST",
            collection,
            body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one"}},
        ),
        201,
    )
    created["metadata"]["name"] = "two"
    response = http(api_client, "PUT", f"{collection}/one", body=created)
    assert response.status == 400, response.body
    assert response.body["reason"] == "BadRequest"
    assert http(api_client, "GET", f"{collection}/two").status == 404


# --------------------------------------------------------------------------- 422 Invalid names


@pytest.mark.parametrize(
    ("resource", "kind", "name"),
    [
        ("configmaps", "ConfigMap", "Upper-Case"),
        ("configmaps", "ConfigMap", "under_score"),
        ("configmaps", "ConfigMap", "x" * 254),
        ("services", "Service", "s" * 64),
        ("services", "Service", "dotted.name"),
        ("services", "Service", "-leading-dash"),
    ],
    ids=["uppercase", "underscore", "too-long-254", "svc-too-long-64", "svc-dot", "svc-dash"],
)
def test_invalid_name_is_rejected(
    api_client: Any, namespace: str, resource: str, kind: str, name: str
) -> None:
    collection = f"/api/v1/namespaces/{namespace}/{resource}"
    body: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}
    if kind == "Service":
        body["spec"] = {"ports": [{"port": 80}]}
    details = _assert_invalid(
        http(api_client, "POST", collection, body=body), kind, "metadata.name"
    )
    assert details["name"] == name
    assert http(api_client, "GET", f"{collection}/{name}").status in (404, 400)
    listed = ok(http(api_client, "GET", collection), 200)
    assert name not in [i["metadata"]["name"] for i in listed["items"]]


def test_service_name_may_start_with_a_digit(api_client: Any, namespace: str) -> None:
    """1.36 validates Service names as RFC 1123 labels (RelaxedServiceNameValidation)."""
    collection = f"/api/v1/namespaces/{namespace}/services"
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "1starts-with-digit"},
        "spec": {"ports": [{"port": 80}]},
    }
    created = ok(http(api_client, "POST", collection, body=body), 201)
    assert created["metadata"]["name"] == "1starts-with-digit"


def test_missing_name_is_invalid(api_client: Any, namespace: str) -> None:
    _assert_invalid(
        http(
            api_client,
            "POST",
            f"/api/v1/namespaces/{namespace}/configmaps",
            body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}},
        ),
        "ConfigMap",
        "metadata.name",
    )


def test_invalid_namespace_name(api_client: Any) -> None:
    _assert_invalid(
        http(
            api_client,
            "POST",
            "/api/v1/namespaces",
            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Not-Valid"}},
        ),
        "Namespace",
        "metadata.name",
    )


# --------------------------------------------------------------------------- 422 Invalid specs


def test_pod_without_containers_is_invalid(api_client: Any, namespace: str) -> None:
    collection = f"/api/v1/namespaces/{namespace}/pods"
    _assert_invalid(
        http(
            api_client,
            "POST",
            collection,
            body={
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "empty"},
                "spec": {"containers": []},
            },
        ),
        "Pod",
        "spec.containers",
    )
    assert http(api_client, "GET", f"{collection}/empty").status == 404


def test_deployment_without_selector_is_invalid(api_client: Any, namespace: str) -> None:
    collection = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    _assert_invalid(
        http(api_client, "POST", collection, body=_deployment("nosel", selector=None)),
        "Deployment",
        "spec.selector",
        group="apps",
    )
    assert http(api_client, "GET", f"{collection}/nosel").status == 404


def test_deployment_selector_not_matching_template_is_invalid(
    api_client: Any, namespace: str
) -> None:
    collection = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    _assert_invalid(
        http(
            api_client,
            "POST",
            collection,
            body=_deployment("mismatch", selector={"matchLabels": {"app": "other"}}),
        ),
        "Deployment",
        "spec.template.metadata.labels",
        group="apps",
    )
    assert http(api_client, "GET", f"{collection}/mismatch").status == 404


def test_deployment_selector_is_immutable(api_client: Any, namespace: str) -> None:
    collection = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    ok(http(api_client, "POST", collection, body=_deployment("fixed")), 201)
    # A patch, not a PUT of the created object: on a cluster the deployment controller
    # writes the status in between, and a stale PUT would be a 409, not the 422 tested.
    change = {
        "spec": {
            "selector": {"matchLabels": {"app": "fixed", "extra": "x"}},
            "template": {"metadata": {"labels": {"app": "fixed", "extra": "x"}}},
        }
    }
    _assert_invalid(
        http(api_client, "PATCH", f"{collection}/fixed", body=change, content_type=MERGE),
        "Deployment",
        "spec.selector",
        group="apps",
    )
    stored = ok(http(api_client, "GET", f"{collection}/fixed"), 200)
    assert stored["spec"]["selector"] == {"matchLabels": {"app": "fixed"}}


def test_service_port_out_of_range_is_invalid(api_client: Any, namespace: str) -> None:
    collection = f"/api/v1/namespaces/{namespace}/services"
    _assert_invalid(
        http(
            api_client,
            "POST",
            collection,
            body={
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "badport"},
                "spec": {"ports": [{"port": 70000}]},
            },
        ),
        "Service",
        "spec.ports[0].port",
    )
    assert http(api_client, "GET", f"{collection}/badport").status == 404


def test_two_controller_owner_references_are_invalid(api_client: Any, namespace: str) -> None:
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    owners = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": f"owner-{i}",
            "uid": f"00000000-0000-0000-0000-00000000000{i}",
            "controller": True,
        }
        for i in (1, 2)
    ]
    _assert_invalid(
        http(
            api_client,
            "POST",
            collection,
            body={
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "two-controllers", "ownerReferences": owners},
            },
        ),
        "ConfigMap",
        "metadata.ownerReferences",
    )
    assert http(api_client, "GET", f"{collection}/two-controllers").status == 404


@pytest.mark.parametrize(
    "labels",
    [{"app": "has space"}, {"app": "v" * 64}, {"bad key!": "x"}, {"-leading": "x"}],
    ids=["value-space", "value-too-long", "key-chars", "key-leading-dash"],
)
def test_invalid_labels_are_rejected(
    api_client: Any, namespace: str, labels: dict[str, str]
) -> None:
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    _assert_invalid(
        http(
            api_client,
            "POST",
            collection,
            body={
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "badlabels", "labels": labels},
            },
        ),
        "ConfigMap",
        "metadata.labels",
    )
    assert http(api_client, "GET", f"{collection}/badlabels").status == 404
