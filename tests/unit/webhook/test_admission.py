"""Admission reviews answered as the webhook server answers them (``manager.testing.review``
runs the server's own code path): the request a handler sees, allow/deny answers, the
JSON Patch of a mutating handler, handler failures as 500 denials, and what kube would
refuse refused here with a message naming it."""

from __future__ import annotations

import base64
import logging
from typing import Any

import orjson
import pytest

from manager import Admission, AdmissionRequest, JsonDict, MutatingWebhook, Rule, ValidatingWebhook
from manager.testing import admission_request, review
from manager.webhook.admission import BadReview
from manager.webhook.admission import review as answer
from manager.webhook.metrics import HANDLER_ERRORS, PANICS

WIDGET: JsonDict = {
    "apiVersion": "example.com/v1",
    "kind": "Widget",
    "metadata": {"name": "w", "namespace": "shop", "labels": {"app": "web"}},
    "spec": {"size": 3},
}
RULES = [
    Rule(
        operations=["CREATE", "UPDATE"],
        resources=["widgets"],
        api_groups=["example.com"],
        api_versions=["v1"],
    )
]


def _widget(**spec: Any) -> JsonDict:
    return {**WIDGET, "metadata": dict(WIDGET["metadata"]), "spec": {**WIDGET["spec"], **spec}}


def _validate(req: AdmissionRequest) -> Admission:
    assert req.object is not None
    if req.object["spec"]["size"] > 10:
        return Admission.deny("size: at most 10", code=422)
    return Admission.allow(warnings=["size is fine"], audit_annotations={"checked": "yes"})


VALIDATE = ValidatingWebhook(name="validate.widgets.example.com", rules=RULES, handler=_validate)


def _default(req: AdmissionRequest) -> JsonDict:
    obj = req.object
    assert obj is not None
    obj["spec"].setdefault("replicas", 1)
    obj["metadata"].setdefault("annotations", {})["example.com/defaulted"] = "true"
    return obj


DEFAULT = MutatingWebhook(name="default.widgets.example.com", rules=RULES, handler=_default)


def test_the_request_is_a_typed_view_of_the_review() -> None:
    old = _widget(size=1)
    req = admission_request(
        _widget(size=2),
        operation="UPDATE",
        old_object=old,
        user="alice",
        groups=["devs"],
        dry_run=True,
    )
    assert req.operation == "UPDATE" and req.dry_run
    assert (req.kind.group, req.kind.version, req.kind.kind) == ("example.com", "v1", "Widget")
    assert req.resource.resource == "widgets" and req.request_resource == req.resource
    assert (req.namespace, req.name) == ("shop", "w")
    assert req.user_info.username == "alice" and req.user_info.groups == ("devs",)
    assert req.object is not None and req.object["spec"]["size"] == 2
    assert req.old_object == old
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    assert admission_request(deployment).resource.resource == "deployments"  # built-in table
    with pytest.raises(AttributeError):
        req.name = "x"  # type: ignore[misc]


def test_allowed_with_warnings_and_audit_annotations() -> None:
    outcome = review(VALIDATE, _widget())
    assert outcome.allowed and outcome.code == 200
    assert outcome.warnings == ("size is fine",)
    assert outcome.audit_annotations == {"checked": "yes"}
    assert outcome.patch == [] and outcome.object == _widget()
    assert "patch" not in outcome.response and "patchType" not in outcome.response


def test_denied_with_the_code_and_kube_reason() -> None:
    outcome = review(VALIDATE, _widget(size=11))
    assert not outcome.allowed
    assert (outcome.code, outcome.reason, outcome.message) == (422, "Invalid", "size: at most 10")
    assert outcome.response["status"]["status"] == "Failure"
    assert Admission.deny("no").code == 403 and Admission.deny("no").reason == "Forbidden"


