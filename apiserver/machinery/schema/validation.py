"""Validation of a JSON value by an OpenAPI v3 schema, as kube-openapi reports it.

apiextensions-apiserver validates a custom resource (and, at CRD create, each ``default``)
with ``kube-openapi/pkg/validation/validate`` and turns the result into field errors
(``kubeOpenAPIResultToFieldErrors``); :class:`Validator` gives the same field errors with
the messages kube-apiserver sends, e.g. ``Invalid value: "string": spec.size in body must
be of type integer: "string"``, then ``listtype.ValidateListSetsAndMaps`` and the
embedded-resource checks.

Not supported: ``x-kubernetes-validations`` (CEL), ``$ref``/``definitions``, validation
ratcheting, ``pattern`` beyond what Python's ``re`` shares with RE2, and most string
``format`` values (see ``_FORMATS``).

Thread-safety: a :class:`Validator` is one pass, used by one thread; the functions are pure.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
import math
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from apiserver.api.field import FieldError
from apiserver.api.gofmt import go_json, quote
from apiserver.machinery.schema import nodes
from apiserver.machinery.schema.nodes import Schema

__all__ = ["JsonFieldError", "Validator", "errors_at", "json_equal", "json_type"]


# --- Go-style rendering (fmt %v / %q, json.Marshal of decoded JSON) ------------------


def _float(f: float) -> str:
    """Go's ``%v`` of a ``float64`` (shortest repr, exponent from 1e21)."""
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if math.isnan(f):
        return "NaN"
    if f.is_integer() and abs(f) < 1e21:
        return str(int(f))
    return repr(f)


def _num(v: Any) -> str:
    """``%v`` of a JSON number (int64 or float64)."""
    return _float(v) if isinstance(v, float) else str(v)


