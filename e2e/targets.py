"""Where the e2e replicas run: three local ``overseer run`` processes, or the pods of the
``overseer`` Deployment in a kind cluster — behind one interface, so that the scenarios
of ``e2e/test_controllers_e2e.py`` are written once.

* :class:`LocalTarget` (default): three ``python -m manager run`` processes
  (:class:`e2e.processes.Replica`) against the test API server (the local one, or
  ``$OVERSEER_TEST_KUBECONFIG``), leader election with short timings, both built-in
  controllers on, ``watchNamespace`` the test's namespace, podport on a network of its
  own (``installCrd: true``), metrics and health on 127.0.0.1 ports picked free here.
  kill -9 is SIGKILL, graceful is SIGTERM (the replica must then exit 0). A stopped
  replica is replaced by a new process with a new name, as the Deployment replaces a pod.
* :class:`KindTarget` (``OVERSEER_E2E_TARGET=kind``, set by ``e2e/kind.sh``): the pods of
  the ``overseer`` Deployment that ``deploy/`` installs, driven through
  :class:`e2e.cluster.PodReplicas`. kill -9 is a SIGKILL of the container on its kind
  node (see :meth:`e2e.cluster.PodReplicas.kill`), graceful a plain delete, metrics
  come through the API server's pod proxy, a rolling restart is ``kubectl rollout
  restart`` and ``rollout status``. The Lease and the timings are read from
  ``deploy/config/overseer.yaml`` (``$OVERSEER_E2E_NAMESPACE`` / ``$OVERSEER_E2E_LEASE``
  override the Lease's namespace and name).

A replica is named by a string: ``replica-<n>`` locally (n counts every process started),
the pod name in kind. Either way the Lease ``holderIdentity`` of a replica starts with
``<name>_``.

Thread-safety: a target is driven by one test thread; :meth:`Target.rolling_restart` may
run in a second thread while the first creates objects through its own client and reads
:meth:`Target.logs` (the local replica table is locked).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import partial
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

import yaml

from e2e.cluster import DEPLOYMENTS, SELECTOR, PodReplicas
from e2e.processes import ROOT, Replica, holder, wait_for
from manager.client import KubeClient
from manager.errors import NotFound
from manager.resources import Resource

__all__ = ["KindTarget", "LocalTarget", "Target", "target_from_env"]

LOGICAL_PORTS = Resource(
    "network.overseer.io", "v1alpha1", "logicalports", "LogicalPort", namespaced=False
)
DEPLOY_CONFIG = ROOT / "deploy" / "config" / "overseer.yaml"


class Target(Protocol):
    """A set of Overseer replicas sharing one Lease, as the scenarios see it.

    Contract: :meth:`replicas` lists the live replicas (not stopped or being stopped);
    :meth:`leader` is the live replica whose name prefixes the Lease's holderIdentity, or
    None; :meth:`kill` stops one replica, abruptly or gracefully, and returns without
    waiting for a new leader; :meth:`wait_all_ready` brings the set back to its size
    (replacing stopped replicas where the platform does not) and returns once every
    replica is ready and one of them leads; :meth:`rolling_restart` replaces every
    replica one at a time, each new one ready before the next old one goes, and returns
    when all are ready. Every wait is bounded and raises AssertionError with the logs.
    """

    kind: str  # "local" or "kind"
    lease_name: str
    lease_duration: float  # seconds
    retry_period: float  # seconds
    network: str  # the podport network the test pods get their ports on
    timeout: float  # seconds: the bound of one wait for the controllers to act
    failover_slack: float  # seconds added to a failover bound (scheduling, polling)

    def replicas(self) -> list[str]: ...

    def holder(self) -> str: ...

    def leader(self) -> str | None: ...

    def kill(self, replica: str, *, graceful: bool) -> None: ...

    def metrics(self, replica: str) -> str: ...

    def wait_all_ready(self) -> None: ...

    def rolling_restart(self) -> None: ...

    def logs(self) -> str: ...

    def close(self) -> None: ...


def target_from_env(client: KubeClient, kubeconfig: str, namespace: str, workdir: Path) -> Target:
    """The target ``$OVERSEER_E2E_TARGET`` names (``local`` by default), started.

    Raises:
        ValueError: an unknown target, or ``kind`` without ``$OVERSEER_TEST_KUBECONFIG``.
    """
    kind = os.environ.get("OVERSEER_E2E_TARGET", "local")
    if kind == "local":
        target = LocalTarget(client, kubeconfig, namespace, workdir)
        try:
            target.start()
        except BaseException:
            target.close()
            raise
        return target
    if kind == "kind":
        if not os.environ.get("OVERSEER_TEST_KUBECONFIG"):
            raise ValueError(
                "OVERSEER_E2E_TARGET=kind needs OVERSEER_TEST_KUBECONFIG (e2e/kind.sh)"
            )
        return KindTarget(client, kubeconfig)
    raise ValueError(f"OVERSEER_E2E_TARGET={kind!r}: expected 'local' or 'kind'")


def _bounded(predicate: Any, timeout: float, what: str, logs: Any, step: float) -> Any:
    try:
        return wait_for(predicate, timeout, what, step=step)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{logs()}") from None


# -- local processes --------------------------------------------------------------------


@dataclass
class _Process:
    replica: Replica
    metrics_port: int
    health_port: int
    stopped: str = ""  # "", "kill" (SIGKILL) or "term" (SIGTERM: must exit 0)


class LocalTarget:
    """Three ``overseer run`` processes against the test API server."""

    kind = "local"
    timeout = 20.0
    failover_slack = 1.0
    size = 3
    graceful_shutdown = 10.0  # seconds (gracefulShutdownTimeout)

    def __init__(
        self,
        client: KubeClient,
        kubeconfig: str,
        namespace: str,
        workdir: Path,
        *,
        lease_duration: float = 3.0,
        renew_deadline: float = 2.0,
        retry_period: float = 0.5,
    ) -> None:
        suffix = os.urandom(3).hex()
        self.client = client
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.workdir = workdir
        self.lease_name = f"e2e-{suffix}"
        self.network = f"e2e-{suffix}"
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._lock = threading.Lock()
        self._procs: dict[str, _Process] = {}  # every process started, by name
        self._next = 0
        self._ports: set[int] = set()

    # the interface

    def start(self) -> None:
        for _ in range(self.size):
            self._spawn()
        self.wait_all_ready()

    def replicas(self) -> list[str]:
        with self._lock:
            return [
                n for n, p in self._procs.items() if not p.stopped and p.replica.returncode is None
            ]

    def holder(self) -> str:
        return holder(self.client, self.namespace, self.lease_name)

    def leader(self) -> str | None:
        identity = self.holder()
        return next((n for n in self.replicas() if identity.startswith(f"{n}_")), None)

    def kill(self, replica: str, *, graceful: bool) -> None:
        with self._lock:
            proc = self._procs[replica]
            proc.stopped = "term" if graceful else "kill"
        if graceful:
            proc.replica.signal(signal.SIGTERM)
            return
        proc.replica.signal(signal.SIGKILL)
        if proc.replica.wait(10) is None:
            raise AssertionError(f"{replica} still runs 10 s after SIGKILL")

    def metrics(self, replica: str) -> str:
        with self._lock:
            port = self._procs[replica].metrics_port
        status, body = _http_get(f"http://127.0.0.1:{port}/metrics")
        if status != 200:
            raise AssertionError(f"{replica} /metrics answered {status}: {body[:500]}")
        return body

    def wait_all_ready(self) -> None:
        """Reap stopped replicas (checking how they exited), start replacements, wait
        until every replica answers ``/readyz`` 200 and one of them leads."""
        with self._lock:
            procs = list(self._procs.items())
        for name, proc in procs:
            if not proc.stopped and proc.replica.returncode is None:
                continue
            if not proc.stopped:
                raise AssertionError(
                    f"{name} exited by itself ({proc.replica.returncode})\n{self.logs()}"
                )
            if proc.stopped == "done":
                continue
            self._reap(name, proc)
            self._spawn()
        _bounded(
            lambda: len(self.replicas()) == self.size and all(map(self._ready, self.replicas())),
            60,
            f"{self.size} ready replicas",
            self.logs,
            step=0.1,
        )
        _bounded(self.leader, self.lease_duration + 30, "a leading replica", self.logs, 0.05)

    def rolling_restart(self) -> None:
        """SIGTERM each replica in turn; start its replacement and wait for its
        ``/readyz`` before the next."""
        for name in self.replicas():
            with self._lock:
                proc = self._procs[name]
                proc.stopped = "term"
            proc.replica.signal(signal.SIGTERM)
            self._reap(name, proc)
            new = self._spawn()
            _bounded(partial(self._ready, new), 60, f"{new} ready", self.logs, 0.1)
        self.wait_all_ready()

    def logs(self) -> str:
        with self._lock:
            procs = list(self._procs.items())
        parts = []
        for name, p in procs:
            rc = p.replica.returncode
            state = "running" if rc is None else f"exited {rc}"
            parts.append(f"--- {name} ({state}; log {p.replica.log}) ---\n{p.replica.tail(25)}")
        return "\n".join(parts)

    def close(self) -> None:
        with self._lock:
            procs = list(self._procs.values())
        for p in procs:
            p.replica.signal(signal.SIGTERM)
        for p in procs:
            if p.replica.wait(self.graceful_shutdown + 5) is None:
                p.replica.signal(signal.SIGKILL)
                p.replica.wait(5)
        # the local API server outlives the test: drop the ports of this run's network
        try:
            ports = self.client.list(LOGICAL_PORTS)["items"]
        except NotFound:
            return
        for port in ports:
            if port["spec"].get("network") == self.network:
                with contextlib.suppress(NotFound):
                    self.client.delete(LOGICAL_PORTS, port["metadata"]["name"])

    # the processes

    def _spawn(self) -> str:
        with self._lock:
            name = f"replica-{self._next}"
            self._next += 1
            metrics_port, health_port = self._free_port(), self._free_port()
        config = self._write_config(name, metrics_port, health_port)
        replica = Replica(name, config, self.kubeconfig, self.workdir, plugins=())
        with self._lock:
            self._procs[name] = _Process(replica, metrics_port, health_port)
        return name

    def _reap(self, name: str, proc: _Process) -> None:
        rc = proc.replica.wait(self.graceful_shutdown + 5)
        expected = 0 if proc.stopped == "term" else -signal.SIGKILL
        with self._lock:
            proc.stopped = "done"
        if rc != expected:
            how = "SIGTERM" if expected == 0 else "SIGKILL"
            raise AssertionError(
                f"{name} after {how}: exit {rc}, expected {expected}\n{self.logs()}"
            )

    def _ready(self, name: str) -> bool:
        with self._lock:
            port = self._procs[name].health_port
        status, _ = _http_get(f"http://127.0.0.1:{port}/readyz")
        return status == 200

    def _free_port(self) -> int:
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if port not in self._ports:
                self._ports.add(port)
                return port

    def _write_config(self, name: str, metrics_port: int, health_port: int) -> Path:
        doc: dict[str, Any] = {
            "leaderElection": {
                "enabled": True,
                "namespace": self.namespace,
                "leaseName": self.lease_name,
                "leaseDuration": self.lease_duration,
                "renewDeadline": self.renew_deadline,
                "retryPeriod": self.retry_period,
            },
            "metricsBindAddress": f"127.0.0.1:{metrics_port}",
            # plain HTTP on loopback: the harness reads /metrics without a token
            "metrics": {"secure": False},
            "healthProbeBindAddress": f"127.0.0.1:{health_port}",
            "gracefulShutdownTimeout": self.graceful_shutdown,
            "watchNamespace": self.namespace,
            "log": {"format": "json", "level": "info"},
            "controllers": {
                # only the two built-in controllers (a dev venv may hold sample plugins)
                **{name: {"enabled": False} for name in _installed_controllers()},
                "exposer": {"enabled": True},
                "podport": {
                    "enabled": True,
                    "installCrd": True,
                    "networks": [{"name": self.network, "cidr": "10.250.0.0/24"}],
                    "defaultNetwork": self.network,
                },
            },
        }
        path = self.workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc))
        return path


def _installed_controllers() -> set[str]:
    """Names of the controllers installed where the replicas run (same interpreter)."""
    return {ep.name for ep in entry_points(group="overseer.controllers")}


def _http_get(url: str) -> tuple[int, str]:
    """(status, body) of a GET; status 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return int(resp.status), resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError:
        return 0, ""


