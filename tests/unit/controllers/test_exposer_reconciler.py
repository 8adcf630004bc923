"""The exposer's reconciler against a fake API and hand-fed caches: the races an
integration test cannot schedule (a stale cache, a concurrent creator, a lost update)."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from controllers.exposer import ExposerConfig, ExposerReconciler
from controllers.exposer.reconciler import DEPLOYMENTS, EXPOSER_METRICS, INGRESSES, SERVICES
from manager import (
    REGISTRY,
    AlreadyExists,
    Conflict,
    JsonDict,
    Lister,
    NamespaceTerminating,
    NotFound,
    OutcomeUnknown,
    Request,
    Resource,
    Result,
)
from manager.cache.store import new_indexer
from manager.testing import FakeRecorder

REQ = Request("shop", "web")
URL = "overseer.io/exposed-url"


class FakeApi:
    """Objects by (plural, namespace, name); records every call; can be told to fail."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], JsonDict] = {}
        self.calls: list[tuple[str, str]] = []
        self.fail_replace: Exception | None = None
        self.fail_create: Exception | None = None
        self._rv = itertools.count(100)
        self._uid = itertools.count(1)

    def put(self, resource: Resource, obj: JsonDict) -> JsonDict:
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        meta.setdefault("uid", f"uid-{resource.plural}-{next(self._uid)}")
        meta["resourceVersion"] = str(next(self._rv))
        self.objects[(resource.plural, meta["namespace"], meta["name"])] = obj
        return copy.deepcopy(obj)

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> JsonDict:
        self.calls.append(("get", resource.plural))
        try:
            return copy.deepcopy(self.objects[(resource.plural, namespace or "", name)])
        except KeyError:
            raise NotFound(f"{resource.plural} {name}") from None

    def create(self, resource: Resource, body: JsonDict, namespace: str | None = None) -> JsonDict:
        self.calls.append(("create", resource.plural))
        if self.fail_create is not None:
            raise self.fail_create
        key = (resource.plural, namespace or "", body["metadata"]["name"])
        if key in self.objects:
            raise AlreadyExists("taken", reason="AlreadyExists")
        return self.put(resource, {**body, "metadata": {**body["metadata"], "namespace": key[1]}})

    def replace(self, resource: Resource, body: JsonDict, namespace: str | None = None) -> JsonDict:
        self.calls.append(("replace", resource.plural))
        if self.fail_replace is not None:
            raise self.fail_replace
        key = (resource.plural, namespace or "", body["metadata"]["name"])
        current = self.objects[key]
        if current["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]:
            raise Conflict("stale", reason="Conflict")
        return self.put(resource, body)

    def patch(self, resource: Resource, name: str, patch: JsonDict, **kw: Any) -> JsonDict:
        self.calls.append(("patch", resource.plural))
        obj = self.objects[(resource.plural, kw["namespace"], name)]
        annotations = obj["metadata"].setdefault("annotations", {})
        for k, v in patch["metadata"]["annotations"].items():
            if v is None:
                annotations.pop(k, None)
            else:
                annotations[k] = v
        return self.put(resource, obj)

    def delete(
        self, resource: Resource, name: str, namespace: str | None = None, **kw: Any
    ) -> JsonDict:
        self.calls.append(("delete", resource.plural))
        key = (resource.plural, namespace or "", name)
        obj = self.objects.get(key)
        if obj is None:
            raise NotFound(name)
        pre = kw.get("preconditions") or {}
        if (
            pre.get("uid") != obj["metadata"]["uid"]
            or pre.get("resourceVersion") != (obj["metadata"]["resourceVersion"])
        ):
            raise Conflict("precondition", reason="Conflict")
        return self.objects.pop(key)

    def writes(self) -> list[tuple[str, str]]:
        return [c for c in self.calls if c[0] != "get"]


class World:
    """A reconciler, its fake API, and caches the test syncs from the API by hand."""

    def __init__(self, config: ExposerConfig | None = None) -> None:
        self.api = FakeApi()
        self.indexers = {r.plural: new_indexer() for r in (DEPLOYMENTS, SERVICES, INGRESSES)}
        self.recorder = FakeRecorder()
        self.reconciler = ExposerReconciler(
            self.api,  # type: ignore[arg-type]
            deployments=Lister(self.indexers["deployments"], DEPLOYMENTS),
            services=Lister(self.indexers["services"], SERVICES),
            ingresses=Lister(self.indexers["ingresses"], INGRESSES),
            recorder=self.recorder,
            config=config or ExposerConfig(domain="example.com"),
        )

    def sync(self) -> None:
        """The caches catch up with the API server."""
        for plural, indexer in self.indexers.items():
            indexer.replace(
                copy.deepcopy(o) for (p, _, _), o in self.api.objects.items() if p == plural
            )

    def reconcile(self) -> Result:
        return self.reconciler.reconcile(REQ)

    def reasons(self) -> list[str]:
        return [e.reason for e in self.recorder.events]


def deployment(**annotations: str) -> JsonDict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "annotations": {"overseer.io/expose": "true", **annotations},
        },
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "spec": {"containers": [{"ports": [{"name": "http", "containerPort": 80}]}]}
            },
        },
    }


