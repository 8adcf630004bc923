"""Chaos: three ``overseer run`` replicas under faults, with work going on, and the proof
that exactly one of them wrote at any moment.

Each scenario starts a fresh :class:`Harness`: the local API server in this process
(audit on, so every applied write is recorded with its writer and the Lease holder at
that moment), a namespace, the LogicalPort CRD, and three replica processes, each behind
its own :class:`~manager.testing.proxy.TcpProxy` and with a token naming it. A supervisor
plays the Deployment: a replica that exits is replaced by a new one (a new name). A
:class:`Workload` keeps creating and editing opted-in Deployments and creating and
deleting pods while the scenario injects its faults:

=============================  ==============================================================
``kill9-leader-x10``           10 consecutive ``kill -9`` of whichever replica leads
``sigstop-leader``             the leader ``SIGSTOP``ped for lease + 2 s, then ``SIGCONT``ed
``apiserver-restart``          the API server restarted mid-burst (2 s down, storage kept)
``drop-watches``               every watch dropped, three times
``compaction``                 history compacted and watches dropped: every re-watch is a 410
``partition-leader``           the leader cut off from the API server for renew deadline + 2 s
``slow-reconcile-rolling``     a rolling restart while the leader is inside a 6 s reconcile
                               and the graceful shutdown timeout is 2 s
``sigstop-blind-write``        the leader paused inside reconciles that end with a blind write
``sigstop-held-writes``        the leader's writes held on the wire while it is paused
``reset-after-commit``         20 of the leader's creates committed, their answers lost (the
                               connection reset): LogicalPorts, Services, Ingresses, Events,
                               the HA test controller's ``generateName`` records
``sigstop-event-pipeline``     the API server at 80 ms a request, a burst of 96 Deployments
                               (an Event each); the leader paused for lease + 2 s with a
                               pipeline of Event creates on the wire
=============================  ==============================================================

Invariants, checked during the run and at the end:

* **zero writes by a replica that did not hold the Lease when the write was applied**
  (from the server's audit; the election's own Lease writes excepted);
* **zero duplicates**: nothing made twice where once was asked for (:func:`duplicates`:
  a pod with two LogicalPorts at once, a Deployment exposed twice, one replica's Event
  written twice, a test controller's ``generateName`` record made twice);
* every opted-in Deployment ends exposed exactly once (its Service and Ingress, controlled
  by it), every live pod holds exactly one LogicalPort whose address it carries, no
  address on two pods (also checked every half second during the run), no orphan port;
  anything not so within the convergence timeout counts as an object lost;
* the time to recovery: from each fault to the exposure of a Deployment created at the
  moment of the fault (a user's view of "the controllers act again").

``python -m e2e.chaos [--runs N] [--scenario NAME ...] [--report e2e/CHAOS.md]`` runs them
and writes the table; ``--fence-off-runs N`` runs each again with the write fence off
(``e2e/unfenced.py``), ``--resending-runs N`` those that lose writes' answers with the
client's old resend (``e2e/resending.py``). ``e2e/test_chaos.py`` runs each once in the
test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import platform
import random
import signal
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from controllers.podport.crd import install_crd
from e2e.processes import HA_PLUGIN
from e2e.replicapool import Exit, ReplicaPool
from e2e.shardaudit import leader_violations

if TYPE_CHECKING:
    from e2e.shardchaos import ShardResult
from apiserver.http.audit import Audit, AuditRecord
from e2e.targets import LOGICAL_PORTS
from manager.client import ClientOptions, KubeClient
from manager.errors import ApiError, NotFound
from manager.resources import builtin
from manager.testing import LocalApiServer

__all__ = ["SCENARIOS", "Harness", "ScenarioResult", "run_scenario"]

NAMESPACES = builtin("v1", "namespaces")
LEASES = builtin("coordination.k8s.io/v1", "leases")
DEPLOYMENTS = builtin("apps/v1", "deployments")
PODS = builtin("v1", "pods")
SERVICES = builtin("v1", "services")
INGRESSES = builtin("networking.k8s.io/v1", "ingresses")
CONFIGMAPS = builtin("v1", "configmaps")
EVENTS = builtin("v1", "events")
SERVICE_ACCOUNTS = builtin("v1", "serviceaccounts")

NAMESPACE = "chaos"
LEASE_NAME = "chaos-leader"
NETWORK, CIDR = "chaos", "10.252.0.0/22"
LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
SIZE = 3
EXPOSE = "overseer.io/expose"
PORT_NAME, PORT_IP = "overseer.io/logical-port", "overseer.io/ip"
HA_LABEL = "overseer-ha-test"
RECORD_OF, RECORD_TICK = "ha-record-of", "ha-record-tick"  # the HA test controller's records
CONVERGE = 45.0  # seconds the controllers get to settle after the workload stops
RECOVER = 30.0  # seconds a probe Deployment may take to be exposed


# -- the harness --------------------------------------------------------------------------


class Harness(ReplicaPool):
    """The local API server, one namespace, and a Deployment-like set of replicas."""

    def __init__(
        self,
        workdir: Path,
        *,
        grace: float = 5.0,
        hold_seconds: float | None = None,
        blind: bool = False,
        records: bool = False,
        exposer_workers: int = 2,
        fence: bool = True,
        resending: bool = False,
    ) -> None:
        super().__init__(LocalApiServer(), workdir, target=SIZE, fence=fence, resending=resending)
        self.grace = grace
        self.hold_seconds = hold_seconds
        self.blind = blind
        self.records = records
        self.exposer_workers = exposer_workers
        self.driver: KubeClient | None = None

    # lifecycle

    def start(self) -> Harness:
        self.server.start()
        self.server.audit.start()
        path = self.server.kubeconfig_for("chaos-driver", self.workdir / "driver.kubeconfig")
        self.driver = KubeClient.from_kubeconfig(
            str(path), options=ClientOptions(qps=0, max_retries=10, retry_max_wait=2.0)
        )
        self.driver.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        _wait(lambda: _exists(self.client, SERVICE_ACCOUNTS, "default", NAMESPACE), 30, "SA")
        install_crd(self.client)  # before the replicas: they only read it (installCrd: false)
        self.start_replicas()
        self.wait_ready()
        return self

    def close(self) -> None:
        self.stop_replicas(self.grace + 10)
        if self.driver is not None:
            self.driver.close()
        self.server.stop()

    def __enter__(self) -> Harness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def client(self) -> KubeClient:
        assert self.driver is not None
        return self.driver

    # replicas

    def replicas(self) -> list[str]:
        return self.live()

    def _plugins(self) -> tuple[Path, ...]:
        return (HA_PLUGIN,) if self.hold_seconds is not None else ()

    def leader(self) -> str | None:
        try:
            lease = self.client.get(LEASES, LEASE_NAME, NAMESPACE)
        except NotFound:
            return None
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        return next((n for n in self.replicas() if holder.startswith(f"{n}_")), None)

    def wait_leader(self, timeout: float = 30.0, other_than: str | None = None) -> str:
        found: str = _wait(
            lambda: lead if (lead := self.leader()) not in (None, other_than) else None,
            timeout,
            "a leading replica",
            self.logs,
        )
        return found

    def wait_ready(self, timeout: float = 60.0) -> None:
        _wait(self.all_ready, timeout, f"{SIZE} ready replicas", self.logs)
        self.wait_leader()

    def _config(self, name: str, health_port: int) -> Path:
        installed = {ep.name for ep in entry_points(group="overseer.controllers")}
        controllers: dict[str, Any] = {n: {"enabled": False} for n in installed}
        controllers["exposer"] = {"enabled": True, "workers": self.exposer_workers}
        controllers["podport"] = {
            "enabled": True,
            "workers": 2,
            "networks": [{"name": NETWORK, "cidr": CIDR}],
            "defaultNetwork": NETWORK,
            "gcInterval": 2.0,
        }
        if self.hold_seconds is not None:
            controllers["hatest"] = {
                "enabled": True,
                "holdSeconds": self.hold_seconds,
                "leaseName": LEASE_NAME,
                "leaseNamespace": NAMESPACE,
                "blind": self.blind,
                "records": self.records,
                "workers": 16 if self.blind else 1,
            }
        doc = {
            "leaderElection": {
                "enabled": True,
                "namespace": NAMESPACE,
                "leaseName": LEASE_NAME,
                "leaseDuration": LEASE,
                "renewDeadline": RENEW,
                "retryPeriod": RETRY,
            },
            "client": {"qps": 200.0, "burst": 400},
            "metricsBindAddress": "0",
            "healthProbeBindAddress": f"127.0.0.1:{health_port}",
            "gracefulShutdownTimeout": self.grace,
            "watchNamespace": NAMESPACE,
            "log": {"format": "json", "level": "info"},
            "controllers": controllers,
        }
        path = self.workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc))
        return path

    # the audit

    def writes_by_non_holders(self) -> list[str]:
        """Every write a replica made while it did not hold the Lease (when applied):
        while another held it, or while nobody did (released, expired into a takeover)."""
        audit = self.server.audit
        bad = leader_violations(
            audit,
            NAMESPACE,
            LEASE_NAME,
            writer=lambda r: r.user.startswith("replica-") and not _election_write(r),
        )
        for r in audit.records():
            if not r.user.startswith("replica-") or _election_write(r):
                continue
            if not audit.lease_holder(NAMESPACE, LEASE_NAME, r.revision):
                bad.append(
                    f"{r.user} {r.verb} {r.resource} {r.namespace}/{r.name} at revision "
                    f"{r.revision} while nobody held the Lease"
                )
        return bad

    def replica_writes(self) -> int:
        return sum(
            1
            for r in self.server.audit.records()
            if r.user.startswith("replica-") and not _election_write(r)
        )

    def released_by(self, name: str) -> bool:
        """Whether a Lease holder of this replica ever handed the Lease back (holder "")."""
        history = self.server.audit.lease_history(NAMESPACE, LEASE_NAME)
        return any(
            prev.startswith(f"{name}_") and now == ""
            for (_, prev), (_, now) in itertools.pairwise(history)
        )


def _election_write(record: AuditRecord) -> bool:
    return record.resource == "leases" and record.name == LEASE_NAME


# -- the workload -------------------------------------------------------------------------


class Workload:
    """Deployments created and edited, pods created and deleted, at ``rate`` per second;
    and an invariant watch that checks, every half second, that no address is on two
    live pods and no pod holds two LogicalPorts at once (:attr:`doubled`)."""

    def __init__(self, client: KubeClient, *, rate: float = 25.0, seed: int = 0) -> None:
        self.client = client
        self.rate = rate
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.deployments: list[str] = []
        self.pods: list[str] = []
        self.errors: Counter[str] = Counter()
        self.violations: list[str] = []
        self.doubled: dict[str, int] = {}  # pod uid -> most LogicalPorts it held at once
        self._n = 0
        self._threads = [
            threading.Thread(target=self._run, name="chaos/workload"),
            threading.Thread(target=self._watch, name="chaos/invariants"),
        ]

    def __enter__(self) -> Workload:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(30)

    def deployment(self, name: str) -> None:
        labels = {"app": name}
        ports = [{"name": "http", "containerPort": 8080}]
        body = {
            "metadata": {"name": name, "annotations": {EXPOSE: "true"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "pause", "ports": ports}]},
                },
            },
        }
        self.client.create(DEPLOYMENTS, body, NAMESPACE)

    def _step(self) -> None:
        self._n += 1
        roll = self.rng.random()
        if roll < 0.3 and len(self.deployments) < 80:
            name = f"dep-{self._n}"
            self.deployment(name)
            self.deployments.append(name)
        elif roll < 0.5 and self.deployments:
            name = self.rng.choice(self.deployments)
            port = self.rng.choice([8080, 8081, 9090])
            patch = {
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "pause",
                                    "ports": [{"name": "http", "containerPort": port}],
                                }
                            ]
                        }
                    }
                }
            }
            self.client.patch(DEPLOYMENTS, name, patch, namespace=NAMESPACE)
        elif roll < 0.8 and len(self.pods) < 120:
            name = f"pod-{self._n}"
            body = {
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "p"}]},
            }
            self.client.create(PODS, body, NAMESPACE)
            self.pods.append(name)
        elif self.pods:
            name = self.pods.pop(self.rng.randrange(len(self.pods)))
            with contextlib.suppress(NotFound):
                self.client.delete(PODS, name, NAMESPACE, grace_period_seconds=0)

    def _run(self) -> None:
        while not self.stop.wait(1.0 / self.rate):
            try:
                self._step()
            except (ApiError, OSError) as exc:  # the API server restarting, say
                self.errors[type(exc).__name__] += 1

    def _watch(self) -> None:
        while not self.stop.wait(0.5):
            try:
                pods = self.client.list(PODS, NAMESPACE)["items"]
            except ApiError:
                continue
            held = Counter(
                (p["metadata"].get("annotations") or {}).get(PORT_IP)
                for p in pods
                if not p["metadata"].get("deletionTimestamp")
            )
            for ip, n in held.items():
                if ip and n > 1:
                    self.violations.append(f"address {ip} on {n} live pods at {time.time():.3f}")
            try:
                ports = self.client.list(LOGICAL_PORTS)["items"]
            except ApiError:
                continue
            per_pod = Counter(
                p["spec"].get("podUID") for p in ports if p["spec"].get("podNamespace") == NAMESPACE
            )
            for uid, n in per_pod.items():
                if uid and n > 1:
                    self.doubled[uid] = max(n, self.doubled.get(uid, 0))


# -- invariants at rest -------------------------------------------------------------------


def problems(client: KubeClient) -> list[str]:
    """Everything in the namespace that is not as the controllers should leave it."""
    out: list[str] = []
    for dep in client.list(DEPLOYMENTS, NAMESPACE)["items"]:
        name, uid = dep["metadata"]["name"], dep["metadata"]["uid"]
        if (dep["metadata"].get("annotations") or {}).get(EXPOSE) != "true":
            continue
        for resource in (SERVICES, INGRESSES):
            try:
                obj = client.get(resource, name, NAMESPACE)
            except NotFound:
                out.append(f"{name}: no {resource.kind}")
                continue
            owners = obj["metadata"].get("ownerReferences") or []
            if not any(o.get("controller") and o.get("uid") == uid for o in owners):
                out.append(f"{name}: {resource.kind} not controlled by it")
        with contextlib.suppress(NotFound):
            service = client.get(SERVICES, name, NAMESPACE)
            want = {
                p["containerPort"]
                for c in dep["spec"]["template"]["spec"]["containers"]
                for p in c.get("ports") or []
            }
            have = {p.get("targetPort") for p in service["spec"].get("ports") or []}
            if want != have:
                out.append(f"{name}: Service ports {sorted(have)} != {sorted(want)}")
    pods = [
        p
        for p in client.list(PODS, NAMESPACE)["items"]
        if not p["metadata"].get("deletionTimestamp")
    ]
    ports: dict[str, list[dict[str, Any]]] = {}
    for port in client.list(LOGICAL_PORTS)["items"]:
        if port["spec"].get("podNamespace") == NAMESPACE:
            ports.setdefault(port["spec"]["podUID"], []).append(port)
    for pod in pods:
        meta = pod["metadata"]
        mine = ports.get(meta["uid"], [])
        if len(mine) != 1:
            out.append(f"pod {meta['name']}: {len(mine)} LogicalPorts")
            continue
        ann = meta.get("annotations") or {}
        if (ann.get(PORT_NAME), ann.get(PORT_IP)) != (
            mine[0]["metadata"]["name"],
            mine[0]["spec"]["ip"],
        ):
            out.append(f"pod {meta['name']}: annotations do not name its port")
    live = {p["metadata"]["uid"] for p in pods}
    out.extend(
        f"orphan LogicalPort {p['metadata']['name']}"
        for uid, owned in ports.items()
        if uid not in live
        for p in owned
    )
    held = Counter((p["metadata"].get("annotations") or {}).get(PORT_IP) for p in pods)
    out.extend(f"address {ip} on {n} pods" for ip, n in held.items() if ip and n > 1)
    for cm in client.list(CONFIGMAPS, NAMESPACE, label_selector=f"{HA_LABEL}=true")["items"]:
        ann = cm["metadata"].get("annotations") or {}
        if ann.get("ha/violation"):
            out.append(f"{cm['metadata']['name']}: {ann['ha/violation']}")
        if ann.get("ha/tick") != (cm.get("data") or {}).get("tick"):
            out.append(f"{cm['metadata']['name']}: tick not reconciled")
    return out


def duplicates(client: KubeClient, doubled: dict[str, int], audit: Audit) -> list[str]:
    """Everything the replicas made twice where once was asked for:

    * a pod that held two LogicalPorts at once (at rest, or in the workload's samples
      every half second: ``doubled``);
    * a Deployment exposed twice (two Services or two Ingresses controlled by it);
    * an Event written twice: two Event objects created by one replica (the audit's
      writer of each create: one process; the Events themselves do not say which) for
      the same involved object (by uid), type, reason and message. One replica's Event
      sender writes one object per such key and counts repeats on it (``count``), so a
      second object is a create that went out twice or an occurrence the sender lost
      track of; Events of different replicas for one object (a new leader reconciling
      it again) are not duplicates;
    * a tick the HA test controller recorded twice (its ``records`` mode: a create with
      ``generateName``, which nothing on the server refuses twice).

    Built-in controllers' creates carry fixed names (a Deployment's, an address's, an
    Event's ``<object>.<nanoseconds>``): a create sent twice is an ``AlreadyExists`` the
    second time, which they take as theirs, so only a create with ``generateName`` can
    show a replayed create as a second object."""
    out: list[str] = []
    ports = Counter(
        p["spec"].get("podUID")
        for p in client.list(LOGICAL_PORTS)["items"]
        if p["spec"].get("podNamespace") == NAMESPACE
    )
    held = {uid: n for uid, n in ports.items() if uid and n > 1}
    for uid, n in doubled.items():
        held[uid] = max(n, held.get(uid, 0))
    out.extend(f"pod {uid}: {n} LogicalPorts at once" for uid, n in sorted(held.items()))
    for resource in (SERVICES, INGRESSES):
        controlled = Counter(
            o.get("uid")
            for obj in client.list(resource, NAMESPACE)["items"]
            for o in obj["metadata"].get("ownerReferences") or []
            if o.get("controller")
        )
        out.extend(
            f"Deployment {uid}: {n} {resource.kind}s" for uid, n in controlled.items() if n > 1
        )
    creators = {
        r.name: r.user for r in audit.records() if r.resource == "events" and r.verb == "create"
    }
    events = Counter(
        (
            creators.get(e["metadata"]["name"], ""),
            (e.get("involvedObject") or {}).get("uid") or "",
            e.get("type"),
            e.get("reason"),
            e.get("message"),
        )
        for e in client.list(EVENTS, NAMESPACE)["items"]
    )
    out.extend(
        f"{who}: {n} Events {reason!r} for {uid}: {message!r}"
        for (who, uid, _, reason, message), n in events.items()
        if n > 1
    )
    records = Counter(
        (labels.get(RECORD_OF), labels.get(RECORD_TICK))
        for cm in client.list(CONFIGMAPS, NAMESPACE, label_selector=RECORD_OF)["items"]
        for labels in [cm["metadata"].get("labels") or {}]
    )
    out.extend(
        f"{of}: tick {tick} recorded {n} times" for (of, tick), n in records.items() if n > 1
    )
    return out


# -- scenarios ----------------------------------------------------------------------------


@dataclass
class ScenarioResult:
    name: str
    recovery: list[float] = field(default_factory=list)  # seconds, one per fault
    failover: list[float] = field(default_factory=list)  # seconds from a kill to a new holder
    non_holder_writes: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)  # see duplicates()
    lost: list[str] = field(default_factory=list)
    during: list[str] = field(default_factory=list)
    replica_writes: int = 0
    faults: int | None = None  # None: one per recovery measured
    exits: list[Exit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)  # what the run measured besides (printed)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not (
            self.non_holder_writes or self.duplicates or self.lost or self.during or self.notes
        )

    @property
    def fault_count(self) -> int:
        return len(self.recovery) if self.faults is None else self.faults


class _Probes:
    def __init__(self, harness: Harness, workload: Workload) -> None:
        self.harness = harness
        self.workload = workload
        self.n = 0

    def recovery(self, started: float) -> float:
        """Create a Deployment now; seconds from ``started`` until it is exposed."""
        self.n += 1
        name = f"probe-{self.n}"
        self.workload.deployment(name)
        client = self.harness.client
        _wait(
            lambda: (
                _exists(client, SERVICES, name, NAMESPACE)
                and _exists(client, INGRESSES, name, NAMESPACE)
            ),
            RECOVER,
            f"{name} exposed",
            self.harness.logs,
            step=0.02,
        )
        return time.monotonic() - started


def _kill9_x10(h: Harness, probes: _Probes, result: ScenarioResult) -> None:
    for _ in range(10):
        leader = h.wait_leader()
        started = time.monotonic()
        h.signal(leader, signal.SIGKILL, expected="kill")
        h.wait_exit(leader, 10)

        def measure(started: float = started) -> None:
            try:
                result.recovery.append(probes.recovery(started))
            except AssertionError as exc:
                result.notes.append(str(exc))

        probe = threading.Thread(target=measure, name="chaos/probe")
        probe.start()
        h.wait_leader(other_than=leader)
        result.failover.append(time.monotonic() - started)
        probe.join(RECOVER + 5)
        h.wait_ready()


def _sigstop(h: Harness, probes: _Probes, result: ScenarioResult) -> None:
    leader = h.wait_leader()
    time.sleep(1.0)  # busy: the workload keeps it writing
    started = time.monotonic()
    h.signal(leader, signal.SIGSTOP, expected="stop")
    result.recovery.append(probes.recovery(started))
    time.sleep(max(0.0, LEASE + 2.0 - (time.monotonic() - started)))
    h.signal(leader, signal.SIGCONT, expected="stop")
    code = h.wait_exit(leader, 15)
    if code != 1:
        result.notes.append(f"{leader} woke after losing the Lease and exited {code}, not 1")
    h.wait_ready()


def _apiserver_restart(h: Harness, probes: _Probes, result: ScenarioResult) -> None:
    time.sleep(1.0)
    leader = h.wait_leader()
    h.expect(leader, "outage")  # 2 s down = the renew deadline: it may lose the Lease
    started = time.monotonic()
    h.server.restart(downtime=2.0)
    result.recovery.append(probes.recovery(started))
    h.wait_ready()


def _drop_watches(h: Harness, probes: _Probes, result: ScenarioResult) -> None:
    for _ in range(3):
        time.sleep(1.0)
        started = time.monotonic()
        h.server.faults.drop_watches()
        result.recovery.append(probes.recovery(started))


def _compaction(h: Harness, probes: _Probes, result: ScenarioResult) -> None:
    time.sleep(1.0)
    started = time.monotonic()
    h.server.compact()
    h.server.faults.drop_watches()  # every re-watch starts from a compacted version: 410
    result.recovery.append(probes.recovery(started))


def _partition(h: Harness, probes: _Probes, result: ScenarioResult) -> None:
    leader = h.wait_leader()
    time.sleep(1.0)
    started = time.monotonic()
    proxy = h.proxy(leader)
    h.expect(leader, "partition")
    proxy.block()
    try:
        result.recovery.append(probes.recovery(started))
        time.sleep(max(0.0, RENEW + 2.0 - (time.monotonic() - started)))
    finally:
        proxy.unblock()  # what it sent meanwhile now reaches the server
    code = h.wait_exit(leader, 15)
    if code != 1:
        result.notes.append(f"{leader} cut off past its renew deadline exited {code}, not 1")
    h.wait_ready()


def _slow_rolling(h: Harness, probes: _Probes, result: ScenarioResult) -> None:
    client = h.client
    names = [f"slow-{i}" for i in range(3)]
    for name in names:
        body = {"metadata": {"name": name, "labels": {HA_LABEL: "true"}}, "data": {"tick": "0"}}
        client.create(CONFIGMAPS, body, NAMESPACE)
    ticker_stop = threading.Event()

    def tick() -> None:
        """Give the leader the next slow reconcile as soon as one is done, so that it is
        nearly always inside a 6 s reconcile."""
        n = 0
        while not ticker_stop.wait(0.2):
            for name in names:
                with contextlib.suppress(ApiError):
                    cm = client.get(CONFIGMAPS, name, NAMESPACE)
                    ann = cm["metadata"].get("annotations") or {}
                    tick = (cm.get("data") or {}).get("tick")
                    if ann.get("ha/tick") == tick and not ann.get("ha/inflight"):
                        n += 1
                        patch = {"data": {"tick": str(n)}}
                        client.patch(CONFIGMAPS, name, patch, namespace=NAMESPACE)

    def inside(leader: str) -> bool:
        for name in names:
            ann = client.get(CONFIGMAPS, name, NAMESPACE)["metadata"].get("annotations") or {}
            if str(ann.get("ha/inflight") or "").startswith(f"{leader}_"):
                return True
        return False

    ticker = threading.Thread(target=tick, name="chaos/ticker")
    ticker.start()
    try:
        for name in h.replicas():
            leading = h.leader() == name
            if leading:  # SIGTERM it inside a slow reconcile: the drain must overrun
                _wait(lambda n=name: inside(n), 30, f"{name} inside a slow reconcile", h.logs)
            started = time.monotonic()
            h.signal(name, signal.SIGTERM, expected="term")
            code = h.wait_exit(name, h.grace + 10)
            if leading:
                if code != 1:
                    result.notes.append(f"leader {name} overran the drain and exited {code}")
                if h.released_by(name):
                    result.notes.append(f"leader {name} released the Lease though it overran")
                result.recovery.append(probes.recovery(started))
            elif code != 0:
                result.notes.append(f"standby {name} exited {code} after SIGTERM")
            h.wait_ready()
    finally:
        ticker_stop.set()
        ticker.join(10)


class _Ticking:
    """``n`` ConfigMaps for the HA test controller, each edited every second: with a blind
    controller holding each for a second, the leader's workers are nearly always inside
    reconciles that end with a write. (Faster ticks only load the API server: a server
    that lags behind its clients by more than lease - renew deadline is the residual
    window, not a test of the fence.)"""

    def __init__(self, h: Harness, n: int = 24) -> None:
        self.client = h.client
        self.names = [f"blind-{i}" for i in range(n)]
        for name in self.names:
            body = {"metadata": {"name": name, "labels": {HA_LABEL: "true"}}, "data": {"tick": "0"}}
            self.client.create(CONFIGMAPS, body, NAMESPACE)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="chaos/ticker")

    def __enter__(self) -> _Ticking:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)

    def _run(self) -> None:
        n = 0
        while not self.stop.wait(1.0):
            n += 1
            for name in self.names:
                with contextlib.suppress(ApiError, OSError):
                    patch = {"data": {"tick": str(n)}}
                    self.client.patch(CONFIGMAPS, name, patch, namespace=NAMESPACE)


def _wrote(h: Harness, name: str) -> bool:
    return any(r.resource == "configmaps" for r in h.server.audit.records(name))


def _sigstop_blind(h: Harness, probes: _Probes, result: ScenarioResult) -> None:
    """SIGSTOP inside reconciles that end with a blind write: once woken, each of the
    leader's sixteen workers finishes its reconcile and writes at once — after the
    takeover — racing the process's own exit (it notices the loss at the same moment).
    Only the fence refuses those writes deterministically."""
    with _Ticking(h):
        leader = h.wait_leader()
        _wait(lambda: _wrote(h, leader), 30, f"{leader} writing", h.logs)
        time.sleep(1.5)  # every worker inside a 1 s hold
        started = time.monotonic()
        h.signal(leader, signal.SIGSTOP, expected="stop")
        result.recovery.append(probes.recovery(started))
        time.sleep(max(0.0, LEASE + 2.0 - (time.monotonic() - started)))
        h.signal(leader, signal.SIGCONT, expected="stop")
        code = h.wait_exit(leader, 15)
        if code != 1:
            result.notes.append(f"{leader} woke after losing the Lease and exited {code}, not 1")
        h.wait_ready()


def _sigstop_held(h: Harness, probes: _Probes, result: ScenarioResult) -> None:
    """The leader's writes are held on the wire (its proxy keeps them), then it is paused
    past its Lease; after the takeover it is woken and, a second later, the proxy lets
    the held writes go. None may be applied: their connections have closed by then (the
    fence cut their timeouts to the Lease's validity)."""
    with _Ticking(h):
        leader = h.wait_leader()
        _wait(lambda: _wrote(h, leader), 30, f"{leader} writing", h.logs)
        held = h.proxy(leader).delay_requests(
            rb"^(POST|PUT|PATCH|DELETE) /(api/|apis/(?!coordination\.k8s\.io/))", 3600.0
        )
        _wait(lambda: held.matched >= 3, 30, "writes held on the wire", h.logs)
        started = time.monotonic()
        h.signal(leader, signal.SIGSTOP, expected="stop")
        result.recovery.append(probes.recovery(started))
        time.sleep(max(0.0, LEASE + 2.0 - (time.monotonic() - started)))
        h.signal(leader, signal.SIGCONT, expected="stop")
        time.sleep(1.0)
        held.release()
        code = h.wait_exit(leader, 15)
        if code != 1:
            result.notes.append(f"{leader} woke after losing the Lease and exited {code}, not 1")
        h.wait_ready()


RESETS = 20  # reset-after-commit: connections reset after the server answered a create
# what they reset, in turn: the built-in controllers' creates, their Events', and the HA
# test controller's records (created with generateName)
RESET_CREATES = (b"logicalports", b"services", b"ingresses", b"events", b"configmaps")


def _reset_after_commit(h: Harness, probes: _Probes, result: ScenarioResult) -> None:
    """About once a second, the leader's next create of one kind (in turn: LogicalPort,
    Service, Ingress, Event, the HA test controller's record) reaches the server, which
    commits it; its answer is thrown away and the connection reset, as when the server
    or a load balancer dies at that moment. Each is a write whose outcome the replica
    cannot know; none may be applied twice (see :func:`duplicates`). A Deployment
    created with the Service reset measures the recovery: exposed in spite of it."""
    with _Ticking(h, n=6):
        began = time.monotonic()
        fired = 0
        turn = 0
        while fired < RESETS and time.monotonic() - began < 2.5 * RESETS:
            kind = RESET_CREATES[turn % len(RESET_CREATES)]
            turn += 1
            leader = h.wait_leader()
            rule = h.proxy(leader).reset_after_answer(
                rb"POST /api[^ ]*/" + kind + rb" HTTP/1\.1\r\n", times=1
            )
            started = time.monotonic()
            if kind in (b"services", b"ingresses"):  # most likely the probe's own
                result.recovery.append(probes.recovery(started))
            deadline = started + 3.0
            while not rule.matched and time.monotonic() < deadline:
                time.sleep(0.02)
            if rule.matched:
                fired += 1
            else:
                rule.release()  # no such create meanwhile: disarmed, the next kind's turn
            time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
        result.faults = fired
        if fired < RESETS:
            result.notes.append(f"only {fired} of {RESETS} creates lost their answer")
    h.wait_ready()


BURST = 96  # sigstop-event-pipeline: Deployments created at once, one Exposed Event each
LATENCY = 0.08  # seconds the API server takes per request in sigstop-event-pipeline
# a chunk on the wire holding several Event creates: a pipeline (or a round of one)
EVENT_PIPELINE = rb"(?s)(?:POST /api/v1/namespaces/" + NAMESPACE.encode() + rb"/events .*?){6}"


def _sigstop_event_pipeline(h: Harness, probes: _Probes, result: ScenarioResult) -> None:
    """The API server takes 80 ms per request; a burst of Deployments makes the leader
    record an Exposed Event for each, faster than the server takes them, so its Event
    sender pipelines them. Once a pipeline of Event creates is on the wire, the leader is
    SIGSTOPped for lease + 2 s: the server goes on applying what it had queued. A
    fenced sender sends in rounds the server handles within half of its permission, so
    none is applied once a standby may hold the Lease; with rounds unbounded (the fence
    off: up to 64 Events per pipeline, 5 s of the server's work) they are."""
    audit = h.server.audit
    h.server.faults.set_latency(LATENCY)
    try:
        leader = h.wait_leader()
        time.sleep(3.0)  # its sender learns the server's pace from the workload's Events
        since = max((r.revision for r in audit.records()), default=0)

        def create(names: list[str]) -> None:
            for name in names:
                with contextlib.suppress(ApiError, OSError):
                    probes.workload.deployment(name)

        names = [f"burst-{i}" for i in range(BURST)]
        creators = [
            threading.Thread(target=create, args=(names[i::12],), name=f"chaos/burst-{i}")
            for i in range(12)
        ]
        for t in creators:
            t.start()

        def events_applied() -> int:
            return sum(
                1
                for r in audit.records(leader)
                if r.resource == "events" and r.verb == "create" and r.revision > since
            )

        # the sender is busy with the burst's Events: the next pipeline (round) is large
        _wait(lambda: events_applied() >= 16, 30, f"{leader} writing Events", h.logs)
        sent = h.proxy(leader).delay_requests(EVENT_PIPELINE, 0.0)  # counts, holds nothing
        _wait(lambda: sent.matched, 30, "a pipeline of Event creates on the wire", h.logs)
        started = time.monotonic()
        h.signal(leader, signal.SIGSTOP, expected="stop")
        paused_at = time.time()
        result.recovery.append(probes.recovery(started))
        time.sleep(max(0.0, LEASE + 2.0 - (time.monotonic() - started)))
        h.signal(leader, signal.SIGCONT, expected="stop")
        woke_at = time.time()
        code = h.wait_exit(leader, 15)
        if code != 1:
            result.notes.append(f"{leader} woke after losing the Lease and exited {code}, not 1")
        for t in creators:
            t.join(30)
        late = [
            r
            for r in audit.records(leader)
            if r.revision > since
            and not audit.lease_holder(NAMESPACE, LEASE_NAME, r.revision).startswith(f"{leader}_")
            and not _election_write(r)
        ]
        stopped = [r for r in late if r.time < woke_at]
        queued = [r for r in audit.records(leader) if paused_at <= r.time < woke_at]
        result.info.append(
            f"{events_applied()} of the burst's Event creates by {leader}; "
            f"{len(queued)} of its writes applied while it was stopped, "
            f"{len(stopped)} of them after it lost the Lease"
            + (
                f" (the last {max(r.time for r in stopped) - paused_at:.2f} s after the pause)"
                if stopped
                else ""
            )
            + f", {len(late) - len(stopped)} after it woke"
        )
    finally:
        h.server.faults.set_latency(0.0)
    h.wait_ready()


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[Harness, _Probes, ScenarioResult], None]
    grace: float = 5.0
    hold_seconds: float | None = None
    blind: bool = False
    records: bool = False  # the HA test controller records each tick (generateName)
    exposer_workers: int = 2
    loses_answers: bool = False  # writes lose their answers: the resending switch applies


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("kill9-leader-x10", _kill9_x10),
        Scenario("sigstop-leader", _sigstop),
        Scenario("apiserver-restart", _apiserver_restart),
        Scenario("drop-watches", _drop_watches),
        Scenario("compaction", _compaction),
        Scenario("partition-leader", _partition),
        Scenario("slow-reconcile-rolling", _slow_rolling, grace=2.0, hold_seconds=6.0),
        Scenario("sigstop-blind-write", _sigstop_blind, hold_seconds=1.0, blind=True),
        Scenario("sigstop-held-writes", _sigstop_held, hold_seconds=0.2, blind=True),
        Scenario(
            "reset-after-commit",
            _reset_after_commit,
            hold_seconds=0.05,
            records=True,
            loses_answers=True,
        ),
        Scenario("sigstop-event-pipeline", _sigstop_event_pipeline, exposer_workers=32),
    )
}


