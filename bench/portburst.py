"""Benchmark ``port-burst``: pods created in a burst → time until every one carries the
``overseer.io/ip`` annotation, with the podport controller in an ``overseer run``
process of its own (no peer: neither the official client nor kopf ships an IPAM).

The harness creates the pods and watches them (raw watch, timestamped on arrival); the
controller's CPU seconds and peak RSS are sampled from outside (:mod:`bench.sampler`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench import requests
from bench.exposers import Subject, overseer_config
from bench.latency import summary_ms
from bench.registry import Goal, Metrics, Run, benchmark
from bench.settle import wait_settled
from bench.target import Target
from bench.watcher import ObjectWatch
from bench.workload import NO_SCHEDULER, run_parallel

PODS = int(os.environ.get("BENCH_PODS", "2000"))  # smaller while developing
WORKERS = 4
WRITERS = 4
IP = "overseer.io/ip"
PORTS_PATH = "/apis/network.overseer.io/v1alpha1/logicalports"
READY_TIMEOUT = 120.0
TIMEOUT = 300.0
MB = 1024 * 1024
RESOURCES = ("pods", "logicalports", "events")


class Annotated:
    """First time each pod was seen with ``overseer.io/ip``."""

    def __init__(self, target: Target, namespace: str) -> None:
        self._lock = threading.Lock()
        self.seen: dict[str, float] = {}
        path = f"/api/v1/namespaces/{namespace}/pods"
        self._watch = ObjectWatch(target.raw, path, self._on).start()

    def _on(self, kind: str, obj: dict[str, Any], now: float) -> None:
        meta = obj["metadata"]
        if IP in (meta.get("annotations") or {}):
            with self._lock:
                self.seen.setdefault(meta["name"], now)

    def count(self) -> int:
        with self._lock:
            return len(self.seen)

    def stop(self) -> None:
        self._watch.stop()


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {
            "schedulerName": NO_SCHEDULER,  # stays Pending on a real cluster (bench.workload)
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9"}],
        },
    }


def _wait(annotated: Annotated, n: int, subject: Subject, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while annotated.count() < n:
        if not subject.alive():
            raise RuntimeError(f"podport exited: {subject.tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{annotated.count()} of {n} pods annotated: {subject.tail()}")
        time.sleep(0.02)


def _per_pod(own: requests.Counts) -> Metrics:
    return {k.removeprefix("x_"): v for k, v in requests.summary(own, PODS, "x", "pod").items()}


@benchmark(
    "port-burst",
    describe=f"""
{PODS:,} pods are created by {WRITERS} connections from the harness while the podport
controller runs in `python -m manager run` (only `podport` enabled, {WORKERS} workers,
leader election off, client limit 1000 QPS, one fresh network per run, its CRD installed
by the plugin). A canary pod is annotated first (the controller is up). **seconds**: from the
first create until the harness's pod watch has seen `overseer.io/ip` on every pod;
**pods_per_s**; **latency** per pod from its POST's answer to the annotation seen;
**cpu_seconds** of the controller process over the burst, **cpu_ms_per_pod** from the
burst's start until it has settled (no CPU, no new request for 0.5 s), and
**peak_rss_mb**. **API requests per pod** (`writes`, `creates`, `updates`, `patches`,
`deletes`, `reads`; by verb and resource in the table after the figures): the API
server's counts on Pods, LogicalPorts and Events over the same time, less the harness's
own pod creates, divided by the pods.
No peer: the official client and kopf have no IPAM to compare with.
""",
    units={
        "seconds": "s",
        "pods_per_s": "1/s",
        "create_seconds": "s",
        "latency_p50_ms": "ms",
        "latency_p95_ms": "ms",
        "latency_p99_ms": "ms",
        "cpu_seconds": "s",
        "cpu_ms_per_pod": "ms",
        "peak_rss_mb": "MB",
    },
    goals=[Goal("writes_per_pod", "<=", 2)],
)
def port_burst(run: Run) -> Metrics:
    target = run.target
    ns = target.new_namespace("bench-ports")
    net = f"b{uuid.uuid4().hex[:8]}"
    scratch = Path(run.scratch)
    section = {
        "workers": WORKERS,
        "networks": [{"name": net, "cidr": "10.96.0.0/16"}],
        "defaultNetwork": net,
        "installCrd": True,
    }
    config = overseer_config(scratch / f"podport-{ns}.yaml", ns, enable={"podport": section})
    annotated = Annotated(target, ns)
    cmd = [sys.executable, "-m", "manager", "run", "--config", str(config)]
    cmd += ["--kubeconfig", target.kubeconfig]
    subject = Subject("podport", cmd, scratch / f"podport-{ns}.log")
    base = f"/api/v1/namespaces/{ns}/pods"
    try:
        target.raw.request("POST", base, _pod("canary"))
        _wait(annotated, 1, subject, READY_TIMEOUT)
        created: dict[str, float] = {}

        def create(i: int) -> None:
            name = f"p-{i:05d}"
            target.raw.request("POST", base, _pod(name))
            created[name] = time.time()

        cpu0, before = wait_settled(subject.sampler.cpu, target.requests, RESOURCES)
        assert cpu0 is not None
        started = time.time()
        create_seconds, done = run_parallel(
            PODS, WRITERS, create, deadline=time.monotonic() + TIMEOUT
        )
        if done < PODS:
            raise RuntimeError(f"created {done} of {PODS} pods")
        _wait(annotated, PODS + 1, subject, TIMEOUT)
        cpu = subject.sampler.cpu() - cpu0
        cpu_settled, after = wait_settled(subject.sampler.cpu, target.requests, RESOURCES)
        assert cpu_settled is not None
        seen = {n: annotated.seen[n] for n in created}
        seconds = max(seen.values()) - started
        metrics: Metrics = {
            "seconds": seconds,
            "pods_per_s": PODS / seconds,
            "create_seconds": create_seconds,
            **summary_ms([seen[n] - created[n] for n in created], "latency"),
            "cpu_seconds": cpu,
            "cpu_ms_per_pod": 1000 * (cpu_settled - cpu0) / PODS,
            "peak_rss_mb": subject.sampler.peak_rss() / MB,
        }
        if before is None or after is None:
            metrics.update(dict.fromkeys(_per_pod({}), float("nan")))
            return metrics
        own = requests.subtract(requests.delta(after, before), {("create", "", "pods", ""): PODS})
        own = {k: n for k, n in own.items() if n}
        requests.record(run.state, "overseer", own, PODS)
        metrics.update(_per_pod(own))
        print(f"[port-burst]   requests per pod: {requests.describe(own, PODS)}", flush=True)
        return metrics
    finally:
        subject.stop()
        annotated.stop()
        target.delete_namespace(ns)
        with contextlib.suppress(Exception):
            target.raw.request(
                "DELETE",
                f"{PORTS_PATH}?labelSelector=network.overseer.io/network={net}",
                ok=(200, 404),
            )
