"""The RBAC rule matching of the local API server, case by case (kube's rbac.go)."""

from __future__ import annotations

import pytest

from apiserver.machinery.authenticator import UserInfo
from apiserver.machinery.authorizer import Attributes, forbidden, request_name, rule_allows

BOT = UserInfo("system:serviceaccount:ns:bot")


def _res(verb: str, resource: str, sub: str = "", name: str = "", group: str = "") -> Attributes:
    return Attributes(
        BOT,
        verb,
        True,
        namespace="ns",
        api_group=group,
        resource=resource,
        subresource=sub,
        name=name,
    )


@pytest.mark.parametrize(
    ("rule", "attrs", "allowed"),
    [
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, _res("get", "pods"), True),
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, _res("list", "pods"), False),
        ({"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]}, _res("list", "pods"), True),
        (
            {"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]},
            _res("get", "pods"),
            False,
        ),
        ({"verbs": ["get"], "apiGroups": ["*"], "resources": ["pods"]}, _res("get", "pods"), True),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
            _res("get", "pods", "log"),
            False,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]},
            _res("get", "pods", "log"),
            True,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["*/log"]},
            _res("get", "pods", "log"),
            True,
        ),
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["*/log"]}, _res("get", "pods"), False),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["*"]},
            _res("get", "pods", "log"),
            True,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
            _res("get", "pods", name="a"),
            True,
        ),
        (
            {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
            _res("list", "pods"),
            False,
        ),
        (
            {"verbs": ["get"], "nonResourceURLs": ["/metrics"]},
            Attributes(BOT, "get", False, path="/metrics"),
            True,
        ),
        (
            {"verbs": ["get"], "nonResourceURLs": ["/apis/*"]},
            Attributes(BOT, "get", False, path="/apis/apps/v1"),
            True,
        ),
        (
            {"verbs": ["get"], "nonResourceURLs": ["/metrics"]},
            Attributes(BOT, "get", False, path="/metrics/x"),
            False,
        ),
        (
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
            Attributes(BOT, "get", False, path="/api/v1/pods"),
            False,
        ),
    ],
)
def test_rule_allows(rule: dict[str, list[str]], attrs: Attributes, allowed: bool) -> None:
    assert rule_allows(attrs, rule) is allowed


def test_the_name_a_list_is_about_comes_from_an_exact_name_selector() -> None:
    assert request_name("metadata.name=web") == "web"
    assert request_name("status.phase=Running,metadata.name==web") == "web"
    assert request_name("metadata.name!=web") == ""
    assert request_name("") == ""


def test_forbidden_messages_are_kubes() -> None:
    err = forbidden(_res("update", "deployments", "status", "web", "apps"), "RBAC: x")
    assert err.code == 403 and err.reason == "Forbidden"
    assert err.message == (
        'deployments.apps "web" is forbidden: User "system:serviceaccount:ns:bot" cannot '
        'update resource "deployments/status" in API group "apps" in the namespace "ns": RBAC: x'
    )
    assert err.details == {"name": "web", "group": "apps", "kind": "deployments"}
    err = forbidden(Attributes(BOT, "get", False, path="/metrics"))
    assert (
        err.message == 'forbidden: User "system:serviceaccount:ns:bot" cannot get path "/metrics"'
    )
