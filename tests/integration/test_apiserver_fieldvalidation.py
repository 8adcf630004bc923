"""Conformance: ``fieldValidation`` (Strict, Warn, Ignore) and wrong JSON types.

Bodies are sent as raw bytes: duplicate keys cannot be written with a dict.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.integration.rawhttp import MERGE, STRATEGIC, Response, http, ok, stream

PAUSE_IMAGE = "registry.k8s.io/pause:3.9"

DEPLOYMENT = """{
  "apiVersion": "apps/v1",
  "kind": "Deployment",
  "metadata": {"name": "%s", "labels": {"app": "web"}},
  "spec": {
    "unknown1": "val1",
    "replicas": 0,
    "paused": false,
    "paused": true,
    "selector": {"matchLabels": {"app": "web"}},
    "template": {
      "metadata": {"labels": {"app": "web"}},
      "spec": {
        "containers": [{
          "name": "main",
          "image": "%s",
          "unknownNested": "val1",
          "imagePullPolicy": "Always",
          "imagePullPolicy": "IfNotPresent"
        }]
      }
    }
  }
}"""

PROBLEMS = [
    'unknown field "spec.unknown1"',
    'duplicate field "spec.paused"',
    'unknown field "spec.template.spec.containers[0].unknownNested"',
    'duplicate field "spec.template.spec.containers[0].imagePullPolicy"',
]


def _warnings(api_client: Any, method: str, path: str, body: bytes, **query: Any) -> Response:
    """One request; the Response's headers hold every ``Warning`` text, in order."""
    resp = stream(api_client, method, path, body=body, query=query)
    try:
        raw = resp.read()
        texts = [
            json.loads(m.group(1))
            for value in resp.headers.getlist("Warning")
            for m in [re.match(r'^299 - (".*")$', value)]
            if m is not None
        ]
    finally:
        resp.release_conn()
    return Response(resp.status, json.loads(raw), {"warnings": texts})  # type: ignore[dict-item]


def _deployment(name: str) -> bytes:
    return (DEPLOYMENT % (name, PAUSE_IMAGE)).encode()


def test_strict_refuses_unknown_and_duplicate_fields(api_client: Any, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    response = http(
        api_client, "POST", base, body=_deployment("web"), query={"fieldValidation": "Strict"}
    )
    assert response.status == 400, response.body
    assert response.body["reason"] == "BadRequest"
    assert response.body["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        + ", ".join(PROBLEMS)
    )
    assert http(api_client, "GET", f"{base}/web").status == 404


@pytest.mark.parametrize("mode", ["Warn", None])
def test_warn_and_the_default_answer_warnings(
    api_client: Any, namespace: str, mode: str | None
) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    query = {"fieldValidation": mode} if mode else {}
    response = _warnings(api_client, "POST", base, _deployment("web"), **query)
    assert response.status == 201, response.body
    assert response.headers["warnings"] == PROBLEMS
    spec = response.body["spec"]
    assert "unknown1" not in spec
    # the last duplicate wins (true: a false one would be left out, as Go's omitempty
    # leaves out a false bool, and prove nothing)
    assert spec["paused"] is True
    container = spec["template"]["spec"]["containers"][0]
    assert "unknownNested" not in container
    assert container["imagePullPolicy"] == "IfNotPresent"


def test_ignore_drops_unknown_fields_silently(api_client: Any, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    response = _warnings(api_client, "POST", base, _deployment("web"), fieldValidation="Ignore")
    assert response.status == 201, response.body
    assert response.headers["warnings"] == []
    stored = ok(http(api_client, "GET", f"{base}/web"), 200)
    assert "unknown1" not in stored["spec"]


def test_put_is_validated_too(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    created = ok(http(api_client, "POST", base, body={"metadata": {"name": "cm"}, "data": {}}))
    body = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "cm",
                "resourceVersion": created["metadata"]["resourceVersion"],
            },
            "data": {"a": "1"},
            "extra": True,
        }
    ).encode()
    response = http(api_client, "PUT", f"{base}/cm", body=body, query={"fieldValidation": "Strict"})
    assert response.status == 400, response.body
    assert response.body["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
        'unknown field "extra"'
    )


