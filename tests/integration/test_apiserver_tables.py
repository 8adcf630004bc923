"""Conformance: server-side printing where a resource has none (kube: no TableConvertor).

kube-apiserver negotiates the answer before it acts: an ``Accept`` that asks only for a
``Table`` of an endpoint without a table convertor (the create-only reviews, bindings,
evictions, token requests) is ``406 Not Acceptable`` (the e2e "should return a 406 for a
backend which does not implement metadata"); with a plain media type after it, the plain
object is the answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.rawhttp import eventually, http, ok

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
ACCESS_REVIEW = {
    "apiVersion": "authorization.k8s.io/v1",
    "kind": "SelfSubjectAccessReview",
    "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}},
}
SUBJECT_REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def _not_acceptable(response: Any) -> None:
    assert response.status == 406, response.body
    status = response.body
    assert (status["kind"], status["status"], status["reason"], status["code"]) == (
        "Status",
        "Failure",
        "NotAcceptable",
        406,
    )
    accepted = status["message"].removeprefix("only the following media types are accepted: ")
    assert accepted != status["message"]
    assert "application/json" in accepted.split(", ")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", ACCESS_REVIEW),
        ("/apis/authentication.k8s.io/v1/selfsubjectreviews", SUBJECT_REVIEW),
    ],
)
def test_table_of_a_review_is_not_acceptable(
    path: str, body: dict[str, Any], api_client: Any
) -> None:
    _not_acceptable(http(api_client, "POST", path, body=body, headers={"Accept": TABLE}))
    answer = ok(
        http(api_client, "POST", path, body=body, headers={"Accept": f"{TABLE}, application/json"}),
        201,
    )
    assert answer["kind"] == body["kind"]


def test_table_of_an_eviction_is_not_acceptable_before_anything_else(
    api_client: Any, namespace: str
) -> None:
    """Negotiation comes first: the pod does not even exist."""
    path = f"/api/v1/namespaces/{namespace}/pods/nowhere/eviction"
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "nowhere", "namespace": namespace},
    }
    _not_acceptable(http(api_client, "POST", path, body=body, headers={"Accept": TABLE}))
    assert http(api_client, "POST", path, body=body).status == 404


def test_table_of_a_stored_resource_is_still_served(api_client: Any, namespace: str) -> None:
    table = ok(
        http(
            api_client,
            "GET",
            f"/api/v1/namespaces/{namespace}/configmaps",
            headers={"Accept": TABLE},
        )
    )
    assert table["kind"] == "Table"


# --------------------------------------------------------------------------- quantities

_NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)


def test_resource_quota_table_shows_used_over_hard_requests_and_limits(
    api_client: Any, namespace: str
) -> None:
    """printResourceQuota (1.36; Age last since kubernetes#129419): status.hard sorted by
    name, ``name: used/hard`` joined by ", ", the ``limits.*`` names in their own column."""
    path = f"/api/v1/namespaces/{namespace}/resourcequotas"
    hard = {
        "requests.cpu": "0.5",
        "requests.memory": "1024Mi",
        "limits.cpu": "1",
        "limits.memory": "2Gi",
        "pods": "10",
    }
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}}
    ok(http(api_client, "POST", path, body={**body, "spec": {"hard": hard}}), 201)

    def cells() -> list[Any]:
        table = ok(http(api_client, "GET", path, headers={"Accept": TABLE}))
        assert [(c["name"], c["type"], c["format"]) for c in table["columnDefinitions"]] == [
            ("Name", "string", "name"),
            ("Request", "string", ""),
            ("Limit", "string", ""),
            ("Age", "string", ""),
        ]
        assert table["columnDefinitions"][0]["description"] == _NAME_DESCRIPTION
        assert table["columnDefinitions"][1]["description"] == (
            "Request represents a minimum amount of cpu/memory that a container may consume."
        )
        assert table["columnDefinitions"][2]["description"] == (
            "Limits control the maximum amount of cpu/memory that a container may use "
            "independent of contention on the node."
        )
        (row,) = table["rows"]
        return list(row["cells"][:3])

    want = [
        "q",
        "pods: 0/10, requests.cpu: 0/500m, requests.memory: 0/1Gi",
        "limits.cpu: 0/1, limits.memory: 0/2Gi",
    ]
    eventually(lambda: cells() == want, 30.0, f"quota row == {want} (last: {cells()})")


def test_limit_range_table_is_the_default_one(api_client: Any, namespace: str) -> None:
    """LimitRange has no printer: rest.NewDefaultTableConvertor (Name, Created At)."""
    path = f"/api/v1/namespaces/{namespace}/limitranges"
    empty = ok(http(api_client, "GET", path, headers={"Accept": TABLE}))
    assert empty["rows"] is None
    limits = {"limits": [{"type": "Container", "default": {"cpu": "0.1"}}]}
    body = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": limits}
    created = ok(http(api_client, "POST", path, body=body), 201)
    table = ok(http(api_client, "GET", path, headers={"Accept": TABLE}))
    assert [(c["name"], c["type"], c["format"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", "name"),
        ("Created At", "date", ""),
    ]
    (row,) = table["rows"]
    assert row["cells"] == ["l", created["metadata"]["creationTimestamp"]]
