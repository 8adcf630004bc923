"""Conformance: MutatingAdmissionPolicies are applied as kube-apiserver 1.36 applies them.

Kubernetes 1.36 serves them GA at ``admissionregistration.k8s.io/v1`` (its conformance
specs "should mutate a Deployment" and "... with annotations"); a cluster that does not
serve them skips this module. Each test scopes its policies twice to its own namespace
(the policy's ``matchConstraints`` and the binding's ``matchResources`` select the
namespace's ``kubernetes.io/metadata.name``), most to objects with a label of their own
too, and deletes them at the end, so they never touch another test or a shared cluster.
On a real server a new policy takes a moment to become active (its informer must see it):
tests send dry runs until the mutation shows. Most writes are dry runs: nothing is stored
and no controller acts on them (a Deployment of 1337 replicas makes no pod).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.integration.policyparams import param_kind, params_pending
from tests.integration.rawhttp import MERGE, Response, http, ok

API = "/apis/admissionregistration.k8s.io/v1"
DRY = {"dryRun": "All"}


@pytest.fixture(autouse=True)
def _served(api_client: Any) -> None:
    listing = http(api_client, "GET", API)
    body = listing.body if isinstance(listing.body, dict) else {}
    served = {r.get("name") for r in body.get("resources") or []}
    if listing.status != 200 or "mutatingadmissionpolicies" not in served:
        pytest.skip(
            "the cluster does not serve admissionregistration.k8s.io/v1 "
            "MutatingAdmissionPolicies (GA in Kubernetes 1.36)"
        )


def _unique(prefix: str) -> str:
    return f"{prefix}-{os.urandom(4).hex()}"


def _in(namespace: str) -> dict[str, Any]:
    return {"matchLabels": {"kubernetes.io/metadata.name": namespace}}


def _rules(
    group: str, resource: str, operations: tuple[str, ...] = ("CREATE", "UPDATE")
) -> list[dict[str, Any]]:
    return [
        {
            "apiGroups": [group],
            "apiVersions": ["v1"],
            "operations": list(operations),
            "resources": [resource],
        }
    ]


def _apply(expression: str) -> dict[str, Any]:
    return {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}


def _json_patch(expression: str) -> dict[str, Any]:
    return {"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}


def _spec(
    namespace: str,
    resource: str,
    *mutations: dict[str, Any],
    group: str = "",
    objects: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A policy spec for ``resource`` in ``namespace`` (and objects labelled ``objects``)."""
    constraints: dict[str, Any] = {
        "resourceRules": _rules(group, resource),
        "namespaceSelector": _in(namespace),
    }
    if objects is not None:
        constraints["objectSelector"] = {"matchLabels": objects}
    return {
        "matchConstraints": constraints,
        "mutations": list(mutations),
        "reinvocationPolicy": "Never",
        **extra,
    }


@contextmanager
def _policy(
    api_client: Any,
    namespace: str,
    spec: dict[str, Any],
    *,
    name: str | None = None,
    binding_extra: dict[str, Any] | None = None,
    create_policy: bool = True,
) -> Iterator[tuple[str, str]]:
    """A MutatingAdmissionPolicy and a binding of it to ``namespace``; both deleted on exit."""
    name = name or _unique("map")
    binding = _unique("mapb")
    if create_policy:
        created = ok(
            http(
                api_client,
                "POST",
                f"{API}/mutatingadmissionpolicies",
                body={"metadata": {"name": name}, "spec": spec},
            ),
            201,
        )
        assert created["spec"]["failurePolicy"] in ("Fail", "Ignore")
    try:
        answer = http(
            api_client,
            "POST",
            f"{API}/mutatingadmissionpolicybindings",
            body={
                "metadata": {"name": binding},
                "spec": {
                    "policyName": name,
                    "matchResources": {"namespaceSelector": _in(namespace)},
                    **(binding_extra or {}),
                },
            },
        )
        ok(answer, 201)
        # the local server used to warn that it stored policies without applying them
        assert "not apply" not in answer.headers.get("Warning", "")
        try:
            yield name, binding
        finally:
            http(api_client, "DELETE", f"{API}/mutatingadmissionpolicybindings/{binding}")
    finally:
        if create_policy:
            http(api_client, "DELETE", f"{API}/mutatingadmissionpolicies/{name}")


