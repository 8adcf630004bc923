"""Conformance: protobuf, as client-go's typed clients (and so kubectl and the e2e suite)
speak it: request bodies of every built-in kind, answers in protobuf where kube-apiserver
gives them (``Accept: application/vnd.kubernetes.protobuf, application/json``), JSON for
custom resources, and watch streams of length-prefixed ``WatchEvent`` frames.

The official client does not read protobuf, so answers are decoded with the local
server's own decoder and compared with the JSON answer for the same object; kubectl's
typed ``create`` commands (``test_apiserver_kubectl.py``) decode them with Go's.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from apiserver.machinery import protobuf
from tests.integration.rawhttp import JSON, http, ok, stream

PROTOBUF = protobuf.CONTENT_TYPE
TYPED = f"{PROTOBUF}, {JSON}"  # what client-go's typed clients send
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _raw(
    api_client: Any, method: str, path: str, accept: str, **kwargs: Any
) -> tuple[int, str, bytes]:
    resp = stream(api_client, method, path, headers={"Accept": accept}, **kwargs)
    try:
        return resp.status, resp.headers.get("Content-Type", ""), resp.read()
    finally:
        resp.release_conn()


def _decoded(status_ctype_body: tuple[int, str, bytes]) -> tuple[int, dict[str, Any]]:
    status, ctype, body = status_ctype_body
    assert ctype == PROTOBUF, (status, ctype, body[:200])
    return status, protobuf.decode(body)[2]


def _normal(value: Any) -> Any:
    """Without empty maps, lists, nulls and empty strings: protobuf has no way to say the
    first three (Go's JSON drops most of them too), and an empty string is Go's zero value
    however it travels (a Condition's ``reason`` is ``""`` in JSON, absent here)."""
    if isinstance(value, dict):
        out = {k: _normal(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, {}, [], "")}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _in_order(items: list[Any]) -> list[Any]:
    """A list's items, normalised and by name: componentstatuses are listed in the order
    their health probes answer (componentstatus/rest.go List), not in storage order."""
    return sorted(_normal(items), key=lambda item: json.dumps(item.get("metadata"), sort_keys=True))


def _objects(namespace: str) -> list[tuple[str, dict[str, Any]]]:
    labels = {"app": "web"}
    container = {
        "name": "web",
        "image": "registry.k8s.io/pause:3.9",
        "ports": [{"containerPort": 80}],
    }
    return [
        (
            f"/api/v1/namespaces/{namespace}/configmaps",
            {"metadata": {"name": "cm", "labels": labels}, "data": {"a": "1", "b": ""}},
        ),
        (
            f"/api/v1/namespaces/{namespace}/secrets",
            {"metadata": {"name": "sec"}, "data": {"k": "dg=="}, "type": "Opaque"},
        ),
        (
            f"/api/v1/namespaces/{namespace}/services",
            {
                "metadata": {"name": "svc"},
                "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": "http"}]},
            },
        ),
        (
            f"/apis/apps/v1/namespaces/{namespace}/deployments",
            {
                "metadata": {"name": "web", "annotations": {"note": "x"}},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [container]},
                    },
                },
            },
        ),
        (
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
            {
                "metadata": {"name": "reader"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
            },
        ),
    ]


def _exact(listed: dict[str, Any]) -> dict[str, str]:
    """The query that lists again at the revision of ``listed``: both reads then see the
    same objects, whatever a cluster's controllers write in between."""
    return {
        "resourceVersion": listed["metadata"]["resourceVersion"],
        "resourceVersionMatch": "Exact",
    }


