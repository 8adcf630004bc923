"""Core v1 and events.k8s.io/v1 Events convert into each other as kube-apiserver's do."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.registry.eventsconv import core_to_events, events_to_core

META = {
    "name": "web.17a8",
    "namespace": "default",
    "uid": "u-1",
    "resourceVersion": "42",
    "creationTimestamp": "2024-01-10T11:00:00Z",
}
REF = {
    "kind": "Pod",
    "namespace": "default",
    "name": "web",
    "uid": "p-1",
    "apiVersion": "v1",
    "resourceVersion": "7",
    "fieldPath": "spec.containers{app}",
}
RELATED = {"kind": "Node", "name": "n1", "apiVersion": "v1"}

# A kubelet-style event (legacy fields filled), as core v1 serves it.
CORE_FULL: dict[str, Any] = {
    "kind": "Event",
    "apiVersion": "v1",
    "metadata": META,
    "involvedObject": REF,
    "reason": "BackOff",
    "message": "Back-off restarting failed container",
    "source": {"component": "kubelet", "host": "n1"},
    "firstTimestamp": "2024-01-10T11:00:00Z",
    "lastTimestamp": "2024-01-10T11:05:00Z",
    "count": 7,
    "type": "Warning",
    "eventTime": None,
    "action": "Restarting",
    "related": RELATED,
    "reportingComponent": "kubelet",
    "reportingInstance": "n1",
}
# The same event as events.k8s.io/v1 serves it.
EVENTS_FULL: dict[str, Any] = {
    "kind": "Event",
    "apiVersion": "events.k8s.io/v1",
    "metadata": META,
    "eventTime": None,
    "reportingController": "kubelet",
    "reportingInstance": "n1",
    "action": "Restarting",
    "reason": "BackOff",
    "regarding": REF,
    "related": RELATED,
    "note": "Back-off restarting failed container",
    "type": "Warning",
    "deprecatedSource": {"component": "kubelet", "host": "n1"},
    "deprecatedFirstTimestamp": "2024-01-10T11:00:00Z",
    "deprecatedLastTimestamp": "2024-01-10T11:05:00Z",
    "deprecatedCount": 7,
}
# A new-style (events.k8s.io) event with a series, as events.k8s.io/v1 serves it.
EVENTS_SERIES: dict[str, Any] = {
    "kind": "Event",
    "apiVersion": "events.k8s.io/v1",
    "metadata": META,
    "eventTime": "2024-01-10T11:00:00.123456Z",
    "series": {"count": 3, "lastObservedTime": "2024-01-10T11:02:00.000001Z"},
    "reportingController": "example.com/ctrl",
    "reportingInstance": "ctrl-0",
    "action": "Reconcile",
    "reason": "Synced",
    "regarding": {"kind": "Widget", "name": "w", "apiVersion": "example.com/v1"},
    "note": "synced",
    "type": "Normal",
    "deprecatedSource": {},
    "deprecatedFirstTimestamp": None,
    "deprecatedLastTimestamp": None,
}
# The same, as core v1 serves it.
CORE_SERIES: dict[str, Any] = {
    "kind": "Event",
    "apiVersion": "v1",
    "metadata": META,
    "involvedObject": {"kind": "Widget", "name": "w", "apiVersion": "example.com/v1"},
    "reason": "Synced",
    "message": "synced",
    "source": {},
    "firstTimestamp": None,
    "lastTimestamp": None,
    "type": "Normal",
    "eventTime": "2024-01-10T11:00:00.123456Z",
    "series": {"count": 3, "lastObservedTime": "2024-01-10T11:02:00.000001Z"},
    "action": "Reconcile",
    "reportingComponent": "example.com/ctrl",
    "reportingInstance": "ctrl-0",
}


@pytest.mark.parametrize(
    ("core", "events"), [(CORE_FULL, EVENTS_FULL), (CORE_SERIES, EVENTS_SERIES)]
)
def test_each_view_converts_to_the_other_field_by_field(
    core: dict[str, Any], events: dict[str, Any]
) -> None:
    assert core_to_events(core) == events
    assert events_to_core(events) == core


@pytest.mark.parametrize("core", [CORE_FULL, CORE_SERIES])
def test_core_round_trip_is_lossless(core: dict[str, Any]) -> None:
    assert events_to_core(core_to_events(core)) == core


@pytest.mark.parametrize("events", [EVENTS_FULL, EVENTS_SERIES])
def test_events_round_trip_is_lossless(events: dict[str, Any]) -> None:
    assert core_to_events(events_to_core(events)) == events


def test_key_order_follows_the_go_structs() -> None:
    assert list(core_to_events(CORE_FULL)) == list(EVENTS_FULL)
    assert list(events_to_core(EVENTS_SERIES)) == list(CORE_SERIES)


def test_sparse_core_event_gains_the_fields_kube_always_serialises() -> None:
    sparse = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "ns"},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "Started",
        "message": "hi",
        "count": 0,
        "type": "",
    }
    events = core_to_events(sparse)
    assert events == {
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": {"name": "e", "namespace": "ns"},
        "eventTime": None,
        "reason": "Started",
        "regarding": {"kind": "Pod", "name": "p"},
        "note": "hi",
        "deprecatedSource": {},
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
    }
    back = events_to_core(events)
    assert back == {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": "e", "namespace": "ns"},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "Started",
        "message": "hi",
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "eventTime": None,
        "reportingComponent": "",
        "reportingInstance": "",
    }
    # every non-empty field the input had survives the round trip
    assert {k: v for k, v in sparse.items() if v} == {
        k: v for k, v in back.items() if k in sparse and v
    }


@pytest.mark.parametrize(
    ("series", "core_series", "events_series"),
    [
        (
            {"count": 2, "lastObservedTime": "2024-01-10T11:00:00.000000Z"},
            {"count": 2, "lastObservedTime": "2024-01-10T11:00:00.000000Z"},
            {"count": 2, "lastObservedTime": "2024-01-10T11:00:00.000000Z"},
        ),
        # core omits an empty count and an unset time; events.k8s.io always has both
        ({}, {}, {"count": 0, "lastObservedTime": None}),
    ],
)
def test_series_fields_follow_each_views_omitempty(
    series: dict[str, Any], core_series: dict[str, Any], events_series: dict[str, Any]
) -> None:
    core = {"apiVersion": "v1", "kind": "Event", "metadata": {}, "series": series}
    events = core_to_events(core)
    assert events["series"] == events_series
    assert events_to_core(events)["series"] == core_series


def test_fields_the_target_type_lacks_are_dropped() -> None:
    core = copy.deepcopy(CORE_FULL)
    core["bogus"] = 1
    core["involvedObject"] = {**REF, "extra": "x"}
    events = core_to_events(core)
    assert "bogus" not in events
    assert events["regarding"] == REF


@pytest.mark.parametrize(
    ("convert", "source"), [(core_to_events, CORE_FULL), (events_to_core, EVENTS_FULL)]
)
def test_conversion_mutates_nothing_and_shares_nothing(convert: Any, source: Any) -> None:
    before = copy.deepcopy(source)
    out = convert(source)
    out["metadata"]["name"] = "changed"
    next(v for k, v in out.items() if k in ("regarding", "involvedObject"))["name"] = "x"
    assert source == before
