"""The podport reconciler against a fake API and hand-fed caches: what one allocation costs
the API server, whatever the order in which the watch events of its own writes arrive."""

from __future__ import annotations

import copy
import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from controllers.podport.allocator import Allocator
from controllers.podport.config import PodPortConfig
from controllers.podport.crd import LOGICAL_PORTS
from controllers.podport.reconciler import (
    PODS,
    PORT_BY_POD,
    PORT_BY_POD_UID,
    DeletedPods,
    PodPortReconciler,
    Scope,
    index_port_pod,
    index_port_pod_uid,
)
from manager import (
    AlreadyExists,
    Invalid,
    JsonDict,
    NotFound,
    OutcomeUnknown,
    Request,
    Resource,
    Result,
)
from manager.cache.store import new_indexer
from manager.testing import FakeRecorder

REQ = Request("shop", "web-0")


class FakeApi:
    """Pods and LogicalPorts by (plural, namespace, name); records every call."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], JsonDict] = {}
        self.calls: list[tuple[str, str]] = []
        self._rv = itertools.count(100)

    def put(self, resource: Resource, obj: JsonDict) -> JsonDict:
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        meta.setdefault("uid", f"uid-{meta['name']}")
        meta["resourceVersion"] = str(next(self._rv))
        self.objects[(resource.plural, meta.get("namespace", ""), meta["name"])] = obj
        return copy.deepcopy(obj)

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> JsonDict:
        self.calls.append(("get", resource.plural))
        try:
            return copy.deepcopy(self.objects[(resource.plural, namespace or "", name)])
        except KeyError:
            raise NotFound(name) from None

    def create(self, resource: Resource, body: JsonDict, namespace: str | None = None) -> JsonDict:
        self.calls.append(("create", resource.plural))
        if (resource.plural, namespace or "", body["metadata"]["name"]) in self.objects:
            raise AlreadyExists("taken", reason="AlreadyExists")
        return self.put(resource, body)

    def patch(
        self, resource: Resource, name: str, patch: JsonDict, namespace: str | None = None
    ) -> JsonDict:
        self.calls.append(("patch", resource.plural))
        obj = self.objects[(resource.plural, namespace or "", name)]
        uid = patch["metadata"].get("uid")
        if uid and uid != obj["metadata"]["uid"]:  # kube-apiserver 1.36: a 422, not a 409
            raise Invalid("metadata.uid: field is immutable", reason="Invalid")
        annotations = obj["metadata"].setdefault("annotations", {})
        for k, v in (patch["metadata"].get("annotations") or {}).items():
            if v is None:
                annotations.pop(k, None)
            else:
                annotations[k] = v
        return self.put(resource, obj)

    def delete(self, resource: Resource, name: str, **kw: Any) -> JsonDict:
        self.calls.append(("delete", resource.plural))
        return self.objects.pop((resource.plural, kw.get("namespace") or "", name))

    def writes(self) -> list[tuple[str, str]]:
        return [c for c in self.calls if c[0] != "get"]


class World:
    def __init__(self) -> None:
        config = PodPortConfig()
        self.api = FakeApi()
        self.pods = new_indexer()
        self.ports = new_indexer({PORT_BY_POD: index_port_pod, PORT_BY_POD_UID: index_port_pod_uid})
        self.allocator = Allocator(config.pools())
        self.recorder = FakeRecorder()
        self.reconciler = PodPortReconciler(
            self.api,  # type: ignore[arg-type]
            config,
            scope=Scope(config, None),
            pods=SimpleNamespace(indexer=self.pods),  # type: ignore[arg-type]
            ports=SimpleNamespace(indexer=self.ports),  # type: ignore[arg-type]
            allocator=self.allocator,
            recorder=self.recorder,
            deleted_pods=DeletedPods(),
        )

    def sync_pods(self) -> None:
        self.pods.replace(
            copy.deepcopy(o) for (p, _, _), o in self.api.objects.items() if p == PODS.plural
        )

    def sync_ports(self) -> None:
        ports = [
            copy.deepcopy(o)
            for (p, _, _), o in self.api.objects.items()
            if p == LOGICAL_PORTS.plural
        ]
        self.ports.replace(ports)
        for port in ports:
            self.allocator.on_add(port, False)

    def reconcile(self) -> Result:
        return self.reconciler.reconcile(REQ)


@pytest.fixture
def world() -> World:
    w = World()
    w.api.put(PODS, {"metadata": {"name": "web-0", "namespace": "shop"}, "spec": {}})
    w.sync_pods()
    return w


def test_an_allocation_is_one_port_create_and_one_pod_patch_and_no_event(world: World) -> None:
    assert world.reconcile() == Result()
    assert world.api.writes() == [("create", "logicalports"), ("patch", "pods")]
    assert world.recorder.events == []  # a successful allocation posts no Event
    pod = world.api.objects[("pods", "shop", "web-0")]
    assert pod["metadata"]["annotations"]["overseer.io/ip"] == "10.16.0.2"


@pytest.mark.parametrize("order", ["port-first", "neither", "both"])
def test_the_watch_events_of_its_own_writes_cost_no_second_pod_write(
    world: World, order: str
) -> None:
    """Woken by the LogicalPort's ADDED event before the pod's MODIFIED event reached the
    pod cache (or by both, or before either), the pod is not patched again."""
    world.reconcile()
    world.api.calls.clear()
    if order in ("port-first", "both"):
        world.sync_ports()
    if order == "both":
        world.sync_pods()
    assert world.reconcile() == Result()
    assert world.api.writes() == []
    world.sync_ports()
    world.sync_pods()
    assert world.reconcile() == Result()
    assert world.api.writes() == []


def test_annotations_changed_by_someone_else_are_restored_once(world: World) -> None:
    world.reconcile()
    world.sync_ports()
    world.sync_pods()
    pod = world.api.objects[("pods", "shop", "web-0")]
    pod["metadata"]["annotations"]["overseer.io/ip"] = "10.99.0.1"
    world.api.put(PODS, pod)
    world.sync_pods()
    world.api.calls.clear()
    world.reconcile()
    assert world.api.writes() == [("patch", "pods")]
    assert (
        world.api.objects[("pods", "shop", "web-0")]["metadata"]["annotations"]["overseer.io/ip"]
        == "10.16.0.2"
    )


def test_a_pod_created_again_under_the_same_name_is_not_annotated_from_a_stale_cache(
    world: World,
) -> None:
    """DESIGN §4.2: a pod re-created with the same name is another pod. The cache still
    holds the old one; the annotation patch names the old uid, and kube-apiserver refuses
    it (422, metadata.uid immutable): the reconcile waits for the cache, it does not fail
    (nor write the old pod's port onto the new pod)."""
    old = world.api.objects.pop(("pods", "shop", "web-0"))
    world.api.put(PODS, {"metadata": {"name": "web-0", "namespace": "shop", "uid": "uid-2"}})
    assert old["metadata"]["uid"] != "uid-2"
    result = world.reconcile()  # from the cache: the old pod
    assert result.requeue_after is not None and result.requeue_after > 0
    assert "annotations" not in world.api.objects[("pods", "shop", "web-0")]["metadata"]


class LosingAnswers(FakeApi):
    """The next LogicalPort create is applied and its answer lost (the client raises
    OutcomeUnknown). ``late``: the server commits it only after the client's next read
    of it (which finds nothing yet); else at once."""

    def __init__(self, *, late: bool) -> None:
        super().__init__()
        self.late = late
        self.lose = True
        self.stashed: JsonDict | None = None

    def create(self, resource: Resource, body: JsonDict, namespace: str | None = None) -> JsonDict:
        if resource.plural != LOGICAL_PORTS.plural or not self.lose:
            return super().create(resource, body, namespace)
        self.lose = False
        self.calls.append(("create", resource.plural))
        if self.late:
            self.stashed = body
        else:
            self.put(resource, body)
        raise OutcomeUnknown("sent, no answer", status=0, reason="OutcomeUnknown")

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> JsonDict:
        try:
            return super().get(resource, name, namespace)
        finally:
            if self.stashed is not None and resource.plural == LOGICAL_PORTS.plural:
                self.put(resource, self.stashed)  # committed just after that read
                self.stashed = None


@pytest.mark.parametrize("late", [False, True], ids=["committed", "committed-after-the-read"])
@pytest.mark.parametrize("cache_caught_up", [False, True])
def test_a_port_create_whose_answer_was_lost_leaves_the_pod_one_port(
    late: bool, cache_caught_up: bool
) -> None:
    """The create was applied and its answer lost. The reconcile reads the port: found
    and the pod's, it is adopted; not there yet, the reconcile fails and is requeued, and
    the next one, whether or not the port has reached the cache by then, finds its name
    taken by this very pod and adopts it: one port, never a second address."""
    world = World()
    world.api = LosingAnswers(late=late)
    world.reconciler._client = world.api  # type: ignore[assignment]
    world.api.put(PODS, {"metadata": {"name": "web-0", "namespace": "shop"}, "spec": {}})
    world.sync_pods()
    if late:
        with pytest.raises(OutcomeUnknown):
            world.reconcile()
        if cache_caught_up:
            world.sync_ports()
    assert world.reconcile() == Result()
    world.sync_ports()
    world.sync_pods()
    assert world.reconcile() == Result()
    ports = [o for (p, _, _), o in world.api.objects.items() if p == LOGICAL_PORTS.plural]
    assert len(ports) == 1, [p["metadata"]["name"] for p in ports]
    pod = world.api.objects[(PODS.plural, "shop", "web-0")]
    assert (
        pod["metadata"]["annotations"]["overseer.io/logical-port"] == ports[0]["metadata"]["name"]
    )


def test_a_taken_address_held_by_another_pod_is_skipped(world: World) -> None:
    """AlreadyExists from another pod's port: the next address, as before."""
    first = World()
    first.api.put(PODS, {"metadata": {"name": "web-0", "namespace": "shop"}, "spec": {}})
    first.sync_pods()
    first.reconcile()
    [(_, _, taken)] = [k for k in first.api.objects if k[0] == LOGICAL_PORTS.plural]
    other = {"metadata": {"name": taken}, "spec": {"podUID": "someone-else"}}
    world.api.put(LOGICAL_PORTS, other)
    assert world.reconcile() == Result()
    mine = [
        o
        for (p, _, _), o in world.api.objects.items()
        if p == LOGICAL_PORTS.plural and o["spec"].get("podUID") != "someone-else"
    ]
    assert len(mine) == 1 and mine[0]["metadata"]["name"] != taken
