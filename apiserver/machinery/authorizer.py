"""May this user do this? The local API server's RBAC authorizer.

Evaluates a request's attributes against the Roles, ClusterRoles, RoleBindings and
ClusterRoleBindings the server stores, the way kube-apiserver's RBAC authorizer does
(``plugin/pkg/auth/authorizer/rbac/rbac.go`` and ``pkg/registry/rbac/validation``),
after the privileged-group authorizer that lets ``system:masters`` do anything:

* ClusterRoleBindings are visited first, then (for a request in a namespace) the
  RoleBindings of that namespace; a binding applies when one of its subjects does: a
  ``User`` by name, a ``Group`` by membership, a ``ServiceAccount`` by its user name
  (its namespace defaults to the RoleBinding's).
* A rule allows when the verb matches (or ``*``), and for a resource request the API
  group, ``resource`` or ``resource/subresource`` (or ``*``, or ``*/subresource``) and,
  when the rule has any, the resource name; for a non-resource request (``/metrics``,
  ``/healthz``) the path matches a ``nonResourceURLs`` entry exactly or by a trailing
  ``*``.
* A ClusterRole with an ``aggregationRule`` also has the rules of every ClusterRole its
  selectors match (kube's aggregation controller writes them into the role; here they
  are read at evaluation, the same rules without the write).
* A denial carries kube's reason: the roles a binding names that do not exist
  (``RBAC: clusterrole.rbac.authorization.k8s.io "x" not found``); an allowance names
  the binding (``RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to
  ServiceAccount "sa/ns"``).

:func:`forbidden` renders the 403 kube-apiserver answers
(``endpoints/handlers/responsewriters/errors.go``), and :func:`bootstrap_policy` the
default roles every cluster has that a client needs for discovery and health.

Thread-safe: reads storage under its lock; holds no state of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from apiserver.api.errors import StatusError
from apiserver.machinery.authenticator import MASTERS_GROUP, UserInfo
from apiserver.storage.store import Storage
from manager.labels import SelectorError, label_selector_from_dict

__all__ = [
    "Attributes",
    "Decision",
    "RbacAuthorizer",
    "bootstrap_policy",
    "forbidden",
    "request_name",
]

JsonDict = dict[str, Any]

RBAC_GROUP: Final = "rbac.authorization.k8s.io"
_CLUSTER_ROLES = f"{RBAC_GROUP}/clusterroles"
_CLUSTER_ROLE_BINDINGS = f"{RBAC_GROUP}/clusterrolebindings"
_ROLES = f"{RBAC_GROUP}/roles"
_ROLE_BINDINGS = f"{RBAC_GROUP}/rolebindings"
_SA_PREFIX: Final = "system:serviceaccount:"


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request asks to do (``authorizer.Attributes``)."""

    user: UserInfo
    verb: str
    resource_request: bool
    namespace: str = ""
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""  # for non-resource requests


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


def request_name(field_selector: str) -> str:
    """The name a LIST or WATCH is about, when its field selector requires
    ``metadata.name`` to be exactly one value (kube's RequestInfo sets it then)."""
    for term in field_selector.split(","):
        for op in ("==", "="):
            key, sep, value = term.partition(op)
            if sep and key.strip() == "metadata.name" and not value.startswith("="):
                name = value.strip()
                return name if name and "/" not in name and name not in (".", "..") else ""
    return ""


def _verb_matches(rule: Mapping[str, Any], verb: str) -> bool:
    verbs = rule.get("verbs") or []
    return "*" in verbs or verb in verbs


def _resource_matches(rule: Mapping[str, Any], combined: str, subresource: str) -> bool:
    for resource in rule.get("resources") or []:
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def _url_matches(rule: Mapping[str, Any], path: str) -> bool:
    for url in rule.get("nonResourceURLs") or []:
        if url in ("*", path):
            return True
        if url.endswith("*") and path.startswith(url[:-1]):
            return True
    return False


