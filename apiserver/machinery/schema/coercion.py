"""Pruning and defaulting a JSON value by its structural schema.

What kube-apiserver does to a custom resource each time one is decoded, whether from a
request body or from storage (crdhandler.go: ``unstructuredSchemaCoercer``, then the
codec's ``unstructuredDefaulter``), in that order:

1. **pruning** (``schema/pruning``): fields no ``properties`` describe are dropped, unless
   ``x-kubernetes-preserve-unknown-fields: true`` holds at that level or
   ``additionalProperties`` makes the object a map; ``apiVersion``, ``kind`` and
   ``metadata`` survive at the root and in ``x-kubernetes-embedded-resource`` objects;
2. **null pruning** (``defaulting.PruneNonNullableNullsWithoutDefaults``): a ``null`` in a
   field that is neither ``nullable`` nor defaulted is dropped;
3. **defaulting** (``defaulting.Default``): a field that is absent, or ``null`` and not
   ``nullable``, gets a copy of its ``default``, top-down, so an object that was present or
   just defaulted gets its own fields' defaults too, as do array items and map values. A
   field that is present keeps its value.

Copy on write: nothing given is mutated; a result shares every subtree it did not change
with its input, and is the input itself when nothing changed (reading objects whose
schema has not moved costs a walk, not a copy). Treat results as read-only.

Thread-safety: pure functions over JSON values; safe to share between threads.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from apiserver.machinery.schema import nodes
from apiserver.machinery.schema.nodes import Schema

__all__ = ["coerce", "default", "prune", "prune_nulls"]


def coerce(x: Any, schema: Schema, *, pruned: list[str] | None = None) -> Any:
    """A resource pruned, null-pruned and defaulted by its root ``schema``.

    ``pruned`` collects the paths of the unknown fields pruning dropped
    (``spec.ports[0].extra``), for ``fieldValidation``.
    """
    root = {**schema, nodes.EMBEDDED: True}  # the root keeps apiVersion/kind/metadata
    return default(prune_nulls(prune(x, root, pruned), root), root)


def _each(x: list[Any], step: Callable[[int, Any], Any]) -> list[Any]:
    """``x`` with ``step(i, item)`` for each item; ``x`` itself if no item changed."""
    out: list[Any] | None = None
    for i, v in enumerate(x):
        nv = step(i, v)
        if nv is not v:
            if out is None:
                out = list(x)
            out[i] = nv
    return x if out is None else out


def _with(x: dict[str, Any], changes: dict[str, Any], dropped: list[str]) -> dict[str, Any]:
    if not changes and not dropped:
        return x
    out = {k: v for k, v in x.items() if k not in dropped}
    out.update(changes)
    return out


# --- pruning (apiextensions-apiserver/pkg/apiserver/schema/pruning) --------------------


def prune(x: Any, s: Schema | None, pruned: list[str] | None = None, path: str = "") -> Any:
    """``x`` without what ``s`` does not describe; ``pruned`` collects the dropped paths."""
    if s is not None and s.get(nodes.PRESERVE) is True:
        return _skip_prune(x, s, pruned, path)
    if isinstance(x, dict):
        changes: dict[str, Any] = {}
        dropped: list[str] = []
        for k, v in x.items():
            if nodes.keeps_meta(s, k, v):
                continue
            known, ps = nodes.prop_schema(s, k)
            if not known:
                dropped.append(k)
                if pruned is not None:
                    pruned.append(nodes.child(path, k))
            elif ps is not None:  # additionalProperties: true keeps the value as it is
                nv = prune(v, ps, pruned, nodes.child(path, k))
                if nv is not v:
                    changes[k] = nv
        return _with(x, changes, dropped)
    if isinstance(x, list):
        return _each(x, lambda i, v: prune(v, nodes.items(s), pruned, f"{path}[{i}]"))
    return x


def _skip_prune(x: Any, s: Schema | None, pruned: list[str] | None, path: str) -> Any:
    """Below ``x-kubernetes-preserve-unknown-fields``: keep unknown keys, prune known ones."""
    if s is None:
        return x
    if isinstance(x, dict):
        changes: dict[str, Any] = {}
        for k, v in x.items():
            if nodes.keeps_meta(s, k, v):
                continue
            known, ps = nodes.prop_schema(s, k)
            if known and ps is not None:
                nv = prune(v, ps, pruned, nodes.child(path, k))
                if nv is not v:
                    changes[k] = nv
        return _with(x, changes, [])
    if isinstance(x, list):
        return _each(x, lambda i, v: _skip_prune(v, nodes.items(s), pruned, f"{path}[{i}]"))
    return x


# --- defaulting (apiextensions-apiserver/pkg/apiserver/schema/defaulting) -------------


def prune_nulls(x: Any, s: Schema | None) -> Any:
    """``PruneNonNullableNullsWithoutDefaults``: such nulls dropped; others are left for
    :func:`default` (a non-nullable null with a default) or kept (nullable)."""
    if s is None:
        return x
    if isinstance(x, dict):
        changes: dict[str, Any] = {}
        dropped: list[str] = []
        for k, v in x.items():
            known, ps = nodes.prop_schema(s, k)
            if not known or ps is None:
                continue
            if v is None and not nodes.has_default(ps) and not nodes.nullable(ps):
                dropped.append(k)
            else:
                nv = prune_nulls(v, ps)
                if nv is not v:
                    changes[k] = nv
        return _with(x, changes, dropped)
    if isinstance(x, list):
        return _each(x, lambda _i, v: prune_nulls(v, nodes.items(s)))
    return x


def _is_non_nullable_null(v: Any, s: Schema | None) -> bool:
    return v is None and s is not None and not nodes.nullable(s)


def default(x: Any, s: Schema | None) -> Any:
    """``structuraldefaulting.Default``: top-down, each default a fresh copy."""
    if s is None:
        return x
    if isinstance(x, dict):
        changes: dict[str, Any] = {}
        for k, ps in nodes.props(s).items():
            if not isinstance(ps, dict) or not nodes.has_default(ps):
                continue
            if k not in x or _is_non_nullable_null(x[k], ps):
                changes[k] = copy.deepcopy(ps["default"])
        for k in [*x, *(k for k in changes if k not in x)]:
            known, ps = nodes.prop_schema(s, k)
            if not known or ps is None:
                continue
            v = changes.get(k, x.get(k))
            if _is_non_nullable_null(v, ps) and nodes.has_default(ps):  # a map's value
                v = copy.deepcopy(ps["default"])
            nv = default(v, ps)
            if k not in x or nv is not x[k]:
                changes[k] = nv
        return _with(x, changes, [])
    if isinstance(x, list):
        items = nodes.items(s)

        def item(_i: int, v: Any) -> Any:
            if items is not None and _is_non_nullable_null(v, items) and nodes.has_default(items):
                v = copy.deepcopy(items["default"])
            return default(v, items)

        return _each(x, item)
    return x
