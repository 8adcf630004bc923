"""The two kinds of mutation: an apply configuration merged in, or a JSON Patch applied.

A port of ``staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch``:

* ``ApplyConfiguration`` (``smd.go``): the expression's ``Object{...}`` is merged into
  the object as server-side apply merges (structured-merge-diff's ``Merge``, by the
  resource's schema: maps and structs key by key, lists of type map by their keys, sets
  by value, anything atomic replaced), without any field manager. A configuration with a
  field the schema lacks is refused, and so is one that holds an atomic list, map or
  struct (kube forbids them: setting one would silently drop what the configuration
  does not repeat);
* ``JSONPatch`` (``json_patch.go``): the expression's ``JSONPatch{...}`` list is applied
  as RFC 6902 (evanphx/json-patch v4 semantics); a failed ``test`` operation leaves the
  object as it was, and is no error. A built-in object must then decode strictly: an
  unknown field or a wrong JSON type is an internal error (500), as kube's strict
  decoder makes it.

Errors are :class:`MutationFailed` (handed to the policy's ``failurePolicy``) or, for a
500, a :class:`~apiserver.api.errors.StatusError` (returned as it is, whatever the
policy).

Thread-safety: pure functions; safe to share between threads.
"""

from __future__ import annotations

from typing import Any

from apiserver.api.errors import StatusError
from apiserver.machinery import fieldvalidation, managedfields, patch
from apiserver.machinery.typeinfo import LIST, MAP, STRUCT, TypeNode
from apiserver.registry.mutatingpolicy.objects import (
    JSON_PATCH,
    OBJECT,
    is_typed,
    plain,
    type_mismatches,
)

__all__ = ["MutationFailed", "apply_configuration", "apply_json_patch"]

JsonDict = dict[str, Any]


class MutationFailed(Exception):
    """A mutation that could not be applied; the text says why, as kube words it."""


def _type_mismatch(value: Any) -> None:
    mismatches = type_mismatches(value)
    if mismatches:
        raise MutationFailed("type mismatch: " + "\n".join(mismatches))


def apply_configuration(obj: JsonDict, result: Any, t: TypeNode | None) -> JsonDict:
    """``applyConfigPatcher.Patch``: ``obj`` with the evaluated ``Object{...}`` merged in.

    Raises:
        MutationFailed: the result is not an ``Object``, its nested type names do not
            follow its fields, a field is unknown, or it sets something atomic.
    """
    if not is_typed(result, OBJECT):
        raise MutationFailed("must evaluate to Object")
    _type_mismatch(result)
    config = plain(result)
    config["apiVersion"] = obj.get("apiVersion")
    config["kind"] = obj.get("kind")
    undeclared = managedfields.undeclared(config, t)
    if undeclared:
        text = undeclared[0] if len(undeclared) == 1 else "errors:\n  " + "\n  ".join(undeclared)
        raise MutationFailed(
            f"error applying patch: failed to convert patch object to typed object: {text}"
        )
    atomics = _atomics(config, t, "")
    if atomics:
        raise MutationFailed(
            "error applying patch: invalid ApplyConfiguration: may not mutate atomic "
            "arrays, maps or structs: " + ", ".join(atomics)
        )
    merged: JsonDict = managedfields.merge(obj, config, t)
    return merged


def _atomics(value: Any, t: TypeNode | None, path: str) -> list[str]:
    """``findAtomics``: the paths of the atomic lists, maps and structs in ``value``."""
    if t is None:
        return []
    out: list[str] = []
    if isinstance(value, dict) and t.kind in (STRUCT, MAP):
        if t.atomic:
            out.append(path)
        if t.kind == STRUCT:
            fields = t.fields()
            for key, child in value.items():
                ft = fields.get(key)
                if ft is not None:
                    out.extend(_atomics(child, ft, f"{path}.{key}"))
    elif isinstance(value, list) and t.kind == LIST:
        if t.list_type == "atomic":
            out.append(path)
        for i, item in enumerate(value):
            out.extend(_atomics(item, t.elem, f"{path}[{i}]"))
    return out


def apply_json_patch(obj: JsonDict, result: Any, t: TypeNode | None, *, strict: bool) -> JsonDict:
    """``jsonPatcher.Patch``: ``obj`` with the evaluated ``JSONPatch`` list applied.

    Args:
        strict: decode the result as a built-in kind (``t`` its schema): unknown fields
            and wrong types are a 500, as kube's strict JSON decoder makes them.

    Raises:
        MutationFailed: the result is not a list of ``JSONPatch``, or an operation does
            not apply.
        StatusError: the patched built-in object does not decode.
    """
    if not isinstance(result, list) or not all(is_typed(op, JSON_PATCH) for op in result):
        raise MutationFailed("must evaluate to list(JSONPatch)")
    ops: list[JsonDict] = []
    for item in result:
        op: JsonDict = {"op": item.get("op", ""), "path": item.get("path", "")}
        if item.get("from"):
            op["from"] = item["from"]
        if "value" in item:
            _type_mismatch(item["value"])
            op["value"] = plain(item["value"])
        ops.append(op)
    try:
        patched = patch.json_patch(obj, ops)
    except patch.PatchTestFailed:
        return obj  # "If a json patch fails a test operation, the patch must not be applied"
    except patch.PatchError as exc:
        raise MutationFailed(f"JSON Patch: {exc.detail}") from None
    if strict and t is not None:
        issues: list[str] = []
        try:
            patched = fieldvalidation.check_typed(patched, t, issues=issues)
        except fieldvalidation.TypeError_ as exc:
            raise _internal(str(exc)) from None
        if issues:
            raise _internal("strict decoding error: " + ", ".join(issues))
    return patched


def _internal(error: str) -> StatusError:
    """``apierrors.NewInternalError``."""
    return StatusError(
        500, "InternalError", f"Internal error occurred: {error}", {"causes": [{"message": error}]}
    )
