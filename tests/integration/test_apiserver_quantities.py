"""Conformance: resource quantities, as kube-apiserver 1.36 decodes, stores and validates them.

Every ``resource.Quantity`` of a built-in kind is decoded by ``UnmarshalJSON`` and written
back by ``MarshalJSON``: a quantity already in canonical form keeps its text (``07``,
``15G``), anything else is stored canonical (``0.5`` -> ``500m``, ``1024Mi`` -> ``1Gi``,
``1.5Gi`` -> ``1536Mi``). A value that is no quantity fails the decoding (400, the
parser's message, no field path); one that parses but breaks a rule of
``pkg/apis/core/validation`` (negative, not an integer, requests over limits, ...) is a
422 with kube's field path. A controller comparing its desired spec with the stored one
sees the same text on both servers.

Cluster-scoped kinds (PersistentVolume, Node, RuntimeClass, ResourceSlice) are created
with ``dryRun=All``: the answer is the object as it would be stored, nothing is left.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.integration.rawhttp import MERGE, eventually, http, ok

IMAGE = "registry.k8s.io/pause:3.9"
NO_CLASS = "overseer-test-none"  # a storage class that does not exist: nothing binds
FORMAT_WRONG = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)

# container resources as sent, and as kube stores them
SENT = {
    "requests": {"cpu": "0.25", "memory": "64Mi"},
    "limits": {"cpu": "0.5", "memory": "131072Ki"},
}
STORED = {
    "requests": {"cpu": "250m", "memory": "64Mi"},
    "limits": {"cpu": "500m", "memory": "128Mi"},
}


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _pod_spec(**extra: Any) -> dict[str, Any]:
    container = {"name": "main", "image": IMAGE, "resources": SENT}
    return {
        "containers": [container],
        "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1.5Gi"}}],
        **extra,
    }


def _template(**extra: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "q"}}, "spec": _pod_spec(**extra)}


def _template_spec_kept(spec: dict[str, Any]) -> None:
    assert spec["containers"][0]["resources"] == STORED
    assert spec["volumes"][0]["emptyDir"]["sizeLimit"] == "1536Mi"


@dataclass(frozen=True)
class Case:
    """One kind: where it is created, what is sent, and what kube stores."""

    kind: str
    api_version: str
    plural: str
    body: dict[str, Any]
    check: Callable[[dict[str, Any]], None]
    namespaced: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def collection(self, namespace: str) -> str:
        group_version = self.api_version
        root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        if self.namespaced:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"

    def manifest(self, name: str) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": {"name": name},
            **self.body,
        }


def _quota_kept(obj: dict[str, Any]) -> None:
    assert obj["spec"]["hard"] == {
        "cpu": "500m",
        "memory": "1Gi",
        "pods": "07",
        "requests.storage": "15G",
    }


def _limit_range_kept(obj: dict[str, Any]) -> None:
    container, claim = obj["spec"]["limits"]
    assert container["max"] == {"cpu": "2"}
    assert container["min"] == {"cpu": "10m"}
    assert container["default"] == {"cpu": "100m", "memory": "128Mi"}
    assert container["defaultRequest"] == {"cpu": "50m", "memory": "64Mi"}
    assert container["maxLimitRequestRatio"] == {"cpu": "10"}
    assert claim["max"] == {"storage": "2Ti"}
    assert claim["min"] == {"storage": "512Mi"}


def _claim_kept(obj: dict[str, Any]) -> None:
    assert obj["spec"]["resources"] == {
        "requests": {"storage": "1536Mi"},
        "limits": {"storage": "2Gi"},
    }


def _pod_kept(obj: dict[str, Any]) -> None:
    spec = obj["spec"]
    _template_spec_kept(spec)
    assert spec["resources"] == {
        "requests": {"cpu": "500m", "memory": "128Mi"},
        "limits": {"cpu": "1", "memory": "256Mi"},
    }
    assert spec["initContainers"][0]["resources"] == {"requests": {"cpu": "100m"}}
    fields = [e["valueFrom"]["resourceFieldRef"] for e in spec["containers"][0]["env"]]
    # divisor is a Go value member: written "0" when not sent
    assert [(f["resource"], f["divisor"]) for f in fields] == [
        ("limits.cpu", "1"),
        ("limits.memory", "0"),
    ]
    template = spec["volumes"][1]["ephemeral"]["volumeClaimTemplate"]
    assert template["spec"]["resources"] == {"requests": {"storage": "512Mi"}}


_ENV = [
    {
        "name": "CPU",
        "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1000m"}},
    },
    {"name": "MEMORY", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
]
_EPHEMERAL = {
    "name": "claim",
    "ephemeral": {
        "volumeClaimTemplate": {
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": NO_CLASS,
                "resources": {"requests": {"storage": "0.5Gi"}},
            }
        }
    },
}
_POD_SPEC = _pod_spec(
    resources={
        "requests": {"cpu": "0.5", "memory": "131072Ki"},
        "limits": {"cpu": "1000m", "memory": "0.25Gi"},
    },
    initContainers=[{"name": "init", "image": IMAGE, "resources": {"requests": {"cpu": "0.1"}}}],
)
_POD_SPEC["containers"][0] = {**_POD_SPEC["containers"][0], "env": _ENV}
_POD_SPEC["volumes"] = [*_POD_SPEC["volumes"], _EPHEMERAL]
_SELECTOR = {"matchLabels": {"app": "q"}}
_NOWHERE = {"overseer.test/none": "true"}  # a DaemonSet that matches no node runs nothing

CASES = [
    Case(
        "ResourceQuota",
        "v1",
        "resourcequotas",
        {
            "spec": {
                "hard": {"cpu": "0.5", "memory": "1024Mi", "pods": "07", "requests.storage": "15G"}
            }
        },
        _quota_kept,
    ),
    Case(
        "LimitRange",
        "v1",
        "limitranges",
        {
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "max": {"cpu": "2000m"},
                        "min": {"cpu": "0.01"},
                        "default": {"cpu": "0.1", "memory": "131072Ki"},
                        "defaultRequest": {"cpu": "0.05", "memory": "64Mi"},
                        "maxLimitRequestRatio": {"cpu": "10.0"},
                    },
                    {
                        "type": "PersistentVolumeClaim",
                        "max": {"storage": "2048Gi"},
                        "min": {"storage": "0.5Gi"},
                    },
                ]
            }
        },
        _limit_range_kept,
    ),
    Case(
        "PersistentVolumeClaim",
        "v1",
        "persistentvolumeclaims",
        {
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": NO_CLASS,
                "resources": {"requests": {"storage": "1.5Gi"}, "limits": {"storage": "2048Mi"}},
            }
        },
        _claim_kept,
    ),
    Case("Pod", "v1", "pods", {"spec": _POD_SPEC}, _pod_kept),
    Case(
        "PodTemplate",
        "v1",
        "podtemplates",
        {"template": _template()},
        lambda obj: _template_spec_kept(obj["template"]["spec"]),
    ),
    Case(
        "ReplicationController",
        "v1",
        "replicationcontrollers",
        {"spec": {"replicas": 0, "selector": {"app": "q"}, "template": _template()}},
        lambda obj: _template_spec_kept(obj["spec"]["template"]["spec"]),
    ),
    Case(
        "Deployment",
        "apps/v1",
        "deployments",
        {"spec": {"replicas": 0, "selector": _SELECTOR, "template": _template()}},
        lambda obj: _template_spec_kept(obj["spec"]["template"]["spec"]),
    ),
    Case(
        "ReplicaSet",
        "apps/v1",
        "replicasets",
        {"spec": {"replicas": 0, "selector": _SELECTOR, "template": _template()}},
        lambda obj: _template_spec_kept(obj["spec"]["template"]["spec"]),
    ),
    Case(
        "StatefulSet",
        "apps/v1",
        "statefulsets",
        {
            "spec": {
                "replicas": 0,
                "serviceName": "q",
                "selector": _SELECTOR,
                "template": _template(),
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1.5Gi"}},
                        },
                    }
                ],
            }
        },
        lambda obj: (
            _template_spec_kept(obj["spec"]["template"]["spec"]),
            _claim_template_kept(obj["spec"]["volumeClaimTemplates"][0]),
        ),
    ),
    Case(
        "DaemonSet",
        "apps/v1",
        "daemonsets",
        {"spec": {"selector": _SELECTOR, "template": _template(nodeSelector=_NOWHERE)}},
        lambda obj: _template_spec_kept(obj["spec"]["template"]["spec"]),
    ),
    Case(
        "Job",
        "batch/v1",
        "jobs",
        {"spec": {"suspend": True, "template": _template(restartPolicy="Never")}},
        lambda obj: _template_spec_kept(obj["spec"]["template"]["spec"]),
    ),
    Case(
        "CronJob",
        "batch/v1",
        "cronjobs",
        {
            "spec": {
                "schedule": "0 0 1 1 *",
                "suspend": True,
                "jobTemplate": {"spec": {"template": _template(restartPolicy="Never")}},
            }
        },
        lambda obj: _template_spec_kept(obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]),
    ),
    Case(
        "CSIStorageCapacity",
        "storage.k8s.io/v1",
        "csistoragecapacities",
        {"storageClassName": NO_CLASS, "capacity": "1.5Gi", "maximumVolumeSize": "2048Mi"},
        lambda obj: (
            _equal(obj["capacity"], "1536Mi"),
            _equal(obj["maximumVolumeSize"], "2Gi"),
        ),
    ),
    Case(
        "HorizontalPodAutoscaler",
        "autoscaling/v2",
        "horizontalpodautoscalers",
        {
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "none"},
                "minReplicas": 1,
                "maxReplicas": 2,
                "metrics": [
                    {
                        "type": "Pods",
                        "pods": {
                            "metric": {"name": "load"},
                            "target": {"type": "AverageValue", "averageValue": "0.5"},
                        },
                    }
                ],
            }
        },
        lambda obj: _equal(obj["spec"]["metrics"][0]["pods"]["target"]["averageValue"], "500m"),
    ),
    Case(
        "PersistentVolume",
        "v1",
        "persistentvolumes",
        {
            "spec": {
                "capacity": {"storage": "1.5Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/tmp/overseer-test"},
                "storageClassName": NO_CLASS,
                "persistentVolumeReclaimPolicy": "Retain",
            }
        },
        lambda obj: _equal(obj["spec"]["capacity"], {"storage": "1536Mi"}),
        namespaced=False,
    ),
    Case(
        "Node",
        "v1",
        "nodes",
        {
            "status": {
                "capacity": {
                    "cpu": "4",
                    "memory": "8388608Ki",
                    "pods": "110",
                    "ephemeral-storage": "0.5Ti",
                },
                "allocatable": {"cpu": "3.5", "memory": "7.5Gi"},
            }
        },
        lambda obj: (
            _equal(
                obj["status"]["capacity"],
                {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "512Gi"},
            ),
            _equal(obj["status"]["allocatable"], {"cpu": "3500m", "memory": "7680Mi"}),
        ),
        namespaced=False,
    ),
    Case(
        "RuntimeClass",
        "node.k8s.io/v1",
        "runtimeclasses",
        {"handler": "runc", "overhead": {"podFixed": {"cpu": "0.25", "memory": "131072Ki"}}},
        lambda obj: _equal(obj["overhead"]["podFixed"], {"cpu": "250m", "memory": "128Mi"}),
        namespaced=False,
    ),
    Case(
        "ResourceSlice",
        "resource.k8s.io/v1",
        "resourceslices",
        {
            "spec": {
                "driver": "test.overseer.dev",
                "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 1},
                "allNodes": True,
                "devices": [{"name": "dev", "capacity": {"memory": {"value": "1.5Gi"}}}],
            }
        },
        lambda obj: _equal(obj["spec"]["devices"][0]["capacity"], {"memory": {"value": "1536Mi"}}),
        namespaced=False,
    ),
]


def _equal(actual: Any, expected: Any) -> None:
    assert actual == expected


def _claim_template_kept(template: dict[str, Any]) -> None:
    assert template["spec"]["resources"] == {"requests": {"storage": "1536Mi"}}


@pytest.mark.parametrize("case", CASES, ids=[c.kind for c in CASES])
def test_quantities_are_stored_as_kube_writes_them(
    case: Case, api_client: Any, namespace: str
) -> None:
    name = _unique(case.kind.lower())
    collection = case.collection(namespace)
    if case.namespaced:
        created = ok(http(api_client, "POST", collection, body=case.manifest(name)), 201)
        case.check(created)
        case.check(ok(http(api_client, "GET", f"{collection}/{name}")))
    else:  # cluster-scoped: the answer of a dry run is what would be stored
        query = {"dryRun": "All"}
        case.check(ok(http(api_client, "POST", collection, query=query, body=case.manifest(name))))


def test_an_update_with_the_same_quantities_in_another_spelling_changes_nothing(
    api_client: Any, namespace: str
) -> None:
    """kube decodes the body before it compares: ``0.1`` and ``100m`` are the same object,
    so a PUT of what a controller built is no write (the resourceVersion stays). A
    LimitRange: no controller writes to it meanwhile."""
    case = CASES[1]
    path = case.collection(namespace)
    body = case.manifest("same")
    created = ok(http(api_client, "POST", path, body=body), 201)
    again = {**body, "metadata": {**body["metadata"], **_keep(created["metadata"])}}
    updated = ok(http(api_client, "PUT", f"{path}/same", body=again))
    assert updated["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    _limit_range_kept(updated)


def _keep(meta: dict[str, Any]) -> dict[str, Any]:
    return {"resourceVersion": meta["resourceVersion"]}


@pytest.mark.parametrize(
    ("resources", "qos"),
    [
        ({"requests": {"cpu": "0", "memory": "0"}}, "BestEffort"),  # zero amounts don't count
        ({"requests": {"cpu": "0.5"}, "limits": {"cpu": "500m", "memory": "1Gi"}}, "Guaranteed"),
        (
            {
                "requests": {"cpu": "07", "memory": "1Gi"},
                "limits": {"cpu": "7", "memory": "1024Mi"},
            },
            "Guaranteed",
        ),
        ({"requests": {"cpu": "100m"}, "limits": {"cpu": "0.2", "memory": "1Gi"}}, "Burstable"),
    ],
    ids=["zero", "spelled-differently", "kept-text", "burstable"],
)
def test_a_pods_qos_class_compares_quantities_by_value(
    resources: dict[str, Any], qos: str, api_client: Any, namespace: str
) -> None:
    """qos.ComputePodQOS compares with Quantity.Cmp: ``07`` and ``7`` are equal, ``0`` is
    not a request."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "qos"},
        "spec": {"containers": [{"name": "c", "image": IMAGE, "resources": resources}]},
    }
    path = f"/api/v1/namespaces/{namespace}/pods"
    created = ok(http(api_client, "POST", path, body=pod), 201)
    assert created["status"]["qosClass"] == qos