@pytest.fixture
def world() -> World:
    w = World()
    w.api.put(DEPLOYMENTS, deployment())
    w.sync()
    return w


def test_first_reconcile_creates_both_and_leaves_the_deployment_alone(world: World) -> None:
    assert world.reconcile() == Result()
    assert world.api.writes() == [("create", "services"), ("create", "ingresses")]
    dep = world.api.objects[("deployments", "shop", "web")]
    assert URL not in dep["metadata"]["annotations"]
    ingress = world.api.objects[("ingresses", "shop", "web")]
    assert ingress["metadata"]["annotations"][URL] == "http://web.shop.example.com/"
    assert world.reasons() == ["Exposed"]
    assert "http://web.shop.example.com/" in world.recorder.events[0].message
    assert world.reconciler.exposed == {"shop/web"}
    world.sync()
    world.api.calls.clear()
    assert world.reconcile() == Result()
    assert world.api.calls == []  # converged: reads from the cache only
    assert world.reasons() == ["Exposed"]


def test_stale_cache_after_own_writes_neither_recreates_nor_repatches(world: World) -> None:
    world.reconcile()
    world.api.calls.clear()
    world.reconcile()  # the cache has not seen the creates and the patch yet
    assert world.api.writes() == []
    assert world.api.calls == [("get", "services"), ("get", "ingresses")]
    assert world.reasons() == ["Exposed"]


def test_own_object_deleted_before_the_cache_saw_it_is_recreated(world: World) -> None:
    world.reconcile()
    del world.api.objects[("services", "shop", "web")]  # created, then deleted by someone
    world.api.calls.clear()
    world.reconcile()
    assert ("create", "services") in world.api.calls


def test_already_exists_and_owned_is_treated_as_existing(world: World) -> None:
    world.reconcile()
    world.api.objects[("services", "shop", "web")]["spec"]["ports"][0]["port"] = 1
    world.reconciler._expectations.forget(("services", "shop", "web"))  # another replica's
    world.api.calls.clear()
    world.reconcile()  # the cache still has no Service
    assert world.api.writes()[:2] == [("create", "services"), ("replace", "services")]
    assert world.api.objects[("services", "shop", "web")]["spec"]["ports"][0]["port"] == 80
    assert "ExposeConflict" not in world.reasons()


def test_already_exists_and_foreign_is_a_conflict_and_writes_nothing(world: World) -> None:
    world.api.put(
        SERVICES,
        {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"ports": [{"port": 1}]}},
    )
    assert world.reconcile() == Result()
    assert world.api.writes() == [("create", "services")]
    assert world.reasons() == ["ExposeConflict"]
    assert world.reconciler.exposed == frozenset()