def test_merge_patch_reports_duplicates_then_sorted_unknown_fields(
    api_client: Any, namespace: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", base, body={"metadata": {"name": "cm"}}))
    patch = b'{"zeta": 1, "data": {"a": "1", "a": "2"}, "alpha": 2}'
    response = http(
        api_client,
        "PATCH",
        f"{base}/cm",
        body=patch,
        content_type=MERGE,
        query={"fieldValidation": "Strict"},
    )
    # patch.go (jsonPatcher): a Strict refusal of a patch is NewInvalid(GroupKind{}, "",
    # field.Invalid("patch", <the patched object's JSON>, <strict decoding error>)); the
    # patched object's bytes are the server's own encoding, so only their frame is pinned
    _assert_patch_refused(
        response.body,
        '"{',
        'strict decoding error: duplicate field "data.a", unknown field "alpha", '
        'unknown field "zeta"',
    )
    stored = ok(http(api_client, "GET", f"{base}/cm"), 200)
    assert "data" not in stored


def test_strategic_merge_patch_is_refused_on_the_patch_itself(
    api_client: Any, namespace: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", base, body={"metadata": {"name": "cm"}}))
    response = http(
        api_client,
        "PATCH",
        f"{base}/cm",
        body=b'{"data": {"a": "1", "a": "2"}, "zeta": 1}',
        content_type=STRATEGIC,
        query={"fieldValidation": "Strict"},
    )
    # patch.go (applyPatchToObject): the bad value is fmt's %+v of the decoded patch map
    _assert_patch_refused(response.body, '"map[data:map[a:2] zeta:1]', "strict decoding error: ")
    assert 'duplicate field "data.a"' in response.body["message"]
    assert 'unknown field "zeta"' in response.body["message"]
    stored = ok(http(api_client, "GET", f"{base}/cm"), 200)
    assert "data" not in stored


def test_a_patch_giving_a_wrong_json_type_is_refused_on_the_patch(
    api_client: Any, namespace: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", base, body={"metadata": {"name": "cm"}}))
    response = http(api_client, "PATCH", f"{base}/cm", body={"data": ["a"]}, content_type=MERGE)
    # patch.go (jsonPatcher): a decoding error that is not a strict one, whatever the mode
    _assert_patch_refused(
        response.body,
        '"{\\"apiVersion\\":\\"v1\\",',
        "json: cannot unmarshal array into Go struct field ConfigMap.data "
        "of type map[string]string",
    )


def _assert_patch_refused(body: dict[str, Any], value_start: str, error: str) -> None:
    """A 422 on the field ``patch`` whose bad value starts ``value_start`` and whose
    detail starts with ``error`` (and, once past the value, is exactly it)."""
    assert body["code"] == 422, body
    assert body["reason"] == "Invalid"
    causes = body["details"]["causes"]
    assert [(c["reason"], c["field"]) for c in causes] == [("FieldValueInvalid", "patch")]
    head = ' "" is invalid: patch: Invalid value: '
    assert body["message"].startswith(head + value_start), body["message"]
    assert causes[0]["message"] == body["message"].removeprefix(' "" is invalid: patch: ')
    assert f'": {error}' in body["message"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"metadata": {"name": 5}},
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name "
            "of type string",
        ),
        (
            {"metadata": {"name": "cm", "labels": {"a": 1}}},
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels "
            "of type string",
        ),
        (
            {"metadata": {"name": "cm"}, "data": ["a"]},
            "json: cannot unmarshal array into Go struct field ConfigMap.data "
            "of type map[string]string",
        ),
    ],
)
def test_wrong_json_types_are_refused(
    api_client: Any, namespace: str, body: dict[str, Any], message: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    sent = {"apiVersion": "v1", "kind": "ConfigMap", **body}
    response = http(api_client, "POST", base, body=sent, query={"fieldValidation": "Ignore"})
    assert response.status == 400, response.body
    assert response.body["reason"] == "BadRequest"
    assert response.body["message"] == (
        f'ConfigMap in version "v1" cannot be handled as a ConfigMap: {message}'
    )


def test_bad_field_validation_value_is_refused(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    response = http(
        api_client,
        "POST",
        base,
        body={"metadata": {"name": "cm"}},
        query={"fieldValidation": "Loose"},
    )
    assert response.status == 422, response.body
    assert response.body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: '
        '"Loose": supported values: "", "Ignore", "Strict", "Warn"'
    )


def test_json_patch_reports_its_own_fields_then_the_result(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", base, body={"metadata": {"name": "cm"}}))
    ops = (
        b'[{"op": "add", "path": "/zz", "value": 1, "extra": 2},'
        b' {"op": "add", "path": "/aa", "value": 1}]'
    )
    resp = stream(
        api_client,
        "PATCH",
        f"{base}/cm",
        body=ops,
        content_type="application/json-patch+json",
        query={"fieldValidation": "Strict"},
    )
    try:
        body = json.loads(resp.read())
    finally:
        resp.release_conn()
    assert resp.status == 422, body
    _assert_patch_refused(
        body,
        '"{',
        'strict decoding error: json patch unknown field "[0].extra", unknown field "aa", '
        'unknown field "zz"',
    )
    assert body["message"].endswith('"zz"')


APPLY_WITH_REPEATS = b"""apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
data:
  a: "1"
  a: "2"
"""


def test_apply_reports_repeated_yaml_keys(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/cm"
    query = {"fieldManager": "applier", "fieldValidation": "Strict"}
    resp = stream(
        api_client,
        "PATCH",
        path,
        body=APPLY_WITH_REPEATS,
        content_type="application/apply-patch+yaml",
        query=query,
    )
    try:
        body = json.loads(resp.read())
    finally:
        resp.release_conn()
    assert resp.status == 400, body
    assert body["message"] == (
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n"
        '  line 7: key "a" already set in map'
    )
    resp = stream(
        api_client,
        "PATCH",
        path,
        body=APPLY_WITH_REPEATS,
        content_type="application/apply-patch+yaml",
        query={"fieldManager": "applier"},
    )
    try:
        created = json.loads(resp.read())
        warnings = resp.headers.getlist("Warning")
    finally:
        resp.release_conn()
    assert resp.status == 201, created
    assert created["data"] == {"a": "2"}
    assert warnings == ['299 - "line 7: key \\"a\\" already set in map"']
