"""Conformance: ``default`` in a CustomResourceDefinition's structural schema.

kube-apiserver defaults a custom resource in two places (apiextensions-apiserver's
``schema/defaulting``): when a request is decoded (create, update, every kind of patch
after the patch is applied) and when an object is read from storage (get, list, watch), so
a default added to a CRD later shows on objects stored before it. A default is applied only
where the field is absent (or a ``null`` that is not ``nullable``), recursively into present
or defaulted objects, array items and map values. A CRD whose defaults do not validate
against their own schema, carry unknown fields, or sit in top-level ``metadata`` is refused.

Each test makes cluster-scoped CRDs in a group of its own and deletes them at the end, so
it runs against a shared real cluster too; reads after a CRD change are polled, since a
real server swaps the resource's storage shortly after the change.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.integration.rawhttp import JSON_PATCH, MERGE, eventually, http, ok, watching

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
APPLY = "application/apply-patch+yaml"
# kube validates a CRD in its internal form: a schema every version shares is moved to
# spec.validation by the conversion from v1, so that is where its errors are reported.
SCHEMA = "spec.validation.openAPIV3Schema"


class Crd:
    """A created cluster-scoped CRD serving ``gizmos`` (kind Gizmo) at version v1."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.name = f"gizmos.{group}"
        self.api_version = f"{group}/v1"
        self.collection = f"/apis/{group}/v1/gizmos"

    def body(self, name: str, spec: Any = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "apiVersion": self.api_version,
            "kind": "Gizmo",
            "metadata": {"name": name},
        }
        if spec is not None:
            out["spec"] = spec
        return out

    def path(self, name: str) -> str:
        return f"{self.collection}/{name}"


def _definition(group: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gizmos.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {
                "plural": "gizmos",
                "singular": "gizmo",
                "kind": "Gizmo",
                "listKind": "GizmoList",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def _root(spec: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": spec}}


def _group() -> str:
    return f"t{uuid.uuid4().hex[:10]}.example.com"


@pytest.fixture
def make_crd(api_client: Any) -> Iterator[Callable[[dict[str, Any]], Crd]]:
    """Create a CRD with the given root schema; wait until it is Established and served."""
    created: list[Crd] = []

    def make(schema: dict[str, Any]) -> Crd:
        crd = Crd(_group())
        ok(http(api_client, "POST", CRDS, body=_definition(crd.group, schema)), 201)
        created.append(crd)

        def established() -> bool:
            body = ok(http(api_client, "GET", f"{CRDS}/{crd.name}"), 200)
            conditions = (body.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        eventually(established, 30, f"CRD {crd.name} Established")
        eventually(
            lambda: http(api_client, "GET", crd.collection).status == 200,
            30,
            f"{crd.name} served",
        )
        return crd

    yield make
    for crd in created:
        response = http(api_client, "DELETE", f"{CRDS}/{crd.name}")
        assert response.status in (200, 404), response.body


def _patch_crd(api_client: Any, crd: Crd, ops: list[dict[str, Any]]) -> Any:
    return http(api_client, "PATCH", f"{CRDS}/{crd.name}", body=ops, content_type=JSON_PATCH)


def _spec_when(api_client: Any, crd: Crd, name: str, wanted: dict[str, Any]) -> None:
    """Poll until the object's spec reads ``wanted`` (a real server swaps storage lazily)."""
    eventually(
        lambda: ok(http(api_client, "GET", crd.path(name)), 200).get("spec") == wanted,
        30,
        f"{name} reads spec {wanted}",
    )


# --- defaulting of requests -------------------------------------------------------------


def test_create_defaults_nested_objects_arrays_and_maps(
    api_client: Any, make_crd: Callable[[dict[str, Any]], Crd]
) -> None:
    crd = make_crd(
        _root(
            {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer", "default": 1},
                    "mode": {"type": "string", "default": "auto"},
                    # a defaulted object gets the defaults of its own fields too
                    "template": {
                        "type": "object",
                        "default": {},
                        "properties": {
                            "image": {"type": "string", "default": "nginx"},
                            "pull": {"type": "string"},
                        },
                    },
                    "ports": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "port": {"type": "integer"},
                                "protocol": {"type": "string", "default": "TCP"},
                            },
                        },
                    },
                    "limits": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "object",
                            "properties": {"max": {"type": "integer", "default": 10}},
                        },
                    },
                    "note": {"type": "string", "nullable": True, "default": "n"},
                    "color": {"type": "string"},
                },
            }
        )
    )
    sent = {
        "mode": "manual",  # present: kept
        "replicas": None,  # a null that is not nullable: defaulted
        "note": None,  # nullable: the null stays
        "color": None,  # not nullable and no default: dropped
        "ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}],
        "limits": {"cpu": {}, "memory": {"max": 2}},
    }
    expected = {
        "replicas": 1,
        "mode": "manual",
        "template": {"image": "nginx"},
        "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
        "limits": {"cpu": {"max": 10}, "memory": {"max": 2}},
        "note": None,
    }
    created = ok(http(api_client, "POST", crd.collection, body=crd.body("full", sent)), 201)
    assert created["spec"] == expected
    assert ok(http(api_client, "GET", crd.path("full")), 200)["spec"] == expected

    # no spec, and spec has no default: nothing under it is defaulted
    bare = ok(http(api_client, "POST", crd.collection, body=crd.body("bare")), 201)
    assert "spec" not in bare
    assert "spec" not in ok(http(api_client, "GET", crd.path("bare")), 200)


