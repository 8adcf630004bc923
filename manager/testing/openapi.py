"""OpenAPI v3 documents of the local API server (``/openapi/v3`` and one per group-version).

kube-apiserver publishes ``/openapi/v3``, a root listing each group-version's document
with a ``serverRelativeURL`` that carries the document's hash (clients cache by it:
a request with the current hash is answered ``Cache-Control: public, immutable``, one
with a stale hash is redirected to the current one), and per group-version documents
with the paths, their operations (``x-kubernetes-action``,
``x-kubernetes-group-version-kind``, the query parameters) and the schemas
(``components.schemas``, named ``io.k8s.api.core.v1.Pod`` and so on, each kind
carrying its ``x-kubernetes-group-version-kind``).

The schemas here are derived from the protobuf field tables of :mod:`.protoschema` (the
same fields, JSON names and types the API has; no descriptions), so ``kubectl
explain`` can walk them; custom resources get their CRD version's ``openAPIV3Schema``.

Thread-safety: builds fresh documents on every call; safe to share between threads.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any, Final

import orjson

from manager.testing.protobuf import INLINE
from manager.testing.protoschema import KINDS, MESSAGES
from manager.testing.registry import ResourceRegistry, ServedResource

__all__ = ["document_hash", "group_version_document", "root"]

JsonDict = dict[str, Any]

KUBE_VERSION: Final = "v1.36.0"
_META: Final = "k8s.io.apimachinery.pkg.apis.meta.v1."
_SCALARS: Final[dict[str, JsonDict]] = {
    "string": {"type": "string"},
    "bytes": {"type": "string", "format": "byte"},
    "bool": {"type": "boolean"},
    "int32": {"type": "integer", "format": "int32"},
    "int64": {"type": "integer", "format": "int64"},
    "uint32": {"type": "integer", "format": "int32"},
    "uint64": {"type": "integer", "format": "int64"},
    "sint32": {"type": "integer", "format": "int32"},
    "sint64": {"type": "integer", "format": "int64"},
    "fixed32": {"type": "integer", "format": "int32"},
    "fixed64": {"type": "integer", "format": "int64"},
    "sfixed32": {"type": "integer", "format": "int32"},
    "sfixed64": {"type": "integer", "format": "int64"},
    "double": {"type": "number", "format": "double"},
    "float": {"type": "number", "format": "float"},
}
# Messages whose JSON is not an object of their fields.
_SPECIAL: Final[dict[str, JsonDict]] = {
    _META + "Time": {"type": "string", "format": "date-time"},
    _META + "MicroTime": {"type": "string", "format": "date-time"},
    _META + "Duration": {"type": "string"},
    _META + "FieldsV1": {"type": "object"},
    _META + "Verbs": {"type": "array", "items": {"type": "string"}},
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": {
        "type": "string",
        "format": "int-or-string",
    },
    "k8s.io.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
    "k8s.io.apimachinery.pkg.runtime.RawExtension": {"type": "object"},
}


def schema_name(message: str) -> str:
    """``k8s.io.api.core.v1.Pod`` -> ``io.k8s.api.core.v1.Pod`` (kube's definition names)."""
    return "io.k8s." + message.removeprefix("k8s.io.")


def _ref(message: str) -> JsonDict:
    return {"allOf": [{"$ref": f"#/components/schemas/{schema_name(message)}"}], "default": {}}


def _properties(message: str, schemas: dict[str, JsonDict]) -> JsonDict:
    props: JsonDict = {}
    for member, kind, ref, repeated, _ in MESSAGES[message].values():
        if kind == "map":
            value_kind, value_ref = MESSAGES[ref][2][1], MESSAGES[ref][2][2]
            value = _field_schema(value_kind, value_ref, schemas)
            props[member] = {"type": "object", "additionalProperties": value}
            continue
        if kind == "message" and (message, member) in INLINE:
            props.update(_properties(ref, schemas))
            _collect(ref, schemas)
            continue
        item = _field_schema(kind, ref, schemas)
        props[member] = {"type": "array", "items": item} if repeated else item
    return props


def _field_schema(kind: str, ref: str, schemas: dict[str, JsonDict]) -> JsonDict:
    if kind != "message":
        return dict(_SCALARS.get(kind, {"type": "string"}))
    _collect(ref, schemas)
    return _ref(ref)


def _collect(message: str, schemas: dict[str, JsonDict]) -> None:
    """Add ``message`` (and what it references) to ``schemas``."""
    name = schema_name(message)
    if name in schemas:
        return
    if message in _SPECIAL:
        schemas[name] = dict(_SPECIAL[message])
        return
    if message not in MESSAGES:
        schemas[name] = {"type": "object"}
        return
    schemas[name] = {}  # a placeholder against recursion (JSONSchemaProps-like cycles)
    schemas[name] = {"type": "object", "properties": _properties(message, schemas)}


def _kind_schema(served: ServedResource, schemas: dict[str, JsonDict], crd: JsonDict | None) -> str:
    """Add the schema of a served kind; returns its name."""
    r = served.resource
    gvk = {"group": r.group, "version": r.version, "kind": r.kind}
    if served.custom:
        name = f"{'.'.join(reversed(r.group.split('.')))}.{r.version}.{r.kind}"
        version: JsonDict = next(
            (v for v in ((crd or {}).get("spec") or {}).get("versions") or []
             if v.get("name") == r.version),
            {},
        )  # fmt: skip
        body = copy.deepcopy(((version.get("schema") or {}).get("openAPIV3Schema")) or {})
        body.setdefault("type", "object")
        props = body.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props["metadata"] = _ref(_META + "ObjectMeta")
        _collect(_META + "ObjectMeta", schemas)
        body["x-kubernetes-group-version-kind"] = [gvk]
        schemas[name] = body
        return name
    message = KINDS.get((r.group, r.version, r.kind))
    if message is None:
        name = f"io.k8s.local.{r.group or 'core'}.{r.version}.{r.kind}"
        schemas[name] = {"type": "object", "x-kubernetes-group-version-kind": [gvk]}
        return name
    _collect(message, schemas)
    name = schema_name(message)
    schema = schemas[name]
    schema["properties"] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        **schema.get("properties", {}),
    }
    schema["x-kubernetes-group-version-kind"] = [gvk]
    return name


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def group_version_document(
    registry: ResourceRegistry,
    group: str,
    version: str,
    crds: dict[str, JsonDict] | None = None,
) -> JsonDict | None:
    """The OpenAPI v3 document of one group-version (None when it is not served).

    Args:
        crds: stored CRDs by name, for the schemas of custom resources.
    """
    served = [s for s in registry if s.resource.group == group and s.resource.version == version]
    if not served:
        return None
    params = [
        {"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        for n in ("dryRun", "fieldManager", "fieldValidation", "pretty")
    ]
    schemas: JsonDict = {}
    paths: JsonDict = {}
    for s in sorted(served, key=lambda s: s.resource.plural):
        r = s.resource
        crd = (crds or {}).get(s.crd_name) if s.custom else None
        kind_ref = {"$ref": f"#/components/schemas/{_kind_schema(s, schemas, crd)}"}
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        base = f"/{_gv_path(r.group, r.version)}"
        if r.namespaced:
            base = f"{base}/namespaces/{{namespace}}"

        def op(action: str, *, gvk: JsonDict = gvk, ref: JsonDict = kind_ref) -> JsonDict:
            content = {"application/json": {"schema": ref}}
            return {
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": params,
                "responses": {"200": {"description": "OK", "content": content}},
            }

        if "list" in s.verbs:
            paths[f"{base}/{r.plural}"] = {
                "get": op("list"),
                "post": op("post"),
                "delete": op("deletecollection"),
            }
            paths[f"{base}/{r.plural}/{{name}}"] = {
                "get": op("get"),
                "put": op("put"),
                "patch": op("patch"),
                "delete": op("delete"),
            }
        else:
            paths[f"{base}/{r.plural}"] = {"post": op("post")}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def document_hash(doc: JsonDict) -> str:
    """The hash kube puts in ``serverRelativeURL``: SHA-512 of the document, upper hex."""
    return hashlib.sha512(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest().upper()


def root(registry: ResourceRegistry, crds: dict[str, JsonDict] | None = None) -> JsonDict:
    """``/openapi/v3``: where each group-version's document lives, with its hash."""
    gvs = sorted({(s.resource.group, s.resource.version) for s in registry})
    out: JsonDict = {}
    for group, version in gvs:
        doc = group_version_document(registry, group, version, crds)
        assert doc is not None
        path = _gv_path(group, version)
        out[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={document_hash(doc)}"}
    return {"paths": out}
