"""Conformance: admission and conversion webhooks are called as kube-apiserver 1.36 calls them.

The webhooks are served by the test process itself (``webhookserver.py``: HTTPS on
``127.0.0.1`` with a CA of its own, given as ``caBundle``), so the same tests run against
a real kube-apiserver on the same machine. Every webhook a test configures is scoped to
the test's own namespace (``namespaceSelector`` on ``kubernetes.io/metadata.name``) or to
objects carrying a label unique to the test, and every configuration is deleted at the
end: a leftover failing webhook would break a shared cluster. On a real server a new
configuration takes a moment to become active (its informer must see it): tests poll
with dry-run requests until the webhook answers.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.integration.rawhttp import MERGE, Response, eventually, http, ok, watching
from tests.integration.webhookserver import (
    Reply,
    WebhookServer,
    allow,
    converted,
    deny,
    patch,
)

API = "/apis/admissionregistration.k8s.io/v1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CONFIGMAPS = {
    "operations": ["CREATE", "UPDATE", "DELETE"],
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "resources": ["configmaps"],
}


def _unique(prefix: str) -> str:
    return f"{prefix}-{os.urandom(4).hex()}"


@pytest.fixture
def server() -> Iterator[WebhookServer]:
    with WebhookServer() as running:
        yield running


def _hook(
    server: WebhookServer,
    path: str,
    namespace: str,
    *,
    rules: list[Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A webhook calling ``path`` of ``server``, for writes in ``namespace`` only."""
    hook: dict[str, Any] = {
        "name": f"{path.strip('/').replace('/', '-')}.webhooks.example.com",
        "clientConfig": server.client_config(path),
        "rules": rules or [CONFIGMAPS],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "timeoutSeconds": 5,
    }
    hook.update(extra)
    return hook


@contextmanager
def _configuration(
    api_client: Any, kind: str, hooks: list[dict[str, Any]], *, name: str | None = None
) -> Iterator[str]:
    """A Mutating/ValidatingWebhookConfiguration (``kind``: mutating, validating), deleted
    on exit."""
    resource = f"{kind}webhookconfigurations"
    name = name or _unique(kind)
    ok(
        http(
            api_client,
            "POST",
            f"{API}/{resource}",
            body={"metadata": {"name": name}, "webhooks": hooks},
        ),
        201,
    )
    try:
        yield name
    finally:
        http(api_client, "DELETE", f"{API}/{resource}/{name}")


def _until(send: Callable[[], Response], accept: Callable[[Response], bool]) -> Response:
    """Send (a dry run) until the answer shows the configuration is active (30 s at most)."""
    deadline = time.monotonic() + 30
    while True:
        answer = send()
        if accept(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def _cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **extra.pop("meta", {})}, **extra}


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _warnings(response: Response) -> list[str]:
    return list(response.headers.getlist("Warning"))  # type: ignore[attr-defined]


# -- answers -----------------------------------------------------------------------------


