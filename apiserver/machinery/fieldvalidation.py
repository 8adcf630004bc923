"""``fieldValidation``: unknown and duplicate fields, and JSON values of the wrong type.

kube-apiserver decodes a request body into the kind's Go struct (built-ins) or prunes it
by the CRD's structural schema (custom resources). Fields the type does not declare are
dropped, a key given twice keeps its last value, and the ``fieldValidation`` query
parameter decides what the client hears about it:

* ``Strict``: 400 ``BadRequest``, ``strict decoding error: unknown field "spec.x",
  duplicate field "metadata.name"`` (every problem, in kube's order); a patch is a 422
  ``Invalid`` on the field ``patch`` with that text (``handlers/patch.go``);
* ``Warn`` (the default since 1.27): the write succeeds with one ``Warning: 299``
  header per problem;
* ``Ignore``: silence.

Built-in objects list their problems in document order (a key both unknown and
duplicated counts as unknown once); custom resources and patches list duplicates of the
request body first, then the unknown fields of the result in sorted order. A value of
the wrong JSON type is refused whatever the mode, with Go's ``json: cannot unmarshal
string into Go struct field ObjectMeta.metadata.name of type string``.

A ``resource.Quantity`` decodes as its ``UnmarshalJSON`` does and comes out as its
``MarshalJSON`` writes it (:mod:`apiserver.api.quantity`): ``0.5`` becomes ``500m``,
canonical text stays as written, ``null`` is ``0``, a value member left out is ``"0"``;
one that does not parse is refused with the parser's message alone (Go's decoder adds
no field to an ``Unmarshaler``'s error).

Thread-safety: pure functions plus :class:`Directive`, which belongs to one request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from apiserver.api.quantity import QuantityError
from apiserver.api.quantity import canonical as canonical_quantity
from apiserver.machinery.typeinfo import LIST, MAP, QUANTITY, SCALAR, STRUCT, TypeNode

__all__ = [
    "Directive",
    "TypeError_",
    "check_typed",
    "decode",
    "decode_quantities",
    "decode_yaml",
    "duplicates",
    "json_patch_issues",
    "plain",
    "warning_header",
    "warning_headers",
]

MODES: Final = ("Strict", "Warn", "Ignore")
_KEY: Final = re.compile(rb'"([^"\\]*(?:\\.[^"\\]*)*)"\s*:')  # a string followed by ":"


class TypeError_(Exception):  # noqa: N801 - Go's UnmarshalTypeError, not the builtin
    """A JSON value of the wrong type (always refused, whatever ``fieldValidation``)."""


class _Obj(dict[str, Any]):
    """A decoded JSON object that remembers its keys as written, repeats included."""

    __slots__ = ("dups", "order")

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__()
        self.dups: list[str] = []
        self.order = [k for k, _ in pairs]
        for k, v in pairs:
            if k in self and k not in self.dups:
                self.dups.append(k)
            self[k] = v


def _steps(value: dict[str, Any]) -> list[tuple[str, str]]:
    """How Go's decoder meets an object's keys: ``("first", k)`` at a key's first
    occurrence, ``("dup", k)`` at each later one (reported when read), ``("value", k)``
    where the value that is kept (the last) is decoded."""
    if not isinstance(value, _Obj) or not value.dups:
        return [step for k in value for step in (("first", k), ("value", k))]
    last = {k: i for i, k in enumerate(value.order)}
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for i, k in enumerate(value.order):
        if k in seen:
            out.append(("dup", k))
        else:
            seen.add(k)
            out.append(("first", k))
        if last[k] == i:
            out.append(("value", k))
    return out


def decode(body: bytes) -> tuple[Any, bool]:
    """The JSON body, and whether it was decoded keeping track of repeated keys.

    The common case (no key text repeated anywhere in the body) costs one regex scan on
    top of orjson; otherwise the body is decoded again keeping track of repeats: the
    objects are then :class:`_Obj`, know their duplicated keys, and :func:`plain` turns
    them back into dicts.
    """
    obj = orjson.loads(body)
    keys = _KEY.findall(body)
    if len(keys) == len(set(keys)):
        return obj, False
    return json.loads(body, object_pairs_hook=_Obj), True


def duplicates(value: Any, path: str = "") -> list[str]:
    """Paths of every repeated key, in document order."""
    out: list[str] = []
    if isinstance(value, dict):
        for step, k in _steps(value):
            p = f"{path}.{k}" if path else k
            if step == "dup":
                out.append(p)
            elif step == "value":
                out.extend(duplicates(value[k], p))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(duplicates(v, f"{path}[{i}]"))
    return out


def plain(value: Any) -> Any:
    """``value`` with :class:`_Obj` turned back into plain dicts."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_error(value: Any, struct: str, path: str, go: str) -> TypeError_:
    shown = _json_kind(value)
    if shown == "number" and isinstance(value, float):
        shown = f"number {value!r}"
    where = f"Go struct field {struct}.{path}" if path else "Go value"
    return TypeError_(f"json: cannot unmarshal {shown} into {where} of type {go}")