def run_scenario(
    name: str, workdir: Path, *, seed: int = 0, fence: bool = True, resending: bool = False
) -> ScenarioResult:
    """Run one scenario in a fresh harness; the result says what held and what did not.
    ``fence=False`` runs the replicas with the write fence switched off (the test-only
    ``e2e.unfenced``): a scenario that tests the fence must then report writes by
    non-holders. ``resending=True`` runs them with the client's old resend of a write
    whose connection broke after it left (the test-only ``e2e.resending``): a scenario
    that loses writes' answers must then report duplicates."""
    scenario = SCENARIOS[name]
    result = ScenarioResult(name)
    began = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    with Harness(
        workdir,
        grace=scenario.grace,
        hold_seconds=scenario.hold_seconds,
        blind=scenario.blind,
        records=scenario.records,
        exposer_workers=scenario.exposer_workers,
        fence=fence,
        resending=resending,
    ) as h:
        with Workload(h.client, seed=seed) as workload:
            time.sleep(2.0)  # the controllers are busy before the first fault
            scenario.run(h, _Probes(h, workload), result)
            time.sleep(1.0)
        result.during = list(workload.violations)
        try:
            _wait(lambda: not problems(h.client), CONVERGE, "convergence")
        except AssertionError:
            result.lost = problems(h.client)
        result.duplicates = duplicates(h.client, workload.doubled, h.server.audit)
        result.non_holder_writes = h.writes_by_non_holders()
        result.replica_writes = h.replica_writes()
        result.exits = list(h.exits)
        unexpected = [e for e in h.exits if not e.expected]
        result.notes.extend(f"{e.name} exited {e.code} on its own" for e in unexpected)
        if not result.ok:
            result.notes.append(h.logs())
    result.seconds = time.monotonic() - began
    return result


