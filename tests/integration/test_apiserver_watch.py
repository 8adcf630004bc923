"""Conformance: watch streams.

From a resourceVersion (only later events), ADDED/MODIFIED/DELETED, bookmarks,
``timeoutSeconds``, label-selector transitions, and ``sendInitialEvents`` (WatchList),
as kube-apiserver 1.3x serves them (DESIGN §5). Streams are read raw, line by line, the
way ``kubernetes.watch`` reads them; one test uses ``kubernetes.watch.Watch`` itself.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client, watch

from tests.integration.rawhttp import http, merge_patch, ok, watching


class WatchStream:
    """An open watch response; iterate it for decoded events until the server ends it."""

    def __init__(self, resp: Any) -> None:
        self.resp = resp
        self.status = resp.status
        self.ended = False
        self._buffer = bytearray()
        self._chunks = resp.stream(amt=None, decode_content=False) if resp.status == 200 else None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        assert self._chunks is not None, f"watch answered HTTP {self.status}"
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                if line.strip():
                    return json.loads(line)
                continue
            chunk = next(self._chunks, None)
            if chunk is None:
                self.ended = True
                if self._buffer.strip():
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return json.loads(line)
                raise StopIteration
            self._buffer.extend(chunk)

    def body(self) -> Any:
        return json.loads(self.resp.read())


@contextmanager
def _watch(
    api_client: Any, path: str, read_timeout: float = 20.0, **query: Any
) -> Iterator[WatchStream]:
    with watching(api_client, path, read_timeout=read_timeout, **query) as resp:
        yield WatchStream(resp)


def _cm(name: str, labels: dict[str, str], **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": data,
    }


def _summary(event: dict[str, Any]) -> tuple[str, str]:
    return event["type"], event["object"]["metadata"].get("name", "")


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:10]


def test_watch_from_resource_version_replays_only_later_events(
    api_client: Any, namespace: str, tag: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    before = ok(http(api_client, "POST", base, body=_cm("before", {"w": tag})), 201)
    start = before["metadata"]["resourceVersion"]
    created = ok(http(api_client, "POST", base, body=_cm("after", {"w": tag}, k="1")), 201)
    modified = merge_patch(api_client, f"{base}/after", {"data": {"k": "2"}})
    ok(http(api_client, "DELETE", f"{base}/after"), 200)

    events = []
    with _watch(
        api_client, base, labelSelector=f"w={tag}", resourceVersion=start, timeoutSeconds=10
    ) as stream:
        assert stream.status == 200
        for event in stream:
            events.append(event)
            if event["type"] == "DELETED":
                break
    assert [_summary(e) for e in events] == [
        ("ADDED", "after"),
        ("MODIFIED", "after"),
        ("DELETED", "after"),
    ]
    assert (
        events[0]["object"]["metadata"]["resourceVersion"]
        == (created["metadata"]["resourceVersion"])
    )
    assert (
        events[1]["object"]["metadata"]["resourceVersion"]
        == (modified["metadata"]["resourceVersion"])
    )
    assert events[1]["object"]["data"] == {"k": "2"}
    assert events[2]["object"]["data"] == {"k": "2"}
    assert events[2]["object"]["kind"] == "ConfigMap"
    assert events[2]["object"]["apiVersion"] == "v1"
    assert int(events[2]["object"]["metadata"]["resourceVersion"]) > int(
        modified["metadata"]["resourceVersion"]
    )


def test_watch_delivers_live_events_in_order(api_client: Any, namespace: str, tag: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    listed = ok(http(api_client, "GET", base, query={"labelSelector": f"w={tag}"}), 200)
    with _watch(
        api_client,
        base,
        labelSelector=f"w={tag}",
        resourceVersion=listed["metadata"]["resourceVersion"],
        timeoutSeconds=20,
    ) as stream:
        assert stream.status == 200
        ok(http(api_client, "POST", base, body=_cm("live", {"w": tag}, k="1")), 201)
        assert _summary(next(stream)) == ("ADDED", "live")
        merge_patch(api_client, f"{base}/live", {"data": {"k": "2"}})
        event = next(stream)
        assert _summary(event) == ("MODIFIED", "live")
        assert event["object"]["data"] == {"k": "2"}
        ok(http(api_client, "DELETE", f"{base}/live"), 200)
        assert _summary(next(stream)) == ("DELETED", "live")


def test_cluster_wide_watch_sees_namespaced_objects(
    api_client: Any, namespace: str, tag: str
) -> None:
    listed = ok(http(api_client, "GET", "/api/v1/configmaps", query={"limit": 1}), 200)
    with _watch(
        api_client,
        "/api/v1/configmaps",
        labelSelector=f"w={tag}",
        resourceVersion=listed["metadata"]["resourceVersion"],
        timeoutSeconds=20,
    ) as stream:
        ok(
            http(
                api_client,
                "POST",
                f"/api/v1/namespaces/{namespace}/configmaps",
                body=_cm("anywhere", {"w": tag}),
            ),
            201,
        )
        event = next(stream)
        assert _summary(event) == ("ADDED", "anywhere")
        assert event["object"]["metadata"]["namespace"] == namespace


def test_kubernetes_watch_client_reads_the_stream(
    api_client: Any, namespace: str, tag: str
) -> None:
    core = client.CoreV1Api(api_client)
    start = core.list_namespaced_config_map(namespace, label_selector=f"w={tag}")
    core.create_namespaced_config_map(namespace, _cm("typed", {"w": tag}, k="1"))
    core.patch_namespaced_config_map("typed", namespace, {"data": {"k": "2"}})
    core.delete_namespaced_config_map("typed", namespace)

    seen = []
    w = watch.Watch()
    try:
        for event in w.stream(
            core.list_namespaced_config_map,
            namespace,
            label_selector=f"w={tag}",
            resource_version=start.metadata.resource_version,
            timeout_seconds=10,
        ):
            seen.append((event["type"], event["object"].metadata.name, event["object"].data))
            if event["type"] == "DELETED":
                w.stop()
    finally:
        w.stop()
    assert seen == [
        ("ADDED", "typed", {"k": "1"}),
        ("MODIFIED", "typed", {"k": "2"}),
        ("DELETED", "typed", {"k": "2"}),
    ]


def test_watch_without_resource_version_starts_with_current_state(
    api_client: Any, namespace: str, tag: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    for name in ("now-1", "now-2"):
        ok(http(api_client, "POST", base, body=_cm(name, {"w": tag})), 201)
    ok(http(api_client, "DELETE", f"{base}/now-2"), 200)
    ok(http(api_client, "POST", base, body=_cm("now-3", {"w": tag})), 201)
    with _watch(api_client, base, labelSelector=f"w={tag}", timeoutSeconds=20) as stream:
        first = [next(stream), next(stream)]
        ok(http(api_client, "POST", base, body=_cm("now-4", {"w": tag})), 201)
        after = next(stream)
    assert sorted(_summary(e) for e in first) == [("ADDED", "now-1"), ("ADDED", "now-3")]
    assert _summary(after) == ("ADDED", "now-4")


def test_bookmarks_carry_only_resource_version(api_client: Any, namespace: str, tag: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    created = ok(http(api_client, "POST", base, body=_cm("marked", {"w": tag})), 201)
    bookmarks = []
    with _watch(
        api_client,
        base,
        labelSelector=f"w={tag}",
        resourceVersion=created["metadata"]["resourceVersion"],
        allowWatchBookmarks=True,
        timeoutSeconds=5,
    ) as stream:
        for event in stream:
            assert event["type"] == "BOOKMARK", event
            bookmarks.append(event["object"])
            break
    assert bookmarks, "no BOOKMARK within a 5 s watch with allowWatchBookmarks=true"
    obj = bookmarks[0]
    assert set(obj) == {"kind", "apiVersion", "metadata"}
    assert obj["kind"] == "ConfigMap"
    assert obj["apiVersion"] == "v1"
    meta = dict(obj["metadata"])
    assert meta.pop("creationTimestamp", None) is None
    assert set(meta) == {"resourceVersion"}
    assert int(meta["resourceVersion"]) >= int(created["metadata"]["resourceVersion"])


def test_no_bookmarks_without_allow_watch_bookmarks(
    api_client: Any, namespace: str, tag: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    listed = ok(http(api_client, "GET", base, query={"labelSelector": f"w={tag}"}), 200)
    with _watch(
        api_client,
        base,
        labelSelector=f"w={tag}",
        resourceVersion=listed["metadata"]["resourceVersion"],
        timeoutSeconds=2,
    ) as stream:
        events = list(stream)
    assert events == []


def test_timeout_seconds_ends_the_stream(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    listed = ok(http(api_client, "GET", base), 200)
    started = time.monotonic()
    with _watch(
        api_client,
        base,
        labelSelector="never-matches-anything=1",
        resourceVersion=listed["metadata"]["resourceVersion"],
        timeoutSeconds=1,
    ) as stream:
        assert stream.status == 200
        assert list(stream) == []
        assert stream.ended
    elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 10, elapsed


def test_label_selector_watch_transitions(api_client: Any, namespace: str, tag: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    created = ok(http(api_client, "POST", base, body=_cm("mover", {"w": tag, "sel": "yes"})), 201)
    with _watch(
        api_client,
        base,
        labelSelector=f"w={tag},sel=yes",
        resourceVersion=created["metadata"]["resourceVersion"],
        timeoutSeconds=20,
    ) as stream:
        away = merge_patch(api_client, f"{base}/mover", {"metadata": {"labels": {"sel": "no"}}})
        event = next(stream)
        assert _summary(event) == ("DELETED", "mover")
        # The previous state of the object, stamped with the resourceVersion of the change.
        assert event["object"]["metadata"]["labels"]["sel"] == "yes"
        assert (
            event["object"]["metadata"]["resourceVersion"] == (away["metadata"]["resourceVersion"])
        )

        merge_patch(api_client, f"{base}/mover", {"data": {"unseen": "1"}})
        back = merge_patch(api_client, f"{base}/mover", {"metadata": {"labels": {"sel": "yes"}}})
        event = next(stream)
        assert _summary(event) == ("ADDED", "mover")
        assert event["object"]["metadata"]["labels"]["sel"] == "yes"
        assert event["object"]["data"] == {"unseen": "1"}
        assert (
            event["object"]["metadata"]["resourceVersion"] == (back["metadata"]["resourceVersion"])
        )


def test_send_initial_events_requires_not_older_than(api_client: Any, namespace: str) -> None:
    response = http(
        api_client,
        "GET",
        f"/api/v1/namespaces/{namespace}/configmaps",
        query={"watch": True, "sendInitialEvents": True, "allowWatchBookmarks": True},
    )
    assert response.status == 422
    assert response.body["kind"] == "Status"
    assert response.body["reason"] == "Invalid"


def test_send_initial_events_then_end_bookmark(api_client: Any, namespace: str, tag: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    names = {f"initial-{i}" for i in range(3)}
    for name in sorted(names):
        ok(http(api_client, "POST", base, body=_cm(name, {"w": tag})), 201)

    added = []
    with _watch(
        api_client,
        base,
        labelSelector=f"w={tag}",
        sendInitialEvents=True,
        resourceVersionMatch="NotOlderThan",
        allowWatchBookmarks=True,
        timeoutSeconds=20,
    ) as stream:
        assert stream.status == 200
        for event in stream:
            if event["type"] == "BOOKMARK":
                end = event["object"]
                break
            assert event["type"] == "ADDED", event
            added.append(event["object"]["metadata"]["name"])
        else:
            pytest.fail("stream ended before the initial-events-end bookmark")
        assert sorted(added) == sorted(names)
        assert end["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert end["metadata"]["resourceVersion"].isdigit()

        ok(http(api_client, "POST", base, body=_cm("later", {"w": tag})), 201)
        event = next(e for e in stream if e["type"] != "BOOKMARK")
        assert _summary(event) == ("ADDED", "later")