def _scalar_ok(value: Any, t: TypeNode) -> bool:
    want = t.scalar
    if not want:
        return True
    if want == "string":
        return isinstance(value, str)
    if want == "boolean":
        return isinstance(value, bool)
    if want == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_typed(
    value: Any,
    t: TypeNode,
    *,
    issues: list[str] | None,
    unknown: list[str] | None = None,
    path: str = "",
) -> Any:
    """Walk a built-in object: raise :class:`TypeError_` on a wrong type, report unknown
    and duplicate fields, and return the object without its unknown fields.

    Args:
        issues: collects ``unknown field "p"`` / ``duplicate field "p"`` in document
            order (None: do not collect).
        unknown: collects the unknown paths only (for patches, which sort them).
    """
    return _walk(
        value, t, path, path, struct=t.go.rsplit(".", 1)[-1], issues=issues, unknown=unknown
    )


def _walk(
    value: Any,
    t: TypeNode,
    path: str,
    go_path: str,
    *,
    struct: str,
    issues: list[str] | None,
    unknown: list[str] | None,
) -> Any:
    if value is None:
        return "0" if t.value_member else None
    kind = t.kind
    if kind == STRUCT:
        if not isinstance(value, dict):
            raise _type_error(value, struct, go_path, t.go)
        fields = t.fields()
        name = t.go.rsplit(".", 1)[-1] if t.go.startswith("v") else struct
        out: dict[str, Any] | None = None
        repeats = isinstance(value, _Obj) and bool(value.dups)
        # Without repeats, every key is met once: first and kept value at once.
        steps = _steps(value) if repeats else [("value", k) for k in value]
        for step, k in steps:
            p = f"{path}.{k}" if path else k
            ft = fields.get(k)
            if ft is None:
                if t.preserve or step == "dup" or (repeats and step == "value"):
                    continue  # unknown and repeated: reported once, as unknown
                if issues is not None:
                    issues.append(f'unknown field "{p}"')
                if unknown is not None:
                    unknown.append(p)
                if out is None:
                    out = dict(value)
                out.pop(k, None)
                continue
            if step == "dup":
                if issues is not None:
                    issues.append(f'duplicate field "{p}"')
                continue
            if step != "value":
                continue
            v = value[k]
            gp = f"{go_path}.{k}" if go_path else k
            cleaned = _walk(v, ft, p, gp, struct=name, issues=issues, unknown=unknown)
            if cleaned is not v:
                if out is None:
                    out = dict(value)
                out[k] = cleaned
        for k in t.always():
            if k not in value:  # a Go value member: written at its zero
                if out is None:
                    out = dict(value)
                out[k] = "0"
        return value if out is None else out
    if kind == MAP:
        if not isinstance(value, dict):
            raise _type_error(value, struct, go_path, t.go)
        assert t.elem is not None
        changed: dict[str, Any] | None = None
        for k, v in value.items():
            if v is None and t.elem.scalar == QUANTITY:
                cleaned = "0"  # a map's null element decodes to a zero Quantity
            else:
                cleaned = _walk(
                    v,
                    t.elem,
                    f"{path}.{k}" if path else k,
                    go_path,
                    struct=struct,
                    issues=issues,
                    unknown=unknown,
                )
            if cleaned is not v:
                if changed is None:
                    changed = dict(value)
                changed[k] = cleaned
        return value if changed is None else changed
    if kind == LIST:
        if not isinstance(value, list):
            raise _type_error(value, struct, go_path, t.go)
        assert t.elem is not None
        items: list[Any] | None = None
        for i, v in enumerate(value):
            cleaned = _walk(
                v, t.elem, f"{path}[{i}]", go_path, struct=struct, issues=issues, unknown=unknown
            )
            if cleaned is not v:
                if items is None:
                    items = list(value)
                items[i] = cleaned
        return value if items is None else items
    if kind == SCALAR:
        if t.scalar == QUANTITY:
            return _quantity(value)
        if not _scalar_ok(value, t):
            raise _type_error(value, struct, go_path, t.go)
        if t.go == "[]uint8":
            problem = _base64_problem(value)
            if problem is not None:
                raise TypeError_(problem)
        elif t.go == "v1.MicroTime":
            problem = _micro_time_problem(value)
            if problem is not None:
                raise TypeError_(problem)
    return value