def test_quota_status_follows_the_stored_spec(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/resourcequotas"
    ok(http(api_client, "POST", path, body=CASES[0].manifest("followed")), 201)

    def settled() -> bool:
        status = ok(http(api_client, "GET", f"{path}/followed")).get("status") or {}
        return status.get("hard") == {
            "cpu": "500m",
            "memory": "1Gi",
            "pods": "07",
            "requests.storage": "15G",
        }

    eventually(settled, 30.0, "status.hard == the canonical spec.hard")


def test_claim_status_quantities_are_canonical(api_client: Any, namespace: str) -> None:
    case = CASES[2]
    collection = case.collection(namespace)
    ok(http(api_client, "POST", collection, body=case.manifest("claim")), 201)
    patch = {"status": {"capacity": {"storage": "3072Mi"}}}
    patched = ok(
        http(api_client, "PATCH", f"{collection}/claim/status", body=patch, content_type=MERGE)
    )
    assert patched["status"]["capacity"] == {"storage": "3Gi"}


def test_a_merge_patch_is_decoded_like_a_body(api_client: Any, namespace: str) -> None:
    collection = CASES[0].collection(namespace)
    ok(http(api_client, "POST", collection, body=CASES[0].manifest("patched")), 201)
    patch = {"spec": {"hard": {"cpu": "1.5"}}}
    patched = ok(http(api_client, "PATCH", f"{collection}/patched", body=patch, content_type=MERGE))
    assert patched["spec"]["hard"]["cpu"] == "1500m"
    refused = http(
        api_client,
        "PATCH",
        f"{collection}/patched",
        body={"spec": {"hard": {"cpu": "lots"}}},
        content_type=MERGE,
    )
    assert refused.status == 422, refused.body
    assert refused.body["reason"] == "Invalid"
    assert refused.body["message"].endswith(FORMAT_WRONG)
    assert [c["field"] for c in refused.body["details"]["causes"]] == ["patch"]


def test_server_side_apply_stores_canonical_quantities(api_client: Any, namespace: str) -> None:
    collection = CASES[0].collection(namespace)
    applied = ok(
        http(
            api_client,
            "PATCH",
            f"{collection}/applied",
            query={"fieldManager": "test"},
            body=CASES[0].manifest("applied"),
            content_type="application/apply-patch+yaml",
        ),
        201,
    )
    _quota_kept(applied)


# --------------------------------------------------------------------------- 400 at decode


@pytest.mark.parametrize(
    ("case", "body", "message"),
    [
        (
            CASES[0],
            {"spec": {"hard": {"pods": "lots"}}},
            f'ResourceQuota in version "v1" cannot be handled as a ResourceQuota: {FORMAT_WRONG}',
        ),
        (
            CASES[0],
            {"spec": {"hard": {"cpu": True}}},
            f'ResourceQuota in version "v1" cannot be handled as a ResourceQuota: {FORMAT_WRONG}',
        ),
        (
            CASES[1],
            {"spec": {"limits": [{"type": "Container", "default": {"cpu": "1ki"}}]}},
            'LimitRange in version "v1" cannot be handled as a LimitRange: '
            "unable to parse quantity's suffix",
        ),
        (
            CASES[3],
            {
                "spec": {
                    "containers": [
                        {"name": "c", "image": IMAGE, "resources": {"limits": {"memory": "1 Gi"}}}
                    ]
                }
            },
            f'Pod in version "v1" cannot be handled as a Pod: {FORMAT_WRONG}',
        ),
        (
            CASES[6],
            {
                "spec": {
                    "selector": _SELECTOR,
                    "template": {
                        "metadata": {"labels": {"app": "q"}},
                        "spec": {
                            "containers": [{"name": "c", "image": IMAGE}],
                            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "big"}}],
                        },
                    },
                }
            },
            f'Deployment in version "v1" cannot be handled as a Deployment: {FORMAT_WRONG}',
        ),
    ],
    ids=["quota", "quota-bool", "limitrange-suffix", "pod", "deployment-emptydir"],
)
def test_a_value_that_is_no_quantity_fails_decoding(
    case: Case, body: dict[str, Any], message: str, api_client: Any, namespace: str
) -> None:
    manifest = {**case.manifest("bad"), **body}
    refused = http(api_client, "POST", case.collection(namespace), body=manifest)
    assert refused.status == 400, refused.body
    assert (refused.body["reason"], refused.body["message"]) == ("BadRequest", message)