def test_a_validating_webhook_denies_with_its_message_and_code(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"

    def judge(review: dict[str, Any]) -> dict[str, Any]:
        name = review["request"]["name"]
        if name.startswith("red"):
            return deny(review, code=403, message="no red configmaps", reason="Forbidden")
        if name.startswith("quiet"):
            return deny(review)
        return allow(review)

    server.route("/judge", judge)
    with _configuration(api_client, "validating", [_hook(server, "/judge", namespace)]):
        denied = _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("red-1")),
            lambda a: a.status != 201,
        )
        assert denied.status == 403, denied.body
        assert denied.body["kind"] == "Status"
        assert denied.body["reason"] == "Forbidden"
        assert denied.body["code"] == 403
        assert denied.body["message"] == (
            'admission webhook "judge.webhooks.example.com" denied the request: no red configmaps'
        )
        # no status at all: 400, "without explanation"
        quiet = http(api_client, "POST", base, body=_cm("quiet-1"))
        assert quiet.status == 400, quiet.body
        assert quiet.body["message"] == (
            'admission webhook "judge.webhooks.example.com" denied the request without explanation'
        )
        server.clear()
        ok(http(api_client, "POST", base, body=_cm("green-1", data={"k": "v"})), 201)
    # what the webhook was sent: an AdmissionReview v1, POSTed with ?timeout=
    (call,) = server.calls("/judge")
    assert call.query == {"timeout": "5s"}
    assert call.review["apiVersion"] == "admission.k8s.io/v1"
    assert call.review["kind"] == "AdmissionReview"
    request = call.request
    assert request["uid"]
    assert request["operation"] == "CREATE"
    assert request["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert request["requestKind"] == request["kind"]
    assert request["requestResource"] == request["resource"]
    assert request["name"] == "green-1"
    assert request["namespace"] == namespace
    assert request["dryRun"] is False
    assert request["options"]["kind"] == "CreateOptions"
    assert request["options"]["apiVersion"] == "meta.k8s.io/v1"
    assert request["userInfo"]["username"]
    assert request["object"]["data"] == {"k": "v"}
    # validating webhooks see the object as it will be stored
    assert request["object"]["metadata"]["uid"]
    assert request["object"]["metadata"]["creationTimestamp"]
    assert request.get("oldObject") is None


def test_a_mutating_webhook_patches_the_object(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    """A JSONPatch answer is applied; validating webhooks run after and see the result;
    updates (patches included) are UPDATEs with the old object."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"

    def label(review: dict[str, Any]) -> dict[str, Any]:
        obj = review["request"]["object"]
        if "labels" in obj["metadata"]:
            ops = [{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]
        else:
            ops = [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}]
        return patch(review, ops)

    server.route("/label", label)
    server.route("/check", allow)
    mutating = [_hook(server, "/label", namespace)]
    validating = [_hook(server, "/check", namespace)]
    with (
        _configuration(api_client, "mutating", mutating),
        _configuration(api_client, "validating", validating),
    ):
        probe = _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("probe")),
            lambda a: (
                ((a.body.get("metadata") or {}).get("labels") or {}).get("mutated") == "yes"
                and bool(server.calls("/check"))
            ),
        )
        assert probe.status == 201, probe.body
        server.clear()
        created = ok(http(api_client, "POST", base, body=_cm("cm1", data={"a": "1"})), 201)
        assert created["metadata"]["labels"] == {"mutated": "yes"}
        stored = ok(http(api_client, "GET", f"{base}/cm1"), 200)
        assert stored["metadata"]["labels"] == {"mutated": "yes"}
        (mutated,) = server.calls("/label")
        (checked,) = server.calls("/check")
        assert mutated.request["object"]["metadata"].get("labels") is None
        assert "uid" not in mutated.request["object"]["metadata"]  # not yet stored
        assert checked.request["object"]["metadata"]["labels"] == {"mutated": "yes"}
        # an update: the webhook sees the old object; its patch applies on top
        server.clear()
        updated = ok(
            http(
                api_client,
                "PATCH",
                f"{base}/cm1",
                body={"metadata": {"labels": {"mutated": None, "own": "x"}}},
                content_type=MERGE,
            ),
            200,
        )
        assert updated["metadata"]["labels"] == {"own": "x", "mutated": "yes"}
        (mutated,) = server.calls("/label")
        assert mutated.request["operation"] == "UPDATE"
        assert mutated.request["options"]["kind"] == "UpdateOptions"
        assert mutated.request["oldObject"]["metadata"]["labels"] == {"mutated": "yes"}
        assert mutated.request["object"]["metadata"]["labels"] == {"own": "x"}


def test_mutating_webhooks_run_in_order_and_are_reinvoked_if_needed(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    """Configurations by name, webhooks in their order; a webhook with
    reinvocationPolicy IfNeeded runs once more when a later one changed the object."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    seen: list[tuple[str, dict[str, str]]] = []

    def adding(label: str | None) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def script(review: dict[str, Any]) -> dict[str, Any]:
            labels = dict(review["request"]["object"]["metadata"].get("labels") or {})
            seen.append((label or "first", dict(labels)))
            if label is None or label in labels:
                return allow(review)
            labels[label] = "yes"
            return patch(review, [{"op": "add", "path": "/metadata/labels", "value": labels}])

        return script

    server.route("/first", adding(None))
    server.route("/two", adding("two"))
    server.route("/three", adding("three"))
    prefix = _unique("order")
    first = [
        _hook(server, "/first", namespace, reinvocationPolicy="IfNeeded"),
        _hook(server, "/two", namespace),
    ]
    second = [_hook(server, "/three", namespace)]
    # created in the other order: the order is the configurations' names, not creation
    with (
        _configuration(api_client, "mutating", second, name=f"{prefix}-b"),
        _configuration(api_client, "mutating", first, name=f"{prefix}-a"),
    ):
        _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("probe")),
            lambda a: set((a.body.get("metadata") or {}).get("labels") or {}) == {"two", "three"},
        )
        seen.clear()
        created = ok(http(api_client, "POST", base, body=_cm("cm")), 201)
    assert created["metadata"]["labels"] == {"two": "yes", "three": "yes"}
    assert seen == [
        ("first", {}),
        ("two", {}),
        ("three", {"two": "yes"}),
        ("first", {"two": "yes", "three": "yes"}),  # reinvoked: "three" changed the object
    ]


SAW_WEBHOOK = """Object{metadata: Object.metadata{labels: {
  "policy-saw": "webhook" in object.metadata.labels ? object.metadata.labels["webhook"] : "none"
}}}"""