def decode_quantities(value: Any, t: TypeNode) -> Any:
    """``value`` with its quantities as decoding leaves them, nothing else checked: for an
    object that was built rather than decoded (the result of a server-side apply, which
    kube turns into the typed object after merging).

    Raises:
        TypeError_: a quantity does not parse (the parser's message).
    """
    if value is None:
        return "0" if t.value_member else None
    kind = t.kind
    if kind == SCALAR:
        return _quantity(value) if t.scalar == QUANTITY else value
    if kind == STRUCT and isinstance(value, dict):
        fields = t.fields()
        out = {k: decode_quantities(v, fields[k]) if k in fields else v for k, v in value.items()}
        for k in t.always():
            out.setdefault(k, "0")
        return out
    if kind == MAP and isinstance(value, dict) and t.elem is not None:
        elem = t.elem
        return {k: decode_quantities(v, elem) for k, v in value.items()}
    if kind == LIST and isinstance(value, list) and t.elem is not None:
        elem = t.elem
        return [decode_quantities(v, elem) for v in value]
    return value


def _quantity(value: Any) -> Any:
    """A quantity as stored: the value itself when that is its canonical text."""
    try:
        text = canonical_quantity(value)
    except QuantityError as exc:
        raise TypeError_(str(exc)) from None
    return value if text == value else text


_B64: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_MICRO_LAYOUT: Final = "2006-01-02T15:04:05.000000Z07:00"
_CLOCK: Final = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")
_FRACTION: Final = re.compile(r"^\.\d{6}")
_ZONE: Final = re.compile(r"^(Z|[+-]\d{2}:\d{2})$")


def _base64_problem(text: str) -> str | None:
    """Go's ``base64.StdEncoding`` verdict on a ``[]byte`` field (None: it decodes)."""
    body = text.replace("\r", "").replace("\n", "")
    stripped = body.rstrip("=")
    for i, ch in enumerate(stripped):
        if ch not in _B64:
            return f"illegal base64 data at input byte {i}"
    pad = len(body) - len(stripped)
    if len(body) % 4 or pad > 2 or (pad and len(stripped) % 4 in (0, 1)):
        return f"illegal base64 data at input byte {len(stripped) - len(stripped) % 4}"
    return None


def _micro_time_problem(text: str) -> str | None:
    """``time.Parse(RFC3339Micro, text)``'s error, as MicroTime decoding reports it."""
    head = f"parsing time {json.dumps(text)} as {json.dumps(_MICRO_LAYOUT)}: cannot parse"
    clock = _CLOCK.match(text)
    if clock is None:
        return f'{head} {json.dumps(text)} as "2006"'
    rest = text[clock.end() :]
    fraction = _FRACTION.match(rest)
    if fraction is None:
        return f'{head} {json.dumps(rest)} as ".000000"'
    zone = rest[fraction.end() :]
    if _ZONE.match(zone) is None:
        return f'{head} {json.dumps(zone)} as "Z07:00"'
    return None


