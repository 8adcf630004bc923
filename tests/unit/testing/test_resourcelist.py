"""Unit tests of the quantity rules of ``pkg/apis/core/validation`` (resourcelist)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.registry import resourcelist


def _messages(errs: list[Any]) -> list[str]:
    return [str(e) for e in errs]


def test_container_requirements() -> None:
    check = resourcelist.container_resources
    assert _messages(check({"requests": {"example.com/gpu": "1"}}, "r")) == [
        "r.limits: Required value: Limit must be set for non overcommitable resources"
    ]
    assert _messages(
        check({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}, "r")
    ) == ['r.requests: Invalid value: "1": must be equal to example.com/gpu limit of 2']
    assert _messages(check({"limits": {"hugepages-2Mi": "3Mi"}}, "r")) == [
        'r.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple '
        "of hugepages-2Mi",
        "r: Forbidden: HugePages require cpu or memory",
    ]
    assert _messages(check({"limits": {"foo": "1"}}, "r")) == [
        'r.limits[foo]: Invalid value: "foo": must be a standard resource type or fully qualified',
        'r.limits[foo]: Invalid value: "foo": must be a standard resource for containers',
    ]
    assert check({"requests": {"cpu": "500m"}, "limits": {"cpu": "0.5"}}, "r") == []


def test_pod_level_resources_hold_the_containers() -> None:
    spec = {
        "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}},
        "containers": [{"resources": {"requests": {"cpu": "200m"}, "limits": {"cpu": "2"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "300m"}}}],
    }
    assert _messages(resourcelist.pod_spec(spec, "spec")) == [
        'spec.resources.requests[cpu]: Invalid value: "100m": must be greater than or equal '
        "to aggregate container requests of 300m",
        'spec.resources.containers[0][cpu].limits: Invalid value: "2": must be less than or '
        "equal to pod limits of 1",
    ]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (
            {"type": "Container", "max": {"cpu": "1"}, "default": {"cpu": "2"}},
            'spec.limits[0].default[cpu]: Invalid value: "1": default value 2 is greater than '
            "max value 1",
        ),
        (
            {"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "2"}},
            'spec.limits[0].defaultRequest[cpu]: Invalid value: "2": default request value 2 is '
            "greater than default limit value 1",
        ),
        (
            {
                "type": "Container",
                "min": {"cpu": "1"},
                "max": {"cpu": "2"},
                "maxLimitRequestRatio": {"cpu": "3"},
            },
            'spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: "3": ratio 3 is greater '
            "than max/min = 2.000000",
        ),
        (
            {
                "type": "Container",
                "default": {"hugepages-2Mi": "4Mi"},
                "defaultRequest": {"hugepages-2Mi": "2Mi"},
            },
            'spec.limits[0].defaultRequest[hugepages-2Mi]: Invalid value: "2Mi": default value '
            "4Mi must equal to defaultRequest value 2Mi in hugepages-2Mi",
        ),
        (
            {"type": "Node"},
            'spec.limits[0].type: Invalid value: "Node": must be a standard limit type or fully '
            "qualified",
        ),
    ],
)
def test_limit_range_rules(item: dict[str, Any], message: str) -> None:
    errs = resourcelist.limit_range({"spec": {"limits": [item]}})
    assert _messages(errs) == [message]


def test_persistent_volume_capacity_names_storage_only() -> None:
    errs = resourcelist.persistent_volume_capacity({"capacity": {"cpu": "1"}})
    assert _messages(errs) == [
        'spec.capacity: Unsupported value: {"cpu":"1"}: supported values: "storage"'
    ]
    assert _messages(resourcelist.persistent_volume_capacity({})) == [
        "spec.capacity: Required value",
        'spec.capacity: Unsupported value: null: supported values: "storage"',
    ]


def test_quota_status_and_node_lists() -> None:
    quota = {"spec": {"hard": {"pods": "2"}}, "status": {"used": {"pods": "-1"}}}
    assert _messages(resourcelist.resource_quota(quota)) == [
        'status.used[pods]: Invalid value: "-1": must be greater than or equal to 0'
    ]
    node = {"status": {"allocatable": {"pods": "1.5"}}}
    assert _messages(resourcelist.node(node)) == [
        'status.allocatable.pods: Invalid value: "1500m": must be an integer'
    ]
