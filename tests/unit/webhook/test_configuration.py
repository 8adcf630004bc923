"""Webhook declarations are checked when they are made, as kube-apiserver checks a
webhook configuration (pkg/apis/admissionregistration/validation), every problem named
by its field; and rendered as the configuration's entries."""

from __future__ import annotations

from typing import Any

import pytest

from manager import (
    Admission,
    AdmissionRequest,
    MatchCondition,
    MutatingWebhook,
    Resource,
    Rule,
    ValidatingWebhook,
    builtin,
)
from manager.webhook import InvalidWebhook

WIDGETS = Resource("example.com", "v1", "widgets", "Widget", namespaced=True)
DEPLOYMENTS = builtin("apps/v1/Deployment")


def _allow(req: AdmissionRequest) -> Admission:
    return Admission.allow()


def _problems(**fields: Any) -> list[str]:
    declared: dict[str, Any] = {
        "name": "validate.widgets.example.com",
        "rules": [Rule(operations=["CREATE"], resources=[WIDGETS])],
        "handler": _allow,
        **fields,
    }
    with pytest.raises(InvalidWebhook) as error:
        ValidatingWebhook(**declared)
    assert str(error.value).startswith(f"ValidatingWebhook {declared['name']!r}: ")
    return error.value.problems


def test_a_valid_declaration_renders_as_kube_writes_it() -> None:
    hook = MutatingWebhook(
        name="default.widgets.example.com",
        rules=[
            Rule(
                operations=["CREATE", "UPDATE"],
                resources=[WIDGETS, "widgets/status"],
                scope="Namespaced",
            ),
            Rule(operations=["*"], resources=[DEPLOYMENTS, WIDGETS]),
        ],
        handler=lambda req: req.object or {},
        namespace_selector={"matchExpressions": [{"key": "team", "operator": "Exists"}]},
        match_conditions=[
            MatchCondition("not-system", "request.userInfo.username != 'system:admin'")
        ],
        reinvocation_policy="IfNeeded",
    )
    assert hook.served_path == "/mutate/default.widgets.example.com"
    entry = hook.entry({"service": {"name": "overseer-webhook", "namespace": "ops"}})
    assert entry["clientConfig"]["service"]["path"] == "/mutate/default.widgets.example.com"
    assert entry["rules"] == [
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["example.com"],
            "apiVersions": ["v1"],
            "resources": ["widgets", "widgets/status"],
            "scope": "Namespaced",
        },
        {
            "operations": ["*"],
            "apiGroups": ["apps"],
            "apiVersions": ["v1"],
            "resources": ["deployments"],
            "scope": "*",
        },
        {
            "operations": ["*"],
            "apiGroups": ["example.com"],
            "apiVersions": ["v1"],
            "resources": ["widgets"],
            "scope": "*",
        },
    ]
    assert entry["reinvocationPolicy"] == "IfNeeded"
    assert entry["admissionReviewVersions"] == ["v1"]
    assert entry["sideEffects"] == "None" and entry["timeoutSeconds"] == 10
    assert entry["matchConditions"] == [
        {"name": "not-system", "expression": "request.userInfo.username != 'system:admin'"}
    ]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"name": "widgets"},
            'name: Invalid value: "widgets": should be a domain with at least three segments '
            "separated by dots",
        ),
        (
            {"name": "Validate.Widgets.example.com"},
            'name: Invalid value: "Validate.Widgets.example.com": a lowercase RFC 1123 subdomain',
        ),
        ({"rules": []}, "rules: at least one Rule"),
        (
            {"rules": [Rule(operations=[], resources=[WIDGETS])]},
            "rules[0].operations: Required value",
        ),
        (
            {"rules": [Rule(operations=["CREATE", "PATCH"], resources=[WIDGETS])]},
            'rules[0].operations[1]: Unsupported value: "PATCH": supported values: "*", '
            '"CONNECT", "CREATE", "DELETE", "UPDATE"',
        ),
        (
            {"rules": [Rule(operations=["*", "CREATE"], resources=[WIDGETS])]},
            "rules[0].operations: if '*' is present, must not specify other operations",
        ),
        (
            {"rules": [Rule(operations=["CREATE"], resources=[])]},
            "rules[0].resources: Required value",
        ),
        (
            {"rules": [Rule(operations=["CREATE"], resources=["widgets"])]},
            "rules[0].api_groups: required for resources given by name ('widgets'): it has no "
            "Resource objects to take them from",
        ),
        (
            {"rules": [Rule(operations=["CREATE"], resources=[WIDGETS, DEPLOYMENTS, "*/status"])]},
            "rules[0].api_groups: required for resources given by name ('*/status'): its "
            "Resource objects are of several groups and versions",
        ),
        (
            {
                "rules": [
                    Rule(
                        operations=["CREATE"],
                        resources=["*/*", "widgets"],
                        api_groups=["*"],
                        api_versions=["*"],
                    )
                ]
            },
            "rules[0].resources: if '*/*' is present, must not specify other resources",
        ),
        (
            {
                "rules": [
                    Rule(
                        operations=["CREATE"],
                        resources=["*", "widgets"],
                        api_groups=["*"],
                        api_versions=["*"],
                    )
                ]
            },
            "rules[0].resources: if '*' is present, must not specify other resources without "
            "subresources",
        ),
        (
            {
                "rules": [
                    Rule(
                        operations=["CREATE"],
                        resources=["widgets/*", "widgets/status"],
                        api_groups=["example.com"],
                        api_versions=["v1"],
                    )
                ]
            },
            "rules[0].resources[1]: if 'widgets/*' is present, must not specify widgets/status",
        ),
        (
            {"rules": [Rule(operations=["CREATE"], resources=[WIDGETS], scope="Global")]},  # type: ignore[arg-type]
            'rules[0].scope: Unsupported value: "Global": supported values: "*", "Cluster", '
            '"Namespaced"',
        ),
        (
            {"timeout_seconds": 45},
            "timeout_seconds: Invalid value: 45: the timeout value must be between 1 and 30 "
            "seconds",
        ),
        (
            {"timeout_seconds": 0},
            "timeout_seconds: Invalid value: 0: the timeout value must be between 1 and 30 seconds",
        ),
        (
            {"side_effects": "Some"},
            'side_effects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"',
        ),
        (
            {"failure_policy": "Open"},
            'failure_policy: Unsupported value: "Open": supported values: "Fail", "Ignore"',
        ),
        (
            {"match_policy": "Loose"},
            'match_policy: Unsupported value: "Loose": supported values: "Equivalent", "Exact"',
        ),
        ({"namespace_selector": {"matchLabels": {"bad key!": "x"}}}, "namespace_selector: "),
        (
            {"object_selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}},
            'object_selector: "Near" is not a valid label selector operator',
        ),
        (
            {"match_conditions": [MatchCondition("a", "true"), MatchCondition("a", "false")]},
            'match_conditions[1].name: Duplicate value: "a"',
        ),
        (
            {"match_conditions": [MatchCondition("a", "  ")]},
            "match_conditions[0].expression: Required value",
        ),
        (
            {"match_conditions": [MatchCondition("not ok", "true")]},
            "match_conditions[0].name: name part must consist of",
        ),
        (
            {"match_conditions": [MatchCondition(f"c{i}", "true") for i in range(65)]},
            "match_conditions: Too many: 65: must have at most 64",
        ),
        ({"path": "validate"}, "path: must start with a '/'"),
        ({"path": "/validate//x"}, "path: segment[1] may not be empty"),
        ({"path": "/Validate"}, "path: segment[0]: a lowercase RFC 1123 subdomain"),
        ({"handler": None}, "handler: expected a function of the AdmissionRequest"),
    ],
)
def test_what_kube_refuses_is_named_by_its_field(fields: dict[str, Any], expected: str) -> None:
    problems = _problems(**fields)
    assert any(p.startswith(expected) for p in problems), problems


def test_every_problem_is_reported_at_once() -> None:
    problems = _problems(name="x", timeout_seconds=31, side_effects="Unknown")
    assert [p.split(":")[0] for p in problems] == ["name", "side_effects", "timeout_seconds"]


def test_reinvocation_policy_is_checked() -> None:
    with pytest.raises(InvalidWebhook, match='reinvocation_policy: Unsupported value: "Always"'):
        MutatingWebhook(
            name="m.widgets.example.com",
            rules=[Rule(operations=["CREATE"], resources=[WIDGETS])],
            handler=lambda req: {},
            reinvocation_policy="Always",  # type: ignore[arg-type]
        )


def test_explicit_groups_and_versions_make_one_rule() -> None:
    rule = Rule(operations=["UPDATE"], resources=[WIDGETS, "widgets/scale"], api_versions=["*"])
    assert rule.entries() == [
        {
            "operations": ["UPDATE"],
            "apiGroups": ["example.com"],
            "apiVersions": ["*"],
            "resources": ["widgets", "widgets/scale"],
            "scope": "*",
        }
    ]
    assert rule.problems("rules[0]") == []