def test_a_mutating_handler_returns_the_changed_object_and_gets_a_json_patch() -> None:
    outcome = review(DEFAULT, _widget())
    assert outcome.allowed
    assert outcome.response["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(outcome.response["patch"])) == outcome.patch
    assert outcome.patch == [
        {"op": "add", "path": "/metadata/annotations", "value": {"example.com/defaulted": "true"}},
        {"op": "add", "path": "/spec/replicas", "value": 1},
    ]
    assert outcome.object is not None
    assert outcome.object["spec"] == {"size": 3, "replicas": 1}
    # unchanged: no patch at all (PatchResponseFromRaw: no patchType without patches)
    again = review(DEFAULT, outcome.object)
    assert again.patch == [] and "patchType" not in again.response


def test_a_mutating_handler_may_answer_an_admission_with_the_object_and_warnings() -> None:
    def handler(req: AdmissionRequest) -> Admission:
        assert req.object is not None
        req.object["spec"]["size"] = 5
        return Admission.allow(warnings=["size raised to 5"], object=req.object)

    outcome = review(handler, _widget(size=1))
    assert outcome.warnings == ("size raised to 5",)
    assert outcome.patch == [{"op": "replace", "path": "/spec/size", "value": 5}]


def test_a_handler_that_raises_is_a_500_denial_logged_once_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(req: AdmissionRequest) -> Admission:
        raise KeyError("spec")

    hook = ValidatingWebhook(name="broken.widgets.example.com", rules=RULES, handler=broken)
    panics = PANICS._value.get()
    errors = HANDLER_ERRORS.labels(hook.served_path)._value.get()
    with caplog.at_level(logging.ERROR, logger="manager.webhook.admission"):
        outcome = review(hook, _widget())
    assert not outcome.allowed and outcome.code == 500
    assert outcome.message == "KeyError: 'spec'"
    failed = [r for r in caplog.records if r.getMessage() == "webhook handler failed"]
    assert len(failed) == 1 and failed[0].exc_info is not None
    assert PANICS._value.get() == panics + 1
    assert HANDLER_ERRORS.labels(hook.served_path)._value.get() == errors + 1


@pytest.mark.parametrize(
    ("handler", "operation", "message"),
    [
        (
            lambda req: ["not", "an", "object"],
            "CREATE",
            "returned list, expected the changed object",
        ),
        (
            lambda req: {**req.object, "kind": "Gadget"},
            "CREATE",
            "changed kind ('Widget' to 'Gadget')",
        ),
        (
            lambda req: {**req.object, "apiVersion": "example.com/v2"},
            "CREATE",
            "changed apiVersion",
        ),
        (
            lambda req: {**req.object, "metadata": {**req.object["metadata"], "namespace": "x"}},
            "CREATE",
            "changed metadata.namespace",
        ),
        (
            lambda req: {**req.object, "metadata": {**req.object["metadata"], "name": "x"}},
            "UPDATE",
            "changed metadata.name ('w' to 'x') on UPDATE",
        ),
        (
            lambda req: {**req.object, "spec": {"when": object()}},
            "CREATE",
            "not JSON: /spec/when: object is not a JSON value",
        ),
    ],
)
def test_what_kube_would_refuse_is_a_500_naming_it(
    handler: Any, operation: str, message: str
) -> None:
    old = _widget() if operation == "UPDATE" else None
    outcome = review(handler, _widget(), operation=operation, old_object=old)
    assert not outcome.allowed and outcome.code == 500
    assert message in outcome.message


def test_a_new_name_on_create_is_allowed() -> None:
    def name_it(req: AdmissionRequest) -> JsonDict:
        assert req.object is not None
        req.object["metadata"]["name"] = "w-1"
        return req.object

    assert review(name_it, _widget()).object["metadata"]["name"] == "w-1"  # type: ignore[index]


def test_no_object_to_change_on_delete() -> None:
    outcome = review(lambda req: {"kind": "Widget"}, None, operation="DELETE", old_object=_widget())
    assert outcome.code == 500 and "returned an object for a DELETE" in outcome.message


def test_a_validating_webhook_cannot_change_the_object() -> None:
    hook = ValidatingWebhook(
        name="sneaky.widgets.example.com",
        rules=RULES,
        handler=lambda req: Admission.allow(object=req.object),
    )
    outcome = review(hook, _widget())
    assert (
        outcome.code == 500 and "a validating webhook cannot change the object" in outcome.message
    )
    bad = ValidatingWebhook(name="dict.widgets.example.com", rules=RULES, handler=_default)  # type: ignore[arg-type]
    assert "returned dict, expected an Admission" in review(bad, _widget()).message


def test_admission_values_kube_would_refuse_raise_at_once() -> None:
    with pytest.raises(ValueError, match="a denial's code is an HTTP error"):
        Admission.deny("no", code=200)
    with pytest.raises(ValueError, match="warnings: a list of strings"):
        Admission.allow(warnings="careful")
    with pytest.raises(ValueError, match="audit_annotations: key 'a/b'"):
        Admission.allow(audit_annotations={"a/b": "x"})


def _body(**request: Any) -> bytes:
    doc: JsonDict = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    if request:
        doc["request"] = {"uid": "u1", "operation": "CREATE", **request}
    return orjson.dumps(doc)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "the body is not JSON"),
        (b"[]", "expected a AdmissionReview object, got list"),
        (
            orjson.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}),
            "expected a AdmissionReview of admission.k8s.io/v1, got kind='AdmissionReview' "
            "apiVersion='admission.k8s.io/v1beta1'",
        ),
        (_body(), "the AdmissionReview has no request"),
        (_body(uid=""), "the AdmissionReview's request has no uid"),
        (_body(operation="PATCH"), "request.operation: expected one of"),
        (
            _body(kind={"group": "", "version": "v1", "kind": "Pod"}),
            "request.resource: expected a group, version and resource, got None",
        ),
        (
            _body(
                kind={"group": "", "version": "v1", "kind": "Pod"},
                resource={"group": "", "version": "v1", "resource": "pods"},
                object=[1],
            ),
            "request.object: expected an object, got list",
        ),
    ],
)
def test_a_body_that_is_no_admission_review_is_a_bad_review(body: bytes, message: str) -> None:
    with pytest.raises(BadReview) as error:
        answer(body, name="x", handler=_validate, mutating=False)
    assert message in str(error.value)
