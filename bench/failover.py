"""Benchmark ``failover``: three ``overseer run`` replicas with Lease leader election; the
leader is killed (SIGKILL), then the next leader is stopped (SIGTERM) → time until a new
replica holds the Lease, and until it has reconciled.

Each replica is ``python -m manager run`` in its own process (as in ``e2e/processes.py``:
its own ``POD_NAME``, so its Lease identity starts with ``replica-N_``), with the exposer
enabled (4 workers, warm standby: the default) and the default Lease timings (duration
15 s, renew deadline 10 s, retry period 2 s). The harness watches the Lease (holder
changes, timestamped as they arrive) and the Services and Ingresses; right after each
signal it creates an opted-in probe Deployment, which only a leader exposes, so "first
reconcile by the new leader" is the moment the probe's Service and Ingress appear.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.deployments import deployment
from bench.exposers import DOMAIN, ROOT, Subject, overseer_config
from bench.exposure import Exposures, wait_exposed
from bench.registry import Goal, Metrics, Run, benchmark
from bench.target import Target
from bench.watcher import ObjectWatch

REPLICAS = 3
LEASE = "bench-overseer-leader"
LEASE_DURATION = 15.0  # seconds: the default, stated for the description
START_TIMEOUT = 90.0  # seconds for the first leader to be elected and reconcile
TAKEOVER_TIMEOUT = 60.0
MB = 1024 * 1024


class Holders:
    """Holder changes of one Lease, as seen by a watch: ``[(time, holderIdentity)]``."""

    def __init__(self, target: Target, namespace: str) -> None:
        self._lock = threading.Lock()
        self.changes: list[tuple[float, str]] = []
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._watch = ObjectWatch(target.raw, path, self._on).start()

    def _on(self, kind: str, obj: dict[str, Any], now: float) -> None:
        if obj["metadata"]["name"] != LEASE:
            return
        holder = str((obj.get("spec") or {}).get("holderIdentity") or "")
        with self._lock:
            if not self.changes or self.changes[-1][1] != holder:
                self.changes.append((now, holder))

    def current(self) -> str:
        with self._lock:
            return self.changes[-1][1] if self.changes else ""

    def wait_new(self, old: str, after: float, timeout: float) -> tuple[float, str]:
        """The first change after ``after`` to a holder that is neither ``old`` nor empty."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for t, who in self.changes:
                    if t >= after and who and who != old:
                        return t, who
            time.sleep(0.01)
        raise RuntimeError(f"no new Lease holder after {old!r} within {timeout:.0f}s")

    def stop(self) -> None:
        self._watch.stop()


def _replica(index: int, config: Path, kubeconfig: str, scratch: Path) -> Subject:
    name = f"replica-{index}"
    cmd = [sys.executable, "-m", "manager", "run", "--config", str(config)]
    env = {"POD_NAME": name, "PYTHONPATH": str(ROOT)}
    return Subject(name, [*cmd, "--kubeconfig", kubeconfig], scratch / f"{name}.log", env)


def _by_identity(replicas: list[Subject], identity: str) -> Subject:
    for r in replicas:
        if identity.startswith(f"{r.name}_"):
            return r
    raise RuntimeError(f"no replica has identity {identity!r}")


def _probe(target: Target, ns: str, name: str) -> None:
    target.raw.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", deployment(name))


