"""RFC 6902 JSON Patch between two JSON documents: the patch a mutating webhook answers
(controller-runtime's ``admission.PatchResponseFromRaw``, which computes it with
``gomodules.xyz/jsonpatch``), and applying one (what kube-apiserver does with it; the
test helper shows a handler's outcome that way).

:func:`create_patch` compares the original object with the one a handler returned:

* mappings key by key: a key only in the original is ``remove``d, a key only in the new
  one is ``add``ed (``None`` is JSON ``null``, a value like any other: a key set to
  ``None`` is not a key removed), a key in both is compared recursively;
* lists index by index over their common length, then ``add`` of the extra items at the
  end or ``remove`` of the missing ones from the end (highest index first, so every
  path stays valid while the patch is applied in order);
* anything else that differs is ``replace``d. Numbers compare by value (``1`` and
  ``1.0`` are the same JSON number), but a boolean is never a number.

Paths are JSON Pointers (RFC 6901): ``~`` is written ``~0`` and ``/`` ``~1``
(``/metadata/annotations/example.com~1owner``). A value that is not JSON (a set, a
datetime, a non-string key, NaN) raises :class:`PatchError` naming where it is.

Thread-safe: pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = [
    "JsonPatch",
    "PatchError",
    "apply_patch",
    "check_json",
    "create_patch",
    "escape",
    "pointer",
]

JsonPatch = list[dict[str, Any]]


class PatchError(ValueError):
    """A document that is not JSON, or a patch that does not apply."""


def escape(token: str) -> str:
    """A JSON Pointer reference token: ``~`` → ``~0``, then ``/`` → ``~1``."""
    if "~" in token:
        token = token.replace("~", "~0")
    if "/" in token:
        token = token.replace("/", "~1")
    return token


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def pointer(*tokens: str | int) -> str:
    """The JSON Pointer of a path: ``pointer("metadata", "labels", "a/b")`` →
    ``/metadata/labels/a~1b``."""
    return "".join("/" + escape(str(t)) for t in tokens)


def create_patch(original: Any, changed: Any) -> JsonPatch:
    """The operations that turn ``original`` into ``changed`` (both decoded JSON).

    Raises:
        PatchError: ``changed`` holds a value that is not JSON, at the path named.
    """
    ops: JsonPatch = []
    if not _unchanged(original, changed):
        _diff(original, changed, "", ops)
    return ops


def _same_scalar(a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if ta is tb:
        return bool(a == b)
    # JSON has one number type: 1 == 1.0; a boolean is not a number
    if ta in (int, float) and tb in (int, float):
        return bool(a == b)
    return False


def _unchanged(old: Any, new: Any) -> bool:
    """Whether a value needs no operation: the same object, the same scalar (of the
    same type), or containers of the same JSON (compared inline: most are unchanged, and
    a call per value is what the walk costs)."""
    if old is new:
        return True
    kind = type(old)
    if kind is not type(new):
        return False
    if kind is dict or kind is list:
        try:
            return orjson.dumps(old) == orjson.dumps(new)
        except TypeError:  # not JSON: the walk names where
            return False
    return bool(old == new)


def _diff(a: Any, b: Any, path: str, ops: JsonPatch) -> None:
    ta, tb = type(a), type(b)
    if (ta is dict or isinstance(a, Mapping)) and (tb is dict or isinstance(b, Mapping)):
        for key in a:
            if key not in b:
                ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        for key, value in b.items():
            if type(key) is not str and not isinstance(key, str):
                raise PatchError(f"{path or '/'}: a key that is not a string: {key!r}")
            if key in a:
                if not _unchanged(a[key], value):
                    _diff(a[key], value, f"{path}/{escape(key)}", ops)
            else:
                child = f"{path}/{escape(key)}"
                ops.append({"op": "add", "path": child, "value": _checked(value, child)})
        return
    if ta is list and tb is list:
        common = min(len(a), len(b))
        for i in range(common):
            if not _unchanged(a[i], b[i]):
                _diff(a[i], b[i], f"{path}/{i}", ops)
        for i in range(common, len(b)):
            ops.append({"op": "add", "path": f"{path}/{i}", "value": _checked(b[i], f"{path}/{i}")})
        for i in range(len(a) - 1, common - 1, -1):
            ops.append({"op": "remove", "path": f"{path}/{i}"})
        return
    if isinstance(a, Mapping | list) or isinstance(b, Mapping | list) or not _same_scalar(a, b):
        ops.append({"op": "replace", "path": path, "value": _checked(b, path)})


def _checked(value: Any, path: str) -> Any:
    """``value`` if it is JSON all the way down, else :class:`PatchError`."""
    t = type(value)
    if t is str or t is bool or t is int or value is None:
        return value
    if t is float:
        if not math.isfinite(value):
            raise PatchError(f"{path or '/'}: {value} is not a JSON number")
        return value
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise PatchError(f"{path or '/'}: a key that is not a string: {key!r}")
            _checked(item, f"{path}/{escape(key)}")
        return value
    if isinstance(value, list):
        for i, item in enumerate(value):
            _checked(item, f"{path}/{i}")
        return value
    if isinstance(value, str | int):  # subclasses (an IntEnum, a str Enum): JSON as well
        return value
    raise PatchError(f"{path or '/'}: {type(value).__name__} is not a JSON value: {value!r}")


def check_json(value: Any) -> None:
    """Raise :class:`PatchError` if ``value`` is not JSON all the way down."""
    _checked(value, "")


def apply_patch(document: Any, patch: JsonPatch) -> Any:
    """``document`` with ``patch`` applied (``add``, ``remove``, ``replace``, ``move``,
    ``copy``, ``test``); the document is changed in place where it can be and the
    result returned (a patch of ``""`` replaces the whole document).

    Raises:
        PatchError: an operation whose path does not exist (or a ``test`` that fails).
    """
    for op in patch:
        kind = op.get("op")
        path = op.get("path")
        if not isinstance(path, str):
            raise PatchError(f"operation {op!r}: no path")
        if kind == "add":
            document = _add(document, path, _value(op))
        elif kind == "remove":
            document, _ = _remove(document, path)
        elif kind == "replace":
            document, _ = _remove(document, path)
            document = _add(document, path, _value(op))
        elif kind == "move":
            document, moved = _remove(document, _from(op))
            document = _add(document, path, moved)
        elif kind == "copy":
            document = _add(document, path, _copy(_get(document, _from(op))))
        elif kind == "test":
            if not _equal(_get(document, path), _value(op)):
                raise PatchError(f"test {path}: the value differs")
        else:
            raise PatchError(f"operation {op!r}: unknown op {kind!r}")
    return document


def _value(op: Mapping[str, Any]) -> Any:
    if "value" not in op:
        raise PatchError(f"operation {dict(op)!r}: no value")
    return _copy(op["value"])


def _from(op: Mapping[str, Any]) -> str:
    source = op.get("from")
    if not isinstance(source, str):
        raise PatchError(f"operation {dict(op)!r}: no from")
    return source


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _equal(a: Any, b: Any) -> bool:
    return not create_patch(a, b)


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"path {path!r} is not a JSON Pointer")
    return [_unescape(t) for t in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, *, end: bool) -> int:
    if end and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"path {path}: {token!r} is not an array index")
    i = int(token)
    if i > len(container) or (i == len(container) and not end):
        raise PatchError(f"path {path}: index {i} is out of range")
    return i


def _parent(document: Any, path: str) -> tuple[Any, str]:
    tokens = _tokens(path)
    node = document
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"path {path}: {token!r} does not exist")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, path, end=False)]
        else:
            raise PatchError(f"path {path}: {token!r} is inside a value that is no container")
    return node, tokens[-1]


def _get(document: Any, path: str) -> Any:
    if path == "":
        return document
    parent, last = _parent(document, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {path} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, end=False)]
    raise PatchError(f"path {path} does not exist")


def _add(document: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    parent, last = _parent(document, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, end=True), value)
    else:
        raise PatchError(f"path {path}: the parent is no container")
    return document


def _remove(document: Any, path: str) -> tuple[Any, Any]:
    if path == "":
        return None, document
    parent, last = _parent(document, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {path} does not exist")
        return document, parent.pop(last)
    if isinstance(parent, list):
        return document, parent.pop(_index(parent, last, path, end=False))
    raise PatchError(f"path {path} does not exist")
