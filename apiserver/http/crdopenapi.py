"""What one version of a CustomResourceDefinition publishes in OpenAPI: the definitions
of its kind and of its list, for ``/openapi/v2`` and for ``/openapi/v3``.

A port of apiextensions-apiserver's ``pkg/controller/openapi/builder/builder.go``
(``buildKubeNative``, ``addEmbeddedProperties``, ``buildListSchema``,
``gvkToModelName``) and ``pkg/controller/openapi/v2/conversion.go``
(``ToStructuralOpenAPIV2``), over the structural schema's round trip of
``pkg/apiserver/schema`` (``NewStructural``, ``Unfold``, ``ToKubeOpenAPI``):

* the name is the group reversed, the version and the kind:
  ``io.k8s.example.v1.Widget`` for ``widgets.example.k8s.io/v1``; the list's is
  ``<name>List`` (``spec.names.listKind``);
* the kind's definition is the version's schema as a structural schema keeps it
  (``false`` flags and empty lists dropped, ``additionalProperties`` left out inside
  ``allOf``/``anyOf``/``oneOf``/``not``; an ``x-kubernetes-int-or-string`` node gains
  ``anyOf: [{type: integer}, {type: string}]``) plus ``metadata`` (a reference to
  ObjectMeta), ``apiVersion`` and ``kind`` (TypeMeta's) and the extension
  ``x-kubernetes-group-version-kind`` (and ``x-kubernetes-selectable-fields`` when the
  version has ``selectableFields``); every ``x-kubernetes-embedded-resource`` object
  gets ``apiVersion``, ``kind`` and ``metadata`` and requires the first two;
* OpenAPI v2 cannot say everything: ``allOf``, ``anyOf``, ``oneOf`` and ``not`` go; a
  nullable node loses its type, properties and items (and leaves its parent's
  ``required``); a node that preserves unknown fields loses its properties and items
  (and its type when an object); an array without items loses its type; a root that
  preserves unknown fields is published as ``{type: object}`` alone, so kubectl's
  client-side validation lets anything through; ``default`` values are pruned;
* references point at ``#/definitions/`` (v2) or ``#/components/schemas/`` (v3, where a
  reference with a description beside it is wrapped in ``allOf``, as kube-openapi's
  builder3 does).

Thread-safety: pure functions; safe to share between threads.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from apiserver.http.openapidocs import docs
from apiserver.machinery.schema import version_schema

__all__ = [
    "LIST_META",
    "OBJECT_META",
    "kind_schema",
    "list_schema",
    "model_name",
    "ref",
    "version_entry",
]

JsonDict = dict[str, Any]

_META: Final = "k8s.io.apimachinery.pkg.apis.meta.v1."
OBJECT_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
LIST_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
_CONVENTIONS: Final = (
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
)
# addEmbeddedProperties' own words for an embedded object's type meta
_EMBEDDED_API_VERSION: Final = (
    "apiVersion defines the versioned schema of this representation of an object. "
    f"More info: {_CONVENTIONS}#resources"
)
_EMBEDDED_KIND: Final = (
    "kind is a string value representing the type of this object. In CamelCase. "
    f"More info: {_CONVENTIONS}#types-kinds"
)
_INT_OR_STRING: Final = [{"type": "integer"}, {"type": "string"}]
_JUNCTORS: Final = ("allOf", "anyOf", "oneOf")
# members of JSONSchemaProps kept when their value is set (not false, "", [] or absent)
_STRINGS: Final = ("type", "description", "title", "format", "pattern")
_NUMBERS: Final = (
    "maximum",
    "minimum",
    "maxLength",
    "minLength",
    "maxItems",
    "minItems",
    "multipleOf",
    "maxProperties",
    "minProperties",
)
_FLAGS: Final = (
    "nullable",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "uniqueItems",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
)
_LISTS: Final = ("enum", "required", "x-kubernetes-list-map-keys", "x-kubernetes-validations")
_PRESENT: Final = ("default", "example", "x-kubernetes-list-type", "x-kubernetes-map-type")


def model_name(group: str, version: str, kind: str) -> str:
    """gvkToModelName: ``widgets.example.com``'s ``v1`` ``Widget`` -> ``com.example.v1.Widget``."""
    return f"{'.'.join(reversed(group.split('.')))}.{version}.{kind}"


def ref(name: str, *, v2: bool, description: str = "") -> JsonDict:
    """A reference to the definition ``name``, with ``description`` beside it."""
    if v2:
        out: JsonDict = {"$ref": f"#/definitions/{name}"}
        if description:
            out["description"] = description
        return out
    target = {"$ref": f"#/components/schemas/{name}"}
    if not description:
        return target
    return {"allOf": [target], "description": description}  # builder3's WrapRefs