@contextmanager
def _mutating_policy(api_client: Any, namespace: str, spec: dict[str, Any]) -> Iterator[None]:
    """A MutatingAdmissionPolicy and its binding to ``namespace``, deleted on exit; the
    test is skipped where the server does not serve them (GA in Kubernetes 1.36)."""
    listing = http(api_client, "GET", API)
    served = {r.get("name") for r in (listing.body or {}).get("resources") or []}
    if listing.status != 200 or "mutatingadmissionpolicies" not in served:
        pytest.skip("the server does not serve admissionregistration.k8s.io/v1 policies")
    name, binding = _unique("chain"), _unique("chainb")
    policies, bindings = (
        f"{API}/mutatingadmissionpolicies",
        f"{API}/mutatingadmissionpolicybindings",
    )
    ok(http(api_client, "POST", policies, body={"metadata": {"name": name}, "spec": spec}), 201)
    try:
        binding_spec = {
            "policyName": name,
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        }
        body = {"metadata": {"name": binding}, "spec": binding_spec}
        ok(http(api_client, "POST", bindings, body=body), 201)
        try:
            yield
        finally:
            http(api_client, "DELETE", f"{bindings}/{binding}")
    finally:
        http(api_client, "DELETE", f"{policies}/{name}")


def test_policies_then_webhooks_one_chain_reinvoked_across_both(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    """MutatingAdmissionPolicies run before mutating webhooks (kube's plugin order) and
    the two plugins are one chain (admission/reinvocation.go): the webhook's change
    brings an IfNeeded policy back in the second pass, whose change brings the IfNeeded
    webhook back in turn. Neither plugin's changes are the writer's in managedFields
    (the field manager runs before mutating admission)."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    selected = {"chain-test": _unique("c")}
    seen: list[dict[str, str]] = []

    def add_label(review: dict[str, Any]) -> dict[str, Any]:
        labels = dict(review["request"]["object"]["metadata"].get("labels") or {})
        seen.append(labels)
        if "webhook" in labels:
            return allow(review)
        return patch(review, [{"op": "add", "path": "/metadata/labels/webhook", "value": "w"}])

    server.route("/chain", add_label)
    policy = {
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["configmaps"],
                }
            ],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "objectSelector": {"matchLabels": selected},
        },
        "mutations": [
            {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": SAW_WEBHOOK}}
        ],
        "reinvocationPolicy": "IfNeeded",
    }
    hook = _hook(
        server,
        "/chain",
        namespace,
        objectSelector={"matchLabels": selected},
        reinvocationPolicy="IfNeeded",
    )
    with (
        _mutating_policy(api_client, namespace, policy),
        _configuration(api_client, "mutating", [hook]),
    ):
        _until(
            lambda: http(
                api_client,
                "POST",
                base,
                query={"dryRun": "All"},
                body=_cm("probe", meta={"labels": selected}),
            ),
            lambda a: (
                {"policy-saw", "webhook"} <= set((a.body.get("metadata") or {}).get("labels") or {})
            ),
        )
        seen.clear()
        created = ok(
            http(
                api_client,
                "POST",
                base,
                query={"fieldManager": "chain-writer"},
                body=_cm("cm", meta={"labels": selected}, data={"k": "v"}),
            ),
            201,
        )
    assert created["metadata"]["labels"] == {**selected, "webhook": "w", "policy-saw": "w"}
    # the webhook ran after the policy, then once more after the policy's second pass
    assert seen == [
        {**selected, "policy-saw": "none"},
        {**selected, "webhook": "w", "policy-saw": "w"},
    ]
    (entry,) = created["metadata"]["managedFields"]
    assert entry["manager"] == "chain-writer"
    assert set(entry["fieldsV1"]["f:metadata"]["f:labels"]) - {"."} == {"f:chain-test"}


def test_a_webhook_may_call_the_api_server_back(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    """A webhook that reads from the API server while it is called (a controller-runtime
    webhook with a client does) is answered: the server holds nothing while it waits."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"

    def stamp(review: dict[str, Any]) -> dict[str, Any]:
        request = review["request"]
        if request["operation"] != "UPDATE":
            return allow(review)
        stored = ok(http(api_client, "GET", f"{base}/{request['name']}"), 200)
        seen = stored["metadata"]["resourceVersion"]
        ops = [{"op": "add", "path": "/metadata/annotations", "value": {"seen": seen}}]
        return patch(review, ops)

    server.route("/stamp", stamp)
    created = ok(http(api_client, "POST", base, body=_cm("cm", data={"a": "1"})), 201)
    hook = _hook(server, "/stamp", namespace, timeoutSeconds=5)
    with _configuration(api_client, "mutating", [hook]):
        patched = _until(
            lambda: http(
                api_client,
                "PATCH",
                f"{base}/cm",
                body={"data": {"a": "2"}},
                content_type=MERGE,
                query={"dryRun": "All"},
            ),
            lambda a: "seen" in ((a.body.get("metadata") or {}).get("annotations") or {}),
        )
    assert patched.status == 200, patched.body
    assert patched.body["metadata"]["annotations"] == {
        "seen": created["metadata"]["resourceVersion"]
    }


# -- matching ----------------------------------------------------------------------------


def _about_the_service(call: Any) -> bool:
    """A call about the test's Service: on a real cluster, kube-controller-manager's
    endpoints controller updates the Service's Endpoints meanwhile, which ``*`` and
    ``*/*`` rules match too."""
    return bool((call.request.get("resource") or {}).get("resource") == "services")


def test_rules_match_operations_scope_and_subresources(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    base = f"/api/v1/namespaces/{namespace}/services"

    def rule(resources: list[str], **extra: Any) -> list[dict[str, Any]]:
        return [
            {
                "operations": ["UPDATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": resources,
                **extra,
            }
        ]

    hooks = {
        "/main": rule(["services"]),
        "/status": rule(["services/status"]),
        "/every": rule(["*/*"]),
        "/top": rule(["*"]),
        "/namespaced": rule(["services"], scope="Namespaced"),
        "/cluster": rule(["services"], scope="Cluster"),
        "/create": [{**rule(["services"])[0], "operations": ["CREATE"]}],
    }
    for path in hooks:
        server.route(path, allow)
    service = {
        "metadata": {"name": "svc"},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}},
    }
    with _configuration(
        api_client, "validating", [_hook(server, p, namespace, rules=r) for p, r in hooks.items()]
    ):
        _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=service),
            lambda _a: bool(server.calls("/create")),
        )
        current = ok(http(api_client, "POST", base, body=service), 201)
        server.clear()
        current["metadata"]["labels"] = {"changed": "yes"}
        current = ok(http(api_client, "PUT", f"{base}/svc", body=current), 200)
        main_calls = {c.path for c in server.calls() if _about_the_service(c)}
        server.clear()
        current["status"] = {"loadBalancer": {}}
        ok(http(api_client, "PUT", f"{base}/svc/status", body=current), 200)
        status_calls = {c.path: c for c in server.calls() if _about_the_service(c)}
    assert main_calls == {"/main", "/every", "/top", "/namespaced"}
    assert set(status_calls) == {"/status", "/every"}
    assert status_calls["/status"].request["subResource"] == "status"
    assert status_calls["/status"].request["requestSubResource"] == "status"


