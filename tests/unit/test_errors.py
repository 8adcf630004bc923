"""The error tree: a create refused because its namespace is terminating is told apart.

kube-apiserver's NamespaceLifecycle admission plugin answers such a create with 403
Forbidden and a ``details.causes`` entry of reason ``NamespaceTerminating``
(``staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go``).
"""

from __future__ import annotations

from typing import Any

from manager.errors import Forbidden, NamespaceTerminating, RbacRefusal, api_error_from_status


def _forbidden(causes: list[dict[str, Any]] | None) -> dict[str, Any]:
    details: dict[str, Any] = {"name": "web", "kind": "services"}
    if causes is not None:
        details["causes"] = causes
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'services "web" is forbidden: unable to create new content in namespace '
        "shop because it is being terminated",
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


def test_a_create_refused_in_a_terminating_namespace_is_namespace_terminating() -> None:
    cause = {
        "reason": "NamespaceTerminating",
        "message": "namespace shop is being terminated",
        "field": "metadata.namespace",
    }
    error = api_error_from_status(403, _forbidden([cause]))
    assert type(error) is NamespaceTerminating
    assert isinstance(error, Forbidden)  # callers catching Forbidden still do
    assert error.status == 403


def test_other_forbidden_answers_stay_forbidden() -> None:
    rbac = api_error_from_status(403, _forbidden(None))
    assert type(rbac) is Forbidden
    other = api_error_from_status(403, _forbidden([{"reason": "FieldValueForbidden"}]))
    assert type(other) is Forbidden
    weird = api_error_from_status(403, {**_forbidden(None), "details": {"causes": "nope"}})
    assert type(weird) is Forbidden


def _rbac(message: str) -> Forbidden:
    error = api_error_from_status(403, {**_forbidden(None), "message": message})
    assert isinstance(error, Forbidden)
    return error


def test_an_rbac_refusal_says_what_was_refused_and_the_rule_that_would_allow_it() -> None:
    """kube-apiserver's authorization message (responsewriters.forbiddenMessage)."""
    namespaced = _rbac(
        'configmaps "old" is forbidden: User "system:serviceaccount:team:ovs" cannot delete '
        'resource "configmaps" in API group "" in the namespace "team"'
    )
    assert namespaced.refusal == RbacRefusal(
        user="system:serviceaccount:team:ovs",
        verb="delete",
        resource="configmaps",
        group="",
        namespace="team",
    )
    assert namespaced.refusal.rule == {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "verbs": ["delete"],
    }
    assert namespaced.refusal.describe() == 'delete configmaps in the namespace "team"'
    cluster = _rbac(
        'namespaces is forbidden: User "u" cannot list resource "namespaces" in API group "" '
        'at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "x" not found'
    )
    assert cluster.refusal is not None
    assert cluster.refusal.describe() == "list namespaces at the cluster scope"
    sub = _rbac(
        'deployments.apps "web" is forbidden: User "u" cannot update resource '
        '"deployments/status" in API group "apps" in the namespace "shop"'
    )
    assert sub.refusal is not None
    assert sub.refusal.rule["resources"] == ["deployments/status"]
    assert sub.refusal.describe() == 'update deployments/status.apps in the namespace "shop"'
    assert _rbac("admission webhook denied the request").refusal is None