def test_update_and_every_patch_are_defaulted_after_the_change(
    api_client: Any, make_crd: Callable[[dict[str, Any]], Crd]
) -> None:
    crd = make_crd(
        _root(
            {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer", "default": 1},
                    "mode": {"type": "string", "default": "auto"},
                },
            }
        )
    )
    created = ok(
        http(
            api_client,
            "POST",
            crd.collection,
            body=crd.body("g", {"replicas": 3, "mode": "manual"}),
        ),
        201,
    )
    assert created["spec"] == {"replicas": 3, "mode": "manual"}

    # PUT without the fields: both defaulted
    put = ok(http(api_client, "PUT", crd.path("g"), body={**created, "spec": {}}), 200)
    assert put["spec"] == {"replicas": 1, "mode": "auto"}

    # merge patch removing a field (null): defaulted again after the patch is applied
    changed = ok(
        http(
            api_client,
            "PATCH",
            crd.path("g"),
            body={"spec": {"replicas": 5, "mode": "manual"}},
            content_type=MERGE,
        ),
        200,
    )
    assert changed["spec"] == {"replicas": 5, "mode": "manual"}
    merged = ok(
        http(
            api_client,
            "PATCH",
            crd.path("g"),
            body={"spec": {"replicas": None}},
            content_type=MERGE,
        ),
        200,
    )
    assert merged["spec"] == {"replicas": 1, "mode": "manual"}

    # JSON patch removing a field
    removed = ok(
        http(
            api_client,
            "PATCH",
            crd.path("g"),
            body=[{"op": "remove", "path": "/spec/mode"}],
            content_type=JSON_PATCH,
        ),
        200,
    )
    assert removed["spec"] == {"replicas": 1, "mode": "auto"}

    # server-side apply creating an object: defaulted where the configuration is silent
    applied = ok(
        http(
            api_client,
            "PATCH",
            crd.path("applied"),
            query={"fieldManager": "tester"},
            body=json.dumps(crd.body("applied", {"replicas": 2})).encode(),
            content_type=APPLY,
        ),
        201,
    )
    assert applied["spec"] == {"replicas": 2, "mode": "auto"}
    assert ok(http(api_client, "GET", crd.path("applied")), 200)["spec"] == applied["spec"]


# --- defaulting from storage ------------------------------------------------------------


def _event_lines(resp: Any) -> Iterator[dict[str, Any]]:
    buffer = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)


def test_objects_stored_before_a_default_read_defaulted(
    api_client: Any, make_crd: Callable[[dict[str, Any]], Crd]
) -> None:
    crd = make_crd(
        _root({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}})
    )
    for name, spec in (("one", {}), ("two", {"b": "mine"})):
        ok(http(api_client, "POST", crd.collection, body=crd.body(name, spec)), 201)

    added = _patch_crd(
        api_client,
        crd,
        [
            {
                "op": "add",
                "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/"
                "properties/a/default",
                "value": "A",
            },
            {
                "op": "add",
                "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/"
                "properties/b/default",
                "value": "B",
            },
        ],
    )
    ok(added, 200)

    # get: the stored objects read defaulted; a stored value is never replaced
    _spec_when(api_client, crd, "one", {"a": "A", "b": "B"})
    _spec_when(api_client, crd, "two", {"a": "A", "b": "mine"})

    # list
    listed = ok(http(api_client, "GET", crd.collection), 200)
    assert {i["metadata"]["name"]: i["spec"] for i in listed["items"]} == {
        "one": {"a": "A", "b": "B"},
        "two": {"a": "A", "b": "mine"},
    }

    # watch: the objects replayed from storage, and the event of a later change
    with watching(
        api_client, crd.collection, read_timeout=20, resourceVersion="0", timeoutSeconds=20
    ) as resp:
        assert resp.status == 200
        events = _event_lines(resp)
        replayed = {}
        while len(replayed) < 2:
            event = next(events)
            assert event["type"] == "ADDED"
            replayed[event["object"]["metadata"]["name"]] = event["object"]["spec"]
        assert replayed == {"one": {"a": "A", "b": "B"}, "two": {"a": "A", "b": "mine"}}

        # a label change: the old object is read defaulted, so the spec is unchanged
        # (no new generation) and the write persists the defaults
        labelled = ok(
            http(
                api_client,
                "PATCH",
                crd.path("one"),
                body={"metadata": {"labels": {"seen": "yes"}}},
                content_type=MERGE,
            ),
            200,
        )
        assert labelled["spec"] == {"a": "A", "b": "B"}
        assert labelled["metadata"]["generation"] == 1
        event = next(events)
        assert event["type"] == "MODIFIED"
        assert event["object"]["metadata"]["labels"] == {"seen": "yes"}
        assert event["object"]["spec"] == {"a": "A", "b": "B"}

    # without the defaults again: what a write persisted stays, the rest was never stored
    removed = _patch_crd(
        api_client,
        crd,
        [
            {
                "op": "remove",
                "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/"
                "properties/a/default",
            },
            {
                "op": "remove",
                "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/"
                "properties/b/default",
            },
        ],
    )
    ok(removed, 200)
    _spec_when(api_client, crd, "two", {"b": "mine"})
    _spec_when(api_client, crd, "one", {"a": "A", "b": "B"})


