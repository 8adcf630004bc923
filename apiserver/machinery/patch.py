"""The three PATCH flavours the local API server accepts, applied to decoded JSON.

* JSON merge patch (RFC 7386, ``application/merge-patch+json``): maps merge, ``null``
  deletes, everything else (lists included) is replaced.
* JSON patch (RFC 6902, ``application/json-patch+json``): a list of ``add``, ``remove``,
  ``replace``, ``move``, ``copy`` and ``test`` operations on JSON pointers.
* Strategic merge patch (``application/strategic-merge-patch+json``): a merge patch that
  knows, per built-in kind, which lists of maps merge by a key (containers by ``name``,
  ports by ``containerPort``, ...) and honours the ``$patch``, ``$retainKeys``,
  ``$setElementOrder/<field>`` and ``$deleteFromPrimitiveList/<field>`` directives. This
  ports ``k8s.io/apimachinery/pkg/util/strategicpatch/patch.go`` (server side:
  ``MergeParallelList`` and ``IgnoreUnmatchedNulls`` on) with the merge keys of
  ``k8s.io/api`` encoded in a small schema table.

Contract: every function returns a new object and never mutates its inputs; nothing in
the result aliases the patch. Failures raise :class:`PatchError` carrying the HTTP status,
``Status.reason`` and ``Status.message`` kube-apiserver answers with (the handler in
``k8s.io/apiserver/pkg/endpoints/handlers/patch.go``).

Thread-safety: pure functions; safe to call from any thread.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apiserver.storage.store import copy_json

__all__ = [
    "STRATEGIC_KINDS",
    "PatchError",
    "PatchTestFailed",
    "json_merge_patch",
    "json_patch",
    "strategic_merge_patch",
]

_INVALID_MESSAGE: Final = "the server rejected our request due to an error in our request"
_UNSUPPORTED_MESSAGE: Final = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
)


class PatchError(Exception):
    """A patch that cannot be applied.

    Attributes:
        status: the HTTP status kube-apiserver answers: 400, 415 or 422.
        reason: the ``Status.reason``: ``BadRequest``, ``UnsupportedMediaType`` or ``Invalid``.
        message: the ``Status.message``.
        detail: what went wrong, for logs; kube-apiserver does not send it for JSON patch
            failures (its 422 message is generic), so it may differ from ``message``.
        details: the ``Status.details``: ``{}`` for JSON patch failures (kube answers them
            with ``NewGenericServerResponse``, whose details are empty), else None.
    """

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        detail: str = "",
        details: dict[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.detail = detail or message
        self.details = details
        super().__init__(message if message == self.detail else f"{message}: {self.detail}")


class PatchTestFailed(PatchError):
    """A JSON patch ``test`` operation that failed (evanphx/json-patch's
    ``ErrTestFailed``): a MutatingAdmissionPolicy leaves the object as it was."""


def _bad_request(message: str) -> PatchError:
    return PatchError(400, "BadRequest", message)


def _invalid(detail: str) -> PatchError:
    return PatchError(422, "Invalid", _INVALID_MESSAGE, detail=detail, details={})


def _test_failed(path: str) -> PatchTestFailed:
    return PatchTestFailed(
        422,
        "Invalid",
        _INVALID_MESSAGE,
        detail=f"testing value {path} failed: test failed",
        details={},
    )


def _go_type(value: Any) -> str:
    """How Go's encoding/json names a JSON value's type in an unmarshal error."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if value is None:
        return "null"
    return "number"


