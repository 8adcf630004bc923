"""One writer per key, proven: the two-writer windows of issue 20, each reproduced as the
review's fault scripts found it, and the writes a replica may not make refused or
abandoned.

Managers run in threads against the local API server, each behind its own
:class:`~manager.testing.proxy.TcpProxy` (to stall a watch, or slow a write down) and
with a token naming it (so the server's audit says who wrote what). Timings as in the
review: lease 3 s, renew deadline 2 s, retry 0.5 s. Sharded replicas run a controller
whose reconcile holds its key for a while and then makes a *blind* merge patch (no
resourceVersion: nothing on the server would refuse a stale write), while a workload
edits every key every half second. Proven per test:

* the journal of reconcile spans: no key was worked on by two replicas at once (a span
  whose write was refused or abandoned did nothing, and does not count);
* the audit (``e2e/shardaudit.py``): every applied write was made by a replica whose
  own Lease was live and whose published ring gave it the key, with no earlier live claim
  by another; for the leader, no write by a replica while another held the Lease.

They need the proxy's rules and the audit: ``local_only``.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.shardaudit import leader_violations, owner_hash, shard_violations
from manager import incarnation
from manager.client import ClientOptions, KubeClient
from manager.errors import AlreadyExists, ApiError, Conflict, NotFound, WriteFenced
from manager.hashring import RingParameters, SlotRing
from manager.manager import Manager, ManagerOptions
from manager.metrics import REGISTRY
from manager.reconcile import Request, Result
from manager.resources import builtin
from manager.sharding import APPLIED_ANNOTATION, ShardingOptions, encode_ring, shard_lease_name
from manager.testing import LocalApiServer
from manager.testing.proxy import TcpProxy
from tests.integration.running import ManagerThread

pytestmark = [pytest.mark.local_only, pytest.mark.slow, pytest.mark.timeout(180)]

CONFIGMAPS = builtin("v1", "configmaps")
LEASES = builtin("coordination.k8s.io/v1", "leases")
LABEL = "one-writer"
LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
KEYS = 40


class Journal:
    """Every reconcile of every replica: who, key, start, end, outcome."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[str, str, float, float, str]] = []

    def overlaps(self) -> list[str]:
        """Spans of one key by two replicas at once (spans that wrote nothing aside)."""
        by_key: dict[str, list[tuple[float, float, str]]] = {}
        with self.lock:
            for who, key, start, end, outcome in self.entries:
                if outcome not in ("fenced", "nothing"):
                    by_key.setdefault(key, []).append((start, end, who))
        bad = []
        for key, spans in by_key.items():
            spans.sort()
            for (s1, e1, w1), (s2, e2, w2) in itertools.pairwise(spans):
                if w1 != w2 and s2 < e1:
                    bad.append(f"{key}: {w1} [{s1:.3f}, {e1:.3f}] and {w2} [{s2:.3f}, {e2:.3f}]")
        return bad

    def written_by(self, who: str) -> int:
        with self.lock:
            return sum(1 for w, *_, outcome in self.entries if w == who and outcome == "written")


class BlindWriter:
    """Holds the key ``hold`` seconds, then writes the tick it saw with a blind merge
    patch; journals the span. ``thread_write`` makes the write from a thread of its own
    (``"plain"``: a new thread; ``"copied"``: one running in a copy of the context)."""

    def __init__(self, mgr: Manager, journal: Journal, who: str, hold: float) -> None:
        self.client = mgr.client
        # a sharded controller reads the cache its events come from: its share
        shard = "primary" if mgr.shards is not None else None
        self.lister = mgr.lister(CONFIGMAPS, label_selector=LABEL, shard=shard)
        self.recorder = mgr.recorder()
        self.journal = journal
        self.who = who
        self.hold = hold
        self.events = False

    def reconcile(self, request: Request) -> Result:
        start = time.monotonic()
        outcome = "nothing"
        try:
            obj = self.lister.get(request.name, request.namespace)
            if obj is None:
                return Result()
            tick = (obj.get("data") or {}).get("tick", "")
            if (obj["metadata"].get("annotations") or {}).get("tick") == tick:
                return Result()
            time.sleep(self.hold)
            patch = {"metadata": {"annotations": {"tick": tick, "by": self.who}}}
            try:
                self.client.patch(CONFIGMAPS, request.name, patch, namespace=request.namespace)
            except WriteFenced:
                outcome = "fenced"
                raise
            except NotFound:
                return Result()
            outcome = "written"
            if self.events:
                self.recorder.event(
                    {**obj, "kind": "ConfigMap", "apiVersion": "v1"}, "Normal", "Ticked", tick
                )
            return Result()
        finally:
            with self.journal.lock:
                self.journal.entries.append(
                    (self.who, request.key, start, time.monotonic(), outcome)
                )


