"""Event → request mapping (controller-runtime ``pkg/handler``): the object itself, its
owner of a given kind (controller reference only by default), an arbitrary map function,
and tombstones unwrapped to their last known state."""

from __future__ import annotations

from typing import Any

import pytest

from manager.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    unwrap,
)
from manager.keys import DeletedFinalStateUnknown, JsonDict
from manager.reconcile import Request


def obj(name: str | None = "svc", namespace: str | None = "ns", **meta: Any) -> JsonDict:
    m: JsonDict = dict(meta)
    if name is not None:
        m["name"] = name
    if namespace is not None:
        m["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Service", "metadata": m}


def ref(
    name: str,
    kind: str = "Deployment",
    api_version: str = "apps/v1",
    controller: bool | None = True,
) -> JsonDict:
    r: JsonDict = {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}"}
    if controller is not None:
        r["controller"] = controller
    return r


# -- EnqueueRequestForObject -----------------------------------------------------------


def test_for_object_requests_the_object_itself() -> None:
    assert list(EnqueueRequestForObject().requests(obj("a", "ns1"))) == [Request("ns1", "a")]


def test_for_object_cluster_scoped_has_empty_namespace() -> None:
    (req,) = EnqueueRequestForObject().requests(obj("node-1", None))
    assert req == Request("", "node-1")
    assert req.key == "node-1"


@pytest.mark.parametrize("o", [obj(None), {"kind": "Service"}, {"metadata": None}])
def test_for_object_without_name_requests_nothing(o: JsonDict) -> None:
    assert list(EnqueueRequestForObject().requests(o)) == []


# -- EnqueueRequestForOwner ------------------------------------------------------------


def test_owner_controller_reference_maps_to_owner_in_the_objects_namespace() -> None:
    mapper = EnqueueRequestForOwner("apps", "Deployment")
    o = obj("web-svc", "prod", ownerReferences=[ref("web")])
    assert list(mapper.requests(o)) == [Request("prod", "web")]


@pytest.mark.parametrize("controller", [False, None])
def test_owner_non_controller_reference_is_ignored_by_default(controller: bool | None) -> None:
    o = obj(ownerReferences=[ref("web", controller=controller)])
    assert list(EnqueueRequestForOwner("apps", "Deployment").requests(o)) == []


def test_owner_non_controller_references_count_when_only_controller_is_false() -> None:
    o = obj(
        ownerReferences=[
            ref("a", controller=False),
            ref("b", controller=None),
            ref("c", controller=True),
        ]
    )
    mapper = EnqueueRequestForOwner("apps", "Deployment", only_controller=False)
    assert sorted(mapper.requests(o)) == [
        Request("ns", "a"),
        Request("ns", "b"),
        Request("ns", "c"),
    ]
    # the default picks only the controller among them
    assert list(EnqueueRequestForOwner("apps", "Deployment").requests(o)) == [Request("ns", "c")]


@pytest.mark.parametrize(
    "other",
    [
        ref("x", kind="StatefulSet"),  # other kind, same group
        ref("x", api_version="extensions/v1beta1"),  # same kind, other group
        ref("x", api_version="v1"),  # same kind, core group
        ref("x", api_version="example.com/apps/v1"),  # group "example.com/apps"
    ],
)
def test_owner_references_of_other_kinds_or_groups_are_ignored(other: JsonDict) -> None:
    o = obj(ownerReferences=[other])
    assert (
        list(EnqueueRequestForOwner("apps", "Deployment", only_controller=False).requests(o)) == []
    )


def test_owner_core_group_is_the_empty_string() -> None:
    o = obj("pod-1", ownerReferences=[ref("cm", kind="ConfigMap", api_version="v1")])
    assert list(EnqueueRequestForOwner("", "ConfigMap").requests(o)) == [Request("ns", "cm")]
    assert list(EnqueueRequestForOwner("v1", "ConfigMap").requests(o)) == []


def test_owner_cluster_scoped_owner_gets_empty_namespace() -> None:
    o = obj(
        "pod-1",
        "ns",
        ownerReferences=[ref("net-a", kind="Network", api_version="network.overseer.io/v1alpha1")],
    )
    mapper = EnqueueRequestForOwner("network.overseer.io", "Network", owner_namespaced=False)
    assert list(mapper.requests(o)) == [Request("", "net-a")]


@pytest.mark.parametrize("meta", [{}, {"ownerReferences": None}, {"ownerReferences": []}])
def test_owner_object_without_owner_references_requests_nothing(meta: JsonDict) -> None:
    assert list(EnqueueRequestForOwner("apps", "Deployment").requests(obj(**meta))) == []


def test_owner_reference_without_name_is_skipped() -> None:
    nameless = ref("x")
    del nameless["name"]
    o = obj(ownerReferences=[nameless, ref("y")])
    assert list(EnqueueRequestForOwner("apps", "Deployment").requests(o)) == [Request("ns", "y")]


# -- EnqueueRequestsFromMapFunc ---------------------------------------------------------


def test_map_func_requests_whatever_the_function_returns() -> None:
    seen: list[JsonDict] = []

    def fan_out(o: JsonDict) -> list[Request]:
        seen.append(o)
        return [Request("a", "x"), Request("b", "y")]

    o = obj()
    assert list(EnqueueRequestsFromMapFunc(fan_out).requests(o)) == [
        Request("a", "x"),
        Request("b", "y"),
    ]
    assert seen == [o]
    assert list(EnqueueRequestsFromMapFunc(lambda o: []).requests(o)) == []


# -- tombstones --------------------------------------------------------------------------


def test_unwrap_returns_a_tombstones_last_state_and_objects_unchanged() -> None:
    last = obj("gone", ownerReferences=[ref("web")])
    assert unwrap(DeletedFinalStateUnknown("ns/gone", last)) is last
    assert unwrap(last) is last
    # a tombstone mapped through its last state wakes the owner it had
    mapper = EnqueueRequestForOwner("apps", "Deployment")
    assert list(mapper.requests(unwrap(DeletedFinalStateUnknown("ns/gone", last)))) == [
        Request("ns", "web")
    ]
