"""ValidatingAdmissionPolicy matching and evaluation (apiserver/registry/admissionpolicy.py)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.api.resources import ResourceRegistry
from apiserver.machinery.admission import Attributes, request_context
from apiserver.registry import admissionpolicy as ap


class _Storage:
    def __init__(self, policies: list[Any], bindings: list[Any], **objects: Any) -> None:
        self.lists = {ap.POLICIES: policies, ap.BINDINGS: bindings}
        self.objects = objects

    def list(self, key: str, namespace: str | None = None) -> list[Any]:
        return self.lists.get(key, [])

    def get(self, key: tuple[str, str, str]) -> Any:
        return self.objects.get("/".join(key))


def _attrs(**kw: Any) -> Attributes:
    base: dict[str, Any] = {
        "operation": "UPDATE",
        "group": "apps",
        "version": "v1",
        "resource": "deployments",
        "kind": "Deployment",
        "subresource": "",
        "namespace": "ns",
        "name": "d",
        "obj": {"metadata": {"name": "d", "labels": {"tier": "web"}}, "spec": {"replicas": 5}},
        "old": {"metadata": {"name": "d"}, "spec": {"replicas": 1}},
    }
    return Attributes(**{**base, **kw})


def _run(rules: list[Any], attrs: Attributes, **constraints: Any) -> bool:
    """Whether a policy with these constraints (denying everything) denies ``attrs``."""
    policy = {
        "metadata": {"name": "p"},
        "spec": {
            "matchConstraints": {"resourceRules": rules, **constraints},
            "validations": [{"expression": "false", "message": "no"}],
        },
    }
    binding = {
        "metadata": {"name": "b"},
        "spec": {"policyName": "p", "validationActions": ["Deny"]},
    }
    plugin = ap.PolicyAdmission(_Storage([policy], [binding]), ResourceRegistry())
    try:
        plugin.validate(attrs)
    except ap.PolicyDenied:
        return True
    return False


def _rule(resources: list[str], **kw: Any) -> dict[str, Any]:
    return {
        "apiGroups": ["*"],
        "apiVersions": ["*"],
        "operations": ["*"],
        "resources": resources,
        **kw,
    }


@pytest.mark.parametrize(
    ("resources", "subresource", "matched"),
    [
        (["deployments"], "", True),
        (["deployments"], "status", False),
        (["deployments/*"], "status", True),
        (["deployments/*"], "", True),  # "*" matches no subresource too (rules.go)
        (["*/status"], "status", True),
        (["*"], "scale", False),
        (["*/*"], "scale", True),
        (["pods"], "", False),
    ],
)
def test_resource_rules(resources: list[str], subresource: str, matched: bool) -> None:
    assert _run([_rule(resources)], _attrs(subresource=subresource)) is matched


def test_scope_names_operations_and_exclusions() -> None:
    assert not _run([_rule(["*"], scope="Cluster")], _attrs())
    assert _run([_rule(["*"], scope="Namespaced")], _attrs())
    assert not _run([_rule(["*"], operations=["CREATE"])], _attrs())
    assert not _run([{**_rule(["*"]), "resourceNames": ["other"]}], _attrs())
    assert not _run([_rule(["*"])], _attrs(), excludeResourceRules=[_rule(["deployments"])])


def test_equivalent_versions_match_unless_exact() -> None:
    v2_only = {**_rule(["horizontalpodautoscalers"]), "apiVersions": ["v2"]}
    hpa = _attrs(group="autoscaling", version="v1", resource="horizontalpodautoscalers")
    assert _run([v2_only], hpa)
    assert not _run([v2_only], hpa, matchPolicy="Exact")


def test_object_selector_sees_old_object_too() -> None:
    selector = {"matchLabels": {"tier": "web"}}
    assert _run([_rule(["*"])], _attrs(), objectSelector=selector)
    assert _run(
        [_rule(["*"])],
        _attrs(obj=None, operation="DELETE", old=_attrs().obj),
        objectSelector=selector,
    )
    assert not _run([_rule(["*"])], _attrs(obj={"metadata": {}}), objectSelector=selector)


def test_admission_configuration_is_exempt() -> None:
    attrs = _attrs(
        group="admissionregistration.k8s.io",
        resource="validatingadmissionpolicies",
        namespace="",
    )
    assert not _run([_rule(["*"])], attrs)


def test_a_compile_error_follows_the_failure_policy() -> None:
    def run(failure: str) -> str:
        policy = {
            "metadata": {"name": "p"},
            "spec": {
                "failurePolicy": failure,
                "matchConstraints": {"resourceRules": [_rule(["*"])]},
                "validations": [{"expression": "object.spec.replicas <"}],
            },
        }
        binding = {
            "metadata": {"name": "b"},
            "spec": {"policyName": "p", "validationActions": ["Deny"]},
        }
        plugin = ap.PolicyAdmission(_Storage([policy], [binding]), ResourceRegistry())
        try:
            plugin.validate(_attrs())
        except ap.PolicyDenied as exc:
            return exc.message
        return ""

    assert run("Ignore") == ""
    assert "denied request: compilation error: " in run("Fail")


def test_old_object_and_request_are_visible() -> None:
    policy = {
        "metadata": {"name": "p"},
        "spec": {
            "matchConstraints": {"resourceRules": [_rule(["*"])]},
            "variables": [
                {"name": "grow", "expression": "object.spec.replicas - oldObject.spec.replicas"}
            ],
            "validations": [
                {
                    "expression": "variables.grow <= 2",
                    "messageExpression": "request.userInfo.username + ' of ' + "
                    "request.userInfo.groups[0] + ' grew ' + "
                    "request.resource.resource + ' by ' + string(variables.grow)",
                }
            ],
        },
    }
    binding = {
        "metadata": {"name": "b"},
        "spec": {"policyName": "p", "validationActions": ["Deny"]},
    }
    plugin = ap.PolicyAdmission(_Storage([policy], [binding]), ResourceRegistry())
    with request_context("alice", ("devs",)), pytest.raises(ap.PolicyDenied) as denied:
        plugin.validate(_attrs())
    assert denied.value.message.endswith("denied request: alice of devs grew deployments by 4")