# --- invalid defaults -------------------------------------------------------------------

INVALID_DEFAULTS = [
    pytest.param(
        _root({"type": "object", "properties": {"size": {"type": "integer", "default": "big"}}}),
        f"{SCHEMA}.properties[spec].properties[size].default",
        "FieldValueTypeInvalid",
        'Invalid value: "string":  in body must be of type integer: "string"',
        id="wrong type",
    ),
    pytest.param(
        _root(
            {
                "type": "object",
                "properties": {"size": {"type": "integer"}},
                "default": {"size": 1, "extra": True},
            }
        ),
        f"{SCHEMA}.properties[spec].default",
        "FieldValueInvalid",
        'Invalid value: {"extra":true,"size":1}: must not have unknown fields',
        id="unknown field",
    ),
    pytest.param(
        _root(
            {
                "type": "object",
                "properties": {"size": {"type": "integer", "minimum": 0}},
                "default": {"size": -1},
            }
        ),
        f"{SCHEMA}.properties[spec].default.size",
        "FieldValueInvalid",
        "Invalid value: -1: size in body should be greater than or equal to 0",
        id="nested value out of range",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "default": {"labels": {"a": "b"}}},
                "spec": {"type": "object"},
            },
        },
        f"{SCHEMA}.properties[metadata].default",
        "FieldValueForbidden",
        "Forbidden: must not be set in top-level metadata",
        id="top-level metadata",
    ),
]


@pytest.mark.parametrize(("schema", "field", "reason", "message"), INVALID_DEFAULTS)
def test_crd_with_an_invalid_default_is_refused(
    api_client: Any, schema: dict[str, Any], field: str, reason: str, message: str
) -> None:
    group = _group()
    response = http(api_client, "POST", CRDS, body=_definition(group, schema))
    if response.status == 201:  # refused by mistake: do not leave it behind
        http(api_client, "DELETE", f"{CRDS}/gizmos.{group}")
    assert response.status == 422, response.body
    status = response.body
    assert status["reason"] == "Invalid"
    assert status["details"]["kind"] == "CustomResourceDefinition"
    assert status["details"]["group"] == "apiextensions.k8s.io"
    assert {"reason": reason, "message": message, "field": field} in status["details"]["causes"]
    assert f"{field}: {message}" in status["message"]
    assert http(api_client, "GET", f"{CRDS}/gizmos.{group}").status == 404


def test_an_invalid_default_in_a_version_of_its_own_is_reported_in_that_version(
    api_client: Any,
) -> None:
    group = _group()
    body = _definition(group, _root({"type": "object"}))
    bad = _root({"type": "object", "properties": {"size": {"type": "integer", "default": "big"}}})
    body["spec"]["versions"].append(
        {"name": "v2", "served": True, "storage": False, "schema": {"openAPIV3Schema": bad}}
    )
    response = http(api_client, "POST", CRDS, body=body)
    if response.status == 201:  # refused by mistake: do not leave it behind
        http(api_client, "DELETE", f"{CRDS}/gizmos.{group}")
    assert response.status == 422, response.body
    field = "spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[size].default"
    message = 'Invalid value: "string":  in body must be of type integer: "string"'
    assert response.body["details"]["causes"] == [
        {"reason": "FieldValueTypeInvalid", "message": message, "field": field}
    ]


def test_crd_update_adding_an_invalid_default_is_refused(
    api_client: Any, make_crd: Callable[[dict[str, Any]], Crd]
) -> None:
    crd = make_crd(_root({"type": "object", "properties": {"size": {"type": "integer"}}}))
    path = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size/default"
    response = _patch_crd(api_client, crd, [{"op": "add", "path": path, "value": "big"}])
    assert response.status == 422, response.body
    field = f"{SCHEMA}.properties[spec].properties[size].default"
    message = 'Invalid value: "string":  in body must be of type integer: "string"'
    assert response.body["details"]["causes"] == [
        {"reason": "FieldValueTypeInvalid", "message": message, "field": field}
    ]
    assert response.body["message"] == (
        f'CustomResourceDefinition.apiextensions.k8s.io "{crd.name}" is invalid: {field}: {message}'
    )
    stored = ok(http(api_client, "GET", f"{CRDS}/{crd.name}"), 200)
    size = stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]["size"]
    assert "default" not in size