def test_namespace_and_object_selectors(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    mark = _unique("mark")
    server.route("/objects", allow)
    server.route("/namespaces", allow)
    hooks = [
        _hook(server, "/objects", namespace, objectSelector={"matchLabels": {"pick": mark}}),
        _hook(
            server,
            "/namespaces",
            namespace,
            namespaceSelector={"matchLabels": {"webhook-test": mark}},
        ),
    ]
    picked = _cm("picked", meta={"labels": {"pick": mark}})
    with _configuration(api_client, "validating", hooks):
        _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=picked),
            lambda _a: bool(server.calls("/objects")),
        )
        server.clear()
        ok(http(api_client, "POST", base, body=_cm("plain")), 201)
        assert server.calls() == []  # neither the object nor the namespace is selected
        ok(http(api_client, "POST", base, body=picked), 201)
        assert [c.request["name"] for c in server.calls()] == ["picked"]
        server.clear()
        # an update that removes the label: the old object still matches
        ok(
            http(
                api_client,
                "PATCH",
                f"{base}/picked",
                body={"metadata": {"labels": None}},
                content_type=MERGE,
            ),
            200,
        )
        assert [c.path for c in server.calls()] == ["/objects"]
        # the namespace's labels select: label it, and the other webhook is called
        ok(
            http(
                api_client,
                "PATCH",
                f"/api/v1/namespaces/{namespace}",
                body={"metadata": {"labels": {"webhook-test": mark}}},
                content_type=MERGE,
            ),
            200,
        )
        server.clear()
        _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("late")),
            lambda _a: bool(server.calls("/namespaces")),
        )
        assert {c.request["name"] for c in server.calls("/namespaces")} == {"late"}


