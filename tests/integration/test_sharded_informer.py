"""Sharded informers against an API server over HTTP: a replica's cache holds only its
share, in server mode (kube-apiserver 1.36 with ShardedListAndWatch, or the local server
started with it) and in the client-filter fallback (gate off); ranges gained are listed
and reported synced without relisting the kept ones; ranges lost leave the cache at once,
without delete notifications, and their watch narrows; an owned object whose owner
changes (re-parented, orphaned) leaves the cache that held it with a delete
notification."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from manager.cache.sharded import MODE_CLIENT, MODE_SERVER, SHARD_BY_OWNER, ShardedInformer
from manager.client import KubeClient
from manager.hashring import HASH_SPACE, SlotRing, fnv1a_64
from manager.keys import DeletedFinalStateUnknown, JsonDict
from manager.resources import builtin
from manager.testing import LocalApiServer, eventually

CM = builtin("v1", "configmaps")
HALF = 1 << 63


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.adds: list[tuple[str, bool]] = []
        self.deletes: list[str] = []

    def on_add(self, obj: JsonDict, is_in_initial_list: bool) -> None:
        with self.lock:
            self.adds.append((obj["metadata"]["name"], is_in_initial_list))

    def on_update(self, old: JsonDict, new: JsonDict) -> None:
        pass

    def on_delete(self, obj: JsonDict | DeletedFinalStateUnknown) -> None:
        name = obj.key if isinstance(obj, DeletedFinalStateUnknown) else obj["metadata"]["name"]
        with self.lock:
            self.deletes.append(name)


class Running:
    """Starts informers for a test; stops and joins them after it."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self, informer: ShardedInformer) -> ShardedInformer:
        thread = threading.Thread(
            target=informer.run, args=(self.stop,), name=f"informer/{informer.name}"
        )
        thread.start()
        self.threads.append(thread)
        eventually(informer.has_synced, timeout=20, what="the sharded informer synced")
        return informer


@pytest.fixture
def running() -> Iterator[Running]:
    run = Running()
    yield run
    run.stop.set()
    for thread in run.threads:
        thread.join(10)


def _seed(
    client: KubeClient, namespace: str, tag: str, count: int, label: str = ""
) -> dict[str, str]:
    made = {}
    for i in range(count):
        body = {"metadata": {"name": f"{tag}-{i}", "labels": {"suite": label or tag}}}
        obj = client.create(CM, body, namespace)
        made[obj["metadata"]["name"]] = obj["metadata"]["uid"]
    return made


def _cached(informer: ShardedInformer) -> set[str]:
    return {o["metadata"]["name"] for o in informer.indexer.list()}


def test_each_replica_caches_only_its_share(
    kube_client: KubeClient, namespace: str, running: Running
) -> None:
    tag = f"s{uuid.uuid4().hex[:6]}"
    made = _seed(kube_client, namespace, tag, 30)
    ring = SlotRing(["replica-a", "replica-b", "replica-c"])
    informers = {
        member: running.start(
            ShardedInformer(
                kube_client,
                CM,
                namespace=namespace,
                label_selector=f"suite={tag}",
                ranges=ring.ranges_of(member),
            ),
        )
        for member in ring.members
    }
    for member, informer in informers.items():
        want = {n for n, uid in made.items() if ring.owner_of(fnv1a_64(uid)) == member}
        assert _cached(informer) == want, member
        assert informer.mode in (MODE_SERVER, MODE_CLIENT)
    assert set().union(*(_cached(i) for i in informers.values())) == set(made)
    # live events follow the same split
    late = _seed(kube_client, namespace, f"{tag}-late", 9, label=tag)
    for member, informer in informers.items():
        want = {n for n, uid in late.items() if ring.owner_of(fnv1a_64(uid)) == member}
        eventually(lambda i=informer, w=want: w <= _cached(i), timeout=20)
        assert not (set(late) - want) & _cached(informer)


@pytest.fixture(params=[MODE_SERVER, MODE_CLIENT])
def server(request: pytest.FixtureRequest) -> Iterator[LocalApiServer]:
    gates = {"ShardedListAndWatch": request.param == MODE_SERVER}
    with LocalApiServer(feature_gates=gates) as local:
        local.mode = request.param  # type: ignore[attr-defined]
        yield local


