"""Shard selectors of the local API server (KEP-5866, kube-apiserver 1.36, feature gate
``ShardedListAndWatch``).

``?shardSelector=shardRange(object.metadata.uid, '0x0000000000000000',
'0x8000000000000000') || shardRange(...)`` keeps the objects whose FNV-1a 64 hash of the
named field (``object.metadata.uid`` or ``object.metadata.namespace``) falls in one of
the ranges, start inclusive, end exclusive, over ``[0, 2**64)``.

kube-apiserver parses the text as a CEL expression and walks its syntax tree without
evaluating it (apiserver ``pkg/sharding/parser.go``; matching and the normal form in
apimachinery ``pkg/sharding/selector.go``); this module does the same for the part of
CEL's grammar a selector can meet (identifiers, field selection, calls, string, int,
uint, double, bool and null literals, parentheses, unary and binary operators), so that
what kube refuses is refused here with kube's messages:

* only ``shardRange()`` calls and ``||`` (``unsupported function "_&&_"; only
  shardRange() and || are allowed``), three arguments, a field path of
  ``object.metadata.uid`` or ``object.metadata.namespace``, the same field in every
  range;
* bounds are string literals with ``0x`` and exactly 16 lowercase hex digits, or
  ``0x10000000000000000`` (2**64); start < end;
* text CEL cannot parse: ``CEL parse error: ...`` (the wording of CEL's own syntax
  errors is not reproduced);
* an empty (all-blank) selector is refused; an absent or empty parameter means none.

The caller turns a :class:`ShardSelectorError` into HTTP 500 with the message
``invalid shard selector: <error>`` and no reason, as kube-apiserver answers a failed
ListOptions conversion. The normal form (:meth:`ShardSelector.string`) is what a list
reports in ``metadata.shardInfo.selector``.

Thread-safe: selectors are immutable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from manager.hashring import fnv1a_64

__all__ = ["ShardRange", "ShardSelector", "ShardSelectorError", "parse_shard_selector"]

JsonDict = dict[str, Any]

FIELDS = ("object.metadata.uid", "object.metadata.namespace")
SPACE_END = "0x10000000000000000"

# cel-go common/ast ExprKind values, printed with %v in kube's messages
_CALL, _IDENT, _LITERAL, _SELECT, _LIST = 1, 3, 5, 7, 4


class ShardSelectorError(ValueError):
    """The selector is not one kube-apiserver accepts (the message is kube's)."""


@dataclass(frozen=True, slots=True)
class ShardRange:
    """One ``shardRange(field, start, end)``; bounds as written (``0x`` + hex)."""

    field: str
    start: str
    end: str

    @property
    def bounds(self) -> tuple[int, int]:
        return int(self.start, 16), int(self.end, 16)


@dataclass(frozen=True, slots=True)
class ShardSelector:
    """Parsed ranges, all on one field; an object matches if its hash is in any."""

    ranges: tuple[ShardRange, ...]

    def string(self) -> str:
        """The normal form kube-apiserver reports in ``metadata.shardInfo.selector``."""
        return " || ".join(f"shardRange({r.field}, '{r.start}', '{r.end}')" for r in self.ranges)

    def matches(self, obj: JsonDict) -> bool:
        meta = obj.get("metadata") or {}
        field = self.ranges[0].field
        value = meta.get("uid") if field == "object.metadata.uid" else meta.get("namespace")
        h = fnv1a_64(str(value or ""))
        for r in self.ranges:
            start, end = r.bounds
            if start <= h < end:
                return True
        return False


# -- a small CEL syntax tree ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Node:
    kind: int
    name: str = ""  # ident name, selected field, or function name
    args: tuple[_Node, ...] = ()  # call arguments; for select: (operand,)
    value: object = None  # literal value
    go_type: str = ""  # the literal's Go type as %T prints it


_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+[uU]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|[<>+\-*/%!().,\[\]?:{}])
    """,
    re.VERBOSE,
)
_BINARY = [
    {"||": "_||_"},
    {"&&": "_&&_"},
    {"==": "_==_", "!=": "_!=_", "<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_"},
    {"+": "_+_", "-": "_-_"},
    {"*": "_*_", "/": "_/_", "%": "_%_"},
]
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0"}


class _CelSyntaxError(Exception):
    pass


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise _CelSyntaxError(
                    f"Syntax error: token recognition error at: '{text[pos]}' (column {pos})"
                )
            kind = m.lastgroup or ""
            if kind != "space":
                self.tokens.append((kind, m.group(), pos))
            pos = m.end()
        self.i = 0

    def parse(self) -> _Node:
        node = self._binary(0)
        if self.i < len(self.tokens):
            _, text, pos = self.tokens[self.i]
            raise _CelSyntaxError(f"Syntax error: extraneous input '{text}' (column {pos})")
        return node

    def _peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def _take(self, expected: str) -> None:
        if self._peek() != expected:
            found = self._peek()
            where = "end of input" if found is None else f"'{found}'"
            raise _CelSyntaxError(f"Syntax error: missing '{expected}' at {where}")
        self.i += 1

    def _binary(self, level: int) -> _Node:
        if level == len(_BINARY):
            return self._unary()
        ops = _BINARY[level]
        node = self._binary(level + 1)
        while (op := self._peek()) in ops:
            self.i += 1
            node = _Node(_CALL, ops[str(op)], (node, self._binary(level + 1)))
        return node

    def _unary(self) -> _Node:
        op = self._peek()
        if op in ("!", "-"):
            self.i += 1
            return _Node(_CALL, f"{op}_", (self._unary(),))
        return self._member()

    def _member(self) -> _Node:
        node = self._primary()
        while (op := self._peek()) in (".", "("):
            self.i += 1
            if op == ".":
                if self.i >= len(self.tokens) or self.tokens[self.i][0] != "ident":
                    raise _CelSyntaxError("Syntax error: expected a field name after '.'")
                name = self.tokens[self.i][1]
                self.i += 1
                if self._peek() == "(":  # receiver call: target.f(args)
                    self.i += 1
                    node = _Node(_CALL, name, (node, *self._args()))
                else:
                    node = _Node(_SELECT, name, (node,))
            else:
                if node.kind != _IDENT:
                    raise _CelSyntaxError("Syntax error: only identifiers can be called")
                node = _Node(_CALL, node.name, self._args())
        return node

    def _args(self) -> tuple[_Node, ...]:
        args: list[_Node] = []
        if self._peek() == ")":
            self.i += 1
            return ()
        while True:
            args.append(self._binary(0))
            if self._peek() == ",":
                self.i += 1
                continue
            self._take(")")
            return tuple(args)

    def _primary(self) -> _Node:
        if self.i >= len(self.tokens):
            raise _CelSyntaxError("Syntax error: mismatched input '<EOF>'")
        kind, text, pos = self.tokens[self.i]
        self.i += 1
        if text == "(":
            node = self._binary(0)
            self._take(")")
            return node
        if text == "[":
            items: list[_Node] = []
            while self._peek() != "]":
                items.append(self._binary(0))
                if self._peek() != ",":
                    break
                self.i += 1
            self._take("]")
            return _Node(_LIST, args=tuple(items))
        if kind == "string":
            return _Node(_LITERAL, value=_unquote(text), go_type="string")
        if kind == "number":
            if text[-1] in "uU":
                return _Node(_LITERAL, value=int(text[:-1], 0), go_type="uint64")
            if any(c in text for c in ".eE") and not text.lower().startswith("0x"):
                return _Node(_LITERAL, value=float(text), go_type="float64")
            return _Node(_LITERAL, value=int(text, 0), go_type="int64")
        if kind == "ident":
            if text in ("true", "false"):
                return _Node(_LITERAL, value=text == "true", go_type="bool")
            if text == "null":
                return _Node(_LITERAL, value=None, go_type="structpb.NullValue")
            return _Node(_IDENT, text)
        raise _CelSyntaxError(f"Syntax error: mismatched input '{text}' (column {pos})")


def _unquote(text: str) -> str:
    body, out, i = text[1:-1], [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


# -- the walk (apiserver pkg/sharding/parser.go) -------------------------------------------


def parse_shard_selector(text: str) -> ShardSelector:
    """Parse a ``shardSelector`` parameter.

    Raises:
        ShardSelectorError: kube-apiserver would refuse it (message without the
            ``invalid shard selector:`` prefix).
    """
    text = text.strip()
    if not text:
        raise ShardSelectorError(
            "empty shard selector is not allowed; omit the parameter for unfiltered lists"
        )
    try:
        tree = _Parser(text).parse()
    except _CelSyntaxError as exc:
        raise ShardSelectorError(f"CEL parse error: {exc}") from None
    ranges = _walk(tree)
    for r in ranges[1:]:
        if r.field != ranges[0].field:
            raise ShardSelectorError(
                f'all shard ranges must use the same field, got "{ranges[0].field}" and "{r.field}"'
            )
    return ShardSelector(tuple(ranges))


def _walk(node: _Node) -> list[ShardRange]:
    if node.kind == _CALL:
        if node.name == "_||_":
            return _walk(node.args[0]) + _walk(node.args[1])
        if node.name == "shardRange":
            return [_shard_range(node)]
        raise ShardSelectorError(
            f'unsupported function "{node.name}"; only shardRange() and || are allowed'
        )
    raise ShardSelectorError(
        f"unexpected expression kind {node.kind}; expected shardRange() call or || operator"
    )


def _shard_range(call: _Node) -> ShardRange:
    if len(call.args) != 3:
        raise ShardSelectorError(f"shardRange() requires exactly 3 arguments, got {len(call.args)}")
    field = _field_path(call.args[0])
    if field not in FIELDS:
        raise ShardSelectorError(
            f'unsupported field path "{field}"; supported: object.metadata.uid, '
            "object.metadata.namespace"
        )
    start = _hex_literal(call.args[1], "hexStart")
    end = _hex_literal(call.args[2], "hexEnd")
    if not int(start, 16) < int(end, 16):
        raise ShardSelectorError(f"shard range start {start} must be less than end {end}")
    return ShardRange(field, start, end)


def _field_path(node: _Node) -> str:
    if node.kind == _IDENT:
        return node.name
    if node.kind == _SELECT:
        return f"{_field_path(node.args[0])}.{node.name}"
    raise ShardSelectorError(
        "shardRange() first argument: expected field path (e.g. object.metadata.uid), "
        f"got expression kind {node.kind}"
    )


def _hex_literal(node: _Node, name: str) -> str:
    if node.kind != _LITERAL:
        raise ShardSelectorError(
            f"{name} must be a string literal (e.g. '0xff'), got expression kind {node.kind}"
        )
    if not isinstance(node.value, str):
        raise ShardSelectorError(f"{name} must be a string literal, got {node.go_type}")
    s = node.value
    if not s.startswith("0x"):
        raise ShardSelectorError(f"{name} must have '0x' prefix, got {_go_quote(s)}")
    digits = s[2:]
    if not digits:
        raise ShardSelectorError(f"{name}: hex value is required after '0x'")
    if len(digits) > 17:
        raise ShardSelectorError(
            f"{name}: hex value too long ({len(digits)} chars, max 17): {_go_quote(digits)}"
        )
    for c in digits:
        if not ("0" <= c <= "9" or "a" <= c <= "f"):
            raise ShardSelectorError(
                f"{name}: invalid hex character {_go_quote(c)} in {_go_quote(s)}"
            )
    if len(digits) == 17:
        if s != SPACE_END:
            raise ShardSelectorError(
                f"{name}: 17-digit hex value must be '{SPACE_END}' (2^64), got {_go_quote(s)}"
            )
    elif len(digits) != 16:
        padded = "0x" + "0" * (16 - len(digits)) + digits
        raise ShardSelectorError(
            f"{name} must be a 0x-prefixed 16-digit hex value, got {_go_quote(s)} "
            f"(did you mean {_go_quote(padded)}?)"
        )
    return s


def _go_quote(s: str) -> str:
    """Go's %q for the strings met here (printable ASCII, quotes and backslashes)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