def rule_allows(attrs: Attributes, rule: Mapping[str, Any]) -> bool:
    """Whether one PolicyRule allows the request (``rbac.RuleAllows``)."""
    if not _verb_matches(rule, attrs.verb):
        return False
    if not attrs.resource_request:
        return _url_matches(rule, attrs.path)
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.api_group not in groups:
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if not _resource_matches(rule, combined, attrs.subresource):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _applies(subject: Mapping[str, Any], user: UserInfo, namespace: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name", "")
    if kind == "User":
        return bool(user.name == name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and user.name == f"{_SA_PREFIX}{sa_namespace}:{name}"
    return False


def _describe_subject(subject: Mapping[str, Any], binding_namespace: str) -> str:
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or binding_namespace}"'
    return f'{kind} "{name}"'


class RbacAuthorizer:
    """RBAC over the objects in ``storage`` (see the module's documentation)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def _cluster_role_rules(self, name: str) -> list[JsonDict] | None:
        role = self.storage.get((_CLUSTER_ROLES, "", name))
        if role is None:
            return None
        rules = list(role.get("rules") or [])
        aggregation = role.get("aggregationRule") or {}
        selectors = []
        for sel in aggregation.get("clusterRoleSelectors") or []:
            try:
                selectors.append(label_selector_from_dict(sel or {}))
            except SelectorError:
                continue  # validation refuses these on write; never matches here
        if selectors:
            for other in self.storage.list(_CLUSTER_ROLES):
                labels = (other.get("metadata") or {}).get("labels") or {}
                if other is role or not any(s.matches(labels) for s in selectors):
                    continue
                rules.extend(r for r in other.get("rules") or [] if r not in rules)
        return rules

    def _role_rules(self, ref: Mapping[str, Any], namespace: str) -> tuple[list[JsonDict], str]:
        """The rules a roleRef names, or an error (``... not found``)."""
        kind, name = ref.get("kind"), str(ref.get("name", ""))
        if kind == "ClusterRole":
            rules = self._cluster_role_rules(name)
            if rules is None:
                return [], f'clusterrole.{RBAC_GROUP} "{name}" not found'
            return rules, ""
        if kind == "Role" and namespace:
            role = self.storage.get((_ROLES, namespace, name))
            if role is None:
                return [], f'role.{RBAC_GROUP} "{name}" not found'
            return list(role.get("rules") or []), ""
        return [], f"unsupported role reference kind: {kind!r}"

    def _visit(self, user: UserInfo, namespace: str) -> Iterator[tuple[str, JsonDict | None, str]]:
        """``(source, rule, error)`` for every rule that applies to ``user`` in
        ``namespace`` (cluster-wide rules first), as ``VisitRulesFor`` walks them."""
        with self.storage.lock:
            bindings = list(self.storage.list(_CLUSTER_ROLE_BINDINGS))
            local = list(self.storage.list(_ROLE_BINDINGS, namespace)) if namespace else []
        for binding in bindings:
            subject = next(
                (s for s in binding.get("subjects") or [] if _applies(s, user, "")), None
            )
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            rules, error = self._role_rules(ref, "")
            source = (
                f'ClusterRoleBinding "{binding["metadata"]["name"]}" of {ref.get("kind")} '
                f'"{ref.get("name")}" to {_describe_subject(subject, "")}'
            )
            if error:
                yield source, None, error
            for rule in rules:
                yield source, rule, ""
        for binding in local:
            subject = next(
                (s for s in binding.get("subjects") or [] if _applies(s, user, namespace)), None
            )
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            rules, error = self._role_rules(ref, namespace)
            source = (
                f'RoleBinding "{binding["metadata"]["name"]}/{namespace}" of {ref.get("kind")} '
                f'"{ref.get("name")}" to {_describe_subject(subject, namespace)}'
            )
            if error:
                yield source, None, error
            for rule in rules:
                yield source, rule, ""

    def authorize(self, attrs: Attributes) -> Decision:
        """Allowed, or not with kube's reason."""
        if MASTERS_GROUP in attrs.user.groups:
            return Decision(True)
        errors: list[str] = []
        for source, rule, error in self._visit(attrs.user, attrs.namespace):
            if error:
                errors.append(error)
            elif rule is not None and rule_allows(attrs, rule):
                return Decision(True, f"RBAC: allowed by {source}")
        if not errors:
            return Decision(False)
        joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        return Decision(False, f"RBAC: {joined}")

    def rules_for(self, user: UserInfo, namespace: str) -> JsonDict:
        """A SelfSubjectRulesReview's ``status``: every rule ``user`` has in ``namespace``."""
        if MASTERS_GROUP in user.groups:
            return {
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": False,
            }
        resource_rules: list[JsonDict] = []
        url_rules: list[JsonDict] = []
        errors: list[str] = []
        for _, rule, error in self._visit(user, namespace):
            if error:
                errors.append(error)
                continue
            assert rule is not None
            if rule.get("nonResourceURLs"):
                url_rules.append(
                    {"verbs": list(rule["verbs"]), "nonResourceURLs": list(rule["nonResourceURLs"])}
                )
                continue
            out: JsonDict = {
                "verbs": list(rule.get("verbs") or []),
                "apiGroups": list(rule.get("apiGroups") or []),
                "resources": list(rule.get("resources") or []),
            }
            if rule.get("resourceNames"):
                out["resourceNames"] = list(rule["resourceNames"])
            resource_rules.append(out)
        status: JsonDict = {
            "resourceRules": resource_rules,
            "nonResourceRules": url_rules,
            "incomplete": bool(errors),
        }
        if errors:
            status["evaluationError"] = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
        return status


def forbidden(attrs: Attributes, reason: str = "") -> StatusError:
    """kube-apiserver's 403 for a denied request, message and details."""
    user = attrs.user.name
    if not attrs.resource_request:
        message = f'User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    else:
        resource = attrs.resource
        if attrs.subresource:
            resource = f"{resource}/{attrs.subresource}"
        where = (
            f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
        )
        message = (
            f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group '
            f'"{attrs.api_group}" {where}'
        )
    if reason:
        message = f"{message}: {reason}"
    details: JsonDict = {}
    if not attrs.resource_request or not attrs.resource:
        return StatusError(403, "Forbidden", f"forbidden: {message}", details)
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    if attrs.name:
        details["name"] = attrs.name
        text = f'{qualified} "{attrs.name}" is forbidden: {message}'
    else:
        text = f"{qualified} is forbidden: {message}"
    if attrs.api_group:
        details["group"] = attrs.api_group
    details["kind"] = attrs.resource
    return StatusError(403, "Forbidden", text, details)


_BOOTSTRAP_LABELS: Final = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_AUTOUPDATE: Final = {"rbac.authorization.kubernetes.io/autoupdate": "true"}

# kube's bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go):
# the roles a client needs before anyone grants it anything
_BOOTSTRAP_ROLES: Final[dict[str, list[JsonDict]]] = {
    "cluster-admin": [
        {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
        {"verbs": ["*"], "nonResourceURLs": ["*"]},
    ],
    "system:discovery": [
        {
            "verbs": ["get"],
            "nonResourceURLs": [
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ],
        }
    ],
    "system:public-info-viewer": [
        {
            "verbs": ["get"],
            "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
        }
    ],
    "system:basic-user": [
        {
            "verbs": ["create"],
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        },
        {
            "verbs": ["create"],
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["selfsubjectreviews"],
        },
    ],
}
_BOOTSTRAP_BINDINGS: Final[dict[str, list[str]]] = {
    "cluster-admin": ["system:masters"],
    "system:discovery": ["system:authenticated"],
    "system:public-info-viewer": ["system:authenticated", "system:unauthenticated"],
    "system:basic-user": ["system:authenticated"],
}


def bootstrap_policy() -> Iterator[tuple[str, JsonDict]]:
    """``(plural, object)`` for each default ClusterRole and ClusterRoleBinding."""
    for name, rules in _BOOTSTRAP_ROLES.items():
        meta = {"name": name, "labels": dict(_BOOTSTRAP_LABELS), "annotations": dict(_AUTOUPDATE)}
        yield "clusterroles", {"metadata": meta, "rules": rules}
    for name, groups in _BOOTSTRAP_BINDINGS.items():
        meta = {"name": name, "labels": dict(_BOOTSTRAP_LABELS), "annotations": dict(_AUTOUPDATE)}
        yield (
            "clusterrolebindings",
            {
                "metadata": meta,
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
                "subjects": [
                    {"apiGroup": RBAC_GROUP, "kind": "Group", "name": group} for group in groups
                ],
            },
        )
