"""CRDs and the OpenAPI documents that publish them, for the conformance tests.

The e2e suite's CustomResourcePublishOpenAPI specs (kubernetes 1.36,
test/e2e/apimachinery/crd_publish_openapi.go) make CRDs in a group of their own, with
the schemas below, and wait (60 s) for each served version's definition to appear in
``/openapi/v2``: kube-apiserver publishes CRD schemas asynchronously, its OpenAPI
controllers following a CRD informer. These helpers do the same, and read the
group-version's ``/openapi/v3`` document too.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.integration.rawhttp import eventually, http, ok

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TIMEOUT = 60.0  # seconds: the e2e suite's wait for a definition

# The e2e suite's schemas (schemaFoo, schemaWaldo, schemaPreserveRoot, schemaPreserveNested).
FOO: dict[str, Any] = {
    "description": "Foo CRD for Testing",
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "description": "Specification of Foo",
            "properties": {
                "bars": {
                    "description": "List of Bars and their specs.",
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"description": "Name of Bar.", "type": "string"},
                            "age": {"description": "Age of Bar.", "type": "string"},
                            "feeling": {
                                "description": "Whether Bar is feeling great.",
                                "type": "string",
                                "enum": ["Great", "Down"],
                            },
                            "bazs": {
                                "description": "List of Bazs.",
                                "items": {"type": "string"},
                                "type": "array",
                            },
                        },
                    },
                }
            },
        },
        "status": {
            "description": "Status of Foo",
            "type": "object",
            "properties": {
                "bars": {
                    "description": "List of Bars and their statuses.",
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"description": "Name of Bar.", "type": "string"},
                            "available": {
                                "description": "Whether the Bar is installed.",
                                "type": "boolean",
                            },
                            "quxType": {
                                "description": "Indicates to external qux type.",
                                "pattern": "in-tree|out-of-tree",
                                "type": "string",
                            },
                        },
                    },
                }
            },
        },
    },
}

_WALDO_STATUS: dict[str, Any] = {
    "description": "Status of Waldo",
    "type": "object",
    "properties": {
        "bars": {
            "description": "List of Bars and their statuses.",
            "type": "array",
            "items": {"type": "object"},
        }
    },
}

WALDO: dict[str, Any] = {
    "description": "Waldo CRD for Testing",
    "type": "object",
    "properties": {
        "spec": {
            "description": "Specification of Waldo",
            "type": "object",
            "properties": {"dummy": {"description": "Dummy property.", "type": "object"}},
        },
        "status": _WALDO_STATUS,
    },
}

PRESERVE_ROOT: dict[str, Any] = {
    "description": "preserve-unknown-properties at root for Testing",
    "x-kubernetes-preserve-unknown-fields": True,
    "type": "object",
    "properties": {
        "spec": {
            "description": "Specification of Waldo",
            "type": "object",
            "properties": {"dummy": {"description": "Dummy property.", "type": "object"}},
        },
        "status": _WALDO_STATUS,
    },
}

PRESERVE_NESTED: dict[str, Any] = {
    "description": "preserve-unknown-properties in nested field for Testing",
    "type": "object",
    "properties": {
        "spec": {
            "description": "Specification of Waldo",
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"dummy": {"description": "Dummy property.", "type": "object"}},
        },
        "status": _WALDO_STATUS,
    },
}

# What setupCRD gives a CRD "without a schema" (a v1 CRD must have one).
NO_SCHEMA: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


class Crd:
    """A CRD made by :class:`CrdMaker`: group, kind, plural (namespaced)."""

    def __init__(self, group: str, kind: str, plural: str) -> None:
        self.group = group
        self.kind = kind
        self.plural = plural
        self.name = f"{plural}.{group}"

    def definition(self, version: str, kind: str = "") -> str:
        """kube's definition name: ``com.example.t1234.v1.Foo`` (the group reversed)."""
        return f"{'.'.join(reversed(self.group.split('.')))}.{version}.{kind or self.kind}"

    def gvk(self, version: str, kind: str = "") -> dict[str, str]:
        return {"group": self.group, "version": version, "kind": kind or self.kind}