def test_match_conditions(api_client: Any, namespace: str, server: WebhookServer) -> None:
    """A false condition skips the webhook; an error fails the request (Fail) or skips
    the webhook (Ignore)."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    for path in ("/named", "/broken-fail", "/broken-ignore"):
        server.route(path, allow)
    broken = [{"name": "data-key", "expression": "object.data.wanted == 'x'"}]
    named = [{"name": "named", "expression": "object.metadata.name.startsWith('match-')"}]
    hooks = [
        _hook(server, "/named", namespace, matchConditions=named),
        _hook(
            server,
            "/broken-fail",
            namespace,
            matchConditions=[
                {"name": "labelled", "expression": "has(object.metadata.labels)"},
                *broken,
            ],
        ),
        _hook(server, "/broken-ignore", namespace, matchConditions=broken, failurePolicy="Ignore"),
    ]
    with _configuration(api_client, "validating", hooks):
        _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("match-0")),
            lambda _a: bool(server.calls("/named")),
        )
        server.clear()
        ok(http(api_client, "POST", base, body=_cm("match-1")), 201)
        ok(http(api_client, "POST", base, body=_cm("other-1")), 201)
        assert [c.request["name"] for c in server.calls("/named")] == ["match-1"]
        # no data: the condition errors; Ignore skips the webhook, Fail refuses the request
        labelled = _cm("other-2", meta={"labels": {"a": "b"}})
        refused = http(api_client, "POST", base, body=labelled)
        assert refused.status == 403, refused.body
        assert refused.body["reason"] == "Forbidden"
        assert refused.body["message"] == (
            "configmaps \"other-2\" is forbidden: expression 'object.data.wanted == 'x'' "
            "resulted in error: no such key: data"
        )
        assert refused.body["details"] == {"name": "other-2", "kind": "configmaps"}
        # data with the key: every condition true, both called
        server.clear()
        ok(http(api_client, "POST", base, body={**labelled, "data": {"wanted": "x"}}), 201)
        assert {c.path for c in server.calls()} == {"/broken-fail", "/broken-ignore"}


def test_webhooks_are_not_called_for_webhook_configurations(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    """Admission never judges its own configuration (IsExemptAdmissionConfigurationResource):
    a webhook denying every labelled configmap and webhook configuration does not stop a
    labelled configuration from being written."""
    mark = _unique("exempt")
    server.route("/deny", lambda review: deny(review, code=403, message="no"))
    rules = [
        CONFIGMAPS,
        {
            "operations": ["*"],
            "apiGroups": ["admissionregistration.k8s.io"],
            "apiVersions": ["*"],
            "resources": ["*"],
        },
    ]
    hook = _hook(
        server,
        "/deny",
        namespace,
        rules=rules,
        objectSelector={"matchLabels": {"webhook-test": mark}},
    )
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    labelled = _cm("labelled", meta={"labels": {"webhook-test": mark}})
    with _configuration(api_client, "validating", [hook]):
        denied = _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=labelled),
            lambda a: a.status != 201,
        )
        assert denied.status == 403, denied.body  # the webhook is active
        other = {
            "metadata": {"name": _unique("labelled"), "labels": {"webhook-test": mark}},
            "webhooks": [],
        }
        for resource in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
            ok(http(api_client, "POST", f"{API}/{resource}", body=other), 201)
            ok(http(api_client, "DELETE", f"{API}/{resource}/{other['metadata']['name']}"), 200)
    assert {c.request["resource"]["resource"] for c in server.calls()} == {"configmaps"}


# -- failures ----------------------------------------------------------------------------


def test_failure_policy_on_an_unreachable_webhook(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    port = _free_port()
    url = f"https://127.0.0.1:{port}/down"
    server.route("/up", allow)
    unreachable = {"url": url, "caBundle": server.ca_bundle}
    ignoring = [
        _hook(server, "/down", namespace, clientConfig=unreachable, failurePolicy="Ignore"),
        _hook(server, "/up", namespace),
    ]
    with _configuration(api_client, "validating", ignoring):
        answer = _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("probe")),
            lambda _a: bool(server.calls("/up")),
        )
        assert answer.status == 201, answer.body  # the unreachable one was ignored
    failing = [_hook(server, "/down", namespace, clientConfig=unreachable, name="fail.x.io")]
    with _configuration(api_client, "validating", failing):
        refused = _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("probe")),
            lambda a: a.status != 201,
        )
    inner = (
        f'failed calling webhook "fail.x.io": failed to call webhook: Post "{url}?timeout=5s": '
        f"dial tcp 127.0.0.1:{port}: connect: connection refused"
    )
    assert refused.status == 500, refused.body
    assert refused.body["reason"] == "InternalError"
    assert refused.body["message"] == f"Internal error occurred: {inner}"
    assert refused.body["details"]["causes"] == [{"message": inner}]


def test_failure_policy_on_a_timeout(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    server.route("/slow", lambda _review: Reply(delay=3.0))
    server.route("/up", allow)
    slow_ignored = [
        _hook(server, "/slow", namespace, failurePolicy="Ignore", timeoutSeconds=1),
        _hook(server, "/up", namespace),
    ]
    took: list[float] = []

    def timed() -> Response:
        started = time.monotonic()
        answer = http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("probe"))
        took.append(time.monotonic() - started)
        return answer

    with _configuration(api_client, "validating", slow_ignored):
        answer = _until(timed, lambda _a: bool(server.calls("/up")))
    assert answer.status == 201, answer.body  # after the slow webhook's second, ignored
    assert 0.9 < took[-1] < 2.9
    assert server.calls("/slow")[-1].query == {"timeout": "1s"}
    slow_failing = [_hook(server, "/slow", namespace, timeoutSeconds=1, name="slow.x.io")]
    with _configuration(api_client, "validating", slow_failing):
        refused = _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("probe")),
            lambda a: a.status != 201,
        )
    assert refused.status == 500, refused.body
    assert refused.body["message"].startswith(
        'Internal error occurred: failed calling webhook "slow.x.io": failed to call webhook: '
        f'Post "{server.url("/slow")}?timeout=1s": '
    )
    assert "context deadline exceeded" in refused.body["message"]


def test_invalid_answers_fail_by_failure_policy(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    """A response for another uid or an error status is a failure to call the webhook
    (failurePolicy decides); a patch that does not apply always fails the request."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"

    def wrong_uid(review: dict[str, Any]) -> dict[str, Any]:
        answer = allow(review)
        answer["response"]["uid"] = "not-the-uid"
        return answer

    server.route("/wrong-uid", wrong_uid)
    server.route("/error", lambda _review: Reply(500, b"boom"))
    server.route(
        "/bad-patch",
        lambda review: patch(review, [{"op": "remove", "path": "/metadata/labels/nope"}]),
    )
    hooks = [
        _hook(server, "/error", namespace, failurePolicy="Ignore"),
        _hook(server, "/wrong-uid", namespace, name="uid.x.io"),
    ]
    with _configuration(api_client, "validating", hooks):
        refused = _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("probe")),
            lambda a: a.status != 201,
        )
    assert refused.status == 500, refused.body
    sent = server.calls("/wrong-uid")[-1].request["uid"]
    assert refused.body["message"] == (
        'Internal error occurred: failed calling webhook "uid.x.io": received invalid webhook '
        f'response: expected response.uid="{sent}", got "not-the-uid"'
    )
    ignoring = [_hook(server, "/bad-patch", namespace, failurePolicy="Ignore")]
    with _configuration(api_client, "mutating", ignoring):
        broken = _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("probe")),
            lambda a: a.status != 201,
        )
    assert broken.status == 500, broken.body
    assert broken.body["message"].startswith("Internal error occurred: ")


