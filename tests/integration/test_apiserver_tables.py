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

from tests.integration.rawhttp import http, ok

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
