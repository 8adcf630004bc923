"""Field errors as ``k8s.io/apimachinery/pkg/util/validation/field`` renders them.

A :class:`FieldError` is one problem at one path (``spec.replicas: Invalid value: -1: must
be greater than or equal to 0``); :class:`AdmissionError` carries the ``Status`` answer of
a refused object (422 Invalid with one :class:`Cause` per field error, or 400/403). Bad
values print as kube-apiserver 1.36's ``field.Error.ErrorBody`` prints them: numbers and
booleans with ``%v``, strings with ``%q``, anything else as ``json.Marshal`` writes the
typed field it came from (``["Yes"]``, ``{"app":"web"}``); the registry's validators build
these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from apiserver.api.gofmt import go_json, quote

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
    """A value already rendered the way ``field.Error`` prints it."""

    def __init__(self, text: str) -> None:
        self.text = text


def str_map(value: Any) -> GoValue:
    """A ``map[string]string`` as ``json.Marshal`` writes it (``null`` when absent)."""
    if not isinstance(value, Mapping):
        return GoValue("null")
    return GoValue(go_json({str(k): str(v) for k, v in value.items()}))


def str_list(value: Any) -> GoValue:
    """A ``[]string`` as ``json.Marshal`` writes it (``null`` when absent)."""
    if not isinstance(value, list):
        return GoValue("null")
    return GoValue(go_json([str(v) for v in value]))


def label_selector_value(sel: Any) -> GoValue:
    """A ``*metav1.LabelSelector`` as ``json.Marshal`` writes it: fields in the struct's
    order, empty ones left out (``omitempty``), ``null`` for no selector."""
    if not isinstance(sel, Mapping):
        return GoValue("null")
    parts: list[str] = []
    labels = sel.get("matchLabels")
    if isinstance(labels, Mapping) and labels:
        parts.append(f'"matchLabels":{str_map(labels).text}')
    exprs = sel.get("matchExpressions")
    if isinstance(exprs, list) and exprs:
        items = []
        for raw_e in exprs:
            e = _map(raw_e)
            item = (
                f'"key":{go_json(str(e.get("key", "")))},'
                f'"operator":{go_json(str(e.get("operator", "")))}'
            )
            values = e.get("values")
            if isinstance(values, list) and values:
                item += f',"values":{str_list(values).text}'
            items.append("{" + item + "}")
        parts.append('"matchExpressions":[' + ",".join(items) + "]")
    return GoValue("{" + ",".join(parts) + "}")


def render(value: Any) -> str:
    """``field.Error``'s rendering of a bad value (``ErrorBody``, apimachinery 1.36)."""
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
    if isinstance(value, Mapping | list):
        return go_json(value)
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
