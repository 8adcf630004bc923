"""AdmissionReviews: what a webhook is sent, and what of its answer is taken.

A port of ``staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/request/
admissionreview.go`` (``CreateAdmissionObjects``, ``VerifyAdmissionResponse``) and
``webhook/errors/statuserror.go`` (``ToStatusErr``, ``NewDryRunUnsupportedErr``):

* the review's version is the first of the webhook's ``admissionReviewVersions`` that
  kube knows (``v1``, ``v1beta1``);
* a v1 answer must be an ``admission.k8s.io/v1`` ``AdmissionReview`` whose
  ``response.uid`` is the request's; a mutating webhook's ``patch`` comes with its
  ``patchType``, a validating webhook sends neither; a v1beta1 answer is taken as it is
  (a patch is a JSONPatch);
* a refusal becomes ``admission webhook "<name>" denied the request: <message>`` with the
  answer's code (400 when it gives none below 400), reason and details.

Thread-safety: pure functions.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Final

import orjson

from apiserver.api.errors import StatusError

__all__ = [
    "AdmissionResponse",
    "InvalidResponse",
    "dry_run_unsupported",
    "internal_error",
    "parse_response",
    "review_version",
    "to_status_error",
]

JsonDict = dict[str, Any]

GROUP: Final = "admission.k8s.io"
KNOWN_VERSIONS: Final = ("v1", "v1beta1")


class InvalidResponse(Exception):
    """The answer is not a valid review (the text is kube's reason)."""


class Undecodable(InvalidResponse):
    """The answer could not be decoded at all (client-go's decoding error)."""


@dataclass(frozen=True, slots=True)
class AdmissionResponse:
    """The fields taken from an AdmissionReview answer."""

    allowed: bool
    patch: bytes
    patch_type: str
    result: JsonDict | None
    warnings: tuple[str, ...]
    audit_annotations: dict[str, str]


def review_version(versions: Any) -> str:
    """The AdmissionReview version to send, or "" when the webhook accepts none kube knows."""
    for version in versions or []:
        if version in KNOWN_VERSIONS:
            return str(version)
    return ""


def _gvk(api_version: Any, kind: Any) -> str:
    """``schema.GroupVersionKind.String()``."""
    group, _, version = str(api_version or "").rpartition("/")
    return f"{group}/{version}, Kind={kind or ''}"


def _decode(body: bytes, version: str) -> JsonDict:
    """The review in ``body``, decoded as client-go's ``Into`` would.

    Raises:
        Undecodable: not JSON, not an object, or no kind.
    """
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise Undecodable(f"couldn't get version/kind; json parse error: {exc}") from None
    if not isinstance(review, dict):
        raise Undecodable(
            "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{type(review).__name__} into Go value of type struct"
        )
    if not review.get("kind"):
        text = body.decode("utf-8", "replace")
        raise Undecodable(f"Object 'Kind' is missing in '{text}'")
    if review.get("kind") != "AdmissionReview" or review.get("apiVersion") not in (
        f"{GROUP}/v1",
        f"{GROUP}/v1beta1",
    ):
        group, _, v = str(review.get("apiVersion") or "").rpartition("/")
        raise Undecodable(
            f'no kind "{review.get("kind")}" is registered for version "{group}/{v}" in scheme '
            '"pkg/runtime/scheme.go:100"'
        )
    return review


def parse_response(body: bytes, uid: str, version: str, *, mutating: bool) -> AdmissionResponse:
    """``VerifyAdmissionResponse`` of the answer to a ``version`` review with ``uid``.

    Raises:
        Undecodable: the body is not a review (a failure to call the webhook).
        InvalidResponse: the review breaks a rule (an invalid response).
    """
    review = _decode(body, version)
    response = review.get("response")
    if not isinstance(response, dict):
        raise InvalidResponse("webhook response was absent")
    raw_patch = response.get("patch")
    try:
        patch = base64.b64decode(str(raw_patch), validate=True) if raw_patch else b""
    except (binascii.Error, ValueError):
        raise Undecodable("illegal base64 data at input byte 0") from None
    patch_type = response.get("patchType")
    if version == "v1":
        if str(response.get("uid") or "") != uid:
            raise InvalidResponse(
                f'expected response.uid="{uid}", got "{response.get("uid") or ""}"'
            )
        if (review.get("apiVersion"), review.get("kind")) != (f"{GROUP}/v1", "AdmissionReview"):
            raise InvalidResponse(
                f"expected webhook response of {GROUP}/v1, Kind=AdmissionReview, got "
                f"{_gvk(review.get('apiVersion'), review.get('kind'))}"
            )
        if mutating:
            if patch and patch_type is None:
                raise InvalidResponse("webhook returned response.patch but not response.patchType")
            if not patch and patch_type is not None:
                raise InvalidResponse("webhook returned response.patchType but not response.patch")
            if patch_type is not None and not patch_type:
                raise InvalidResponse(
                    f'webhook returned invalid response.patchType of "{patch_type}"'
                )
        else:
            if patch:
                raise InvalidResponse("validating webhook may not return response.patch")
            if patch_type is not None:
                raise InvalidResponse("validating webhook may not return response.patchType")
    elif not mutating:
        patch = b""
    if version != "v1":
        patch_type = "JSONPatch" if patch else ""
    result = response.get("status")
    warnings = tuple(str(w) for w in response.get("warnings") or [] if isinstance(w, str))
    annotations = response.get("auditAnnotations") or {}
    return AdmissionResponse(
        allowed=response.get("allowed") is True,
        patch=patch if mutating else b"",
        patch_type=str(patch_type or ""),
        result=result if isinstance(result, dict) else None,
        warnings=warnings,
        audit_annotations={str(k): str(v) for k, v in dict(annotations).items()},
    )


def to_status_error(webhook: str, result: JsonDict | None) -> StatusError:
    """``ToStatusErr``: the refusal the client gets."""
    result = dict(result or {})
    denied = f'admission webhook "{webhook}" denied the request'
    try:
        code = int(result.get("code") or 0)
    except (TypeError, ValueError):
        code = 0
    code = max(code, 400)
    message = str(result.get("message") or "")
    reason = str(result.get("reason") or "")
    if message:
        text = f"{denied}: {message}"
    elif reason:
        text = f"{denied}: {reason}"
    else:
        text = f"{denied} without explanation"
    details = result.get("details")
    return StatusError(code, reason, text, details if isinstance(details, dict) else None)


def dry_run_unsupported(webhook: str) -> StatusError:
    """``NewDryRunUnsupportedErr``: a dry run reaching a webhook with side effects."""
    return StatusError(400, "BadRequest", f'admission webhook "{webhook}" does not support dry run')


def internal_error(text: str) -> StatusError:
    """``apierrors.NewInternalError``."""
    return StatusError(
        500, "InternalError", f"Internal error occurred: {text}", {"causes": [{"message": text}]}
    )