# --------------------------------------------------------------------------- 422 validation


def _container(resources: dict[str, Any]) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": IMAGE, "resources": resources}]}


INVALID = [
    (
        CASES[0],
        {"spec": {"hard": {"cpu": "-1"}}},
        'ResourceQuota "bad" is invalid: spec.hard[cpu]: Invalid value: "-1": '
        "must be greater than or equal to 0",
    ),
    (
        CASES[0],
        {"spec": {"hard": {"pods": "1.5"}}},
        'ResourceQuota "bad" is invalid: spec.hard[pods]: Invalid value: "1500m": '
        "must be an integer",
    ),
    (
        CASES[0],
        {"spec": {"hard": {"foo": "1"}}},
        'ResourceQuota "bad" is invalid: [spec.hard[foo]: Invalid value: "foo": must be a '
        'standard resource type or fully qualified, spec.hard[foo]: Invalid value: "foo": '
        "must be a standard resource for quota]",
    ),
    (
        CASES[1],
        {"spec": {"limits": [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]}},
        # a Container item's default limit is defaulted to its max and its default request
        # to that (SetDefaults_LimitRangeItem), so min breaks three rules
        'LimitRange "bad" is invalid: [spec.limits[0].min[cpu]: Invalid value: "2": '
        "min value 2 is greater than max value 1, spec.limits[0].defaultRequest[cpu]: "
        'Invalid value: "1": min value 2 is greater than default request value 1, '
        'spec.limits[0].default[cpu]: Invalid value: "2": min value 2 is greater than '
        "default value 1]",
    ),
    (
        CASES[1],
        {"spec": {"limits": [{"type": "Pod", "default": {"cpu": "1"}}]}},
        'LimitRange "bad" is invalid: spec.limits[0].default: Forbidden: '
        "may not be specified when `type` is 'Pod'",
    ),
    (
        CASES[1],
        {"spec": {"limits": [{"type": "Container", "maxLimitRequestRatio": {"cpu": "0.5"}}]}},
        'LimitRange "bad" is invalid: spec.limits[0].maxLimitRequestRatio[cpu]: '
        'Invalid value: "500m": ratio 500m is less than 1',
    ),
    (
        CASES[1],
        {"spec": {"limits": [{"type": "PersistentVolumeClaim", "default": {"storage": "1Gi"}}]}},
        'LimitRange "bad" is invalid: spec.limits[0].limits: Required value: either minimum '
        "or maximum storage value is required, but neither was provided",
    ),
    (
        CASES[2],
        {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "0"}}}},
        'PersistentVolumeClaim "bad" is invalid: spec.resources[storage]: Invalid value: "0": '
        "must be greater than zero",
    ),
    (
        CASES[3],
        {"spec": _container({"requests": {"cpu": "-1"}})},
        'Pod "bad" is invalid: spec.containers[0].resources.requests[cpu]: Invalid value: '
        '"-1": must be greater than or equal to 0',
    ),
    (
        CASES[3],
        {"spec": _container({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})},
        'Pod "bad" is invalid: spec.containers[0].resources.requests: Invalid value: "2": '
        "must be less than or equal to cpu limit of 1",
    ),
    (
        CASES[3],
        {
            "spec": _container(
                {"requests": {"example.com/gpu": "0.5"}, "limits": {"example.com/gpu": "0.5"}}
            )
        },
        'Pod "bad" is invalid: [spec.containers[0].resources.limits[example.com/gpu]: '
        'Invalid value: "500m": must be an integer, '
        "spec.containers[0].resources.requests[example.com/gpu]: "
        'Invalid value: "500m": must be an integer]',
    ),
    (
        CASES[3],
        {
            "spec": {
                **_container({}),
                "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "-1"}}],
            }
        },
        'Pod "bad" is invalid: spec.volumes[0].emptyDir.sizeLimit: Forbidden: '
        "SizeLimit field must be a valid resource quantity",
    ),
    (
        CASES[6],
        {
            "spec": {
                "selector": _SELECTOR,
                "template": {
                    "metadata": {"labels": {"app": "q"}},
                    "spec": _container({"limits": {"memory": "-64Mi"}}),
                },
            }
        },
        'Deployment.apps "bad" is invalid: spec.template.spec.containers[0].resources'
        '.limits[memory]: Invalid value: "-64Mi": must be greater than or equal to 0',
    ),
    (
        CASES[12],
        {"storageClassName": NO_CLASS, "capacity": "-1"},
        'CSIStorageCapacity.storage.k8s.io "bad" is invalid: capacity: Invalid value: "-1": '
        "must be greater than or equal to 0",
    ),
    (
        CASES[14],
        {
            "spec": {
                "capacity": {"storage": "-1"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/tmp/overseer-test"},
            }
        },
        'PersistentVolume "bad" is invalid: [spec.capacity[storage]: Invalid value: -1: must '
        'be a valid resource quantity, spec.capacity[storage]: Invalid value: "-1": must be '
        "greater than zero]",
    ),
    (
        CASES[15],
        {"status": {"capacity": {"cpu": "-1"}}},
        # allocatable is defaulted to capacity (SetDefaults_NodeStatus), and breaks the rule too
        'Node "bad" is invalid: [status.capacity.cpu: Invalid value: "-1": must be greater '
        'than or equal to 0, status.allocatable.cpu: Invalid value: "-1": must be greater '
        "than or equal to 0]",
    ),
    (
        CASES[16],
        {"handler": "runc", "overhead": {"podFixed": {"cpu": "-250m"}}},
        'RuntimeClass.node.k8s.io "bad" is invalid: overhead.limits[cpu]: Invalid value: '
        '"-250m": must be greater than or equal to 0',
    ),
]


@pytest.mark.parametrize(
    ("case", "body", "message"),
    INVALID,
    ids=[
        "quota-negative",
        "quota-integer",
        "quota-name",
        "limitrange-min-max",
        "limitrange-pod-default",
        "limitrange-ratio",
        "limitrange-claim",
        "claim-zero",
        "pod-negative",
        "pod-over-limit",
        "pod-extended-integer",
        "pod-emptydir",
        "deployment",
        "csistoragecapacity",
        "persistentvolume",
        "node",
        "runtimeclass",
    ],
)
def test_a_quantity_that_breaks_a_rule_is_invalid(
    case: Case, body: dict[str, Any], message: str, api_client: Any, namespace: str
) -> None:
    manifest = {**case.manifest("bad"), **body}
    refused = http(
        api_client, "POST", case.collection(namespace), query={"dryRun": "All"}, body=manifest
    )
    assert refused.status == 422, refused.body
    assert (refused.body["reason"], refused.body["message"]) == ("Invalid", message)
