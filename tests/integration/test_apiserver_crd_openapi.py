"""Conformance: a CRD's schema is published in ``/openapi/v2`` and ``/openapi/v3``.

What kube-apiserver 1.36's ``CustomResourcePublishOpenAPI`` conformance specs read
(test/e2e/apimachinery/crd_publish_openapi.go), and what apiextensions-apiserver's
OpenAPI builder (pkg/controller/openapi/builder) makes of a CRD version: a definition
named after the reversed group, the version and the kind, which is the version's schema
plus ``apiVersion``, ``kind`` (TypeMeta's) and ``metadata`` (a reference to ObjectMeta)
and the ``x-kubernetes-group-version-kind`` extension; a ``<Kind>List`` definition
beside it; OpenAPI v2 leaves out what it cannot say (below an
``x-kubernetes-preserve-unknown-fields``, nothing; at the root, only ``type: object``).
Every served version is published, no other.

kube publishes asynchronously: each check waits for the definition, as the e2e suite
does (:mod:`tests.integration.crdopenapi`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.crdopenapi import (
    CRDS,
    FOO,
    NO_SCHEMA,
    PRESERVE_NESTED,
    PRESERVE_ROOT,
    TIMEOUT,
    WALDO,
    CrdMaker,
    Swagger,
    crd_maker,
    own,
    v3_document,
    v3_wait_for,
)
from tests.integration.rawhttp import JSON_PATCH, eventually, http, ok

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
CONVENTIONS = "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
OBJECT_META = f"Standard object's metadata. More info: {CONVENTIONS}#metadata"
# addEmbeddedProperties' own descriptions of an embedded object's type meta
EMBEDDED_API_VERSION = (
    "apiVersion defines the versioned schema of this representation of an object. "
    f"More info: {CONVENTIONS}#resources"
)
EMBEDDED_KIND = (
    "kind is a string value representing the type of this object. In CamelCase. "
    f"More info: {CONVENTIONS}#types-kinds"
)


@pytest.fixture
def make_crd(api_client: Any) -> Iterator[CrdMaker]:
    with crd_maker(api_client) as maker:
        yield maker


# --------------------------------------------------------------------------- /openapi/v2


def test_v2_definition_is_the_schema_with_type_and_object_meta(
    api_client: Any, make_crd: CrdMaker
) -> None:
    crd = make_crd(FOO, "v1")
    swagger = Swagger(api_client)
    name = crd.definition("v1")
    definition = swagger.wait_for(name)
    assert own(definition) == FOO
    assert definition["x-kubernetes-group-version-kind"] == [crd.gvk("v1")]
    props = definition["properties"]
    assert props["metadata"] == {
        "$ref": f"#/definitions/{META}ObjectMeta",
        "description": OBJECT_META,
    }
    assert props["apiVersion"]["type"] == "string"
    assert props["apiVersion"]["description"].startswith("APIVersion defines the versioned schema")
    assert props["kind"]["type"] == "string"
    assert props["kind"]["description"].startswith("Kind is a string value representing the REST")

    definitions = swagger.definitions()
    listed = definitions[crd.definition("v1", f"{crd.kind}List")]
    assert listed["x-kubernetes-group-version-kind"] == [crd.gvk("v1", f"{crd.kind}List")]
    assert listed["required"] == ["items"]
    assert listed["properties"]["items"]["type"] == "array"
    assert listed["properties"]["items"]["items"] == {"$ref": f"#/definitions/{name}"}
    assert listed["properties"]["metadata"]["$ref"] == f"#/definitions/{META}ListMeta"
    assert {f"{META}ObjectMeta", f"{META}ListMeta"} <= set(definitions)

    item = swagger.doc["paths"][
        f"/apis/{crd.group}/v1/namespaces/{{namespace}}/{crd.plural}/{{name}}"
    ]
    for method, action in (
        ("get", "get"),
        ("put", "put"),
        ("patch", "patch"),
        ("delete", "delete"),
    ):
        assert item[method]["x-kubernetes-action"] == action
        assert item[method]["x-kubernetes-group-version-kind"] == crd.gvk("v1")


def test_v2_definitions_resolve_and_carry_the_built_in_kinds(api_client: Any) -> None:
    doc = Swagger(api_client).read()
    assert doc["swagger"] == "2.0"
    definitions = doc["definitions"]
    deployment = definitions["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "version": "v1", "kind": "Deployment"}
    ]
    assert (
        deployment["properties"]["spec"]["$ref"]
        == "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    )
    # OpenAPI v2 has no oneOf: IntOrString is a string of format int-or-string
    int_or_string = definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
    assert (int_or_string["type"], int_or_string["format"]) == ("string", "int-or-string")
    assert definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"]["type"] == "string"

    unresolved: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if (
                isinstance(ref, str)
                and ref.startswith("#/definitions/")
                and ref.removeprefix("#/definitions/") not in definitions
            ):
                unresolved.add(ref)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    assert not unresolved


@pytest.mark.parametrize("path", ["/openapi/v2", "/openapi/v3/apis/apps/v1"])
def test_documents_answer_not_modified_to_their_etag(api_client: Any, path: str) -> None:
    """kube-openapi serves both with http.ServeContent: an ETag, and 304 to it."""

    def not_modified() -> bool:
        # another client may change the document between the two reads: read again
        first = http(api_client, "GET", path)
        assert first.status == 200
        assert first.headers["Content-Type"] == "application/json"
        etag = first.headers["ETag"]
        assert etag.startswith('"') and etag.endswith('"') and len(etag) > 2
        again = http(api_client, "GET", path, headers={"If-None-Match": etag})
        return again.status == 304

    eventually(not_modified, TIMEOUT, f"304 Not Modified for the current ETag of {path}")


def test_v2_definition_follows_a_schema_change(api_client: Any, make_crd: CrdMaker) -> None:
    crd = make_crd(FOO, "v1")
    swagger = Swagger(api_client)
    swagger.wait_for(crd.definition("v1"))
    size = {"description": "Size of Foo.", "type": "integer", "minimum": 0}
    patch = [
        {
            "op": "add",
            "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size",
            "value": size,
        }
    ]
    ok(http(api_client, "PATCH", f"{CRDS}/{crd.name}", body=patch, content_type=JSON_PATCH), 200)
    changed = copy.deepcopy(FOO)
    changed["properties"]["spec"]["properties"]["size"] = size
    swagger.wait_for(crd.definition("v1"), lambda d: own(d) == changed)
    v3_wait_for(
        api_client,
        crd.group,
        "v1",
        crd.definition("v1"),
        lambda s: s["properties"]["spec"]["properties"].get("size") == size,
    )


def test_v2_drops_a_version_that_stops_being_served(api_client: Any, make_crd: CrdMaker) -> None:
    crd = make_crd(FOO, "v5", "v6alpha1")
    swagger = Swagger(api_client)
    swagger.wait_for(crd.definition("v6alpha1"))
    swagger.wait_for(crd.definition("v5"))
    stored = ok(http(api_client, "GET", f"{CRDS}/{crd.name}"), 200)
    stored["spec"]["versions"][1]["served"] = False
    ok(http(api_client, "PUT", f"{CRDS}/{crd.name}", body=stored), 200)
    swagger.wait_gone(crd.definition("v6alpha1"))
    assert crd.definition("v6alpha1", f"{crd.kind}List") not in swagger.definitions()
    assert own(swagger.wait_for(crd.definition("v5"))) == FOO


def test_v2_follows_a_renamed_version(api_client: Any, make_crd: CrdMaker) -> None:
    crd = make_crd(FOO, "v2", "v3")
    swagger = Swagger(api_client)
    swagger.wait_for(crd.definition("v3"))
    swagger.wait_for(crd.definition("v2"))
    patch = [
        {"op": "test", "path": "/spec/versions/1/name", "value": "v3"},
        {"op": "replace", "path": "/spec/versions/1/name", "value": "v4"},
    ]
    ok(http(api_client, "PATCH", f"{CRDS}/{crd.name}", body=patch, content_type=JSON_PATCH), 200)
    assert own(swagger.wait_for(crd.definition("v4"))) == FOO
    assert swagger.wait_for(crd.definition("v4"))["x-kubernetes-group-version-kind"] == [
        crd.gvk("v4")
    ]
    swagger.wait_gone(crd.definition("v3"))
    assert own(swagger.wait_for(crd.definition("v2"))) == FOO


def test_v2_and_v3_drop_a_deleted_crd(api_client: Any, make_crd: CrdMaker) -> None:
    crd = make_crd(FOO, "v1")
    swagger = Swagger(api_client)
    swagger.wait_for(crd.definition("v1"))
    v3_wait_for(api_client, crd.group, "v1", crd.definition("v1"))
    ok(http(api_client, "DELETE", f"{CRDS}/{crd.name}"), 200)
    swagger.wait_gone(crd.definition("v1"))
    assert crd.definition("v1", f"{crd.kind}List") not in swagger.definitions()
    eventually(
        lambda: v3_document(api_client, crd.group, "v1") is None,
        TIMEOUT,
        f"apis/{crd.group}/v1 gone from /openapi/v3",
    )


def test_crds_sharing_a_group_version_are_all_published(
    api_client: Any, make_crd: CrdMaker
) -> None:
    foo = make_crd(FOO, "v6")
    waldo = make_crd(WALDO, "v6", group=foo.group, kind=f"Waldo{foo.kind.removeprefix('Foo')}")
    elsewhere = make_crd(WALDO, "v6", kind=foo.kind)  # the same kind in another group
    swagger = Swagger(api_client)
    assert own(swagger.wait_for(waldo.definition("v6"))) == WALDO
    assert own(swagger.wait_for(foo.definition("v6"))) == FOO
    assert own(swagger.wait_for(elsewhere.definition("v6"))) == WALDO

    document = v3_wait_for(api_client, foo.group, "v6", foo.definition("v6"))
    if waldo.definition("v6") not in document["components"]["schemas"]:
        document = v3_wait_for(api_client, foo.group, "v6", waldo.definition("v6"))
    schemas = document["components"]["schemas"]
    assert own(schemas[foo.definition("v6")]) == FOO
    assert own(schemas[waldo.definition("v6")]) == WALDO
    assert elsewhere.definition("v6") not in schemas
    paths = set(document["paths"])
    assert f"/apis/{foo.group}/v6/namespaces/{{namespace}}/{foo.plural}" in paths
    assert f"/apis/{foo.group}/v6/namespaces/{{namespace}}/{waldo.plural}" in paths


def test_v2_definition_of_a_crd_without_a_schema_is_an_object(
    api_client: Any, make_crd: CrdMaker
) -> None:
    """setupCRD's "no schema": a root that preserves unknown fields. kube publishes no
    properties at all in v2 (kubectl would refuse the unknown fields), the whole schema
    in v3."""
    crd = make_crd(NO_SCHEMA, "v1")
    definition = Swagger(api_client).wait_for(crd.definition("v1"))
    assert definition == {"type": "object", "x-kubernetes-group-version-kind": [crd.gvk("v1")]}
    document = v3_wait_for(api_client, crd.group, "v1", crd.definition("v1"))
    schema = document["components"]["schemas"][crd.definition("v1")]
    assert own(schema) == NO_SCHEMA
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata"}


def test_preserving_unknown_fields_at_the_root(api_client: Any, make_crd: CrdMaker) -> None:
    crd = make_crd(PRESERVE_ROOT, "v1")
    definition = Swagger(api_client).wait_for(crd.definition("v1"))
    assert definition == {"type": "object", "x-kubernetes-group-version-kind": [crd.gvk("v1")]}
    document = v3_wait_for(api_client, crd.group, "v1", crd.definition("v1"))
    assert own(document["components"]["schemas"][crd.definition("v1")]) == PRESERVE_ROOT


def test_preserving_unknown_fields_in_a_nested_object(api_client: Any, make_crd: CrdMaker) -> None:
    crd = make_crd(PRESERVE_NESTED, "v1")
    definition = Swagger(api_client).wait_for(crd.definition("v1"))
    # v2: an object that keeps unknown fields loses its type and properties
    expected = copy.deepcopy(PRESERVE_NESTED)
    expected["properties"]["spec"] = {
        "description": "Specification of Waldo",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert own(definition) == expected
    document = v3_wait_for(api_client, crd.group, "v1", crd.definition("v1"))
    assert own(document["components"]["schemas"][crd.definition("v1")]) == PRESERVE_NESTED


KEYWORDS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["port", "note", "size"],
            "properties": {
                "port": {"x-kubernetes-int-or-string": True},
                "note": {"type": "string", "nullable": True},
                "size": {"type": "integer", "default": 1, "minimum": 0},
                "mode": {"type": "string", "anyOf": [{"enum": ["a"]}, {"enum": ["b"]}]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "color": {"type": "string"},
            },
        }
    },
}


def test_v2_leaves_out_what_it_cannot_say(api_client: Any, make_crd: CrdMaker) -> None:
    """ToStructuralOpenAPIV2 and PruneDefaults: no anyOf (int-or-string's is v3's own
    unfolding), no nullable types (and a nullable member is not required), no defaults;
    v3 keeps them all. Selectable fields are listed on the kind and on the list."""
    crd = make_crd(KEYWORDS, "v1", selectableFields=[{"jsonPath": ".spec.color"}])
    selectable = [{"fieldPath": "spec.color"}]
    swagger = Swagger(api_client)
    definition = swagger.wait_for(crd.definition("v1"))
    spec = KEYWORDS["properties"]["spec"]
    assert definition["properties"]["spec"] == {
        "type": "object",
        "required": ["port", "size"],
        "properties": {
            "port": {"x-kubernetes-int-or-string": True},
            "note": {},
            "size": {"type": "integer", "minimum": 0},
            "mode": {"type": "string"},
            "labels": spec["properties"]["labels"],
            "color": {"type": "string"},
        },
    }
    assert definition["x-kubernetes-selectable-fields"] == selectable
    listed = swagger.definitions()[crd.definition("v1", f"{crd.kind}List")]
    assert listed["x-kubernetes-selectable-fields"] == selectable

    document = v3_wait_for(api_client, crd.group, "v1", crd.definition("v1"))
    schemas = document["components"]["schemas"]
    schema = schemas[crd.definition("v1")]
    assert schema["properties"]["spec"] == {
        **spec,
        "properties": {
            **spec["properties"],
            "port": {
                "x-kubernetes-int-or-string": True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
            },
        },
    }
    assert schema["x-kubernetes-selectable-fields"] == selectable
    listed = schemas[crd.definition("v1", f"{crd.kind}List")]
    assert listed["x-kubernetes-selectable-fields"] == selectable


EMBEDDED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {
                        "spec": {"type": "object", "properties": {"image": {"type": "string"}}}
                    },
                },
                "raw": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            },
        }
    },
}


def _embedded_meta(metadata: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": {"description": EMBEDDED_API_VERSION, "type": "string"},
        "kind": {"description": EMBEDDED_KIND, "type": "string"},
        "metadata": {**metadata, "description": OBJECT_META},
    }


def test_embedded_resources_get_type_and_object_meta(api_client: Any, make_crd: CrdMaker) -> None:
    crd = make_crd(EMBEDDED, "v1")
    definition = Swagger(api_client).wait_for(crd.definition("v1"))
    spec = definition["properties"]["spec"]["properties"]
    template = EMBEDDED["properties"]["spec"]["properties"]["template"]
    assert spec["template"] == {
        **template,
        "properties": {
            **template["properties"],
            **_embedded_meta({"$ref": f"#/definitions/{META}ObjectMeta"}),
        },
        "required": ["kind", "apiVersion"],
    }
    # v2: an embedded object that keeps unknown fields gets nothing, and no type
    assert spec["raw"] == {
        "x-kubernetes-embedded-resource": True,
        "x-kubernetes-preserve-unknown-fields": True,
    }

    document = v3_wait_for(api_client, crd.group, "v1", crd.definition("v1"))
    spec = document["components"]["schemas"][crd.definition("v1")]["properties"]["spec"]
    v3_meta = _embedded_meta({"allOf": [{"$ref": f"#/components/schemas/{META}ObjectMeta"}]})
    assert spec["properties"]["template"] == {
        **template,
        "properties": {**template["properties"], **v3_meta},
        "required": ["kind", "apiVersion"],
    }
    raw = EMBEDDED["properties"]["spec"]["properties"]["raw"]
    assert spec["properties"]["raw"] == {
        **raw,
        "properties": v3_meta,
        "required": ["kind", "apiVersion"],
    }


# --------------------------------------------------------------------------- /openapi/v3


def test_v3_schema_is_the_version_schema_with_type_and_object_meta(
    api_client: Any, make_crd: CrdMaker
) -> None:
    crd = make_crd(FOO, "v1")
    name = crd.definition("v1")
    document = v3_wait_for(api_client, crd.group, "v1", name)
    schemas = document["components"]["schemas"]
    schema = schemas[name]
    assert own(schema) == FOO
    assert schema["x-kubernetes-group-version-kind"] == [crd.gvk("v1")]
    props = schema["properties"]
    assert props["metadata"] == {
        "allOf": [{"$ref": f"#/components/schemas/{META}ObjectMeta"}],
        "description": OBJECT_META,
    }
    assert props["apiVersion"]["description"].startswith("APIVersion defines the versioned schema")
    assert props["kind"]["description"].startswith("Kind is a string value representing the REST")

    listed = schemas[crd.definition("v1", f"{crd.kind}List")]
    assert listed["x-kubernetes-group-version-kind"] == [crd.gvk("v1", f"{crd.kind}List")]
    assert listed["required"] == ["items"]
    assert listed["properties"]["items"]["items"] == {"$ref": f"#/components/schemas/{name}"}
    assert listed["properties"]["metadata"]["allOf"] == [
        {"$ref": f"#/components/schemas/{META}ListMeta"}
    ]
    assert {f"{META}ObjectMeta", f"{META}ListMeta"} <= set(schemas)

    # what kubectl reads to know the server validates fields (QueryParamVerifierV3)
    item = document["paths"][f"/apis/{crd.group}/v1/namespaces/{{namespace}}/{crd.plural}/{{name}}"]
    assert item["patch"]["x-kubernetes-group-version-kind"] == crd.gvk("v1")
    assert "fieldValidation" in [p.get("name") for p in item["patch"]["parameters"]]
