"""Conformance: discovery and formats — aggregated discovery, the groups and
subresources a 1.36 server lists, storageVersionHash, /version, PartialObjectMetadata,
Tables with includeObject, the request media types kube reads (JSON, YAML, 415) and
the answers it writes (JSON, YAML, 406).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
import yaml

from tests.integration.rawhttp import http, ok, stream

AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def _content_type_params(value: str) -> tuple[str, dict[str, str]]:
    base, *params = value.split(";")
    parsed = {}
    for param in params:
        key, _, val = param.strip().partition("=")
        parsed[key] = val
    return base.strip(), parsed


def _svh(group: str, version: str, kind: str) -> str:
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


# --------------------------------------------------------------------------- aggregated


def test_aggregated_discovery_of_groups(api_client: Any) -> None:
    version = "v2"
    accept = AGGREGATED_V2
    response = http(api_client, "GET", "/apis", headers={"Accept": f"{accept},application/json"})
    assert response.status == 200
    base, params = _content_type_params(response.headers["Content-Type"])
    assert (base, params.get("g"), params.get("v"), params.get("as")) == (
        "application/json",
        "apidiscovery.k8s.io",
        version,
        "APIGroupDiscoveryList",
    )
    body = response.body
    assert body["kind"] == "APIGroupDiscoveryList"
    assert body["apiVersion"] == f"apidiscovery.k8s.io/{version}"
    groups = {g["metadata"]["name"]: g for g in body["items"]}
    for name in ("apps", "batch", "rbac.authorization.k8s.io", "policy", "discovery.k8s.io"):
        assert name in groups, name
    apps_v1 = next(v for v in groups["apps"]["versions"] if v["version"] == "v1")
    deployments = next(r for r in apps_v1["resources"] if r["resource"] == "deployments")
    assert deployments["responseKind"] == {"group": "", "version": "", "kind": "Deployment"}
    assert deployments["scope"] == "Namespaced"
    assert deployments["singularResource"] == "deployment"
    assert "deploy" in deployments["shortNames"]
    subresources = {s["subresource"]: s for s in deployments["subresources"]}
    assert subresources["scale"]["responseKind"] == {
        "group": "autoscaling",
        "version": "v1",
        "kind": "Scale",
    }
    assert set(subresources["scale"]["verbs"]) == {"get", "patch", "update"}
    assert subresources["status"]["responseKind"]["kind"] == "Deployment"


@pytest.mark.parametrize("path", ["/api", "/apis"])
def test_aggregated_discovery_v2beta1_is_no_longer_served(api_client: Any, path: str) -> None:
    # AggregatedDiscoveryRemoveBetaType is locked on since 1.35: a v2beta1 entry of
    # Accept is skipped (aggregated/negotiation.go), so the next entry is answered
    response = http(
        api_client, "GET", path, headers={"Accept": f"{AGGREGATED_V2BETA1},application/json"}
    )
    assert response.status == 200
    base, params = _content_type_params(response.headers["Content-Type"])
    assert (base, params) == ("application/json", {})
    assert response.body["kind"] == ("APIVersions" if path == "/api" else "APIGroupList")


def test_aggregated_discovery_of_the_core_group(api_client: Any) -> None:
    response = http(api_client, "GET", "/api", headers={"Accept": AGGREGATED_V2})
    assert response.status == 200
    assert "as=APIGroupDiscoveryList" in response.headers["Content-Type"]
    [core] = response.body["items"]
    assert not core["metadata"].get("name")
    [v1] = core["versions"]
    assert v1["version"] == "v1"
    pods = next(r for r in v1["resources"] if r["resource"] == "pods")
    subresources = {s["subresource"]: s for s in pods["subresources"]}
    assert subresources["eviction"]["responseKind"] == {
        "group": "policy",
        "version": "v1",
        "kind": "Eviction",
    }
    assert subresources["binding"]["verbs"] == ["create"]
    assert subresources["log"]["verbs"] == ["get"]
    sas = next(r for r in v1["resources"] if r["resource"] == "serviceaccounts")
    token = {s["subresource"]: s for s in sas["subresources"]}["token"]
    assert token["responseKind"]["kind"] == "TokenRequest"


def test_legacy_discovery_without_aggregated_accept(api_client: Any) -> None:
    response = http(api_client, "GET", "/apis")
    assert response.body["kind"] == "APIGroupList"
    assert response.headers["Content-Type"].split(";")[0] == "application/json"


# --------------------------------------------------------------------------- legacy shapes


def test_legacy_discovery_lists_subresources_and_storage_version_hash(api_client: Any) -> None:
    core = {r["name"]: r for r in ok(http(api_client, "GET", "/api/v1"), 200)["resources"]}
    assert core["pods"]["storageVersionHash"] == _svh("", "v1", "Pod")
    assert core["configmaps"]["storageVersionHash"] == _svh("", "v1", "ConfigMap")
    eviction = core["pods/eviction"]
    assert (eviction["group"], eviction["version"], eviction["kind"]) == (
        "policy",
        "v1",
        "Eviction",
    )
    assert core["pods/binding"]["kind"] == "Binding"
    assert core["pods/log"]["kind"] == "Pod"
    assert core["serviceaccounts/token"]["kind"] == "TokenRequest"
    assert "storageVersionHash" not in core["bindings"]
    apps = {r["name"]: r for r in ok(http(api_client, "GET", "/apis/apps/v1"), 200)["resources"]}
    assert apps["deployments"]["storageVersionHash"] == _svh("apps", "v1", "Deployment")
    assert apps["daemonsets"]["shortNames"] == ["ds"]
    scale = apps["statefulsets/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")


@pytest.mark.parametrize(
    ("group_version", "resources"),
    [
        ("batch/v1", {"jobs", "cronjobs"}),
        ("rbac.authorization.k8s.io/v1", {"roles", "rolebindings", "clusterroles"}),
        ("apiregistration.k8s.io/v1", {"apiservices"}),
        ("discovery.k8s.io/v1", {"endpointslices"}),
        ("policy/v1", {"poddisruptionbudgets"}),
        ("autoscaling/v2", {"horizontalpodautoscalers"}),
        ("storage.k8s.io/v1", {"storageclasses"}),
        ("scheduling.k8s.io/v1", {"priorityclasses"}),
        ("node.k8s.io/v1", {"runtimeclasses"}),
        ("certificates.k8s.io/v1", {"certificatesigningrequests"}),
        ("admissionregistration.k8s.io/v1", {"validatingwebhookconfigurations"}),
    ],
)
def test_served_group_versions(api_client: Any, group_version: str, resources: set[str]) -> None:
    listed = ok(http(api_client, "GET", f"/apis/{group_version}"), 200)
    assert resources <= {r["name"] for r in listed["resources"]}


def test_groups_are_listed_by_priority(api_client: Any) -> None:
    names = [g["name"] for g in ok(http(api_client, "GET", "/apis"), 200)["groups"]]
    assert names.index("apiregistration.k8s.io") < names.index("apps")
    assert names.index("apps") < names.index("batch")
    assert names.index("batch") < names.index("discovery.k8s.io")


def test_version_has_emulation_fields(api_client: Any) -> None:
    info = ok(http(api_client, "GET", "/version"), 200)
    assert info["major"] == "1"
    assert info["emulationMajor"] == info["major"]
    assert info["emulationMinor"] == info["minor"]
    assert info["minCompatibilityMajor"] == "1"
    assert int(info["minCompatibilityMinor"]) < int(info["minor"])
    assert info["gitVersion"].startswith(f"v1.{info['minor']}.")


# --------------------------------------------------------------------------- metadata only


def test_partial_object_metadata(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "meta"},
        "data": {"k": "v"},
    }
    created = ok(http(api_client, "POST", path, body=body), 201)
    one = ok(
        http(api_client, "GET", f"{path}/meta", headers={"Accept": f"{PARTIAL},application/json"}),
        200,
    )
    assert one["kind"] == "PartialObjectMetadata"
    assert one["apiVersion"] == "meta.k8s.io/v1"
    assert one["metadata"]["uid"] == created["metadata"]["uid"]
    assert "data" not in one
    listed = ok(
        http(api_client, "GET", path, headers={"Accept": f"{PARTIAL_LIST},application/json"}), 200
    )
    assert listed["kind"] == "PartialObjectMetadataList"
    assert listed["apiVersion"] == "meta.k8s.io/v1"
    assert listed["metadata"]["resourceVersion"].isdigit()
    item = next(i for i in listed["items"] if i["metadata"]["name"] == "meta")
    assert item["kind"] == "PartialObjectMetadata"
    assert set(item) == {"kind", "apiVersion", "metadata"}


@pytest.mark.parametrize(
    ("include", "expected"),
    [("None", None), ("Metadata", "PartialObjectMetadata"), ("Object", "ConfigMap")],
)
def test_table_include_object(
    api_client: Any, namespace: str, include: str, expected: str | None
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "tab"},
        "data": {"k": "v"},
    }
    ok(http(api_client, "POST", path, body=body), 201)
    table = ok(
        http(
            api_client,
            "GET",
            f"{path}/tab",
            query={"includeObject": include},
            headers={"Accept": f"{TABLE},application/json"},
        ),
        200,
    )
    assert table["kind"] == "Table"
    [row] = table["rows"]
    assert row["cells"][0] == "tab"
    if expected is None:
        assert row["object"] is None
    else:
        assert row["object"]["kind"] == expected
        assert row["object"]["metadata"]["name"] == "tab"


# --------------------------------------------------------------------------- request bodies


def test_yaml_request_body_is_accepted(api_client: Any, namespace: str) -> None:
    yaml_body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  a: '1'\n"
    created = ok(
        http(
            api_client,
            "POST",
            f"/api/v1/namespaces/{namespace}/configmaps",
            body=yaml_body,
            content_type="application/yaml",
        ),
        201,
    )
    assert created["data"] == {"a": "1"}


def test_unsupported_request_media_type_is_415(api_client: Any, namespace: str) -> None:
    response = http(
        api_client,
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps",
        body=b"name=x",
        content_type="text/plain",
    )
    assert response.status == 415, response.body
    assert response.body["kind"] == "Status"
    assert response.body["reason"] == "UnsupportedMediaType"
    message = response.body["message"]
    assert message.startswith(
        "the body of the request was in an unknown format - accepted media types include: "
    )
    for media in ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf"):
        assert media in message


# --------------------------------------------------------------------------- answers in YAML


YAML = "application/yaml"


def _answer(
    api_client: Any, method: str, path: str, accept: str, **kwargs: Any
) -> tuple[int, str, Any]:
    """Status, Content-Type and the body parsed as YAML (JSON is YAML too)."""
    resp = stream(api_client, method, path, headers={"Accept": accept}, **kwargs)
    try:
        return resp.status, resp.headers.get("Content-Type", ""), yaml.safe_load(resp.read())
    finally:
        resp.release_conn()


def test_yaml_answers_are_the_json_answers_in_yaml(api_client: Any, namespace: str) -> None:
    """kube's serializers include ``application/yaml`` (runtime/serializer/codec_factory.go:
    the JSON rendering converted by sigs.k8s.io/yaml): a create, a get, a list and a
    Status error asked for in YAML are the JSON answers, in YAML."""
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    body = {"metadata": {"name": "in-yaml", "labels": {"on": "yes"}}, "data": {"n": "1"}}
    status, ctype, created = _answer(api_client, "POST", collection, YAML, body=body)
    assert (status, ctype) == (201, YAML), created
    as_json = ok(http(api_client, "GET", f"{collection}/in-yaml"), 200)
    assert created == as_json  # strings stay strings: "yes", "1", the timestamps
    status, ctype, got = _answer(api_client, "GET", f"{collection}/in-yaml", YAML)
    assert (status, ctype, got) == (200, YAML, as_json)
    listed = ok(http(api_client, "GET", collection), 200)
    exact = {"resourceVersion": listed["metadata"]["resourceVersion"]}
    exact["resourceVersionMatch"] = "Exact"
    status, ctype, got = _answer(api_client, "GET", collection, YAML, query=exact)
    assert (status, ctype) == (200, YAML), got
    assert got == listed
    missing = http(api_client, "GET", f"{collection}/absent")
    assert missing.status == 404
    status, ctype, got = _answer(api_client, "GET", f"{collection}/absent", YAML)
    assert (status, ctype, got) == (404, YAML, missing.body)


@pytest.mark.parametrize(
    ("accept", "media"),
    [
        (f"{YAML}, application/json;q=0.9", YAML),
        (f"application/json;q=0.5, {YAML}", YAML),  # goautoneg sorts by quality first
        (f"application/json, {YAML}", "application/json"),
        (f"text/html, {YAML}", YAML),
    ],
)
def test_the_answer_is_in_the_best_accepted_media_type(
    api_client: Any, namespace: str, accept: str, media: str
) -> None:
    status, ctype, got = _answer(api_client, "GET", f"/api/v1/namespaces/{namespace}", accept)
    assert (status, ctype) == (200, media), got
    assert got["metadata"]["name"] == namespace


BUILTIN_PRODUCES = "application/json, application/yaml, application/vnd.kubernetes.protobuf"
STREAM_PRODUCES = "application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"


@pytest.mark.parametrize(
    ("accept", "list_it", "produces"),
    [
        ("text/html", True, f"{BUILTIN_PRODUCES}, {STREAM_PRODUCES}"),  # a list also streams
        ("text/html", False, BUILTIN_PRODUCES),
        ("application/*", False, BUILTIN_PRODUCES),  # no wildcard but */* in go-restful
    ],
)
def test_no_acceptable_media_type_is_406(
    api_client: Any, namespace: str, accept: str, list_it: bool, produces: str
) -> None:
    """A built-in resource is served by go-restful, whose route selection refuses an
    Accept naming none of the route's media types exactly (route.go matchesAccept) before
    kube negotiates; kube's serviceErrorHandler writes go-restful's message in a Status,
    which ErrorNegotiated cannot negotiate either, so it is raw JSON. (A custom resource
    answers application/* in JSON: test_apiserver_crd.)"""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    if not list_it:
        path = f"/api/v1/namespaces/{namespace}"
    response = http(api_client, "GET", path, headers={"Accept": accept})
    assert response.status == 406, response.body
    assert response.headers["Content-Type"] == "application/json"
    assert response.body["reason"] == "NotAcceptable"
    assert response.body["message"] == (
        f"406: Not Acceptable\n\nAvailable representations: {produces}"
    )


def test_a_table_in_yaml(api_client: Any, namespace: str) -> None:
    """A Table may be written in JSON or YAML (RequestScope.AllowsMediaTypeTransform)."""
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", collection, body={"metadata": {"name": "row"}}), 201)
    as_json = ok(http(api_client, "GET", collection, headers={"Accept": TABLE}), 200)
    status, ctype, got = _answer(
        api_client, "GET", collection, "application/yaml;as=Table;v=v1;g=meta.k8s.io"
    )
    assert (status, ctype) == (200, YAML), got
    assert (got["kind"], got["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert got["columnDefinitions"] == as_json["columnDefinitions"]
    # the cells without the last, the age, which the clock moves between the two reads
    assert [(r["cells"][:-1], r["object"]) for r in got["rows"]] == [
        (r["cells"][:-1], r["object"]) for r in as_json["rows"]
    ]


def test_a_watch_has_no_yaml_form(api_client: Any, namespace: str) -> None:
    """YAML has no stream serializer: serveWatchHandler's NegotiateOutputMediaTypeStream
    refuses it, and the 406 Status itself is written in YAML."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    status, ctype, got = _answer(api_client, "GET", path, YAML, query={"watch": "true"})
    assert (status, ctype) == (406, YAML), got
    assert (got["kind"], got["reason"], got["code"]) == ("Status", "NotAcceptable", 406)
    assert got["message"].startswith(
        "only the following media types are accepted: application/json;stream=watch, "
        "application/vnd.kubernetes.protobuf;stream=watch"
    ), got["message"]


# --------------------------------------------------------------------------- OpenAPI v3


def test_openapi_v3_documents_per_group_version(api_client: Any) -> None:
    # the root's Content-Type is whatever Go's http.ServeContent sniffs (text/plain on
    # 1.36: kube-aggregator sets none); clients read it as JSON whatever it says
    raw = ok(http(api_client, "GET", "/openapi/v3"), 200)
    root = json.loads(raw) if isinstance(raw, str) else raw
    url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
    path, _, query = url.partition("?")
    assert path == "/openapi/v3/apis/apps/v1"
    digest = query.removeprefix("hash=")
    assert len(digest) == 128
    assert set(digest) <= set("0123456789ABCDEF")
    response = http(api_client, "GET", path, query={"hash": digest})
    assert response.status == 200
    assert "immutable" in response.headers.get("Cache-Control", "")
    schemas = response.body["components"]["schemas"]
    deployment = next(
        s
        for s in schemas.values()
        if {"group": "apps", "version": "v1", "kind": "Deployment"}
        in s.get("x-kubernetes-group-version-kind", [])
    )
    assert {"apiVersion", "kind", "metadata", "spec", "status"} <= set(deployment["properties"])
    assert "/apis/apps/v1/namespaces/{namespace}/deployments/{name}" in response.body["paths"]
    assert "api/v1" in root["paths"]


# --------------------------------------------------------------------------- watch formats


def _events(resp: Any, count: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    buffer = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                events.append(json.loads(line))
        if len(events) >= count:
            break
    return events


@pytest.mark.parametrize("as_kind", ["Table", "PartialObjectMetadata"])
def test_watch_in_table_and_metadata_form(api_client: Any, namespace: str, as_kind: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    listed = ok(http(api_client, "GET", path), 200)
    accept = TABLE if as_kind == "Table" else PARTIAL
    resp = stream(
        api_client,
        "GET",
        path,
        query={
            "watch": True,
            "resourceVersion": listed["metadata"]["resourceVersion"],
            "timeoutSeconds": 20,
        },
        headers={"Accept": f"{accept},application/json"},
        read_timeout=20,
    )
    try:
        assert resp.status == 200
        for name in ("w1", "w2"):
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
            ok(http(api_client, "POST", path, body=body), 201)
        first, second = _events(resp, 2)
    finally:
        resp.close()
        resp.release_conn()
    assert (first["type"], second["type"]) == ("ADDED", "ADDED")
    if as_kind == "Table":
        assert first["object"]["kind"] == "Table"
        assert [c["name"] for c in first["object"]["columnDefinitions"]][:2] == ["Name", "Data"]
        assert second["object"]["columnDefinitions"] is None
        assert [r["cells"][0] for r in (first["object"]["rows"] + second["object"]["rows"])] == [
            "w1",
            "w2",
        ]
    else:
        assert first["object"]["kind"] == "PartialObjectMetadata"
        assert first["object"]["metadata"]["name"] == "w1"
        assert "data" not in second["object"]
