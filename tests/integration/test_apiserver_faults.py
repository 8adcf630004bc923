"""Local API server knobs: fault injection, latency, compaction (410 Gone), counters.

These need the in-process server (``local_server``) and are skipped against a real cluster.
What they check is still the real protocol: a 429 carries Retry-After, an expired watch is
HTTP 200 with one ERROR event, an expired exact LIST is HTTP 410.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.rawhttp import http, ok, watching

pytestmark = pytest.mark.local_only


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


def _cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


# --------------------------------------------------------------------------- injected errors


def test_fail_next_429_with_retry_after(local_server: Any, api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    local_server.faults.fail_next(1, 429, retry_after=3, verb="list", resource="configmaps")

    response = http(api_client, "GET", path)
    assert response.status == 429
    assert response.headers["Retry-After"] == "3"
    assert response.body["kind"] == "Status"
    assert response.body["code"] == 429
    assert response.body["reason"] == "TooManyRequests"

    response = http(api_client, "GET", path)
    assert response.status == 200, "only the next one request fails"
    assert response.body["kind"] == "ConfigMapList"


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
        http(api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps/throttled").status
        == 404
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
    ok(http(api_client, "POST", path, body=_cm("target")), 201)
    local_server.faults.fail_next(2, 500, verb="get", resource="configmaps")

    assert http(api_client, "GET", path).status == 200, "a list is not a get"
    assert http(api_client, "GET", "/api/v1/namespaces/" + namespace).status == 200
    for _ in range(2):
        response = http(api_client, "GET", f"{path}/target")
        assert response.status == 500
        assert response.body["kind"] == "Status"
        assert response.body["code"] == 500
        assert response.body["reason"] == "InternalError"
    assert http(api_client, "GET", f"{path}/target").status == 200


def test_fail_next_on_create_stores_nothing(
    local_server: Any, api_client: Any, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    local_server.faults.fail_next(1, 500, verb="create", resource="configmaps")
    assert http(api_client, "POST", path, body=_cm("not-stored")).status == 500
    assert http(api_client, "GET", f"{path}/not-stored").status == 404
    assert http(api_client, "POST", path, body=_cm("not-stored")).status == 201


def test_clear_cancels_pending_faults(local_server: Any, api_client: Any, namespace: str) -> None:
    local_server.faults.fail_next(5, 500)
    local_server.faults.clear()
    assert http(api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps").status == 200


def test_set_latency_delays_answers(local_server: Any, api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    local_server.faults.set_latency(0.3)
    try:
        started = time.monotonic()
        assert http(api_client, "GET", path).status == 200
        assert time.monotonic() - started >= 0.3
    finally:
        local_server.faults.set_latency(0)


def test_drop_watches_ends_open_streams(local_server: Any, api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    listed = ok(http(api_client, "GET", path), 200)
    with watching(
        api_client,
        path,
        read_timeout=15,
        resourceVersion=listed["metadata"]["resourceVersion"],
        timeoutSeconds=60,
    ) as resp:
        assert resp.status == 200
        ok(http(api_client, "POST", path, body=_cm("before-drop")), 201)
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
    old = ok(http(api_client, "POST", path, body=_cm("old", v="1")), 201)
    old_rv = old["metadata"]["resourceVersion"]
    ok(http(api_client, "PUT", f"{path}/old", body=dict(old, data={"v": "2"})), 200)
    local_server.compact()

    with watching(
        api_client, path, read_timeout=15, resourceVersion=old_rv, timeoutSeconds=10
    ) as resp:
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
    old = ok(http(api_client, "POST", path, body=_cm("exact")), 201)
    old_rv = old["metadata"]["resourceVersion"]
    exact = ok(
        http(
            api_client,
            "GET",
            path,
            query={"resourceVersion": old_rv, "resourceVersionMatch": "Exact"},
        ),
        200,
    )
    assert exact["metadata"]["resourceVersion"] == old_rv
    ok(http(api_client, "POST", path, body=_cm("newer")), 201)
    local_server.compact()

    response = http(
        api_client,
        "GET",
        path,
        query={"resourceVersion": old_rv, "resourceVersionMatch": "Exact"},
    )
    assert response.status == 410
    assert response.body["kind"] == "Status"
    assert response.body["code"] == 410
    assert response.body["reason"] in ("Expired", "Gone")

    fresh = ok(http(api_client, "GET", path), 200)
    assert {"exact", "newer"} <= {i["metadata"]["name"] for i in fresh["items"]}


def test_exact_list_sees_the_past(local_server: Any, api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    first = ok(http(api_client, "POST", path, body=_cm("first")), 201)
    ok(http(api_client, "POST", path, body=_cm("second")), 201)
    past = ok(
        http(
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
    created = ok(http(api_client, "POST", path, body=_cm("rev")), 201)
    # Other writes (namespace clean-up of earlier tests) may land in between: >=, not ==.
    assert local_server.revision >= int(created["metadata"]["resourceVersion"])
    updated = ok(http(api_client, "PUT", f"{path}/rev", body=dict(created, data={"a": "b"})), 200)
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
        ok(http(api_client, "GET", path), 200)
    ok(http(api_client, "POST", path, body=_cm("counted")), 201)
    assert local_server.request_count(verb="list", resource="configmaps") == lists + 3
    assert local_server.request_count(verb="create", resource="configmaps") == creates + 1
    assert local_server.request_count() >= total + 4


# ------------------------------------------------------------ pagination after compaction

INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter, or use the continue token in "
    "this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or "
    "deleted between the time the first chunk was returned and now may show up in the list."
)


def _paged(name: str) -> dict[str, Any]:
    return {**_cm(name), "metadata": {"name": name, "labels": {"page": "yes"}}}


def _names(page: dict[str, Any]) -> list[str]:
    return [o["metadata"]["name"] for o in page["items"]]


def _expired_continue(api_client: Any, path: str, token: str) -> str:
    """The 410 a compacted continue token answers; returns its fresh continue token."""
    response = http(
        api_client, "GET", path, query={"limit": 2, "labelSelector": "page=yes", "continue": token}
    )
    assert response.status == 410, response.body
    status = response.body
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Expired", 410)
    assert status["message"] == INCONSISTENT_CONTINUE
    fresh: str = status["metadata"]["continue"]
    assert fresh and fresh != token
    return fresh


def test_compacted_continue_token_continues_inconsistently(
    local_server: Any, api_client: Any, namespace: str
) -> None:
    """kube's etcd3 store: a continue token whose revision is compacted away answers 410
    with a token that continues after the same key at the latest revision; the rest of
    the list comes once, with what changed meanwhile."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for name in ("c0", "c1", "c2", "c3", "c4"):
        ok(http(api_client, "POST", path, body=_paged(name)), 201)
    first = ok(http(api_client, "GET", path, query={"limit": 2, "labelSelector": "page=yes"}))
    assert _names(first) == ["c0", "c1"]
    ok(http(api_client, "POST", path, body=_paged("c9")), 201)  # after the first page
    ok(http(api_client, "DELETE", f"{path}/c3"))
    local_server.compact()
    token = _expired_continue(api_client, path, first["metadata"]["continue"])
    seen: list[str] = []
    revisions = set()
    while token:
        page = ok(
            http(
                api_client,
                "GET",
                path,
                query={"limit": 2, "labelSelector": "page=yes", "continue": token},
            )
        )
        seen += _names(page)
        revisions.add(page["metadata"]["resourceVersion"])
        token = page["metadata"].get("continue", "")
    assert seen == ["c2", "c4", "c9"]
    assert revisions == {str(local_server.revision)} != {first["metadata"]["resourceVersion"]}