@benchmark(
    "failover",
    describe=f"""
{REPLICAS} `overseer run` replicas (own processes, exposer enabled with 4 workers, warm
standby, Lease duration {LEASE_DURATION:g} s, renew deadline 10 s, retry period 2 s: the
defaults). Once a leader has exposed a canary Deployment: **kill**: the leader gets
SIGKILL and a probe Deployment is created; **kill_new_holder_seconds** from the signal to
the harness's Lease watch seeing another holder (bounded below by the Lease duration: the
dead leader's Lease must expire), **kill_first_reconcile_seconds** from that to the probe's
Service and Ingress seen. **term**: the new leader gets SIGTERM (it finishes in-flight
reconciles and releases the Lease) and another probe is created;
**term_new_holder_seconds**, **term_first_reconcile_seconds** likewise, and
**term_exit_seconds** until the stopped replica exited. **cpu_seconds**: all replicas'
user + sys CPU from start to end of the run; **peak_rss_mb**: the largest replica's peak.
""",
    units={
        "kill_new_holder_seconds": "s",
        "kill_first_reconcile_seconds": "s",
        "term_new_holder_seconds": "s",
        "term_first_reconcile_seconds": "s",
        "term_exit_seconds": "s",
        "start_seconds": "s",
        "cpu_seconds": "s",
        "peak_rss_mb": "MB",
    },
    goals=[
        Goal("kill_new_holder_seconds", "<=", 17),
        Goal("kill_first_reconcile_seconds", "<=", 0.5),
        Goal("term_new_holder_seconds", "<=", 1),
        Goal("term_first_reconcile_seconds", "<=", 0.5),
    ],
)
def failover(run: Run) -> Metrics:
    target = run.target
    ns = target.new_namespace("bench-failover")
    scratch = Path(run.scratch) / f"failover-{run.index}"
    scratch.mkdir(parents=True, exist_ok=True)
    config = overseer_config(
        scratch / "overseer.yaml",
        ns,
        enable={"exposer": {"workers": 4, "domain": DOMAIN}},
        leader_election={"enabled": True, "namespace": ns, "leaseName": LEASE},
        log_level="info",
    )
    holders = Holders(target, ns)
    exposures = Exposures(target, ns)
    started = time.time()
    replicas = [_replica(i, config, target.kubeconfig, scratch) for i in range(REPLICAS)]
    try:
        _probe(target, ns, "canary")
        wait_exposed(exposures, ["canary"], replicas[0], START_TIMEOUT, "canary")
        start_seconds = time.time() - started
        time.sleep(2.0)  # the standbys' informers are synced too (warm standby)

        first = holders.current()
        leader = _by_identity(replicas, first)
        killed_at = time.time()
        os.kill(leader.proc.pid, signal.SIGKILL)
        _probe(target, ns, "probe-kill")
        kill_at, second = holders.wait_new(first, killed_at, TAKEOVER_TIMEOUT)
        wait_exposed(exposures, ["probe-kill"], _by_identity(replicas, second), 30, "probe")
        kill_exposed = exposures.exposed_at("probe-kill") or 0.0

        leader = _by_identity(replicas, second)
        termed_at = time.time()
        leader.proc.send_signal(signal.SIGTERM)
        _probe(target, ns, "probe-term")
        term_at, third = holders.wait_new(second, termed_at, TAKEOVER_TIMEOUT)
        wait_exposed(exposures, ["probe-term"], _by_identity(replicas, third), 30, "probe")
        term_exposed = exposures.exposed_at("probe-term") or 0.0
        try:
            leader.proc.wait(30)
            exit_seconds = time.time() - termed_at
        except subprocess.TimeoutExpired:
            exit_seconds = float("nan")
        cpu = sum(r.sampler.cpu() for r in replicas)
        peak = max(r.sampler.peak_rss() for r in replicas)
        return {
            "kill_new_holder_seconds": kill_at - killed_at,
            "kill_first_reconcile_seconds": max(0.0, kill_exposed - kill_at),
            "term_new_holder_seconds": term_at - termed_at,
            "term_first_reconcile_seconds": max(0.0, term_exposed - term_at),
            "term_exit_seconds": exit_seconds,
            "start_seconds": start_seconds,
            "cpu_seconds": cpu,
            "peak_rss_mb": peak / MB,
        }
    except Exception:
        for r in replicas:
            print(f"--- {r.name} ---\n{r.tail(1500)}", file=sys.stderr)
        raise
    finally:
        for r in replicas:
            r.stop()
        holders.stop()
        exposures.stop()
        target.delete_namespace(ns)
