"""Chaos for sharding: three ``overseer run`` replicas share a sharded controller under
faults, with work going on, and the proof that every key had one writer at a time.

Each scenario starts a fresh :class:`ShardHarness`: the local API server in this process
(audit on), a namespace of labelled ConfigMaps, and replica processes running the
sharding test controller (``e2e/shard_plugin``) in *blind* mode — its write is a merge
patch without a resourceVersion, so a stale replica's write is refused by nothing but
its key's write fence — each behind its own :class:`~manager.testing.proxy.TcpProxy`
and with a token naming it. A supervisor keeps the wanted number of replicas (a replica
that exits is replaced by a new one, with a new name). A ticker edits keys all the time.

=========================  ===================================================================
``kill9``                  ``kill -9`` of a replica, three times
``sigstop``                a replica ``SIGSTOP``ped past its shard Lease, then woken (inside
                           reconciles that end with a blind write)
``join-leave``             a fourth replica joins under load, then one leaves (SIGTERM)
``stalled-watch``          one replica's watch of the ring's Leases stalls (bytes held,
                           connection open) for three lease durations
``deleted-lease``          ``kubectl delete lease`` of a replica's shard Lease
``drain-timeout``          a replica's writes take 7 s on the way and a join makes it drain
                           (drain timeout 0.2 s) with writes of moving keys on the wire
``apiserver-restart``      the API server restarted (2 s down, storage kept)
``recreate-ring-change``   keys deleted and created again at once (a new uid: placed anew)
                           while a fourth replica joins and one leaves; the controller in
                           *owned* mode (an owned ConfigMap per key, the deleted
                           incarnation's cleaned up by its last-known uid), the local
                           garbage collector 0.2 s late
=========================  ===================================================================

Invariants: no key written by two replicas within one span (the controller's journal:
reconciles that wrote, by two replicas, overlapping in time; in owned mode a key is an
incarnation, ``namespace/name@uid``); no write the audit attributes to a replica that did
not own the key then (``e2e/shardaudit.py``; an owned object is placed by its owner's
uid); every key converges after the faults (else: objects lost; in owned mode: every key
has exactly its owned object, controlled by its current uid, and no other is left);
recovery, from a fault to every key holding a tick issued at that moment (owned mode: from
the last re-creation to that end state).
"""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import yaml

from e2e.chaos import _wait
from e2e.replicapool import Exit, ReplicaPool
from e2e.shardaudit import journal_overlaps, owner_hash, read_journals, shard_violations
from manager.client import ClientOptions, KubeClient
from manager.errors import ApiError
from manager.resources import builtin
from manager.testing import LocalApiServer

__all__ = ["SHARD_SCENARIOS", "ShardResult", "run_shard_scenario"]

NAMESPACES = builtin("v1", "namespaces")
CONFIGMAPS = builtin("v1", "configmaps")
LEASES = builtin("coordination.k8s.io/v1", "leases")
SERVICE_ACCOUNTS = builtin("v1", "serviceaccounts")
SHARD_PLUGIN = Path(__file__).resolve().parent / "shard_plugin"
NAMESPACE = "shardchaos"
LABEL = "overseer-shard-test"
OWNED_LABEL = "overseer-shard-test-owned"
LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
SIZE = 3
KEYS = 60
CONVERGE = 45.0