def _until(send: Callable[[], Response], accept: Callable[[Response], bool]) -> Response:
    """Send (a dry run) until the answer shows the policy is active (30 s at most)."""
    deadline = time.monotonic() + 30
    while True:
        answer = send()
        if accept(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def _labels(answer: Response) -> dict[str, str]:
    return dict(((answer.body or {}).get("metadata") or {}).get("labels") or {})


def _configmap(name: str, labels: dict[str, str], **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": data}


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    container = {"name": "main", "image": "registry.k8s.io/pause:3.9"}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


APPLY_TO_DEPLOYMENTS = """Object{
  metadata: Object.metadata{
    labels: {"mutated": "yes"},
    annotations: {"mutated-by": "admission-policy"}
  },
  spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{
    containers: [
      Object.spec.template.spec.containers{name: "main", imagePullPolicy: "Always"},
      Object.spec.template.spec.containers{name: "sidecar", image: "registry.k8s.io/pause:3.9"}
    ]
  }}}
}"""


def test_an_apply_configuration_merges_into_a_deployment(api_client: Any, namespace: str) -> None:
    """Server-side apply's merge: maps key by key, a list of containers by name (the
    existing one keeps its image, a new one is appended and defaulted); then a second
    mutation (the conformance spec's ``replicas: 1337``) sees the first one's result."""
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    spec = _spec(
        namespace,
        "deployments",
        _apply(APPLY_TO_DEPLOYMENTS),
        _apply("Object{spec: Object.spec{replicas: 1337}}"),
        group="apps",
    )
    with _policy(api_client, namespace, spec):
        mutated = _until(
            lambda: http(api_client, "POST", base, query=DRY, body=_deployment("d")),
            lambda a: a.status != 201 or "mutated" in _labels(a),
        )
        assert mutated.status == 201, mutated.body
        assert _labels(mutated) == {"app": "d", "mutated": "yes"}
        assert mutated.body["metadata"]["annotations"] == {"mutated-by": "admission-policy"}
        assert mutated.body["spec"]["replicas"] == 1337
        containers = mutated.body["spec"]["template"]["spec"]["containers"]
        assert [c["name"] for c in containers] == ["main", "sidecar"]
        assert containers[0]["image"] == "registry.k8s.io/pause:3.9"
        assert containers[0]["imagePullPolicy"] == "Always"
        # the added container is defaulted as any container is
        assert containers[1]["imagePullPolicy"] == "IfNotPresent"
        assert containers[1]["terminationMessagePath"] == "/dev/termination-log"


REQUESTS = """Object{spec: Object.spec{template: Object.spec.template{
  spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{
    name: "main",
    resources: Object.spec.template.spec.containers.resources{
      requests: {"cpu": "0.5", "memory": "1024Mi"}
    }
  }]}
}}}"""


def test_quantities_a_policy_sets_are_decoded_as_kube_writes_them(
    api_client: Any, namespace: str
) -> None:
    """The mutated object is decoded again into the typed object, so a quantity a
    policy writes comes out canonical (``0.5`` is ``500m``, ``1024Mi`` is ``1Gi``), as
    any quantity a client sends does."""
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    spec = _spec(namespace, "deployments", _apply(REQUESTS), group="apps")
    with _policy(api_client, namespace, spec):
        mutated = _until(
            lambda: http(api_client, "POST", base, query=DRY, body=_deployment("q")),
            # a real server writes every container's resources ({} when none are given)
            lambda a: (
                a.status != 201
                or "requests"
                in a.body["spec"]["template"]["spec"]["containers"][0].get("resources", {})
            ),
        )
        assert mutated.status == 201, mutated.body
        (container,) = mutated.body["spec"]["template"]["spec"]["containers"]
        assert container["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}}


JSON_PATCHES = """[
  JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey("example.com/patched"),
            value: "yes"},
  JSONPatch{op: "replace", path: "/data/mode", value: "patched"},
  JSONPatch{op: "remove", path: "/data/secret"}
]"""

TESTED_PATCH = """[
  JSONPatch{op: "test", path: "/data/mode", value: "strict"},
  JSONPatch{op: "replace", path: "/data/flag", value: "tested"}
]"""


def test_json_patches_add_replace_remove_and_test(api_client: Any, namespace: str) -> None:
    """JSONPatch mutations, on creates and updates; a failed ``test`` operation leaves
    the object as it was (its mutation only), and is no error."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    selected = {"json-patched": "yes"}
    spec = _spec(
        namespace,
        "configmaps",
        _json_patch(TESTED_PATCH),
        _json_patch(JSON_PATCHES),
        objects=selected,
    )
    with _policy(api_client, namespace, spec):
        strict = _configmap("strict", selected, mode="strict", flag="raw", secret="s")
        mutated = _until(
            lambda: http(api_client, "POST", base, query=DRY, body=strict),
            lambda a: a.status != 201 or "example.com/patched" in _labels(a),
        )
        assert mutated.status == 201, mutated.body
        assert _labels(mutated) == {**selected, "example.com/patched": "yes"}
        assert mutated.body["data"] == {"mode": "patched", "flag": "tested"}
        # the test operation fails: that mutation is skipped, the next one applies
        lax = _configmap("lax", selected, mode="lax", flag="raw", secret="s")
        created = ok(http(api_client, "POST", base, body=lax), 201)
        assert created["data"] == {"mode": "patched", "flag": "raw"}
        # an update is mutated too
        created["data"] = {"mode": "strict", "flag": "again", "secret": "s2"}
        updated = ok(http(api_client, "PUT", f"{base}/lax", body=created), 200)
        assert updated["data"] == {"mode": "patched", "flag": "tested"}
        # objects the policy does not select are left alone
        plain = _configmap("plain", {}, mode="strict", secret="s")
        assert ok(http(api_client, "POST", base, query=DRY, body=plain), 201)["data"] == {
            "mode": "strict",
            "secret": "s",
        }


def test_params_from_a_custom_resource(api_client: Any, namespace: str) -> None:
    """A policy with a paramKind reads its binding's params (paramRef by name, in the
    request's namespace), and a change of the params reaches the next write."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    with param_kind(api_client) as (prefix, api_version):
        params = f"{prefix}/namespaces/{namespace}/teamparams"
        ok(
            http(
                api_client,
                "POST",
                params,
                body={
                    "apiVersion": api_version,
                    "kind": "TeamParams",
                    "metadata": {"name": "team-params"},
                    "data": {"team": "blue"},
                },
            ),
            201,
        )
        selected = {"wants-team": "yes"}
        spec = _spec(
            namespace,
            "configmaps",
            _apply('Object{metadata: Object.metadata{labels: {"team": params.data.team}}}'),
            objects=selected,
            paramKind={"apiVersion": api_version, "kind": "TeamParams"},
        )
        param_ref = {"paramRef": {"name": "team-params", "parameterNotFoundAction": "Deny"}}
        with _policy(api_client, namespace, spec, binding_extra=param_ref):
            mutated = _until(
                lambda: http(api_client, "POST", base, query=DRY, body=_configmap("c", selected)),
                # a real server finds the param kind once its discovery has the new
                # resource, and the params once its informer for them has synced:
                # until then, the policy (Fail) and the Deny action refuse
                lambda a: "team" in _labels(a) or (a.status != 201 and not params_pending(a)),
            )
            assert mutated.status == 201, mutated.body
            assert _labels(mutated) == {**selected, "team": "blue"}
            # the params change, the next write sees them
            ok(
                http(
                    api_client,
                    "PATCH",
                    f"{params}/team-params",
                    body={"data": {"team": "green"}},
                    content_type=MERGE,
                ),
                200,
            )
            green = _until(
                lambda: http(api_client, "POST", base, query=DRY, body=_configmap("c", selected)),
                lambda a: _labels(a).get("team") != "blue",
            )
            assert _labels(green)["team"] == "green", green.body


def test_match_conditions_and_variables(api_client: Any, namespace: str) -> None:
    """A false matchCondition skips the policy; variables feed the mutation."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    selected = {"conditioned": "yes"}
    spec = _spec(
        namespace,
        "configmaps",
        _apply('Object{metadata: Object.metadata{labels: {"greeting": variables.greeting}}}'),
        objects=selected,
        matchConditions=[
            {"name": "opted-in", "expression": "has(object.data) && 'opt-in' in object.data"}
        ],
        variables=[{"name": "greeting", "expression": "'hello-' + object.metadata.name"}],
    )
    with _policy(api_client, namespace, spec):
        opted = _configmap("opted", selected, **{"opt-in": "1"})
        mutated = _until(
            lambda: http(api_client, "POST", base, query=DRY, body=opted),
            lambda a: a.status != 201 or "greeting" in _labels(a),
        )
        assert mutated.status == 201, mutated.body
        assert _labels(mutated)["greeting"] == "hello-opted"
        skipped = ok(
            http(api_client, "POST", base, query=DRY, body=_configmap("other", selected, x="1")),
            201,
        )
        assert skipped["metadata"]["labels"] == selected


def test_failure_policy_on_a_cel_error(api_client: Any, namespace: str) -> None:
    """An expression that errors refuses the write under failurePolicy Fail (403, the
    policy's and binding's names, reason Invalid); under Ignore the failed mutation is
    skipped and the policy's next mutation still applies."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    broken = "Object{metadata: Object.metadata{labels: {'x': object.data.missing}}}"
    marker = _apply('Object{metadata: Object.metadata{labels: {"ignored-error": "yes"}}}')
    fail = _spec(
        namespace, "configmaps", _apply(broken), objects={"fp": "fail"}, failurePolicy="Fail"
    )
    ignore = _spec(
        namespace,
        "configmaps",
        _apply(broken),
        marker,
        objects={"fp": "ignore"},
        failurePolicy="Ignore",
    )
    with (
        _policy(api_client, namespace, ignore),
        _policy(api_client, namespace, fail) as (policy, binding),
    ):
        refused = _until(
            lambda: http(
                api_client, "POST", base, query=DRY, body=_configmap("f", {"fp": "fail"}, a="1")
            ),
            lambda a: a.status != 201,
        )
        assert refused.status == 403, refused.body
        message = (
            f"policy '{policy}' with binding '{binding}' denied request: expression "
            f"'{broken}' resulted in error: no such key: missing"
        )
        assert refused.body["reason"] == "Invalid"
        assert refused.body["message"] == message
        assert refused.body["details"]["name"] == "f"
        assert refused.body["details"]["kind"] == "configmaps"
        assert refused.body["details"]["causes"] == [{"message": message}]
        ignored = _until(
            lambda: http(
                api_client, "POST", base, query=DRY, body=_configmap("i", {"fp": "ignore"}, a="1")
            ),
            lambda a: a.status != 201 or "ignored-error" in _labels(a),
        )
        assert ignored.status == 201, ignored.body
        assert _labels(ignored) == {"fp": "ignore", "ignored-error": "yes"}


COPY_SOURCE = """Object{metadata: Object.metadata{labels: {
  "copy": "source" in object.metadata.labels ? object.metadata.labels["source"] : "none"
}}}"""


def test_reinvocation_if_needed(api_client: Any, namespace: str) -> None:
    """A policy with reinvocationPolicy IfNeeded runs again when a later policy changed
    the object: it copies a label another policy sets, whichever runs first."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    selected = {"reinvoked": "yes"}
    # names sort the copier first (kube's order is its informer's; it does not matter)
    stem = _unique("map")
    copier = {
        **_spec(namespace, "configmaps", _apply(COPY_SOURCE), objects=selected),
        "reinvocationPolicy": "IfNeeded",
    }
    source = _spec(
        namespace,
        "configmaps",
        _apply('Object{metadata: Object.metadata{labels: {"source": "set"}}}'),
        objects=selected,
    )
    with (
        _policy(api_client, namespace, copier, name=f"{stem}-a"),
        _policy(api_client, namespace, source, name=f"{stem}-b"),
    ):
        mutated = _until(
            lambda: http(api_client, "POST", base, query=DRY, body=_configmap("r", selected)),
            lambda a: a.status != 201 or _labels(a).get("copy") == "set",
        )
        assert mutated.status == 201, mutated.body
        assert _labels(mutated) == {**selected, "source": "set", "copy": "set"}


def test_namespace_and_object_selectors(api_client: Any, namespace: str) -> None:
    """The policy's namespaceSelector reads the namespace's labels as they are now; its
    objectSelector the object's."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    key = _unique("map-test.example.com/selected")
    spec = _spec(
        namespace,
        "configmaps",
        _apply('Object{metadata: Object.metadata{labels: {"in-selected-namespace": "yes"}}}'),
        objects={"select-me": "yes"},
    )
    spec["matchConstraints"]["namespaceSelector"] = {"matchLabels": {key: "true"}}

    def label(value: str | None) -> None:
        body = {"metadata": {"labels": {key: value}}}
        path = f"/api/v1/namespaces/{namespace}"
        ok(http(api_client, "PATCH", path, body=body, content_type=MERGE), 200)

    chosen = _configmap("chosen", {"select-me": "yes"})
    with _policy(api_client, namespace, spec):
        label("true")
        mutated = _until(
            lambda: http(api_client, "POST", base, query=DRY, body=chosen),
            lambda a: a.status != 201 or "in-selected-namespace" in _labels(a),
        )
        assert mutated.status == 201, mutated.body
        assert "in-selected-namespace" in _labels(mutated)
        other = ok(
            http(api_client, "POST", base, query=DRY, body=_configmap("other", {"x": "y"})), 201
        )
        assert other["metadata"]["labels"] == {"x": "y"}
        label(None)
        left = _until(
            lambda: http(api_client, "POST", base, query=DRY, body=chosen),
            lambda a: a.status != 201 or "in-selected-namespace" not in _labels(a),
        )
        assert left.status == 201, left.body
        assert _labels(left) == {"select-me": "yes"}


def test_a_binding_without_its_policy_is_ignored(api_client: Any, namespace: str) -> None:
    """A binding naming a policy that does not exist is ignored (kube documents it); a
    later binding being active shows the server has seen the earlier one."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    selected = {"marked-test": "yes"}
    marker = _spec(
        namespace,
        "configmaps",
        _apply('Object{metadata: Object.metadata{labels: {"marked": "yes"}}}'),
        objects=selected,
    )
    with (
        _policy(api_client, namespace, {}, name=_unique("missing"), create_policy=False),
        _policy(api_client, namespace, marker),
    ):
        marked = _until(
            lambda: http(api_client, "POST", base, query=DRY, body=_configmap("m", selected)),
            lambda a: a.status != 201 or "marked" in _labels(a),
        )
        assert marked.status == 201, marked.body
        assert _labels(marked) == {**selected, "marked": "yes"}
        ok(http(api_client, "POST", base, body=_configmap("stored", selected)), 201)
        stored = ok(http(api_client, "GET", f"{base}/stored"), 200)
        assert stored["metadata"]["labels"] == {**selected, "marked": "yes"}
