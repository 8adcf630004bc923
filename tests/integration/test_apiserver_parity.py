"""Conformance: the differences a client can see, by theme (issue 23, item 3).

Each test is what kube-apiserver 1.36 answers, read from its source (named in each test)
and from requests recorded against it: the fields of error bodies, validation causes,
watch errors, deletion answers, discovery verbs, formats and the objects it creates.
Like the rest of the conformance suite, these run unchanged against a real cluster with
``OVERSEER_TEST_KUBECONFIG``.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import uuid
from typing import Any

import pytest
import yaml

from apiserver.machinery import protobuf
from tests.integration.rawhttp import (
    JSON_PATCH,
    eventually,
    http,
    merge_patch,
    ok,
    stream,
    watching,
)
from tests.integration.test_apiserver_crd import Crd, make_crd  # noqa: F401  (fixture)


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _configmap(api_client: Any, namespace: str, name: str) -> dict[str, Any]:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}}
    return ok(http(api_client, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body))


# --------------------------------------------------------------------------- details


def test_error_details_as_kube_builds_them(api_client: Any, namespace: str) -> None:
    """Each Status carries the details its constructor in apimachinery's errors.go gives:
    ``NewGenericServerResponse`` (JSON-patch failures in handlers/patch.go, go-restful's
    415 for a PATCH media type the route does not consume, its 405 for a method no route
    has) has empty details ``{}``;
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

    response = http(api_client, "POST", path, body={"metadata": {"name": name}})
    assert response.status == 405, response.body  # go-restful: no POST route on an item
    assert response.body["reason"] == "MethodNotAllowed"
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


# --------------------------------------------------------------------------- validation


def _causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["reason"], c["field"]) for c in body["details"]["causes"]]


def test_validation_causes_as_kube_walks_the_object(api_client: Any, namespace: str) -> None:
    """A Deployment without selector and template: apps ValidateDeploymentSpec reports the
    nil selector, then validates the template (a struct, never absent) against the
    selector that selects nothing and as a pod template. A finalizer is checked by
    apimachinery's ValidateFinalizers for the list and by core's ValidateObjectMeta for
    the item (a name without a domain is neither standard nor fully qualified)."""
    response = http(
        api_client,
        "POST",
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        body={"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bare"}},
    )
    assert response.status == 422, response.body
    causes = _causes(response.body)
    assert ("FieldValueRequired", "spec.selector") in causes
    assert ("FieldValueInvalid", "spec.template.metadata.labels") in causes
    assert ("FieldValueRequired", "spec.template.spec.containers") in causes
    assert not [c for c in causes if c[1] == "spec.template"]

    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    response = http(
        api_client,
        "POST",
        collection,
        body={"metadata": {"name": "fin", "finalizers": ["not a finalizer"]}},
    )
    assert response.status == 422, response.body
    assert _causes(response.body) == [
        ("FieldValueInvalid", "metadata.finalizers"),
        ("FieldValueInvalid", "metadata.finalizers[0]"),
    ]
    response = http(
        api_client,
        "POST",
        collection,
        body={"metadata": {"name": "fin", "finalizers": ["example.com/ok", "nodomain"]}},
    )
    assert response.status == 422, response.body
    assert _causes(response.body) == [("FieldValueInvalid", "metadata.finalizers[1]")]
    assert response.body["details"]["causes"][0]["message"] == (
        'Invalid value: "nodomain": name is neither a standard finalizer name nor is it '
        "fully qualified"
    )


# --------------------------------------------------------------------------- watch


