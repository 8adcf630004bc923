"""Conformance: label selectors, field selectors and list pagination.

Every list is narrowed by a label unique to the test, so objects that controllers of a
real cluster add (``kube-root-ca.crt``, ...) never change the counts asserted here.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.integration.rawhttp import http, ok

PAUSE_IMAGE = "registry.k8s.io/pause:3.9"


def _names(body: dict[str, Any]) -> set[str]:
    return {item["metadata"]["name"] for item in body["items"]}


def _make_configmaps(api_client: Any, namespace: str, labels: dict[str, dict[str, str]]) -> None:
    for name, lab in labels.items():
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": lab}}
        ok(http(api_client, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body), 201)


# --------------------------------------------------------------------------- label selectors


LABEL_CASES = [
    ("env=prod", {"one"}),
    ("env==prod", {"one"}),
    ("env!=prod", {"two", "three", "four"}),
    ("env in (prod,dev)", {"one", "two"}),
    ("env in (prod, dev)", {"one", "two"}),
    ("env notin (prod,dev)", {"three", "four"}),
    ("tier", {"one", "two"}),
    ("!tier", {"three", "four"}),
    ("env=prod,tier=web", {"one"}),
    ("env in (dev),tier", {"two"}),
    ("env=nothing", set()),
]


def test_label_selectors(api_client: Any, namespace: str) -> None:
    tag = uuid.uuid4().hex[:8]
    _make_configmaps(
        api_client,
        namespace,
        {
            "one": {"suite": tag, "env": "prod", "tier": "web"},
            "two": {"suite": tag, "env": "dev", "tier": "db"},
            "three": {"suite": tag, "env": "test"},
            "four": {"suite": tag},
        },
    )
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    wrong = {}
    for selector, expected in LABEL_CASES:
        body = ok(http(api_client, "GET", path, query={"labelSelector": f"suite={tag},{selector}"}))
        if _names(body) != expected:
            wrong[selector] = sorted(_names(body))
    assert not wrong, f"selectors answered wrong sets: {wrong}"

    everywhere = ok(
        http(api_client, "GET", "/api/v1/configmaps", query={"labelSelector": f"suite={tag},tier"})
    )
    assert {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere["items"]} == {
        (namespace, "one"),
        (namespace, "two"),
    }


@pytest.mark.parametrize("selector", ["env in prod", "env=(", "=prod", "env notin"])
def test_malformed_label_selector_is_bad_request(
    api_client: Any, namespace: str, selector: str
) -> None:
    response = http(
        api_client,
        "GET",
        f"/api/v1/namespaces/{namespace}/configmaps",
        query={"labelSelector": selector},
    )
    assert response.status == 400, response.body
    assert response.body["kind"] == "Status"
    assert response.body["reason"] == "BadRequest"


# --------------------------------------------------------------------------- field selectors


def _pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"fs": "yes"}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": PAUSE_IMAGE}]},
    }


def test_pod_field_selectors(api_client: Any, namespace: str) -> None:
    node_a = f"ovs-fake-node-a-{uuid.uuid4().hex[:6]}"
    node_b = f"ovs-fake-node-b-{uuid.uuid4().hex[:6]}"
    path = f"/api/v1/namespaces/{namespace}/pods"
    ok(http(api_client, "POST", path, body=_pod("pod-a", node_a)), 201)
    ok(http(api_client, "POST", path, body=_pod("pod-b", node_b)), 201)

    cases = [
        ("metadata.name=pod-a", {"pod-a"}),
        ("metadata.name!=pod-a", {"pod-b"}),
        (f"metadata.namespace={namespace}", {"pod-a", "pod-b"}),
        ("metadata.namespace=some-other-namespace", set()),
        (f"spec.nodeName={node_a}", {"pod-a"}),
        (f"spec.nodeName!={node_a}", {"pod-b"}),
        ("status.phase=Pending", {"pod-a", "pod-b"}),
        ("status.phase=Running", set()),
        (f"status.phase=Pending,spec.nodeName={node_b}", {"pod-b"}),
        (f"metadata.name=pod-a,spec.nodeName={node_b}", set()),
    ]
    wrong = {}
    for selector, expected in cases:
        body = ok(
            http(
                api_client,
                "GET",
                path,
                query={"labelSelector": "fs=yes", "fieldSelector": selector},
            )
        )
        if _names(body) != expected:
            wrong[selector] = sorted(_names(body))
    assert not wrong, f"field selectors answered wrong sets: {wrong}"

    everywhere = ok(
        http(
            api_client,
            "GET",
            "/api/v1/pods",
            query={"fieldSelector": f"metadata.namespace={namespace},spec.nodeName={node_a}"},
        )
    )
    assert _names(everywhere) == {"pod-a"}


def test_configmap_field_selector_by_name(api_client: Any, namespace: str) -> None:
    tag = uuid.uuid4().hex[:8]
    _make_configmaps(api_client, namespace, {"x": {"t": tag}, "y": {"t": tag}})
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    body = ok(http(api_client, "GET", path, query={"fieldSelector": "metadata.name=y"}))
    assert _names(body) == {"y"}


@pytest.mark.parametrize(
    ("resource", "selector", "message"),
    [
        ("pods", "spec.foo=bar", "field label not supported: spec.foo"),
        ("pods", "metadata.labels=x", "field label not supported: metadata.labels"),
        # Kinds without a field label conversion of their own get the generic one.
        (
            "configmaps",
            "data.k=v",
            '"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
    ],
)
def test_unsupported_field_selector_is_bad_request(
    api_client: Any, namespace: str, resource: str, selector: str, message: str
) -> None:
    response = http(
        api_client,
        "GET",
        f"/api/v1/namespaces/{namespace}/{resource}",
        query={"fieldSelector": selector},
    )
    assert response.status == 400, response.body
    assert response.body["kind"] == "Status"
    assert response.body["reason"] == "BadRequest"
    assert response.body["message"] == message


# --------------------------------------------------------------------------- pagination


@pytest.fixture
def seven(api_client: Any, namespace: str) -> tuple[str, set[str]]:
    """Seven configmaps labelled with a unique tag; returns (label selector, names)."""
    tag = uuid.uuid4().hex[:8]
    names = {f"page-{i}" for i in range(7)}
    _make_configmaps(api_client, namespace, {name: {"pg": tag} for name in names})
    return f"pg={tag}", names


def test_limit_and_continue_walk_every_item_once(
    api_client: Any, namespace: str, seven: tuple[str, set[str]]
) -> None:
    selector, names = seven
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    seen: list[str] = []
    versions = set()
    token = ""
    pages = 0
    while True:
        query = {"labelSelector": selector, "limit": 3}
        if token:
            query["continue"] = token
        body = ok(http(api_client, "GET", path, query=query))
        pages += 1
        assert len(body["items"]) <= 3
        assert "remainingItemCount" not in body["metadata"]
        versions.add(body["metadata"]["resourceVersion"])
        seen.extend(item["metadata"]["name"] for item in body["items"])
        if pages == 1:
            # Written after the first page: a paginated list is one snapshot.
            extra = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "page-late", "labels": {"pg": selector.split("=")[1]}},
            }
            ok(http(api_client, "POST", path, body=extra), 201)
        token = body["metadata"].get("continue", "")
        if not token:
            break
        assert pages < 10, "pagination does not terminate"
    assert sorted(seen) == sorted(names), "each item exactly once, none written after page 1"
    assert pages == 3
    assert len(versions) == 1, f"pages of one list served at different versions: {versions}"


def test_limit_without_selector_reports_remaining_item_count(
    api_client: Any, namespace: str, seven: tuple[str, set[str]]
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    total = len(ok(http(api_client, "GET", path))["items"])
    assert total >= 7
    body = ok(http(api_client, "GET", path, query={"limit": 2}))
    assert len(body["items"]) == 2
    assert body["metadata"]["continue"]
    assert body["metadata"]["remainingItemCount"] == total - 2


def test_limit_with_label_selector_has_continue_without_remaining_count(
    api_client: Any, namespace: str, seven: tuple[str, set[str]]
) -> None:
    selector, _ = seven
    body = ok(
        http(
            api_client,
            "GET",
            f"/api/v1/namespaces/{namespace}/configmaps",
            query={"labelSelector": selector, "limit": 2},
        )
    )
    assert len(body["items"]) == 2
    assert body["metadata"]["continue"]
    assert "remainingItemCount" not in body["metadata"]


def test_resource_version_zero_ignores_limit(
    api_client: Any, namespace: str, seven: tuple[str, set[str]]
) -> None:
    selector, names = seven
    deadline = time.monotonic() + 10
    while True:
        body = ok(
            http(
                api_client,
                "GET",
                f"/api/v1/namespaces/{namespace}/configmaps",
                query={"labelSelector": selector, "limit": 2, "resourceVersion": "0"},
            )
        )
        # RV=0 may be served from a cache that lags a few milliseconds behind the writes.
        limited = bool(body["metadata"].get("continue"))
        if _names(body) == names or limited or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert _names(body) == names
    assert not body["metadata"].get("continue")


def test_invalid_continue_token_is_bad_request(api_client: Any, namespace: str) -> None:
    response = http(
        api_client,
        "GET",
        f"/api/v1/namespaces/{namespace}/configmaps",
        query={"limit": 1, "continue": "not-a-token"},
    )
    assert response.status == 400, response.body
    assert response.body["reason"] == "BadRequest"


def test_resource_version_match_without_resource_version_is_invalid(
    api_client: Any, namespace: str
) -> None:
    response = http(
        api_client,
        "GET",
        f"/api/v1/namespaces/{namespace}/configmaps",
        query={"resourceVersionMatch": "Exact"},
    )
    assert response.status == 422, response.body
    assert response.body["reason"] == "Invalid"
