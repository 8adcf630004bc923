"""Conformance: PATCH — JSON merge patch, JSON patch (RFC 6902), strategic merge patch.

Server-side apply is out of scope. Strategic merge on custom resources (415) is checked in
``test_apiserver_crd.py``, where a CRD exists.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.rawhttp import JSON_PATCH, MERGE, STRATEGIC, http, ok

PAUSE_IMAGE = "registry.k8s.io/pause:3.9"


@pytest.fixture
def configmap(api_client: Any, namespace: str) -> tuple[str, dict[str, Any]]:
    """A ConfigMap with data a=1, b=2 and a label; returns (path, created object)."""
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "patched", "labels": {"keep": "yes", "drop": "yes"}},
        "data": {"a": "1", "b": "2"},
    }
    created = ok(http(api_client, "POST", collection, body=body), 201)
    return f"{collection}/patched", created


def _container(name: str, *ports: int) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": PAUSE_IMAGE}
    if ports:
        container["ports"] = [{"containerPort": p, "name": f"p{p}"} for p in ports]
    return container


@pytest.fixture
def deployment(api_client: Any, namespace: str) -> str:
    """A Deployment with containers a (port 8080) and b; returns its path."""
    collection = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "smp"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "smp"}},
            "template": {
                "metadata": {"labels": {"app": "smp"}},
                "spec": {"containers": [_container("a", 8080), _container("b")]},
            },
        },
    }
    ok(http(api_client, "POST", collection, body=body), 201)
    return f"{collection}/smp"


def _containers(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in obj["spec"]["template"]["spec"]["containers"]}


# --------------------------------------------------------------------------- merge patch


def test_merge_patch_merges_maps_and_null_deletes(
    api_client: Any, configmap: tuple[str, dict[str, Any]]
) -> None:
    path, created = configmap
    patched = ok(
        http(
            api_client,
            "PATCH",
            path,
            body={
                "metadata": {"labels": {"drop": None, "new": "yes"}},
                "data": {"a": None, "b": "3", "c": "4"},
            },
            content_type=MERGE,
        ),
        200,
    )
    assert patched["data"] == {"b": "3", "c": "4"}
    assert patched["metadata"]["labels"] == {"keep": "yes", "new": "yes"}
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert ok(http(api_client, "GET", path), 200)["data"] == {"b": "3", "c": "4"}


def test_merge_patch_replaces_lists(api_client: Any, deployment: str) -> None:
    patched = ok(
        http(
            api_client,
            "PATCH",
            deployment,
            body={"spec": {"template": {"spec": {"containers": [_container("only")]}}}},
            content_type=MERGE,
        ),
        200,
    )
    assert list(_containers(patched)) == ["only"]


def test_merge_patch_with_stale_resource_version_conflicts(
    api_client: Any, configmap: tuple[str, dict[str, Any]]
) -> None:
    path, created = configmap
    ok(http(api_client, "PATCH", path, body={"data": {"a": "2"}}, content_type=MERGE), 200)
    response = http(
        api_client,
        "PATCH",
        path,
        body={
            "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
            "data": {"a": "3"},
        },
        content_type=MERGE,
    )
    assert response.status == 409
    assert response.body["reason"] == "Conflict"
    assert ok(http(api_client, "GET", path), 200)["data"]["a"] == "2"


def test_writes_naming_an_earlier_incarnations_uid_are_refused(
    api_client: Any, namespace: str, configmap: tuple[str, dict[str, Any]]
) -> None:
    """A name deleted and created again is another object: a write that names the uid it
    saw before (a controller's cached copy) must not touch the new one. kube-apiserver
    1.36: a merge patch whose ``metadata.uid`` differs reaches ``ValidateObjectMetaUpdate``
    (patch.go gives the store no precondition): 422, ``metadata.uid`` immutable; a PUT's
    uid is a storage precondition: 409; a DELETE's ``preconditions.uid``: 409."""
    path, created = configmap
    old_uid = created["metadata"]["uid"]
    mine = {"metadata": {"uid": old_uid, "annotations": {"by": "same"}}}
    assert ok(http(api_client, "PATCH", path, body=mine, content_type=MERGE), 200)["metadata"][
        "annotations"
    ] == {"by": "same"}
    ok(http(api_client, "DELETE", path), 200)
    collection = path.rsplit("/", 1)[0]
    again = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "patched"}}
    new_uid = ok(http(api_client, "POST", collection, body=again), 201)["metadata"]["uid"]
    assert new_uid != old_uid

    stale = {"metadata": {"uid": old_uid, "annotations": {"by": "stale"}}}
    response = http(api_client, "PATCH", path, body=stale, content_type=MERGE)
    assert response.status == 422, response.body
    assert response.body["reason"] == "Invalid"
    assert response.body["details"]["kind"] == "ConfigMap"
    # rest.BeforeUpdate checks the metadata (validateCommonFields), then the kind's own
    # ValidateConfigMapUpdate checks it again: the cause is listed twice, the message once
    immutable = f'metadata.uid: Invalid value: "{old_uid}": field is immutable'
    assert [(c["reason"], c["field"]) for c in response.body["details"]["causes"]] == [
        ("FieldValueInvalid", "metadata.uid")
    ] * 2
    assert response.body["message"] == f'ConfigMap "patched" is invalid: {immutable}'

    put = {**again, "metadata": {"name": "patched", "uid": old_uid}, "data": {"by": "stale"}}
    response = http(api_client, "PUT", path, body=put)
    assert response.status == 409, response.body
    assert response.body["reason"] == "Conflict"
    assert response.body["details"] == {"name": "patched", "kind": "configmaps"}
    assert f"Precondition failed: UID in precondition: {old_uid}" in response.body["message"]

    response = http(api_client, "DELETE", path, body={"preconditions": {"uid": old_uid}})
    assert response.status == 409, response.body
    current = ok(http(api_client, "GET", path), 200)
    assert current["metadata"]["uid"] == new_uid
    assert "annotations" not in current["metadata"] and "data" not in current