def test_dry_run_reaches_webhooks_without_side_effects(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    server.route(
        "/none",
        lambda review: patch(review, [{"op": "add", "path": "/data", "value": {"by": "none"}}]),
    )
    server.route("/on-dry-run", allow)
    hooks = [
        _hook(server, "/none", namespace, sideEffects="None"),
        _hook(server, "/on-dry-run", namespace, sideEffects="NoneOnDryRun"),
    ]
    with _configuration(api_client, "mutating", hooks):
        answer = _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("dry")),
            lambda a: (a.body.get("data") or {}).get("by") == "none",
        )
    assert answer.status == 201, answer.body
    assert server.calls("/none")[-1].request["dryRun"] is True
    assert server.calls("/on-dry-run")[-1].request["dryRun"] is True
    assert http(api_client, "GET", f"{base}/dry").status == 404


def test_warnings_become_warning_headers(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    server.route("/warn-m", lambda review: allow(review, warnings=["from mutating"]))
    server.route(
        "/warn-v",
        lambda review: allow(review, warnings=["from validating", "from mutating", ""]),
    )
    with (
        _configuration(api_client, "mutating", [_hook(server, "/warn-m", namespace)]),
        _configuration(api_client, "validating", [_hook(server, "/warn-v", namespace)]),
    ):
        warned = _until(
            lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("w")),
            lambda a: len(_warnings(a)) == 2,
        )
    assert warned.status == 201, warned.body
    assert _warnings(warned) == ['299 - "from mutating"', '299 - "from validating"']


