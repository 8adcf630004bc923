"""Structural schemas: what kube-apiserver does with a custom resource's OpenAPI v3 schema.

A CustomResourceDefinition version carries ``schema.openAPIV3Schema``, a *structural
schema*: every level says its ``type`` and the ``properties``, ``items`` or
``additionalProperties`` below it. When a custom resource is created or updated,
apiextensions-apiserver does three things with it, in this order, and so does
:func:`apply_schema`:

1. **defaulting** (``structuraldefaulting.PruneNonNullableNullsWithoutDefaults`` then
   ``Default``): a ``null`` in a property that is neither ``nullable`` nor defaulted is
   dropped; absent (or non-nullable ``null``) properties with a ``default:`` get a copy of
   it, top-down, so defaults inside a freshly defaulted object apply too;
2. **pruning** (``structural/pruning``): fields that no ``properties`` describe are dropped,
   unless ``x-kubernetes-preserve-unknown-fields: true`` holds at that level or
   ``additionalProperties`` makes the object a map; ``apiVersion``, ``kind`` and
   ``metadata`` survive at the root and in ``x-kubernetes-embedded-resource`` objects;
3. **validation** (``kube-openapi/pkg/validation`` through ``kubeOpenAPIResultToFieldErrors``,
   then ``listtype.ValidateListSetsAndMaps`` and the embedded-resource checks): each problem
   becomes a :class:`~apiserver.registry.core.Cause` whose message is the one
   kube-apiserver sends, e.g. ``Invalid value: "string": spec.size in body must be of type
   integer: "string"``.

:func:`structural_errors` is the CRD-side check (``ValidateStructural`` and the parts of
``ValidateCustomResourceDefinitionOpenAPISchema`` that matter here) that makes
kube-apiserver refuse a CRD with 422; :func:`version_schema` picks a served version's
schema out of a CRD.

Not supported: ``x-kubernetes-validations`` (CEL), ``$ref``/``definitions``, validation
ratcheting, metadata coercion (the server validates ``metadata`` elsewhere), ``pattern``
beyond what Python's ``re`` shares with RE2, and most string ``format`` values (see
``_FORMATS``).

Thread-safety: pure functions over JSON values; inputs are never mutated. Safe to share
between threads.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime
import ipaddress
import math
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from apiserver.api.field import Cause, FieldError
from apiserver.api.gofmt import go_json, quote

__all__ = ["apply_schema", "structural_errors", "version_schema"]

JsonDict = dict[str, Any]
Schema = Mapping[str, Any]

_PRESERVE: Final = "x-kubernetes-preserve-unknown-fields"
_EMBEDDED: Final = "x-kubernetes-embedded-resource"
_INT_OR_STRING: Final = "x-kubernetes-int-or-string"
_LIST_TYPE: Final = "x-kubernetes-list-type"
_LIST_MAP_KEYS: Final = "x-kubernetes-list-map-keys"
_ROOT_META: Final = ("apiVersion", "kind", "metadata")
_TYPES: Final = ("array", "boolean", "integer", "number", "object", "string")


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


class _FieldError(FieldError):
    """A ``field.Error`` whose bad value was decoded into ``interface{}``."""

    __slots__ = ()

    def render_value(self) -> str:
        return _bad_value(self.value)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --- schema access ----------------------------------------------------------------------


def _props(s: Schema | None) -> Mapping[str, Any]:
    p = s.get("properties") if s is not None else None
    return p if isinstance(p, Mapping) else {}


def _items(s: Schema | None) -> Schema | None:
    i = s.get("items") if s is not None else None
    return i if isinstance(i, Mapping) else None


def _additional(s: Schema | None) -> Schema | bool | None:
    """``additionalProperties``: a schema, ``True`` (any value), or None (absent/false)."""
    a = s.get("additionalProperties") if s is not None else None
    if isinstance(a, Mapping):
        return a
    return True if a is True else None


def _prop_schema(s: Schema | None, key: str) -> tuple[bool, Schema | None]:
    """Whether ``key`` is described at this level, and its schema (None: anything)."""
    props = _props(s)
    if key in props:
        p = props[key]
        return True, p if isinstance(p, Mapping) else {}
    add = _additional(s)
    if add is None:
        return False, None
    return True, add if isinstance(add, Mapping) else None


def _nullable(s: Schema | None) -> bool:
    return s is not None and s.get("nullable") is True


def _has_default(s: Schema | None) -> bool:
    return s is not None and s.get("default") is not None


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# --- defaulting (apiextensions-apiserver/pkg/apiserver/schema/defaulting) -------------


def _prune_nulls(x: Any, s: Schema | None) -> None:
    """``PruneNonNullableNullsWithoutDefaults``."""
    if s is None:
        return
    if isinstance(x, dict):
        for k in list(x):
            known, ps = _prop_schema(s, k)
            if not known or ps is None:
                continue
            if x[k] is None and not _has_default(ps) and not _nullable(ps):
                del x[k]
            else:
                _prune_nulls(x[k], ps)
    elif isinstance(x, list):
        for v in x:
            _prune_nulls(v, _items(s))


def _default(x: Any, s: Schema | None) -> None:
    """``structuraldefaulting.Default``: top-down, defaults deep-copied."""
    if s is None:
        return
    if isinstance(x, dict):
        for k, ps in _props(s).items():
            if not isinstance(ps, Mapping) or not _has_default(ps):
                continue
            if k not in x or (x[k] is None and not _nullable(ps)):
                x[k] = copy.deepcopy(ps["default"])
        for k in list(x):
            known, ps = _prop_schema(s, k)
            if not known or ps is None:
                continue
            if x[k] is None and _has_default(ps) and not _nullable(ps):  # a map's value
                x[k] = copy.deepcopy(ps["default"])
            _default(x[k], ps)
    elif isinstance(x, list):
        items = _items(s)
        for i, v in enumerate(x):
            if v is None and items is not None and _has_default(items) and not _nullable(items):
                x[i] = copy.deepcopy(items["default"])
            _default(x[i], items)


# --- pruning (apiextensions-apiserver/pkg/apiserver/schema/pruning) --------------------


def _keeps_meta(s: Schema | None, key: str, value: Any) -> bool:
    if s is None or s.get(_EMBEDDED) is not True:
        return False
    if key in ("apiVersion", "kind"):
        return isinstance(value, str)
    return key == "metadata" and isinstance(value, dict)


def _prune(x: Any, s: Schema | None, pruned: list[str] | None = None, path: str = "") -> None:
    """Drop what the schema does not describe; ``pruned`` collects the dropped paths."""
    if s is not None and s.get(_PRESERVE) is True:
        _skip_prune(x, s, pruned, path)
        return
    if isinstance(x, dict):
        for k in list(x):
            if _keeps_meta(s, k, x[k]):
                continue
            known, ps = _prop_schema(s, k)
            if not known:
                del x[k]
                if pruned is not None:
                    pruned.append(_child(path, k))
            elif ps is not None:
                _prune(x[k], ps, pruned, _child(path, k))
            # additionalProperties: true keeps the value as it is
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _prune(v, _items(s), pruned, f"{path}[{i}]")


def _skip_prune(x: Any, s: Schema | None, pruned: list[str] | None = None, path: str = "") -> None:
    """Below ``x-kubernetes-preserve-unknown-fields``: keep unknown keys, prune known ones."""
    if s is None:
        return
    if isinstance(x, dict):
        for k, v in x.items():
            if _keeps_meta(s, k, v):
                continue
            known, ps = _prop_schema(s, k)
            if known and ps is not None:
                _prune(v, ps, pruned, _child(path, k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _skip_prune(v, _items(s), pruned, f"{path}[{i}]")


# --- validation (kube-openapi/pkg/validation/validate) ---------------------------------


def _json_type(v: Any) -> str:
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
    if s.get(_INT_OR_STRING) is True:
        return ["integer", "string"]
    t = s.get("type")
    if isinstance(t, str) and t:
        return [t]
    if isinstance(t, list):
        return [str(x) for x in t]
    return []


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0`` but ``True != 1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
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


def _fewest(results: list[list[_FieldError]]) -> list[_FieldError]:
    """The failing alternative with the fewest errors (kube-openapi's "best failure")."""
    return min(results, key=len)


class _Validator:
    """One validation pass; collects field errors in the order kube-openapi reports them."""

    def __init__(self) -> None:
        self.errors: list[_FieldError] = []

    def _invalid(self, path: str, value: Any, detail: str) -> None:
        self.errors.append(_FieldError("Invalid", path, value, detail))

    def validate(self, v: Any, s: Schema, path: str, *, root: bool = False) -> None:
        types = _types(s)
        if v is None:
            if types and "null" not in types and not _nullable(s):
                self.errors.append(
                    _FieldError(
                        "TypeInvalid",
                        path,
                        "null",
                        f'{path} in body must be of type {",".join(types)}: "null"',
                    )
                )
            return
        jt = _json_type(v)
        if types and not (
            jt in types
            or (jt == "number" and "integer" in types and float(v).is_integer())
            or (jt == "integer" and "number" in types)
        ):
            self.errors.append(
                _FieldError(
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
        if isinstance(enum, list) and not any(_json_equal(v, e) for e in enum):
            supported = [e if isinstance(e, str) else _json_text(e) for e in enum]
            self.errors.append(
                _FieldError(
                    "NotSupported",
                    path,
                    v,
                    "supported values: " + ", ".join(quote(x) for x in supported),
                )
            )
        if isinstance(v, Mapping):
            self._object(v, s, path, root=root)

    def _sub(self, v: Any, s: Any, path: str) -> list[_FieldError]:
        inner = _Validator()
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
            self.errors.append(_FieldError("TooLong", path, detail=detail))
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
                _FieldError(
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
                _FieldError("TooMany", path, len(v), f"must have at most {_plural(n, 'item')}")
            )
        min_items = _bound(s, "minItems")
        if min_items is not None and len(v) < min_items:
            self._invalid(
                path, len(v), f"{path} in body should have at least {int(min_items)} items"
            )
        if s.get("uniqueItems") is True and any(
            _json_equal(a, b) for i, a in enumerate(v) for b in v[i + 1 :]
        ):
            self._invalid(path, "", f"{path} in body shouldn't contain duplicates")
        items = _items(s)
        if items is not None:
            for i, x in enumerate(v):
                self.validate(x, items, f"{path}[{i}]")
        list_type = s.get(_LIST_TYPE)
        if list_type == "set":
            self._list_set(v, path)
        elif list_type == "map":
            keys = s.get(_LIST_MAP_KEYS)
            self._list_map(v, [str(k) for k in keys] if isinstance(keys, list) else [], path)

    def _list_set(self, v: list[Any], path: str) -> None:
        for i, x in enumerate(v):
            if any(_json_equal(x, y) for y in v[:i]):
                self.errors.append(_FieldError("Duplicate", f"{path}[{i}]", x))

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
                self.errors.append(_FieldError("Duplicate", f"{path}[{i}]", shown))
            else:
                seen.append(key)

    def _object(self, v: Mapping[str, Any], s: Schema, path: str, *, root: bool) -> None:
        max_props = _bound(s, "maxProperties")
        if max_props is not None and len(v) > max_props:
            n = int(max_props)
            self.errors.append(
                _FieldError("TooMany", path, len(v), f"must have at most {_plural(n, 'item')}")
            )
        min_props = _bound(s, "minProperties")
        if min_props is not None and len(v) < min_props:
            self._invalid(
                path, len(v), f"{path} in body should have at least {int(min_props)} properties"
            )
        required = s.get("required")
        for k in required if isinstance(required, list) else []:
            if k not in v:
                self.errors.append(_FieldError("Required", _child(path, str(k))))
        props = _props(s)
        add = _additional(s)
        for k in sorted(v):
            ps = props.get(k)
            if isinstance(ps, Mapping):
                self.validate(v[k], ps, _child(path, k))
            elif isinstance(add, Mapping) and not (root and k in _ROOT_META):
                self.validate(v[k], add, _child(path, k))
        if s.get(_EMBEDDED) is True and not root:
            self._embedded(v, path)

    def _embedded(self, v: Mapping[str, Any], path: str) -> None:
        """``validateEmbeddedResource``: ``apiVersion`` and ``kind`` present and non-empty."""
        for k in ("apiVersion", "kind"):
            p = _child(path, k)
            if k not in v:
                self.errors.append(_FieldError("Required", p, detail="must not be empty"))
            elif not isinstance(v[k], str):
                self._invalid(p, v[k], "must be a string")
            elif not v[k]:
                self._invalid(p, v[k], "must not be empty")


def _same_key(a: list[Any], b: list[Any]) -> bool:
    """Equal list-map keys; an absent key only equals another absent key."""
    return all(
        x is y or (x is not _NO_VALUE and y is not _NO_VALUE and _json_equal(x, y))
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


# --- public API -----------------------------------------------------------------------


def apply_schema(
    schema: Mapping[str, Any],
    obj: dict[str, Any],
    *,
    kind: str,
    status_subresource: bool,
    pruned: list[str] | None = None,
) -> tuple[dict[str, Any], list[Cause]]:
    """Default, prune and validate a custom resource against its version's structural schema.

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
        The defaulted and pruned copy of ``obj`` and the validation causes (``[]``: valid).
    """
    del kind, status_subresource  # the same treatment either way; see the docstring
    out = copy.deepcopy(obj)
    root: JsonDict = {**schema, _EMBEDDED: True}  # the root keeps apiVersion/kind/metadata
    _prune_nulls(out, root)
    _default(out, root)
    _prune(out, root, pruned)
    validator = _Validator()
    validator.validate(out, {k: v for k, v in schema.items() if k != _EMBEDDED}, "", root=True)
    return out, [e.cause() for e in validator.errors]


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


def structural_errors(
    schema: Mapping[str, Any], *, path: str = "spec.validation.openAPIV3Schema"
) -> list[str]:
    """Why ``schema`` is not an acceptable structural schema, as kube-apiserver words it.

    Each entry reads ``<path>: <error>``, e.g. ``spec.validation.openAPIV3Schema
    .properties[spec].type: Required value: must not be empty for specified object fields``;
    ``[]`` means the CRD may be stored. ``path`` names where the schema sits in the CRD
    (``spec.versions[0].schema.openAPIV3Schema`` for a v1 CRD).
    """
    errs: list[_FieldError] = []
    _structural(schema, path, "root", errs)
    return [str(e) for e in errs]


def _structural(s: Any, path: str, level: str, errs: list[_FieldError]) -> None:
    if not isinstance(s, Mapping):
        errs.append(_FieldError("Invalid", path, _json_type(s), "must be a schema object"))
        return
    t = s.get("type")
    if "$ref" in s:
        errs.append(_FieldError("Forbidden", f"{path}.$ref", detail="$ref is not supported"))
    if t not in (None, "") and t not in _TYPES:
        errs.append(
            _FieldError(
                "NotSupported",
                f"{path}.type",
                t,
                "supported values: " + ", ".join(quote(x) for x in _TYPES),
            )
        )
    if s.get(_PRESERVE) is False:
        errs.append(
            _FieldError("Invalid", f"{path}.{_PRESERVE}", False, "must be true or undefined")
        )
    embedded = s.get(_EMBEDDED) is True
    int_or_string = s.get(_INT_OR_STRING) is True
    if not t and not embedded and not int_or_string and s.get(_PRESERVE) is not True:
        detail = {
            "root": "must not be empty at the root",
            "items": "must not be empty for specified array items",
            "field": "must not be empty for specified object fields",
        }[level]
        errs.append(_FieldError("Required", f"{path}.type", detail=detail))
    if level == "root" and t and t != "object":
        errs.append(_FieldError("Invalid", f"{path}.type", t, "must be object at the root"))
    if embedded and t != "object":
        if t:
            errs.append(
                _FieldError(
                    "Invalid",
                    f"{path}.type",
                    t,
                    "must be object if x-kubernetes-embedded-resource is true",
                )
            )
        else:
            errs.append(
                _FieldError(
                    "Required",
                    f"{path}.type",
                    detail="must be object if x-kubernetes-embedded-resource is true",
                )
            )
    if int_or_string and t:
        errs.append(
            _FieldError(
                "Invalid", f"{path}.type", t, "must be empty if x-kubernetes-int-or-string is true"
            )
        )
    items = s.get("items")
    if isinstance(items, list):
        errs.append(
            _FieldError(
                "Forbidden",
                f"{path}.items",
                detail="items must be a schema object and not an array",
            )
        )
    elif t == "array" and items is None:
        errs.append(_FieldError("Required", f"{path}.items", detail="must be specified"))
    add = s.get("additionalProperties")
    if add is not None and "properties" in s:
        errs.append(
            _FieldError(
                "Forbidden",
                f"{path}.additionalProperties",
                detail="additionalProperties and properties are mutual exclusive",
            )
        )
    if add is False:
        errs.append(
            _FieldError(
                "Forbidden",
                f"{path}.additionalProperties",
                detail="additionalProperties cannot be set to false",
            )
        )
    if s.get("uniqueItems") is True:
        errs.append(
            _FieldError(
                "Forbidden",
                f"{path}.uniqueItems",
                detail="uniqueItems cannot be set to true since the runtime complexity "
                "becomes quadratic",
            )
        )
    _list_type_errors(s, path, errs)
    for k, ps in _props(s).items():
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


def _list_type_errors(s: Schema, path: str, errs: list[_FieldError]) -> None:
    list_type = s.get(_LIST_TYPE)
    keys = s.get(_LIST_MAP_KEYS)
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errs.append(
            _FieldError(
                "NotSupported",
                f"{path}.{_LIST_TYPE}",
                list_type,
                'supported values: "atomic", "set", "map"',
            )
        )
    if list_type is not None and s.get("type") != "array":
        errs.append(
            _FieldError(
                "Invalid",
                f"{path}.type",
                s.get("type") or "",
                "must be array if x-kubernetes-list-type is specified",
            )
        )
    if list_type == "map":
        item_type = (_items(s) or {}).get("type")
        if item_type != "object":
            errs.append(
                _FieldError(
                    "Invalid",
                    f"{path}.items.type",
                    item_type or "",
                    "must be object if parent array's x-kubernetes-list-type is map",
                )
            )
        if not keys:
            errs.append(
                _FieldError(
                    "Required",
                    f"{path}.{_LIST_MAP_KEYS}",
                    detail="must not be empty if x-kubernetes-list-type is map",
                )
            )
    elif keys is not None:
        errs.append(
            _FieldError(
                "Forbidden",
                f"{path}.{_LIST_MAP_KEYS}",
                detail="must not be specified if x-kubernetes-list-type is not map",
            )
        )


def _value_validation(s: Any, path: str, errs: list[_FieldError]) -> None:
    """Inside ``allOf``/``anyOf``/``oneOf``/``not`` only value checks may appear."""
    if not isinstance(s, Mapping):
        errs.append(_FieldError("Invalid", path, _json_type(s), "must be a schema object"))
        return
    if s.get("type"):
        errs.append(
            _FieldError("Forbidden", f"{path}.type", detail="must be empty to be structural")
        )
    for key in ("default", "additionalProperties"):
        if key in s:
            errs.append(
                _FieldError(
                    "Forbidden", f"{path}.{key}", detail="must be undefined to be structural"
                )
            )
    for key in ("nullable", _PRESERVE, _EMBEDDED, _INT_OR_STRING):
        if s.get(key) is True:
            errs.append(
                _FieldError("Forbidden", f"{path}.{key}", detail="must be false to be structural")
            )
    for k, ps in _props(s).items():
        _value_validation(ps, f"{path}.properties[{k}]", errs)
    if isinstance(s.get("items"), Mapping):
        _value_validation(s["items"], f"{path}.items", errs)
    for key in ("allOf", "anyOf", "oneOf"):
        subs = s.get(key)
        for i, sub in enumerate(subs if isinstance(subs, list) else []):
            _value_validation(sub, f"{path}.{key}[{i}]", errs)
    if "not" in s:
        _value_validation(s["not"], f"{path}.not", errs)
