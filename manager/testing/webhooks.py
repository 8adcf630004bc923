"""Test a webhook's handler without a server: build the request the API server would
send, answer it exactly as the webhook server does (the same code path: the review's
JSON, the handler, the JSON Patch computed from its changed object), and get the outcome
back: allowed or denied, the code and message, the warnings, and for a mutating handler
the object with the patch applied.

::

    from manager.testing import review

    def test_replicas_are_defaulted() -> None:
        outcome = review(DEFAULT_WIDGET, {"apiVersion": "example.com/v1", "kind": "Widget",
                                          "metadata": {"name": "w"}, "spec": {}})
        assert outcome.allowed
        assert outcome.object["spec"]["replicas"] == 1

    def test_only_admins_delete() -> None:
        outcome = review(VALIDATE_WIDGET, operation="DELETE", old_object=widget, user="bob")
        assert not outcome.allowed and outcome.code == 403

Pass the declaration (``ValidatingWebhook``, ``MutatingWebhook``) to be judged exactly as
it is served; a bare handler function is judged as a mutating one (it may return the
changed object). :func:`convert_objects` does the same for a CRD's
:class:`~manager.webhook.conversion.Conversion`.

Thread-safe: pure functions.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import orjson

from manager.keys import JsonDict
from manager.resources import Resource, UnknownResource, builtin
from manager.webhook.admission import ADMISSION_REVIEW, AdmissionRequest
from manager.webhook.admission import admission_request as typed_request
from manager.webhook.admission import review as answer_review
from manager.webhook.configuration import MutatingWebhook, ValidatingWebhook
from manager.webhook.conversion import CONVERSION_REVIEW, Conversion, convert
from manager.webhook.jsonpatch import apply_patch

__all__ = ["AdmissionOutcome", "admission_request", "convert_objects", "review"]


@dataclass(frozen=True, slots=True)
class AdmissionOutcome:
    """What the API server would get back from a webhook, and what it would store."""

    allowed: bool
    code: int  # 200 when allowed, else the denial's HTTP code (500: the handler failed)
    message: str
    reason: str
    warnings: tuple[str, ...]
    audit_annotations: Mapping[str, str]
    patch: list[JsonDict]  # the JSON Patch sent (empty: the object is unchanged)
    object: JsonDict | None  # the request's object with the patch applied
    response: JsonDict = field(repr=False)  # the AdmissionReview's response, as sent


def _gvk_of(obj: Mapping[str, Any] | None) -> tuple[str, str, str]:
    if not obj:
        return "", "", ""
    api_version = str(obj.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    return group, version, str(obj.get("kind") or "")


def _resource_of(group: str, version: str, kind: str) -> tuple[str, str, str]:
    api_version = f"{group}/{version}" if group else version
    try:
        found = builtin(f"{api_version}/{kind}")
    except (UnknownResource, ValueError):
        return group, version, kind.lower() + "s"
    return found.group, found.version, found.plural


def _review_body(
    obj: JsonDict | None,
    *,
    operation: str,
    old_object: JsonDict | None,
    user: str,
    groups: Sequence[str],
    dry_run: bool,
    namespace: str | None,
    name: str | None,
    resource: Resource | str | None,
    sub_resource: str,
    options: JsonDict | None,
    uid: str | None,
) -> bytes:
    source = obj if obj is not None else old_object
    group, version, kind = _gvk_of(source)
    if isinstance(resource, Resource):
        r_group, r_version, plural = resource.group, resource.version, resource.plural
        group, version, kind = group or r_group, version or r_version, kind or resource.kind
    elif isinstance(resource, str):
        r_group, r_version, plural = group, version, resource
    else:
        r_group, r_version, plural = _resource_of(group, version, kind)
    meta = (source or {}).get("metadata") or {}
    request: JsonDict = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": r_group, "version": r_version, "resource": plural},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": r_group, "version": r_version, "resource": plural},
        "name": meta.get("name", "") if name is None else name,
        "namespace": meta.get("namespace", "") if namespace is None else namespace,
        "operation": operation,
        "userInfo": {"username": user, "groups": list(groups)},
        "object": obj,
        "oldObject": old_object,
        "dryRun": dry_run,
        "options": options,
    }
    if sub_resource:
        request["subResource"] = request["requestSubResource"] = sub_resource
    review = {"apiVersion": ADMISSION_REVIEW, "kind": "AdmissionReview", "request": request}
    return orjson.dumps(review)


def admission_request(
    obj: JsonDict | None = None,
    *,
    operation: str = "CREATE",
    old_object: JsonDict | None = None,
    user: str = "kubernetes-admin",
    groups: Sequence[str] = ("system:masters", "system:authenticated"),
    dry_run: bool = False,
    namespace: str | None = None,
    name: str | None = None,
    resource: Resource | str | None = None,
    sub_resource: str = "",
    options: JsonDict | None = None,
    uid: str | None = None,
) -> AdmissionRequest:
    """The :class:`~manager.webhook.admission.AdmissionRequest` the API server would send
    for ``operation`` on ``obj`` (and ``old_object``): kind from the object's
    ``apiVersion`` and ``kind``, resource from the built-in table (or ``resource``: a
    :class:`~manager.resources.Resource` or a plural), name and namespace from its
    metadata unless given."""
    body = _review_body(
        obj,
        operation=operation,
        old_object=old_object,
        user=user,
        groups=groups,
        dry_run=dry_run,
        namespace=namespace,
        name=name,
        resource=resource,
        sub_resource=sub_resource,
        options=options,
        uid=uid,
    )
    return typed_request(orjson.loads(body)["request"])


def review(
    webhook: ValidatingWebhook | MutatingWebhook | Callable[[AdmissionRequest], Any],
    obj: JsonDict | None = None,
    *,
    operation: str = "CREATE",
    old_object: JsonDict | None = None,
    user: str = "kubernetes-admin",
    groups: Sequence[str] = ("system:masters", "system:authenticated"),
    dry_run: bool = False,
    namespace: str | None = None,
    name: str | None = None,
    resource: Resource | str | None = None,
    sub_resource: str = "",
    options: JsonDict | None = None,
) -> AdmissionOutcome:
    """Answer an AdmissionReview for ``operation`` on ``obj`` with ``webhook`` (a
    declaration, or a bare handler, judged as a mutating one) as the webhook server
    does, and return the outcome: for a mutating webhook, ``object`` is ``obj`` with the
    answered JSON Patch applied. A handler that raises gives a denial with code 500 and
    its message, as on the server (and its traceback in the log)."""
    if isinstance(webhook, ValidatingWebhook | MutatingWebhook):
        handler: Callable[[AdmissionRequest], Any] = webhook.handler
        hook_name, mutating, path = webhook.name, webhook.mutating, webhook.served_path
    else:
        handler, mutating, path = webhook, True, ""
        hook_name = getattr(webhook, "__name__", "handler")
    body = _review_body(
        obj,
        operation=operation,
        old_object=old_object,
        user=user,
        groups=groups,
        dry_run=dry_run,
        namespace=namespace,
        name=name,
        resource=resource,
        sub_resource=sub_resource,
        options=options,
        uid=None,
    )
    _, _, sent = answer_review(body, name=hook_name, handler=handler, mutating=mutating, path=path)
    response: JsonDict = orjson.loads(sent)["response"]
    patch: list[JsonDict] = []
    if response.get("patch"):
        patch = orjson.loads(base64.b64decode(response["patch"]))
    original = orjson.loads(body)["request"]["object"]
    patched = apply_patch(original, patch) if patch else original
    status = response.get("status") or {}
    return AdmissionOutcome(
        allowed=bool(response["allowed"]),
        code=int(status.get("code", 200)),
        message=str(status.get("message", "")),
        reason=str(status.get("reason", "")),
        warnings=tuple(response.get("warnings") or ()),
        audit_annotations=MappingProxyType(dict(response.get("auditAnnotations") or {})),
        patch=patch,
        object=patched,
        response=response,
    )


def convert_objects(
    conversion: Conversion, objects: Sequence[JsonDict], api_version: str
) -> list[JsonDict]:
    """Convert ``objects`` to ``api_version`` (``example.com/v2``) as the webhook server
    answers a ConversionReview for them: through the hub, metadata kept.

    Raises:
        AssertionError: the conversion failed; the message is the one the API server
            would pass on.
    """
    body = orjson.dumps(
        {
            "apiVersion": CONVERSION_REVIEW,
            "kind": "ConversionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "desiredAPIVersion": api_version,
                "objects": list(objects),
            },
        }
    )
    ok, failure, sent = convert(body, conversion)
    if not ok:
        raise AssertionError(f"conversion to {api_version} failed: {failure}")
    converted: list[JsonDict] = orjson.loads(sent)["response"]["convertedObjects"]
    return converted