def _bad_value(v: Any) -> str:
    """How ``field.Error`` prints its ``BadValue`` (1.36: ``json.Marshal`` of a map or a
    list)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return _num(v)
    if isinstance(v, str):
        return quote(v)
    return go_json(v)


# --- field errors (k8s.io/apimachinery/pkg/util/validation/field) ---------------------

_NO_VALUE: Final = object()


class JsonFieldError(FieldError):
    """A ``field.Error`` whose bad value was decoded into ``interface{}``."""

    __slots__ = ()

    def render_value(self) -> str:
        return _bad_value(self.value)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --- validation (kube-openapi/pkg/validation/validate) ---------------------------------


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, Mapping):
        return "object"
    return type(v).__name__


def _types(s: Schema) -> list[str]:
    if s.get(nodes.INT_OR_STRING) is True:
        return ["integer", "string"]
    t = s.get("type")
    if isinstance(t, str) and t:
        return [t]
    if isinstance(t, list):
        return [str(x) for x in t]
    return []


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0`` but ``True != 1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _bound(s: Schema, key: str) -> float | None:
    """A numeric keyword (``maxLength``, ``minimum``, ...) or None when absent."""
    v = s.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return v


def _date_time(v: str) -> bool:
    m = re.fullmatch(
        r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", v
    )
    if m is None:
        return False
    try:
        datetime.date.fromisoformat(m.group(1))
        datetime.time.fromisoformat(m.group(2))
    except ValueError:
        return False
    return True


def _date(v: str) -> bool:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
        return False
    try:
        datetime.date.fromisoformat(v)
    except ValueError:
        return False
    return True


def _uuid(v: str) -> bool:
    if not re.fullmatch(r"[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}", v):
        return False
    try:
        uuid.UUID(v)
    except ValueError:
        return False
    return True


def _byte(v: str) -> bool:
    try:
        base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _ip(version: int) -> Callable[[str], bool]:
    def check(v: str) -> bool:
        try:
            return ipaddress.ip_address(v).version == version
        except ValueError:
            return False

    return check


def _cidr(v: str) -> bool:
    try:
        ipaddress.ip_network(v, strict=False)
    except ValueError:
        return False
    return "/" in v


def _hostname(v: str) -> bool:
    label = r"[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?"
    return len(v) <= 255 and re.fullmatch(rf"{label}(\.{label})*\.?", v) is not None


_FORMATS: Final[Mapping[str, Callable[[str], bool]]] = {
    "date-time": _date_time,
    "datetime": _date_time,
    "date": _date,
    "uuid": _uuid,
    "byte": _byte,
    "ipv4": _ip(4),
    "ipv6": _ip(6),
    "cidr": _cidr,
    "hostname": _hostname,
}


def _fewest(results: list[list[JsonFieldError]]) -> list[JsonFieldError]:
    """The failing alternative with the fewest errors (kube-openapi's "best failure")."""
    return min(results, key=len)


class Validator:
    """One validation pass; collects field errors in the order kube-openapi reports them."""

    def __init__(self) -> None:
        self.errors: list[JsonFieldError] = []

    def _invalid(self, path: str, value: Any, detail: str) -> None:
        self.errors.append(JsonFieldError("Invalid", path, value, detail))

    def validate(self, v: Any, s: Schema, path: str, *, root: bool = False) -> None:
        types = _types(s)
        if v is None:
            if types and "null" not in types and not nodes.nullable(s):
                self.errors.append(
                    JsonFieldError(
                        "TypeInvalid",
                        path,
                        "null",
                        f'{path} in body must be of type {",".join(types)}: "null"',
                    )
                )
            return
        jt = json_type(v)
        if types and not (
            jt in types
            or (jt == "number" and "integer" in types and float(v).is_integer())
            or (jt == "integer" and "number" in types)
        ):
            self.errors.append(
                JsonFieldError(
                    "TypeInvalid",
                    path,
                    jt,
                    f"{path} in body must be of type {','.join(types)}: {quote(jt)}",
                )
            )
            return
        self._compositions(v, s, path)
        if isinstance(v, str):
            self._string(v, s, path)
        if _is_number(v):
            self._number(v, s, path)
        if isinstance(v, list):
            self._array(v, s, path)
        enum = s.get("enum")
        if isinstance(enum, list) and not any(json_equal(v, e) for e in enum):
            supported = [e if isinstance(e, str) else _json_text(e) for e in enum]
            self.errors.append(
                JsonFieldError(
                    "NotSupported",
                    path,
                    v,
                    "supported values: " + ", ".join(quote(x) for x in supported),
                )
            )
        if isinstance(v, Mapping):
            self._object(v, s, path, root=root)

    def _sub(self, v: Any, s: Any, path: str) -> list[JsonFieldError]:
        inner = Validator()
        if isinstance(s, Mapping):
            inner.validate(v, s, path)
        return inner.errors

    def _compositions(self, v: Any, s: Schema, path: str) -> None:
        all_of = s.get("allOf")
        if isinstance(all_of, list):
            failed = [e for sub in all_of for e in self._sub(v, sub, path)]
            if failed:
                self._invalid(path, "", f"{quote(path)} must validate all the schemas (allOf)")
                self.errors.extend(failed)
        any_of = s.get("anyOf")
        if isinstance(any_of, list) and any_of:
            results = [self._sub(v, sub, path) for sub in any_of]
            if all(results):
                self._invalid(path, "", f"{quote(path)} must validate at least one schema (anyOf)")
                self.errors.extend(_fewest(results))
        one_of = s.get("oneOf")
        if isinstance(one_of, list) and one_of:
            results = [self._sub(v, sub, path) for sub in one_of]
            valid = sum(1 for r in results if not r)
            if valid != 1:
                more = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
                self._invalid(
                    path,
                    "",
                    f"{quote(path)} must validate one and only one schema (oneOf). {more}",
                )
                if valid == 0:
                    self.errors.extend(_fewest(results))
        not_ = s.get("not")
        if isinstance(not_, Mapping) and not self._sub(v, not_, path):
            self._invalid(path, "", f"{quote(path)} must not validate the schema (not)")

    def _string(self, v: str, s: Schema, path: str) -> None:
        max_len = _bound(s, "maxLength")
        if max_len is not None and len(v) > max_len:
            n = int(max_len)
            detail = f"may not be more than {n} {'byte' if n == 1 else 'bytes'}"
            self.errors.append(JsonFieldError("TooLong", path, detail=detail))
        min_len = _bound(s, "minLength")
        if min_len is not None and len(v) < min_len:
            self._invalid(path, v, f"{path} in body should be at least {int(min_len)} chars long")
        pattern = s.get("pattern")
        if isinstance(pattern, str):
            try:
                matched = re.search(pattern, v) is not None
            except re.error:
                matched = True  # a pattern Python cannot compile is not held against the value
            if not matched:
                self._invalid(path, v, f"{path} in body should match '{pattern}'")
        fmt = s.get("format")
        check = _FORMATS.get(fmt) if isinstance(fmt, str) else None
        if check is not None and not check(v):
            self.errors.append(
                JsonFieldError(
                    "TypeInvalid", path, v, f"{path} in body must be of type {fmt}: {quote(v)}"
                )
            )

    def _number(self, v: float, s: Schema, path: str) -> None:
        multiple = _bound(s, "multipleOf")
        if multiple is not None and multiple > 0:
            q = v / multiple
            if abs(q - round(q)) > 1e-9 * max(1.0, abs(q)):
                self._invalid(path, v, f"{path} in body should be a multiple of {_num(multiple)}")
        maximum = _bound(s, "maximum")
        if maximum is not None:
            if s.get("exclusiveMaximum") is True and v >= maximum:
                self._invalid(path, v, f"{path} in body should be less than {_num(maximum)}")
            elif v > maximum:
                self._invalid(
                    path, v, f"{path} in body should be less than or equal to {_num(maximum)}"
                )
        minimum = _bound(s, "minimum")
        if minimum is not None:
            if s.get("exclusiveMinimum") is True and v <= minimum:
                self._invalid(path, v, f"{path} in body should be greater than {_num(minimum)}")
            elif v < minimum:
                self._invalid(
                    path, v, f"{path} in body should be greater than or equal to {_num(minimum)}"
                )

    def _array(self, v: list[Any], s: Schema, path: str) -> None:
        max_items = _bound(s, "maxItems")
        if max_items is not None and len(v) > max_items:
            n = int(max_items)
            self.errors.append(
                JsonFieldError("TooMany", path, len(v), f"must have at most {_plural(n, 'item')}")
            )
        min_items = _bound(s, "minItems")
        if min_items is not None and len(v) < min_items:
            self._invalid(
                path, len(v), f"{path} in body should have at least {int(min_items)} items"
            )
        if s.get("uniqueItems") is True and any(
            json_equal(a, b) for i, a in enumerate(v) for b in v[i + 1 :]
        ):
            self._invalid(path, "", f"{path} in body shouldn't contain duplicates")
        items = nodes.items(s)
        if items is not None:
            for i, x in enumerate(v):
                self.validate(x, items, f"{path}[{i}]")
        list_type = s.get(nodes.LIST_TYPE)
        if list_type == "set":
            self._list_set(v, path)
        elif list_type == "map":
            keys = s.get(nodes.LIST_MAP_KEYS)
            self._list_map(v, [str(k) for k in keys] if isinstance(keys, list) else [], path)

    def _list_set(self, v: list[Any], path: str) -> None:
        for i, x in enumerate(v):
            if any(json_equal(x, y) for y in v[:i]):
                self.errors.append(JsonFieldError("Duplicate", f"{path}[{i}]", x))

    def _list_map(self, v: list[Any], keys: list[str], path: str) -> None:
        seen: list[list[Any]] = []
        for i, x in enumerate(v):
            if x is None:
                continue
            if not isinstance(x, Mapping):
                self._invalid(f"{path}[{i}]", x, "must be an object for an array of list-type map")
                continue
            key = [x.get(k, _NO_VALUE) for k in keys]
            if any(_same_key(key, other) for other in seen):
                shown = {k: x[k] for k in keys if k in x}
                self.errors.append(JsonFieldError("Duplicate", f"{path}[{i}]", shown))
            else:
                seen.append(key)

    def _object(self, v: Mapping[str, Any], s: Schema, path: str, *, root: bool) -> None:
        max_props = _bound(s, "maxProperties")
        if max_props is not None and len(v) > max_props:
            n = int(max_props)
            self.errors.append(
                JsonFieldError("TooMany", path, len(v), f"must have at most {_plural(n, 'item')}")
            )
        min_props = _bound(s, "minProperties")
        if min_props is not None and len(v) < min_props:
            self._invalid(
                path, len(v), f"{path} in body should have at least {int(min_props)} properties"
            )
        required = s.get("required")
        for k in required if isinstance(required, list) else []:
            if k not in v:
                self.errors.append(JsonFieldError("Required", nodes.child(path, str(k))))
        props = nodes.props(s)
        add = nodes.additional(s)
        for k in sorted(v):
            ps = props.get(k)
            if isinstance(ps, Mapping):
                self.validate(v[k], ps, nodes.child(path, k))
            elif isinstance(add, Mapping) and not (root and k in nodes.ROOT_META):
                self.validate(v[k], add, nodes.child(path, k))
        if s.get(nodes.EMBEDDED) is True and not root:
            self._embedded(v, path)

    def _embedded(self, v: Mapping[str, Any], path: str) -> None:
        """``validateEmbeddedResource``: ``apiVersion`` and ``kind`` present and non-empty."""
        for k in ("apiVersion", "kind"):
            p = nodes.child(path, k)
            if k not in v:
                self.errors.append(JsonFieldError("Required", p, detail="must not be empty"))
            elif not isinstance(v[k], str):
                self._invalid(p, v[k], "must be a string")
            elif not v[k]:
                self._invalid(p, v[k], "must not be empty")


def _same_key(a: list[Any], b: list[Any]) -> bool:
    """Equal list-map keys; an absent key only equals another absent key."""
    return all(
        x is y or (x is not _NO_VALUE and y is not _NO_VALUE and json_equal(x, y))
        for x, y in zip(a, b, strict=True)
    )


def _json_text(v: Any) -> str:
    """``json.Marshal`` of a JSON value (for non-string enum members)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return _num(v)
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, Mapping):
        return "{" + ",".join(f"{quote(str(k))}:{_json_text(v[k])}" for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_json_text(x) for x in v) + "]"
    return quote(str(v))


def errors_at(
    value: Any, s: Schema, field: str, *, resource_root: bool = False
) -> list[JsonFieldError]:
    """``ValidateCustomResource(field, value, validator)`` with a validator of ``s`` alone.

    kube-openapi names each error from ``value``'s own root (``size in body should be ...``;
    `` in body must be of type ...`` for the root itself, an empty name), and the field
    path is that name under ``field`` (``field.Child(name)``, or ``field`` for the root).
    ``resource_root``: ``value`` is a resource (its ``apiVersion``/``kind``/``metadata``
    are not checked here).
    """
    validator = Validator()
    validator.validate(value, s, "", root=resource_root)
    return [
        JsonFieldError(
            e.kind, f"{field}.{e.path.removeprefix('.')}" if e.path else field, e.value, e.detail
        )
        for e in validator.errors
    ]