def kind_schema(crd: Mapping[str, Any], version: str, *, v2: bool) -> JsonDict:
    """The definition of the CRD's kind in ``version`` (buildKubeNative)."""
    spec = crd.get("spec") or {}
    raw = version_schema(crd, version)
    schema = _unfold(_kube_openapi(raw)) if isinstance(raw, Mapping) else None
    out: JsonDict
    preserves = bool(
        (schema or {}).get("x-kubernetes-preserve-unknown-fields")
        or spec.get("preserveUnknownFields")
    )
    if schema is None or (v2 and preserves):
        # kubectl would refuse every field but apiVersion, kind and metadata if v2 listed them
        out = {"type": "object"}
    else:
        out = _openapi_v2(schema) if v2 else schema
        props = out.setdefault("properties", {})
        props["metadata"] = ref(OBJECT_META, v2=v2, description=_object_meta_description())
        props.update(_type_meta())
        _add_embedded(out, v2=v2)
    out["x-kubernetes-group-version-kind"] = [_gvk(crd, version, _names(crd)["kind"])]
    _add_selectable_fields(out, crd, version)
    return _pruned(out) if v2 else out


def list_schema(crd: Mapping[str, Any], version: str, *, v2: bool) -> JsonDict:
    """The definition of the CRD's list kind in ``version`` (buildListSchema)."""
    names = _names(crd)
    group = str((crd.get("spec") or {}).get("group", ""))
    list_meta = docs().get(_META + "PartialObjectMetadataList", {}).get("p", {})
    out: JsonDict = {
        "description": f"{names['listKind']} is a list of {names['kind']}",
        "type": "object",
        "required": ["items"],
        "properties": {
            "items": {
                "description": f"List of {names['plural']}. More info: {_CONVENTIONS}",
                "type": "array",
                "items": ref(model_name(group, version, names["kind"]), v2=v2),
            },
            "metadata": ref(LIST_META, v2=v2, description=list_meta.get("metadata", "")),
            **_type_meta(),
        },
        "x-kubernetes-group-version-kind": [_gvk(crd, version, names["listKind"])],
    }
    _add_selectable_fields(out, crd, version)
    return out


def _names(crd: Mapping[str, Any]) -> dict[str, str]:
    names = (crd.get("spec") or {}).get("names") or {}
    kind = str(names.get("kind", ""))
    return {
        "kind": kind,
        "listKind": str(names.get("listKind") or f"{kind}List"),
        "plural": str(names.get("plural", "")),
    }


def _gvk(crd: Mapping[str, Any], version: str, kind: str) -> JsonDict:
    group = str((crd.get("spec") or {}).get("group", ""))
    return {"group": group, "version": version, "kind": kind}


def _object_meta_description() -> str:
    described = docs().get(_META + "PartialObjectMetadata", {}).get("p", {})
    return str(described.get("metadata", ""))


def _type_meta() -> JsonDict:
    """TypeMeta's ``apiVersion`` and ``kind`` (addTypeMetaProperties)."""
    described = docs().get(_META + "TypeMeta", {}).get("p", {})
    return {
        member: {"description": described.get(member, ""), "type": "string"}
        for member in ("apiVersion", "kind")
    }


def version_entry(crd: Mapping[str, Any], version: str) -> Mapping[str, Any]:
    """The CRD's ``spec.versions`` entry named ``version`` (empty when there is none)."""
    for entry in (crd.get("spec") or {}).get("versions") or []:
        if isinstance(entry, Mapping) and entry.get("name") == version:
            return entry
    return {}


def _add_selectable_fields(out: JsonDict, crd: Mapping[str, Any], version: str) -> None:
    fields = version_entry(crd, version).get("selectableFields") or []
    if fields:
        out["x-kubernetes-selectable-fields"] = [
            {"fieldPath": str(f.get("jsonPath", "")).removeprefix(".")} for f in fields
        ]