def _read_twice(api_client: Any, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One object read in JSON and in protobuf at one resourceVersion. A get cannot ask
    for an exact revision, and a cluster's controllers write (a Deployment's status):
    read again until the two answers name the same resourceVersion."""
    deadline = time.monotonic() + 10
    while True:
        status, got = _decoded(_raw(api_client, "GET", path, TYPED))
        assert status == 200, got
        as_json = ok(http(api_client, "GET", path), 200)
        versions = (got["metadata"]["resourceVersion"], as_json["metadata"]["resourceVersion"])
        if versions[0] == versions[1]:
            return as_json, got
        assert time.monotonic() < deadline, f"{path} kept changing for 10 s: {versions}"
        time.sleep(0.1)


@pytest.mark.parametrize(
    "index", range(5), ids=["configmap", "secret", "service", "deployment", "role"]
)
def test_answers_in_protobuf_equal_the_json_answers(
    api_client: Any, namespace: str, index: int
) -> None:
    collection, body = _objects(namespace)[index]
    status, created = _decoded(_raw(api_client, "POST", collection, TYPED, body=body))
    assert status == 201
    name = body["metadata"]["name"]
    assert created["metadata"]["name"] == name
    as_json, got = _read_twice(api_client, f"{collection}/{name}")
    assert _normal(got) == _normal(as_json)
    listed_json = ok(http(api_client, "GET", collection), 200)
    status, listed = _decoded(_raw(api_client, "GET", collection, TYPED, query=_exact(listed_json)))
    assert status == 200, listed
    assert listed["kind"] == as_json["kind"] + "List"
    assert [i["metadata"]["name"] for i in listed["items"]] == [
        i["metadata"]["name"] for i in listed_json["items"]
    ]
    assert _normal(listed["items"]) == _normal(listed_json["items"])


def test_errors_are_protobuf_status(api_client: Any, namespace: str) -> None:
    status, answer = _decoded(
        _raw(api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps/absent", TYPED)
    )
    assert status == 404
    assert answer["kind"] == "Status"
    assert answer["reason"] == "NotFound"
    assert answer["details"] == {"name": "absent", "kind": "configmaps"}
    assert answer["message"] == 'configmaps "absent" not found'


def test_json_first_is_answered_in_json(api_client: Any, namespace: str) -> None:
    status, ctype, body = _raw(
        api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps", f"{JSON}, {PROTOBUF}"
    )
    assert (status, ctype) == (200, JSON)
    assert body.startswith(b"{")


def _discovered(api_client: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every listable resource of every served group-version (legacy discovery)."""
    versions = ["/api/v1"] + [
        f"/apis/{v['groupVersion']}"
        for g in ok(http(api_client, "GET", "/apis"), 200)["groups"]
        for v in g["versions"]
    ]
    for prefix in versions:
        for resource in ok(http(api_client, "GET", prefix), 200)["resources"]:
            if "/" not in resource["name"] and "list" in resource["verbs"]:
                yield prefix, resource


def test_every_listable_builtin_lists_in_protobuf(api_client: Any, namespace: str) -> None:
    """A list of every served built-in resource (in this test's namespace where it is
    namespaced) answers in protobuf, with the items of the JSON answer."""
    seen = 0
    for prefix, resource in _discovered(api_client):
        path = (
            f"{prefix}/namespaces/{namespace}/{resource['name']}"
            if resource["namespaced"]
            else f"{prefix}/{resource['name']}"
        )
        as_json = ok(http(api_client, "GET", path), 200)
        if protobuf.message_of(as_json["apiVersion"], as_json["kind"]) is None:
            # a version this decoder has no schema for (a cluster may enable alpha or beta
            # versions, e.g. --runtime-config=api/all=true); the local server serves none
            continue
        # the protobuf list at the JSON list's revision: the same objects, whatever a
        # cluster's controllers write meanwhile (componentstatuses has no revision)
        query = _exact(as_json) if as_json["metadata"].get("resourceVersion") else {}
        status, listed = _decoded(_raw(api_client, "GET", path, TYPED, query=query))
        assert status == 200, (path, listed)
        assert listed["kind"] == as_json["kind"], path
        assert listed["metadata"].get("resourceVersion") == as_json["metadata"].get(
            "resourceVersion"
        ), path
        assert _in_order(listed.get("items", [])) == _in_order(as_json["items"]), path
        seen += 1
    assert seen >= 50, f"only {seen} listable resources discovered"


