"""Conformance: ``autoscaling/v1`` HorizontalPodAutoscalers are the ``v2`` objects.

kube-apiserver stores one HorizontalPodAutoscaler and serves it at ``autoscaling/v2``
and ``autoscaling/v1`` (pkg/apis/autoscaling/v1/conversion.go): v1's CPU target is v2's
CPU utilization metric, and what v1 cannot say travels in
``autoscaling.alpha.kubernetes.io/*`` annotations, so that a v1 client writing back what
it read loses nothing.
"""

from __future__ import annotations

import json
from typing import Any

from tests.integration.rawhttp import MERGE, http, ok, watching

METRICS = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR = "autoscaling.alpha.kubernetes.io/behavior"


def _paths(namespace: str) -> tuple[str, str]:
    return (
        f"/apis/autoscaling/v1/namespaces/{namespace}/horizontalpodautoscalers",
        f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers",
    )


TARGET = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def test_a_v1_cpu_target_is_a_v2_cpu_utilization_metric(api_client: Any, namespace: str) -> None:
    v1, v2 = _paths(namespace)
    created = ok(
        http(
            api_client,
            "POST",
            v1,
            body={
                "apiVersion": "autoscaling/v1",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "cpu"},
                "spec": {
                    "scaleTargetRef": TARGET,
                    "maxReplicas": 5,
                    "targetCPUUtilizationPercentage": 50,
                },
            },
        ),
        201,
    )
    assert created["apiVersion"] == "autoscaling/v1"
    assert created["spec"] == {
        "scaleTargetRef": TARGET,
        "minReplicas": 1,
        "maxReplicas": 5,
        "targetCPUUtilizationPercentage": 50,
    }
    assert created["status"] == {"currentReplicas": 0, "desiredReplicas": 0}
    assert not (created["metadata"].get("annotations") or {})
    stored = ok(http(api_client, "GET", f"{v2}/cpu"), 200)
    assert stored["apiVersion"] == "autoscaling/v2"
    assert stored["spec"]["minReplicas"] == 1
    assert stored["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50},
            },
        }
    ]
    listed = ok(http(api_client, "GET", v1), 200)
    assert listed["kind"] == "HorizontalPodAutoscalerList"
    assert listed["apiVersion"] == "autoscaling/v1"
    assert [i["spec"]["targetCPUUtilizationPercentage"] for i in listed["items"]] == [50]


def test_v1_without_a_target_gets_the_80_percent_default(api_client: Any, namespace: str) -> None:
    """autoscaling/v1's implicit CPU target, made explicit by the conversion."""
    v1, v2 = _paths(namespace)
    body = {
        "metadata": {"name": "implicit"},
        "spec": {"scaleTargetRef": TARGET, "minReplicas": 2, "maxReplicas": 4},
    }
    created = ok(http(api_client, "POST", v1, body=body), 201)
    assert created["spec"]["targetCPUUtilizationPercentage"] == 80
    stored = ok(http(api_client, "GET", f"{v2}/implicit"), 200)
    target = stored["spec"]["metrics"][0]["resource"]["target"]
    assert target == {"type": "Utilization", "averageUtilization": 80}


def test_what_v1_cannot_say_travels_in_annotations(api_client: Any, namespace: str) -> None:
    v1, v2 = _paths(namespace)
    memory = {
        "type": "Resource",
        "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}},
    }
    cpu = {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}},
    }
    behavior = {
        "scaleDown": {
            "stabilizationWindowSeconds": 120,
            "selectPolicy": "Min",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
        }
    }
    ok(
        http(
            api_client,
            "POST",
            v2,
            body={
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "rich", "annotations": {"keep": "me"}},
                "spec": {
                    "scaleTargetRef": TARGET,
                    "maxReplicas": 3,
                    "metrics": [memory, cpu],
                    "behavior": behavior,
                },
            },
        ),
        201,
    )
    stored = ok(http(api_client, "GET", f"{v2}/rich"), 200)
    seen = ok(http(api_client, "GET", f"{v1}/rich"), 200)
    assert seen["spec"]["targetCPUUtilizationPercentage"] == 60
    annotations = seen["metadata"]["annotations"]
    assert annotations["keep"] == "me"
    assert json.loads(annotations[METRICS]) == [
        {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "100Mi"}}
    ]
    # the internal Go type, marshalled without json tags
    scale_down = json.loads(annotations[BEHAVIOR])["ScaleDown"]
    assert scale_down["StabilizationWindowSeconds"] == 120
    assert scale_down["SelectPolicy"] == "Min"
    assert scale_down["Policies"] == [{"Type": "Pods", "Value": 1, "PeriodSeconds": 60}]
    assert CONDITIONS not in annotations and CURRENT_METRICS not in annotations

    # A v1 client writing back what it read loses nothing, and the annotations
    # are not stored.
    seen["spec"]["maxReplicas"] = 6
    ok(http(api_client, "PUT", f"{v1}/rich", body=seen), 200)
    after = ok(http(api_client, "GET", f"{v2}/rich"), 200)
    assert after["metadata"]["annotations"] == {"keep": "me"}
    assert after["spec"]["maxReplicas"] == 6
    assert after["spec"]["metrics"] == [memory, cpu]
    assert after["spec"]["behavior"] == stored["spec"]["behavior"]


