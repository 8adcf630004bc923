"""CEL for admission: the expressions of ValidatingAdmissionPolicies and webhook
``matchConditions``, evaluated as kube-apiserver's CEL filter evaluates them
(``staging/src/k8s.io/apiserver/pkg/admission/plugin/cel``).

CEL is Google's cel-cpp through ``cel-expr-python`` (the standard library, the strings
and optional extensions), plus part of Kubernetes' own libraries (the regex and list
extensions below). What it lacks is listed in docs/local-apiserver.md; an expression that
uses it fails to compile, which is evaluated as kube evaluates a compile error (an error,
handled by the caller's ``failurePolicy``). Every variable is ``dyn``: there is no typing
from the resource's schema.

Thread-safety: a :class:`Cel` may be called from any thread; compiled expressions are
cached under a lock and evaluation is serialised.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from cel_expr_python import cel
from cel_expr_python.ext import ext_optional, ext_strings

__all__ = [
    "POLICY_VARIABLES",
    "WEBHOOK_VARIABLES",
    "Cel",
    "Outcome",
    "inner_error",
    "resulted",
    "syntax_error",
]

# The variables of a ValidatingAdmissionPolicy's expressions, and of a webhook's
# matchConditions (no params, namespaceObject or variables there; `authorizer` is not
# provided here, so an expression using it fails to compile).
POLICY_VARIABLES: Final = (
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
)
WEBHOOK_VARIABLES: Final = ("object", "oldObject", "request")


def _find(s: str, pattern: str) -> str:
    match = re.search(pattern, s)
    return match.group(0) if match else ""


def _find_all(s: str, pattern: str) -> list[str]:
    return [m.group(0) for m in re.finditer(pattern, s)]


def _find_all_n(s: str, pattern: str, n: int) -> list[str]:
    found = _find_all(s, pattern)
    return found if n < 0 else found[:n]


def _is_sorted(items: list[Any]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(items))


def _sum(items: list[Any]) -> Any:
    return sum(items)


def _min(items: list[Any]) -> Any:
    if not items:
        raise ValueError("min called on empty list")
    return min(items)


def _max(items: list[Any]) -> Any:
    if not items:
        raise ValueError("max called on empty list")
    return max(items)


def _member(name: str, impl: Callable[..., Any], ret: Any, *params: Any) -> Any:
    return cel.FunctionDecl(
        name,
        [cel.Overload(f"k8s_{name}_{len(params)}", ret, list(params), is_member=True, impl=impl)],
    )


def _environment(names: Iterable[str], extra: Iterable[Any] = ()) -> Any:
    """The CEL environment of admission expressions over the variables ``names``, with
    the functions ``extra`` besides Kubernetes' libraries."""
    t = cel.Type
    dyn_list = t.List(t.DYN)
    functions = [
        # k8s regex library
        _member("find", _find, t.STRING, t.STRING, t.STRING),
        cel.FunctionDecl(
            "findAll",
            [
                cel.Overload(
                    "k8s_findAll_2",
                    t.List(t.STRING),
                    [t.STRING, t.STRING],
                    is_member=True,
                    impl=_find_all,
                ),
                cel.Overload(
                    "k8s_findAll_3",
                    t.List(t.STRING),
                    [t.STRING, t.STRING, t.INT],
                    is_member=True,
                    impl=_find_all_n,
                ),
            ],
        ),
        # k8s lists library
        _member("isSorted", _is_sorted, t.BOOL, dyn_list),
        _member("sum", _sum, t.DYN, dyn_list),
        _member("min", _min, t.DYN, dyn_list),
        _member("max", _max, t.DYN, dyn_list),
        *extra,
    ]
    return cel.NewEnv(
        variables={n: t.DYN for n in names},
        extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional()],
        functions=functions,
    )


@dataclass(frozen=True, slots=True)
class Outcome:
    """One evaluation: a value, or the error kube would report for it."""

    value: Any = None
    error: str = ""


_NOT_FOUND: Final = re.compile(r'^NOT_FOUND: Key not found in map : "?(.*?)"?$')
_STATUS_PREFIX: Final = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX: Final = re.compile(r" \[[A-Z_]+\]$")


def _go_error(text: str) -> str:
    """A cel-cpp error as cel-go words the common ones."""
    match = _NOT_FOUND.match(text)
    if match:
        return f"no such key: {match.group(1)}"
    text = _STATUS_PREFIX.sub("", text)
    if text == "divide by zero":
        return "division by zero"
    if text.startswith("No matching overloads found"):
        return "no such overload"
    return text


def resulted(expression: str, error: str) -> str:
    """``expression '<e>' resulted in error: <error>``, the CEL filter's wording."""
    return f"expression '{expression}' resulted in error: {error}"


def inner_error(error: str) -> str:
    """The cause of an ``expression '...' resulted in error: cause`` message."""
    _, sep, cause = error.partition(" resulted in error: ")
    return cause if sep else error


class Cel:
    """Compiled expressions over one set of variables (cached) and their evaluation."""

    def __init__(
        self,
        variables: Iterable[str] = POLICY_VARIABLES,
        *,
        functions: Iterable[Any] = (),
        rewrite: Callable[[str], str] | None = None,
    ) -> None:
        """``functions``: ``cel.FunctionDecl`` s added to the environment; ``rewrite``:
        what an expression is compiled as (its errors still quote it as written)."""
        self._names = tuple(variables)
        self._functions = tuple(functions)
        self._rewrite = rewrite
        self._lock = threading.Lock()
        self._env: Any = None
        self._compiled: dict[str, tuple[Any, str]] = {}

    def _program(self, expression: str) -> tuple[Any, str]:
        cached = self._compiled.get(expression)
        if cached is None:
            if self._env is None:
                self._env = _environment(self._names, self._functions)
            try:
                compiled = self._rewrite(expression) if self._rewrite else expression
                cached = (self._env.compile(compiled), "")
            except Exception as exc:  # cel-cpp raises ValueError/RuntimeError by status
                cached = (None, _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", str(exc).strip())))
            if len(self._compiled) > 4096:
                self._compiled.clear()
            self._compiled[expression] = cached
        return cached

    def evaluate(self, expression: str, data: Mapping[str, Any]) -> Outcome:
        """The value of ``expression``; errors worded as kube's CEL filter words them."""
        with self._lock:
            program, compile_error = self._program(expression)
            if program is None:
                return Outcome(error=f"compilation error: {compile_error}")
            try:
                value = program.eval(data=dict(data))
            except Exception as exc:
                return Outcome(error=resulted(expression, _go_error(str(exc))))
            if value.type() == cel.Type.ERROR:
                return Outcome(error=resulted(expression, _go_error(str(value.value()))))
            return Outcome(value=value.plain_value())


_PARSER: list[Any] = []  # the environment, built on first use
_PARSER_LOCK = threading.Lock()


def syntax_error(expression: str) -> str:
    """The parse error of ``expression`` as cel-go words it (``ERROR: <input>:1:23:
    Syntax error: ...``), or "" when it parses. Names and types are not checked."""
    with _PARSER_LOCK:
        if not _PARSER:
            _PARSER.append(_environment(POLICY_VARIABLES))
        try:
            _PARSER[0].compile(expression, disable_check=True)
        except Exception as exc:
            return _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", str(exc).strip()))
    return ""