def test_foreign_object_in_the_cache_is_a_conflict_without_any_request(world: World) -> None:
    world.api.put(
        INGRESSES,
        {
            "metadata": {
                "name": "web",
                "namespace": "shop",
                "ownerReferences": [
                    {"uid": "someone-else", "controller": True, "kind": "Deployment", "name": "api"}
                ],
            }
        },
    )
    world.sync()
    world.api.calls.clear()
    world.reconcile()
    assert world.api.calls == []
    assert world.reasons() == ["ExposeConflict"]


def test_lost_update_race_requeues(world: World) -> None:
    world.reconcile()
    world.sync()
    dep = world.api.objects[("deployments", "shop", "web")]
    dep["metadata"]["annotations"]["overseer.io/expose-path"] = "/v2"
    world.sync()
    world.api.fail_replace = Conflict("stale", reason="Conflict")
    assert world.reconcile() == Result(requeue=True)


def test_opt_in_removed_deletes_only_owned_objects_with_preconditions(world: World) -> None:
    world.reconcile()
    world.sync()
    dep = world.api.objects[("deployments", "shop", "web")]
    del dep["metadata"]["annotations"]["overseer.io/expose"]
    world.sync()
    world.api.calls.clear()
    assert world.reconcile() == Result()
    assert world.api.writes() == [("delete", "ingresses"), ("delete", "services")]
    assert world.reasons() == ["Exposed", "Unexposed"]
    assert world.reconciler.exposed == frozenset()


# -- the URL on the Deployment (opt-in) and the Exposed Event (opt-out) ------------------


def test_annotate_deployment_writes_the_url_back_once() -> None:
    w = World(ExposerConfig(domain="example.com", annotate_deployment=True))
    w.api.put(DEPLOYMENTS, deployment())
    w.sync()
    assert w.reconcile() == Result()
    assert w.api.writes() == [
        ("create", "services"),
        ("create", "ingresses"),
        ("patch", "deployments"),
    ]
    dep = w.api.objects[("deployments", "shop", "web")]
    assert dep["metadata"]["annotations"][URL] == "http://web.shop.example.com/"
    w.api.calls.clear()
    w.reconcile()  # the cache has not seen the patch yet: not patched again
    assert w.api.writes() == []
    w.sync()
    assert w.reconcile() == Result()
    assert w.api.writes() == []
    # opt-in removed: the URL goes with the objects
    del w.api.objects[("deployments", "shop", "web")]["metadata"]["annotations"][
        "overseer.io/expose"
    ]
    w.sync()
    w.reconcile()
    assert w.api.writes() == [
        ("delete", "ingresses"),
        ("delete", "services"),
        ("patch", "deployments"),
    ]
    assert URL not in w.api.objects[("deployments", "shop", "web")]["metadata"]["annotations"]


def test_a_url_left_on_the_deployment_is_removed_once_while_annotating_is_off(
    world: World,
) -> None:
    world.api.objects[("deployments", "shop", "web")]["metadata"]["annotations"][URL] = "old"
    world.sync()
    world.reconcile()
    assert world.api.writes() == [
        ("create", "services"),
        ("create", "ingresses"),
        ("patch", "deployments"),
    ]
    assert URL not in world.api.objects[("deployments", "shop", "web")]["metadata"]["annotations"]
    world.sync()
    world.api.calls.clear()
    world.reconcile()
    assert world.api.calls == []


def test_exposed_event_can_be_turned_off() -> None:
    w = World(ExposerConfig(domain="example.com", exposed_event=False))
    w.api.put(DEPLOYMENTS, deployment())
    w.sync()
    w.reconcile()
    assert w.api.writes() == [("create", "services"), ("create", "ingresses")]
    assert w.reasons() == []
    assert w.reconciler.exposed == {"shop/web"}


def test_exposed_is_told_when_the_ingress_is_created_and_updated_otherwise(
    world: World,
) -> None:
    world.reconcile()
    world.sync()
    del world.api.objects[("services", "shop", "web")]  # someone deletes the Service
    world.sync()
    world.reconcile()
    assert world.reasons() == ["Exposed", "Updated"]
    assert "recreated Service web" in world.recorder.events[1].message