def test_watch_errors_as_kube_answers_them(
    api_client: Any, namespace: str, request: pytest.FixtureRequest
) -> None:
    """A resourceVersion that is no number fails the storage's ParseResourceVersion: a
    500 without a reason. A custom resource's watch cache starts when the resource is
    first served; a watch from before it is the 200 whose one event is an ERROR 410
    ``Expired`` (watchCache: too old resource version), not a replay."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    with watching(api_client, path, read_timeout=10, resourceVersion="abc") as resp:
        assert resp.status == 500
        body = json.loads(resp.read())
        assert body["kind"] == "Status"
        assert body["code"] == 500
        assert "reason" not in body, body

    before = ok(http(api_client, "GET", f"/api/v1/namespaces/{namespace}"))
    old_rv = before["metadata"]["resourceVersion"]
    crd: Crd = request.getfixturevalue("make_crd")()
    ok(http(api_client, "POST", crd.collection(namespace), body=crd.body("w1", size=1)))
    with watching(
        api_client, crd.collection(namespace), read_timeout=10, resourceVersion=old_rv
    ) as resp:
        assert resp.status == 200
        lines = [line for line in resp.read().split(b"\n") if line.strip()]
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events] == ["ERROR"], events
    status = events[0]["object"]
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"].startswith(f"too old resource version: {old_rv} (")


# --------------------------------------------------------------------------- deletion


def test_deletion_answers(api_client: Any, namespace: str, request: pytest.FixtureRequest) -> None:
    """The namespace registry's Delete sets only deletionTimestamp (no grace period); the
    pod strategy's CheckGracefulDelete makes an unscheduled pod's grace 0, so BeforeDelete
    marks it (deletionTimestamp, deletionGracePeriodSeconds 0) and the store deletes it at
    once, answering that last state; a namespaced custom resource has no cluster-scoped
    item path: the apiextensions handler passes it on to the plain-text 404; the CRD
    registry's Delete marks a CRD as the namespace registry marks a namespace."""
    name = _unique("gone")
    ok(http(api_client, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}}))
    answer = ok(http(api_client, "DELETE", f"/api/v1/namespaces/{name}"), 200)
    assert answer["kind"] == "Namespace"
    assert answer["metadata"]["deletionTimestamp"]
    assert "deletionGracePeriodSeconds" not in answer["metadata"]
    assert answer["status"]["phase"] == "Terminating"

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "unscheduled"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
    }
    pods = f"/api/v1/namespaces/{namespace}/pods"
    ok(http(api_client, "POST", pods, body=pod))
    answer = ok(
        http(api_client, "DELETE", f"{pods}/unscheduled", body={"gracePeriodSeconds": 30}), 200
    )
    assert answer["kind"] == "Pod"
    assert answer["metadata"]["deletionTimestamp"]
    assert answer["metadata"]["deletionGracePeriodSeconds"] == 0
    assert http(api_client, "GET", f"{pods}/unscheduled").status == 404

    crd: Crd = request.getfixturevalue("make_crd")()
    ok(http(api_client, "POST", crd.collection(namespace), body=crd.body("w1", size=1)))
    response = http(api_client, "GET", f"{crd.collection()}/w1")
    assert response.status == 404
    assert response.headers["Content-Type"].startswith("text/plain")
    assert response.body == "404 page not found\n"

    # The CRD registry's Delete, like the namespace's: a timestamp, its cleanup finalizer,
    # no grace period and no new generation (the instance makes it wait).
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    before = ok(http(api_client, "GET", f"{crds}/{crd.name}"))
    answer = ok(http(api_client, "DELETE", f"{crds}/{crd.name}"), 200)
    assert answer["metadata"]["deletionTimestamp"]
    assert "deletionGracePeriodSeconds" not in answer["metadata"]
    assert answer["metadata"]["generation"] == before["metadata"]["generation"]
    assert "customresourcecleanup.apiextensions.k8s.io" in answer["metadata"]["finalizers"]


# --------------------------------------------------------------------------- discovery


