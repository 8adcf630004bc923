"""What an answer means: a successful body decoded into the JSON object it must be, an
error status mapped to the narrowest :class:`~manager.errors.ApiError` (client-go
``rest/request.go``'s ``transformResponse``), ``Retry-After`` read as seconds. Pure
functions; safe to share between threads.
"""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Final

import orjson

from manager.client.request import JsonDict
from manager.errors import (
    ApiError,
    api_error_from_status,
)

__all__ = ["ERROR_TEXT_LIMIT", "decode_answer", "error_from_response", "json_object"]

ERROR_TEXT_LIMIT: Final = 300


def decode_answer(
    status: int, retry_after: str, data: bytes, method: str, path: str
) -> JsonDict | ApiError:
    """A write's answer read by :func:`read_response`: the decoded object, or the
    :class:`~manager.errors.ApiError` it is (an error status, or a body that is no JSON
    object)."""
    if not 200 <= status < 300:
        headers = {"Retry-After": retry_after} if retry_after else {}
        return error_from_response(status, headers, data, method, path)
    return json_object(data, method, path)


def json_object(data: bytes, method: str, path: str) -> JsonDict | ApiError:
    """A successful answer's body as the object it must be (an empty body is ``{}``), or
    the ``InvalidResponse`` error it is when it is no JSON object."""
    try:
        decoded = orjson.loads(data) if data.strip() else {}
    except orjson.JSONDecodeError:
        decoded = None
    if not isinstance(decoded, dict):
        text = data[:ERROR_TEXT_LIMIT].decode("utf-8", "replace")
        return ApiError(
            f"{method} {path}: the answer is not a JSON object: {text!r}",
            status=0,
            reason="InvalidResponse",
        )
    return decoded


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


def error_from_response(
    status: int, headers: Mapping[str, str], data: bytes, method: str, path: str
) -> ApiError:
    body: JsonDict | None = None
    try:
        decoded = orjson.loads(data) if data.strip() else None
    except orjson.JSONDecodeError:
        decoded = None
    if isinstance(decoded, dict) and (decoded.get("kind") == "Status" or "message" in decoded):
        body = decoded
    text = " ".join(data[:ERROR_TEXT_LIMIT].decode("utf-8", "replace").split())
    fallback = f"{method} {path}: {text}" if text and body is None else f"{method} {path}"
    return api_error_from_status(
        status,
        body,
        retry_after=_parse_retry_after(headers.get("Retry-After")),
        fallback_message=fallback,
    )