def test_patch_of_missing_object_is_not_found(api_client: Any, namespace: str) -> None:
    response = http(
        api_client,
        "PATCH",
        f"/api/v1/namespaces/{namespace}/configmaps/absent",
        body={"data": {"a": "1"}},
        content_type=MERGE,
    )
    assert response.status == 404
    assert response.body["details"] == {"name": "absent", "kind": "configmaps"}


def test_patch_with_unknown_content_type_is_unsupported_media_type(
    api_client: Any, configmap: tuple[str, dict[str, Any]]
) -> None:
    path, _ = configmap
    response = http(api_client, "PATCH", path, body={"data": {"a": "9"}}, content_type="text/plain")
    assert response.status == 415
    assert response.body["reason"] == "UnsupportedMediaType"


def test_patch_producing_invalid_object_is_rejected(api_client: Any, deployment: str) -> None:
    before = ok(http(api_client, "GET", deployment), 200)
    response = http(
        api_client, "PATCH", deployment, body={"spec": {"replicas": -1}}, content_type=MERGE
    )
    assert response.status == 422
    assert response.body["reason"] == "Invalid"
    assert response.body["details"]["kind"] == "Deployment"
    assert any(c["field"] == "spec.replicas" for c in response.body["details"]["causes"])
    after = ok(http(api_client, "GET", deployment), 200)
    assert after["spec"]["replicas"] == before["spec"]["replicas"]


# --------------------------------------------------------------------------- JSON patch


def test_json_patch_operations(api_client: Any, configmap: tuple[str, dict[str, Any]]) -> None:
    path, _ = configmap
    patched = ok(
        http(
            api_client,
            "PATCH",
            path,
            body=[
                {"op": "test", "path": "/data/a", "value": "1"},
                {"op": "add", "path": "/data/c", "value": "3"},
                {"op": "replace", "path": "/data/a", "value": "9"},
                {"op": "remove", "path": "/data/b"},
                {"op": "copy", "from": "/data/c", "path": "/data/d"},
                {"op": "add", "path": "/metadata/labels/example.com~1x", "value": "y"},
            ],
            content_type=JSON_PATCH,
        ),
        200,
    )
    assert patched["data"] == {"a": "9", "c": "3", "d": "3"}
    assert patched["metadata"]["labels"]["example.com/x"] == "y"


