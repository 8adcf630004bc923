"""The shard ring's handshake against an API server: another member's published claim
holds a key back until that member publishes a ring without it, or its Lease expires;
writes are fenced per key. The other member is played by the test, writing its Lease."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from manager.cache.factory import InformerFactory
from manager.client import ClientOptions, KubeClient
from manager.errors import WriteFenced
from manager.hashring import HASH_SPACE, RingParameters, SlotRing, fnv1a_64, ranges_size
from manager.resources import builtin
from manager.sharding import (
    APPLIED_ANNOTATION,
    RING_LABEL,
    ShardingOptions,
    ShardRing,
    encode_ring,
    shard_lease_name,
)

LEASES = builtin("coordination.k8s.io/v1", "leases")
KEYS = [
    str(uuid.uuid5(uuid.NAMESPACE_URL, f"obj-{i}")) for i in range(200)
]  # keys by their primary objects' uids
WAIT = 10.0


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0)) as c:
        yield c


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Other:
    """Another member: its shard Lease, renewed by a thread, with a published ring."""

    def __init__(
        self, client: KubeClient, namespace: str, ring: str, *, published: bool = True
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = shard_lease_name(ring, "other_1")
        self.applied = encode_ring(SlotRing([self.name]))
        annotations = {APPLIED_ANNOTATION: self.applied} if published else {}
        self.renewing = threading.Event()
        self.renewing.set()
        self.stop = threading.Event()
        client.create(
            LEASES,
            {
                "metadata": {
                    "name": self.name,
                    "labels": {RING_LABEL: ring},
                    "annotations": annotations,
                },
                "spec": {
                    "holderIdentity": "other_1",
                    "leaseDurationSeconds": 2,
                    "renewTime": _now(),
                },
            },
            namespace,
        )
        self.thread = threading.Thread(target=self._renew, name="test-other-member")
        self.thread.start()

    def publish(self, members: list[str], *, units: tuple[int, ...] = ()) -> None:
        self.applied = encode_ring(SlotRing(members, RingParameters(units=units)))
        self.client.patch(
            LEASES,
            self.name,
            {"metadata": {"annotations": {APPLIED_ANNOTATION: self.applied}}},
            namespace=self.namespace,
        )

    def _renew(self) -> None:
        while not self.stop.wait(0.3):
            if self.renewing.is_set():
                self.client.patch(
                    LEASES, self.name, {"spec": {"renewTime": _now()}}, namespace=self.namespace
                )

    def close(self) -> None:
        self.stop.set()
        self.thread.join(WAIT)


def _until(check: Callable[[], Any], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@contextlib.contextmanager
def _me_and_other(
    client: KubeClient, namespace: str, lost: list[str]
) -> Iterator[tuple[ShardRing, Other]]:
    """This replica's ring (``me_1``, running) and another member the test plays, in a
    new ring; both stopped on exit."""
    ring_name = f"r{uuid.uuid4().hex[:6]}"
    other = Other(client, namespace, ring_name)
    factory = InformerFactory(client)
    leases = factory.informer(
        LEASES, namespace=namespace, label_selector=f"{RING_LABEL}={ring_name}"
    )
    options = ShardingOptions(
        ring_name=ring_name, lease_duration=2.0, renew_deadline=1.5, retry_period=0.3
    )
    me = ShardRing(
        client, leases, options, identity="me_1", namespace=namespace, on_lost=lost.append
    )
    stop, ring_stop = threading.Event(), threading.Event()
    factory.start(stop)
    runner = threading.Thread(
        target=me.run, args=(ring_stop,), kwargs={"release": lambda: True}, name="test-ring"
    )
    runner.start()
    try:
        yield me, other
    finally:
        ring_stop.set()
        runner.join(WAIT)
        stop.set()
        factory.shutdown(WAIT)
        other.close()


def test_a_key_moves_only_once_its_previous_owner_published_a_ring_without_it(
    client: KubeClient, namespace: str
) -> None:
    lost: list[str] = []
    with _me_and_other(client, namespace, lost) as (me, other):
        both = SlotRing([me.lease_name, other.name])
        mine = [k for k in KEYS if both.owner_of(fnv1a_64(k)) == me.lease_name]
        assert 50 < len(mine) < 150
        # joined and published {me, other}; the other still claims everything
        _until(lambda: me.ready_reason() is None, "membership")
        assert me.owns(fnv1a_64(mine[0]))
        assert not any(me.begin(k, fnv1a_64(k)) for k in mine), (
            "started a key the other still claims"
        )
        with pytest.raises(WriteFenced):  # a key that is not ours is fenced
            theirs = next(k for k in KEYS if k not in mine)
            me.fence(theirs, fnv1a_64(theirs)).check()
        me.fence(mine[0], fnv1a_64(mine[0])).check()  # ours: allowed (while our Lease is valid)

        # the other acknowledges the ring with both: our keys are ours to start
        other.publish([me.lease_name, other.name])
        _until(lambda: me.begin(mine[0], fnv1a_64(mine[0])), "the acknowledged key")
        me.end(mine[0], fnv1a_64(mine[0]))
        assert all(me.begin(k, fnv1a_64(k)) for k in mine)
        for k in mine:
            me.end(k, fnv1a_64(k))

        # the other's Lease expires (it stops renewing): everything is ours, its stale
        # claim notwithstanding
        other.renewing.clear()
        theirs = next(k for k in KEYS if k not in mine)
        _until(lambda: me.begin(theirs, fnv1a_64(theirs)), "the expired member's keys", 15)
        me.end(theirs, fnv1a_64(theirs))
        assert all(me.owns(fnv1a_64(k)) for k in KEYS)
        assert lost == []
    released = client.get(LEASES, me.lease_name, namespace)
    assert (released["spec"].get("holderIdentity") or "") == ""  # released on stop


def test_a_drain_waits_for_the_reconciles_of_keys_that_move_away(
    client: KubeClient, namespace: str
) -> None:
    ring_name = f"r{uuid.uuid4().hex[:6]}"
    factory = InformerFactory(client)
    leases = factory.informer(
        LEASES, namespace=namespace, label_selector=f"{RING_LABEL}={ring_name}"
    )
    options = ShardingOptions(
        ring_name=ring_name,
        lease_duration=2.0,
        renew_deadline=1.5,
        retry_period=0.3,
        drain_timeout=5.0,
    )
    me = ShardRing(client, leases, options, identity="me_1", namespace=namespace, on_lost=print)
    stop, ring_stop = threading.Event(), threading.Event()
    factory.start(stop)
    runner = threading.Thread(
        target=me.run, args=(ring_stop,), kwargs={"release": lambda: True}, name="test-ring"
    )
    runner.start()
    other: Other | None = None
    try:
        _until(lambda: me.ready_reason() is None, "membership")
        alone = KEYS[:]
        assert all(me.owns(fnv1a_64(k)) for k in alone)
        # a reconcile of a key that will move is in flight when a member joins
        newcomer_name = shard_lease_name(ring_name, "other_1")
        moving = next(
            k
            for k in KEYS
            if SlotRing([me.lease_name, newcomer_name]).owner_of(fnv1a_64(k)) != me.lease_name
        )
        # (a replica starts keys once it has watched the ring for a lease duration)
        _until(lambda: me.begin(moving, fnv1a_64(moving)), "the first key started")
        other = Other(client, namespace, ring_name)
        time.sleep(1.0)
        # still draining: the applied ring (and so the fence) still gives us the key
        assert me.owns(fnv1a_64(moving))
        me.fence(moving, fnv1a_64(moving)).check()
        me.end(
            moving, fnv1a_64(moving)
        )  # the reconcile ends: the drain completes, the ring is applied
        _until(lambda: not me.owns(fnv1a_64(moving)), "the new ring applied")
        with pytest.raises(WriteFenced):
            me.fence(moving, fnv1a_64(moving)).check()
    finally:
        ring_stop.set()
        runner.join(WAIT)
        stop.set()
        factory.shutdown(WAIT)
        if other is not None:
            other.close()


class RecordingInformer:
    """Stands in for a sharded cache: records the ranges the ring gives it."""

    shard_by = "uid"

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []
        self.calls: list[list[tuple[int, int]]] = []

    def set_ranges(self, ranges: Any) -> threading.Event:
        self.ranges = list(ranges)
        self.calls.append(self.ranges)
        done = threading.Event()
        done.set()
        return done


@pytest.mark.parametrize("published", [False, True], ids=["started-together", "joining"])
def test_a_first_ring_of_ourselves_alone_is_not_applied_before_the_observation_is_over(
    client: KubeClient, namespace: str, published: bool
) -> None:
    # Replicas started together: each holds its own Lease before it sees the others'. A
    # ring applied then has it alone, and its caches would list the whole space (an
    # unsharded replica's peak memory) only to drop most of it a moment later. Joining
    # members that already published a ring, it takes its share at once (no waiting).
    ring_name = f"r{uuid.uuid4().hex[:6]}"
    factory = InformerFactory(client)
    leases = factory.informer(
        LEASES, namespace=namespace, label_selector=f"{RING_LABEL}={ring_name}"
    )
    options = ShardingOptions(
        ring_name=ring_name, lease_duration=3.0, renew_deadline=2.0, retry_period=0.3
    )
    me = ShardRing(client, leases, options, identity="me_1", namespace=namespace, on_lost=print)
    cache = RecordingInformer()
    me.add_informer(cache)  # type: ignore[arg-type]
    stop, ring_stop = threading.Event(), threading.Event()
    factory.start(stop)
    runner = threading.Thread(
        target=me.run, args=(ring_stop,), kwargs={"release": lambda: True}, name="test-ring"
    )
    started = time.monotonic()
    runner.start()
    other: Other | None = None
    try:
        _until(lambda: me.lease_name in _holders(client, namespace), "my Lease held")
        time.sleep(0.8)  # a few ring steps (retryPeriod 0.3) alone, within the observation
        other = Other(client, namespace, ring_name, published=published)
        _until(lambda: cache.calls, "a ring applied", timeout=options.lease_duration + WAIT)
        first = time.monotonic() - started
        _until(lambda: me.ready_reason() is None, "a ring published")
        assert all(ranges_size(r) < HASH_SPACE for r in cache.calls), cache.calls
        if published:
            assert first < options.lease_duration, f"joining waited {first:.1f}s"
    finally:
        ring_stop.set()
        runner.join(WAIT)
        stop.set()
        factory.shutdown(WAIT)
        if other is not None:
            other.close()


def _holders(client: KubeClient, namespace: str) -> set[str]:
    held = client.list(LEASES, namespace=namespace)["items"]
    return {o["metadata"]["name"] for o in held if o["spec"].get("holderIdentity")}


# -- the incarnation a sharded reconcile runs for ---------------------------------------


class _Ring:
    lost = False

    def begin(self, key: str, h: int) -> bool:
        return True

    def end(self, key: str, h: int) -> None:
        pass

    def owns(self, h: int) -> bool:
        return True

    def fence(self, key: str, h: int) -> object:
        return ("fence", key, h)


class _Keys:
    """Keys placed by the uid of their last-known object (``uids``)."""

    def __init__(self, uids: dict[str, str]) -> None:
        self.uids = uids
        self.settled_keys: list[str] = []

    def locate(self, key: str) -> tuple[int | None, str | None]:
        uid = self.uids.get(key)
        return (fnv1a_64(uid) if uid else None), uid

    def settled(self, key: str) -> None:
        self.settled_keys.append(key)


def test_a_sharded_reconcile_runs_for_the_incarnation_its_hash_was_found_from() -> None:
    """A name deleted and created again is placed by the new uid on another replica while
    this one still cleans up the old one: the reconcile must know which uid its write
    permission is for (``incarnation()``), under that uid's fence, and nowhere else."""
    from manager import Request, Result, incarnation
    from manager.fencing import current_fence
    from manager.sharding import ShardedReconciler

    seen: list[tuple[str | None, object]] = []

    class Inner:
        def reconcile(self, request: Request) -> Result:
            seen.append((incarnation(), current_fence()))
            return Result()

    keys = _Keys({"ns/k": "uid-old"})
    sharded = ShardedReconciler(_Ring(), Inner())  # type: ignore[arg-type]
    sharded.keys = keys  # type: ignore[assignment]
    sharded.reconcile(Request("ns", "k"))
    assert seen == [("uid-old", ("fence", "ns/k", fnv1a_64("uid-old")))]
    assert incarnation() is None  # only inside the reconcile
    keys.uids["ns/k"] = "uid-new"
    sharded.reconcile(Request("ns", "k"))
    assert seen[-1][0] == "uid-new"
    sharded.reconcile(Request("ns", "unknown"))  # never cached here: not run
    assert len(seen) == 2


