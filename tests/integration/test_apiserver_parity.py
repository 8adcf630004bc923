"""Conformance: the differences a client can see, by theme (issue 23, item 3).

Each test is what kube-apiserver 1.36 answers, read from its source (named in each test)
and from requests recorded against it: the fields of error bodies, validation causes,
watch errors, deletion answers, discovery verbs, formats and the objects it creates.
Like the rest of the conformance suite, these run unchanged against a real cluster with
``OVERSEER_TEST_KUBECONFIG``.
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.integration.rawhttp import JSON_PATCH, http, ok


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _configmap(api_client: Any, namespace: str, name: str) -> dict[str, Any]:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}}
    return ok(http(api_client, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body))


# --------------------------------------------------------------------------- details


def test_error_details_as_kube_builds_them(api_client: Any, namespace: str) -> None:
    """Each Status carries the details its constructor in apimachinery's errors.go gives:
    ``NewGenericServerResponse`` (JSON-patch failures in handlers/patch.go, go-restful's
    415 for a PATCH media type the route does not consume) has empty details ``{}``;
    ``NewInvalid`` for DeleteOptions names ``meta.k8s.io``/``DeleteOptions``; the
    precondition conflicts of rest.BeforeDelete name the Kind."""
    created = _configmap(api_client, namespace, _unique("cm"))
    name = created["metadata"]["name"]
    path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"

    for ops in (
        [{"op": "test", "path": "/data/a", "value": "2"}],  # a failed test
        [{"op": "replace", "path": "/data/missing/deeper", "value": "2"}],  # a bad path
    ):
        response = http(api_client, "PATCH", path, body=ops, content_type=JSON_PATCH)
        assert response.status == 422, response.body
        assert response.body["reason"] == "Invalid"
        assert response.body["details"] == {}

    response = http(api_client, "PATCH", path, body=b"a=1", content_type="text/plain")
    assert response.status == 415, response.body
    assert response.body["reason"] == "UnsupportedMediaType"
    assert response.body["details"] == {}

    response = http(api_client, "DELETE", path, body={"propagationPolicy": "Sometimes"})
    assert response.status == 422, response.body
    details = response.body["details"]
    assert (details["group"], details["kind"]) == ("meta.k8s.io", "DeleteOptions")
    assert "name" not in details
    assert [(c["reason"], c["field"]) for c in details["causes"]] == [
        ("FieldValueNotSupported", "propagationPolicy")
    ]
    # validated before the object is looked up (the handler does it)
    response = http(api_client, "DELETE", f"{path}-absent", body={"propagationPolicy": "Sometimes"})
    assert response.status == 422, response.body

    for preconditions, what in (
        ({"uid": str(uuid.uuid4())}, "UID"),
        ({"resourceVersion": "1"}, "ResourceVersion"),
    ):
        response = http(api_client, "DELETE", path, body={"preconditions": preconditions})
        assert response.status == 409, response.body
        assert response.body["reason"] == "Conflict"
        assert response.body["details"] == {"name": name, "kind": "ConfigMap"}
        assert response.body["message"].startswith(
            f'Operation cannot be fulfilled on ConfigMap "{name}": the {what} in the precondition ('
        )
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": _unique("d")},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "x"}},
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
            },
        },
    }
    collection = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    made = ok(http(api_client, "POST", collection, body=deployment))
    response = http(
        api_client,
        "DELETE",
        f"{collection}/{made['metadata']['name']}",
        body={"preconditions": {"uid": str(uuid.uuid4())}},
    )
    assert response.status == 409, response.body
    assert response.body["details"] == {
        "name": made["metadata"]["name"],
        "group": "apps",
        "kind": "Deployment",
    }
    assert response.body["message"].startswith("Operation cannot be fulfilled on Deployment.apps")
