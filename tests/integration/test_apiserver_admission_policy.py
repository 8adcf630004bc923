"""Conformance: ValidatingAdmissionPolicies are enforced as kube-apiserver 1.36 enforces them.

Each test binds its policy to its own namespace only (the binding's namespaceSelector on
``kubernetes.io/metadata.name``), so tests never see each other's policies on a shared
cluster, and deletes its policy and binding at the end. On a real server a new policy
takes a moment to become active (its informer must see it): tests poll with dry-run
requests until the policy answers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.integration.policyparams import param_kind, params_pending
from tests.integration.rawhttp import Response, http, ok

API = "/apis/admissionregistration.k8s.io/v1"


def _unique(prefix: str) -> str:
    return f"{prefix}-{os.urandom(4).hex()}"


@contextmanager
def _policy(
    api_client: Any,
    namespace: str,
    spec: dict[str, Any],
    *,
    actions: tuple[str, ...] = ("Deny",),
    binding_extra: dict[str, Any] | None = None,
    policy_name: str | None = None,
    create_policy: bool = True,
) -> Iterator[tuple[str, str]]:
    """A policy and a binding of it to ``namespace``; both deleted on exit."""
    name = policy_name or _unique("vap")
    binding = _unique("vapb")
    if create_policy:
        ok(
            http(
                api_client,
                "POST",
                f"{API}/validatingadmissionpolicies",
                body={"metadata": {"name": name}, "spec": spec},
            ),
            201,
        )
    try:
        ok(
            http(
                api_client,
                "POST",
                f"{API}/validatingadmissionpolicybindings",
                body={
                    "metadata": {"name": binding},
                    "spec": {
                        "policyName": name,
                        "validationActions": list(actions),
                        "matchResources": {
                            "namespaceSelector": {
                                "matchLabels": {"kubernetes.io/metadata.name": namespace}
                            }
                        },
                        **(binding_extra or {}),
                    },
                },
            ),
            201,
        )
        try:
            yield name, binding
        finally:
            http(api_client, "DELETE", f"{API}/validatingadmissionpolicybindings/{binding}")
    finally:
        if create_policy:
            http(api_client, "DELETE", f"{API}/validatingadmissionpolicies/{name}")


def _until(send: Callable[[], Response], accept: Callable[[Response], bool]) -> Response:
    """Send (a dry run) until the answer shows the policy is active (30 s at most)."""
    deadline = time.monotonic() + 30
    while True:
        answer = send()
        if accept(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def _rules(group: str, version: str, resource: str) -> dict[str, Any]:
    return {
        "resourceRules": [
            {
                "apiGroups": [group],
                "apiVersions": [version],
                "operations": ["CREATE", "UPDATE"],
                "resources": [resource],
            }
        ]
    }


CONFIGMAP_POLICY = {
    "failurePolicy": "Fail",
    "matchConstraints": _rules("", "v1", "configmaps"),
    "matchConditions": [
        {"name": "not-exempt", "expression": "!has(object.metadata.labels) || "
         "!('exempt' in object.metadata.labels)"},
    ],
    "variables": [
        {"name": "keys", "expression": "has(object.data) ? object.data.size() : 0"},
        {"name": "limit", "expression": "2"},
    ],
    "validations": [
        {
            "expression": "variables.keys <= variables.limit",
            "messageExpression": "'at most ' + string(variables.limit) + ' keys, got ' + "
            "string(variables.keys)",
        },
        {
            "expression": "object.metadata.name.startsWith('ok-')",
            "message": "names start with ok-",
            "reason": "Forbidden",
        },
    ],
}  # fmt: skip


def test_a_cel_policy_with_variables_denies_a_configmap(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    too_many = {"metadata": {"name": "ok-big"}, "data": {"a": "1", "b": "2", "c": "3"}}
    with _policy(api_client, namespace, CONFIGMAP_POLICY) as (policy, binding):
        denied = _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=too_many),
            lambda a: a.status != 201,
        )
        assert denied.status == 422, denied.body
        inner = (
            f"ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: "
            "at most 2 keys, got 3"
        )
        assert denied.body["reason"] == "Invalid"
        assert denied.body["message"] == f'configmaps "ok-big" is forbidden: {inner}'
        assert denied.body["details"]["name"] == "ok-big"
        assert denied.body["details"]["kind"] == "configmaps"
        assert {"message": inner} in denied.body["details"]["causes"]
        # the second validation, with its reason (403 Forbidden)
        badly_named = http(api_client, "POST", base, body={"metadata": {"name": "cm"}})
        assert badly_named.status == 403, badly_named.body
        assert badly_named.body["reason"] == "Forbidden"
        assert badly_named.body["message"].endswith("denied request: names start with ok-")
        # what passes is stored
        ok(http(api_client, "POST", base, body={"metadata": {"name": "ok-small"}}), 201)
        # a false matchCondition skips the policy
        exempt = {"metadata": {"name": "cm2", "labels": {"exempt": "yes"}}}
        ok(http(api_client, "POST", base, body=exempt), 201)
        # updates are checked too
        cm = ok(http(api_client, "GET", f"{base}/ok-small"), 200)
        cm["data"] = {"a": "1", "b": "2", "c": "3"}
        assert http(api_client, "PUT", f"{base}/ok-small", body=cm).status == 422
    # other namespaces never matched; this one is free again once the binding is gone
    freed = _until(
        lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=too_many),
        lambda a: a.status == 201,
    )
    assert freed.status == 201, freed.body


DEPLOYMENT_POLICY = {
    "matchConstraints": _rules("apps", "v1", "deployments"),
    "validations": [
        {
            "expression": "object.spec.replicas <= 3",
            "messageExpression": "'replicas must be no greater than 3, got ' + "
            "string(object.spec.replicas)",
        },
        {
            "expression": "object.spec.template.spec.containers.all(c, "
            "c.image.startsWith('registry.k8s.io/'))",
        },
    ],
}


def _deployment(name: str, replicas: int, image: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
        },
    }


def test_a_policy_against_deployments(api_client: Any, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    image = "registry.k8s.io/pause:3.9"
    with _policy(api_client, namespace, DEPLOYMENT_POLICY) as (policy, binding):
        denied = _until(
            lambda: http(
                api_client, "POST", base, query={"dryRun": "All"}, body=_deployment("d", 5, image)
            ),
            lambda a: a.status != 201,
        )
        assert denied.status == 422, denied.body
        assert denied.body["message"] == (
            f"deployments.apps \"d\" is forbidden: ValidatingAdmissionPolicy '{policy}' with "
            f"binding '{binding}' denied request: replicas must be no greater than 3, got 5"
        )
        assert denied.body["details"]["group"] == "apps"
        # without message or messageExpression: the expression itself
        other = http(api_client, "POST", base, body=_deployment("d", 1, "nginx"))
        assert other.status == 422, other.body
        assert other.body["message"].endswith(
            "denied request: failed expression: object.spec.template.spec.containers.all(c, "
            "c.image.startsWith('registry.k8s.io/'))"
        )
        ok(http(api_client, "POST", base, body=_deployment("d", 2, image)), 201)
        # a patch is an update, checked on its result
        scaled = http(
            api_client,
            "PATCH",
            f"{base}/d",
            body={"spec": {"replicas": 4}},
            content_type="application/merge-patch+json",
        )
        assert scaled.status == 422, scaled.body
        assert ok(http(api_client, "GET", f"{base}/d"), 200)["spec"]["replicas"] == 2


def test_a_warn_binding_admits_with_a_warning(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    spec = {
        "matchConstraints": _rules("", "v1", "configmaps"),
        "validations": [{"expression": "has(object.data)", "message": "data is required"}],
    }
    with _policy(api_client, namespace, spec, actions=("Warn",)) as (policy, binding):
        expected = (
            f"Validation failed for ValidatingAdmissionPolicy '{policy}' with binding "
            f"'{binding}': data is required"
        )
        warned = _until(
            lambda: http(
                api_client, "POST", base, query={"dryRun": "All"}, body={"metadata": {"name": "w"}}
            ),
            lambda a: "Warning" in a.headers,
        )
        assert warned.status == 201, warned.body
        assert expected in warned.headers.get("Warning", "")
        created = http(api_client, "POST", base, body={"metadata": {"name": "w"}})
        assert created.status == 201
        assert expected in created.headers.get("Warning", "")
        quiet = http(api_client, "POST", base, body={"metadata": {"name": "q"}, "data": {"k": ""}})
        assert quiet.status == 201
        assert "Warning" not in quiet.headers


def test_a_binding_whose_policy_is_missing_is_ignored(api_client: Any, namespace: str) -> None:
    """kube: "If the referenced resource does not exist, this binding is considered
    invalid and will be ignored"."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    with _policy(
        api_client,
        namespace,
        {},
        policy_name=_unique("missing"),
        create_policy=False,
    ):
        time.sleep(1.0)  # long enough for a real server to have seen the binding
        ok(http(api_client, "POST", base, body={"metadata": {"name": "free"}}), 201)