def test_v2_status_is_seen_through_v1(api_client: Any, namespace: str) -> None:
    v1, v2 = _paths(namespace)
    ok(
        http(
            api_client,
            "POST",
            v2,
            body={"metadata": {"name": "st"}, "spec": {"scaleTargetRef": TARGET, "maxReplicas": 3}},
        ),
        201,
    )
    condition = {
        "type": "AbleToScale",
        "status": "True",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "reason": "ReadyForNewScale",
        "message": "recommended size matches current size",
    }
    status = {
        "currentReplicas": 2,
        "desiredReplicas": 3,
        "currentMetrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "current": {"averageUtilization": 42, "averageValue": "210m"},
                },
            }
        ],
        "conditions": [condition],
    }
    ok(
        http(
            api_client,
            "PATCH",
            f"{v2}/st/status",
            body={"status": status},
            content_type=MERGE,
        ),
        200,
    )
    seen = ok(http(api_client, "GET", f"{v1}/st/status"), 200)
    assert seen["status"] == {
        "currentReplicas": 2,
        "desiredReplicas": 3,
        "currentCPUUtilizationPercentage": 42,
    }
    annotations = seen["metadata"]["annotations"]
    assert json.loads(annotations[CONDITIONS]) == [condition]
    assert json.loads(annotations[CURRENT_METRICS]) == [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "currentAverageUtilization": 42,
                "currentAverageValue": "210m",
            },
        }
    ]
    # a v1 status write keeps the v2 status the annotations carry
    seen["status"]["desiredReplicas"] = 4
    ok(http(api_client, "PUT", f"{v1}/st/status", body=seen), 200)
    after = ok(http(api_client, "GET", f"{v2}/st"), 200)["status"]
    assert after["desiredReplicas"] == 4
    assert after["conditions"] == [condition]
    assert after["currentMetrics"] == status["currentMetrics"]


def _lines(resp: Any, count: int) -> list[dict[str, Any]]:
    """The first ``count`` events of a JSON watch stream."""
    out: list[dict[str, Any]] = []
    buffer = b""
    while len(out) < count:
        chunk = resp.read1(65536)
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                out.append(json.loads(line))
    return out


def test_v1_patch_and_watch_speak_v1(api_client: Any, namespace: str) -> None:
    v1, _ = _paths(namespace)
    with watching(api_client, v1, read_timeout=30, timeoutSeconds=10) as resp:
        assert resp.status == 200
        ok(
            http(
                api_client,
                "POST",
                v1,
                body={
                    "metadata": {"name": "w"},
                    "spec": {
                        "scaleTargetRef": TARGET,
                        "maxReplicas": 2,
                        "targetCPUUtilizationPercentage": 70,
                    },
                },
            ),
            201,
        )
        patched = ok(
            http(
                api_client,
                "PATCH",
                f"{v1}/w",
                body={"spec": {"targetCPUUtilizationPercentage": 75}},
                content_type=MERGE,
            ),
            200,
        )
        assert patched["spec"]["targetCPUUtilizationPercentage"] == 75
        seen = _lines(resp, 2)
    assert [e["type"] for e in seen] == ["ADDED", "MODIFIED"]
    assert {e["object"]["apiVersion"] for e in seen} == {"autoscaling/v1"}
    assert [e["object"]["spec"]["targetCPUUtilizationPercentage"] for e in seen] == [70, 75]


def test_server_side_apply_through_v1(api_client: Any, namespace: str) -> None:
    """An apply in v1 is checked against v1 and its fields are owned in v1."""
    v1, v2 = _paths(namespace)
    config = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "applied"},
        "spec": {"scaleTargetRef": TARGET, "maxReplicas": 4, "targetCPUUtilizationPercentage": 65},
    }
    applied = ok(
        http(
            api_client,
            "PATCH",
            f"{v1}/applied",
            query={"fieldManager": "tester"},
            body=json.dumps(config).encode(),
            content_type="application/apply-patch+yaml",
        ),
        201,
    )
    assert applied["spec"]["targetCPUUtilizationPercentage"] == 65
    entry = next(e for e in applied["metadata"]["managedFields"] if e["manager"] == "tester")
    assert entry["operation"] == "Apply"
    assert entry["apiVersion"] == "autoscaling/v1"
    assert "f:targetCPUUtilizationPercentage" in entry["fieldsV1"]["f:spec"]
    stored = ok(http(api_client, "GET", f"{v2}/applied"), 200)
    assert stored["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 65
