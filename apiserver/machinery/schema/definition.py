"""The checks a CustomResourceDefinition's schemas must pass before kube-apiserver stores it.

A CRD whose ``openAPIV3Schema`` is not structural, or whose defaults are wrong, is refused
with 422; :func:`schema_errors` gives the field errors kube-apiserver's CRD validation
(``apiextensions/validation``) finds in one version's schema:

- ``structuralschema.ValidateStructural`` and the parts of
  ``ValidateCustomResourceDefinitionOpenAPISchema`` that matter here (every level says its
  ``type``, ``items`` of an array, no ``additionalProperties`` beside ``properties``, value
  validations only inside ``allOf``/``anyOf``/``oneOf``/``not``, list types);
- ``structuraldefaulting.ValidateDefaults`` (``schema/defaulting/validation.go``), once
  the schema is structural: each ``default`` is what pruning by its own schema leaves
  (``must not have unknown fields``) and validates against it (kube-openapi's messages,
  named from the default's root: ``properties[spec].default.size: Invalid value: -1: size
  in body should be greater than or equal to 0``);
- the defaults the schema validator forbids: anywhere under the top-level ``metadata``,
  ``apiVersion`` or ``kind`` (``must not be set in top-level metadata``), and inside an
  ``additionalProperties`` applying to object metadata.

:func:`structural_errors` renders the first family alone, as ``<path>: <error>`` lines.

Not checked: the ObjectMeta coercion and validation a default inside an embedded
resource's ``metadata`` gets (``schemaobjectmeta.Coerce``/``Validate``), CEL rules on
defaults, and the root ``metadata`` invariants (only ``name``/``generateName``).

Thread-safety: pure functions over JSON values; safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from apiserver.api.field import FieldError
from apiserver.api.gofmt import quote
from apiserver.machinery.schema import coercion, nodes
from apiserver.machinery.schema.nodes import Schema
from apiserver.machinery.schema.validation import JsonFieldError, errors_at, json_equal, json_type

__all__ = ["schema_errors", "structural_errors"]

_META_FIELDS: Final = frozenset(nodes.ROOT_META)


def schema_errors(schema: Mapping[str, Any], *, path: str) -> list[FieldError]:
    """The field errors that make kube-apiserver refuse a CRD version's schema.

    ``path`` names where the schema sits in the CRD
    (``spec.versions[0].schema.openAPIV3Schema``); ``[]``: acceptable.
    """
    errs: list[JsonFieldError] = []
    _structural(schema, path, "root", errs)
    if not errs:
        # ValidateDefaults(isResourceRoot): the root is an embedded resource
        _default_errors({**schema, nodes.EMBEDDED: True}, path, errs, inside_meta=False)
    _forbidden_defaults(schema, path, errs, root=True, allowed=True, why="", inside_meta=False)
    return list(errs)


def structural_errors(
    schema: Mapping[str, Any], *, path: str = "spec.validation.openAPIV3Schema"
) -> list[str]:
    """Why ``schema`` is not an acceptable structural schema, as kube-apiserver words it.

    Each entry reads ``<path>: <error>``, e.g. ``spec.validation.openAPIV3Schema
    .properties[spec].type: Required value: must not be empty for specified object fields``;
    ``[]`` means the CRD may be stored. ``path`` names where the schema sits in the CRD
    (``spec.versions[0].schema.openAPIV3Schema`` for a v1 CRD).
    """
    errs: list[JsonFieldError] = []
    _structural(schema, path, "root", errs)
    return [str(e) for e in errs]


# --- defaults (apiextensions-apiserver/pkg/apiserver/schema/defaulting/validation.go) ---


def _default_errors(s: Any, path: str, errs: list[JsonFieldError], *, inside_meta: bool) -> None:
    """``validate`` of ValidateDefaults: each default pruned-clean and valid, top-down
    through ``properties`` and ``items`` (never ``additionalProperties``)."""
    if not isinstance(s, Mapping):
        return
    embedded = s.get(nodes.EMBEDDED) is True
    if embedded:
        inside_meta = False
    if nodes.has_default(s):
        value = s["default"]
        field = f"{path}.default"
        if not inside_meta:
            pruned = coercion.prune(value, s)
            if not json_equal(pruned, value):
                errs.append(JsonFieldError("Invalid", field, value, "must not have unknown fields"))
        # inside metadata kube first builds the surrounding object and checks its
        # ObjectMeta (not done here); both then validate the value by its schema
        errs.extend(errors_at(value, s, field, resource_root=embedded))
    items = s.get("items")
    if isinstance(items, Mapping):
        _default_errors(items, f"{path}.items", errs, inside_meta=inside_meta)
    for k, ps in nodes.props(s).items():
        meta = inside_meta or (embedded and k in _META_FIELDS)
        _default_errors(ps, f"{path}.properties[{k}]", errs, inside_meta=meta)


def _forbidden_defaults(
    s: Any,
    path: str,
    errs: list[JsonFieldError],
    *,
    root: bool,
    allowed: bool,
    why: str,
    inside_meta: bool,
) -> None:
    """Where ``specStandardValidatorV3`` forbids a ``default`` (``withForbiddenDefaults``):
    below the top-level metadata fields, and in ``additionalProperties`` of metadata."""
    if not isinstance(s, Mapping):
        return
    if "default" in s and s["default"] is not None and not allowed:
        detail = f"must not be set {why}" if why else "must not be set"
        errs.append(JsonFieldError("Forbidden", f"{path}.default", detail=detail))

    def walk(sub: Any, where: str, *, allow: bool, reason: str, meta: bool) -> None:
        _forbidden_defaults(
            sub, where, errs, root=False, allowed=allow, why=reason, inside_meta=meta
        )

    add = s.get("additionalProperties")
    if isinstance(add, Mapping):
        if inside_meta:  # pruning without a value is ambiguous there
            walk(
                add,
                f"{path}.additionalProperties",
                allow=False,
                reason="inside additionalProperties applying to object metadata",
                meta=inside_meta,
            )
        else:
            walk(add, f"{path}.additionalProperties", allow=allowed, reason=why, meta=False)
    embedded = s.get(nodes.EMBEDDED) is True
    for k, ps in nodes.props(s).items():
        allow, reason, meta = allowed, why, inside_meta
        if (root or embedded) and k in _META_FIELDS:
            meta = True
            if root:
                allow, reason = False, f"in top-level {k}"
        walk(ps, f"{path}.properties[{k}]", allow=allow, reason=reason, meta=meta)
    if isinstance(s.get("not"), Mapping):
        walk(s["not"], f"{path}.not", allow=allowed, reason=why, meta=inside_meta)
    for key in ("allOf", "oneOf", "anyOf"):
        subs = s.get(key)
        for i, sub in enumerate(subs if isinstance(subs, list) else []):
            walk(sub, f"{path}.{key}[{i}]", allow=allowed, reason=why, meta=inside_meta)
    items = s.get("items")
    if isinstance(items, Mapping):
        walk(items, f"{path}.items", allow=allowed, reason=why, meta=inside_meta)


# --- structural schemas (apiextensions-apiserver/pkg/apiserver/schema/validation.go) ----


def _structural(s: Any, path: str, level: str, errs: list[JsonFieldError]) -> None:
    if not isinstance(s, Mapping):
        errs.append(JsonFieldError("Invalid", path, json_type(s), "must be a schema object"))
        return
    t = s.get("type")
    if "$ref" in s:
        errs.append(JsonFieldError("Forbidden", f"{path}.$ref", detail="$ref is not supported"))
    if t not in (None, "") and t not in nodes.TYPES:
        errs.append(
            JsonFieldError(
                "NotSupported",
                f"{path}.type",
                t,
                "supported values: " + ", ".join(quote(x) for x in nodes.TYPES),
            )
        )
    if s.get(nodes.PRESERVE) is False:
        errs.append(
            JsonFieldError(
                "Invalid", f"{path}.{nodes.PRESERVE}", False, "must be true or undefined"
            )
        )
    embedded = s.get(nodes.EMBEDDED) is True
    int_or_string = s.get(nodes.INT_OR_STRING) is True
    if not t and not embedded and not int_or_string and s.get(nodes.PRESERVE) is not True:
        detail = {
            "root": "must not be empty at the root",
            "items": "must not be empty for specified array items",
            "field": "must not be empty for specified object fields",
        }[level]
        errs.append(JsonFieldError("Required", f"{path}.type", detail=detail))
    if level == "root" and t and t != "object":
        errs.append(JsonFieldError("Invalid", f"{path}.type", t, "must be object at the root"))
    if embedded and t != "object":
        if t:
            errs.append(
                JsonFieldError(
                    "Invalid",
                    f"{path}.type",
                    t,
                    "must be object if x-kubernetes-embedded-resource is true",
                )
            )
        else:
            errs.append(
                JsonFieldError(
                    "Required",
                    f"{path}.type",
                    detail="must be object if x-kubernetes-embedded-resource is true",
                )
            )
    if int_or_string and t:
        errs.append(
            JsonFieldError(
                "Invalid", f"{path}.type", t, "must be empty if x-kubernetes-int-or-string is true"
            )
        )
    items = s.get("items")
    if isinstance(items, list):
        errs.append(
            JsonFieldError(
                "Forbidden",
                f"{path}.items",
                detail="items must be a schema object and not an array",
            )
        )
    elif t == "array" and items is None:
        errs.append(JsonFieldError("Required", f"{path}.items", detail="must be specified"))
    add = s.get("additionalProperties")
    if add is not None and "properties" in s:
        errs.append(
            JsonFieldError(
                "Forbidden",
                f"{path}.additionalProperties",
                detail="additionalProperties and properties are mutual exclusive",
            )
        )
    if add is False:
        errs.append(
            JsonFieldError(
                "Forbidden",
                f"{path}.additionalProperties",
                detail="additionalProperties cannot be set to false",
            )
        )
    if s.get("uniqueItems") is True:
        errs.append(
            JsonFieldError(
                "Forbidden",
                f"{path}.uniqueItems",
                detail="uniqueItems cannot be set to true since the runtime complexity "
                "becomes quadratic",
            )
        )
    _list_type_errors(s, path, errs)
    for k, ps in nodes.props(s).items():
        _structural(ps, f"{path}.properties[{k}]", "field", errs)
    if isinstance(items, Mapping):
        _structural(items, f"{path}.items", "items", errs)
    if isinstance(add, Mapping):
        _structural(add, f"{path}.additionalProperties", "field", errs)
    for key in ("allOf", "anyOf", "oneOf"):
        subs = s.get(key)
        for i, sub in enumerate(subs if isinstance(subs, list) else []):
            _value_validation(sub, f"{path}.{key}[{i}]", errs)
    if "not" in s:
        _value_validation(s["not"], f"{path}.not", errs)


def _list_type_errors(s: Schema, path: str, errs: list[JsonFieldError]) -> None:
    list_type = s.get(nodes.LIST_TYPE)
    keys = s.get(nodes.LIST_MAP_KEYS)
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errs.append(
            JsonFieldError(
                "NotSupported",
                f"{path}.{nodes.LIST_TYPE}",
                list_type,
                'supported values: "atomic", "set", "map"',
            )
        )
    if list_type is not None and s.get("type") != "array":
        errs.append(
            JsonFieldError(
                "Invalid",
                f"{path}.type",
                s.get("type") or "",
                "must be array if x-kubernetes-list-type is specified",
            )
        )
    if list_type == "map":
        item_type = (nodes.items(s) or {}).get("type")
        if item_type != "object":
            errs.append(
                JsonFieldError(
                    "Invalid",
                    f"{path}.items.type",
                    item_type or "",
                    "must be object if parent array's x-kubernetes-list-type is map",
                )
            )
        if not keys:
            errs.append(
                JsonFieldError(
                    "Required",
                    f"{path}.{nodes.LIST_MAP_KEYS}",
                    detail="must not be empty if x-kubernetes-list-type is map",
                )
            )
    elif keys is not None:
        errs.append(
            JsonFieldError(
                "Forbidden",
                f"{path}.{nodes.LIST_MAP_KEYS}",
                detail="must not be specified if x-kubernetes-list-type is not map",
            )
        )


def _value_validation(s: Any, path: str, errs: list[JsonFieldError]) -> None:
    """Inside ``allOf``/``anyOf``/``oneOf``/``not`` only value checks may appear."""
    if not isinstance(s, Mapping):
        errs.append(JsonFieldError("Invalid", path, json_type(s), "must be a schema object"))
        return
    if s.get("type"):
        errs.append(
            JsonFieldError("Forbidden", f"{path}.type", detail="must be empty to be structural")
        )
    for key in ("default", "additionalProperties"):
        if key in s:
            errs.append(
                JsonFieldError(
                    "Forbidden", f"{path}.{key}", detail="must be undefined to be structural"
                )
            )
    for key in ("nullable", nodes.PRESERVE, nodes.EMBEDDED, nodes.INT_OR_STRING):
        if s.get(key) is True:
            errs.append(
                JsonFieldError(
                    "Forbidden", f"{path}.{key}", detail="must be false to be structural"
                )
            )
    for k, ps in nodes.props(s).items():
        _value_validation(ps, f"{path}.properties[{k}]", errs)
    if isinstance(s.get("items"), Mapping):
        _value_validation(s["items"], f"{path}.items", errs)
    for key in ("allOf", "anyOf", "oneOf"):
        subs = s.get(key)
        for i, sub in enumerate(subs if isinstance(subs, list) else []):
            _value_validation(sub, f"{path}.{key}[{i}]", errs)
    if "not" in s:
        _value_validation(s["not"], f"{path}.not", errs)
