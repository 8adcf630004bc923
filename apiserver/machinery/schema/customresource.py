"""A custom resource against its version's schema: on a write, and read from storage.

apiextensions-apiserver's ``registry/customresource`` and crdhandler.go: a request's
object is pruned and defaulted as it is decoded (create, update, and each patch once it
is applied), then validated (:func:`apply_schema`); an object read from storage is pruned
and defaulted again by the storage codec (:func:`from_storage`), so a ``default`` added to
a CRD later shows on objects stored before it, in gets, lists and watch events, and the
next write stores it.

Thread-safety: pure functions over JSON values; inputs are never mutated. Safe to share
between threads.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from apiserver.api.field import Cause
from apiserver.machinery.schema import coercion, nodes
from apiserver.machinery.schema.validation import Validator

__all__ = ["apply_schema", "from_storage", "version_schema"]


def apply_schema(
    schema: Mapping[str, Any],
    obj: dict[str, Any],
    *,
    kind: str,
    status_subresource: bool,
    pruned: list[str] | None = None,
) -> tuple[dict[str, Any], list[Cause]]:
    """Prune, default and validate a custom resource against its version's structural schema.

    Args:
        schema: the version's ``openAPIV3Schema``.
        obj: the custom resource as decoded from JSON; not mutated.
        kind: the resource's Kind (kube's messages for custom resources do not name it;
            kept for the caller's 422 message).
        status_subresource: whether ``/status`` is a subresource; the caller carries the
            old status across, so whatever ``obj`` holds is validated as it is.
        pruned: collects the paths of the unknown fields pruning dropped
            (``spec.ports[0].extra``), for ``fieldValidation``.

    Returns:
        The pruned and defaulted copy of ``obj`` (the caller's to change) and the
        validation causes (``[]``: valid).
    """
    del kind, status_subresource  # the same treatment either way; see the docstring
    out: dict[str, Any] = coercion.coerce(copy.deepcopy(obj), schema, pruned=pruned)
    validator = Validator()
    validator.validate(out, {k: v for k, v in schema.items() if k != nodes.EMBEDDED}, "", root=True)
    return out, [e.cause() for e in validator.errors]


def from_storage(schema: Mapping[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as kube's storage codec decodes it for ``schema``'s version: pruned, its
    non-nullable nulls dropped, defaulted (ObjectMeta is left as stored).

    Copy on write: ``obj`` is not mutated, and comes back itself when nothing changed;
    the result shares unchanged parts with it, so it is read-only, like ``obj``.
    """
    out: dict[str, Any] = coercion.coerce(obj, schema)
    return out


def version_schema(crd: Mapping[str, Any], version: str) -> Mapping[str, Any] | None:
    """The ``openAPIV3Schema`` of the served ``version`` of ``crd``, or None.

    A version's own ``schema`` wins; otherwise the CRD-wide ``spec.validation`` (v1beta1)
    applies. None when the version is not served or no schema is given.
    """
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        return None
    versions = spec.get("versions")
    entry: Mapping[str, Any] | None = None
    if isinstance(versions, list) and versions:
        for v in versions:
            if isinstance(v, Mapping) and v.get("name") == version:
                entry = v
                break
        if entry is None or entry.get("served") is False:
            return None
    elif spec.get("version") != version:
        return None
    if entry is not None:
        own = entry.get("schema")
        if isinstance(own, Mapping) and isinstance(own.get("openAPIV3Schema"), Mapping):
            schema: Mapping[str, Any] = own["openAPIV3Schema"]
            return schema
    validation = spec.get("validation")
    if isinstance(validation, Mapping) and isinstance(validation.get("openAPIV3Schema"), Mapping):
        fallback: Mapping[str, Any] = validation["openAPIV3Schema"]
        return fallback
    return None
