"""Sharding with real processes: three ``overseer run`` replicas share a sharded controller
(``e2e/shard_plugin``) over 300 ConfigMaps while ticks keep coming, through a replica
killed (-9), a replica added, a replica stopped gracefully, and a replica paused past its
shard Lease. The controller's writes are blind (no resourceVersion): nothing but the
replicas' write fences refuses a stale write. Proven at the end:

* no key was ever reconciled by two replicas at the same moment (every reconcile is
  journaled by the test controller, with its start and end);
* every write a replica made was for a key that the ring it had published gave it, while
  its own shard Lease was live and no other live member's published ring had claimed the
  key since earlier (``e2e/shardaudit.py`` on the local API server's audit; skipped against
  a real cluster, which has none);
* everything converges, and after the kill the dead replica's keys are reconciled again
  within lease duration + 2 retry periods.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.processes import Replica
from e2e.shardaudit import journal_overlaps, read_journals, shard_violations
from manager.client import ClientOptions, KubeClient
from manager.errors import ApiError
from manager.hashring import SlotRing, fnv1a_64
from manager.resources import builtin
from manager.sharding import APPLIED_ANNOTATION, RING_LABEL, decode_ring
from manager.testing.pytest_plugin import real_cluster

CONFIGMAPS = builtin("v1", "configmaps")
LEASES = builtin("coordination.k8s.io/v1", "leases")
SHARD_PLUGIN = Path(__file__).resolve().parent / "shard_plugin"
LABEL = "overseer-shard-test"
LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
KEYS = 300

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Any:
    """The local API server (for its audit), or None against a real cluster."""
    return None if real_cluster() else request.getfixturevalue("local_server")


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0)) as c:
        yield c


class Pool:
    """The replicas, their configs and journals."""

    def __init__(self, kubeconfig: str, server: Any, namespace: str, workdir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.server = server
        self.namespace = namespace
        self.workdir = workdir
        self.journal = workdir / "journal"
        self.journal.mkdir()
        self.ring = f"e2e-{uuid.uuid4().hex[:6]}"
        self.replicas: dict[str, tuple[Replica, int]] = {}
        self.n = 0

    def spawn(self) -> str:
        name = f"replica-{self.n}"
        self.n += 1
        port = _free_port()
        kubeconfig = self.kubeconfig
        if self.server is not None:  # a token naming the replica, for the audit
            kubeconfig = str(self.server.kubeconfig_for(name, self.workdir / f"{name}.kubeconfig"))
        doc = {
            "leaderElection": {
                "enabled": True,
                "namespace": self.namespace,
                "leaseName": f"{self.ring}-leader",
                "leaseDuration": LEASE,
                "renewDeadline": RENEW,
                "retryPeriod": RETRY,
            },
            "sharding": {
                "ringName": self.ring,
                "namespace": self.namespace,
                "leaseDuration": LEASE,
                "renewDeadline": RENEW,
                "retryPeriod": RETRY,
                "drainTimeout": 5.0,
            },
            "client": {"qps": 200.0, "burst": 400},
            "metricsBindAddress": "0",
            "healthProbeBindAddress": f"127.0.0.1:{port}",
            "gracefulShutdownTimeout": 10.0,
            "watchNamespace": self.namespace,
            "log": {"format": "json", "level": "info"},
            "controllers": {
                **{n: {"enabled": False} for n in _installed()},
                "shardtest": {
                    "enabled": True,
                    "sharded": True,
                    "workers": 4,
                    "holdSeconds": 0.05,
                    "blind": True,
                    "journal": str(self.journal),
                },
            },
        }
        config = self.workdir / f"{name}.yaml"
        config.write_text(yaml.safe_dump(doc))
        replica = Replica(name, config, kubeconfig, self.workdir, plugins=(SHARD_PLUGIN,))
        self.replicas[name] = (replica, port)
        return name

    def live(self) -> list[str]:
        return [n for n, (r, _) in self.replicas.items() if r.returncode is None]

    def ready(self, name: str) -> bool:
        _, port = self.replicas[name]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                return int(r.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def signal(self, name: str, sig: int) -> None:
        self.replicas[name][0].signal(sig)

    def pause(self, name: str) -> float:
        """SIGSTOP ``name``; the moment it was seen stopped (see :meth:`Replica.pause`)."""
        return self.replicas[name][0].pause()

    def wait(self, name: str, timeout: float) -> int | None:
        return self.replicas[name][0].wait(timeout)

    def logs(self) -> str:
        return "\n".join(
            f"--- {n} (exit {r.returncode}) ---\n{r.tail(12)}"
            for n, (r, _) in self.replicas.items()
        )

    def close(self) -> None:
        for replica, _ in self.replicas.values():
            replica.signal(signal.SIGCONT)
            replica.signal(signal.SIGTERM)
        for replica, _ in self.replicas.values():
            if replica.wait(20) is None:
                replica.signal(signal.SIGKILL)
                replica.wait(5)

    def journal_entries(self) -> list[dict[str, Any]]:
        return read_journals(self.journal)


def _installed() -> set[str]:
    from importlib.metadata import entry_points

    return {ep.name for ep in entry_points(group="overseer.controllers")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(predicate: Callable[[], Any], timeout: float, what: str, logs: Callable[[], str]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except ApiError:
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{logs()}")


def _tick(client: KubeClient, namespace: str, names: list[str], tick: str) -> None:
    for name in names:
        client.patch(CONFIGMAPS, name, {"data": {"tick": tick}}, namespace=namespace)


def _converged(client: KubeClient, namespace: str) -> bool:
    items = client.list(CONFIGMAPS, namespace, label_selector=f"{LABEL}=true")["items"]
    return len(items) == KEYS and all(
        (i["metadata"].get("annotations") or {}).get("shard/tick")
        == (i.get("data") or {}).get("tick")
        for i in items
    )


def _published(client: KubeClient, pool: Pool) -> dict[str, SlotRing]:
    """Each live replica's published ring, by replica name."""
    out = {}
    leases = client.list(LEASES, pool.namespace, label_selector=f"{RING_LABEL}={pool.ring}")
    for lease in leases["items"]:
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        applied = (lease["metadata"].get("annotations") or {}).get(APPLIED_ANNOTATION, "")
        decoded = decode_ring(applied)
        replica = holder.split("_", maxsplit=1)[0]
        if holder and replica in pool.live() and decoded is not None:
            out[replica] = SlotRing(decoded[1], decoded[0])
    return out