class ShardHarness(ReplicaPool):
    """The local API server, the keys, and a set of sharded replicas."""

    def __init__(
        self,
        workdir: Path,
        *,
        fence: bool = True,
        drain_timeout: float = 5.0,
        workers: int = 4,
        owned: bool = False,
        preconditions: bool = True,
    ) -> None:
        super().__init__(LocalApiServer(), workdir, target=SIZE, fence=fence)
        self.workers = workers
        self.owned = owned  # the controller in owned mode (an owned ConfigMap per key)
        self.preconditions = preconditions  # owned mode: False drops the uid precondition
        if owned:
            self.server.gc.latency = 0.2  # a cleanup sometimes beats the collector
        self.drain_timeout = drain_timeout
        self.ring = f"chaos-{uuid.uuid4().hex[:6]}"
        self.journal = workdir / "journal"
        self.names = [f"key-{i}" for i in range(KEYS)]
        self._driver: KubeClient | None = None
        self._ticks = 0
        self._ticking = threading.Event()
        self._ticks_done = threading.Event()
        self._batch = threading.Lock()
        self._ticker: threading.Thread | None = None
        self._rng = random.Random(20)

    # lifecycle

    def start(self) -> ShardHarness:
        self.journal.mkdir(parents=True, exist_ok=True)
        self.server.start()
        self.server.audit.start()
        path = self.server.kubeconfig_for("chaos-driver", self.workdir / "driver.kubeconfig")
        self._driver = KubeClient.from_kubeconfig(
            str(path), options=ClientOptions(qps=0, max_retries=10, retry_max_wait=2.0)
        )
        self.client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        _wait(self._exists_sa, 30, "the default ServiceAccount")
        for name in self.names:
            body = {"metadata": {"name": name, "labels": {LABEL: "true"}}, "data": {"tick": "0"}}
            self.client.create(CONFIGMAPS, body, NAMESPACE)
        self.start_replicas()
        self.wait_ready()
        self._ticking.set()
        self._ticker = threading.Thread(target=self._tick_loop, name="chaos/ticker")
        self._ticker.start()
        return self

    def close(self) -> None:
        self._ticks_done.set()
        if self._ticker is not None:
            self._ticker.join(10)
        self.stop_replicas(20.0)
        if self._driver is not None:
            self._driver.close()
        self.server.stop()

    def __enter__(self) -> ShardHarness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def client(self) -> KubeClient:
        assert self._driver is not None
        return self._driver

    def _exists_sa(self) -> bool:
        try:
            self.client.get(SERVICE_ACCOUNTS, "default", NAMESPACE)
        except ApiError:
            return False
        return True

    # replicas

    def pick(self) -> str:
        return self._rng.choice(sorted(self.live()))

    def lease_of(self, name: str) -> str:
        """The shard Lease a replica holds (its identity begins with its name)."""
        leases = self.client.list(LEASES, NAMESPACE)["items"]
        for lease in leases:
            holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
            if holder.startswith(f"{name}_") and lease["metadata"]["name"].startswith(self.ring):
                return str(lease["metadata"]["name"])
        raise AssertionError(f"{name} holds no shard Lease")

    def wait_ready(self, timeout: float = 60.0) -> None:
        _wait(self.all_ready, timeout, f"{self.target} ready replicas", self.logs)

    def _plugins(self) -> tuple[Path, ...]:
        return (SHARD_PLUGIN,)

    def _config(self, name: str, health_port: int) -> Path:
        installed = {ep.name for ep in entry_points(group="overseer.controllers")}
        doc: dict[str, Any] = {
            "leaderElection": {"enabled": False},
            "sharding": {
                "ringName": self.ring,
                "namespace": NAMESPACE,
                "leaseDuration": LEASE,
                "renewDeadline": RENEW,
                "retryPeriod": RETRY,
                "drainTimeout": self.drain_timeout,
            },
            "client": {"qps": 200.0, "burst": 400},
            "metricsBindAddress": "0",
            "healthProbeBindAddress": f"127.0.0.1:{health_port}",
            "gracefulShutdownTimeout": 10.0,
            "watchNamespace": NAMESPACE,
            "log": {"format": "json", "level": "info"},
            "controllers": {
                **{n: {"enabled": False} for n in installed},
                "shardtest": {
                    "enabled": True,
                    "sharded": True,
                    "workers": self.workers,
                    "holdSeconds": 0.05 if self.owned else 0.2,
                    "blind": not self.owned,
                    "owned": self.owned,
                    "preconditions": self.preconditions,
                    "journal": str(self.journal),
                },
            },
        }
        path = self.workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc))
        return path

    # the workload

    def _tick_loop(self) -> None:
        """20 random keys edited every quarter second."""
        while not self._ticks_done.wait(0.25) and not self._stop.is_set():
            with self._batch:  # recovery() waits for a batch under way
                if not self._ticking.is_set():
                    continue
                for name in self._rng.sample(self.names, 20):
                    with contextlib.suppress(ApiError, OSError):
                        self._patch(name)

    def _patch(self, name: str) -> None:
        with self._lock:
            self._ticks += 1
            tick = f"t{self._ticks}"
        self.client.patch(CONFIGMAPS, name, {"data": {"tick": tick}}, namespace=NAMESPACE)

    def recovery(self, started: float) -> float:
        """Tick every key now; seconds from ``started`` until all of them hold it (the
        random ticks pause meanwhile, or they would overwrite it)."""
        self._ticking.clear()
        with self._batch:
            pass  # a batch of random ticks under way (retrying through an outage, say) ends
        try:
            return self._recovery(started)
        finally:
            if not self._ticks_done.is_set():
                self._ticking.set()

    def _recovery(self, started: float) -> float:
        tick = f"recover-{uuid.uuid4().hex[:6]}"
        for name in self.names:
            _wait(
                lambda n=name: self.client.patch(
                    CONFIGMAPS, n, {"data": {"tick": tick}}, namespace=NAMESPACE
                ),
                30,
                f"{name} ticked",
            )
        _wait(lambda: self._all_at(tick), 60, "every key reconciled", self.logs, step=0.05)
        return time.monotonic() - started

    def _all_at(self, tick: str) -> bool:
        items = self.client.list(CONFIGMAPS, NAMESPACE, label_selector=LABEL)["items"]
        return all(
            (i["metadata"].get("annotations") or {}).get("shard/tick") == tick for i in items
        )

    def recreate(self, names: list[str]) -> None:
        """Delete each key and create it again at once: a new object, a new uid."""
        for name in names:
            with contextlib.suppress(ApiError):
                self.client.delete(CONFIGMAPS, name, NAMESPACE)
            body = {"metadata": {"name": name, "labels": {LABEL: "true"}}, "data": {"tick": "0"}}
            self.client.create(CONFIGMAPS, body, NAMESPACE)

    def owned_wrong(self) -> list[str]:
        """Owned mode: keys without exactly their own owned object (controlled by their
        current uid), and owned objects of no live key."""
        keys = self.client.list(CONFIGMAPS, NAMESPACE, label_selector=LABEL)["items"]
        owned = self.client.list(CONFIGMAPS, NAMESPACE, label_selector=OWNED_LABEL)["items"]
        want = {f"{k['metadata']['name']}-owned": k["metadata"]["uid"] for k in keys}
        have = {}
        for o in owned:
            refs = o["metadata"].get("ownerReferences") or []
            have[o["metadata"]["name"]] = next(
                (str(r.get("uid")) for r in refs if r.get("controller")), ""
            )
        return [
            f"{n}: owned by {have.get(n, '(missing)')}, key is {want.get(n, '(gone)')}"
            for n in sorted(want.keys() | have.keys())
            if have.get(n) != want.get(n)
        ]

    def converged(self) -> bool:
        items = self.client.list(CONFIGMAPS, NAMESPACE, label_selector=LABEL)["items"]
        if self.owned:
            return len(items) == KEYS and not self.owned_wrong()
        return len(items) == KEYS and all(
            (i["metadata"].get("annotations") or {}).get("shard/tick")
            == (i.get("data") or {}).get("tick")
            for i in items
        )

    def stop_ticking(self) -> None:
        self._ticks_done.set()
        self._ticking.clear()

    # the proof

    def overlaps(self) -> list[str]:
        """Keys written by two replicas within one span: reconciles that wrote, by two
        replicas, overlapping in time."""
        entries = read_journals(self.journal)
        return journal_overlaps(e for e in entries if e["outcome"] == "written")

    def name_overlaps(self) -> list[str]:
        """As :meth:`overlaps`, by name only (two incarnations of one name are one key):
        what the re-used-name scenario must produce, or it tests nothing."""
        entries = read_journals(self.journal)
        return journal_overlaps(
            {**e, "uid": None} for e in entries if e["outcome"] in ("written", "waiting")
        )

    def violations(self) -> tuple[int, list[str]]:
        return shard_violations(
            self.server.audit,
            NAMESPACE,
            self.ring,
            LEASE,
            writer=lambda r: r.user.startswith("replica-") and r.resource == "configmaps",
            key_hash=owner_hash,  # an owned object is its owner's key
        )