@pytest.mark.local_only(reason="counts LIST requests and pins the gate state")
def test_gain_and_loss_move_ranges_without_relisting_kept_ones(
    server: LocalApiServer, running: Running
) -> None:
    client = KubeClient.from_kubeconfig(str(server.kubeconfig_path))
    try:
        made = _seed(client, "default", "moves", 40)
        low = {n for n, uid in made.items() if fnv1a_64(uid) < HALF}
        quarter = {n for n, uid in made.items() if HALF <= fnv1a_64(uid) < 3 * HALF // 2}
        informer = ShardedInformer(
            client, CM, namespace="default", label_selector="suite=moves", ranges=[(0, HALF)]
        )
        recorder = Recorder()
        informer.add_event_handler(recorder)
        running.start(informer)
        assert informer.mode == server.mode  # type: ignore[attr-defined]
        assert _cached(informer) == low
        lists = server.request_count("list", "configmaps")

        synced = informer.set_ranges([(0, 3 * HALF // 2)])  # gain a quarter
        assert synced.wait(20)
        assert _cached(informer) == low | quarter
        assert server.request_count("list", "configmaps") == lists + 1  # the gained quarter only
        with recorder.lock:  # delivered before `synced`, as initial-list adds
            assert {n for n, initial in recorder.adds if initial} == low | quarter
        assert informer.segments == 2

        keep = [(HALF // 2, 3 * HALF // 2)]  # lose the lower half of the low half
        kept = {n for n, uid in made.items() if HALF // 2 <= fnv1a_64(uid) < 3 * HALF // 2}
        synced = informer.set_ranges(keep)
        assert synced.is_set()  # nothing gained: at once
        assert _cached(informer) == kept  # dropped before set_ranges returned
        assert informer.segments == 2  # the first one narrowed its watch, the quarter's kept
        assert server.request_count("list", "configmaps") == lists + 1  # nothing relisted
        with recorder.lock:
            assert recorder.deletes == []  # no delete notifications for a move

        late = _seed(client, "default", "late", 40, label="moves")
        late_kept = {n for n, u in late.items() if HALF // 2 <= fnv1a_64(u) < 3 * HALF // 2}
        eventually(lambda: late_kept <= _cached(informer), timeout=20)
        assert _cached(informer) == kept | late_kept
    finally:
        client.close()


def test_owned_objects_follow_their_owners_uid(
    kube_client: KubeClient, namespace: str, running: Running
) -> None:
    tag = f"o{uuid.uuid4().hex[:6]}"
    owners = _seed(kube_client, namespace, f"{tag}-owner", 12)
    for name, uid in owners.items():
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid}
        body = {
            "metadata": {
                "name": f"{name}-child",
                "labels": {"suite": f"{tag}-child"},
                "ownerReferences": [{**ref, "controller": True}],
            }
        }
        kube_client.create(CM, body, namespace)
    informer = running.start(
        ShardedInformer(
            kube_client,
            CM,
            namespace=namespace,
            label_selector=f"suite={tag}-child",
            shard_by=SHARD_BY_OWNER,
            ranges=[(0, HALF)],
        ),
    )
    want = {f"{n}-child" for n, uid in owners.items() if fnv1a_64(uid) < HALF}
    assert _cached(informer) == want
    assert informer.mode == MODE_CLIENT  # no server can filter on an owner's uid
    assert informer.set_ranges([(0, HASH_SPACE)]).wait(20)
    assert _cached(informer) == {f"{n}-child" for n in owners}


def _owner_ref(name: str, uid: str) -> JsonDict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid, "controller": True}


class OwnedCaches:
    """Two replicas' caches of owned objects (by their controller owner's uid), each of
    half the hash space, the first one's handler recorded; and owners on both sides."""

    def __init__(self, client: KubeClient, namespace: str, running: Running) -> None:
        self.client = client
        self.namespace = namespace
        self.tag = f"r{uuid.uuid4().hex[:6]}"
        self.low: list[tuple[str, str]] = []  # (name, uid) of owners in mine's ranges
        self.high: list[tuple[str, str]] = []  # ... in theirs
        for i in range(64):  # uids are the server's: create until both sides have one
            if self.low and self.high:
                break
            body = {"metadata": {"name": f"{self.tag}-owner-{i}"}}
            owner = client.create(CM, body, namespace)
            uid = owner["metadata"]["uid"]
            (self.low if fnv1a_64(uid) < HALF else self.high).append(
                (owner["metadata"]["name"], uid)
            )
        assert self.low and self.high, "no owners on both sides of the hash space"
        self.running = running
        self.recorder = Recorder()
        self.mine = self._cache([(0, HALF)])
        self.theirs = self._cache([(HALF, HASH_SPACE)])
        self.mine.add_event_handler(self.recorder)

    def _cache(self, ranges: list[tuple[int, int]]) -> ShardedInformer:
        return ShardedInformer(
            self.client,
            CM,
            namespace=self.namespace,
            label_selector=f"suite={self.tag}-child",
            shard_by=SHARD_BY_OWNER,
            ranges=ranges,
        )

    def create_child(self, name: str, owner: tuple[str, str]) -> None:
        body = {
            "metadata": {
                "name": name,
                "labels": {"suite": f"{self.tag}-child"},
                "ownerReferences": [_owner_ref(*owner)],
            }
        }
        self.client.create(CM, body, self.namespace)

    def start(self) -> None:
        self.running.start(self.mine)
        self.running.start(self.theirs)

    def cached(self) -> tuple[set[str], set[str]]:
        return _cached(self.mine), _cached(self.theirs)

    def deletes_told(self) -> list[str]:
        with self.recorder.lock:
            return list(self.recorder.deletes)


def test_a_reparented_owned_object_moves_to_its_new_owners_cache(
    kube_client: KubeClient, namespace: str, running: Running
) -> None:
    # an owned object's shard is its controller owner's: given an owner of the other
    # shard, it leaves this replica's cache as a delete (as an object leaving a label
    # selector does) and enters the other's; its later deletion leaves nothing behind
    caches = OwnedCaches(kube_client, namespace, running)
    caches.create_child("moved", caches.low[0])
    caches.start()
    assert caches.cached() == ({"moved"}, set())

    patch = {"metadata": {"ownerReferences": [_owner_ref(*caches.high[0])]}}
    kube_client.patch(CM, "moved", patch, namespace=namespace)
    eventually(
        lambda: caches.cached() == (set(), {"moved"}),
        timeout=20,
        what="the re-parented object moved to the other replica's cache",
    )
    eventually(lambda: caches.deletes_told() == ["moved"], timeout=20, what="a delete told")

    kube_client.delete(CM, "moved", namespace)
    eventually(
        lambda: caches.cached() == (set(), set()), timeout=20, what="the deleted object gone"
    )
    assert caches.deletes_told() == ["moved"]  # it had left: no second delete


def test_an_orphaned_owned_object_leaves_the_owned_cache(
    kube_client: KubeClient, namespace: str, running: Running
) -> None:
    # the owner deleted with propagationPolicy=Orphan: the garbage collector removes the
    # dependent's ownerReference (on a real cluster the GC controller does it, a bit
    # later); without a controller owner the object is no replica's: no cache keeps it
    caches = OwnedCaches(kube_client, namespace, running)
    caches.create_child("orphan", caches.low[0])
    caches.start()
    assert caches.cached() == ({"orphan"}, set())

    kube_client.delete(CM, caches.low[0][0], namespace, propagation_policy="Orphan")
    eventually(
        lambda: not kube_client.get(CM, "orphan", namespace)["metadata"].get("ownerReferences"),
        timeout=60,
        what="the garbage collector orphaned the dependent",
    )
    eventually(
        lambda: caches.cached() == (set(), set()),
        timeout=20,
        what="the orphaned object left the owned cache",
    )
    eventually(lambda: caches.deletes_told() == ["orphan"], timeout=20, what="a delete told")

    kube_client.delete(CM, "orphan", namespace)
    eventually(
        lambda: caches.cached() == (set(), set()), timeout=20, what="the deleted object gone"
    )
    assert caches.deletes_told() == ["orphan"]  # it had left: no second delete