def test_continue_token_of_revision_zero_is_refused(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    token = base64.urlsafe_b64encode(json.dumps({"rv": 0, "start": "x"}).encode()).decode()
    response = http(
        api_client, "GET", path, query={"limit": 2, "labelSelector": "page=yes", "continue": token}
    )
    assert response.status == 400
    assert "continue key is not valid" in response.body["message"]


def test_history_is_compacted_on_a_schedule() -> None:
    """Like kube-apiserver's compactor (every 5 minutes by default, here a knob): each
    round compacts up to the revision the previous round saw and writes once (etcd's
    compact key), so a continue token expires within two rounds."""
    from apiserver.http.server import LocalApiServer

    assert LocalApiServer().compaction_interval == 300.0
    with pytest.raises(ValueError, match="compaction_interval"):
        LocalApiServer(compaction_interval=0)
    path = "/api/v1/namespaces/default/configmaps"
    with LocalApiServer(compaction_interval=0.2) as server:
        api = client.ApiClient(_configuration(server))
        try:
            for name in ("c0", "c1", "c2"):
                ok(http(api, "POST", path, body=_paged(name)), 201)
            first = ok(http(api, "GET", path, query={"limit": 2, "labelSelector": "page=yes"}))
            before = server.revision
            deadline = time.monotonic() + 10
            while server.storage.compacted_revision < before:
                assert time.monotonic() < deadline, "no compaction within 10 s"
                time.sleep(0.05)
            assert server.revision > before  # the compactor's own write
            token = _expired_continue(api, path, first["metadata"]["continue"])
            rest = ok(
                http(
                    api,
                    "GET",
                    path,
                    query={"limit": 2, "labelSelector": "page=yes", "continue": token},
                )
            )
            assert _names(rest) == ["c2"]
        finally:
            api.close()


def _configuration(server: Any) -> Any:
    from kubernetes import config

    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(server.kubeconfig_path), client_configuration=configuration
    )
    return configuration
