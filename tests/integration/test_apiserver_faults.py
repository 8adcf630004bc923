"""Local API server knobs: fault injection, latency, compaction (410 Gone), counters.

These need the in-process server (``local_server``) and are skipped against a real cluster.
What they check is still the real protocol: a 429 carries Retry-After, an expired watch is
HTTP 200 with one ERROR event, an expired exact LIST is HTTP 410.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.local_only


def _open(
    api_client: Any,
    method: str,
    path: str,
    *,
    query: dict[str, Any] | None = None,
    body: Any = None,
    read_timeout: float = 30.0,
) -> Any:
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    params = [
        (k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items()
    ]
    api_client.update_params_for_auth(headers, params, ["BearerToken"], path, method, None)
    url = api_client.configuration.host + path + ("?" + urlencode(params) if params else "")
    return api_client.rest_client.pool_manager.request(
        method,
        url,
        body=None if body is None else json.dumps(body).encode(),
        headers=headers,
        timeout=urllib3.Timeout(connect=10, read=read_timeout),
        preload_content=False,
        retries=False,
    )


def _http(
    api_client: Any,
    method: str,
    path: str,
    *,
    query: dict[str, Any] | None = None,
    body: Any = None,
) -> tuple[int, Any, Any]:
    """One request; (status, headers, JSON body or text). Never raises on status."""
    resp = _open(api_client, method, path, query=query, body=body)
    try:
        raw = resp.read()
    finally:
        resp.release_conn()
    if "json" in resp.headers.get("Content-Type", ""):
        return resp.status, resp.headers, json.loads(raw)
    return resp.status, resp.headers, raw.decode()


def _ok(result: tuple[int, Any, Any], *expected: int) -> Any:
    status, _, body = result
    assert status in (expected or (200, 201)), f"HTTP {status}: {body}"
    return body


def _events(resp: Any) -> Iterator[dict[str, Any]]:
    buffer = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)
    if buffer.strip():
        yield json.loads(buffer)


@contextmanager
def _watch(api_client: Any, path: str, **query: Any) -> Iterator[Any]:
    resp = _open(api_client, "GET", path, query={"watch": True, **query}, read_timeout=15)
    try:
        yield resp
    finally:
        resp.close()
        resp.release_conn()


def _cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


# --------------------------------------------------------------------------- injected errors


def test_fail_next_429_with_retry_after(local_server: Any, api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    local_server.faults.fail_next(1, 429, retry_after=3, verb="list", resource="configmaps")

    status, headers, body = _http(api_client, "GET", path)
    assert status == 429
    assert headers["Retry-After"] == "3"
    assert body["kind"] == "Status"
    assert body["code"] == 429
    assert body["reason"] == "TooManyRequests"

    status, _, body = _http(api_client, "GET", path)
    assert status == 200, "only the next one request fails"
    assert body["kind"] == "ConfigMapList"


def test_fail_next_429_reaches_typed_client(
    local_server: Any, api_client: Any, namespace: str
) -> None:
    # A create: urllib3 never repeats a POST, so the typed client sees the 429 itself.
    local_server.faults.fail_next(1, 429, retry_after=1, verb="create", resource="configmaps")
    core = client.CoreV1Api(api_client)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map(namespace, _cm("throttled"))
    assert caught.value.status == 429
    assert caught.value.headers["Retry-After"] == "1"
    assert json.loads(caught.value.body)["reason"] == "TooManyRequests"
    assert (
        _http(api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps/throttled")[0] == 404
    )


def test_official_client_repeats_get_after_429_retry_after(
    local_server: Any, api_client: Any, namespace: str
) -> None:
    """Documents the client: urllib3's default Retry honours Retry-After on 429 for GETs.

    kube.py must account for this hidden retry (DESIGN 3.1: one retry layer per failure).
    """
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, _cm("retried"))
    gets = local_server.request_count(verb="get", resource="configmaps")
    local_server.faults.fail_next(1, 429, retry_after=1, verb="get", resource="configmaps")
    started = time.monotonic()
    assert core.read_namespaced_config_map("retried", namespace).metadata.name == "retried"
    assert time.monotonic() - started >= 1.0, "Retry-After honoured"
    assert local_server.request_count(verb="get", resource="configmaps") == gets + 2


def test_fail_next_500_counts_and_filters(
    local_server: Any, api_client: Any, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    _ok(_http(api_client, "POST", path, body=_cm("target")), 201)
    local_server.faults.fail_next(2, 500, verb="get", resource="configmaps")

    assert _http(api_client, "GET", path)[0] == 200, "a list is not a get"
    assert _http(api_client, "GET", "/api/v1/namespaces/" + namespace)[0] == 200
    for _ in range(2):
        status, _, body = _http(api_client, "GET", f"{path}/target")
        assert status == 500
        assert body["kind"] == "Status"
        assert body["code"] == 500
        assert body["reason"] == "InternalError"
    assert _http(api_client, "GET", f"{path}/target")[0] == 200


def test_fail_next_on_create_stores_nothing(
    local_server: Any, api_client: Any, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    local_server.faults.fail_next(1, 500, verb="create", resource="configmaps")
    assert _http(api_client, "POST", path, body=_cm("not-stored"))[0] == 500
    assert _http(api_client, "GET", f"{path}/not-stored")[0] == 404
    assert _http(api_client, "POST", path, body=_cm("not-stored"))[0] == 201


def test_clear_cancels_pending_faults(local_server: Any, api_client: Any, namespace: str) -> None:
    local_server.faults.fail_next(5, 500)
    local_server.faults.clear()
    assert _http(api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps")[0] == 200


def test_set_latency_delays_answers(local_server: Any, api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    local_server.faults.set_latency(0.3)
    try:
        started = time.monotonic()
        assert _http(api_client, "GET", path)[0] == 200
        assert time.monotonic() - started >= 0.3
    finally:
        local_server.faults.set_latency(0)


def test_drop_watches_ends_open_streams(local_server: Any, api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    listed = _ok(_http(api_client, "GET", path), 200)
    with _watch(
        api_client,
        path,
        resourceVersion=listed["metadata"]["resourceVersion"],
        timeoutSeconds=60,
    ) as resp:
        assert resp.status == 200
        _ok(_http(api_client, "POST", path, body=_cm("before-drop")), 201)
        events = _events(resp)
        first = next(events)
        assert first["type"] == "ADDED"
        assert first["object"]["metadata"]["name"] == "before-drop"
        started = time.monotonic()
        assert local_server.faults.drop_watches() >= 1
        assert list(events) == []
        assert time.monotonic() - started < 5


# --------------------------------------------------------------------------- compaction / 410


def test_watch_from_compacted_version_is_one_error_event(
    local_server: Any, api_client: Any, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    old = _ok(_http(api_client, "POST", path, body=_cm("old", v="1")), 201)
    old_rv = old["metadata"]["resourceVersion"]
    _ok(_http(api_client, "PUT", f"{path}/old", body=dict(old, data={"v": "2"})), 200)
    local_server.compact()

    with _watch(api_client, path, resourceVersion=old_rv, timeoutSeconds=10) as resp:
        assert resp.status == 200, "an expired watch is never an HTTP 410"
        events = list(_events(resp))
    assert len(events) == 1, events
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status"
    assert status["apiVersion"] == "v1"
    assert status["status"] == "Failure"
    assert status["code"] == 410
    assert status["reason"] == "Expired"


def test_exact_list_at_compacted_version_is_410(
    local_server: Any, api_client: Any, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    old = _ok(_http(api_client, "POST", path, body=_cm("exact")), 201)
    old_rv = old["metadata"]["resourceVersion"]
    exact = _ok(
        _http(
            api_client,
            "GET",
            path,
            query={"resourceVersion": old_rv, "resourceVersionMatch": "Exact"},
        ),
        200,
    )
    assert exact["metadata"]["resourceVersion"] == old_rv
    _ok(_http(api_client, "POST", path, body=_cm("newer")), 201)
    local_server.compact()

    status, _, body = _http(
        api_client,
        "GET",
        path,
        query={"resourceVersion": old_rv, "resourceVersionMatch": "Exact"},
    )
    assert status == 410
    assert body["kind"] == "Status"
    assert body["code"] == 410
    assert body["reason"] in ("Expired", "Gone")

    fresh = _ok(_http(api_client, "GET", path), 200)
    assert {"exact", "newer"} <= {i["metadata"]["name"] for i in fresh["items"]}


def test_exact_list_sees_the_past(local_server: Any, api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    first = _ok(_http(api_client, "POST", path, body=_cm("first")), 201)
    _ok(_http(api_client, "POST", path, body=_cm("second")), 201)
    past = _ok(
        _http(
            api_client,
            "GET",
            path,
            query={
                "resourceVersion": first["metadata"]["resourceVersion"],
                "resourceVersionMatch": "Exact",
            },
        ),
        200,
    )
    names = {i["metadata"]["name"] for i in past["items"]}
    assert "first" in names
    assert "second" not in names


# --------------------------------------------------------------------------- counters


def test_revision_tracks_writes(local_server: Any, api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = _ok(_http(api_client, "POST", path, body=_cm("rev")), 201)
    # Other writes (namespace clean-up of earlier tests) may land in between: >=, not ==.
    assert local_server.revision >= int(created["metadata"]["resourceVersion"])
    updated = _ok(_http(api_client, "PUT", f"{path}/rev", body=dict(created, data={"a": "b"})), 200)
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert local_server.revision >= int(updated["metadata"]["resourceVersion"])


def test_request_count_by_verb_and_resource(
    local_server: Any, api_client: Any, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    lists = local_server.request_count(verb="list", resource="configmaps")
    creates = local_server.request_count(verb="create", resource="configmaps")
    total = local_server.request_count()
    for _ in range(3):
        _ok(_http(api_client, "GET", path), 200)
    _ok(_http(api_client, "POST", path, body=_cm("counted")), 201)
    assert local_server.request_count(verb="list", resource="configmaps") == lists + 3
    assert local_server.request_count(verb="create", resource="configmaps") == creates + 1
    assert local_server.request_count() >= total + 4
