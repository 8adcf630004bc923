"""The autoscaling v1 <-> v2 conversion (apiserver/registry/hpaconv.py) case by case."""

from __future__ import annotations

import json
import re

import pytest

from apiserver.registry import hpaconv

V2 = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "h", "annotations": {hpaconv.METRICS: "stale", "x": "y"}},
    "spec": {
        "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
        "minReplicas": 2,
        "maxReplicas": 9,
        "metrics": [
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "qps", "selector": {"matchLabels": {"a": "b"}}},
                    "target": {"type": "AverageValue", "averageValue": "10"},
                },
            },
            {
                "type": "External",
                "external": {
                    "metric": {"name": "queue"},
                    "target": {"type": "Value", "value": "30"},
                },
            },
            {
                "type": "ContainerResource",
                "containerResource": {
                    "name": "cpu",
                    "container": "app",
                    "target": {"type": "Utilization", "averageUtilization": 70},
                },
            },
        ],
        "behavior": {
            "scaleUp": {
                "stabilizationWindowSeconds": 0,
                "selectPolicy": "Max",
                "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
                "tolerance": "0.05",
            }
        },
    },
    "status": {
        "currentReplicas": 3,
        "desiredReplicas": 3,
        "currentMetrics": [
            {
                "type": "External",
                "external": {"metric": {"name": "queue"}, "current": {"value": "12"}},
            }
        ],
    },
}


def test_a_v2_object_survives_a_v1_round_trip() -> None:
    v1 = hpaconv.v2_to_v1(V2)
    assert "targetCPUUtilizationPercentage" not in v1["spec"]  # only container CPU here
    assert v1["metadata"]["annotations"]["x"] == "y"
    back = hpaconv.v1_to_v2(v1)
    assert back["spec"] == V2["spec"]
    assert back["status"] == V2["status"]
    assert back["metadata"]["annotations"] == {"x": "y"}  # the stale one is gone too


def test_v1_annotations_hold_v1_shapes() -> None:
    annotations = hpaconv.v2_to_v1(V2)["metadata"]["annotations"]
    metrics = json.loads(annotations[hpaconv.METRICS])
    assert metrics[0] == {
        "type": "Pods",
        "pods": {
            "metricName": "qps",
            "selector": {"matchLabels": {"a": "b"}},
            "targetAverageValue": "10",
        },
    }
    assert metrics[1]["external"] == {"metricName": "queue", "targetValue": "30"}
    assert metrics[2]["containerResource"] == {
        "name": "cpu",
        "targetAverageUtilization": 70,
        "container": "app",
    }
    current = json.loads(annotations[hpaconv.CURRENT_METRICS])
    assert current == [
        {"type": "External", "external": {"metricName": "queue", "currentValue": "12"}}
    ]
    behavior = json.loads(annotations[hpaconv.BEHAVIOR])
    assert behavior == {
        "ScaleUp": {
            "StabilizationWindowSeconds": 0,
            "SelectPolicy": "Max",
            "Policies": [{"Type": "Percent", "Value": 100, "PeriodSeconds": 15}],
            "Tolerance": "0.05",
        },
        "ScaleDown": None,
    }


def test_an_empty_behavior_annotation_is_no_behavior() -> None:
    v1 = {
        "metadata": {"name": "h", "annotations": {hpaconv.BEHAVIOR: "{}"}},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "w"}, "maxReplicas": 1},
    }
    v2 = hpaconv.v1_to_v2(v1)
    assert "behavior" not in v2["spec"]
    assert "annotations" not in v2["metadata"]


def test_a_malformed_annotation_names_itself() -> None:
    v1 = {"metadata": {"annotations": {hpaconv.METRICS: "[{"}}, "spec": {"maxReplicas": 1}}
    with pytest.raises(hpaconv.ConversionError, match=re.escape(hpaconv.METRICS)):
        hpaconv.v1_to_v2(v1)