# -- kind: pods of the overseer Deployment ----------------------------------------------


class KindTarget:
    """The pods of ``deploy/``'s ``overseer`` Deployment (``e2e/kind.sh``)."""

    kind = "kind"
    timeout = 90.0
    failover_slack = 5.0
    deployment = "overseer"

    def __init__(self, client: KubeClient, kubeconfig: str) -> None:
        config = yaml.safe_load(DEPLOY_CONFIG.read_text())
        election = config.get("leaderElection") or {}
        podport = (config.get("controllers") or {}).get("podport") or {}
        self.client = client
        self.kubeconfig = kubeconfig
        self.namespace = os.environ.get("OVERSEER_E2E_NAMESPACE") or (
            election.get("namespace") or "overseer-system"
        )
        self.lease_name = os.environ.get("OVERSEER_E2E_LEASE") or election.get(
            "leaseName", "overseer-leader"
        )
        self.lease_duration = float(election.get("leaseDuration", 15.0))
        self.retry_period = float(election.get("retryPeriod", 2.0))
        self.network = str(podport.get("defaultNetwork", "default"))
        self.pods = PodReplicas(
            client, namespace=self.namespace, lease=self.lease_name, kubeconfig=kubeconfig
        )

    def replicas(self) -> list[str]:
        return [str(p["metadata"]["name"]) for p in self.pods.pods()]

    def holder(self) -> str:
        return self.pods.holder()

    def leader(self) -> str | None:
        return self.pods.leader()

    def kill(self, replica: str, *, graceful: bool) -> None:
        if graceful:
            self.pods.terminate(replica)
        else:
            self.pods.kill(replica)

    def metrics(self, replica: str) -> str:
        return self.pods.metrics(replica)

    def wait_all_ready(self) -> None:
        def rolled_out() -> bool:
            dep = self.client.get(DEPLOYMENTS, self.deployment, self.namespace)
            want = dep["spec"]["replicas"]
            status = dep.get("status") or {}
            return bool(
                status.get("observedGeneration") == dep["metadata"]["generation"]
                and status.get("updatedReplicas") == want
                and status.get("readyReplicas") == want
                and status.get("replicas") == want
                and len(self.pods.ready()) == want == len(self.pods.pods())
            )

        _bounded(rolled_out, 300, "the overseer Deployment rolled out and Ready", self.logs, 1.0)
        _bounded(self.leader, self.lease_duration + 30, "a leading pod", self.logs, 0.2)

    def rolling_restart(self) -> None:
        deployment = f"deployment/{self.deployment}"
        self._kubectl("rollout", "restart", deployment, timeout=30)
        self._kubectl("rollout", "status", deployment, "--timeout=300s", timeout=320)
        self.wait_all_ready()

    def logs(self) -> str:
        try:
            return self._kubectl(
                "logs", "-l", SELECTOR, "--all-containers", "--prefix", "--tail=40", timeout=30
            )
        except (AssertionError, subprocess.TimeoutExpired) as exc:
            return f"(no logs: {exc})"

    def close(self) -> None:
        """Nothing to stop: the install belongs to ``e2e/kind.sh``."""

    def _kubectl(self, *args: str, timeout: float) -> str:
        cmd = ["kubectl", "--kubeconfig", self.kubeconfig, "-n", self.namespace, *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr}")
        return done.stdout
