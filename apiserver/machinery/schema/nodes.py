"""One node of a structural schema, read as apiextensions-apiserver's ``Structural`` reads it.

A CRD's ``openAPIV3Schema`` arrives as decoded JSON; these helpers answer what
``structuralschema.Structural`` holds for one node (its ``properties``, ``items``,
``additionalProperties``, ``nullable``, ``default``) without converting the whole schema,
and name the ``x-kubernetes-*`` extensions the other modules of this package act on.

Thread-safety: pure functions over JSON values; safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "EMBEDDED",
    "INT_OR_STRING",
    "LIST_MAP_KEYS",
    "LIST_TYPE",
    "PRESERVE",
    "ROOT_META",
    "TYPES",
    "JsonDict",
    "Schema",
    "additional",
    "child",
    "has_default",
    "items",
    "keeps_meta",
    "nullable",
    "prop_schema",
    "props",
]

JsonDict = dict[str, Any]
Schema = Mapping[str, Any]

PRESERVE: Final = "x-kubernetes-preserve-unknown-fields"
EMBEDDED: Final = "x-kubernetes-embedded-resource"
INT_OR_STRING: Final = "x-kubernetes-int-or-string"
LIST_TYPE: Final = "x-kubernetes-list-type"
LIST_MAP_KEYS: Final = "x-kubernetes-list-map-keys"
ROOT_META: Final = ("apiVersion", "kind", "metadata")
TYPES: Final = ("array", "boolean", "integer", "number", "object", "string")


def props(s: Schema | None) -> Mapping[str, Any]:
    p = s.get("properties") if s is not None else None
    return p if isinstance(p, dict) else {}


def items(s: Schema | None) -> Schema | None:
    i = s.get("items") if s is not None else None
    return i if isinstance(i, dict) else None


def additional(s: Schema | None) -> Schema | bool | None:
    """``additionalProperties``: a schema, ``True`` (any value), or None (absent/false)."""
    a = s.get("additionalProperties") if s is not None else None
    if isinstance(a, dict):
        return a
    return True if a is True else None


def prop_schema(s: Schema | None, key: str) -> tuple[bool, Schema | None]:
    """Whether ``key`` is described at this level, and its schema (None: anything)."""
    described = props(s)
    if key in described:
        p = described[key]
        return True, p if isinstance(p, dict) else {}
    add = additional(s)
    if add is None:
        return False, None
    return True, add if isinstance(add, dict) else None


def nullable(s: Schema | None) -> bool:
    return s is not None and s.get("nullable") is True


def has_default(s: Schema | None) -> bool:
    """Whether the node has a ``default`` (a JSON ``null`` default is none: Go decodes it
    into a nil ``*JSON``)."""
    return s is not None and s.get("default") is not None


def keeps_meta(s: Schema | None, key: str, value: Any) -> bool:
    """``apiVersion``/``kind`` strings and a ``metadata`` object of an embedded resource
    (the resource's root counts as one): never pruned, whatever ``properties`` say."""
    if s is None or s.get(EMBEDDED) is not True:
        return False
    if key in ("apiVersion", "kind"):
        return isinstance(value, str)
    return key == "metadata" and isinstance(value, dict)


def child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