class LostAnswer(FakeApi):
    """Applies the next create of ``plural`` and loses its answer (OutcomeUnknown)."""

    def __init__(self, plural: str) -> None:
        super().__init__()
        self.lose = plural

    def create(self, resource: Resource, body: JsonDict, namespace: str | None = None) -> JsonDict:
        created = super().create(resource, body, namespace)
        if resource.plural == self.lose:
            self.lose = ""
            raise OutcomeUnknown("sent, no answer", status=0, reason="OutcomeUnknown")
        return created


@pytest.mark.parametrize("cache_caught_up", [False, True])
@pytest.mark.parametrize("lost", ["services", "ingresses"])
def test_a_create_whose_answer_was_lost_still_tells_exposed_once(
    lost: str, cache_caught_up: bool
) -> None:
    """The create was applied, its answer lost: the reconcile fails and is requeued, and
    the next one finds the object (by its cache, or by AlreadyExists): it is this
    Deployment's, created by this exposer, so the first exposure is told, once."""
    world = World()
    world.api = LostAnswer(lost)
    world.reconciler._client = world.api  # type: ignore[assignment]
    world.api.put(DEPLOYMENTS, deployment())
    world.sync()
    with pytest.raises(OutcomeUnknown):
        world.reconcile()
    if cache_caught_up:
        world.sync()
    assert world.reconcile() == Result()
    world.sync()
    assert world.reconcile() == Result()
    assert world.reasons() == ["Exposed"]
    again = [] if cache_caught_up else [lost]  # sent again only to meet AlreadyExists
    creates = sorted(plural for call, plural in world.api.calls if call == "create")
    assert creates == sorted(["services", "ingresses", *again])


# -- a terminating namespace ---------------------------------------------------------------


def _terminating() -> NamespaceTerminating:
    return NamespaceTerminating(
        'services "web" is forbidden: unable to create new content in namespace shop '
        "because it is being terminated",
        reason="Forbidden",
        details={"causes": [{"reason": "NamespaceTerminating"}]},
    )


def _refused() -> float:
    EXPOSER_METRICS.attach()  # exported while an exposer runs: as if one did
    try:
        return REGISTRY.get_sample_value("overseer_exposer_namespace_terminating_total") or 0.0
    finally:
        EXPOSER_METRICS.detach()


def test_a_create_refused_by_a_terminating_namespace_is_not_retried(world: World) -> None:
    before = _refused()
    world.api.fail_create = _terminating()
    assert world.reconcile() == Result()  # no requeue, no error for the workqueue
    assert world.api.writes() == [("create", "services")]
    assert world.reasons() == []
    assert _refused() == before + 1
    world.api.calls.clear()
    for _ in range(3):  # woken again (its Ingress is deleted, ...): nothing is attempted
        assert world.reconcile() == Result()
    assert world.api.calls == []
    assert _refused() == before + 1


def test_a_recreated_deployment_of_the_same_name_is_exposed_again(world: World) -> None:
    world.api.fail_create = _terminating()
    world.reconcile()
    # the namespace is gone and made again, with a Deployment of the same name
    world.api.fail_create = None
    world.api.objects.clear()
    world.sync()
    assert world.reconcile() == Result()
    world.api.put(DEPLOYMENTS, deployment())
    world.sync()
    world.api.calls.clear()
    assert world.reconcile() == Result()
    assert world.api.writes() == [("create", "services"), ("create", "ingresses")]
    assert world.reconciler.exposed == {"shop/web"}


def test_a_new_uid_under_the_same_key_is_not_held_back(world: World) -> None:
    world.api.fail_create = _terminating()
    world.reconcile()
    world.api.fail_create = None
    dep = world.api.objects.pop(("deployments", "shop", "web"))
    dep["metadata"]["uid"] = "another-uid"
    world.api.objects[("deployments", "shop", "web")] = dep
    world.sync()  # the delete was missed by the cache: only the new object is seen
    world.api.calls.clear()
    world.reconcile()
    assert ("create", "ingresses") in world.api.writes()


