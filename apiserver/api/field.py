"""Field errors as ``k8s.io/apimachinery/pkg/util/validation/field`` renders them.

A :class:`FieldError` is one problem at one path (``spec.replicas: Invalid value: -1: must
be greater than or equal to 0``); :class:`AdmissionError` carries the ``Status`` answer of
a refused object (422 Invalid with one :class:`Cause` per field error, or 400/403). Bad
values print the way Go's fmt prints the typed field they came from (``%#v`` of maps and
structs); the registry's validators build these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from apiserver.api.gofmt import quote

__all__ = [
    "NO_VALUE",
    "AdmissionError",
    "Cause",
    "FieldError",
    "GoValue",
    "duplicate",
    "forbidden",
    "invalid",
    "label_selector_value",
    "not_supported",
    "render",
    "required",
    "str_list",
    "str_map",
]


def _map(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else an empty one (malformed input validates as absent)."""
    return value if isinstance(value, Mapping) else {}


# --- Go-style value rendering ----------------------------------------------------------


class GoValue:
    """A value already rendered the way Go's fmt prints it (``%#v`` of a struct)."""

    def __init__(self, text: str) -> None:
        self.text = text


def str_map(value: Any) -> GoValue:
    """``%#v`` of a ``map[string]string``."""
    if not isinstance(value, Mapping):
        return GoValue("map[string]string(nil)")
    inner = ", ".join(f"{quote(str(k))}:{quote(str(v))}" for k, v in sorted(value.items()))
    return GoValue(f"map[string]string{{{inner}}}")


def str_list(value: Any) -> GoValue:
    """``%#v`` of a ``[]string``."""
    if not isinstance(value, list):
        return GoValue("[]string(nil)")
    return GoValue("[]string{" + ", ".join(quote(str(v)) for v in value) + "}")


def label_selector_value(sel: Any) -> GoValue:
    """``%#v`` of a ``v1.LabelSelector``."""
    sel = sel if isinstance(sel, Mapping) else {}
    exprs = sel.get("matchExpressions")
    if isinstance(exprs, list):
        items = []
        for raw_e in exprs:
            e = _map(raw_e)
            items.append(
                f"v1.LabelSelectorRequirement{{Key:{quote(str(e.get('key', '')))}, "
                f"Operator:{quote(str(e.get('operator', '')))}, "
                f"Values:{str_list(e.get('values')).text}}}"
            )
        shown = "[]v1.LabelSelectorRequirement{" + ", ".join(items) + "}"
    else:
        shown = "[]v1.LabelSelectorRequirement(nil)"
    return GoValue(
        f"v1.LabelSelector{{MatchLabels:{str_map(sel.get('matchLabels')).text}, "
        f"MatchExpressions:{shown}}}"
    )


def render(value: Any) -> str:
    if isinstance(value, GoValue):
        return value.text
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, Mapping):
        return str_map(value).text
    if isinstance(value, list):
        return str_list(value).text
    return quote(str(value))


# --- errors ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cause:
    """One ``StatusCause``: ``reason`` (``FieldValueInvalid``, ...), ``message``, ``field``."""

    reason: str
    message: str
    field: str


_TYPES: Final = {
    "Required": "Required value",
    "Invalid": "Invalid value",
    "TypeInvalid": "Invalid value",
    "NotSupported": "Unsupported value",
    "Duplicate": "Duplicate value",
    "Forbidden": "Forbidden",
    "NotFound": "Not found",
    "TooLong": "Too long",
    "TooMany": "Too many",
}
_WITH_VALUE: Final = frozenset(
    {"Invalid", "TypeInvalid", "NotSupported", "Duplicate", "NotFound", "TooMany"}
)
NO_VALUE: Final = object()


@dataclass(frozen=True, slots=True)
class FieldError:
    """One ``field.Error`` (``k8s.io/apimachinery/pkg/util/validation/field``).

    ``kind`` is a key of ``_TYPES``; the bad value is printed by :meth:`render_value`, which
    a subclass overrides when its values have other Go types (see ``apiserver.machinery.schema``).
    """

    kind: str
    path: str
    value: Any = NO_VALUE
    detail: str = ""

    def render_value(self) -> str:
        """The bad value as Go prints the typed field it came from."""
        return render(self.value)

    def body(self) -> str:
        text = _TYPES[self.kind]
        if self.kind in _WITH_VALUE and self.value is not NO_VALUE:
            text = f"{text}: {self.render_value()}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}"

    def cause(self) -> Cause:
        return Cause(reason=f"FieldValue{self.kind}", message=self.body(), field=self.path)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError("Required", path, detail=detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("Invalid", path, value, detail)


def not_supported(path: str, value: Any, supported: list[str]) -> FieldError:
    return FieldError(
        "NotSupported", path, value, "supported values: " + ", ".join(quote(s) for s in supported)
    )


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError("Duplicate", path, value)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError("Forbidden", path, detail=detail)


class AdmissionError(Exception):
    """The object is refused; carries what the ``Status`` answer needs.

    Attributes:
        status: 422 (Invalid) by default; 400 (BadRequest) or 403 (Forbidden).
        reason: ``Invalid``, ``BadRequest`` or ``Forbidden``.
        message: ``Status.message``; for 422, ``<Kind>[.<group>] "<name>" is invalid: ...``.
        causes: one :class:`Cause` per field error (``Status.details.causes``).
        kind, group, name: for ``Status.details`` (kind is the Kind for 422 Invalid).
    """

    def __init__(
        self,
        kind: str,
        group: str,
        name: str,
        causes: list[Cause],
        *,
        status: int = 422,
        reason: str = "Invalid",
        message: str | None = None,
    ) -> None:
        self.kind = kind
        self.group = group
        self.name = name
        self.causes = list(causes)
        self.status = status
        self.reason = reason
        if message is None:
            message = _invalid_message(
                kind, group, name, [f"{c.field}: {c.message}" for c in causes]
            )
        self.message = message
        super().__init__(message)


def _invalid_message(kind: str, group: str, name: str, errors: list[str]) -> str:
    """``NewInvalid``'s message; the aggregate drops repeats and brackets two or more."""
    seen: list[str] = []
    for e in errors:
        if e not in seen:
            seen.append(e)
    joined = seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"
    qualified = f"{kind}.{group}" if group else kind
    return f"{qualified} {quote(name)} is invalid: {joined}"