def test_params_and_failure_policy(api_client: Any, namespace: str) -> None:
    """A policy with a paramKind reads its binding's params; an expression that errors
    denies under failurePolicy Fail. The params are a custom resource (policyparams: a
    real server's built-in param informer does not outlive the first policy using it)."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    with param_kind(api_client) as (prefix, api_version):
        ok(
            http(
                api_client,
                "POST",
                f"{prefix}/namespaces/{namespace}/teamparams",
                body={
                    "apiVersion": api_version,
                    "kind": "TeamParams",
                    "metadata": {"name": "limits"},
                    "data": {"maxKeys": "1"},
                },
            ),
            201,
        )
        spec = {
            "paramKind": {"apiVersion": api_version, "kind": "TeamParams"},
            "matchConstraints": {
                **_rules("", "v1", "configmaps"),
                "objectSelector": {"matchLabels": {"checked": "yes"}},
            },
            "validations": [
                {
                    "expression": "object.data.size() <= int(params.data.maxKeys)",
                    "messageExpression": "'too many keys for ' + params.metadata.name",
                }
            ],
        }
        param_ref = {"paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}
        with _policy(api_client, namespace, spec, binding_extra=param_ref):
            two = {
                "metadata": {"name": "two", "labels": {"checked": "yes"}},
                "data": {"a": "", "b": ""},
            }
            denied = _until(
                lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=two),
                lambda a: a.status != 201 and not params_pending(a),
            )
            assert denied.status == 422, denied.body
            assert denied.body["message"].endswith("denied request: too many keys for limits")
            # no data: object.data is missing, the expression errors, failurePolicy Fail denies
            empty = {"metadata": {"name": "empty", "labels": {"checked": "yes"}}}
            errored = http(api_client, "POST", base, body=empty)
            assert errored.status == 422, errored.body
            assert (
                "denied request: expression 'object.data.size() <= int(params.data.maxKeys)' "
                "resulted in error: no such key: data" in errored.body["message"]
            )
            # unlabelled objects are not selected
            ok(
                http(
                    api_client,
                    "POST",
                    base,
                    body={"metadata": {"name": "plain"}, "data": {"a": "", "b": ""}},
                ),
                201,
            )


def test_policies_and_bindings_are_defaulted(api_client: Any, namespace: str) -> None:
    """admissionregistration/v1's defaults, as a GET shows them."""
    spec = {
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["configmaps"],
                }
            ]
        },
        "validations": [{"expression": "true"}],
    }
    with _policy(api_client, namespace, spec) as (policy, binding):
        stored = ok(http(api_client, "GET", f"{API}/validatingadmissionpolicies/{policy}"), 200)
        assert stored["spec"]["failurePolicy"] == "Fail"
        constraints = stored["spec"]["matchConstraints"]
        assert constraints["matchPolicy"] == "Equivalent"
        assert constraints["namespaceSelector"] == {}
        assert constraints["objectSelector"] == {}
        assert constraints["resourceRules"][0]["scope"] == "*"
        bound = ok(
            http(api_client, "GET", f"{API}/validatingadmissionpolicybindings/{binding}"), 200
        )
        assert bound["spec"]["matchResources"]["matchPolicy"] == "Equivalent"
        assert bound["spec"]["matchResources"]["objectSelector"] == {}


def test_a_policy_whose_cel_does_not_parse_is_invalid(api_client: Any) -> None:
    name = _unique("vap")
    answer = http(
        api_client,
        "POST",
        f"{API}/validatingadmissionpolicies",
        body={
            "metadata": {"name": name},
            "spec": {
                "matchConstraints": _rules("", "v1", "configmaps"),
                "validations": [{"expression": "object.data.size() <"}],
            },
        },
    )
    if answer.status == 201:  # clean up before failing
        http(api_client, "DELETE", f"{API}/validatingadmissionpolicies/{name}")
    assert answer.status == 422, answer.body
    assert answer.body["message"].startswith(
        f'ValidatingAdmissionPolicy.admissionregistration.k8s.io "{name}" is invalid: '
        'spec.validations[0].expression: Invalid value: "object.data.size() <": '
        "compilation failed: ERROR: <input>:1:21: Syntax error: mismatched input '<EOF>'"
    )
    assert [c["field"] for c in answer.body["details"]["causes"]] == [
        "spec.validations[0].expression"
    ]
