"""Admission reviews: the request a handler sees and the answer it gives
(controller-runtime ``pkg/webhook/admission``: ``Request``, ``Response``, ``Allowed``,
``Denied``, ``Errored``, ``PatchResponseFromRaw``; kopf's admission handlers).

* :class:`AdmissionRequest` is a typed, read-only view of an ``admission.k8s.io/v1``
  ``AdmissionReview``'s request: who asks (:class:`UserInfo`), to do what
  (``operation``) to which object (``kind``, ``resource``, ``namespace``, ``name``),
  with ``object`` and ``old_object`` as plain dicts. A handler is a plain function of
  it: testable without a server (``manager.testing.review``).
* :class:`Admission` is the answer: allowed or denied (a message, an HTTP code: 403 by
  default, as ``admission.Denied``), with warnings for the client and audit
  annotations; a mutating handler may carry the changed object in it.
* :func:`review` turns a request body into the answer body, as the server sends it.

A validating handler returns an :class:`Admission`. A mutating handler returns the
changed object (the request's ``object`` is its own copy: change it and return it), or
an :class:`Admission` (to deny, to allow unchanged, or ``Admission.allow(object=obj,
warnings=[...])`` for both); the framework computes the RFC 6902 JSON Patch from the
object the API server sent to the one returned (:mod:`manager.webhook.jsonpatch`), as
``PatchResponseFromRaw`` does, and answers it with ``patchType: JSONPatch``.

What kube-apiserver would refuse is refused here, with a message naming the mistake
(``Errored(500)``, a denial the API server passes on to its client): a mutating answer
that is neither an object nor an :class:`Admission`; a changed object for an operation
without one (DELETE, CONNECT: kube's ``attempted to modify the object, which is not
supported for this operation``); a changed ``apiVersion`` or ``kind`` (the patched
object would decode to another type); a changed ``metadata.namespace`` (refused on
create, immutable after); a changed ``metadata.name`` except on CREATE (immutable);
an object from a validating webhook (``validating webhook may not return
response.patch``); a value that is not JSON. A handler that raises is answered
``Errored(500)`` with the exception's message, logged once with its traceback and
counted, as controller-runtime recovers a panicking handler.

A body that is no ``admission.k8s.io/v1`` ``AdmissionReview`` with a request and a
``uid`` raises :class:`BadReview` (the server answers it HTTP 400).

Thread-safe: requests and answers are immutable values; :func:`review` keeps no state.
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

import orjson
from opentelemetry import trace

from manager.keys import JsonDict
from manager.logs import reconcile_context
from manager.webhook.jsonpatch import PatchError, create_patch
from manager.webhook.metrics import HANDLER_ERRORS, PANICS

__all__ = [
    "ADMISSION_REVIEW",
    "OPERATIONS",
    "REASONS",
    "Admission",
    "AdmissionRequest",
    "BadReview",
    "GroupVersionKind",
    "GroupVersionResource",
    "MutatingHandler",
    "Operation",
    "UserInfo",
    "ValidatingHandler",
    "review",
]

logger = logging.getLogger(__name__)

ADMISSION_REVIEW: Final = "admission.k8s.io/v1"
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
OPERATIONS: Final = ("CREATE", "UPDATE", "DELETE", "CONNECT")

# kube's metav1 StatusReason for a denial's HTTP code (k8s.io/apimachinery errors.go)
REASONS: Final = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
# an audit annotation's key is "<webhook name>/<key>": the key is a qualified name's name part
_AUDIT_KEY: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


class BadReview(ValueError):
    """A body that is not an AdmissionReview (or ConversionReview) this server takes."""


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    """``metav1.GroupVersionKind``: ``group`` is "" for the core group."""

    group: str
    version: str
    kind: str


@dataclass(frozen=True, slots=True)
class GroupVersionResource:
    """``metav1.GroupVersionResource``."""

    group: str
    version: str
    resource: str


@dataclass(frozen=True, slots=True)
class UserInfo:
    """Who makes the request (``authenticationv1.UserInfo``)."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """The request of an ``admission.k8s.io/v1`` AdmissionReview.

    ``object`` is the object as it would be stored (CREATE, UPDATE; None for DELETE and
    most CONNECTs), ``old_object`` the stored one (UPDATE, DELETE; else None); each is
    the handler's own decoded copy. ``kind``/``resource`` are what the webhook's rules
    matched (with ``matchPolicy: Equivalent``, possibly converted to a version the rules
    name); ``request_kind``/``request_resource`` what the client asked for. ``options``
    are the operation's options (``CreateOptions``, ``UpdateOptions``, ...) or None.
    """

    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    operation: Operation
    user_info: UserInfo
    name: str = ""
    namespace: str = ""
    sub_resource: str = ""
    request_kind: GroupVersionKind | None = None
    request_resource: GroupVersionResource | None = None
    request_sub_resource: str = ""
    object: JsonDict | None = None
    old_object: JsonDict | None = None
    dry_run: bool = False
    options: JsonDict | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    """An admission answer. Make one with :meth:`allow` or :meth:`deny`.

    Warnings go back to the client (kubectl prints them): kube asks to keep each under
    120 characters, truncates those over 256 and drops them past 4 KiB in all.
    ``audit_annotations`` are recorded in the audit event as
    ``<webhook name>/<key>: value`` (a key is a qualified name's name part).
    ``object`` (mutating webhooks only) is the changed object to patch to.
    """

    allowed: bool
    message: str = ""
    code: int = 200
    reason: str = ""
    warnings: tuple[str, ...] = ()
    audit_annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    object: JsonDict | None = None

    def __post_init__(self) -> None:
        problems = []
        if self.allowed and self.code != 200:
            problems.append(f"code: an allowed request answers 200, got {self.code}")
        if not self.allowed and not 400 <= self.code <= 599:
            problems.append(f"code: a denial's code is an HTTP error (400-599), got {self.code}")
        warnings: Any = self.warnings
        if isinstance(warnings, str):
            problems.append("warnings: a list of strings, got a string")
        elif not all(isinstance(w, str) and w for w in warnings):
            problems.append(f"warnings: each a non-empty string, got {list(warnings)!r}")
        audit: Mapping[Any, Any] = self.audit_annotations
        for key, value in audit.items():
            if not isinstance(key, str) or len(key) > 63 or not _AUDIT_KEY.match(key):
                problems.append(
                    f"audit_annotations: key {key!r} must be 63 characters at most: "
                    "alphanumerics, '-', '_', '.', starting and ending alphanumeric"
                )
            elif not isinstance(value, str):
                problems.append(f"audit_annotations[{key}]: a string, got {value!r}")
        changed: Any = self.object
        if changed is not None and not isinstance(changed, dict):
            problems.append(f"object: the changed object (a dict), got {type(changed).__name__}")
        if problems:
            raise ValueError("; ".join(problems))
        object.__setattr__(self, "warnings", tuple(self.warnings))

    @classmethod
    def allow(
        cls,
        message: str = "",
        *,
        warnings: Sequence[str] = (),
        audit_annotations: Mapping[str, str] | None = None,
        object: JsonDict | None = None,
    ) -> Admission:
        """Allow the request (with ``object``: as changed, for a mutating webhook)."""
        return cls(
            True,
            message,
            warnings=_warnings(warnings),
            audit_annotations=MappingProxyType(dict(audit_annotations or {})),
            object=object,
        )

    @classmethod
    def deny(
        cls,
        message: str,
        *,
        code: int = 403,
        reason: str = "",
        warnings: Sequence[str] = (),
        audit_annotations: Mapping[str, str] | None = None,
    ) -> Admission:
        """Deny the request: the API server answers its client ``code`` (403 by default)
        with ``admission webhook "<name>" denied the request: <message>``. ``reason``
        defaults to kube's for the code (``Forbidden``, ``Invalid`` for 422, ...)."""
        return cls(
            False,
            message,
            code,
            reason or REASONS.get(code, ""),
            _warnings(warnings),
            MappingProxyType(dict(audit_annotations or {})),
        )


def _warnings(warnings: Sequence[str]) -> tuple[str, ...]:
    # a string is a sequence of strings too: leave it whole for the check to refuse
    return warnings if isinstance(warnings, str) else tuple(warnings)  # type: ignore[return-value]


ValidatingHandler = Callable[[AdmissionRequest], Admission]
MutatingHandler = Callable[[AdmissionRequest], "JsonDict | Admission"]

_EMPTY_USER: Final = UserInfo()


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadReview(f"request.{key}: expected a string, got {value!r}")
    return value


def _gvk(data: Any, where: str) -> GroupVersionKind:
    if not isinstance(data, dict):
        raise BadReview(f"request.{where}: expected a group, version and kind, got {data!r}")
    return GroupVersionKind(data.get("group") or "", data.get("version") or "", data["kind"])


def _gvr(data: Any, where: str) -> GroupVersionResource:
    if not isinstance(data, dict):
        raise BadReview(f"request.{where}: expected a group, version and resource, got {data!r}")
    return GroupVersionResource(
        data.get("group") or "", data.get("version") or "", data["resource"]
    )


def _user(data: Any) -> UserInfo:
    if not data:
        return _EMPTY_USER
    if not isinstance(data, dict):
        raise BadReview(f"request.userInfo: expected a mapping, got {data!r}")
    extra = data.get("extra")
    return UserInfo(
        data.get("username") or "",
        data.get("uid") or "",
        tuple(data.get("groups") or ()),
        MappingProxyType({k: tuple(v or ()) for k, v in extra.items()})
        if extra
        else _EMPTY_USER.extra,
    )


def _object(data: Mapping[str, Any], key: str) -> JsonDict | None:
    value = data.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise BadReview(f"request.{key}: expected an object, got {type(value).__name__}")


def decode(body: bytes, kind: str = "AdmissionReview", api_version: str = ADMISSION_REVIEW) -> Any:
    """The ``request`` of a review body (``kind`` of ``api_version``), a mapping with a
    ``uid``.

    Raises:
        BadReview: not JSON, another kind or version, no request, no uid.
    """
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadReview(f"the body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadReview(f"expected a {kind} object, got {type(doc).__name__}")
    if doc.get("kind") != kind or doc.get("apiVersion") != api_version:
        raise BadReview(
            f"expected a {kind} of {api_version}, got kind={doc.get('kind')!r} "
            f"apiVersion={doc.get('apiVersion')!r}"
        )
    request = doc.get("request")
    if not isinstance(request, dict):
        raise BadReview(f"the {kind} has no request")
    uid = request.get("uid")
    if not uid or not isinstance(uid, str):
        raise BadReview(f"the {kind}'s request has no uid")
    return request


def admission_request(request: Mapping[str, Any]) -> AdmissionRequest:
    """The typed view of a decoded review's ``request``.

    Raises:
        BadReview: a field of the wrong shape, or an unknown operation.
    """
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise BadReview(
            f"request.operation: expected one of {', '.join(OPERATIONS)}, got {operation!r}"
        )
    try:
        kind = _gvk(request.get("kind"), "kind")
        resource = _gvr(request.get("resource"), "resource")
        request_kind = request.get("requestKind")
        request_resource = request.get("requestResource")
        options = request.get("options")
        return AdmissionRequest(
            uid=request["uid"],
            kind=kind,
            resource=resource,
            operation=operation,
            user_info=_user(request.get("userInfo")),
            name=_text(request, "name"),
            namespace=_text(request, "namespace"),
            sub_resource=_text(request, "subResource"),
            request_kind=kind if request_kind is None else _gvk(request_kind, "requestKind"),
            request_resource=resource
            if request_resource is None
            else _gvr(request_resource, "requestResource"),
            request_sub_resource=_text(request, "requestSubResource"),
            object=_object(request, "object"),
            old_object=_object(request, "oldObject"),
            dry_run=request.get("dryRun") is True,
            options=options if isinstance(options, dict) else None,
        )
    except KeyError as exc:
        raise BadReview(f"request: {exc.args[0]} is missing") from None
    except (TypeError, AttributeError) as exc:
        raise BadReview(f"request: malformed: {exc}") from None


def _answer(uid: str, admission: Admission, patch: bytes | None = None) -> bytes:
    response: JsonDict = {"uid": uid, "allowed": admission.allowed}
    if not admission.allowed:
        status: JsonDict = {"status": "Failure", "code": admission.code}
        if admission.reason:
            status["reason"] = admission.reason
        if admission.message:
            status["message"] = admission.message
        response["status"] = status
    elif admission.message:
        response["status"] = {"status": "Success", "code": 200, "message": admission.message}
    if admission.warnings:
        response["warnings"] = list(admission.warnings)
    if admission.audit_annotations:
        response["auditAnnotations"] = dict(admission.audit_annotations)
    if patch is not None:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(patch).decode("ascii")
    return orjson.dumps(
        {"apiVersion": ADMISSION_REVIEW, "kind": "AdmissionReview", "response": response}
    )


def errored(message: str, code: int = 500) -> Admission:
    """controller-runtime's ``admission.Errored``: a denial carrying an error."""
    return Admission(False, message, code, REASONS.get(code, ""))


class _HandlerMistake(Exception):
    """What a handler returned cannot be answered (the message says why)."""


def _meta(obj: Mapping[str, Any], key: str) -> Any:
    meta = obj.get("metadata")
    return meta.get(key) if isinstance(meta, dict) else None


def _check_change(request: AdmissionRequest, original: JsonDict, changed: JsonDict) -> None:
    for key in ("apiVersion", "kind"):
        if changed.get(key) != original.get(key):
            raise _HandlerMistake(
                f"the handler changed {key} ({original.get(key)!r} to {changed.get(key)!r}): "
                "the API server decodes the patched object as the kind it sent"
            )
    if _meta(changed, "namespace") != _meta(original, "namespace"):
        raise _HandlerMistake(
            f"the handler changed metadata.namespace ({_meta(original, 'namespace')!r} to "
            f"{_meta(changed, 'namespace')!r}): the API server refuses another namespace"
        )
    if request.operation != "CREATE" and _meta(changed, "name") != _meta(original, "name"):
        raise _HandlerMistake(
            f"the handler changed metadata.name ({_meta(original, 'name')!r} to "
            f"{_meta(changed, 'name')!r}) on {request.operation}: a name is immutable"
        )


def _patch(
    body: bytes, request: AdmissionRequest, admission: Admission, mutating: bool
) -> bytes | None:
    """The JSON Patch (bytes) to the changed object, None when nothing changed."""
    changed = admission.object
    if changed is None:
        return None
    if not mutating:
        raise _HandlerMistake(
            "a validating webhook cannot change the object (kube: validating webhook may "
            "not return response.patch): make it a MutatingWebhook"
        )
    original = orjson.loads(body)["request"].get("object")
    if original is None:
        raise _HandlerMistake(
            f"the handler returned an object for a {request.operation}, which has none to "
            "change (kube: attempted to modify the object, which is not supported for "
            "this operation)"
        )
    _check_change(request, original, changed)
    try:
        ops = create_patch(original, changed)
    except PatchError as exc:
        raise _HandlerMistake(f"the changed object is not JSON: {exc}") from None
    return orjson.dumps(ops) if ops else None


def review(
    body: bytes,
    *,
    name: str,
    handler: Callable[[AdmissionRequest], Any],
    mutating: bool,
    path: str = "",
) -> tuple[AdmissionRequest, Admission, bytes]:
    """Answer one AdmissionReview body with ``handler`` (the webhook ``name``, served
    at ``path``): the request, the admission given, and the AdmissionReview to send.

    Raises:
        BadReview: the body is not an ``admission.k8s.io/v1`` AdmissionReview with a
            request and a uid (an HTTP 400).
    """
    request = admission_request(decode(body))
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(
            {
                "webhook": name,
                "operation": request.operation,
                "k8s.namespace.name": request.namespace,
                "k8s.object.name": request.name,
                "uid": request.uid,
                "resource": request.resource.resource,
            }
        )
    context = {
        "webhook": name,
        "operation": request.operation,
        "namespace": request.namespace,
        "name": request.name,
        "uid": request.uid,
    }
    span_context = span.get_span_context()
    if span_context.is_valid:
        context["trace_id"] = format(span_context.trace_id, "032x")
    token = reconcile_context.set(context)
    try:
        try:
            result = handler(request)
        except Exception as exc:
            PANICS.inc()
            HANDLER_ERRORS.labels(path).inc()
            logger.error("webhook handler failed", exc_info=True)
            if span.is_recording():
                span.record_exception(exc)
                span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
            admission = errored(f"{type(exc).__name__}: {exc}")
            return request, admission, _answer(request.uid, admission)
        try:
            if isinstance(result, Admission):
                admission = result
            elif isinstance(result, dict) and mutating:
                admission = Admission(True, object=result)
            else:
                expected = (
                    "the changed object (a dict) or an Admission" if mutating else "an Admission"
                )
                raise _HandlerMistake(
                    f"the handler returned {type(result).__name__}, expected {expected}"
                )
            patch = _patch(body, request, admission, mutating)
        except _HandlerMistake as exc:
            HANDLER_ERRORS.labels(path).inc()
            logger.error("webhook handler answered what cannot be sent", extra={"why": str(exc)})
            admission = errored(f"{'mutating' if mutating else 'validating'} webhook: {exc}")
            return request, admission, _answer(request.uid, admission)
        if span.is_recording():
            span.set_attribute("allowed", admission.allowed)
            if patch is not None:
                span.set_attribute("patched", True)
        return request, admission, _answer(request.uid, admission, patch)
    finally:
        reconcile_context.reset(token)