def _kube_openapi(s: Mapping[str, Any], *, nested: bool = False) -> JsonDict:
    """NewStructural then ToKubeOpenAPI: what of a JSONSchemaProps a structural schema
    keeps. ``nested``: inside a junctor, where ``additionalProperties`` is not kept."""
    out: JsonDict = {}
    for key in _STRINGS:
        if s.get(key):
            out[key] = s[key]
    for key in _NUMBERS:
        if s.get(key) is not None:
            out[key] = s[key]
    for key in _FLAGS:
        if s.get(key) is True:
            out[key] = True
    for key in _LISTS:
        if s.get(key):
            out[key] = copy.deepcopy(s[key])
    for key in _PRESENT:
        if s.get(key) is not None:  # JSON null: a nil pointer in Go
            out[key] = copy.deepcopy(s[key])
    docs_ = s.get("externalDocs")
    if isinstance(docs_, Mapping):
        out["externalDocs"] = {k: docs_[k] for k in ("description", "url") if docs_.get(k)}
    if isinstance(s.get("items"), Mapping):
        out["items"] = _kube_openapi(s["items"], nested=nested)
    props = s.get("properties")
    if isinstance(props, Mapping) and props:
        out["properties"] = {
            k: _kube_openapi(v, nested=nested) for k, v in props.items() if isinstance(v, Mapping)
        }
    extra = s.get("additionalProperties")
    if not nested and isinstance(extra, bool):
        out["additionalProperties"] = extra
    elif not nested and isinstance(extra, Mapping):
        out["additionalProperties"] = _kube_openapi(extra)
    for key in _JUNCTORS:
        clauses = s.get(key)
        if isinstance(clauses, list) and clauses:
            out[key] = [_kube_openapi(c, nested=True) for c in clauses if isinstance(c, Mapping)]
    if isinstance(s.get("not"), Mapping):
        out["not"] = _kube_openapi(s["not"], nested=True)
    return out


def _children(node: JsonDict) -> list[JsonDict]:
    """The structural schemas under ``node``: properties, items, additionalProperties."""
    out = [v for v in (node.get("properties") or {}).values() if isinstance(v, dict)]
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out.append(node[key])
    return out


def _unfold(node: JsonDict) -> JsonDict:
    """Unfold: an ``x-kubernetes-int-or-string`` node says so in ``anyOf`` too."""
    if node.get("x-kubernetes-int-or-string"):
        any_of = node.get("anyOf")
        all_of = node.get("allOf") or []
        if any_of != _INT_OR_STRING and not (all_of and all_of[0].get("anyOf") == _INT_OR_STRING):
            if any_of is None:
                node["anyOf"] = copy.deepcopy(_INT_OR_STRING)
            else:
                node["allOf"] = [{"anyOf": copy.deepcopy(_INT_OR_STRING)}, *all_of]
    for child in _children(node):
        _unfold(child)
    return node


def _openapi_v2(node: JsonDict) -> JsonDict:
    """ToStructuralOpenAPIV2, in place; parents before their children."""
    for key in (*_JUNCTORS, "not"):
        node.pop(key, None)
    if node.pop("nullable", False):
        for key in ("type", "items", "properties"):
            node.pop(key, None)
    preserve = node.get("x-kubernetes-preserve-unknown-fields", False)
    if preserve:
        node.pop("items", None)
        node.pop("properties", None)
    if "items" not in node and node.get("type") == "array":
        del node["type"]
    if preserve and node.get("type") == "object":
        del node["type"]
    required = node.get("required")
    if required:
        nullable = {k for k, v in (node.get("properties") or {}).items() if v.get("nullable")}
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra.get("nullable"):
            nullable = set(required)
        kept = [r for r in required if r not in nullable]
        if kept:
            node["required"] = kept
        else:
            del node["required"]
    for child in _children(node):
        _openapi_v2(child)
    return node


def _add_embedded(node: JsonDict, *, v2: bool) -> None:
    """addEmbeddedProperties: an embedded object gets type and object meta."""
    for child in _children(node):
        _add_embedded(child, v2=v2)
    if node.get("x-kubernetes-preserve-unknown-fields") and v2:
        return  # kubectl's v2 validation would refuse the unknown fields
    if node.get("x-kubernetes-embedded-resource"):
        props = node.setdefault("properties", {})
        props["apiVersion"] = {"description": _EMBEDDED_API_VERSION, "type": "string"}
        props["kind"] = {"description": _EMBEDDED_KIND, "type": "string"}
        props["metadata"] = ref(OBJECT_META, v2=v2, description=_object_meta_description())
        required = node.setdefault("required", [])
        for member in ("kind", "apiVersion"):
            if member not in required:
                required.append(member)


def _pruned(node: JsonDict) -> JsonDict:
    """PruneDefaults: no ``default`` anywhere a schema sits (v2's documents carry none)."""
    node.pop("default", None)
    for child in _children(node):
        _pruned(child)
    for key in _JUNCTORS:
        for clause in node.get(key) or []:
            _pruned(clause)
    if isinstance(node.get("not"), dict):
        _pruned(node["not"])
    return node