class Replica:
    """A manager in a thread, behind its own proxy, its writes audited as ``name``."""

    def __init__(
        self,
        server: LocalApiServer,
        tmp: Path,
        name: str,
        namespace: str,
        journal: Journal,
        *,
        ring: str | None = None,
        lease_name: str | None = None,
        hold: float = 0.2,
        slots: int = 64,
        shard_by: str = "uid",
        drain_timeout: float = 5.0,
        graceful: float = 10.0,
        workers: int = 4,
        timings: tuple[float, float, float] = (LEASE, RENEW, RETRY),
        writer: Callable[[Manager, Journal, str, float], Any] | None = None,
    ) -> None:
        self.name = name
        host, port = server.url.removeprefix("http://").split(":")
        self.proxy = TcpProxy((host, int(port))).start()
        kubeconfig = server.kubeconfig_for(name, tmp / f"{name}.kubeconfig", server=self.proxy.url)
        self.client = KubeClient.from_kubeconfig(str(kubeconfig), options=ClientOptions(qps=0))
        self.identity = f"{name}_{uuid.uuid4().hex[:6]}"
        sharding = None
        if ring is not None:
            sharding = ShardingOptions(
                ring_name=ring,
                namespace=namespace,
                slots=slots,
                shard_by=shard_by,
                lease_duration=timings[0],
                renew_deadline=timings[1],
                retry_period=timings[2],
                drain_timeout=drain_timeout,
            )
        self.mgr = Manager(
            self.client,
            ManagerOptions(
                name="test-one-writer",
                identity=self.identity,
                leader_election=lease_name is not None,
                leader_election_id=lease_name or "unused",
                leader_election_namespace=namespace,
                lease_duration=timings[0],
                renew_deadline=timings[1],
                retry_period=timings[2],
                metrics_bind_address="0",
                health_probe_bind_address="0",
                namespace=namespace,
                graceful_shutdown_timeout=graceful,
                sharding=sharding,
            ),
        )
        self.lease = shard_lease_name(ring, self.identity) if ring is not None else ""
        self.writer = (writer or BlindWriter)(self.mgr, journal, self.identity, hold)
        self.mgr.controller("blind", self.writer, workers=workers, sharded=ring is not None).for_(
            CONFIGMAPS, label_selector=LABEL
        ).complete()
        self.running: ManagerThread | None = None

    def start(self) -> Replica:
        self.running = ManagerThread(self.mgr)
        return self

    def close(self) -> int | None:
        self.proxy.clear_rules()  # the network heals before the replica stops
        try:
            return self.running.close() if self.running is not None else None
        finally:
            self.proxy.stop()
            self.client.close()


