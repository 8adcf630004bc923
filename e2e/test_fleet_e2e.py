"""A fleet end to end: three ``overseer run`` replicas sharding three member clusters by
cluster, under a steady load of new objects in every member — then one replica killed,
one member's API server down for longer than ``unreachableAfter`` and back, and a fourth
cluster added by its kubeconfig Secret. After each fault an object created in the
cluster it hit is reconciled (annotated with its cluster's name by the test controller,
``e2e/fleet_plugin``) within a bound, the members that are up go on while one is down,
and at the end every object of every cluster is.

The home cluster (the shard Leases, the kubeconfig Secrets) and the members are local API
servers in this process: ``local_only`` (a member's downtime is the local server's
restart, and the replicas are processes of this machine).
"""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.replicapool import ReplicaPool
from manager.client import ClientOptions, KubeClient
from manager.errors import ApiError
from manager.resources import builtin
from manager.testing import LocalApiServer

pytestmark = [pytest.mark.slow, pytest.mark.local_only, pytest.mark.timeout(300)]

NAMESPACES = builtin("v1", "namespaces")
SECRETS = builtin("v1", "secrets")
CONFIGMAPS = builtin("v1", "configmaps")
PLUGIN = Path(__file__).resolve().parent / "fleet_plugin"
HOME_NS = "fleet"
SEEN = "fleet-e2e/seen"
BY = "fleet-e2e/by"
LABEL = {"fleet-e2e": "true"}
LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
UNREACHABLE = 3.0  # seconds without an answer before a member's keys stop
CONVERGE = 45.0


class FleetPool(ReplicaPool):
    def _plugins(self) -> tuple[Path, ...]:
        return (PLUGIN,)

    def _config(self, name: str, health_port: int) -> Path:
        doc = {
            "leaderElection": {"enabled": False},
            "sharding": {
                "ringName": "fleet-e2e",
                "namespace": HOME_NS,
                "leaseDuration": LEASE,
                "renewDeadline": RENEW,
                "retryPeriod": RETRY,
                "drainTimeout": 5.0,
            },
            "clusters": {
                "secrets": {"enabled": True, "namespace": HOME_NS},
                "probePeriod": 0.5,
                "probeTimeout": 1.0,
                "unreachableAfter": UNREACHABLE,
            },
            "client": {"qps": 200.0, "burst": 400},
            "metricsBindAddress": "0",
            "healthProbeBindAddress": f"127.0.0.1:{health_port}",
            "gracefulShutdownTimeout": 5.0,
            "log": {"format": "json", "level": "info"},
            "controllers": {
                "exposer": {"enabled": False},
                "podport": {"enabled": False},
                "fleete2e": {"enabled": True, "fleet": True, "sharded": True, "workers": 2},
            },
        }
        path = self.workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc))
        return path


class Fleet:
    """The home server, the member servers and the admin clients of each."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.home = LocalApiServer().start()
        self.home_client = KubeClient.from_kubeconfig(str(self.home.kubeconfig_path))
        self.home_client.create(NAMESPACES, {"metadata": {"name": HOME_NS}})
        self.members: dict[str, LocalApiServer] = {}
        self.clients: dict[str, KubeClient] = {}
        self.up: set[str] = set()
        self._lock = threading.Lock()
        self._count = 0

    def add(self, name: str, objects: int) -> None:
        """A member with ``objects`` labelled ConfigMaps, and its kubeconfig Secret."""
        server = LocalApiServer().start()
        client = KubeClient.from_kubeconfig(
            str(server.kubeconfig_path), options=ClientOptions(qps=0, max_retries=0)
        )
        for _ in range(objects):
            self._create(client)
        kubeconfig = server.kubeconfig_for("fleet", self.workdir / f"{name}.kubeconfig")
        self.home_client.create(
            SECRETS,
            {
                "metadata": {
                    "name": f"{name}-kubeconfig",
                    "labels": {"cluster.x-k8s.io/cluster-name": name},
                },
                "stringData": {"value": kubeconfig.read_text()},
            },
            HOME_NS,
        )
        with self._lock:
            self.members[name] = server
            self.clients[name] = client
            self.up.add(name)

    def _create(self, client: KubeClient) -> None:
        with self._lock:
            self._count += 1
            n = self._count
        body = {"metadata": {"name": f"o-{n}", "labels": LABEL}, "data": {"n": str(n)}}
        client.create(CONFIGMAPS, body, "default")

    def load(self, stop: threading.Event) -> None:
        """A new object every 50 ms in a member that is up."""
        while not stop.wait(0.05):
            with self._lock:
                up = sorted(self.up)
            if not up:
                continue
            name = random.choice(up)
            with contextlib.suppress(ApiError, OSError):
                self._create(self.clients[name])

    def unseen(self, names: Any = None) -> dict[str, int]:
        """Per member that is up: objects not yet annotated with that member's name."""
        with self._lock:
            wanted = sorted(self.up if names is None else names)
        out = {}
        for name in wanted:
            items = self.clients[name].list(CONFIGMAPS, "default", label_selector="fleet-e2e")
            out[name] = sum(
                1
                for o in items["items"]
                if (o["metadata"].get("annotations") or {}).get(SEEN) != name
            )
        return out

    def down(self, name: str, seconds: float) -> threading.Thread:
        """The member's API server refuses connections for ``seconds`` (its data kept)."""
        with self._lock:
            self.up.discard(name)

        def restart() -> None:
            self.members[name].restart(downtime=seconds)
            with self._lock:
                self.up.add(name)

        thread = threading.Thread(target=restart, name=f"down/{name}")
        thread.start()
        return thread

    def close(self) -> None:
        for client in [*self.clients.values(), self.home_client]:
            client.close()
        for server in [*self.members.values(), self.home]:
            server.stop()