# --- RFC 7386 ---------------------------------------------------------------------------


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def json_merge_patch(target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Apply an RFC 7386 JSON merge patch.

    The result shares nothing with ``target`` or ``patch``.

    Raises:
        PatchError: 400 when the patch is not a JSON object (kube: ``Invalid JSON Patch``).
    """
    if not isinstance(patch, dict):
        raise _bad_request("Invalid JSON Patch")
    result = _merge(target, patch)
    assert isinstance(result, dict)
    copied: dict[str, Any] = copy_json(result)
    return copied


# --- RFC 6902 ---------------------------------------------------------------------------


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``1 == 1.0`` but ``true != 1``, order matters in arrays."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _pointer(path: Any, what: str) -> list[str]:
    if not isinstance(path, str):
        raise _invalid(f"{what} operation failed to decode path")
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid(f"{what} operation does not apply: invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(token: str, size: int, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return size
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise _invalid(f"Unable to access invalid index: {token}: invalid index referenced")
    idx = int(token)
    if idx > size or (idx == size and not allow_end):
        raise _invalid(f"Unable to access invalid index: {idx}: invalid index referenced")
    return idx


def _resolve(doc: Any, tokens: list[str], op: str, path: str) -> Any:
    """The container that holds the last token of ``tokens``."""
    cur = doc
    for tok in tokens[:-1]:
        if isinstance(cur, dict) and tok in cur:
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_index(tok, len(cur), allow_end=False)]
        else:
            raise _invalid(f'{op} operation does not apply: doc is missing path: "{path}"')
    if not isinstance(cur, dict | list):
        raise _invalid(f'{op} operation does not apply: doc is missing path: "{path}"')
    return cur


def _get(doc: Any, tokens: list[str], op: str, path: str) -> Any:
    if not tokens:
        return doc
    parent = _resolve(doc, tokens, op, path)
    key = tokens[-1]
    if isinstance(parent, dict):
        if key not in parent:
            raise _invalid(f'{op} operation does not apply: doc is missing path: "{path}"')
        return parent[key]
    return parent[_index(key, len(parent), allow_end=False)]


def _add(doc: Any, tokens: list[str], value: Any, path: str) -> Any:
    if not tokens:
        return value
    parent = _resolve(doc, tokens, "add", path)
    key = tokens[-1]
    if isinstance(parent, dict):
        parent[key] = value
    else:
        parent.insert(_index(key, len(parent), allow_end=True), value)
    return doc


def _remove(doc: Any, tokens: list[str], op: str, path: str) -> Any:
    if not tokens:
        raise _invalid(f"{op} operation does not apply: cannot remove the whole document")
    parent = _resolve(doc, tokens, op, path)
    key = tokens[-1]
    if isinstance(parent, dict):
        if key not in parent:
            raise _invalid(
                f"error in remove for path: '{path}': Unable to remove nonexistent key: {key}"
            )
        return parent.pop(key)
    return parent.pop(_index(key, len(parent), allow_end=False))


def _value(op: Mapping[str, Any], kind: str) -> Any:
    if "value" not in op:
        raise _invalid(f"{kind} operation missing value")
    return copy.deepcopy(op["value"])


def json_patch(target: dict[str, Any], ops: Any) -> dict[str, Any]:
    """Apply an RFC 6902 JSON patch; all operations apply or none.

    Raises:
        PatchError: 400 when ``ops`` is not a list of objects; 422 (kube's generic
            "the server rejected our request due to an error in our request", the cause
            in ``detail``) for an unknown op, a bad path, an index out of bounds, or a
            failing ``test``.
    """
    if not isinstance(ops, list):
        raise _bad_request(
            f"json: cannot unmarshal {_go_type(ops)} into Go value of type jsonpatch.Patch"
        )
    for op in ops:
        if not isinstance(op, dict):
            raise _bad_request(
                f"json: cannot unmarshal {_go_type(op)} into Go value of type jsonpatch.Operation"
            )
    doc: Any = copy_json(target)
    for op in ops:
        kind = op.get("op")
        path = op.get("path")
        if kind == "add":
            doc = _add(doc, _pointer(path, "add"), _value(op, "add"), path)
        elif kind == "remove":
            _remove(doc, _pointer(path, "remove"), "remove", path)
        elif kind == "replace":
            tokens = _pointer(path, "replace")
            value = _value(op, "replace")
            if not tokens:
                doc = value
                continue
            parent = _resolve(doc, tokens, "replace", path)
            key = tokens[-1]
            if isinstance(parent, dict):
                if key not in parent:
                    raise _invalid(f"replace operation does not apply: doc is missing key: {path}")
                parent[key] = value
            else:
                parent[_index(key, len(parent), allow_end=False)] = value
        elif kind in ("move", "copy"):
            source = op.get("from")
            from_tokens = _pointer(source, str(kind))
            to_tokens = _pointer(path, str(kind))
            if (
                kind == "move"
                and to_tokens[: len(from_tokens)] == from_tokens
                and (len(to_tokens) > len(from_tokens))
            ):
                raise _invalid(f"move operation does not apply: {path} is a child of {source}")
            try:
                if kind == "move":
                    value = _remove(doc, from_tokens, "move", str(source))
                else:
                    value = copy.deepcopy(_get(doc, from_tokens, "copy", str(source)))
            except PatchError:
                raise _invalid(
                    f"{kind} operation does not apply: doc is missing from path: {source}"
                ) from None
            doc = _add(doc, to_tokens, value, path)
        elif kind == "test":
            tokens = _pointer(path, "test")
            expected = op.get("value")
            try:
                actual = _get(doc, tokens, "test", path)
            except PatchError:
                if expected is None:
                    continue  # a missing value tests equal to null, as evanphx/json-patch does
                raise _test_failed(path) from None
            if not _json_equal(actual, expected):
                raise _test_failed(path)
        else:
            raise _invalid(f"Unexpected kind: {kind if isinstance(kind, str) else 'unknown'}")
    if not isinstance(doc, dict):
        raise _invalid(f"the patched document is a JSON {_go_type(doc)}, not an object")
    return doc


# --- strategic merge patch -------------------------------------------------------------

_DIRECTIVE: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_SET_ORDER: Final = "$setElementOrder/"
_DELETE_PRIMITIVE: Final = "$deleteFromPrimitiveList/"


@dataclass(frozen=True, slots=True)
class _Field:
    """How one field merges: its list strategy, merge key and the schema of its value."""

    merge: bool = False  # patchStrategy "merge" (lists merge instead of being replaced)
    key: str = ""  # patchMergeKey for lists of maps
    schema: Mapping[str, _Field] = field(default_factory=dict)


_Schema = Mapping[str, _Field]

_OBJECT_META: Final[_Schema] = {
    "ownerReferences": _Field(merge=True, key="uid"),
    "finalizers": _Field(merge=True),
}
_CONTAINER: Final[_Schema] = {
    "ports": _Field(merge=True, key="containerPort"),
    "env": _Field(merge=True, key="name"),
    "volumeMounts": _Field(merge=True, key="mountPath"),
    "volumeDevices": _Field(merge=True, key="devicePath"),
}
_POD_SPEC: Final[_Schema] = {
    "containers": _Field(merge=True, key="name", schema=_CONTAINER),
    "initContainers": _Field(merge=True, key="name", schema=_CONTAINER),
    "ephemeralContainers": _Field(merge=True, key="name", schema=_CONTAINER),
    "volumes": _Field(merge=True, key="name"),
    "imagePullSecrets": _Field(merge=True, key="name"),
    "hostAliases": _Field(merge=True, key="ip"),
    "topologySpreadConstraints": _Field(merge=True, key="topologyKey"),
    "resourceClaims": _Field(merge=True, key="name"),
    "schedulingGates": _Field(merge=True, key="name"),
}
_CONDITIONS: Final = _Field(merge=True, key="type")
_META: Final = _Field(schema=_OBJECT_META)
_TEMPLATE: Final = _Field(schema={"metadata": _META, "spec": _Field(schema=_POD_SPEC)})
_WORKLOAD: Final[_Schema] = {
    "metadata": _META,
    "spec": _Field(schema={"template": _TEMPLATE}),
    "status": _Field(schema={"conditions": _CONDITIONS}),
}

STRATEGIC_KINDS: Final[Mapping[str, _Schema]] = {
    "Pod": {
        "metadata": _META,
        "spec": _Field(schema=_POD_SPEC),
        "status": _Field(
            schema={
                "conditions": _CONDITIONS,
                "podIPs": _Field(merge=True, key="ip"),
                "hostIPs": _Field(merge=True, key="ip"),
            }
        ),
    },
    "Deployment": _WORKLOAD,
    "ReplicaSet": _WORKLOAD,
    "Service": {
        "metadata": _META,
        "spec": _Field(schema={"ports": _Field(merge=True, key="port")}),
        "status": _Field(schema={"conditions": _CONDITIONS}),
    },
    "Namespace": {"metadata": _META, "status": _Field(schema={"conditions": _CONDITIONS})},
    "Node": {
        "metadata": _META,
        "spec": _Field(schema={"podCIDRs": _Field(merge=True)}),
        "status": _Field(
            schema={"conditions": _CONDITIONS, "addresses": _Field(merge=True, key="type")}
        ),
    },
    "ServiceAccount": {"metadata": _META, "secrets": _Field(merge=True, key="name")},
    "ConfigMap": {"metadata": _META},
    "Secret": {"metadata": _META},
    "Event": {"metadata": _META},
    "Ingress": {"metadata": _META},
    "Lease": {"metadata": _META},
    # The other built-in kinds (apiserver.registry.kinds): templates and conditions merge.
    "DaemonSet": _WORKLOAD,
    "StatefulSet": _WORKLOAD,
    "ReplicationController": _WORKLOAD,
    "Job": _WORKLOAD,
    "CronJob": {
        "metadata": _META,
        "spec": _Field(
            schema={"jobTemplate": _Field(schema={"spec": _Field(schema={"template": _TEMPLATE})})}
        ),
    },
    "PodTemplate": {"metadata": _META, "template": _TEMPLATE},
    "Scale": {"metadata": _META},
    **{
        kind: {"metadata": _META, "status": _Field(schema={"conditions": _CONDITIONS})}
        for kind in (
            "PersistentVolumeClaim",
            "PersistentVolume",
            "ResourceQuota",
            "HorizontalPodAutoscaler",
            "PodDisruptionBudget",
            "APIService",
            "CertificateSigningRequest",
            "CustomResourceDefinition",
            "FlowSchema",
            "PriorityLevelConfiguration",
            "ValidatingAdmissionPolicy",
            "VolumeAttachment",
        )
    },
    **{
        kind: {"metadata": _META, "webhooks": _Field(merge=True, key="name")}
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    },
    **{
        kind: {"metadata": _META}
        for kind in (
            "ControllerRevision",
            "Endpoints",
            "LimitRange",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "EndpointSlice",
            "IngressClass",
            "NetworkPolicy",
            "StorageClass",
            "CSIDriver",
            "CSINode",
            "CSIStorageCapacity",
            "VolumeAttributesClass",
            "PriorityClass",
            "RuntimeClass",
            "ValidatingAdmissionPolicyBinding",
        )
    },
}
"""The kinds strategic merge patch knows, with the merge strategy of their fields."""

_NO_FIELD: Final = _Field()


def _go_repr(value: Any) -> str:
    """Go's ``%v`` of a decoded JSON value (for error messages)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_repr(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_repr(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _is_directive_key(key: str) -> bool:
    return key in (_DIRECTIVE, _RETAIN_KEYS) or key.startswith((_SET_ORDER, _DELETE_PRIMITIVE))


def _fresh(value: Any, fld: _Field) -> Any:
    """A patch value for a key the original lacks: nulls dropped, directives applied."""
    if isinstance(value, dict):
        return _merge_map({}, value, fld.schema)
    if isinstance(value, list) and fld.merge:
        return _merge_list([], value, fld)
    return copy.deepcopy(value)


def _merge_map(original: dict[str, Any], patch: dict[str, Any], schema: _Schema) -> dict[str, Any]:
    """Strategic merge of two maps (``mergeMap``); ``original`` is not mutated."""
    directive = patch.get(_DIRECTIVE)
    if directive is not None:
        if directive == "replace":
            rest = {k: v for k, v in patch.items() if k != _DIRECTIVE}
            return _merge_map({}, rest, schema)
        if directive == "delete":
            return {}
        raise _bad_request(f"unknown patch type: {directive} in map: {_go_repr(patch)}")

    out = dict(original)
    if _RETAIN_KEYS in patch:
        retain = patch[_RETAIN_KEYS]
        if not isinstance(retain, list):
            raise _bad_request("invalid patch: the patch should contain a list of keys")
        for key, value in patch.items():
            if value is None or _is_directive_key(key):
                continue
            if key not in retain:
                raise _bad_request("invalid patch format of retainKeys")
        out = {k: v for k, v in out.items() if k in retain}

    for key, value in patch.items():
        if key.startswith(_SET_ORDER):
            _apply_set_order(out, patch, key[len(_SET_ORDER) :], value, schema)

    for key, value in patch.items():
        if _is_directive_key(key):
            continue
        if any(k == _SET_ORDER + key for k in patch):
            continue  # merged together with its order directive above
        fld = schema.get(key, _NO_FIELD)
        if value is None:
            out.pop(key, None)
            continue
        if key not in out:
            out[key] = _fresh(value, fld)
            continue
        current = out[key]
        if isinstance(current, dict) and isinstance(value, dict):
            out[key] = _merge_map(current, value, fld.schema)
        elif isinstance(current, list) and isinstance(value, list):
            out[key] = _merge_list(current, value, fld) if fld.merge else _fresh(value, fld)
        else:
            out[key] = _fresh(value, fld)

    for key, value in patch.items():
        if not key.startswith(_DELETE_PRIMITIVE):
            continue
        target = key[len(_DELETE_PRIMITIVE) :]
        if not isinstance(value, list):
            raise _bad_request("invalid patch: the patch should contain a list of primitives")
        current = out.get(target)
        if isinstance(current, list):
            out[target] = [v for v in current if not any(_json_equal(v, d) for d in value)]
    return out


def _key_of(item: Any, key: str) -> Any:
    if not isinstance(item, dict) or key not in item:
        # A formatted error, not one of mergepatch's sentinels: kube answers it as an
        # internal error (500, no reason).
        raise PatchError(
            500, "", f"map: {_go_repr(item)} does not contain declared merge key: {key}"
        )
    return item[key]


def _position(order: list[Any], item: Any, key: str) -> int:
    """Index of ``item`` in ``order`` (by merge key for maps), or -1."""
    for i, other in enumerate(order):
        if key:
            if isinstance(other, dict) and key in other and _json_equal(other[key], item[key]):
                return i
        elif _json_equal(other, item):
            return i
    return -1


def _ordered(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    key: str,
) -> list[Any]:
    """kube's ``normalizeElementOrder``: sort each side, then interleave by server order."""

    def sort_by(items: list[Any], order: list[Any]) -> list[Any]:
        found = [(p, i) for i, x in enumerate(items) if (p := _position(order, x, key)) >= 0]
        missing = [x for x in items if _position(order, x, key) < 0]
        return [items[i] for _, i in sorted(found)] + missing

    left = sort_by(server_only, server_order)
    right = sort_by(patch_items, patch_order)
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if j >= len(right):
            out.append(left[i])
            i += 1
        elif i >= len(left):
            out.append(right[j])
            j += 1
        else:
            li = _position(server_order, left[i], key)
            ri = _position(server_order, right[j], key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def _merge_list(original: list[Any], patch: list[Any], fld: _Field) -> list[Any]:
    """Strategic merge of two lists with the ``merge`` strategy (``mergeSlice``)."""
    if not original and not patch:
        return []
    sample = (patch or original)[0]
    if not isinstance(sample, dict):
        merged: list[Any] = []
        for item in [*original, *patch]:
            if not any(_json_equal(item, m) for m in merged):
                merged.append(copy.deepcopy(item))
        patch_items = [m for m in merged if any(_json_equal(m, p) for p in patch)]
        server_only = [m for m in merged if not any(_json_equal(m, p) for p in patch)]
        return _ordered(patch_items, server_only, patch, original, "")

    key = fld.key
    if not key:
        raise _bad_request("cannot merge lists without merge key")
    base = list(original)
    plain: list[dict[str, Any]] = []
    replace = False
    for item in patch:
        if not isinstance(item, dict):
            raise _bad_request(f"invalid list element {_go_repr(item)}: expected a map")
        directive = item.get(_DIRECTIVE)
        if directive is None:
            plain.append(item)
        elif directive == "delete":
            value = _key_of(item, key)
            base = [b for b in base if not (isinstance(b, dict) and _json_equal(b.get(key), value))]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise _bad_request("merging lists cannot yet be specified in the patch")
        else:
            raise _bad_request(f"unknown patch type: {directive} in map: {_go_repr(item)}")
    if replace:
        base, plain = [_merge_map({}, p, fld.schema) for p in plain], []

    merged = list(base)
    for item in plain:
        value = _key_of(item, key)
        for i, existing in enumerate(merged):
            if isinstance(existing, dict) and key in existing and _json_equal(existing[key], value):
                merged[i] = _merge_map(existing, item, fld.schema)
                break
        else:
            merged.append(_merge_map({}, item, fld.schema))

    in_patch = [m for m in merged if _position(patch, m, key) >= 0]
    server_only = [m for m in merged if _position(patch, m, key) < 0]
    return _ordered(in_patch, server_only, patch, base, key)


def _apply_set_order(
    out: dict[str, Any], patch: dict[str, Any], name: str, order: Any, schema: _Schema
) -> None:
    """Merge ``patch[name]`` into ``out[name]`` and impose ``$setElementOrder/<name>``."""
    if not isinstance(order, list):
        raise _bad_request("invalid patch format of setElementOrder list")
    fld = schema.get(name, _NO_FIELD)
    key = fld.key
    original = out.get(name)
    plist = patch.get(name)
    if original is not None and not isinstance(original, list):
        original = None
    if plist is not None and not isinstance(plist, list):
        raise _bad_request("invalid patch format of setElementOrder list")
    # every non-directive element of the patch list must be in the order list, in order
    last = -1
    for item in plist or []:
        if isinstance(item, dict) and item.get(_DIRECTIVE) is not None:
            continue
        if key:
            _key_of(item, key)
        pos = _position(order, item, key)
        if pos < 0 or pos < last:
            raise _bad_request("invalid patch format of setElementOrder list")
        last = pos
    if original is None and plist is None:
        return
    if plist is None:
        merged = list(original or [])
    elif original is None:
        merged = _fresh(plist, fld) if fld.merge else copy.deepcopy(plist)
    else:
        merged = _merge_list(original, plist, fld) if fld.merge else _fresh(plist, fld)
    in_order = [m for m in merged if _position(order, m, key) >= 0]
    server_only = [m for m in merged if _position(order, m, key) < 0]
    out[name] = _ordered(in_order, server_only, order, original or [], key)


def strategic_merge_patch(
    target: dict[str, Any], patch: dict[str, Any], kind: str
) -> dict[str, Any]:
    """Apply a Kubernetes strategic merge patch to an object of a built-in ``kind``.

    Lists of maps with a merge key merge element by element (new elements land where
    kube puts them: before the server-only elements unless the patch lists an existing
    element first); other lists are replaced; ``null`` deletes a key.

    Raises:
        PatchError: 415 for a kind strategic merge does not know (custom resources);
            400 for a patch that is not a JSON object, a list element without its merge
            key, an unknown ``$patch`` value, or a malformed directive.
    """
    schema = STRATEGIC_KINDS.get(kind)
    if schema is None:
        raise PatchError(415, "UnsupportedMediaType", _UNSUPPORTED_MESSAGE)
    if not isinstance(patch, dict):
        raise _bad_request(
            f"json: cannot unmarshal {_go_type(patch)} into Go value of type "
            "map[string]interface {}"
        )
    copied: dict[str, Any] = copy_json(_merge_map(target, patch, schema))
    return copied
