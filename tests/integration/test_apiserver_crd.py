"""Conformance: CustomResourceDefinitions and the resources they serve.

Each test creates CRDs in a group of its own (``t<hex>.example.com``) and deletes them at
the end, so it can run against a shared real cluster.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MERGE = "application/merge-patch+json"


def _open(
    api_client: Any,
    method: str,
    path: str,
    *,
    query: dict[str, Any] | None = None,
    body: Any = None,
    content_type: str = "application/json",
    read_timeout: float = 30.0,
) -> Any:
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    params = [
        (k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items()
    ]
    api_client.update_params_for_auth(headers, params, ["BearerToken"], path, method, None)
    url = api_client.configuration.host + path + ("?" + urlencode(params) if params else "")
    return api_client.rest_client.pool_manager.request(
        method,
        url,
        body=None if body is None else json.dumps(body).encode(),
        headers=headers,
        timeout=urllib3.Timeout(connect=10, read=read_timeout),
        preload_content=False,
        retries=False,
    )


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
    resp = _open(api_client, method, path, query=query, body=body, content_type=content_type)
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


class Crd:
    """A created CRD: group, version v1, plural, kind, scope."""

    def __init__(self, group: str, plural: str, kind: str, namespaced: bool) -> None:
        self.group = group
        self.plural = plural
        self.kind = kind
        self.namespaced = namespaced
        self.name = f"{plural}.{group}"
        self.api_version = f"{group}/v1"

    def collection(self, namespace: str | None = None) -> str:
        if self.namespaced and namespace:
            return f"/apis/{self.group}/v1/namespaces/{namespace}/{self.plural}"
        return f"/apis/{self.group}/v1/{self.plural}"

    def body(self, name: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": {"name": name},
            "spec": spec,
        }


def _definition(crd: Crd, *, status_subresource: bool) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "properties": {
                            "size": {"type": "integer", "minimum": 0},
                            "color": {"type": "string"},
                        },
                    },
                    "status": {
                        "type": "object",
                        "properties": {"phase": {"type": "string"}},
                    },
                },
            }
        },
    }
    if status_subresource:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd.name},
        "spec": {
            "group": crd.group,
            "scope": "Namespaced" if crd.namespaced else "Cluster",
            "names": {
                "plural": crd.plural,
                "singular": crd.kind.lower(),
                "kind": crd.kind,
                "listKind": f"{crd.kind}List",
            },
            "versions": [version],
        },
    }


@pytest.fixture
def make_crd(api_client: Any) -> Iterator[Callable[..., Crd]]:
    """Create a CRD in a unique group, wait until it is Established and served."""
    created: list[Crd] = []

    def make(*, namespaced: bool = True, status_subresource: bool = True) -> Crd:
        group = f"t{uuid.uuid4().hex[:10]}.example.com"
        crd = Crd(group, "widgets", "Widget", namespaced)
        answer = _ok(
            _http(
                api_client,
                "POST",
                CRDS,
                body=_definition(crd, status_subresource=status_subresource),
            ),
            201,
        )
        assert answer["metadata"]["name"] == crd.name
        created.append(crd)

        def established() -> bool:
            body = _ok(_http(api_client, "GET", f"{CRDS}/{crd.name}"), 200)
            conditions = {
                c["type"]: c["status"] for c in body.get("status", {}).get("conditions", [])
            }
            return conditions.get("Established") == "True"

        _eventually(established, 30, f"CRD {crd.name} Established")
        _eventually(
            lambda: _http(api_client, "GET", crd.collection())[0] == 200,
            30,
            f"{crd.plural}.{crd.group} served",
        )
        return crd

    yield make
    for crd in created:
        status, body = _http(api_client, "DELETE", f"{CRDS}/{crd.name}")
        assert status in (200, 404), body


def test_crd_is_established_with_accepted_names(
    api_client: Any, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    body = _ok(_http(api_client, "GET", f"{CRDS}/{crd.name}"), 200)
    assert body["kind"] == "CustomResourceDefinition"
    conditions = {c["type"]: c["status"] for c in body["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"
    assert body["status"]["acceptedNames"]["kind"] == "Widget"
    assert body["status"]["acceptedNames"]["plural"] == "widgets"
    assert body["status"]["storedVersions"] == ["v1"]


def test_crd_appears_in_discovery(api_client: Any, make_crd: Callable[..., Crd]) -> None:
    crd = make_crd()

    def in_groups() -> bool:
        groups = _ok(_http(api_client, "GET", "/apis"), 200)["groups"]
        return any(g["name"] == crd.group for g in groups)

    _eventually(in_groups, 30, "group listed in /apis")
    group = _ok(_http(api_client, "GET", f"/apis/{crd.group}"), 200)
    assert group["kind"] == "APIGroup"
    assert group["preferredVersion"] == {"groupVersion": crd.api_version, "version": "v1"}

    resources = _ok(_http(api_client, "GET", f"/apis/{crd.group}/v1"), 200)
    assert resources["kind"] == "APIResourceList"
    assert resources["groupVersion"] == crd.api_version
    by_name = {r["name"]: r for r in resources["resources"]}
    assert by_name["widgets"]["kind"] == "Widget"
    assert by_name["widgets"]["namespaced"] is True
    assert by_name["widgets"]["singularName"] == "widget"
    assert {"create", "delete", "get", "list", "patch", "update", "watch"} <= set(
        by_name["widgets"]["verbs"]
    )
    assert set(by_name["widgets/status"]["verbs"]) == {"get", "patch", "update"}


def test_namespaced_custom_object_crud(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    custom = client.CustomObjectsApi(api_client)
    args = (crd.group, "v1", namespace, crd.plural)

    created = custom.create_namespaced_custom_object(*args, crd.body("w1", size=1, color="red"))
    assert created["apiVersion"] == crd.api_version
    assert created["kind"] == "Widget"
    meta = created["metadata"]
    assert meta["uid"]
    assert meta["resourceVersion"].isdigit()
    assert meta["generation"] == 1
    assert meta["namespace"] == namespace

    got = custom.get_namespaced_custom_object(*args, "w1")
    assert got["spec"] == {"size": 1, "color": "red"}

    listed = custom.list_namespaced_custom_object(*args)
    assert listed["kind"] == "WidgetList"
    assert listed["apiVersion"] == crd.api_version
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w1"]
    assert listed["items"][0]["kind"] == "Widget"

    patched = custom.patch_namespaced_custom_object(*args, "w1", {"spec": {"size": 2}})
    assert patched["spec"] == {"size": 2, "color": "red"}
    assert patched["metadata"]["generation"] == 2

    patched["spec"]["color"] = "blue"
    replaced = custom.replace_namespaced_custom_object(*args, "w1", patched)
    assert replaced["spec"] == {"size": 2, "color": "blue"}
    assert replaced["metadata"]["generation"] == 3

    with pytest.raises(ApiException) as conflict:
        custom.replace_namespaced_custom_object(*args, "w1", patched)
    assert conflict.value.status == 409
    assert json.loads(conflict.value.body)["details"]["kind"] == "widgets"

    with pytest.raises(ApiException) as exists:
        custom.create_namespaced_custom_object(*args, crd.body("w1"))
    assert exists.value.status == 409
    assert json.loads(exists.value.body)["reason"] == "AlreadyExists"

    custom.delete_namespaced_custom_object(*args, "w1")
    with pytest.raises(ApiException) as missing:
        custom.get_namespaced_custom_object(*args, "w1")
    assert missing.value.status == 404
    details = json.loads(missing.value.body)["details"]
    assert details == {"name": "w1", "group": crd.group, "kind": "widgets"}


def test_custom_resource_list_carries_empty_continue(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    _ok(_http(api_client, "POST", crd.collection(namespace), body=crd.body("a")), 201)
    body = _ok(_http(api_client, "GET", crd.collection(namespace)), 200)
    assert body["metadata"]["continue"] == ""
    assert body["metadata"]["resourceVersion"].isdigit()
    everywhere = _ok(_http(api_client, "GET", crd.collection()), 200)
    assert everywhere["metadata"]["continue"] == ""
    assert [i["metadata"]["namespace"] for i in everywhere["items"]] == [namespace]


def test_cluster_scoped_custom_object(api_client: Any, make_crd: Callable[..., Crd]) -> None:
    crd = make_crd(namespaced=False)
    custom = client.CustomObjectsApi(api_client)
    created = custom.create_cluster_custom_object(
        crd.group, "v1", crd.plural, crd.body("c1", size=3)
    )
    assert "namespace" not in created["metadata"]
    got = custom.get_cluster_custom_object(crd.group, "v1", crd.plural, "c1")
    assert got["spec"] == {"size": 3}
    listed = _ok(_http(api_client, "GET", crd.collection()), 200)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["c1"]
    assert listed["metadata"]["continue"] == ""

    resources = _ok(_http(api_client, "GET", f"/apis/{crd.group}/v1"), 200)
    assert {r["name"]: r for r in resources["resources"]}["widgets"]["namespaced"] is False

    custom.delete_cluster_custom_object(crd.group, "v1", crd.plural, "c1")
    _eventually(
        lambda: _http(api_client, "GET", f"{crd.collection()}/c1")[0] == 404, 10, "c1 deleted"
    )


def test_custom_resource_status_subresource(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    path = f"{crd.collection(namespace)}/s1"
    _ok(_http(api_client, "POST", crd.collection(namespace), body=crd.body("s1", size=1)), 201)

    on_status = _ok(
        _http(
            api_client,
            "PATCH",
            f"{path}/status",
            body={"spec": {"size": 50}, "status": {"phase": "Ready"}},
            content_type=MERGE,
        ),
        200,
    )
    assert on_status["status"] == {"phase": "Ready"}
    assert on_status["spec"] == {"size": 1}
    assert on_status["metadata"]["generation"] == 1

    on_main = _ok(
        _http(
            api_client,
            "PATCH",
            path,
            body={"spec": {"size": 2}, "status": {"phase": "Broken"}},
            content_type=MERGE,
        ),
        200,
    )
    assert on_main["spec"] == {"size": 2}
    assert on_main["status"] == {"phase": "Ready"}
    assert on_main["metadata"]["generation"] == 2

    labelled = _ok(
        _http(
            api_client,
            "PATCH",
            path,
            body={"metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}}},
            content_type=MERGE,
        ),
        200,
    )
    assert labelled["metadata"]["generation"] == 2

    status_view = _ok(_http(api_client, "GET", f"{path}/status"), 200)
    assert status_view["kind"] == "Widget"
    assert status_view["status"] == {"phase": "Ready"}


def test_custom_resource_create_drops_status_with_status_subresource(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    body = crd.body("fresh", size=1)
    body["status"] = {"phase": "ignored-on-create"}
    created = _ok(_http(api_client, "POST", crd.collection(namespace), body=body), 201)
    assert "status" not in created, created.get("status")
    stored = _ok(_http(api_client, "GET", f"{crd.collection(namespace)}/fresh"), 200)
    assert "status" not in stored


def test_without_status_subresource_status_is_plain_data(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd(status_subresource=False)
    body = crd.body("plain", size=1)
    body["status"] = {"phase": "Stored"}
    created = _ok(_http(api_client, "POST", crd.collection(namespace), body=body), 201)
    assert created["status"] == {"phase": "Stored"}
    status, _ = _http(api_client, "GET", f"{crd.collection(namespace)}/plain/status")
    assert status == 404


def test_strategic_merge_patch_on_custom_resource_is_unsupported(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    path = f"{crd.collection(namespace)}/smp"
    created = _ok(
        _http(api_client, "POST", crd.collection(namespace), body=crd.body("smp", size=1)), 201
    )
    status, body = _http(
        api_client,
        "PATCH",
        path,
        body={"spec": {"size": 5}},
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 415
    assert body["reason"] == "UnsupportedMediaType"
    stored = _ok(_http(api_client, "GET", path), 200)
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    json_patched = _ok(
        _http(
            api_client,
            "PATCH",
            path,
            body=[{"op": "replace", "path": "/spec/size", "value": 6}],
            content_type="application/json-patch+json",
        ),
        200,
    )
    assert json_patched["spec"]["size"] == 6


def test_custom_resource_schema_validation(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    status, body = _http(
        api_client, "POST", crd.collection(namespace), body=crd.body("bad", size="big")
    )
    assert status == 422
    assert body["reason"] == "Invalid"
    assert body["details"]["kind"] == "Widget"
    assert body["details"]["group"] == crd.group
    assert any(c["field"] == "spec.size" for c in body["details"]["causes"])
    assert _http(api_client, "GET", f"{crd.collection(namespace)}/bad")[0] == 404

    status, body = _http(
        api_client, "POST", crd.collection(namespace), body=crd.body("neg", size=-1)
    )
    assert status == 422


def test_custom_resource_unknown_fields_are_pruned(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    created = _ok(
        _http(
            api_client,
            "POST",
            crd.collection(namespace),
            body=crd.body("pruned", size=1, unknownField="dropped"),
        ),
        201,
    )
    assert created["spec"] == {"size": 1}


def test_custom_resource_watch(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    listed = _ok(_http(api_client, "GET", crd.collection(namespace)), 200)
    resp = _open(
        api_client,
        "GET",
        crd.collection(namespace),
        query={
            "watch": True,
            "resourceVersion": listed["metadata"]["resourceVersion"],
            "timeoutSeconds": 20,
        },
        read_timeout=20,
    )
    try:
        assert resp.status == 200
        _ok(
            _http(api_client, "POST", crd.collection(namespace), body=crd.body("seen", size=1)), 201
        )
        buffer = b""
        for chunk in resp.stream(amt=None, decode_content=False):
            buffer += chunk
            if b"\n" in buffer:
                break
        event = json.loads(buffer.split(b"\n", 1)[0])
    finally:
        resp.close()
        resp.release_conn()
    assert event["type"] == "ADDED"
    assert event["object"]["kind"] == "Widget"
    assert event["object"]["apiVersion"] == crd.api_version
    assert event["object"]["metadata"]["name"] == "seen"


def test_deleting_crd_stops_serving_its_resource(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    _ok(_http(api_client, "POST", crd.collection(namespace), body=crd.body("doomed")), 201)
    answer = _ok(_http(api_client, "DELETE", f"{CRDS}/{crd.name}"), 200)
    assert answer["metadata"]["name"] == crd.name
    _eventually(
        lambda: _http(api_client, "GET", crd.collection(namespace))[0] == 404,
        30,
        "resource no longer served after its CRD is deleted",
    )
    _eventually(lambda: _http(api_client, "GET", f"{CRDS}/{crd.name}")[0] == 404, 30, "CRD deleted")
