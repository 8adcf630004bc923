"""Raw HTTP against the API server, for the conformance tests of tests/integration.

The generated kubernetes client raises on every error status and turns bodies into
models; these tests want the status, the headers and the decoded JSON (a Status, say)
as the server sent them. They borrow only the client's host, authentication and
connection pool.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import urllib3

JSON = "application/json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


@dataclass(frozen=True)
class Response:
    """One answer: its status, its body (decoded JSON, else text) and its headers."""

    status: int
    body: Any
    headers: Mapping[str, str]


def _params(query: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Query parameters as the API server reads them (booleans as true/false)."""
    return [
        (k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items()
    ]


def stream(
    api_client: Any,
    method: str,
    path: str,
    *,
    query: Mapping[str, Any] | None = None,
    body: Any = None,
    content_type: str = JSON,
    headers: Mapping[str, str] | None = None,
    read_timeout: float = 30.0,
) -> Any:
    """Send one request; return the unread urllib3 response (the caller releases it).

    A body of bytes is sent unchanged, anything else as JSON. Never raises on status.
    """
    sent = {"Accept": JSON}
    if body is not None:
        sent["Content-Type"] = content_type
    sent.update(headers or {})
    params = _params(query)
    api_client.update_params_for_auth(sent, params, ["BearerToken"], path, method, None)
    url = api_client.configuration.host + path + ("?" + urlencode(params) if params else "")
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    return api_client.rest_client.pool_manager.request(
        method,
        url,
        body=data,
        headers=sent,
        timeout=urllib3.Timeout(connect=10, read=read_timeout),
        preload_content=False,
        retries=False,
    )


def http(
    api_client: Any,
    method: str,
    path: str,
    *,
    query: Mapping[str, Any] | None = None,
    body: Any = None,
    content_type: str = JSON,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """One request, read to the end. Never raises on status."""
    resp = stream(
        api_client,
        method,
        path,
        query=query,
        body=body,
        content_type=content_type,
        headers=headers,
    )
    try:
        raw = resp.read()
    finally:
        resp.release_conn()
    if "json" in resp.headers.get("Content-Type", ""):
        return Response(resp.status, json.loads(raw), resp.headers)
    return Response(resp.status, raw.decode(), resp.headers)


def ok(response: Response, *expected: int) -> Any:
    """The body, once the status is one of `expected` (default 200 or 201)."""
    assert response.status in (expected or (200, 201)), f"HTTP {response.status}: {response.body}"
    return response.body


def merge_patch(api_client: Any, path: str, patch: dict[str, Any]) -> Any:
    """Apply a JSON merge patch; the patched object (asserts 200)."""
    return ok(http(api_client, "PATCH", path, body=patch, content_type=MERGE), 200)


def eventually(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `check` every 0.1 s; fail naming `what` unless it holds within `timeout` s."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.1)


def gone(api_client: Any, path: str) -> Callable[[], bool]:
    """A check for `eventually`: GET `path` answers 404."""
    return lambda: http(api_client, "GET", path).status == 404


@contextmanager
def watching(api_client: Any, path: str, *, read_timeout: float, **query: Any) -> Iterator[Any]:
    """An open `?watch=true` response on `path` (unread), closed on exit."""
    resp = stream(
        api_client, "GET", path, query={"watch": True, **query}, read_timeout=read_timeout
    )
    try:
        yield resp
    finally:
        resp.close()
        resp.release_conn()
