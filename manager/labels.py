"""Label selectors and label syntax (``k8s.io/apimachinery/pkg/labels`` and the label
rules of ``pkg/util/validation``).

A label selector (``app=web,tier in (a,b),!canary``) is a conjunction of requirements on
an object's labels. :meth:`LabelSelector.parse` accepts exactly what kube-apiserver
accepts and raises :class:`SelectorError` with its message otherwise; requirements are
kept sorted by key, so ``str()`` gives the canonical form. ``!=`` and ``notin`` match
objects that lack the key; the empty selector matches everything.
:func:`label_selector_from_dict` converts a ``metav1.LabelSelector`` (``matchLabels``,
``matchExpressions``), as Deployments carry.

Used by listers (client side) and by the local API server (server side).

Thread-safe: pure functions over immutable values.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "is_qualified_name",
    "is_valid_label_value",
    "label_selector_from_dict",
    "new_requirement",
    "regex_error",
]


class SelectorError(ValueError):
    """A label or field selector that does not parse; the message is kube-apiserver's."""


# --- name validation (k8s.io/apimachinery/pkg/util/validation) -----------------------

_QUALIFIED_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE: Final = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_QUALIFIED_NAME_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT: Final = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE_RE: Final = re.compile(f"^{_LABEL_VALUE_FMT}$")
_LABEL_VALUE_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT: Final = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN_RE: Final = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1123_SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """kube's ``RegexError``: the message, examples and the regex, formatted as kube does."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _subdomain_errors(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """Errors for a label key or annotation key (``[prefix/]name``); empty when valid."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in _subdomain_errors(prefix))
    else:
        return [
            "a qualified name "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append(
            "name part "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """Errors for a label value (may be empty); empty when valid."""
    errs: list[str] = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _go_quote(s: str) -> str:
    """Go's ``%q`` for the printable strings selectors carry."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- label selectors -------------------------------------------------------------------

_SET_OPS: Final = frozenset({"in", "notin"})
_EQ_OPS: Final = frozenset({"=", "==", "!="})
_CMP_OPS: Final = frozenset({"gt", "lt"})
_ALL_OPS: Final = ("in", "notin", "=", "==", "!=", "gt", "lt", "exists", "!")


@dataclass(frozen=True, slots=True)
class Requirement:
    """One label requirement: ``key operator values``.

    ``operator`` is one of ``=``, ``==``, ``!=``, ``in``, ``notin``, ``exists``, ``!``
    (does not exist), ``gt``, ``lt``; ``values`` are sorted and unique.
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        op = self.operator
        present = self.key in labels
        if op in ("=", "==", "in"):
            return present and labels[self.key] in self.values
        if op in ("!=", "notin"):
            return not present or labels[self.key] not in self.values
        if op == "exists":
            return present
        if op == "!":
            return not present
        if not present or len(self.values) != 1:
            return False
        try:
            have, want = int(labels[self.key]), int(self.values[0])
        except ValueError:
            return False
        return have > want if op == "gt" else have < want

    def __str__(self) -> str:
        op = self.operator
        if op == "exists":
            return self.key
        if op == "!":
            return f"!{self.key}"
        if op in _SET_OPS:
            return f"{self.key} {op} ({','.join(self.values)})"
        if op == "gt":
            return f"{self.key}>{self.values[0]}"
        if op == "lt":
            return f"{self.key}<{self.values[0]}"
        return f"{self.key}{op}{self.values[0]}"


def new_requirement(key: str, operator: str, values: Collection[str]) -> Requirement:
    """Build and validate a :class:`Requirement` (kube's ``labels.NewRequirement``).

    Raises:
        SelectorError: an invalid key, operator, value count or value.
    """
    errs: list[str] = []
    key_errs = is_qualified_name(key)
    if key_errs:
        errs.append(f"key: Invalid value: {_go_quote(key)}: {'; '.join(key_errs)}")
    vals = tuple(sorted(set(values)))
    shown = "[]string{" + ", ".join(_go_quote(v) for v in vals) + "}"
    if operator in _SET_OPS:
        if not vals:
            errs.append(
                f"values: Invalid value: {shown}: "
                "for 'in', 'notin' operators, values set can't be empty"
            )
    elif operator in _EQ_OPS:
        if len(vals) != 1:
            errs.append(
                f"values: Invalid value: {shown}: "
                "exact-match compatibility requires one single value"
            )
    elif operator in ("exists", "!"):
        if vals:
            errs.append(
                f"values: Invalid value: {shown}: "
                "values set must be empty for exists and does not exist"
            )
    elif operator in _CMP_OPS:
        if len(vals) != 1:
            errs.append(
                f"values: Invalid value: {shown}: "
                "for 'Gt', 'Lt' operators, exactly one value is required"
            )
        for i, v in enumerate(vals):
            if not re.fullmatch(r"[-+]?[0-9]+", v):
                errs.append(
                    f"values[{i}]: Invalid value: {_go_quote(v)}: "
                    "for 'Gt', 'Lt' operators, the value must be an integer"
                )
    else:
        supported = ", ".join(_go_quote(o) for o in _ALL_OPS)
        errs.append(
            f"operator: Unsupported value: {_go_quote(operator)}: supported values: {supported}"
        )
    for i, v in enumerate(vals):
        val_errs = is_valid_label_value(v)
        if val_errs:
            errs.append(f"values[{i}][{key}]: Invalid value: {_go_quote(v)}: {'; '.join(val_errs)}")
    if errs:
        raise SelectorError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
    return Requirement(key, operator, vals)


# Lexer tokens.
_END: Final = "end of string"
_IDENT: Final = "identifier"
_SPECIALS: Final = ("!=", "==", "!", "(", ")", ",", "=", ">", "<")
_SPECIAL_CHARS: Final = frozenset("!=(),><")


def _lex(text: str) -> list[tuple[str, str]]:
    """Split a label selector into ``(token, literal)`` pairs (kube's ``Lexer``)."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in _SPECIAL_CHARS:
            for sym in _SPECIALS:
                if text.startswith(sym, i):
                    tokens.append((sym, sym))
                    i += len(sym)
                    break
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] not in _SPECIAL_CHARS:
            j += 1
        word = text[i:j]
        tokens.append((word if word in _SET_OPS else _IDENT, word))
        i = j
    tokens.append((_END, ""))
    return tokens


class _Parser:
    """Recursive-descent parser over the token list (kube's ``labels.Parser``)."""

    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def _peek(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.tokens[self.pos]
        if values and tok in _SET_OPS:
            tok = _IDENT  # "in" and "notin" are plain identifiers where values are expected
        return tok, lit

    def _next(self, values: bool = True) -> tuple[str, str]:
        tok = self._peek(values)
        if self.pos < len(self.tokens) - 1:
            self.pos += 1
        return tok

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self._peek()
            if tok == _END:
                return reqs
            if tok not in (_IDENT, "!"):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                reqs.append(self._requirement())
            except SelectorError as e:
                raise SelectorError(f"unable to parse requirement: {e}") from None
            tok, lit = self._next()
            if tok == _END:
                return reqs
            if tok != ",":
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self._peek()
            if tok not in (_IDENT, "!"):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        key, op = self._key_and_inferred_operator()
        if op in ("exists", "!"):
            return new_requirement(key, op, ())
        op = self._operator()
        values = self._set_values() if op in _SET_OPS else self._exact_value()
        return new_requirement(key, op, values)

    def _key_and_inferred_operator(self) -> tuple[str, str]:
        op = ""
        tok, lit = self._next()
        if tok == "!":
            op = "!"
            tok, lit = self._next()
        if tok != _IDENT:
            raise SelectorError(f"found '{lit}', expected: identifier")
        errs = is_qualified_name(lit)
        if errs:
            raise SelectorError(f"<nil>: Invalid value: {_go_quote(lit)}: {'; '.join(errs)}")
        if self._peek()[0] in (_END, ",") and op != "!":
            op = "exists"
        return lit, op

    def _operator(self) -> str:
        tok, lit = self._next(values=False)
        ops = {"in": "in", "notin": "notin", "=": "=", "==": "==", "!=": "!=", ">": "gt", "<": "lt"}
        if tok in ops:
            return ops[tok]
        raise SelectorError(f"found '{lit}', expected: in, notin, =, ==, !=, gt, lt")

    def _exact_value(self) -> list[str]:
        tok, _ = self._peek()
        if tok in (_END, ","):
            return [""]
        tok, lit = self._next()
        if tok == _IDENT:
            return [lit]
        raise SelectorError(f"found '{lit}', expected: identifier")

    def _set_values(self) -> list[str]:
        tok, lit = self._next()
        if tok != "(":
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self._peek()
        if tok == ")":
            self._next()
            return [""]
        if tok not in (_IDENT, ","):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self._identifiers()
        tok, lit = self._next()
        if tok != ")":
            raise SelectorError(f"found '{lit}', expected: ')'")
        return values

    def _identifiers(self) -> list[str]:
        values: list[str] = []
        while True:
            tok, lit = self._next()
            if tok == _IDENT:
                values.append(lit)
                tok2, lit2 = self._peek()
                if tok2 == ",":
                    continue
                if tok2 == ")":
                    return values
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if tok == ",":
                if not values:
                    values.append("")  # "(,a)"
                tok2, _ = self._peek()
                if tok2 == ")":
                    values.append("")  # "(a,)"
                    return values
                if tok2 == ",":
                    self._next()
                    values.append("")  # "(a,,b)"
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A conjunction of label :class:`Requirement` s; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Parse the ``labelSelector`` query parameter syntax.

        Raises:
            SelectorError: the text does not parse, or a key or value is invalid.
        """
        reqs = _Parser(text).parse()
        return cls(tuple(sorted(reqs, key=lambda r: r.key)))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with ``labels`` is selected."""
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        """True for the selector that matches everything."""
        return not self.requirements

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


_EXPR_OPS: Final = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def label_selector_from_dict(sel: Mapping[str, Any]) -> LabelSelector:
    """Convert a ``metav1.LabelSelector`` (``matchLabels``, ``matchExpressions``).

    A selector with neither field selects everything (kube's ``LabelSelectorAsSelector``;
    its ``nil`` → "nothing" case is the caller's, since there is no mapping to pass).

    Raises:
        SelectorError: an unknown operator, or an invalid key, value or value count.
    """
    reqs: list[Requirement] = []
    for key, value in sorted((sel.get("matchLabels") or {}).items()):
        reqs.append(new_requirement(str(key), "=", [str(value)]))
    for expr in sel.get("matchExpressions") or []:
        if not isinstance(expr, Mapping):
            raise SelectorError(f"{expr!r} is not a valid label selector requirement")
        operator = str(expr.get("operator", ""))
        if operator not in _EXPR_OPS:
            raise SelectorError(f"{_go_quote(operator)} is not a valid label selector operator")
        values = [str(v) for v in (expr.get("values") or [])]
        reqs.append(new_requirement(str(expr.get("key", "")), _EXPR_OPS[operator], values))
    return LabelSelector(tuple(sorted(reqs, key=lambda r: r.key)))
