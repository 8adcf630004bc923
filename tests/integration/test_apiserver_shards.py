"""Conformance: server-side sharded list and watch (KEP-5866, kube-apiserver 1.36, feature
gate ShardedListAndWatch, off by default).

``test_a_shard_selector_lists_a_share_or_is_ignored`` holds on any server: with the gate
a list answers the share and ``metadata.shardInfo``, without it every object and no
``shardInfo``. The others pin one gate state, so they run on the local server: one
started here with the gate on, and the suite's own (gate off, the default).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from manager.hashring import fnv1a_64
from manager.testing import LocalApiServer
from tests.integration.rawhttp import http, ok, watching

LOW = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
HIGH = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"


@contextlib.contextmanager
def _api_client(kubeconfig: str) -> Iterator[Any]:
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    api = client.ApiClient(configuration)
    try:
        yield api
    finally:
        pools = api.rest_client.pool_manager.pools
        for key in list(pools.keys()):
            pool = pools.get(key)
            if pool is not None:
                pool.close()
        api.close()


@pytest.fixture(scope="module")
def gated() -> Iterator[LocalApiServer]:
    with LocalApiServer(feature_gates={"ShardedListAndWatch": True}) as server:
        yield server


@pytest.fixture
def gated_client(gated: LocalApiServer) -> Iterator[Any]:
    with _api_client(str(gated.kubeconfig_path)) as api:
        yield api


def _seed(api: Any, namespace: str, count: int, tag: str) -> dict[str, str]:
    """``count`` ConfigMaps labelled ``suite=tag``: name -> uid."""
    made = {}
    for i in range(count):
        body = {"metadata": {"name": f"cm-{i}", "labels": {"suite": tag}}}
        obj = ok(http(api, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body), 201)
        made[obj["metadata"]["name"]] = obj["metadata"]["uid"]
    return made


def _low(uid: str) -> bool:
    return fnv1a_64(uid) < 1 << 63


def _names(body: dict[str, Any]) -> set[str]:
    return {item["metadata"]["name"] for item in body["items"]}


def test_a_shard_selector_lists_a_share_or_is_ignored(api_client: Any, namespace: str) -> None:
    tag = uuid.uuid4().hex[:8]
    made = _seed(api_client, namespace, 21, tag)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    low = ok(
        http(api_client, "GET", path, query={"labelSelector": f"suite={tag}", "shardSelector": LOW})
    )
    high = ok(
        http(
            api_client, "GET", path, query={"labelSelector": f"suite={tag}", "shardSelector": HIGH}
        )
    )
    if "shardInfo" in low["metadata"]:  # the gate is on
        assert low["metadata"]["shardInfo"] == {"selector": LOW}
        assert high["metadata"]["shardInfo"] == {"selector": HIGH}
        assert _names(low) == {n for n, uid in made.items() if _low(uid)}
        assert _names(high) == {n for n, uid in made.items() if not _low(uid)}
    else:  # off: the parameter is ignored
        assert "shardInfo" not in high["metadata"]
        assert _names(low) == _names(high) == set(made)


@pytest.mark.local_only(reason="pins the gate on: a local server started with it")
def test_gate_on_lists_split_by_fnv1a_of_the_uid(gated_client: Any) -> None:
    api = gated_client
    ns = f"shards-{uuid.uuid4().hex[:6]}"
    ok(http(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}}), 201)
    made = _seed(api, ns, 21, "split")
    path = f"/api/v1/namespaces/{ns}/configmaps"
    sloppy = 'shardRange( object.metadata.uid,"0x0000000000000000" , "0x8000000000000000")'
    mine = {"labelSelector": "suite=split"}  # not kube-root-ca.crt
    low = ok(http(api, "GET", path, query={**mine, "shardSelector": sloppy}))
    high = ok(http(api, "GET", path, query={**mine, "shardSelector": HIGH}))
    both = ok(http(api, "GET", path, query={**mine, "shardSelector": f"{LOW} || {HIGH}"}))
    assert low["metadata"]["shardInfo"] == {"selector": LOW}  # normalised
    assert _names(low) == {n for n, uid in made.items() if _low(uid)}
    assert _names(high) == {n for n, uid in made.items() if not _low(uid)}
    assert _names(both) == set(made) and both["metadata"]["shardInfo"]["selector"] == (
        f"{LOW} || {HIGH}"
    )
    plain = ok(http(api, "GET", path, query=mine))
    assert "shardInfo" not in plain["metadata"] and _names(plain) == set(made)
    # pages: the share, shardInfo on each, no remainingItemCount (a filtered count)
    first = ok(http(api, "GET", path, query={**mine, "shardSelector": HIGH, "limit": 2}))
    assert len(first["items"]) == 2 and first["metadata"]["continue"]
    assert "remainingItemCount" not in first["metadata"]
    assert first["metadata"]["shardInfo"] == {"selector": HIGH}
    by_ns = ok(
        http(
            api,
            "GET",
            "/api/v1/configmaps",
            query={
                "shardSelector": f"shardRange(object.metadata.namespace, "
                f"'0x{fnv1a_64(ns):016x}', '0x{fnv1a_64(ns) + 1:016x}')"
            },
        )
    )
    assert {i["metadata"]["namespace"] for i in by_ns["items"]} == {ns}
    ok(http(api, "DELETE", f"/api/v1/namespaces/{ns}"), 200)


@pytest.mark.local_only(reason="pins the gate on: a local server started with it")
def test_gate_on_watch_streams_only_the_share(gated_client: Any) -> None:
    api = gated_client
    ns = f"shards-{uuid.uuid4().hex[:6]}"
    ok(http(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}}), 201)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    rv = ok(http(api, "GET", path))["metadata"]["resourceVersion"]
    with watching(
        api, path, read_timeout=10, resourceVersion=rv, shardSelector=LOW, allowWatchBookmarks=True
    ) as stream:
        made = _seed(api, ns, 21, "watch")
        gone = ok(http(api, "DELETE", f"{path}/cm-0"), 200)
        last = int(gone["metadata"].get("resourceVersion") or 0) or int(
            ok(http(api, "GET", path))["metadata"]["resourceVersion"]
        )
        wanted = [("ADDED", n) for n, uid in made.items() if _low(uid)]
        if _low(made["cm-0"]):
            wanted.append(("DELETED", "cm-0"))
        seen: list[tuple[str, str]] = []
        buffer, done = b"", False
        while not done:  # every event up to a bookmark past the last write
            chunk = stream.read1(65536)
            assert chunk, f"watch ended after {seen}"
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                event = json.loads(line)
                meta = event["object"]["metadata"]
                if event["type"] == "BOOKMARK":
                    done = done or int(meta["resourceVersion"]) >= last
                else:
                    seen.append((event["type"], meta["name"]))
    assert sorted(seen) == sorted(wanted)
    ok(http(api, "DELETE", f"/api/v1/namespaces/{ns}"), 200)


@pytest.mark.local_only(reason="pins the gate on: a local server started with it")
@pytest.mark.parametrize("watch", [False, True])
def test_gate_on_a_bad_selector_is_a_500_without_reason(gated_client: Any, watch: bool) -> None:
    query: dict[str, Any] = {"shardSelector": "bogus(object.metadata.uid, '0x00', '0x80')"}
    if watch:
        query["watch"] = True
    answer = http(gated_client, "GET", "/api/v1/configmaps", query=query)
    assert answer.status == 500
    assert answer.body["message"] == (
        'invalid shard selector: unsupported function "bogus"; only shardRange() and || are allowed'
    )
    assert "reason" not in answer.body and answer.body["code"] == 500


@pytest.mark.local_only(reason="pins the gate off (the default of the suite's server)")
def test_gate_off_the_parameter_is_ignored(api_client: Any, namespace: str) -> None:
    made = _seed(api_client, namespace, 5, "off")
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for selector in (LOW, "bogus(object.metadata.uid)"):
        body = ok(http(api_client, "GET", path, query={"shardSelector": selector}))
        assert "shardInfo" not in body["metadata"]
        assert set(made) <= _names(body)


def test_unknown_feature_gate_is_refused() -> None:
    with pytest.raises(ValueError, match="unrecognized feature gate: Sharded"):
        LocalApiServer(feature_gates={"Sharded": True})


@pytest.mark.local_only(reason="counts the local server's selector checks (a cost, not an answer)")
def test_gate_on_a_filtered_page_checks_only_what_it_needs(
    gated_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sharded caches list in pages of 500: a page that filtered every stored object made
    # a paginated list quadratic (30,000 owned Secrets took a minute to page through).
    from apiserver.storage.shardselector import ShardSelector

    api = gated_client
    ns = f"shards-{uuid.uuid4().hex[:6]}"
    ok(http(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}}), 201)
    made = _seed(api, ns, 40, "paged")
    checked = [0]
    matches = ShardSelector.matches

    def counting(self: ShardSelector, obj: dict[str, Any]) -> bool:
        checked[0] += 1
        return matches(self, obj)

    monkeypatch.setattr(ShardSelector, "matches", counting)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    everything = f"{LOW} || {HIGH}"
    query = {"labelSelector": "suite=paged", "shardSelector": everything, "limit": "5"}
    seen: list[str] = []
    while True:
        page = ok(http(api, "GET", path, query=query))
        seen += [item["metadata"]["name"] for item in page["items"]]
        if not page["metadata"].get("continue"):
            break
        query["continue"] = page["metadata"]["continue"]
    assert sorted(seen) == sorted(made)
    assert checked[0] <= 8 * 6, checked[0]  # eight pages of 5, each needs 6 at most