def test_stale_cache_on_delete_requeues(world: World) -> None:
    world.reconcile()
    world.sync()
    world.api.put(SERVICES, world.api.objects[("services", "shop", "web")])  # a newer version
    dep = world.api.objects[("deployments", "shop", "web")]
    dep["metadata"]["annotations"]["overseer.io/expose"] = "false"
    world.indexers["deployments"].replace([copy.deepcopy(dep)])
    assert world.reconcile() == Result(requeue=True)
    assert ("services", "shop", "web") in world.api.objects


def test_invalid_annotation_keeps_last_good_objects(world: World) -> None:
    world.reconcile()
    world.sync()
    dep = world.api.objects[("deployments", "shop", "web")]
    dep["metadata"]["annotations"]["overseer.io/expose-port"] = "9999"
    world.sync()
    world.api.calls.clear()
    assert world.reconcile() == Result()
    assert world.api.calls == []
    assert world.reasons() == ["Exposed", "InvalidExposeAnnotation"]
    assert world.reconciler.exposed == {"shop/web"}  # still served by the last good objects


def test_deployment_gone_is_left_to_the_garbage_collector(world: World) -> None:
    world.reconcile()
    world.api.objects.pop(("deployments", "shop", "web"))
    world.sync()
    world.api.calls.clear()
    assert world.reconcile() == Result()
    assert world.api.calls == []
    assert world.reconciler.exposed == frozenset()


def test_out_of_scope_namespace_is_never_touched() -> None:
    from controllers.exposer import NamespaceScope

    w = World(ExposerConfig(namespaces=NamespaceScope(exclude=("shop",))))
    w.api.put(DEPLOYMENTS, deployment())
    w.sync()
    assert w.reconcile() == Result()
    assert w.api.calls == []
    assert w.recorder.events == []


def test_an_earlier_incarnations_objects_are_waited_for_not_reported_or_touched(
    world: World,
) -> None:
    """``web`` deleted and created again at once: the earlier one's Service and Ingress
    (controlled by the old uid) are still there until the garbage collector removes them.
    They are nobody else's: no ExposeConflict, nothing written, tried again shortly (with
    sharding by uid their deletion is seen by the replica of the old uid, not this one)."""
    world.reconcile()
    world.sync()
    assert world.reconciler.exposed == {"shop/web"}
    dep = world.api.objects.pop(("deployments", "shop", "web"))
    dep["metadata"]["uid"] = "the-new-incarnation"
    world.api.objects[("deployments", "shop", "web")] = dep
    world.sync()
    world.api.calls.clear()
    before = len(world.recorder.events)
    result = world.reconcile()
    assert result.requeue_after is not None and result.requeue_after > 0
    assert world.api.writes() == []
    assert world.recorder.events[before:] == []
    # the collector removes them; the next look exposes the new one
    del world.api.objects[("services", "shop", "web")]
    del world.api.objects[("ingresses", "shop", "web")]
    world.sync()
    assert world.reconcile() == Result()
    assert world.api.writes() == [("create", "services"), ("create", "ingresses")]


def test_a_create_meeting_an_earlier_incarnations_object_waits(world: World) -> None:
    """The cache has not seen the earlier incarnation's Service: the create meets it
    (AlreadyExists), reads it back, and waits instead of reporting a conflict."""
    old = {"uid": "the-old-incarnation", "controller": True, "kind": "Deployment", "name": "web"}
    for resource in (SERVICES, INGRESSES):
        world.api.put(
            resource, {"metadata": {"name": "web", "namespace": "shop", "ownerReferences": [old]}}
        )
    world.api.calls.clear()
    result = world.reconcile()
    assert result.requeue_after is not None and result.requeue_after > 0
    assert world.api.writes() == [("create", "services")]  # refused: AlreadyExists
    assert world.reasons() == []