def test_namespaces_have_no_deletecollection(api_client: Any) -> None:
    """The namespace REST storage implements no DeleteCollection: discovery does not list
    the verb and go-restful has no route for it (its 405, a NewGenericServerResponse)."""
    resources = ok(http(api_client, "GET", "/api/v1"))["resources"]
    verbs = next(r["verbs"] for r in resources if r["name"] == "namespaces")
    assert sorted(verbs) == ["create", "delete", "get", "list", "patch", "update", "watch"]
    aggregated = ok(
        http(
            api_client,
            "GET",
            "/api",
            headers={
                "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            },
        )
    )
    listed = [
        r
        for group in aggregated["items"]
        for version in group["versions"]
        for r in version["resources"]
        if r["resource"] == "namespaces"
    ]
    assert listed and all("deletecollection" not in r["verbs"] for r in listed)

    response = http(api_client, "DELETE", "/api/v1/namespaces", query={"labelSelector": "x=y"})
    assert response.status == 405, response.body
    assert response.body["reason"] == "MethodNotAllowed"
    assert response.body["details"] == {}


# --------------------------------------------------------------------------- formats

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def test_table_rows_carry_whole_objects_with_their_kind(api_client: Any, namespace: str) -> None:
    """handlers' asTable puts each object in its row as the encoder writes an object of
    the request's version: with ``kind`` and ``apiVersion`` (a list's items have none)."""
    name = _unique("cm")
    _configmap(api_client, namespace, name)
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    for path in (collection, f"{collection}/{name}"):
        table = ok(
            http(
                api_client,
                "GET",
                path,
                query={"includeObject": "Object"},
                headers={"Accept": TABLE},
            )
        )
        assert table["kind"] == "Table"
        assert table["rows"]
        for row in table["rows"]:
            assert row["object"]["kind"] == "ConfigMap"
            assert row["object"]["apiVersion"] == "v1"
            assert row["object"]["metadata"]["namespace"] == namespace
    listed = ok(http(api_client, "GET", collection))
    assert all("kind" not in item for item in listed["items"])


# --------------------------------------------------------------------------- objects

ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


def test_created_event_has_the_keys_of_the_go_type(api_client: Any, namespace: str) -> None:
    """core/v1 Event serialised from its Go struct: ``source`` (a struct), the three
    timestamps (null when unset) and ``reportingComponent``/``reportingInstance`` (no
    omitempty) are always there; nothing is defaulted into them."""
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": _unique("ev")},
        "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": namespace},
        "reason": "Tested",
        "message": "made by a test",
        "type": "Normal",
    }
    path = f"/api/v1/namespaces/{namespace}/events"
    created = ok(http(api_client, "POST", path, body=body), 201)
    stored = ok(http(api_client, "GET", f"{path}/{created['metadata']['name']}"))
    for event in (created, stored):
        assert event["source"] == {}
        assert event["firstTimestamp"] is None
        assert event["lastTimestamp"] is None
        assert event["eventTime"] is None
        assert event["reportingComponent"] == ""
        assert event["reportingInstance"] == ""
        assert "count" not in event
        assert "annotations" not in event["metadata"]


def test_pod_update_adds_no_annotations(api_client: Any, namespace: str) -> None:
    """The pod strategy's PrepareForUpdate copies status and bumps nothing into metadata:
    what comes back has exactly the annotations the client wrote, and an empty map (sent,
    or emptied by a patch) is no ``annotations`` key at all (ObjectMeta's omitempty)."""
    pods = f"/api/v1/namespaces/{namespace}/pods"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "annotated"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
    }
    created = ok(http(api_client, "POST", pods, body=pod), 201)
    assert "annotations" not in created["metadata"]
    created["metadata"]["labels"] = {"changed": "yes"}
    updated = ok(http(api_client, "PUT", f"{pods}/annotated", body=created))
    assert "annotations" not in updated["metadata"]
    updated["metadata"]["annotations"] = {}  # empty: ObjectMeta's omitempty leaves it out
    updated = ok(http(api_client, "PUT", f"{pods}/annotated", body=updated))
    assert "annotations" not in updated["metadata"]
    updated["metadata"]["annotations"] = {"example.com/mine": "1"}
    updated = ok(http(api_client, "PUT", f"{pods}/annotated", body=updated))
    assert updated["metadata"]["annotations"] == {"example.com/mine": "1"}
    emptied = merge_patch(
        api_client, f"{pods}/annotated", {"metadata": {"annotations": {"example.com/mine": None}}}
    )
    assert "annotations" not in emptied["metadata"]
    assert "annotations" not in ok(http(api_client, "GET", f"{pods}/annotated"))["metadata"]
    ok(http(api_client, "DELETE", f"{pods}/annotated", query={"gracePeriodSeconds": 0}))