# -- helpers ------------------------------------------------------------------------------


def _exists(client: KubeClient, resource: Any, name: str, namespace: str) -> bool:
    try:
        client.get(resource, name, namespace)
    except NotFound:
        return False
    return True


def _wait(
    predicate: Callable[[], Any],
    timeout: float,
    what: str,
    logs: Callable[[], str] | None = None,
    step: float = 0.05,
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (ApiError, OSError):
            value = None
        if value:
            return value
        time.sleep(step)
    raise AssertionError(
        f"timed out after {timeout} s waiting for {what}" + (f"\n{logs()}" if logs else "")
    )


# -- the report ---------------------------------------------------------------------------


def _median_max(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} / {max(values):.2f}"


def _fence_off(text: str, runs: int, name: str, why_not: dict[str, str]) -> str:
    if not runs:
        return "not run"
    count = f"{runs} run{'s' * (runs > 1)}"
    if name in why_not:
        return f"{text} ({count}; {why_not[name]})"
    return f"**{text}** ({count})"


# Only where a replica that may no longer write is alive, unaware of it, and sends a write
# nothing else refuses can the fence be what keeps the count at 0; the column must then be
# above 0. Elsewhere something else keeps it there, and the table says what.
NOT_THE_FENCE = {
    "kill9-leader-x10": "killed: it sends nothing",
    "sigstop-leader": "its writes carry a resourceVersion: a stale one is a 409",
    "apiserver-restart": "it knows it lost at the renew deadline and exits",
    "drop-watches": "no Lease changes hands",
    "compaction": "no Lease changes hands",
    "partition-leader": "it knows it lost at the renew deadline and exits",
    "slow-reconcile-rolling": "the Lease is kept, not released, and it exits",
    "sigstop-held-writes": "its held writes' connections close as it exits",
    "reset-after-commit": "no Lease changes hands",
}
SHARD_NOT_THE_FENCE = {
    "kill9": "killed: it sends nothing",
    "join-leave": "graceful: it drains before it publishes",
    "stalled-watch": "the handshake keeps it: nobody's Lease expires on a stale view",
    "deleted-lease": "the owner stops at once; its claims are kept until they expire",
    "apiserver-restart": "they know they lost at the renew deadline and exit",
    "recreate-ring-change": (
        "both incarnations' fences are open: the uid preconditions keep it "
        "(`--preconditions-off-runs` breaks those)"
    ),
}


def render(
    results: dict[str, list[ScenarioResult]],
    command: str,
    *,
    unfenced: dict[str, list[ScenarioResult]] | None = None,
    resending: dict[str, list[ScenarioResult]] | None = None,
    shards: dict[str, list[ShardResult]] | None = None,
    shards_unfenced: dict[str, list[ShardResult]] | None = None,
) -> str:
    from e2e.shardchaos import KEYS as KEYS_SHARDED  # it imports this module

    unfenced = unfenced or {}
    resending = resending or {}
    shards_unfenced = shards_unfenced or {}
    lines = [
        "# Chaos: one writer, proven",
        "",
        f"Generated by `{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}.",
        "",
        "Every scenario also ran with the write fence switched off (the test-only "
        "`e2e.unfenced`, never a configuration key): the last column. Where a replica "
        "that may no longer write is alive, unaware of it, and sends a write nothing else "
        "refuses, that column must be above 0 (bold) — the proof that the scenario tests "
        "the fence; elsewhere the column says what keeps the count at 0 without it. "
        "`e2e/test_chaos.py::test_the_suite_catches_a_disabled_fence` checks it in the "
        "test suite.",
        "",
    ]
    if results:
        lines += [
            "## Leader election",
            "",
            f"Three `overseer run` replicas (exposer + podport, and the HA test controller in "
            f"the scenarios that need it; lease {LEASE:g} s, renew deadline {RENEW:g} s, retry "
            f"{RETRY:g} s) against the local API server, a continuous workload (Deployments "
            "created and edited, pods created and deleted, ~25 operations/s). *Writes by "
            "non-holders*: writes the server applied from a replica while another held the "
            "Lease or nobody did (its audit; the election's own Lease writes excepted). "
            "*Duplicates*: what the replicas made twice where once was asked for (a pod "
            "holding two LogicalPorts at once, a Deployment with two Services or Ingresses, "
            "two Events from one replica for one object, type, reason and message, a tick "
            "the HA test controller recorded twice; `duplicates()` in `e2e/chaos.py`). "
            "*Objects lost*: anything not converged 45 s after the workload stopped. "
            "*Recovery*: from a fault to the exposure of a Deployment created at that moment. "
            "`sigstop-blind-write` and `sigstop-held-writes` run the HA test controller in "
            "blind mode (a merge patch without resourceVersion after a hold). See "
            "`e2e/chaos.py` for the scenarios.",
            "",
            "| scenario | runs | faults | replica writes | writes by non-holders | duplicates | "
            "objects lost | recovery s (median / max) | kill -9 to new leader s (max) | "
            "exits (code: count) | fence off: writes by non-holders | resending on: "
            "duplicates |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, runs in results.items():
            recovery = [r for run in runs for r in run.recovery]
            failover = [f for run in runs for f in run.failover]
            exits = Counter(e.code for run in runs for e in run.exits)
            off = unfenced.get(name, [])
            off_writes = sum(len(r.non_holder_writes) for r in off)
            resent = resending.get(name, [])
            resent_text = (
                _fence_off(str(sum(len(r.duplicates) for r in resent)), len(resent), name, {})
                if SCENARIOS[name].loses_answers
                else "-"
            )
            lines.append(
                f"| {name} | {len(runs)} | {sum(r.fault_count for r in runs)} | "
                f"{sum(r.replica_writes for r in runs)} | "
                f"{sum(len(r.non_holder_writes) for r in runs)} | "
                f"{sum(len(r.duplicates) for r in runs)} | "
                f"{sum(len(r.lost) for r in runs)} | {_median_max(recovery)} | "
                f"{f'{max(failover):.2f}' if failover else '-'} | "
                f"{', '.join(f'{c}: {n}' for c, n in sorted(exits.items()))} | "
                f"{_fence_off(str(off_writes), len(off), name, NOT_THE_FENCE)} | {resent_text} |"
            )
        lines.append("")
    if shards:
        lines += [
            "## Sharding",
            "",
            f"Three replicas share a sharded controller (the sharding test controller in blind "
            f"mode: hold 0.2 s, then a merge patch without resourceVersion; 4 workers each, 16 in "
            f"sigstop and drain-timeout) "
            f"over {KEYS_SHARDED} ConfigMaps, 20 of them edited every quarter second; shard "
            f"Lease {LEASE:g} s, renew deadline {RENEW:g} s, retry {RETRY:g} s. *Keys written "
            "by two replicas in one span*: reconciles that wrote, by two replicas, overlapping "
            "in time (the controller's journal). *Writes without ownership*: writes the audit "
            "attributes to a replica whose own shard Lease was not live, whose published ring "
            "did not give it the key, or while another live member had claimed it since "
            "earlier (`e2e/shardaudit.py`). *Recovery*: from a fault to every key holding a "
            "tick issued at that moment. See `e2e/shardchaos.py`.",
            "",
            "| scenario | runs | faults | replica writes | keys written by two replicas in one "
            "span | writes without ownership | objects lost | recovery s (median / max) | "
            "exits (code: count) | fence off: two-writer keys / writes without ownership |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, runs_ in shards.items():
            recovery = [r for run in runs_ for r in run.recovery]
            exits = Counter(e.code for run in runs_ for e in run.exits)
            off_ = shards_unfenced.get(name, [])
            off_text = (
                f"{sum(len(r.overlaps) for r in off_)} / {sum(len(r.violations) for r in off_)}"
            )
            lines.append(
                f"| {name} | {len(runs_)} | {sum(r.faults for r in runs_)} | "
                f"{sum(r.writes for r in runs_)} | {sum(len(r.overlaps) for r in runs_)} | "
                f"{sum(len(r.violations) for r in runs_)} | "
                f"{sum(len(r.lost) for r in runs_)} | {_median_max(recovery)} | "
                f"{', '.join(f'{c}: {n}' for c, n in sorted(exits.items()))} | "
                + _fence_off(off_text, len(off_), name, SHARD_NOT_THE_FENCE)
                + " |"
            )
        lines.append("")
    failures: list[tuple[str, list[str]]] = [
        (n, [*r.non_holder_writes, *r.duplicates, *r.lost, *r.during, *r.notes[:-1]])
        for n, runs in results.items()
        for r in runs
        if not r.ok
    ]
    failures += [
        (f"sharding/{n}", [*r.overlaps, *r.violations, *r.lost, *r.notes[:-1]])
        for n, runs_ in (shards or {}).items()
        for r in runs_
        if not r.ok
    ]
    if failures:
        lines.append("## Failures")
        for name, what in failures:
            lines.append(f"### {name}")
            lines.extend(f"- {x}" for x in what[:20])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.chaos", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="runs per scenario (default 1)")
    parser.add_argument(
        "--fence-off-runs",
        type=int,
        default=0,
        help="runs per scenario with the write fence switched off (default 0)",
    )
    parser.add_argument(
        "--preconditions-off-runs",
        type=int,
        default=0,
        help="runs per owned-mode sharding scenario (recreate-ring-change) with the test "
        "controller's uid preconditions switched off (default 0)",
    )
    parser.add_argument(
        "--resending-runs",
        type=int,
        default=0,
        help="runs per leader scenario that loses writes' answers (reset-after-commit) with "
        "the client's old resend of a write whose connection broke switched on (default 0)",
    )
    parser.add_argument("--scenario", action="append", help="repeatable (leader or sharding)")
    parser.add_argument(
        "--suite", choices=("all", "leader", "sharding"), default="all", help="default all"
    )
    parser.add_argument("--report", default="", help="write the tables to this file")
    parser.add_argument("--workdir", default="", help="logs and configs (default: a temp dir)")
    args = parser.parse_args(argv)
    import tempfile

    from e2e.shardchaos import SHARD_SCENARIOS, run_shard_scenario  # it imports this module

    base = Path(args.workdir or tempfile.mkdtemp(prefix="overseer-chaos-"))
    wanted = set(args.scenario or [])
    unknown = wanted - set(SCENARIOS) - set(SHARD_SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    leader_names = [
        n for n in SCENARIOS if args.suite in ("all", "leader") and (not wanted or n in wanted)
    ]
    shard_names = [
        n
        for n in SHARD_SCENARIOS
        if args.suite in ("all", "sharding") and (not wanted or n in wanted)
    ]
    results: dict[str, list[ScenarioResult]] = {}
    unfenced: dict[str, list[ScenarioResult]] = {}
    resending: dict[str, list[ScenarioResult]] = {}
    shards: dict[str, list[ShardResult]] = {}
    shards_unfenced: dict[str, list[ShardResult]] = {}
    ok = True
    for name in leader_names:
        resend_runs = args.resending_runs if SCENARIOS[name].loses_answers else 0
        for run in range(args.runs + args.fence_off_runs + resend_runs):
            fence = run < args.runs or run >= args.runs + args.fence_off_runs
            resend = run >= args.runs + args.fence_off_runs
            switched = resend or not fence
            suffix = "-resending" if resend else "" if fence else "-unfenced"
            r = run_scenario(
                name, base / f"{name}-{run}{suffix}", seed=run, fence=fence, resending=resend
            )
            (resending if resend else results if fence else unfenced).setdefault(name, []).append(r)
            ok = ok and (r.ok or switched)
            what = " (resending on)" if resend else "" if fence else " (fence off)"
            print(
                f"{name} run {run + 1}{what}: "
                f"{'ok' if r.ok else 'FAILED'} in {r.seconds:.0f} s, "
                f"recovery {', '.join(f'{x:.2f}' for x in r.recovery)} s, "
                f"{r.replica_writes} replica writes, {len(r.non_holder_writes)} by non-holders, "
                f"{len(r.duplicates)} duplicates",
                flush=True,
            )
            for line in [*r.info, *r.duplicates[:5], *r.non_holder_writes[:3]]:
                print(f"  {line}", flush=True)
    for name in shard_names:
        owned = SHARD_SCENARIOS[name].owned
        off_runs = args.preconditions_off_runs if owned else 0
        for run in range(args.runs + args.fence_off_runs + off_runs):
            fence = run < args.runs or run >= args.runs + args.fence_off_runs
            guarded = run < args.runs + args.fence_off_runs
            suffix = "" if fence and guarded else "-unfenced" if guarded else "-unguarded"
            sr = run_shard_scenario(
                name, base / f"shard-{name}-{run}{suffix}", fence=fence, preconditions=guarded
            )
            if guarded:
                (shards if fence else shards_unfenced).setdefault(name, []).append(sr)
            ok = ok and (sr.ok or not fence or not guarded)
            what = (
                "" if fence and guarded else " (fence off)" if guarded else " (preconditions off)"
            )
            print(
                f"sharding/{name} run {run + 1}{what}: "
                f"{'ok' if sr.ok else 'FAILED'} in {sr.seconds:.0f} s, "
                f"recovery {', '.join(f'{x:.2f}' for x in sr.recovery)} s, {sr.writes} writes, "
                f"{len(sr.overlaps)} two-writer keys, {len(sr.violations)} without ownership"
                + (
                    f", {sr.name_overlaps} keys on two replicas by name, "
                    f"{len(sr.lost)} keys wrong at the end"
                    if owned
                    else ""
                ),
                flush=True,
            )
            if not guarded and sr.lost:
                print("  " + "\n  ".join(sr.lost[:5]), flush=True)
    shown = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--workdir"]
    if args.workdir:
        shown.remove(args.workdir)
    command = "python -m e2e.chaos " + " ".join(shown)
    text = render(
        results,
        command.strip(),
        unfenced=unfenced,
        resending=resending,
        shards=shards,
        shards_unfenced=shards_unfenced,
    )
    print(text)
    if args.report:
        Path(args.report).write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