class Setup:
    """The test's server, namespace, keys, workload, journal and replicas."""

    def __init__(self, server: LocalApiServer, client: KubeClient, namespace: str, tmp: Path):
        self.server = server
        self.client = client
        self.namespace = namespace
        self.tmp = tmp
        self.ring = f"ow-{uuid.uuid4().hex[:6]}"
        self.journal = Journal()
        self.replicas: list[Replica] = []
        self.names = [f"cm-{i}" for i in range(KEYS)]
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        for name in self.names:
            body = {"metadata": {"name": name, "labels": {LABEL: "true"}}, "data": {"tick": "0"}}
            client.create(CONFIGMAPS, body, namespace)

    def replica(self, name: str, **kwargs: Any) -> Replica:
        kwargs.setdefault("ring", self.ring)
        r = Replica(self.server, self.tmp, name, self.namespace, self.journal, **kwargs)
        self.replicas.append(r)
        return r

    def tick(self) -> None:
        """Every key edited every half second (in the background)."""

        def run() -> None:
            n = 0
            while not self._stop.wait(0.5):
                n += 1
                for name in self.names:
                    with contextlib.suppress(ApiError):
                        self.client.patch(
                            CONFIGMAPS, name, {"data": {"tick": str(n)}}, namespace=self.namespace
                        )

        self._ticker = threading.Thread(target=run, name="test-ticker")
        self._ticker.start()

    def stop_ticking(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(10)

    def close(self) -> None:
        self.stop_ticking()
        for r in self.replicas:
            with contextlib.suppress(AssertionError):
                r.close()
        self.server.audit.stop()

    def shard_violations(self, lease_duration: float = LEASE) -> list[str]:
        checked, bad = shard_violations(
            self.server.audit,
            self.namespace,
            self.ring,
            lease_duration,
            writer=lambda rec: (
                rec.resource == "configmaps"
                and rec.namespace == self.namespace
                and rec.user.startswith("rep-")
            ),
        )
        assert checked > 0, "no replica write was audited"
        return bad

    def converged(self) -> bool:
        items = self.client.list(CONFIGMAPS, self.namespace, label_selector=LABEL)["items"]
        return all(
            (i["metadata"].get("annotations") or {}).get("tick")
            == (i.get("data") or {}).get("tick")
            for i in items
        )


@pytest.fixture
def setup(
    local_server: LocalApiServer, kube_client: KubeClient, namespace: str, tmp_path: Path
) -> Iterator[Setup]:
    local_server.audit.clear()
    local_server.audit.start()
    s = Setup(local_server, kube_client, namespace, tmp_path)
    try:
        yield s
    finally:
        s.close()


def _until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(ApiError):
            value = check()
            if value:
                return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _metric(name: str, ring: str) -> float:
    return REGISTRY.get_sample_value(name, {"ring": ring}) or 0.0


# -- 1. a stalled Lease watch ---------------------------------------------------------


def test_a_stalled_lease_watch_does_not_give_a_live_members_keys_away(setup: Setup) -> None:
    """A's watch of the ring's Leases stalls (its bytes held, its connection open) right
    after A publishes the ring {A, B}; A keeps renewing over other connections. A must not
    judge B expired on its stale cache (and start B's keys while B works on them); it
    must notice the stale watch and restart it."""
    a = setup.replica("rep-a")
    b_identity_prefix = "rep-b_"
    a.start()
    setup.tick()
    _until(lambda: setup.journal.written_by(a.identity) > 0, "A at work")
    stale_before = _metric("shard_stale_views_total", setup.ring)
    b = setup.replica("rep-b")
    assert b.identity.startswith(b_identity_prefix)
    pair = encode_ring(SlotRing([a.lease, b.lease])).encode()
    own = re.escape(b'"name":"' + a.lease.encode() + b'"')
    published = re.escape(b'"' + APPLIED_ANNOTATION.encode() + b'":"' + pair + b'"')
    stall = a.proxy.hold_responses(
        rb"GET /apis/coordination\.k8s\.io/v1/namespaces/[^/]+/leases\?[^ ]*watch=",
        after=b"(?s)(" + own + b".*" + published + b"|" + published + b".*" + own + b")",
    )
    b.start()
    assert stall.holding.wait(30), "A's Lease watch was never stalled"
    time.sleep(3 * LEASE)  # B stays alive and busy the whole time
    setup.stop_ticking()
    _until(setup.converged, "every key reconciled")
    assert setup.journal.written_by(b.identity) > 0
    assert setup.journal.overlaps() == []
    assert setup.shard_violations() == []
    assert _metric("shard_stale_views_total", setup.ring) > stale_before, "A never noticed"


# -- 2. a deleted shard Lease -----------------------------------------------------------


def test_a_deleted_shard_lease_is_a_lost_lease_and_its_keys_wait_for_its_expiry(
    setup: Setup,
) -> None:
    """``kubectl delete lease`` on B's shard Lease while B runs: B stops (it does not
    re-create the Lease and go on), A takes B's keys only once B's last claim has expired,
    and C, joining just after the deletion, starts none of the keys B may still hold."""
    a, b = setup.replica("rep-a").start(), setup.replica("rep-b").start()
    setup.tick()
    _until(
        lambda: setup.journal.written_by(a.identity) and setup.journal.written_by(b.identity),
        "A and B at work",
    )
    time.sleep(1.0)
    setup.client.delete(LEASES, b.lease, setup.namespace)
    c = setup.replica("rep-c").start()
    assert b.running is not None and b.running.ended_within(10), "B went on without its Lease"
    assert b.running.rc == 1
    with pytest.raises(NotFound):
        setup.client.get(LEASES, b.lease, setup.namespace)  # not re-created
    time.sleep(2 * LEASE)
    setup.stop_ticking()
    _until(setup.converged, "every key reconciled")
    assert setup.journal.written_by(c.identity) > 0
    assert setup.journal.overlaps() == []
    assert setup.shard_violations() == []


# -- 3. a write in flight when a drain times out -----------------------------------------


def test_a_write_in_flight_when_the_drain_times_out_is_abandoned_before_the_key_moves(
    setup: Setup,
) -> None:
    """A's writes of the keys B will take are held on the way (a slow path); B joins; A's
    drain times out with those writes on the wire. A must abandon them (close their
    connections) before it publishes the ring that gives the keys to B: once it has, the
    held writes go on, and none may be applied.

    The shard Leases here last 10 s (renew deadline 8 s), so a write's timeout (capped by
    what is left of its permission, 7.5 s or more) outlasts the drain and the wait for
    abandoned writes (0.2 + 2 s): without the abandon, the held writes would still be
    open when A publishes, and land after the ring moved (as they could with the default
    15/10 s Leases)."""
    timings = (10.0, 8.0, RETRY)
    a = setup.replica("rep-a", hold=0.1, drain_timeout=0.2, workers=8, timings=timings).start()
    # B's Lease name (so the ring A will move to) is known before B runs: only the PATCHes
    # of keys moving to B are held, so A's 8 workers pile up on them and the drain finds
    # 8 writes of moving keys on the wire every time, not by chance
    b = setup.replica("rep-b", hold=0.1, drain_timeout=0.2, timings=timings)
    after = SlotRing([a.lease, b.lease], RingParameters(slots=64, shard_by="uid"))
    moving = [
        name
        for name in setup.names
        if after.owner_of_object(setup.client.get(CONFIGMAPS, name, setup.namespace)) == b.lease
    ]
    assert len(moving) >= 8, f"{len(moving)} keys move to B: too few to occupy A's workers"
    setup.tick()
    _until(lambda: setup.journal.written_by(a.identity) > 0, "A at work")
    path = f"PATCH /api/v1/namespaces/{setup.namespace}/configmaps/(?:{'|'.join(moving)})[ ?]"
    held = a.proxy.delay_requests(path.encode(), 60.0)
    _until(lambda: held.matched >= 8, "A's 8 workers held on moving keys", timeout=5)
    b.start()

    def published() -> str:
        lease = setup.client.get(LEASES, a.lease, setup.namespace)
        return str((lease["metadata"].get("annotations") or {}).get(APPLIED_ANNOTATION, ""))

    _until(lambda: b.lease in published(), "A published the ring with B", timeout=15)
    held.release()  # what A did not abandon reaches the server now, after the move
    _until(lambda: setup.journal.written_by(b.identity) > 0, "B at work")
    setup.stop_ticking()
    _until(setup.converged, "every key reconciled")
    assert setup.journal.overlaps() == []
    assert setup.shard_violations(lease_duration=timings[0]) == []
    assert _metric("shard_abandoned_writes_total", setup.ring) >= 8


# -- 7. replicas configured with different ring parameters ------------------------------


def test_replicas_with_different_ring_parameters_follow_one_ring_and_starve_no_key(
    setup: Setup,
) -> None:
    a = setup.replica("rep-a", slots=64, hold=0.01).start()
    b = setup.replica("rep-b", slots=7, hold=0.01).start()
    setup.tick()
    _until(
        lambda: setup.journal.written_by(a.identity) and setup.journal.written_by(b.identity),
        "A and B at work",
    )
    follower = max(a.lease, b.lease)  # the lowest-named member's parameters win
    time.sleep(1.0)
    setup.stop_ticking()
    _until(setup.converged, "every key reconciled", timeout=15)
    assert _metric("shard_ring_params_mismatch", setup.ring) == 1.0  # the follower says so
    published = {
        r.lease: (
            setup.client.get(LEASES, r.lease, setup.namespace)["metadata"]["annotations"][
                APPLIED_ANNOTATION
            ]
        )
        for r in (a, b)
    }
    expected = (
        "slots-v1;slots=64;shardBy=uid"
        if min(a.lease, b.lease) == a.lease
        else "slots-v1;slots=7;shardBy=uid"
    )
    assert {v.partition("|")[0] for v in published.values()} == {expected}, (follower, published)
    assert setup.journal.overlaps() == []
    assert setup.shard_violations() == []


# -- 9. writes from threads a reconcile starts ------------------------------------------


def test_a_thread_started_without_the_reconciles_context_cannot_write_in_a_sharded_manager(
    setup: Setup,
) -> None:
    a = setup.replica("rep-a")
    outcomes: dict[str, BaseException | None] = {}
    inner = a.writer

    class Spawning:
        def reconcile(self, request: Request) -> Result:
            if request.name == setup.names[0] and not outcomes:
                for how in ("plain", "copied"):

                    def write(how: str = how) -> None:
                        patch = {"metadata": {"annotations": {"from-thread": how}}}
                        try:
                            a.mgr.client.patch(
                                CONFIGMAPS, request.name, patch, namespace=request.namespace
                            )
                            outcomes[how] = None
                        except BaseException as exc:
                            outcomes[how] = exc

                    if how == "plain":
                        t = threading.Thread(target=write)
                    else:
                        ctx = contextvars.copy_context()
                        t = threading.Thread(target=ctx.run, args=(write,))
                    t.start()
                    t.join(10)
            return inner.reconcile(request)

    a.mgr.controller("spawning", Spawning(), sharded=True).for_(
        CONFIGMAPS, label_selector=LABEL
    ).complete()
    a.start()
    _until(lambda: len(outcomes) == 2, "the reconcile's threads")
    plain, copied = outcomes["plain"], outcomes["copied"]
    assert isinstance(plain, WriteFenced) and plain.reason == "no_fence", plain
    assert copied is None  # the key's fence came along: the owner may write


# -- 4. an Event in flight at a graceful stop -------------------------------------------


@pytest.mark.parametrize("close_after", [0.0, 0.3], ids=["close-with-data", "close-later"])
def test_a_graceful_stop_releases_the_lease_only_once_no_event_can_land(
    setup: Setup, close_after: float
) -> None:
    """A's Event POSTs are slow (2 s on the way); A is stopped (SIGTERM) with one in
    flight and a short graceful timeout. The Lease must not go to B while A's Event can
    still be applied. ``close-later``: the path delivers the request's data, and A's
    close 0.3 s later (two pieces, as some proxies do), so the server has applied the
    Event before it sees the close: shutting the connection down does not stop it, and
    a release that relied on it let B in first (issue 31, defect 4)."""
    lease = f"{setup.ring}-leader"
    # a renew deadline long enough that the Event's request is not cut short by it
    timings = (6.0, 4.0, 0.5)
    a = setup.replica("rep-a", ring=None, lease_name=lease, hold=0.0, graceful=0.5, timings=timings)
    a.writer.events = True
    a.start()
    _until(a.mgr.is_leader, "A leading")
    b = setup.replica("rep-b", ring=None, lease_name=lease, hold=0.0, timings=timings).start()
    setup.tick()
    _until(lambda: setup.journal.written_by(a.identity) > 0, "A at work")
    # A's Events go out in batches, a little after the reconciles that record them
    _until(
        lambda: any(rec.resource == "events" for rec in setup.server.audit.records("rep-a")),
        "an Event of A written",
    )
    slow = a.proxy.delay_requests(
        rb"(POST|PATCH) /api/v1/namespaces/[^/]+/events", 2.0, close_after=close_after
    )
    _until(lambda: slow.matched > 0, "an Event on the slow path")
    assert a.running is not None
    a.running.stop.set()
    assert a.running.ended_within(15)
    _until(b.mgr.is_leader, "B leading")
    time.sleep(2.5)  # what A had on the wire has arrived by now
    setup.stop_ticking()
    bad = leader_violations(
        setup.server.audit,
        setup.namespace,
        lease,
        writer=lambda rec: rec.user.startswith("rep-") and rec.resource != "leases",
    )
    assert bad == []
    assert any(rec.resource == "events" for rec in setup.server.audit.records("rep-a"))


# -- 5. the leader Lease deleted ----------------------------------------------------------


def test_deleting_the_leader_lease_does_not_give_two_leaders(setup: Setup) -> None:
    """A common way to force a failover: the standby must not lead while the old leader
    may still write (it finds its Lease gone at its next round and stops)."""
    lease = f"{setup.ring}-leader"
    a = setup.replica("rep-a", ring=None, lease_name=lease, hold=0.0)
    a.start()
    _until(a.mgr.is_leader, "A leading")
    b = setup.replica("rep-b", ring=None, lease_name=lease, hold=0.0).start()
    setup.tick()
    _until(lambda: setup.journal.written_by(a.identity) > 5, "A at work")
    time.sleep(1.0)  # B has watched A renew
    setup.client.delete(LEASES, lease, setup.namespace)
    assert a.running is not None and a.running.ended_within(10)
    assert a.running.rc == 1  # lost: the process exits
    _until(b.mgr.is_leader, "B leading", timeout=2 * LEASE + 5)
    _until(lambda: setup.journal.written_by(b.identity) > 0, "B at work")
    setup.stop_ticking()
    bad = leader_violations(
        setup.server.audit,
        setup.namespace,
        lease,
        writer=lambda rec: rec.user.startswith("rep-") and rec.resource != "leases",
    )
    assert bad == []


# -- 10. a re-used name: deleted and created again at once, during a ring change --------

OWNED_LABEL = "one-writer-owned"


def _controller_uid(obj: dict[str, Any]) -> str:
    refs = obj["metadata"].get("ownerReferences") or []
    return next((str(r.get("uid")) for r in refs if r.get("controller")), "")


class OwnedWriter:
    """Provisions one owned ConfigMap per key (``<name>-owned``, controlled by the key's
    uid) and, once the key's object is gone, cleans up the deleted incarnation's owned
    object by the uid it last had (:func:`~manager.incarnation`), as a controller
    cleaning up state of its own does. Journals each span as ``key@uid``.

    ``guarded`` (the design): the cleanup deletes only the owned object whose controller
    is the incarnation it runs for, with ``preconditions.uid`` of that object as cached;
    a create that meets the object of an older incarnation of the name waits for its
    cleanup (or the garbage collector). ``preconditions=False`` drops only the uid
    precondition (the mechanism broken on purpose). ``guarded=False`` is the controller
    as written before (the review's): delete by name, AlreadyExists means done."""

    cleanup_holds = (0.1, 0.2, 0.3, 0.4, 0.5)  # by key: before or after the collector
    guarded = True
    preconditions = True

    def __init__(self, mgr: Manager, journal: Journal, who: str, hold: float) -> None:
        self.client = mgr.client
        shard = "primary" if mgr.shards is not None else None
        self.lister = mgr.lister(CONFIGMAPS, label_selector=LABEL, shard=shard)
        # every owned object, no events: a deleted owned object is not repaired, so a
        # wrong delete shows in the end state
        self.owned = mgr.lister(CONFIGMAPS, label_selector=OWNED_LABEL)
        self.journal = journal
        self.who = who
        self.hold = hold

    def reconcile(self, request: Request) -> Result:
        uid = incarnation()
        start = time.monotonic()
        outcome = "nothing"
        try:
            obj = self.lister.get(request.name, request.namespace)
            if obj is not None:
                if obj["metadata"]["uid"] != uid:
                    return Result(requeue_after=0.05)  # a newer one: its own permission
                time.sleep(self.hold)
                outcome = self._provision(request, obj)
            elif uid is not None:
                outcome = self._clean_up(request, uid)
            return Result(requeue_after=0.05) if outcome == "waiting" else Result()
        except WriteFenced:
            outcome = "fenced"
            raise
        finally:
            with self.journal.lock:
                self.journal.entries.append(
                    (self.who, f"{request.key}@{uid}", start, time.monotonic(), outcome)
                )

    def _provision(self, request: Request, obj: dict[str, Any]) -> str:
        name, uid = f"{request.name}-owned", obj["metadata"]["uid"]
        cached = self.owned.get(name, request.namespace)
        if cached is not None and _controller_uid(cached) == uid:
            return "nothing"
        owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": request.name, "uid": uid}
        body = {
            "metadata": {
                "name": name,
                "labels": {OWNED_LABEL: "true"},
                "ownerReferences": [{**owner, "controller": True}],
            },
            "data": {"owner": uid},
        }
        try:
            self.client.create(CONFIGMAPS, body, request.namespace)
            return "provisioned"
        except AlreadyExists:
            if not self.guarded:
                return "nothing"  # "it is there"
        try:
            there = self.client.get(CONFIGMAPS, name, request.namespace)
        except NotFound:
            return "waiting"
        if _controller_uid(there) == uid:
            return "nothing"
        return "waiting"  # an older incarnation's: its cleanup (or the collector) first

    def _clean_up(self, request: Request, uid: str) -> str:
        name = f"{request.name}-owned"
        hold = self.cleanup_holds[int(request.name.rpartition("-")[2]) % len(self.cleanup_holds)]
        preconditions = None
        if self.guarded:
            cached = self.owned.get(name, request.namespace)
            if cached is None or _controller_uid(cached) != uid:
                return "nothing"
            if self.preconditions:
                preconditions = {"uid": cached["metadata"]["uid"]}
        time.sleep(hold)
        try:
            self.client.delete(CONFIGMAPS, name, request.namespace, preconditions=preconditions)
        except (NotFound, Conflict):
            return "nothing"  # gone, or not the object we saw: another incarnation's
        return "cleaned-up"


def test_a_name_deleted_and_created_again_during_a_ring_change_ends_right(
    setup: Setup,
) -> None:
    """Keys deleted and created again at once (a new uid, placed on the ring anew) while
    B joins A: the old incarnation's cleanup (by its last-known uid) and the new one's
    provisioning run on two replicas at once — by name. What must hold: no incarnation
    (key, uid) worked on by two replicas at once; no write to an owned object by a
    replica whose ring did not give it the object's owner (the audit, owned objects
    placed by their owner's uid); and the end state: every key has exactly its owned
    object, controlled by its current uid, and no deleted incarnation's is left.

    The local API server's garbage collector acts 0.2 s late (a real one is late too),
    so a cleanup (0.1-0.5 s after it read its cache) sometimes comes before it and
    sometimes after, when the name may already hold the new incarnation's object."""
    setup.server.gc.latency = 0.2
    try:
        _recreate_during_a_ring_change(setup)
    finally:
        setup.server.gc.latency = 0.0


def _recreate_during_a_ring_change(setup: Setup) -> None:
    setup.replica("rep-a", hold=0.05, writer=OwnedWriter).start()
    ns, client = setup.namespace, setup.client

    def owned() -> dict[str, dict[str, Any]]:
        items = client.list(CONFIGMAPS, ns, label_selector=OWNED_LABEL)["items"]
        return {i["metadata"]["name"]: i for i in items}

    def primaries() -> dict[str, str]:
        items = client.list(CONFIGMAPS, ns, label_selector=LABEL)["items"]
        return {i["metadata"]["name"]: i["metadata"]["uid"] for i in items}

    def wrong() -> list[str]:
        """Keys without exactly their own owned object, owned objects of nobody live."""
        want = {f"{n}-owned": uid for n, uid in primaries().items()}
        have = {n: _controller_uid(o) for n, o in owned().items()}
        return [
            f"{n}: owned by {have.get(n, '(missing)')}, key is {want.get(n, '(gone)')}"
            for n in sorted(want.keys() | have.keys())
            if have.get(n) != want.get(n)
        ]

    def right() -> bool:
        return not wrong()

    _until(right, "A provisioned every key")
    rng = random.Random(10)
    b: Replica | None = None
    began = time.monotonic()
    rounds = 0
    while time.monotonic() - began < 14.0:
        for name in rng.sample(setup.names, 10):  # deleted and created again at once
            with contextlib.suppress(NotFound):
                client.delete(CONFIGMAPS, name, ns)
            body = {"metadata": {"name": name, "labels": {LABEL: "true"}}, "data": {"tick": "0"}}
            client.create(CONFIGMAPS, body, ns)
        rounds += 1
        if rounds == 2:
            b = setup.replica("rep-b", hold=0.05, writer=OwnedWriter).start()  # the ring moves
        time.sleep(0.7)
    assert b is not None
    with contextlib.suppress(AssertionError):
        _until(right, "every key with exactly its own owned object", timeout=30)
    assert wrong() == []
    assert any(e[0] == b.identity and e[4] == "provisioned" for e in setup.journal.entries)
    # two incarnations of one name did run on two replicas at once (else this tests nothing)
    by_name = Journal()
    by_name.entries = [(w, k.partition("@")[0], s, e, o) for w, k, s, e, o in setup.journal.entries]
    assert by_name.overlaps() != []
    assert setup.journal.overlaps() == []  # but never one incarnation
    checked, bad = shard_violations(
        setup.server.audit,
        ns,
        setup.ring,
        LEASE,
        writer=lambda rec: rec.resource == "configmaps" and rec.user.startswith("rep-"),
        key_hash=owner_hash,
    )
    assert checked > 0
    assert bad == []