def test_root_ca_config_map_holds_a_real_ca(api_client: Any, namespace: str) -> None:
    """kube-controller-manager's root-ca publisher puts the cluster CA (PEM) in every
    namespace, with kube's description."""
    path = f"/api/v1/namespaces/{namespace}/configmaps/kube-root-ca.crt"
    eventually(lambda: http(api_client, "GET", path).status == 200, 10, "kube-root-ca.crt")
    cm = ok(http(api_client, "GET", path))
    assert cm["metadata"]["annotations"] == {"kubernetes.io/description": ROOT_CA_DESCRIPTION}
    bundle = cm["data"]["ca.crt"]
    end = "-----END CERTIFICATE-----"
    first = bundle[: bundle.index(end) + len(end)] + "\n"
    assert len(ssl.PEM_cert_to_DER_cert(first)) > 100
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed to read the certificate")
    shown = subprocess.run(
        [openssl, "x509", "-noout", "-ext", "basicConstraints"],
        input=first,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert "CA:TRUE" in shown, shown


PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


def _raw(api_client: Any, path: str, accept: str, **query: Any) -> tuple[int, str, bytes]:
    resp = stream(api_client, "GET", path, query=query, headers={"Accept": accept})
    try:
        return resp.status, resp.headers.get("Content-Type", ""), resp.read()
    finally:
        resp.release_conn()


def test_protobuf_where_kube_answers_protobuf(
    api_client: Any, namespace: str, request: pytest.FixtureRequest
) -> None:
    """Built-in resources answer protobuf when asked: objects, lists, Status errors, watch
    frames, and the metadata-only forms (``as=PartialObjectMetadata[List]``, what
    metadata informers ask for). Custom resources have no protobuf form: their handler
    (apiextensions-apiserver's customresource_handler.go) leaves protobuf out of its
    StandardSerializers, and every handler negotiates the answer's media type before it
    reads (handlers/get.go: NegotiateOutputMediaType, then the getter), so protobuf alone
    is a 406 even for an object that does not exist; with JSON acceptable too, objects
    come back as JSON. An error is a Status, which has a protobuf form, and
    ErrorNegotiated writes it under the default endpoint restrictions, where the custom
    resource serializer's protobuf is allowed: errors come back in protobuf."""
    name = _unique("cm")
    _configmap(api_client, namespace, name)
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    for path in (collection, f"{collection}/{name}"):
        status, ctype, data = _raw(api_client, path, PROTOBUF)
        assert (status, ctype) == (200, PROTOBUF), data[:200]
        assert data.startswith(MAGIC)
    status, ctype, data = _raw(api_client, f"{collection}/absent", PROTOBUF)
    assert (status, ctype) == (404, PROTOBUF), data[:200]
    assert data.startswith(MAGIC) and b"NotFound" in data
    for path, kind in (
        (collection, b"PartialObjectMetadataList"),
        (f"{collection}/{name}", b"PartialObjectMetadata"),
    ):
        accept = f"{PROTOBUF};as={kind.decode()};g=meta.k8s.io;v=v1, application/json"
        status, ctype, data = _raw(api_client, path, accept)
        assert (status, ctype.split(";")[0]) == (200, PROTOBUF), data[:200]
        # runtime.Unknown's TypeMeta: apiVersion meta.k8s.io/v1, then the kind
        assert data.startswith(MAGIC + b"\n") and b"\x12" + bytes([len(kind)]) + kind in data[:80]
        assert b"ConfigMap" not in data[:80]
    status, ctype, data = _raw(api_client, collection, PROTOBUF, watch=True, timeoutSeconds=1)
    assert status == 200
    assert ctype == PROTOBUF + ";stream=watch"
    assert data[4:].startswith(b"\n\x05ADDED")  # a length, then the WatchEvent message

    crd: Crd = request.getfixturevalue("make_crd")()
    path = f"{crd.collection(namespace)}/absent"
    status, ctype, data = _raw(api_client, path, PROTOBUF)
    assert (status, ctype) == (406, PROTOBUF), data[:200]
    refused = protobuf.decode(data)[2]
    assert (refused["kind"], refused["reason"], refused["code"]) == ("Status", "NotAcceptable", 406)
    # negotiation.MediaTypesForSerializer: every media type of the custom resource serializer
    assert refused["message"].startswith(
        "only the following media types are accepted: application/json, application/yaml, "
        f"{PROTOBUF}"
    ), refused["message"]
    status, ctype, data = _raw(api_client, path, f"{PROTOBUF}, application/json")
    assert (status, ctype) == (404, PROTOBUF), data[:200]
    assert protobuf.decode(data)[2]["reason"] == "NotFound"
    status, ctype, data = _raw(api_client, path, "application/json")
    assert (status, ctype) == (404, "application/json"), data[:200]
    assert json.loads(data)["reason"] == "NotFound"
    status, ctype, data = _raw(
        api_client, crd.collection(namespace), f"{PROTOBUF}, application/json"
    )
    assert (status, ctype) == (200, "application/json")
    # the custom resource serializer has YAML: a custom object in YAML is its JSON
    obj = ok(http(api_client, "POST", crd.collection(namespace), body=crd.body("y", size=1)))
    status, ctype, data = _raw(api_client, f"{crd.collection(namespace)}/y", "application/yaml")
    assert (status, ctype) == (200, "application/yaml"), data[:200]
    assert yaml.safe_load(data) == obj