_JSON_PATCH_KEYS: Final = frozenset({"op", "path", "value", "from"})


def json_patch_issues(ops: Any) -> list[str]:
    """Unknown and repeated keys of JSON patch operations (``json patch unknown field
    "[0].foo"``), in order."""
    out: list[str] = []
    for i, op in enumerate(ops if isinstance(ops, list) else []):
        if not isinstance(op, dict):
            continue
        dups = op.dups if isinstance(op, _Obj) else []
        for k in op:
            if k not in _JSON_PATCH_KEYS:
                out.append(f'json patch unknown field "[{i}].{k}"')
            elif k in dups:
                out.append(f'json patch duplicate field "[{i}].{k}"')
    return out


def decode_yaml(body: bytes) -> tuple[Any, list[str]]:
    """An apply body (YAML or JSON) and its repeated keys as go-yaml words them
    (``line 10: key "paused" already set in map``); the last value wins."""
    import yaml

    repeats: list[str] = []

    class _Loader(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if key in out:
                line = key_node.start_mark.line + 1
                repeats.append(f"line {line}: key {json.dumps(str(key))} already set in map")
            out[key] = loader.construct_object(value_node, deep=True)
        return out

    _Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    doc = yaml.load(body.decode("utf-8"), Loader=_Loader)  # a SafeLoader subclass
    return doc, repeats


def warning_header(text: str) -> str:
    """One ``Warning`` header value: ``299 - "<text, quoted as Go's strconv.Quote>"``."""
    return f"299 - {json.dumps(text, ensure_ascii=False)}"


_TRUNCATE_AT_TOTAL: Final = 4 * 1024  # runes of warning text in one answer
_TRUNCATE_ITEM: Final = 256


def warning_headers(texts: Iterable[str]) -> list[str]:
    """The ``Warning`` header values of one answer, as kube's warning recorder
    (endpoints/filters/warning.go) writes them: empty and repeated texts dropped, texts
    with control characters refused, and once the texts pass 4096 characters in all,
    every one cut to 256 characters and those past the limit left out."""
    seen: set[str] = set()
    kept: list[str] = []
    for text in texts:
        if not text or text in seen:
            continue
        seen.add(text)
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
            continue
        kept.append(text)
    out: list[str] = []
    written, truncating = 0, False
    for i, whole in enumerate(kept):
        if truncating and written >= _TRUNCATE_AT_TOTAL:
            break
        text = whole[:_TRUNCATE_ITEM] if truncating else whole
        if written + len(text) <= _TRUNCATE_AT_TOTAL or truncating:
            written += len(text)
            out.append(warning_header(text))
            continue
        # over the limit: from now on every text is cut, those written so far too
        truncating = True
        out = [warning_header(t[:_TRUNCATE_ITEM]) for t in kept[: i + 1]]
        written = sum(len(t[:_TRUNCATE_ITEM]) for t in kept[: i + 1])
    return out


@dataclass(slots=True)
class Directive:
    """One request's ``fieldValidation`` and what it found.

    Attributes:
        mode: Strict, Warn or Ignore.
        prefix: what a Strict error starts with (``ConfigMap in version "v1" cannot be
            handled as a ConfigMap: `` for a create or update; nothing for a patch).
        issues: problems found so far, in the order kube reports them.
        warnings: what the response's ``Warning`` headers carry (Warn mode).
    """

    mode: str = "Warn"
    prefix: str = ""
    issues: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # unknown paths, reported sorted
    # a patch's bad value as its Strict refusal (a 422 on ``patch``) prints it; None for
    # a create or update body (a 400)
    patch_value: str | None = None

    def add_sorted_unknown(self, paths: Iterable[str]) -> None:
        self.issues.extend(f'unknown field "{p}"' for p in sorted(paths))

    def finish(self) -> str | None:
        """The Strict error message if there is one; in Warn mode the issues become
        warnings. Issues are consumed either way."""
        issues, self.issues = self.issues, []
        if not issues or self.mode == "Ignore":
            return None
        if self.mode == "Strict":
            return f"{self.prefix}strict decoding error: {', '.join(issues)}"
        self.warnings.extend(issues)
        return None
