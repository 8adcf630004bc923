"""What a request is made of: JSON bodies, patch flavours, query strings, object paths and
delete options (client-go ``rest/request.go``'s building half). Pure functions and
constants; safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal
from urllib.parse import urlencode

import orjson

from manager.resources import Resource

__all__ = [
    "METHODS",
    "PATCH_CONTENT_TYPES",
    "WRITES",
    "JsonDict",
    "PatchType",
    "Query",
    "QueryValue",
    "delete_options",
    "encode_body",
    "encode_query",
    "metadata_of",
    "namespace_for",
    "object_path",
]

JsonDict = dict[str, Any]
"""A decoded JSON object: what every read and write returns."""

PatchType = Literal["merge", "json", "strategic", "apply"]
"""The patch flavours of the API server, by their short name."""

QueryValue = str | int | float | bool
Query = Mapping[str, QueryValue | None] | Sequence[tuple[str, QueryValue]]

PATCH_CONTENT_TYPES: Final[dict[str, str]] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
METHODS: Final = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def encode_query(query: Query | None) -> str:
    if not query:
        return ""
    pairs = query.items() if isinstance(query, Mapping) else query
    encoded = [
        (key, ("true" if value else "false") if isinstance(value, bool) else str(value))
        for key, value in pairs
        if value is not None
    ]
    return urlencode(encoded)


def metadata_of(body: Any) -> Mapping[str, Any]:
    metadata = body.get("metadata") if isinstance(body, Mapping) else None
    return metadata if isinstance(metadata, Mapping) else {}


def namespace_for(resource: Resource, namespace: str | None, body: Any) -> str | None:
    if not resource.namespaced:
        return None
    ns = namespace or metadata_of(body).get("namespace")
    if not isinstance(ns, str) or not ns:
        raise ValueError(f"{resource.group_resource} is namespaced: a namespace is required")
    return ns


def object_path(
    resource: Resource, namespace: str | None, name: str, subresource: str | None = None
) -> str:
    if resource.namespaced and not namespace:
        raise ValueError(f"{resource.group_resource} is namespaced: a namespace is required")
    return resource.path(namespace, name, subresource)


def delete_options(
    propagation_policy: str | None,
    preconditions: JsonDict | None,
    grace_period_seconds: int | None,
) -> JsonDict | None:
    options: JsonDict = {}
    if propagation_policy is not None:
        options["propagationPolicy"] = propagation_policy
    if preconditions is not None:
        options["preconditions"] = preconditions
    if grace_period_seconds is not None:
        options["gracePeriodSeconds"] = grace_period_seconds
    if not options:
        return None
    return {"kind": "DeleteOptions", "apiVersion": "v1", **options}


def encode_body(body: Any) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return orjson.dumps(body)
