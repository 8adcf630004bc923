"""Conformance: CustomResourceDefinitions and the resources they serve.

Each test creates CRDs in a group of its own (``t<hex>.example.com``) and deletes them at
the end, so it can run against a shared real cluster.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.rawhttp import MERGE, STRATEGIC, eventually, http, ok, stream

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


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
        answer = ok(
            http(
                api_client,
                "POST",
                CRDS,
                body=_definition(crd, status_subresource=status_subresource),
            ),
            201,
        )
        assert answer["metadata"]["name"] == crd.name
        # The create answer is the object as stored, before the controllers accept the
        # names: never Established yet, and conditions may be null.
        assert not (answer.get("status") or {}).get("conditions")
        created.append(crd)

        def established() -> bool:
            # status.conditions is null (not []) until the naming and establishing
            # controllers have run: kube-apiserver's create answer always carries null.
            body = ok(http(api_client, "GET", f"{CRDS}/{crd.name}"), 200)
            conditions = {
                c["type"]: c["status"] for c in (body.get("status") or {}).get("conditions") or []
            }
            return conditions.get("Established") == "True"

        eventually(established, 30, f"CRD {crd.name} Established")
        eventually(
            lambda: http(api_client, "GET", crd.collection()).status == 200,
            30,
            f"{crd.plural}.{crd.group} served",
        )
        return crd

    yield make
    for crd in created:
        response = http(api_client, "DELETE", f"{CRDS}/{crd.name}")
        assert response.status in (200, 404), response.body


def test_a_custom_resource_negotiates_wildcards_and_names_what_it_writes(
    api_client: Any, make_crd: Callable[..., Crd], namespace: str
) -> None:
    """A custom resource is not served by go-restful: kube's NegotiateOutputMediaType
    matches application/* to the first serializer, JSON, and its 406 names its own list."""
    crd = make_crd()
    path = crd.collection(namespace)
    answer = http(api_client, "GET", path, headers={"Accept": "application/*"})
    assert answer.status == 200, answer.body
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.body["kind"] == "WidgetList"
    refused = http(api_client, "GET", path, headers={"Accept": "text/html"})
    assert refused.status == 406, refused.body
    assert refused.body["message"] == (
        "only the following media types are accepted: application/json, application/yaml, "
        "application/vnd.kubernetes.protobuf"
    )


def test_a_custom_resource_body_names_its_kind_and_api_version(
    api_client: Any, make_crd: Callable[..., Crd], namespace: str
) -> None:
    """The unstructured decoder needs the body's own kind (a built-in's codec takes it
    from the URL): a body without one is refused quoting it, one without an apiVersion
    naming the expected version."""
    crd = make_crd()
    path = crd.collection(namespace)
    bare = {"metadata": {"name": "bare"}}
    raw = '{"metadata": {"name": "bare", "labels": {"a": "b"}}}'
    refused = http(api_client, "POST", path, body=raw.encode())
    assert refused.status == 400, refused.body
    assert refused.body["message"] == (
        "the object provided is unrecognized (must be of type Widget): "
        f"Object 'Kind' is missing in '{raw}' ({raw[:30]} ...)"
    )
    unversioned = {"kind": "Widget", "metadata": {"name": "bare"}}
    refused = http(api_client, "POST", path, body=unversioned)
    assert refused.status == 400, refused.body
    assert refused.body["message"] == (
        f"the API version in the data () does not match the expected API version ({crd.group}/v1)"
    )
    assert http(api_client, "GET", f"{path}/bare").status == 404
    built_in = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", built_in, query={"dryRun": "All"}, body=bare), 201)


def test_crd_is_established_with_accepted_names(
    api_client: Any, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    body = ok(http(api_client, "GET", f"{CRDS}/{crd.name}"), 200)
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
        groups = ok(http(api_client, "GET", "/apis"), 200)["groups"]
        return any(g["name"] == crd.group for g in groups)

    eventually(in_groups, 30, "group listed in /apis")
    group = ok(http(api_client, "GET", f"/apis/{crd.group}"), 200)
    assert group["kind"] == "APIGroup"
    assert group["preferredVersion"] == {"groupVersion": crd.api_version, "version": "v1"}

    resources = ok(http(api_client, "GET", f"/apis/{crd.group}/v1"), 200)
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
    ok(http(api_client, "POST", crd.collection(namespace), body=crd.body("a")), 201)
    body = ok(http(api_client, "GET", crd.collection(namespace)), 200)
    assert body["metadata"]["continue"] == ""
    assert body["metadata"]["resourceVersion"].isdigit()
    everywhere = ok(http(api_client, "GET", crd.collection()), 200)
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
    listed = ok(http(api_client, "GET", crd.collection()), 200)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["c1"]
    assert listed["metadata"]["continue"] == ""

    resources = ok(http(api_client, "GET", f"/apis/{crd.group}/v1"), 200)
    assert {r["name"]: r for r in resources["resources"]}["widgets"]["namespaced"] is False

    custom.delete_cluster_custom_object(crd.group, "v1", crd.plural, "c1")
    eventually(
        lambda: http(api_client, "GET", f"{crd.collection()}/c1").status == 404, 10, "c1 deleted"
    )


def test_custom_resource_status_subresource(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    path = f"{crd.collection(namespace)}/s1"
    ok(http(api_client, "POST", crd.collection(namespace), body=crd.body("s1", size=1)), 201)

    on_status = ok(
        http(
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

    on_main = ok(
        http(
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

    labelled = ok(
        http(
            api_client,
            "PATCH",
            path,
            body={"metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}}},
            content_type=MERGE,
        ),
        200,
    )
    assert labelled["metadata"]["generation"] == 2

    status_view = ok(http(api_client, "GET", f"{path}/status"), 200)
    assert status_view["kind"] == "Widget"
    assert status_view["status"] == {"phase": "Ready"}


def test_custom_resource_create_drops_status_with_status_subresource(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    body = crd.body("fresh", size=1)
    body["status"] = {"phase": "ignored-on-create"}
    created = ok(http(api_client, "POST", crd.collection(namespace), body=body), 201)
    assert "status" not in created, created.get("status")
    stored = ok(http(api_client, "GET", f"{crd.collection(namespace)}/fresh"), 200)
    assert "status" not in stored


def test_without_status_subresource_status_is_plain_data(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd(status_subresource=False)
    body = crd.body("plain", size=1)
    body["status"] = {"phase": "Stored"}
    created = ok(http(api_client, "POST", crd.collection(namespace), body=body), 201)
    assert created["status"] == {"phase": "Stored"}
    response = http(api_client, "GET", f"{crd.collection(namespace)}/plain/status")
    assert response.status == 404


def test_strategic_merge_patch_on_custom_resource_is_unsupported(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    path = f"{crd.collection(namespace)}/smp"
    created = ok(
        http(api_client, "POST", crd.collection(namespace), body=crd.body("smp", size=1)), 201
    )
    response = http(
        api_client,
        "PATCH",
        path,
        body={"spec": {"size": 5}},
        content_type=STRATEGIC,
    )
    assert response.status == 415
    assert response.body["reason"] == "UnsupportedMediaType"
    stored = ok(http(api_client, "GET", path), 200)
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    json_patched = ok(
        http(
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
    response = http(api_client, "POST", crd.collection(namespace), body=crd.body("bad", size="big"))
    assert response.status == 422
    assert response.body["reason"] == "Invalid"
    assert response.body["details"]["kind"] == "Widget"
    assert response.body["details"]["group"] == crd.group
    assert any(c["field"] == "spec.size" for c in response.body["details"]["causes"])
    assert http(api_client, "GET", f"{crd.collection(namespace)}/bad").status == 404

    response = http(api_client, "POST", crd.collection(namespace), body=crd.body("neg", size=-1))
    assert response.status == 422


def test_custom_resource_unknown_fields_are_pruned(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    created = ok(
        http(
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
    listed = ok(http(api_client, "GET", crd.collection(namespace)), 200)
    resp = stream(
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
        ok(http(api_client, "POST", crd.collection(namespace), body=crd.body("seen", size=1)), 201)
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
    ok(http(api_client, "POST", crd.collection(namespace), body=crd.body("doomed")), 201)
    before = ok(http(api_client, "GET", f"{CRDS}/{crd.name}"), 200)
    assert not before["metadata"].get("finalizers")  # added by the first DELETE
    answer = ok(http(api_client, "DELETE", f"{CRDS}/{crd.name}"), 200)
    assert answer["metadata"]["name"] == crd.name
    assert answer["metadata"]["deletionTimestamp"]
    assert answer["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
    terminating = {c["type"]: c for c in answer["status"]["conditions"]}["Terminating"]
    assert (terminating["status"], terminating["reason"], terminating["message"]) == (
        "True",
        "InstanceDeletionPending",
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
    )
    eventually(
        lambda: http(api_client, "GET", crd.collection(namespace)).status == 404,
        30,
        "resource no longer served after its CRD is deleted",
    )
    eventually(
        lambda: http(api_client, "GET", f"{CRDS}/{crd.name}").status == 404, 30, "CRD deleted"
    )


def test_custom_resource_strict_field_validation(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    head = '{"apiVersion": "' + crd.api_version + '", "kind": "Widget", '
    body = (
        head + '"metadata": {"name": "w", "unknownMeta": 1},'
        ' "spec": {"size": 1, "size": 2, "zz": 1, "color": "red", "aa": 2}}'
    ).encode()
    response = http(
        api_client,
        "POST",
        crd.collection(namespace),
        body=body,
        query={"fieldValidation": "Strict"},
    )
    assert response.status == 400, response.body
    assert response.body["reason"] == "BadRequest"
    assert response.body["message"].endswith(
        'strict decoding error: duplicate field "spec.size", unknown field '
        '"metadata.unknownMeta", unknown field "spec.aa", unknown field "spec.zz"'
    )
    assert http(api_client, "GET", f"{crd.collection(namespace)}/w").status == 404
    created = ok(
        http(
            api_client,
            "POST",
            crd.collection(namespace),
            body=body,
            query={"fieldValidation": "Ignore"},
        ),
        201,
    )
    assert created["spec"] == {"size": 2, "color": "red"}
    assert "unknownMeta" not in created["metadata"]


def test_custom_resource_managed_fields_per_subresource(
    api_client: Any, namespace: str, make_crd: Callable[..., Crd]
) -> None:
    crd = make_crd()
    base = crd.collection(namespace)
    created = ok(
        http(api_client, "POST", base, body=crd.body("w", size=1), query={"fieldManager": "maker"}),
        201,
    )
    (entry,) = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == (
        "maker",
        "Update",
        crd.api_version,
    )
    assert entry["fieldsV1"] == {"f:spec": {".": {}, "f:size": {}}}
    created["status"] = {"phase": "Ready"}
    updated = ok(
        http(
            api_client,
            "PUT",
            f"{base}/w/status",
            body=created,
            query={"fieldManager": "statuser"},
        ),
        200,
    )
    entries = {e["manager"]: e for e in updated["metadata"]["managedFields"]}
    status = entries["statuser"]
    assert status["subresource"] == "status"
    assert status["operation"] == "Update"
    assert status["fieldsV1"] == {"f:status": {".": {}, "f:phase": {}}}
    assert entries["maker"]["fieldsV1"] == {"f:spec": {".": {}, "f:size": {}}}
