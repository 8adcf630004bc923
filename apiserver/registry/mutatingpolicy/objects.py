"""``Object{...}`` and ``JSONPatch{...}`` in CEL: the values a mutation expression builds.

A port of what kube-apiserver adds to CEL for MutatingAdmissionPolicies
(``staging/src/k8s.io/apiserver/pkg/cel/mutation``: ``typeresolver.go``,
``dynamic/objects.go``, ``jsonpatch.go``; ``cel/library/jsonpatch.go``):

* ``Object{metadata: Object.metadata{labels: {...}}}`` builds an object of the type named
  ``Object``, ``Object.metadata``, ... Kubernetes declares those types without a schema:
  any field name goes, every field is ``dyn``; the names of nested types must follow the
  field path from the root (``Object.spec{selector: Object.spec.wrong{}}`` is a "type
  mismatch", found after evaluation, as kube finds it);
* ``JSONPatch{op: ..., path: ..., from: ..., value: ...}`` builds one JSON Patch operation
  (``op``, ``path``, ``from`` strings; ``value`` anything);
* ``jsonpatch.escapeKey(k)`` escapes a key for a JSON Patch path (``~`` and ``/``).

cel-cpp can declare neither type (its struct types are protobuf messages), so an
expression is rewritten before it is compiled: each construction becomes a call of a
function that makes a map, marked with its type name under a key no Kubernetes object
can have (:data:`TYPE_KEY`), from a map literal of its fields
(``Object.spec{replicas: 3}`` -> ``_k8s_object("Object.spec", {"replicas": 3})``). The
rewrite tokenizes CEL (strings, raw and triple-quoted, comments, backquoted names), so
text inside a string is never touched. Field access on a built value works as on a map;
:func:`plain` turns a result into JSON, dropping the marks.

Thread-safety: pure functions; safe to share between threads.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from typing import Any, Final

from cel_expr_python import cel

__all__ = [
    "TYPE_KEY",
    "functions",
    "is_typed",
    "plain",
    "rewrite",
    "type_mismatches",
]

JsonDict = dict[str, Any]

TYPE_KEY: Final = "\x01type"  # a built value's type name (cel-cpp strings stop at NUL)
OBJECT: Final = "Object"
JSON_PATCH: Final = "JSONPatch"
_CONSTRUCT: Final = "_k8s_object"
_JSON_PATCH_FIELDS: Final = ("op", "path", "from", "value")

# CEL's lexical grammar, as far as the rewrite needs it: a raw string has no escapes.
_TOKEN: Final = re.compile(
    r"""
    (?P<ws>(?:\s+|//[^\n]*)+)
  | (?P<str>
        (?:[rR][bB]?|[bB][rR])(?:'''.*?'''|\"\"\".*?\"\"\"|'[^'\n]*'|"[^"\n]*")
      | [bB]?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"
               |'(?:\\.|[^\\'\n])*'|"(?:\\.|[^\\"\n])*")
    )
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<quoted>`[^`\n]*`)
  | (?P<num>0[xX][0-9a-fA-F]+[uU]?|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[uU]?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def _tokens(expression: str) -> list[tuple[str, str]]:
    return [(str(m.lastgroup), m.group(0)) for m in _TOKEN.finditer(expression)]


def _skip_ws(tokens: list[tuple[str, str]], i: int) -> int:
    while i < len(tokens) and tokens[i][0] == "ws":
        i += 1
    return i


def _type_name(tokens: list[tuple[str, str]], i: int) -> tuple[str, int]:
    """The dotted name starting at identifier ``i``, and the index after it."""
    names = [tokens[i][1]]
    end = i + 1
    while True:
        dot = _skip_ws(tokens, end)
        if dot >= len(tokens) or tokens[dot] != ("punct", "."):
            break
        ident = _skip_ws(tokens, dot + 1)
        if ident >= len(tokens) or tokens[ident][0] != "ident":
            break
        names.append(tokens[ident][1])
        end = ident + 1
    return ".".join(names), end


def _constructs(name: str) -> bool:
    return name in (JSON_PATCH, OBJECT) or name.startswith(OBJECT + ".")


def rewrite(expression: str) -> str:
    """``expression`` with every ``Object...{...}`` and ``JSONPatch{...}`` construction
    made a call of the function :func:`functions` declares."""
    if OBJECT not in expression and JSON_PATCH not in expression:
        return expression
    tokens = _tokens(expression)
    out: list[str] = []
    frames: list[str] = []  # open brackets; "new" for a construction's braces
    field_next = False  # a construction's field name comes next
    previous = ""  # the last significant token
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        if kind == "ws":
            out.append(text)
            i += 1
            continue
        if field_next:
            if (kind, text) == ("punct", "?"):  # an optional field: ?name: optional
                out.append(text)
                i += 1
                continue
            if kind in ("ident", "quoted"):
                out.append(json.dumps(text.strip("`")))
                field_next = False
                previous = "field"
                i += 1
                continue
            field_next = False
        if kind == "ident" and previous != ".":
            name, end = _type_name(tokens, i)
            brace = _skip_ws(tokens, end)
            if brace < len(tokens) and tokens[brace] == ("punct", "{") and _constructs(name):
                out.append(f"{_CONSTRUCT}({json.dumps(name)}, {{")
                frames.append("new")
                field_next = True
                previous = "{"
                i = brace + 1
                continue
        if kind == "punct":
            if text in "([{":
                frames.append(text)
            elif text in ")]}" and frames:
                if frames.pop() == "new":
                    text = "})"
            elif text == "," and frames and frames[-1] == "new":
                field_next = True
        out.append(text)
        previous = text if kind == "punct" else kind
        i += 1
    return "".join(out)


