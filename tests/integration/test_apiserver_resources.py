"""Conformance: the resources and subresources of a 1.36 server beyond the core set.

CRUD round trips for the workload, batch, policy, RBAC, discovery, storage and
scheduling kinds; the defaults a client sees; ``*/scale``, ``pods/binding``,
``pods/eviction`` (with a PodDisruptionBudget), ``pods/log`` and
``serviceaccounts/token``. Cluster-scoped objects get unique names and are deleted.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from tests.integration.rawhttp import MERGE, eventually, gone, http, ok, stream

PAUSE = "registry.k8s.io/pause:3.9"


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _template(app: str, restart: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": PAUSE}]}
    if restart:
        spec["restartPolicy"] = restart
    return {"metadata": {"labels": {"app": app}}, "spec": spec}


def _workload(kind: str, api_version: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": _template(name), **spec},
    }


class Case(NamedTuple):
    collection: str  # "{ns}" is the test namespace
    kind: str
    factory: Callable[[str], dict[str, Any]]


NAMESPACED = [
    Case(
        "/apis/apps/v1/namespaces/{ns}/daemonsets",
        "DaemonSet",
        lambda n: _workload("DaemonSet", "apps/v1", n),
    ),
    Case(
        "/apis/apps/v1/namespaces/{ns}/statefulsets",
        "StatefulSet",
        lambda n: _workload("StatefulSet", "apps/v1", n, replicas=0, serviceName=n),
    ),
    Case(
        "/apis/apps/v1/namespaces/{ns}/controllerrevisions",
        "ControllerRevision",
        lambda n: {
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": {"name": n},
            "data": {"spec": {"x": 1}},
            "revision": 1,
        },
    ),
    Case(
        "/apis/batch/v1/namespaces/{ns}/jobs",
        "Job",
        lambda n: {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": n},
            "spec": {"suspend": True, "template": _template(n, "Never")},
        },
    ),
    Case(
        "/apis/batch/v1/namespaces/{ns}/cronjobs",
        "CronJob",
        lambda n: {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": n},
            "spec": {
                "schedule": "*/30 * * * *",
                "suspend": True,
                "jobTemplate": {"spec": {"template": _template(n, "OnFailure")}},
            },
        },
    ),
    Case(
        "/api/v1/namespaces/{ns}/replicationcontrollers",
        "ReplicationController",
        lambda n: {
            "apiVersion": "v1",
            "kind": "ReplicationController",
            "metadata": {"name": n},
            "spec": {"replicas": 0, "selector": {"app": n}, "template": _template(n)},
        },
    ),
    Case(
        "/api/v1/namespaces/{ns}/podtemplates",
        "PodTemplate",
        lambda n: {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": n},
            "template": _template(n),
        },
    ),
    Case(
        "/api/v1/namespaces/{ns}/endpoints",
        "Endpoints",
        lambda n: {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": n}},
    ),
    Case(
        "/api/v1/namespaces/{ns}/resourcequotas",
        "ResourceQuota",
        lambda n: {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": n},
            "spec": {"hard": {"configmaps": "100"}},
        },
    ),
    Case(
        "/api/v1/namespaces/{ns}/persistentvolumeclaims",
        "PersistentVolumeClaim",
        lambda n: {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": n},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "storageClassName": "ovs-none",
            },
        },
    ),
    Case(
        "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        lambda n: {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": n},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": n},
                "maxReplicas": 3,
            },
        },
    ),
    Case(
        "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        "PodDisruptionBudget",
        lambda n: {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": n},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": n}}},
        },
    ),
    Case(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        "Role",
        lambda n: {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": n},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        },
    ),
    Case(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
        "RoleBinding",
        lambda n: {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": n},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": n},
            "subjects": [{"kind": "User", "name": "someone"}],
        },
    ),
    Case(
        "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
        "EndpointSlice",
        lambda n: {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": n},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.1.2.3"]}],
            "ports": [{"port": 80, "protocol": "TCP", "name": "http"}],
        },
    ),
    Case(
        "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
        "NetworkPolicy",
        lambda n: {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": n},
            "spec": {"podSelector": {"matchLabels": {"app": n}}},
        },
    ),
]

CLUSTER = [
    Case(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "ClusterRole",
        lambda n: {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": n},
            "rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}],
        },
    ),
    Case(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "ClusterRoleBinding",
        lambda n: {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": n},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": n},
            "subjects": [{"kind": "Group", "name": "nobody"}],
        },
    ),
    Case(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        "PriorityClass",
        lambda n: {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": n},
            "value": 1000,
        },
    ),
    Case(
        "/apis/storage.k8s.io/v1/storageclasses",
        "StorageClass",
        lambda n: {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": n},
            "provisioner": "example.com/none",
        },
    ),
    Case(
        "/apis/networking.k8s.io/v1/ingressclasses",
        "IngressClass",
        lambda n: {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": n},
            "spec": {"controller": "example.com/none"},
        },
    ),
    Case(
        "/apis/node.k8s.io/v1/runtimeclasses",
        "RuntimeClass",
        lambda n: {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": n},
            "handler": "ovs-none",
        },
    ),
]


def _round_trip(api_client: Any, path: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    name = body["metadata"]["name"]
    created = ok(http(api_client, "POST", path, body=body), 201)
    assert created["kind"] == kind
    assert created["metadata"]["uid"]
    got = ok(http(api_client, "GET", f"{path}/{name}"), 200)
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    listed = ok(http(api_client, "GET", path), 200)
    assert listed["kind"] == f"{kind}List"
    assert name in [i["metadata"]["name"] for i in listed["items"]]
    answer = http(api_client, "DELETE", f"{path}/{name}", query={"propagationPolicy": "Background"})
    assert answer.status == 200, answer.body
    eventually(gone(api_client, f"{path}/{name}"), 30, f"{kind} {name} deleted")
    return created


@pytest.mark.parametrize("case", NAMESPACED, ids=[c.kind for c in NAMESPACED])
def test_namespaced_crud(api_client: Any, namespace: str, case: Case) -> None:
    name = _unique(case.kind.lower()[:10])
    _round_trip(api_client, case.collection.format(ns=namespace), case.kind, case.factory(name))


@pytest.mark.parametrize("case", CLUSTER, ids=[c.kind for c in CLUSTER])
def test_cluster_scoped_crud(api_client: Any, case: Case) -> None:
    name = _unique(f"ovs-{case.kind.lower()[:10]}")
    try:
        created = _round_trip(api_client, case.collection, case.kind, case.factory(name))
    finally:
        http(api_client, "DELETE", f"{case.collection}/{name}")
    assert "namespace" not in created["metadata"]


# --------------------------------------------------------------------------- defaults


def test_workload_defaults(api_client: Any, namespace: str) -> None:
    ds = ok(
        http(
            api_client,
            "POST",
            f"/apis/apps/v1/namespaces/{namespace}/daemonsets",
            body=_workload("DaemonSet", "apps/v1", "ds"),
        ),
        201,
    )
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert ds["spec"]["revisionHistoryLimit"] == 10
    assert ds["metadata"]["generation"] == 1
    assert ds["spec"]["template"]["spec"]["restartPolicy"] == "Always"

    sts = ok(
        http(
            api_client,
            "POST",
            f"/apis/apps/v1/namespaces/{namespace}/statefulsets",
            body=_workload("StatefulSet", "apps/v1", "sts", serviceName="sts"),
        ),
        201,
    )
    assert sts["spec"]["replicas"] == 1
    assert sts["spec"]["podManagementPolicy"] == "OrderedReady"
    assert sts["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"partition": 0},
    }
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }


def test_job_defaults_and_generated_selector(api_client: Any, namespace: str) -> None:
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "batchy"},
        "spec": {"suspend": True, "template": _template("batchy", "Never")},
    }
    job = ok(
        http(api_client, "POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", body=body), 201
    )
    spec = job["spec"]
    assert spec["completions"] == 1
    assert spec["parallelism"] == 1
    assert spec["backoffLimit"] == 6
    assert spec["completionMode"] == "NonIndexed"
    uid = job["metadata"]["uid"]
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = spec["template"]["metadata"]["labels"]
    assert labels["batch.kubernetes.io/controller-uid"] == uid
    assert labels["batch.kubernetes.io/job-name"] == "batchy"
    assert labels["job-name"] == "batchy"


def test_job_template_is_immutable(api_client: Any, namespace: str) -> None:
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "fixedjob"},
        "spec": {"template": _template("fixedjob", "Never")},
    }
    ok(http(api_client, "POST", path, body=body), 201)
    change = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "x:1"}]}}}}
    response = http(
        api_client,
        "PATCH",
        f"{path}/fixedjob",
        body=change,
        content_type="application/strategic-merge-patch+json",
    )
    assert response.status == 422, response.body
    assert response.body["reason"] == "Invalid"
    assert any(c["field"] == "spec.template" for c in response.body["details"]["causes"])


def test_job_restart_policy_always_is_invalid(api_client: Any, namespace: str) -> None:
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "always"},
        "spec": {"template": _template("always", "Always")},
    }
    response = http(api_client, "POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", body=body)
    assert response.status == 422, response.body
    assert response.body["details"]["kind"] == "Job"
    assert response.body["details"]["group"] == "batch"
    fields = [c["field"] for c in response.body["details"]["causes"]]
    assert "spec.template.spec.restartPolicy" in fields


def test_rolebinding_role_ref_is_immutable(api_client: Any, namespace: str) -> None:
    path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings"
    body = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "a"},
        "subjects": [{"kind": "User", "name": "someone"}],
    }
    created = ok(http(api_client, "POST", path, body=body), 201)
    assert created["subjects"] == [
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "someone"}
    ]
    response = http(
        api_client, "PATCH", f"{path}/rb", body={"roleRef": {"name": "b"}}, content_type=MERGE
    )
    assert response.status == 422, response.body
    assert response.body["reason"] == "Invalid"
    # rbac validation: field.Invalid("roleRef", <the internal rbac.RoleRef>, ...): a struct
    # without json tags, so json.Marshal names its Go fields
    shown = '{"APIGroup":"rbac.authorization.k8s.io","Kind":"Role","Name":"b"}'
    causes = response.body["details"]["causes"]
    assert causes == [
        {
            "reason": "FieldValueInvalid",
            "message": f"Invalid value: {shown}: cannot change roleRef",
            "field": "roleRef",
        }
    ]


def test_builtin_apiservices_are_available(api_client: Any) -> None:
    listed = ok(http(api_client, "GET", "/apis/apiregistration.k8s.io/v1/apiservices"), 200)
    names = {i["metadata"]["name"] for i in listed["items"]}
    assert {"v1.", "v1.apps", "v1.batch", "v1.rbac.authorization.k8s.io"} <= names
    apps = ok(http(api_client, "GET", "/apis/apiregistration.k8s.io/v1/apiservices/v1.apps"), 200)
    assert apps["spec"]["group"] == "apps"
    assert apps["spec"]["version"] == "v1"
    assert apps["spec"].get("service") is None
    available = {c["type"]: c for c in apps["status"]["conditions"]}["Available"]
    assert available["status"] == "True"
    assert available["reason"] == "Local"


# --------------------------------------------------------------------------- scale


def _deployment(api_client: Any, namespace: str, name: str, replicas: int) -> str:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    ok(
        http(
            api_client,
            "POST",
            path,
            body=_workload("Deployment", "apps/v1", name, replicas=replicas),
        ),
        201,
    )
    return f"{path}/{name}"


def test_deployment_scale_subresource(api_client: Any, namespace: str) -> None:
    path = _deployment(api_client, namespace, "scaled", 1)
    scale = ok(http(api_client, "GET", f"{path}/scale"), 200)
    assert scale["kind"] == "Scale"
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["metadata"]["name"] == "scaled"
    assert scale["spec"] == {"replicas": 1}
    assert scale["status"]["selector"] == "app=scaled"

    for _ in range(10):  # controllers write the Deployment in between on a cluster
        current = ok(http(api_client, "GET", f"{path}/scale"), 200)
        current["spec"]["replicas"] = 3
        response = http(api_client, "PUT", f"{path}/scale", body=current)
        if response.status != 409:
            break
    assert response.status == 200, response.body
    assert response.body["spec"]["replicas"] == 3
    assert ok(http(api_client, "GET", path), 200)["spec"]["replicas"] == 3

    patched = ok(
        http(
            api_client, "PATCH", f"{path}/scale", body={"spec": {"replicas": 0}}, content_type=MERGE
        ),
        200,
    )
    assert patched["kind"] == "Scale"
    assert patched.get("spec", {}).get("replicas", 0) == 0
    assert ok(http(api_client, "GET", path), 200)["spec"]["replicas"] == 0


def test_negative_scale_is_invalid(api_client: Any, namespace: str) -> None:
    path = _deployment(api_client, namespace, "neg", 1)
    response = http(
        api_client, "PATCH", f"{path}/scale", body={"spec": {"replicas": -1}}, content_type=MERGE
    )
    assert response.status == 422, response.body
    assert response.body["reason"] == "Invalid"
    assert ok(http(api_client, "GET", path), 200)["spec"]["replicas"] == 1


def test_statefulset_and_replication_controller_scale(api_client: Any, namespace: str) -> None:
    sts = f"/apis/apps/v1/namespaces/{namespace}/statefulsets"
    ok(
        http(
            api_client,
            "POST",
            sts,
            body=_workload("StatefulSet", "apps/v1", "web", replicas=0, serviceName="web"),
        ),
        201,
    )
    patched = ok(
        http(
            api_client,
            "PATCH",
            f"{sts}/web/scale",
            body={"spec": {"replicas": 2}},
            content_type=MERGE,
        ),
        200,
    )
    assert patched["spec"]["replicas"] == 2
    rcs = f"/api/v1/namespaces/{namespace}/replicationcontrollers"
    rc = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "rc"},
        "spec": {"replicas": 0, "selector": {"app": "rc"}, "template": _template("rc")},
    }
    ok(http(api_client, "POST", rcs, body=rc), 201)
    scale = ok(http(api_client, "GET", f"{rcs}/rc/scale"), 200)
    assert scale["status"]["selector"] == "app=rc"


# --------------------------------------------------------------------------- pods


def _pod(api_client: Any, namespace: str, name: str, **spec: Any) -> str:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [{"name": "main", "image": PAUSE}], **spec},
    }
    ok(http(api_client, "POST", f"/api/v1/namespaces/{namespace}/pods", body=body), 201)
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


def test_pod_binding_assigns_a_node(api_client: Any, namespace: str) -> None:
    path = _pod(api_client, namespace, "bound")
    node = f"ovs-fake-node-{uuid.uuid4().hex[:6]}"
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "bound"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    answer = ok(http(api_client, "POST", f"{path}/binding", body=binding), 201)
    assert answer["kind"] == "Status"
    assert answer["status"] == "Success"
    pod = ok(http(api_client, "GET", path), 200)
    assert pod["spec"]["nodeName"] == node
    scheduled = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
    assert scheduled.get("PodScheduled") == "True"

    again = http(api_client, "POST", f"{path}/binding", body=binding)
    assert again.status == 409, again.body
    assert again.body["reason"] == "Conflict"


def test_eviction_of_a_pending_pod_deletes_it(api_client: Any, namespace: str) -> None:
    path = _pod(api_client, namespace, "evicted")
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "evicted", "namespace": namespace},
    }
    answer = ok(http(api_client, "POST", f"{path}/eviction", body=eviction), 201)
    assert answer["kind"] == "Status"
    assert answer["status"] == "Success"
    eventually(gone(api_client, path), 30, "evicted pod deleted")


def test_eviction_refused_by_disruption_budget(api_client: Any, namespace: str) -> None:
    path = _pod(api_client, namespace, "guarded", nodeName=f"ovs-fake-{uuid.uuid4().hex[:6]}")
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    ok(
        http(
            api_client,
            "POST",
            f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
            body=pdb,
        ),
        201,
    )
    ok(
        http(
            api_client,
            "PATCH",
            f"{path}/status",
            body={"status": {"phase": "Running"}},
            content_type=MERGE,
        ),
        200,
    )
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "guarded"}}
    response = http(api_client, "POST", f"{path}/eviction", body=eviction)
    assert response.status == 429, response.body
    assert response.body["reason"] == "TooManyRequests"
    assert response.body["message"] == (
        "Cannot evict pod as it would violate the pod's disruption budget."
    )
    causes = response.body["details"]["causes"]
    assert [c["reason"] for c in causes] == ["DisruptionBudget"]
    assert ok(http(api_client, "GET", path), 200)["metadata"].get("deletionTimestamp") is None


def test_log_of_an_unscheduled_pod_is_no_content(api_client: Any, namespace: str) -> None:
    # a scheduler nobody runs: on a real cluster too the pod stays without a node
    path = _pod(api_client, namespace, "quiet", schedulerName="ovs-test-no-such-scheduler")
    resp = stream(api_client, "GET", f"{path}/log")
    try:
        body = resp.read()
    finally:
        resp.release_conn()
    # pod/strategy.go LogLocation: no node, no location; the LocationStreamer gives no
    # stream and handlers/responsewriters StreamObject answers 204
    assert resp.status == 204
    assert body == b""
    wrong = http(api_client, "GET", f"{path}/log", query={"container": "nope"})
    assert wrong.status == 400, wrong.body
    assert wrong.body["reason"] == "BadRequest"


def test_service_account_token_request(api_client: Any, namespace: str) -> None:
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    answer = ok(
        http(
            api_client,
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/default/token",
            body=request,
        ),
        201,
    )
    assert answer["kind"] == "TokenRequest"
    assert answer["apiVersion"] == "authentication.k8s.io/v1"
    token = answer["status"]["token"]
    _, payload, _ = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["sub"] == f"system:serviceaccount:{namespace}:default"
    expires = dt.datetime.fromisoformat(answer["status"]["expirationTimestamp"])
    left = expires - dt.datetime.now(dt.UTC)
    assert dt.timedelta(minutes=50) < left <= dt.timedelta(minutes=61)
    assert answer["spec"]["expirationSeconds"] == 3600


def test_token_request_too_short_is_invalid(api_client: Any, namespace: str) -> None:
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 60},
    }
    response = http(
        api_client,
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/default/token",
        body=request,
    )
    assert response.status == 422, response.body


def test_deleting_a_job_orphans_by_default(api_client: Any, namespace: str) -> None:
    """batch/v1 Jobs keep OrphanDependents as their default GC policy (jobStrategy)."""
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "orphaning"},
        "spec": {"suspend": True, "template": _template("orphaning", "Never")},
    }
    ok(http(api_client, "POST", path, body=body), 201)
    answer = ok(http(api_client, "DELETE", f"{path}/orphaning"), 200)
    assert answer["kind"] == "Job"
    assert "orphan" in answer["metadata"]["finalizers"]
    assert answer["metadata"]["deletionTimestamp"]
    eventually(gone(api_client, f"{path}/orphaning"), 30, "job deleted after orphaning")


def test_self_subject_review_and_access_review(api_client: Any) -> None:
    review = ok(
        http(
            api_client,
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        ),
        201,
    )
    assert review["kind"] == "SelfSubjectReview"
    assert review["status"]["userInfo"]["username"]
    access = ok(
        http(
            api_client,
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"verb": "list", "resource": "configmaps"}},
            },
        ),
        201,
    )
    assert access["status"]["allowed"] is True
    listing = http(api_client, "GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert listing.status == 405, listing.body