def test_json_patch_failing_test_op_stores_nothing(
    api_client: Any, configmap: tuple[str, dict[str, Any]]
) -> None:
    path, created = configmap
    response = http(
        api_client,
        "PATCH",
        path,
        body=[
            {"op": "replace", "path": "/data/a", "value": "changed"},
            {"op": "test", "path": "/data/b", "value": "not-two"},
        ],
        content_type=JSON_PATCH,
    )
    assert response.status == 422
    assert response.body["kind"] == "Status"
    stored = ok(http(api_client, "GET", path), 200)
    assert stored["data"] == {"a": "1", "b": "2"}
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_json_patch_removing_missing_path_is_rejected(
    api_client: Any, configmap: tuple[str, dict[str, Any]]
) -> None:
    path, created = configmap
    response = http(
        api_client,
        "PATCH",
        path,
        body=[{"op": "remove", "path": "/data/missing"}],
        content_type=JSON_PATCH,
    )
    assert response.status == 422
    stored = ok(http(api_client, "GET", path), 200)
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_json_patch_that_is_not_a_list_is_bad_request(
    api_client: Any, configmap: tuple[str, dict[str, Any]]
) -> None:
    path, _ = configmap
    response = http(
        api_client,
        "PATCH",
        path,
        body={"op": "add", "path": "/data/c", "value": "3"},
        content_type=JSON_PATCH,
    )
    assert response.status == 400
    assert response.body["reason"] == "BadRequest"


# --------------------------------------------------------------------------- strategic merge


def test_strategic_merge_merges_containers_by_name_and_ports_by_container_port(
    api_client: Any, deployment: str
) -> None:
    patched = ok(
        http(
            api_client,
            "PATCH",
            deployment,
            body={
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "a", "ports": [{"containerPort": 9090, "name": "p9090"}]},
                                _container("c"),
                            ]
                        }
                    }
                }
            },
            content_type=STRATEGIC,
        ),
        200,
    )
    containers = _containers(patched)
    assert set(containers) == {"a", "b", "c"}
    assert sorted(p["containerPort"] for p in containers["a"]["ports"]) == [8080, 9090]
    assert containers["a"]["image"] == PAUSE_IMAGE
    assert containers["c"]["image"] == PAUSE_IMAGE

    again = ok(
        http(
            api_client,
            "PATCH",
            deployment,
            body={
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "a", "ports": [{"containerPort": 8080, "name": "web"}]}
                            ]
                        }
                    }
                }
            },
            content_type=STRATEGIC,
        ),
        200,
    )
    ports = {p["containerPort"]: p["name"] for p in _containers(again)["a"]["ports"]}
    assert ports == {8080: "web", 9090: "p9090"}


def test_strategic_merge_patch_delete_directive(api_client: Any, deployment: str) -> None:
    patched = ok(
        http(
            api_client,
            "PATCH",
            deployment,
            body={
                "spec": {"template": {"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}}
            },
            content_type=STRATEGIC,
        ),
        200,
    )
    assert set(_containers(patched)) == {"a"}
    assert set(_containers(ok(http(api_client, "GET", deployment), 200))) == {"a"}


def test_strategic_merge_null_deletes_map_key(
    api_client: Any, configmap: tuple[str, dict[str, Any]]
) -> None:
    path, _ = configmap
    patched = ok(
        http(
            api_client,
            "PATCH",
            path,
            body={"metadata": {"labels": {"drop": None}}, "data": {"b": None, "e": "5"}},
            content_type=STRATEGIC,
        ),
        200,
    )
    assert patched["metadata"]["labels"] == {"keep": "yes"}
    assert patched["data"] == {"a": "1", "e": "5"}


def test_strategic_patch_without_a_merge_key_is_an_internal_error(
    api_client: Any, namespace: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
    }
    ok(http(api_client, "POST", base, body=pod))
    response = http(
        api_client,
        "PATCH",
        f"{base}/p",
        body={"spec": {"containers": [{"image": "x"}]}},
        content_type=STRATEGIC,
    )
    assert response.status == 500, response.body
    assert response.body["message"] == (
        "map: map[image:x] does not contain declared merge key: name"
    )