def test_a_delete_is_judged_by_validating_webhooks(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"

    def keep(review: dict[str, Any]) -> dict[str, Any]:
        request = review["request"]
        old = request.get("oldObject") or {}
        if request["operation"] == "DELETE" and (old.get("data") or {}).get("keep"):
            return deny(review, code=409, message="kept", reason="Conflict")
        return allow(review)

    server.route("/keep", keep)
    ok(http(api_client, "POST", base, body=_cm("kept", data={"keep": "yes"})), 201)
    with _configuration(api_client, "validating", [_hook(server, "/keep", namespace)]):
        refused = _until(
            lambda: http(api_client, "DELETE", f"{base}/kept", query={"dryRun": "All"}),
            lambda a: a.status != 200,
        )
        assert refused.status == 409, refused.body
        assert refused.body["message"].endswith("denied the request: kept")
        call = server.calls("/keep")[-1].request
        assert call["operation"] == "DELETE"
        assert call["object"] is None
        assert call["oldObject"]["metadata"]["name"] == "kept"
        assert call["options"]["kind"] == "DeleteOptions"
        assert ok(http(api_client, "GET", f"{base}/kept"), 200)["data"] == {"keep": "yes"}
    eventually(
        lambda: http(api_client, "DELETE", f"{base}/kept").status == 200, 30, "deleted at last"
    )


def test_a_webhook_called_through_a_service(api_client: Any, namespace: str) -> None:
    """``clientConfig.service``: the API server calls ``https://<service>.<namespace>.svc``
    (the certificate's name), reaching an ExternalName service's host."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    service = "webhook-svc"
    with WebhookServer(service_names=[f"{service}.{namespace}.svc"]) as named:
        named.route("/through-service", allow)
        ok(
            http(
                api_client,
                "POST",
                f"/api/v1/namespaces/{namespace}/services",
                body={
                    "metadata": {"name": service},
                    "spec": {"type": "ExternalName", "externalName": "localhost"},
                },
            ),
            201,
        )
        client = {
            "service": {
                "namespace": namespace,
                "name": service,
                "path": "/through-service",
                "port": named.port,
            },
            "caBundle": named.ca_bundle,
        }
        hook = _hook(named, "/through-service", namespace, clientConfig=client)
        with _configuration(api_client, "validating", [hook]):
            answer = _until(
                lambda: http(api_client, "POST", base, query={"dryRun": "All"}, body=_cm("x")),
                lambda _a: bool(named.calls("/through-service")),
            )
        assert answer.status == 201, answer.body


def test_webhook_configurations_are_validated(api_client: Any, server: WebhookServer) -> None:
    def refused(client_config: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
        hook = {
            "name": "bad.webhooks.example.com",
            "clientConfig": client_config,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            **extra,
        }
        answer = http(
            api_client,
            "POST",
            f"{API}/validatingwebhookconfigurations",
            body={"metadata": {"name": _unique("bad")}, "webhooks": [hook]},
        )
        assert answer.status == 422, answer.body
        return list(answer.body["details"]["causes"])

    plain = refused({"url": "http://127.0.0.1:1/x"})
    assert {
        "reason": "FieldValueInvalid",
        "message": "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired "
        "format: https://host[/path]",
        "field": "webhooks[0].clientConfig.url",
    } in plain
    query = refused({"url": "https://u:p@127.0.0.1:1/x?a=b"})
    assert {c["field"] for c in query} == {"webhooks[0].clientConfig.url"}
    messages = [c["message"] for c in query]
    assert any(m.endswith(": user information is not permitted in the URL") for m in messages)
    assert 'Invalid value: "a=b": query parameters are not permitted in the URL' in messages
    slow = refused(server.client_config("/x"), timeoutSeconds=31)
    assert {
        "reason": "FieldValueInvalid",
        "message": "Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        "field": "webhooks[0].timeoutSeconds",
    } in slow


# -- conversion --------------------------------------------------------------------------


def _rename(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    """v1 says ``spec.color``, v2 ``spec.colour``."""
    spec = dict(obj.get("spec") or {})
    if desired.endswith("/v2") and "color" in spec:
        spec["colour"] = spec.pop("color")
    if desired.endswith("/v1") and "colour" in spec:
        spec["color"] = spec.pop("colour")
    return {**obj, "apiVersion": desired, "spec": spec}


def _events(resp: Any, count: int) -> list[dict[str, Any]]:
    """The first ``count`` events of a JSON watch stream."""
    out: list[dict[str, Any]] = []
    buffer = b""
    while len(out) < count:
        chunk = resp.read1(65536)
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                out.append(json.loads(line))
    return out


def _two_versions(group: str, server: WebhookServer) -> dict[str, Any]:
    def version(name: str, field: str, storage: bool) -> dict[str, Any]:
        spec = {"type": "object", "properties": {field: {"type": "string"}}}
        return {
            "name": name,
            "served": True,
            "storage": storage,
            "schema": {
                "openAPIV3Schema": {"type": "object", "properties": {"spec": spec}},
            },
        }

    return {
        "metadata": {"name": f"paints.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "paints", "singular": "paint", "kind": "Paint"},
            "versions": [version("v1", "color", True), version("v2", "colour", False)],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": server.client_config("/convert"),
                },
            },
        },
    }


def test_a_conversion_webhook_converts_between_versions(
    api_client: Any, namespace: str, server: WebhookServer
) -> None:
    group = f"t{uuid.uuid4().hex[:10]}.example.com"
    server.route("/convert", lambda review: converted(review, _rename))
    crd = _two_versions(group, server)
    ok(http(api_client, "POST", CRDS, body=crd), 201)
    v1 = f"/apis/{group}/v1/namespaces/{namespace}/paints"
    v2 = f"/apis/{group}/v2/namespaces/{namespace}/paints"
    try:
        eventually(lambda: http(api_client, "GET", v2).status == 200, 30, "v2 served")
        ok(
            http(
                api_client,
                "POST",
                v1,
                body={"apiVersion": f"{group}/v1", "kind": "Paint", "metadata": {"name": "red"},
                      "spec": {"color": "red"}},
            ),
            201,
        )  # fmt: skip
        as_v2 = ok(http(api_client, "GET", f"{v2}/red"), 200)
        assert as_v2["apiVersion"] == f"{group}/v2"
        assert as_v2["spec"] == {"colour": "red"}
        created = ok(
            http(
                api_client,
                "POST",
                v2,
                body={"apiVersion": f"{group}/v2", "kind": "Paint", "metadata": {"name": "blue"},
                      "spec": {"colour": "blue"}},
            ),
            201,
        )  # fmt: skip
        assert created["apiVersion"] == f"{group}/v2"
        assert created["spec"] == {"colour": "blue"}
        as_v1 = ok(http(api_client, "GET", f"{v1}/blue"), 200)
        assert as_v1["spec"] == {"color": "blue"}
        listed = ok(http(api_client, "GET", v2), 200)
        assert {i["metadata"]["name"]: i["spec"] for i in listed["items"]} == {
            "red": {"colour": "red"},
            "blue": {"colour": "blue"},
        }
        # a watch at v2 sees an object written at v1 converted
        since = listed["metadata"]["resourceVersion"]
        with watching(api_client, v2, read_timeout=30, resourceVersion=since) as resp:
            ok(
                http(
                    api_client,
                    "POST",
                    v1,
                    body={"apiVersion": f"{group}/v1", "kind": "Paint",
                          "metadata": {"name": "green"}, "spec": {"color": "green"}},
                ),
                201,
            )  # fmt: skip
            (event,) = _events(resp, 1)
        assert event["type"] == "ADDED"
        assert event["object"]["apiVersion"] == f"{group}/v2"
        assert event["object"]["spec"] == {"colour": "green"}
        # a patch at v2 of an object stored at v1 applies to its v2 form
        patched = ok(
            http(
                api_client,
                "PATCH",
                f"{v2}/red",
                body={"spec": {"colour": "crimson"}},
                content_type=MERGE,
            ),
            200,
        )
        assert patched["spec"] == {"colour": "crimson"}
        assert ok(http(api_client, "GET", f"{v1}/red"), 200)["spec"] == {"color": "crimson"}
        # matchPolicy Equivalent: a webhook for v1 is sent a v2 write converted to v1
        server.route("/paints", allow)
        rule = {
            "operations": ["CREATE"],
            "apiGroups": [group],
            "apiVersions": ["v1"],
            "resources": ["paints"],
        }
        yellow = {"apiVersion": f"{group}/v2", "kind": "Paint", "metadata": {"name": "yellow"},
                  "spec": {"colour": "yellow"}}  # fmt: skip
        hook = _hook(server, "/paints", namespace, rules=[rule])
        with _configuration(api_client, "validating", [hook]):
            _until(
                lambda: http(api_client, "POST", v2, query={"dryRun": "All"}, body=yellow),
                lambda _a: bool(server.calls("/paints")),
            )
        sent = server.calls("/paints")[-1].request
        assert sent["kind"] == {"group": group, "version": "v1", "kind": "Paint"}
        assert sent["resource"] == {"group": group, "version": "v1", "resource": "paints"}
        assert sent["requestKind"] == {"group": group, "version": "v2", "kind": "Paint"}
        assert sent["object"]["apiVersion"] == f"{group}/v1"
        assert sent["object"]["spec"] == {"color": "yellow"}
        reviews = [c.review for c in server.calls("/convert")]
        assert reviews, "the conversion webhook was never called"
        assert {r["apiVersion"] for r in reviews} == {"apiextensions.k8s.io/v1"}
        assert {r["kind"] for r in reviews} == {"ConversionReview"}
        desired = {r["request"]["desiredAPIVersion"] for r in reviews}
        assert desired == {f"{group}/v1", f"{group}/v2"}
        for review in reviews:
            for obj in review["request"]["objects"]:
                assert obj["apiVersion"] != review["request"]["desiredAPIVersion"]
    finally:
        http(api_client, "DELETE", f"{CRDS}/paints.{group}")
        eventually(lambda: http(api_client, "GET", f"{CRDS}/paints.{group}").status == 404, 60,
                   "CRD gone")  # fmt: skip
