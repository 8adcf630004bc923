"""Field selectors (and, through :mod:`manager.labels`, label selectors) as the local
API server parses and applies them.

A *label selector* (``?labelSelector=app=web,tier!=db``) is a conjunction of requirements
on an object's labels; a *field selector* (``?fieldSelector=spec.nodeName=n1``) is a
conjunction of (in)equalities on a small, per-resource set of object fields. This module
ports the parsers and matchers of ``k8s.io/apimachinery/pkg/labels/selector.go`` and
``k8s.io/apimachinery/pkg/fields/selector.go``, and the per-resource field sets of the
registry strategies (``GetAttrs`` / ``ToSelectableFields``).

Contract:
    * :meth:`LabelSelector.parse` accepts exactly what kube-apiserver accepts and raises
      :class:`SelectorError` with kube-apiserver's message otherwise; requirements are
      kept sorted by key, as kube does, so ``str()`` gives the canonical form.
    * ``!=`` and ``notin`` match objects that lack the key; the empty selector matches
      everything.
    * :meth:`FieldSelector.parse` rejects a field the resource does not support with
      kube's message for that kind (``field label not supported: <field>`` for kinds with
      a conversion of their own, ``"<field>" is not a known field selector: only
      "metadata.name", "metadata.namespace"`` for the rest); a missing field value
      compares as ``""``.

Thread-safety: pure functions over immutable values; safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from manager.labels import SelectorError

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "SupportedFields",
    "object_fields",
    "supported_fields",
]


# --- field selectors -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """One field requirement: ``field`` ``=``/``==``/``!=`` ``value``."""

    field: str
    operator: str  # "=" (also for "=="), or "!="
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether ``fields`` satisfy this requirement (a missing field is ``""``)."""
        have = fields.get(self.field, "")
        return have == self.value if self.operator == "=" else have != self.value

    def __str__(self) -> str:
        return f"{_escape_field(self.field)}{self.operator}{_escape_field(self.value)}"


def _escape_field(s: str) -> str:
    return s.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _split_terms(text: str) -> list[str]:
    """Split on unescaped commas, keeping escapes for the term parser."""
    terms: list[str] = []
    start, escaped = 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _unescape(s: str) -> str:
    """kube's ``fields.UnescapeValue``: backslash escapes only backslash, comma and equals."""
    out: list[str] = []
    escaped = False
    for ch in s:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_term(term: str) -> tuple[str, str, str] | None:
    """Find the first unescaped operator; try ``!=``, ``==``, ``=`` at each position."""
    escaped = False
    for i, ch in enumerate(term):
        if escaped:
            escaped = False
            continue
        if ch == "\\":
            escaped = True
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A conjunction of field (in)equalities; the empty selector matches everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    @classmethod
    def parse(cls, text: str, supported: Collection[str]) -> FieldSelector:
        """Parse the ``fieldSelector`` query parameter for a resource.

        Args:
            text: the selector, e.g. ``spec.nodeName=n1,status.phase!=Failed``.
            supported: the field labels the resource supports (:func:`supported_fields`).

        Raises:
            SelectorError: a term without an operator, or an unsupported field.
        """
        reqs: list[FieldRequirement] = []
        for term in _split_terms(text):
            if not term:
                continue
            parts = _split_term(term)
            if parts is None:
                raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
            raw_field, op, raw_value = parts
            field, value = raw_field, _unescape(raw_value)
            if field not in supported:
                if isinstance(supported, SupportedFields):
                    raise SelectorError(supported.error(field))
                raise SelectorError(_NOT_SUPPORTED.format(field))
            reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", value))
        return cls(tuple(reqs))

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether an object with these field values is selected."""
        return all(r.matches(fields) for r in self.requirements)

    def empty(self) -> bool:
        """True for the selector that matches everything."""
        return not self.requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _get(obj: Mapping[str, Any], path: str) -> str:
    """The string form of the field at a dotted path ("" when missing; bools as Go prints)."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