def test_replicas_share_keys_one_at_a_time_through_kills_joins_stops_and_pauses(
    client: KubeClient, kubeconfig_path: str, namespace: str, server: Any, tmp_path: Path
) -> None:
    if server is not None:
        server.audit.clear()
        server.audit.start()
    names = [f"cm-{i}" for i in range(KEYS)]
    for name in names:
        body = {"metadata": {"name": name, "labels": {LABEL: "true"}}, "data": {"tick": "0"}}
        client.create(CONFIGMAPS, body, namespace)
    pool = Pool(kubeconfig_path, server, namespace, tmp_path)
    ticking = threading.Event()
    ticking.set()
    done = threading.Event()
    rng = random.Random(16)

    def ticker() -> None:  # work keeps coming
        n = 0
        while not done.wait(0.5):
            if ticking.is_set():
                n += 1
                with contextlib.suppress(ApiError):
                    _tick(client, namespace, rng.sample(names, 20), f"t{n}")

    ticks = threading.Thread(target=ticker, name="e2e/ticker")
    try:
        for _ in range(3):
            pool.spawn()
        _wait(lambda: all(pool.ready(n) for n in pool.live()), 60, "3 ready replicas", pool.logs)
        ticks.start()
        _wait(lambda: len(_published(client, pool)) == 3, 30, "3 published rings", pool.logs)

        # 1. kill -9: its keys come back within lease + 2 retries
        victim = pool.live()[0]
        _wait(
            lambda: any(
                e["who"].startswith(f"{victim}_") and e["outcome"] == "written"
                for e in pool.journal_entries()
            ),
            30,
            f"{victim} at work",
            pool.logs,
        )
        rings = _published(client, pool)
        uids = {
            cm["metadata"]["name"]: cm["metadata"]["uid"]
            for cm in client.list(CONFIGMAPS, namespace, label_selector=f"{LABEL}=true")["items"]
        }
        theirs = [
            n
            for n in names
            if rings[victim].owner_of(fnv1a_64(uids[n])).startswith(f"{pool.ring}-{victim}-")
        ]
        assert theirs, rings
        killed_at = time.time()
        pool.signal(victim, signal.SIGKILL)
        assert pool.wait(victim, 10) == -signal.SIGKILL
        _tick(client, namespace, theirs, "after-kill")
        keys = {f"{namespace}/{n}" for n in theirs}

        def recovered() -> float | None:
            starts = [
                e["start"]
                for e in pool.journal_entries()
                if e["key"] in keys and e["start"] > killed_at and e["outcome"] == "written"
            ]
            return min(starts) - killed_at if starts else None

        recovery = _wait(recovered, 30, "the killed replica's keys reconciled", pool.logs)
        print(f"\nkill -9: its keys reconciled again {recovery:.2f} s later")
        assert recovery <= LEASE + 2 * RETRY + 0.5, pool.logs()

        # 2. a replica joins: it takes its share
        joined = pool.spawn()
        _wait(lambda: pool.ready(joined), 60, f"{joined} ready", pool.logs)
        _wait(lambda: joined in _published(client, pool), 30, f"{joined} in the ring", pool.logs)

        # 3. a graceful stop: it drains, releases its shard Lease and exits 0
        leaving = pool.live()[0]
        pool.signal(leaving, signal.SIGTERM)
        assert pool.wait(leaving, 20) == 0, pool.logs()

        # 4. paused past its Lease: the others take its keys; it wakes fenced and exits 1
        paused = pool.live()[0]
        stopped_at = pool.pause(paused)
        time.sleep(LEASE + 2.0)
        woken_at = time.time()
        pool.signal(paused, signal.SIGCONT)
        assert pool.wait(paused, 20) == 1, pool.logs()

        # the rest converge; then everything is checked
        ticking.clear()
        time.sleep(0.5)
        _tick(client, namespace, names, "final")
        _wait(lambda: _converged(client, namespace), 60, "every key reconciled", pool.logs)
        entries = pool.journal_entries()
        # A reconcile the pause froze sent nothing while frozen, and nothing after it woke
        # (its writes were refused: the writes are blind, nothing else would refuse them).
        # Until the stop it was at work on its key; a write it had sent by then is the
        # audit's to judge (applied while its Lease was live?), however late its answer.
        frozen = [
            e
            for e in entries
            if e["who"].startswith(f"{paused}_") and e["start"] < woken_at and e["end"] > stopped_at
        ]
        late = [e for e in frozen if e["outcome"] == "written" and e["sent"] >= stopped_at]
        assert late == [], (stopped_at, woken_at, late)
        running = [e for e in entries if e not in frozen]
        running += [{**e, "end": stopped_at} for e in frozen]
        assert journal_overlaps(running) == []
        writers = {e["who"] for e in entries if e["outcome"] == "written"}
        assert len(writers) >= 4, writers  # every replica worked on its share
        if server is not None:
            checked, bad = shard_violations(
                server.audit,
                pool.namespace,
                pool.ring,
                LEASE,
                writer=lambda r: (
                    r.user.startswith("replica-")
                    and r.resource == "configmaps"
                    and r.namespace == pool.namespace
                ),
            )
            print(f"audited {checked} replica writes")
            assert checked > KEYS
            assert bad == [], bad[:5]
    finally:
        done.set()
        if ticks.is_alive():
            ticks.join(10)
        pool.close()
        if server is not None:
            server.audit.stop()
        if os.environ.get("OVERSEER_KEEP_LOGS"):
            print(pool.logs())