@contextlib.contextmanager
def _fleet(tmp_path: Path) -> Iterator[tuple[Fleet, FleetPool]]:
    fleet = Fleet(tmp_path)
    pool = FleetPool(fleet.home, tmp_path, target=3)
    try:
        yield fleet, pool
    finally:
        pool.stop_replicas(10)
        fleet.close()


def _probe(fleet: Fleet, name: str, timeout: float = CONVERGE) -> tuple[float, str]:
    """Seconds until an object created now in ``name`` is reconciled, and by whom."""
    client = fleet.clients[name]
    probe = f"probe-{time.monotonic_ns()}"
    client.create(CONFIGMAPS, {"metadata": {"name": probe, "labels": LABEL}}, "default")
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        with contextlib.suppress(ApiError, OSError):
            notes = client.get(CONFIGMAPS, probe, "default")["metadata"].get("annotations") or {}
            if notes.get(SEEN) == name:
                return time.monotonic() - began, str(notes.get(BY))
        time.sleep(0.05)
    raise AssertionError(f"{probe} in {name} not reconciled within {timeout} s")


def _converged(fleet: Fleet, what: str, timeout: float = CONVERGE, names: Any = None) -> float:
    """Seconds until every object of every member that is up (or of ``names``) is seen."""
    began = time.monotonic()
    last: dict[str, int] = {}
    while time.monotonic() - began < timeout:
        with contextlib.suppress(ApiError, OSError):
            last = fleet.unseen(names)
            if last and not any(last.values()):
                return time.monotonic() - began
        time.sleep(0.2)
    raise AssertionError(f"{what}: not converged within {timeout} s: unseen {last}")


def test_a_fleet_sharded_over_three_replicas_rides_out_faults(tmp_path: Path) -> None:
    with _fleet(tmp_path) as (fleet, pool):
        for name in ("c0", "c1", "c2"):
            fleet.add(name, 30)
        pool.start_replicas()
        stop = threading.Event()
        loader = threading.Thread(target=fleet.load, args=(stop,), name="fleet/load")
        loader.start()
        try:
            took = {"start": _converged(fleet, "at start", timeout=90)}
            owners = {name: _probe(fleet, name)[1] for name in ("c0", "c1", "c2")}
            # the replica that owns c0 killed: c0 moves once that replica's Lease expires
            pool.signal(owners["c0"], signal.SIGKILL, expected="kill")
            took["c0 after its owner's kill -9"], by = _probe(fleet, "c0")
            assert by != owners["c0"]
            assert took["c0 after its owner's kill -9"] <= LEASE + 5.0, took
            # a member down for longer than unreachableAfter: the others go on meanwhile
            downtime = UNREACHABLE + 4.0
            thread = fleet.down("c1", downtime)
            time.sleep(UNREACHABLE + 1.0)
            for name in ("c0", "c2"):
                took[f"{name} while c1 is down"] = _probe(fleet, name, timeout=2.0)[0]
            thread.join()
            took["c1 back"] = _probe(fleet, "c1")[0]
            # a fourth cluster, added by its Secret under load
            fleet.add("c3", 30)
            took["c3 added"] = _probe(fleet, "c3")[0]
            took["all after c3"] = _converged(fleet, "after c3 was added")
        finally:
            stop.set()
            loader.join()
        took["end"] = _converged(fleet, "at the end")
        print("\nfleet e2e, seconds to converge:", {k: round(v, 2) for k, v in took.items()})
        crashes = [e for e in pool.exits if not e.expected]
        assert crashes == [], f"{crashes}\n{pool.logs()}"
