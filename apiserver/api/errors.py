"""Failures answered with a ``meta/v1 Status`` body (``k8s.io/apimachinery/pkg/api/errors``).

Every layer raises :class:`StatusError`; the HTTP layer renders :meth:`StatusError.status`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StatusError", "status_object"]

JsonDict = dict[str, Any]


def status_object(
    code: int,
    reason: str,
    message: str,
    details: JsonDict | None = None,
    list_meta: JsonDict | None = None,
) -> JsonDict:
    """A ``meta/v1 Status`` as kube-apiserver renders it."""
    out: JsonDict = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": dict(list_meta or {}),
        "status": "Success" if code < 400 else "Failure",
    }
    if code >= 400:
        out["message"] = message
        if reason:  # StatusReasonUnknown ("") is omitted
            out["reason"] = reason
    if details is not None:
        out["details"] = details
    out["code"] = code
    return out


class StatusError(Exception):
    """A failure answered with a ``Status`` body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: JsonDict | None = None,
        headers: dict[str, str] | None = None,
        *,
        list_meta: JsonDict | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.list_meta = list_meta  # the Status' ListMeta (an inconsistent continue token)

    def status(self) -> JsonDict:
        return status_object(self.code, self.reason, self.message, self.details, self.list_meta)
