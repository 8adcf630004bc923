"""MutatingAdmissionPolicy: CEL objects, patchers, failure policy and reinvocation
(apiserver/registry/mutatingpolicy)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.api.errors import StatusError
from apiserver.api.resources import ResourceRegistry
from apiserver.machinery import typeinfo
from apiserver.machinery.admission import Attributes
from apiserver.registry import mutatingpolicy as mp
from apiserver.registry.mutatingpolicy.objects import rewrite


class _Storage:
    def __init__(self, policies: list[Any], bindings: list[Any], **objects: Any) -> None:
        self.lists = {mp.POLICIES: policies, mp.BINDINGS: bindings}
        self.objects = objects

    def list(self, key: str, namespace: str | None = None) -> list[Any]:
        return self.lists.get(key, [])

    def get(self, key: tuple[str, str, str]) -> Any:
        return self.objects.get("/".join(key))


DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "d", "namespace": "ns", "labels": {"app": "d"}, "finalizers": []},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "d"}},
        "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [{"name": "main", "image": "pause"}]},
        },
    },
}


def _attrs(operation: str = "CREATE", **kw: Any) -> Attributes:
    base: dict[str, Any] = {
        "operation": operation,
        "group": "apps",
        "version": "v1",
        "resource": "deployments",
        "kind": "Deployment",
        "subresource": "",
        "namespace": "ns",
        "name": "d",
        "obj": copy.deepcopy(DEPLOYMENT),
        "old": None,
    }
    return Attributes(**{**base, **kw})


def _policy(name: str, *mutations: dict[str, Any], **spec: Any) -> dict[str, Any]:
    rule = {
        "apiGroups": ["apps"],
        "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["deployments"],
    }
    return {
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {"resourceRules": [rule]},
            "mutations": list(mutations),
            "reinvocationPolicy": "Never",
            **spec,
        },
    }


def _binding(policy: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": f"{policy}-b"}, "spec": {"policyName": policy, **spec}}


def _apply(expression: str) -> dict[str, Any]:
    return {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}


def _json_patch(expression: str) -> dict[str, Any]:
    return {"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}


def _admit(*policies: dict[str, Any], attrs: Attributes | None = None, **objects: Any) -> Any:
    bindings = [_binding(p["metadata"]["name"]) for p in policies]
    return _plugin(list(policies), bindings, **objects).admit(
        attrs or _attrs(), _decode, typeinfo.builtin("apps", "v1", "Deployment")
    )


def _plugin(policies: list[Any], bindings: list[Any], **objects: Any) -> mp.MutatingPolicyAdmission:
    return mp.MutatingPolicyAdmission(_Storage(policies, bindings, **objects), ResourceRegistry())


def _decode(obj: dict[str, Any]) -> dict[str, Any]:
    """What decoding defaults (one field, to see that it runs after each patch)."""
    out = copy.deepcopy(obj)
    out["spec"].setdefault("strategy", {"type": "RollingUpdate"})
    return out


def _refusal(*policies: dict[str, Any]) -> StatusError:
    with pytest.raises(StatusError) as raised:
        _admit(*policies)
    return raised.value


def test_the_rewrite_leaves_strings_comments_and_other_types_alone() -> None:
    expression = (
        "Object{metadata: Object.metadata{labels: {'a': \"Object{x: 1}\"}, ?annotations: o,"
        " `odd-name`: r'\\'}} // Object{\n + Other{a: 1}"
    )
    assert rewrite(expression) == (
        '_k8s_object("Object", {"metadata": _k8s_object("Object.metadata", {"labels": '
        '{\'a\': "Object{x: 1}"}, ?"annotations": o, "odd-name": r\'\\\'})}) // Object{\n'
        " + Other{a: 1}"
    )


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        (
            "Object{spec: Object.spec{selector: Object.spec.wrong{}}}",
            'type mismatch: unexpected type name "Object.spec.wrong", expected '
            '"Object.spec.selector", which matches field name path from root Object type',
        ),
        (
            'Object{spec: Object.spec{selector: Object.spec.selector{matchLabels: {"a": "b"}}}}',
            "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, "
            "maps or structs: .spec.selector",
        ),
        (
            "Object{spec: Object.spec{bogus: 1}}",
            "error applying patch: failed to convert patch object to typed object: "
            ".spec.bogus: field not declared in schema",
        ),
        (
            '{"a": 1}',
            "must evaluate to Object",
        ),
    ],
)
def test_apply_configurations_kube_refuses(expression: str, error: str) -> None:
    refused = _refusal(_policy("p", _apply(expression)))
    message = f"policy 'p' with binding 'p-b' denied request: {error}"
    assert (refused.code, refused.reason, refused.message) == (403, "Invalid", message)
    assert refused.details == {
        "name": "d",
        "group": "apps",
        "kind": "deployments",
        "causes": [{"message": message}],
    }


def test_containers_merge_by_name_and_each_patch_is_decoded() -> None:
    out = _admit(
        _policy(
            "p",
            _apply(
                "Object{spec: Object.spec{template: Object.spec.template{spec: "
                "Object.spec.template.spec{containers: [Object.spec.template.spec.containers{"
                'name: "main", imagePullPolicy: "Always"}, Object.spec.template.spec.containers{'
                'name: "side", image: "x"}]}}}}'
            ),
        )
    )
    assert out["spec"]["template"]["spec"]["containers"] == [
        {"name": "main", "image": "pause", "imagePullPolicy": "Always"},
        {"name": "side", "image": "x"},
    ]
    assert out["spec"]["strategy"] == {"type": "RollingUpdate"}


def test_json_patches() -> None:
    patches = (
        '[JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey("a/b~c"), '
        'value: "x"}, JSONPatch{op: "replace", path: "/spec/replicas", value: 3}]'
    )
    out = _admit(_policy("p", _json_patch(patches)))
    assert out["metadata"]["labels"] == {"app": "d", "a/b~c": "x"}
    assert out["spec"]["replicas"] == 3
    # a failed test operation leaves the object as it was, and is no error
    tested = '[JSONPatch{op: "test", path: "/spec/replicas", value: 9}, ' + patches[1:]
    assert _admit(_policy("p", _json_patch(tested)))["spec"]["replicas"] == 1


def test_a_json_patch_that_does_not_apply_or_decode() -> None:
    missing = _refusal(
        _policy("p", _json_patch('[JSONPatch{op: "replace", path: "/spec/nothing", value: 1}]'))
    )
    assert missing.message.endswith(
        "denied request: JSON Patch: replace operation does not apply: doc is missing key: "
        "/spec/nothing"
    )
    # a built-in object must decode strictly: a 500, whatever the failurePolicy
    unknown = _refusal(
        _policy(
            "p",
            _json_patch('[JSONPatch{op: "add", path: "/spec/nothing", value: 1}]'),
            failurePolicy="Ignore",
        )
    )
    assert (unknown.code, unknown.reason) == (500, "InternalError")
    assert unknown.message == (
        'Internal error occurred: strict decoding error: unknown field "spec.nothing"'
    )


def test_failure_policy_ignore_skips_the_failed_mutation_only() -> None:
    out = _admit(
        _policy(
            "p",
            _apply("Object{spec: Object.spec{replicas: object.spec.missing}}"),
            _apply("Object{spec: Object.spec{replicas: 7}}"),
            failurePolicy="Ignore",
        )
    )
    assert out["spec"]["replicas"] == 7


def test_variables_and_their_errors() -> None:
    out = _admit(
        _policy(
            "p",
            _apply("Object{spec: Object.spec{replicas: variables.twice}}"),
            variables=[{"name": "twice", "expression": "object.spec.replicas * 2"}],
        )
    )
    assert out["spec"]["replicas"] == 2
    refused = _refusal(
        _policy(
            "p",
            _apply("Object{spec: Object.spec{replicas: variables.b}}"),
            variables=[
                {"name": "a", "expression": "object.spec.missing"},
                {"name": "b", "expression": "variables.a + 1"},
            ],
        )
    )
    assert refused.message.endswith(
        "denied request: expression 'Object{spec: Object.spec{replicas: variables.b}}' "
        'resulted in error: composited variable "b" fails to evaluate: composited variable '
        '"a" fails to evaluate: no such key: missing'
    )


def test_match_conditions_and_their_errors() -> None:
    mutation = _apply("Object{spec: Object.spec{replicas: 5}}")
    conditions = [
        {"name": "big", "expression": "object.spec.replicas > 3"},
        {"name": "broken", "expression": "object.spec.missing == 1"},
    ]
    skipped = _admit(_policy("p", mutation, matchConditions=conditions))
    assert skipped["spec"]["replicas"] == 1  # a false condition wins over an error
    errors = [conditions[1], {"name": "also", "expression": "object.nope"}]
    refused = _refusal(_policy("p", mutation, matchConditions=errors))
    assert refused.reason == "Invalid"
    assert refused.message == (
        "policy 'p' with binding 'p-b' denied request: [expression 'object.spec.missing == 1' "
        "resulted in error: no such key: missing, expression 'object.nope' resulted in error: "
        "no such key: nope]"
    )
    ignored = _admit(_policy("p", mutation, matchConditions=errors, failurePolicy="Ignore"))
    assert ignored["spec"]["replicas"] == 1


def test_a_binding_that_cannot_be_configured_is_forbidden() -> None:
    policy = _policy(
        "p",
        _apply("Object{spec: Object.spec{replicas: 5}}"),
        paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
    )
    binding = _binding("p", paramRef={"name": "absent", "parameterNotFoundAction": "Deny"})
    with pytest.raises(StatusError) as raised:
        _plugin([policy], [binding]).admit(_attrs(), _decode, None)
    assert (raised.value.code, raised.value.reason) == (403, "Forbidden")
    assert raised.value.message == (
        "policy 'p' with binding 'p-b' denied request: failed to configure binding: no params "
        "found for policy binding with `Deny` parameterNotFoundAction"
    )


NOT_IDEMPOTENT = '[JSONPatch{op: "add", path: "/metadata/finalizers/-", value: "x"}]'


@pytest.mark.parametrize(("reinvocation", "finalizers"), [("Never", 1), ("IfNeeded", 2)])
def test_if_needed_policies_run_once_more(reinvocation: str, finalizers: int) -> None:
    """An IfNeeded policy invoked in the first pass runs again once any mutation applied
    (kube's dirty versioned object), and only once (the chain reinvokes once)."""
    policy = _policy("p", _json_patch(NOT_IDEMPOTENT), reinvocationPolicy=reinvocation)
    assert _admit(policy)["metadata"]["finalizers"] == ["x"] * finalizers


def test_a_later_change_reinvokes_an_earlier_if_needed_policy() -> None:
    copier = _policy(
        "a",
        _apply(
            "Object{metadata: Object.metadata{labels: {'copy': "
            "'source' in object.metadata.labels ? object.metadata.labels['source'] : 'none'}}}"
        ),
        reinvocationPolicy="IfNeeded",
    )
    source = _policy("b", _apply("Object{metadata: Object.metadata{labels: {'source': 's'}}}"))
    assert _admit(copier, source)["metadata"]["labels"] == {
        "app": "d",
        "copy": "s",
        "source": "s",
    }


def test_what_the_plugin_never_mutates() -> None:
    policy = _policy("p", _apply("Object{spec: Object.spec{replicas: 5}}"))
    rule = policy["spec"]["matchConstraints"]["resourceRules"][0]
    rule["operations"] = ["*"]
    rule["resources"] = ["*"]
    plugin = _plugin([policy], [_binding("p")])
    assert plugin.wants(_attrs())
    assert not plugin.wants(_attrs("DELETE", obj=None, old=DEPLOYMENT))
    own = _attrs(
        group="admissionregistration.k8s.io",
        resource="mutatingadmissionpolicies",
        kind="MutatingAdmissionPolicy",
    )
    assert not plugin.wants(own)
    # a binding without its policy, a policy without a binding: nothing
    assert not _plugin([], [_binding("p")]).wants(_attrs())
    assert not _plugin([policy], []).wants(_attrs())


def test_timestamps_and_bytes_become_json() -> None:
    out = _admit(
        _policy(
            "p",
            _apply(
                "Object{metadata: Object.metadata{annotations: {"
                "'at': timestamp('2024-01-02T03:04:05Z'), 'raw': b'xy'}}}"
            ),
        )
    )
    assert out["metadata"]["annotations"] == {"at": "2024-01-02T03:04:05Z", "raw": "eHk="}