# -- scenarios ----------------------------------------------------------------------------


@dataclass
class ShardResult:
    name: str
    fence: bool = True
    faults: int = 0
    writes: int = 0
    overlaps: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    recovery: list[float] = field(default_factory=list)
    exits: list[Exit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    preconditions: bool = True  # owned mode: False ran with the uid preconditions off
    name_overlaps: int = 0  # owned mode: keys (by name) two replicas worked on at once

    @property
    def ok(self) -> bool:
        return not (self.overlaps or self.violations or self.lost or self.notes)


def _kill9(h: ShardHarness, r: ShardResult) -> None:
    for _ in range(3):
        victim = h.pick()
        started = time.monotonic()
        h.signal(victim, signal.SIGKILL, expected="kill")
        h.wait_exit(victim, 10)
        r.faults += 1
        r.recovery.append(h.recovery(started))
        h.wait_ready()


def _sigstop(h: ShardHarness, r: ShardResult) -> None:
    victim = h.pick()
    time.sleep(1.0)
    started = time.monotonic()
    h.signal(victim, signal.SIGSTOP, expected="stop")
    r.faults += 1
    r.recovery.append(h.recovery(started))
    time.sleep(max(0.0, LEASE + 2.0 - (time.monotonic() - started)))
    h.signal(victim, signal.SIGCONT, expected="stop")
    code = h.wait_exit(victim, 20)
    if code != 1:
        r.notes.append(f"{victim} woke after losing its shard Lease and exited {code}, not 1")
    h.wait_ready()


def _join_leave(h: ShardHarness, r: ShardResult) -> None:
    started = time.monotonic()
    joined = h.join()
    r.faults += 1
    h.wait_ready()
    r.recovery.append(h.recovery(started))
    leaving = next(n for n in sorted(h.live()) if n != joined)
    started = time.monotonic()
    code = h.leave(leaving)
    r.faults += 1
    if code != 0:
        r.notes.append(f"{leaving} left with exit {code}, not 0")
    r.recovery.append(h.recovery(started))


def _stalled_watch(h: ShardHarness, r: ShardResult) -> None:
    victim = h.pick()
    stall = h.proxy(victim).hold_responses(
        rb"GET /apis/coordination\.k8s\.io/v1/namespaces/[^/]+/leases\?[^ ]*watch="
    )
    started = time.monotonic()
    r.faults += 1
    time.sleep(3 * LEASE)
    stall.release()
    r.recovery.append(h.recovery(started))


def _deleted_lease(h: ShardHarness, r: ShardResult) -> None:
    victim = h.pick()
    lease = h.lease_of(victim)
    h.expect(victim, "lease deleted")
    started = time.monotonic()
    h.client.delete(LEASES, lease, NAMESPACE)
    r.faults += 1
    code = h.wait_exit(victim, 15)
    if code != 1:
        r.notes.append(f"{victim} lost its shard Lease object and exited {code}, not 1")
    with contextlib.suppress(ApiError):
        h.client.get(LEASES, lease, NAMESPACE)
        r.notes.append(f"{victim}'s deleted shard Lease was created again")
    r.recovery.append(h.recovery(started))
    h.wait_ready()


def _drain_timeout(h: ShardHarness, r: ShardResult) -> None:
    slow_one = h.pick()
    # longer than a lease duration: a late write lands after the newcomer (which starts
    # keys a lease duration after it began to watch) wrote the key, unless abandoned
    slow = h.proxy(slow_one).delay_requests(
        rb"PATCH /api/v1/namespaces/[^/]+/configmaps/", LEASE + 4.0
    )
    time.sleep(1.5)
    started = time.monotonic()
    h.join()  # every member drains keys to the newcomer, the slow one with writes on the wire
    r.faults += 1
    h.wait_ready()
    time.sleep(LEASE + 5.0)
    slow.release()
    r.recovery.append(h.recovery(started))


def _apiserver_restart(h: ShardHarness, r: ShardResult) -> None:
    time.sleep(1.0)
    for name in h.live():
        h.expect(name, "outage")  # 2 s down = the renew deadline: a replica may lose
    started = time.monotonic()
    h.server.restart(downtime=2.0)
    r.faults += 1
    r.recovery.append(h.recovery(started))
    h.wait_ready()


def _recreate_ring_change(h: ShardHarness, r: ShardResult) -> None:
    """Ten keys deleted and created again at once every 0.7 s for 16 s; a fourth replica
    joins after 2 s and one leaves after 9 s (two ring changes under the re-creations)."""
    rng = random.Random(11)
    began = time.monotonic()
    joined = left = False
    while time.monotonic() - began < 16.0:
        h.recreate(rng.sample(h.names, 10))
        r.faults += 1
        elapsed = time.monotonic() - began
        if not joined and elapsed > 2.0:
            threading.Thread(target=h.join, name="chaos/join").start()
            joined = True
        if not left and elapsed > 9.0 and len(h.live()) > SIZE:
            leaving = sorted(h.live())[0]
            threading.Thread(target=h.leave, args=(leaving,), name="chaos/leave").start()
            left = True
        time.sleep(0.7)
    started = time.monotonic()
    _wait(h.converged, CONVERGE, "every key with exactly its own owned object", h.logs)
    r.recovery.append(time.monotonic() - started)


@dataclass(frozen=True)
class ShardScenario:
    name: str
    run: Callable[[ShardHarness, ShardResult], None]
    drain_timeout: float = 5.0
    workers: int = 4  # per replica; more where many writes must be in flight at once
    owned: bool = False  # the controller in owned mode (re-used names)


SHARD_SCENARIOS: dict[str, ShardScenario] = {
    s.name: s
    for s in (
        ShardScenario("kill9", _kill9),
        ShardScenario("sigstop", _sigstop, workers=16),
        ShardScenario("join-leave", _join_leave),
        ShardScenario("stalled-watch", _stalled_watch),
        ShardScenario("deleted-lease", _deleted_lease),
        ShardScenario("drain-timeout", _drain_timeout, drain_timeout=0.2, workers=16),
        ShardScenario("apiserver-restart", _apiserver_restart),
        ShardScenario("recreate-ring-change", _recreate_ring_change, owned=True),
    )
}


def run_shard_scenario(
    name: str, workdir: Path, *, fence: bool = True, preconditions: bool = True
) -> ShardResult:
    """Run one sharding scenario in a fresh harness (``fence=False``: the test-only
    switch that turns the write fence off in every replica; ``preconditions=False``: the
    owned-mode controller deletes without its uid precondition)."""
    scenario = SHARD_SCENARIOS[name]
    result = ShardResult(name, fence=fence, preconditions=preconditions)
    began = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    with ShardHarness(
        workdir,
        fence=fence,
        drain_timeout=scenario.drain_timeout,
        workers=scenario.workers,
        owned=scenario.owned,
        preconditions=preconditions,
    ) as h:
        time.sleep(2.0)  # at work before the first fault
        try:
            scenario.run(h, result)
        except AssertionError as exc:
            result.notes.append(str(exc))
        h.stop_ticking()
        time.sleep(0.5)
        try:
            _wait(h.converged, CONVERGE, "convergence")
        except AssertionError:
            result.lost = h.owned_wrong() if h.owned else ["not converged"]
            result.lost = result.lost or ["not converged"]
        result.overlaps = h.overlaps()
        if h.owned:
            result.name_overlaps = len(h.name_overlaps())
        result.writes, result.violations = h.violations()
        result.exits = list(h.exits)
        result.notes.extend(
            f"{e.name} exited {e.code} on its own" for e in h.exits if not e.expected
        )
        if not result.ok:
            result.notes.append(h.logs())
    result.seconds = time.monotonic() - began
    return result