def crd_body(
    crd: Crd, schema: dict[str, Any], versions: tuple[str, ...], **version_fields: Any
) -> dict[str, Any]:
    """A CRD as the e2e suite's setupCRD makes it: every version served, the first stored."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd.name},
        "spec": {
            "group": crd.group,
            "scope": "Namespaced",
            "names": {
                "plural": crd.plural,
                "singular": crd.plural.removesuffix("s"),
                "kind": crd.kind,
                "listKind": f"{crd.kind}List",
            },
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": i == 0,
                    "schema": {"openAPIV3Schema": copy.deepcopy(schema)},
                    **version_fields,
                }
                for i, v in enumerate(versions)
            ],
        },
    }


class CrdMaker:
    """Makes CRDs, each in a group of its own unless told; deletes them on close."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self.made: list[Crd] = []

    def __call__(
        self,
        schema: dict[str, Any],
        *versions: str,
        kind: str = "",
        group: str = "",
        **version_fields: Any,
    ) -> Crd:
        suffix = uuid.uuid4().hex[:8]
        kind = kind or f"Foo{suffix}"
        crd = Crd(group or f"t{suffix}.example.com", kind, f"{kind.lower()}s")
        body = crd_body(crd, schema, versions or ("v1",), **version_fields)
        ok(http(self.api_client, "POST", CRDS, body=body), 201)
        self.made.append(crd)
        return crd

    def close(self) -> None:
        for crd in self.made:
            response = http(self.api_client, "DELETE", f"{CRDS}/{crd.name}")
            assert response.status in (200, 404), response.body


@contextmanager
def crd_maker(api_client: Any) -> Iterator[CrdMaker]:
    maker = CrdMaker(api_client)
    try:
        yield maker
    finally:
        maker.close()


class Swagger:
    """``/openapi/v2`` read as the e2e suite reads it: with ``If-None-Match``, so an
    unchanged document costs a 304 (a real server's is megabytes)."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self.etag = ""
        self.doc: dict[str, Any] = {}

    def read(self) -> dict[str, Any]:
        headers = {"If-None-Match": f'"{self.etag}"'} if self.etag else {}
        response = http(self.api_client, "GET", "/openapi/v2", headers=headers)
        if response.status == 304 and self.doc:
            return self.doc
        assert response.status == 200, f"HTTP {response.status}: {response.body}"
        self.etag = response.headers.get("ETag", "").strip('"')
        self.doc = response.body
        return self.doc

    def definitions(self) -> dict[str, Any]:
        return dict(self.read().get("definitions") or {})

    def wait_for(self, name: str, holds: Callable[[dict[str, Any]], bool] = bool) -> Any:
        """The definition ``name`` once it is published and ``holds``."""
        found: list[Any] = []

        def published() -> bool:
            definition = self.definitions().get(name)
            if definition is not None and holds(definition):
                found.append(definition)
                return True
            return False

        eventually(published, TIMEOUT, f"definition {name} in /openapi/v2")
        return found[-1]

    def wait_gone(self, name: str) -> None:
        eventually(lambda: name not in self.definitions(), TIMEOUT, f"{name} gone from /openapi/v2")


def v3_document(api_client: Any, group: str, version: str) -> dict[str, Any] | None:
    """The group-version's ``/openapi/v3`` document, found through the root's
    ``serverRelativeURL`` (None while the root does not list it)."""
    raw = ok(http(api_client, "GET", "/openapi/v3"), 200)
    root = json.loads(raw) if isinstance(raw, str) else raw
    entry = root["paths"].get(f"apis/{group}/{version}")
    if entry is None:
        return None
    path, _, query = entry["serverRelativeURL"].partition("?")
    response = http(api_client, "GET", path, query={"hash": query.removeprefix("hash=")})
    if response.status != 200:  # changed since the root was read: a redirect
        return None
    document: dict[str, Any] = response.body
    return document


def v3_wait_for(
    api_client: Any,
    group: str,
    version: str,
    name: str,
    holds: Callable[[dict[str, Any]], bool] = bool,
) -> dict[str, Any]:
    """The group-version's ``/openapi/v3`` document once its schema ``name`` is
    published and ``holds``."""
    found: list[dict[str, Any]] = []

    def published() -> bool:
        document = v3_document(api_client, group, version)
        schema = (((document or {}).get("components") or {}).get("schemas") or {}).get(name)
        if document is not None and schema is not None and holds(schema):
            found.append(document)
            return True
        return False

    eventually(published, TIMEOUT, f"schema {name} in /openapi/v3/apis/{group}/{version}")
    return found[-1]


def own(definition: dict[str, Any]) -> dict[str, Any]:
    """A published definition without what kube adds to the CRD's schema (the e2e
    suite's dropDefaults): the ``apiVersion``, ``kind`` and ``metadata`` properties and
    the ``x-kubernetes-group-version-kind`` and ``x-kubernetes-selectable-fields``
    extensions."""
    out = copy.deepcopy(definition)
    for added in ("metadata", "apiVersion", "kind"):
        (out.get("properties") or {}).pop(added, None)
    if out.get("properties") == {}:
        del out["properties"]
    out.pop("x-kubernetes-group-version-kind", None)
    out.pop("x-kubernetes-selectable-fields", None)
    return out