def test_a_placed_unit_moves_only_once_the_member_holding_it_published_units_without_it(
    client: KubeClient, namespace: str
) -> None:
    """Units (a fleet's clusters) are placed by the ring's parameters, which replicas
    publish with their ring: a unit our units give us, which another member's published
    ring (its units) gives it, waits until that member publishes units that do not —
    the same handshake as a key's."""
    with _me_and_other(client, namespace, []) as (me, other):
        members = [me.lease_name, other.name]
        # two units: alone, each is the other member's by its slot; placed, one is ours
        units = _units_placed_apart(members, other.name)
        ours = next(u for u in units if _placed(members, units).owner_of(u) == me.lease_name)
        other.publish(members)  # its ring without units: both units are its
        _until(lambda: me.ready_reason() is None, "membership")
        assert not me.owns(ours)
        me.set_units(units)
        _until(lambda: me.owns(ours), "our placed unit in the applied ring")
        time.sleep(1.0)  # several ring steps
        assert not me.begin("cluster/ours", ours), "started a unit the other still claims"
        with pytest.raises(WriteFenced):  # not ours until it is
            me.fence("cluster/theirs", next(u for u in units if u != ours)).check()
        other.publish(members, units=units)  # it acknowledges the units
        _until(lambda: me.begin("cluster/ours", ours), "the acknowledged unit")
        me.end("cluster/ours", ours)
        published = client.get(LEASES, me.lease_name, namespace)["metadata"]["annotations"]
        assert published[APPLIED_ANNOTATION] == encode_ring(_placed(members, units))


def _placed(members: list[str], units: tuple[int, ...]) -> SlotRing:
    return SlotRing(members, RingParameters(units=units))


def _units_placed_apart(members: list[str], slot_owner: str) -> tuple[int, int]:
    """Two hashes whose slots both give them to ``slot_owner`` but which, placed, go one
    to each member."""
    plain = SlotRing(members)
    for i in range(10_000):
        pair = (fnv1a_64(f"u{i}"), fnv1a_64(f"v{i}"))
        if all(plain.owner_of(u) == slot_owner for u in pair):
            placed = _placed(members, tuple(sorted(pair)))
            if {placed.owner_of(u) for u in pair} == set(members):
                return pair
    raise AssertionError("no such pair")
