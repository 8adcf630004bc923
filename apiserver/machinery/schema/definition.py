"""The checks a CustomResourceDefinition's schemas must pass before kube-apiserver stores it.

:func:`structural_errors` gives what ``structuralschema.ValidateStructural`` and the parts
of ``ValidateCustomResourceDefinitionOpenAPISchema`` that matter here find (every level
says its ``type``, ``items`` of an array, no ``additionalProperties`` beside
``properties``, value validations only inside ``allOf``/``anyOf``/``oneOf``/``not``, list
types), as kube-apiserver words them.

Thread-safety: pure functions over JSON values; safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.api.gofmt import quote
from apiserver.machinery.schema import nodes
from apiserver.machinery.schema.nodes import Schema
from apiserver.machinery.schema.validation import JsonFieldError, json_type

__all__ = ["structural_errors"]


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
