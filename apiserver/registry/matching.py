"""Which writes an admission policy or webhook applies to: rules, selectors, equivalents.

A port of what ValidatingAdmissionPolicies and admission webhooks share in
kube-apiserver: ``webhook/predicates/rules`` (a ``RuleWithOperations`` against the
request: operations, API groups and versions, resources with subresources and
wildcards, scope), ``webhook/predicates/namespace`` (``namespaceSelector``: the labels of
the request's namespace, of a Namespace being written its own, cluster-scoped objects
never exempted), ``webhook/predicates/object`` (``objectSelector``: the new or the old
object) and ``IsExemptAdmissionConfigurationResource``. ``matchPolicy: Equivalent`` finds
the other served versions of the request's resource (the local server knows no other
group serving the same objects).

Thread-safety: pure functions; the storage they read is thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Protocol

from apiserver.machinery.admission import Attributes
from manager.labels import label_selector_from_dict

__all__ = [
    "Matched",
    "NamespaceStorage",
    "equivalents",
    "is_exempt",
    "namespace_matches",
    "object_matches",
    "rule_matches",
]

JsonDict = dict[str, Any]

# rules.IsExemptAdmissionConfigurationResource: admission never judges its own
# configuration (by kind, in admissionregistration.k8s.io).
_EXEMPT_KINDS: Final = frozenset(
    {
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    }
)

_EXEMPT_RESOURCES: Final = frozenset(f"{k.lower()}s" for k in _EXEMPT_KINDS if "Binding" in k) | {
    "validatingwebhookconfigurations",
    "mutatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "mutatingadmissionpolicies",
}


class NamespaceStorage(Protocol):
    """Where namespaces are read."""

    def get(self, key: tuple[str, str, str]) -> JsonDict | None: ...


@dataclass(frozen=True, slots=True)
class Matched:
    """The resource a request matched a rule as (itself, or an equivalent version)."""

    group: str
    version: str
    resource: str
    kind: str


def is_exempt(attrs: Attributes) -> bool:
    """Whether ``attrs`` writes an admission configuration (never admitted by policies
    or webhooks)."""
    return attrs.group == "admissionregistration.k8s.io" and (
        attrs.kind in _EXEMPT_KINDS or attrs.resource in _EXEMPT_RESOURCES
    )


def _has(values: Any, value: str) -> bool:
    values = values or []
    return "*" in values or value in values


def rule_matches(
    rule: JsonDict, attrs: Attributes, group: str, version: str, resource: str
) -> bool:
    """``rules.Matcher.Matches`` for one RuleWithOperations, the request taken as
    ``group/version/resource``."""
    if not _has(rule.get("operations"), attrs.operation):
        return False
    if not _has(rule.get("apiGroups"), group) or not _has(rule.get("apiVersions"), version):
        return False
    for text in rule.get("resources") or []:
        res, _, sub = str(text).partition("/")
        if res in ("*", resource) and sub in ("*", attrs.subresource):
            break
    else:
        return False
    scope = rule.get("scope") or "*"
    namespace_object = (group, resource) == ("", "namespaces")
    if scope == "Namespaced":
        return not namespace_object and attrs.namespace != ""
    if scope == "Cluster":
        return namespace_object or attrs.namespace == ""
    return scope == "*"


def equivalents(resources: Iterable[Any], attrs: Attributes) -> Iterator[Matched]:
    """The other served versions of the request's resource (``EquivalentResourcesFor``),
    from the ``ServedResource``s ``resources``."""
    for served in resources:
        r = served.resource
        if r.group == attrs.group and r.plural == attrs.resource and r.version != attrs.version:
            yield Matched(r.group, r.version, r.plural, r.kind)


def _namespace_object(attrs: Attributes) -> bool:
    return (attrs.group, attrs.resource) == ("", "namespaces")


def namespace_matches(selector: Any, attrs: Attributes, storage: NamespaceStorage) -> bool:
    """``namespace.Matcher.MatchNamespaceSelector``.

    Raises:
        SelectorError: the selector does not parse.
    """
    if not attrs.namespace and not _namespace_object(attrs):
        return True  # cluster-scoped objects are never exempted
    parsed = label_selector_from_dict(selector or {})
    if parsed.empty():
        return True
    if (
        _namespace_object(attrs)
        and not attrs.subresource
        and attrs.operation in ("CREATE", "UPDATE")
        and attrs.obj is not None
    ):
        labels = (attrs.obj.get("metadata") or {}).get("labels") or {}
    else:
        name = attrs.namespace or attrs.name
        ns = storage.get(("/namespaces", "", name)) or {}
        labels = (ns.get("metadata") or {}).get("labels") or {}
    return parsed.matches(labels)


def object_matches(selector: Any, attrs: Attributes) -> bool:
    """``object.Matcher.MatchObjectSelector``: the new or the old object's labels.

    Raises:
        SelectorError: the selector does not parse.
    """
    parsed = label_selector_from_dict(selector or {})
    if parsed.empty():
        return True
    for obj in (attrs.obj, attrs.old):
        if obj is not None and parsed.matches((obj.get("metadata") or {}).get("labels") or {}):
            return True
    return False