def _construct(name: str, fields: JsonDict) -> JsonDict:
    """A built value: ``ObjectType.Val`` / ``JSONPatchType.Val``."""
    if name == JSON_PATCH:
        for key, value in fields.items():
            if key not in _JSON_PATCH_FIELDS:
                raise ValueError(f"unexpected JSONPatchType field: {key}")
            if key != "value" and not isinstance(value, str):
                raise ValueError(
                    f"unexpected type {_go_type(value)} for JSONPatchType '{key}' field"
                )
    return {TYPE_KEY: name, **_json(fields)}


def _go_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, dict):
        return "map[ref.Val]ref.Val"
    if isinstance(value, list):
        return "[]ref.Val"
    return type(value).__name__


def _escape_key(key: str) -> str:
    """``jsonpatch.escapeKey``: RFC 6901's escapes of ``~`` and ``/``."""
    return key.replace("~", "~0").replace("/", "~1")


def functions() -> list[Any]:
    """The functions the rewritten expressions call, and ``jsonpatch.escapeKey``."""
    t = cel.Type
    return [
        cel.FunctionDecl(
            _CONSTRUCT,
            [
                cel.Overload(
                    "k8s_object_construct",
                    t.DYN,
                    [t.STRING, t.Map(t.STRING, t.DYN)],
                    impl=_construct,
                )
            ],
        ),
        cel.FunctionDecl(
            "jsonpatch.escapeKey",
            [
                cel.Overload(
                    "string_jsonpatch_escapeKey_string", t.STRING, [t.STRING], impl=_escape_key
                )
            ],
        ),
    ]


def is_typed(value: Any, name: str) -> bool:
    """Whether ``value`` was built as ``name{...}``."""
    return isinstance(value, dict) and value.get(TYPE_KEY) == name


def plain(value: Any) -> Any:
    """``value`` as JSON: built values become the objects they describe."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != TYPE_KEY}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _json(value: Any) -> Any:
    """A field's value as it goes into JSON (cel-expr-python takes no timestamp or
    duration back from a function): timestamps as RFC 3339 text, durations as Go's
    duration text in seconds, bytes base64."""
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.timedelta):
        return f"{value.total_seconds():g}s"
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    return value


def type_mismatches(value: Any) -> list[str]:
    """``CheckTypeNamesMatchFieldPathNames``: every built value inside ``value`` whose
    type name is not the field path from ``value``'s own type."""
    if not isinstance(value, dict) or TYPE_KEY not in value:
        return []
    out: list[str] = []
    _check(value, [str(value[TYPE_KEY])], out)
    return out


def _check(value: Any, path: list[str], out: list[str]) -> None:
    """typeCheck: a built value's fields extend the path; lists and maps keep it."""
    if isinstance(value, dict) and TYPE_KEY in value:
        expected = ".".join(path)
        if value[TYPE_KEY] != expected:
            out.append(
                f'unexpected type name "{value[TYPE_KEY]}", expected "{expected}", which '
                "matches field name path from root Object type"
            )
        for key, child in value.items():
            if key != TYPE_KEY:
                _check(child, [*path, key], out)
    elif isinstance(value, dict):
        for child in value.values():
            _check(child, path, out)
    elif isinstance(value, list):
        for child in value:
            _check(child, path, out)