_POD_FIELDS: Final = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
)
_EVENT_FIELDS: Final = {
    "involvedObject.kind": "involvedObject.kind",
    "involvedObject.namespace": "involvedObject.namespace",
    "involvedObject.name": "involvedObject.name",
    "involvedObject.uid": "involvedObject.uid",
    "involvedObject.apiVersion": "involvedObject.apiVersion",
    "involvedObject.resourceVersion": "involvedObject.resourceVersion",
    "involvedObject.fieldPath": "involvedObject.fieldPath",
    "reason": "reason",
    "reportingComponent": "reportingComponent",
    "source": "source.component",
    "type": "type",
}
_META: Final = ("metadata.name", "metadata.namespace")
_NOT_SUPPORTED: Final = "field label not supported: {}"


@dataclass(frozen=True, slots=True)
class _Conversion:
    """A kind's field label conversion (``scheme.AddFieldLabelConversionFunc``)."""

    labels: tuple[str, ...]  # the field labels accepted
    paths: Mapping[str, str]  # label -> dotted path, for labels beyond metadata
    message: str  # the error for any other label; "{}" is the label


def _conversion(extra: Mapping[str, str], *, meta: tuple[str, ...] = _META) -> _Conversion:
    return _Conversion((*meta, *extra), dict(extra), _NOT_SUPPORTED)


# Kinds with a conversion of their own (pkg/apis/*/v1/conversion.go); every other kind
# gets runtime.DefaultMetaV1FieldSelectorConversion: metadata.name and metadata.namespace.
_CONVERSIONS: Final[Mapping[tuple[str, str], _Conversion]] = {
    ("", "pods"): _conversion({f: f for f in _POD_FIELDS}),
    ("", "nodes"): _conversion(
        {"spec.unschedulable": "spec.unschedulable"}, meta=("metadata.name",)
    ),
    ("", "replicationcontrollers"): _conversion({"status.replicas": "status.replicas"}),
    ("", "events"): _conversion(_EVENT_FIELDS),
    ("", "namespaces"): _conversion({"status.phase": "status.phase"}, meta=("metadata.name",)),
    ("", "secrets"): _conversion({"type": "type"}),
    ("", "services"): _conversion({"spec.clusterIP": "spec.clusterIP", "spec.type": "spec.type"}),
    ("apps", "replicasets"): _conversion({"status.replicas": "status.replicas"}),
    ("batch", "jobs"): _Conversion(
        (*_META, "status.successful"),
        {"status.successful": "status.succeeded"},
        'field label "{}" not supported for "Job"',
    ),
    ("batch", "cronjobs"): _Conversion(
        (*_META, "status.successful"), {}, 'field label "{}" not supported for "CronJob"'
    ),
    ("certificates.k8s.io", "certificatesigningrequests"): _conversion(
        {"spec.signerName": "spec.signerName"}
    ),
}
_DEFAULT: Final = _Conversion(
    _META, {}, '"{}" is not a known field selector: only "metadata.name", "metadata.namespace"'
)


class SupportedFields(frozenset[str]):
    """The field labels a resource accepts, and kube's error for any other label."""

    message: str = _NOT_SUPPORTED

    def error(self, label: str) -> str:
        return self.message.format(label)


def _conversion_of(plural: str, group: str) -> _Conversion:
    return _CONVERSIONS.get((group, plural), _DEFAULT)


def _extra_fields(plural: str, group: str) -> Mapping[str, str]:
    """Resource-specific field label → dotted path in the object."""
    return _conversion_of(plural, group).paths


def supported_fields(plural: str, group: str) -> SupportedFields:
    """The field labels a resource accepts in a field selector."""
    conversion = _conversion_of(plural, group)
    out = SupportedFields(conversion.labels)
    out.message = conversion.message
    return out


def object_fields(plural: str, group: str, obj: Mapping[str, Any]) -> dict[str, str]:
    """The selectable field values of ``obj`` (missing values are ``""``)."""
    fields = {"metadata.name": _get(obj, "metadata.name")}
    if "metadata.namespace" in _conversion_of(plural, group).labels:
        fields["metadata.namespace"] = _get(obj, "metadata.namespace")
    for label, path in _extra_fields(plural, group).items():
        value = _get(obj, path)
        if label in ("spec.hostNetwork", "spec.unschedulable") and value == "":
            value = "false"
        if label in ("status.replicas", "status.successful") and value == "":
            value = "0"
        fields[label] = value
    return fields