def _crd(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "listKind": "WidgetList",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["size"],
                                    "properties": {
                                        "size": {"type": "integer", "minimum": 0, "default": 1},
                                        "tags": {"type": "array", "items": {"type": "string"}},
                                        "extra": {
                                            "type": "object",
                                            "additionalProperties": {"type": "string"},
                                        },
                                        "port": {"x-kubernetes-int-or-string": True},
                                    },
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def test_crd_created_from_protobuf_and_custom_resources_answer_json(
    api_client: Any, namespace: str
) -> None:
    """The e2e suite creates CRDs in protobuf; the resources they serve have no protobuf
    form: JSON when the client accepts it, 406 when it accepts protobuf only."""
    group = f"t{uuid.uuid4().hex[:8]}.example.com"
    crd = _crd(group)
    body = protobuf.encode(crd)
    status, created = _decoded(
        _raw(api_client, "POST", CRDS, TYPED, body=body, content_type=PROTOBUF)
    )
    try:
        assert status == 201, created
        schema = created["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        wanted = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert schema == wanted
        as_json = ok(http(api_client, "GET", f"{CRDS}/{crd['metadata']['name']}"), 200)
        assert as_json["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == wanted
        path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
        deadline = time.monotonic() + 30
        while http(api_client, "GET", path).status != 200:
            assert time.monotonic() < deadline, "the CRD was not served within 30 s"
            time.sleep(0.2)
        widget = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 2},
        }
        ok(http(api_client, "POST", path, body=widget), 201)
        status, ctype, raw = _raw(api_client, "GET", path, TYPED)
        assert (status, ctype) == (200, JSON)
        assert raw.startswith(b"{")
        status, ctype, raw = _raw(api_client, "GET", f"{path}/w", PROTOBUF)
        assert status == 406, raw
        assert (
            b"only the following media types are accepted: application/json, application/yaml"
            in raw
        )
    finally:
        http(api_client, "DELETE", f"{CRDS}/{crd['metadata']['name']}")


def _frames(resp: Any, count: int) -> list[dict[str, Any]]:
    """``count`` events of a protobuf watch: a 4-byte big-endian length, then a
    ``WatchEvent`` whose object is an enveloped object."""
    events = []
    buffer = b""
    while len(events) < count:
        while len(buffer) < 4 or len(buffer) < 4 + int.from_bytes(buffer[:4], "big"):
            chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1)
            assert chunk, "the watch ended early"
            buffer += chunk
        size = int.from_bytes(buffer[:4], "big")
        frame, buffer = buffer[4 : 4 + size], buffer[4 + size :]
        events.append(
            protobuf.decode_message("k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent", frame)
        )
    return events


def test_watch_in_protobuf(api_client: Any, namespace: str) -> None:
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    rv = ok(http(api_client, "GET", collection), 200)["metadata"]["resourceVersion"]
    resp = stream(
        api_client,
        "GET",
        collection,
        query={"watch": True, "resourceVersion": rv, "timeoutSeconds": 20},
        headers={"Accept": TYPED},
        read_timeout=30,
    )
    try:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == f"{PROTOBUF};stream=watch"
        ok(
            http(
                api_client,
                "POST",
                collection,
                body={"metadata": {"name": "w1"}, "data": {"a": "b"}},
            ),
            201,
        )
        ok(http(api_client, "DELETE", f"{collection}/w1"), 200)
        events = _frames(resp, 2)
    finally:
        resp.close()
        resp.release_conn()
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]
    added = events[0]["object"]
    assert (added["apiVersion"], added["kind"]) == ("v1", "ConfigMap")
    assert added["metadata"]["name"] == "w1"
    assert added["data"] == {"a": "b"}
