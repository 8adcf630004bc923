"""The exposer's shapes for ``python -m bench sharding`` (``BENCH_SHARDING_PARTS=exposer``):
where a sharded exposer replica's memory goes, and whether sharding divides it.

For each size in ``BENCH_SHARDING_DEPLOYMENTS`` (default ``3000,8000``), on a local API
server of its own with ``ShardedListAndWatch`` on: that many opted-in Deployments in one
namespace, then the built-in exposer (sharded, ``exposedEvent: false``, otherwise its
defaults) on 1 replica and, on a fresh server with the same Deployments, on 3 replicas
(own processes, started together, the default shard Lease timings). Once every
Deployment is exposed (the replicas' ``overseer_exposer_exposed_deployments`` add up to
the size, each replica in a ring of all) 10% of the Deployments get a status update (what
the deployment controller writes as its ReplicaSets roll: the exposer's predicates drop
it) and the harness waits for the watch events to settle.

Figures per replica: **base** the RSS of a replica of the same configuration whose
namespace holds nothing (its ring formed, caches synced: what no sharding can divide),
**peak** its peak RSS, **growth** peak minus base; per informer the objects it caches
(``overseer_informer_objects``) and the watch events it received. The metrics:
``exposer_growth_mb_<R>_<N>`` the largest growth of a replica with R replicas and N
Deployments, ``exposer_growth_pct_3_<N>`` the fullest of 3 replicas' growth as % of one
replica's (the target: <= 50), ``exposer_base_mb`` the base.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.request
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

from bench.deployments import deployment
from bench.exposers import ROOT, Subject, free_port, sharded_config
from bench.registry import Metrics
from bench.target import Target, local_server

SIZES = tuple(
    int(n) for n in os.environ.get("BENCH_SHARDING_DEPLOYMENTS", "3000,8000").split(",") if n
)
REPLICAS = (1, 3)
TOUCHED = 0.1  # share of the Deployments given a status update
TIMEOUT = 900.0  # seconds for the replicas to expose every Deployment
MB = 1024 * 1024
GATE = "ShardedListAndWatch=true"


def _config(path: Path, namespace: str, port: int) -> Path:
    section = {"sharded": True, "exposedEvent": False}
    return sharded_config(
        path, namespace, ring="benchexposer", metrics_port=port, enable={"exposer": section}
    )


@dataclass
class _Replica:
    subject: Subject
    port: int

    def scrape(self) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """(totals, per informer): exposed Deployments and ring members; per informer
        (its ``resource`` label) objects cached, objects listed and watch events."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        totals = {"exposed": 0.0, "members": 0.0}
        informers: dict[str, dict[str, float]] = defaultdict(dict)
        names = {
            "overseer_informer_objects": "objects",
            "overseer_informer_listed_objects_total": "listed",
            "overseer_informer_watch_events_total": "events",
        }
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "overseer_exposer_exposed_deployments":
                    totals["exposed"] = s.value
                elif s.name == "shard_ring_members":
                    totals["members"] = max(totals["members"], s.value)
                elif s.name in names:
                    informers[s.labels.get("resource", "?")][names[s.name]] = s.value
        return totals, dict(informers)

    def try_scrape(self) -> tuple[dict[str, float], dict[str, dict[str, float]]] | None:
        try:
            return self.scrape()
        except OSError:
            return None

    def rss(self) -> int:
        return int(psutil.Process(self.subject.proc.pid).memory_info().rss)


def _start(index: int, ns: str, kubeconfig: str, scratch: Path) -> _Replica:
    name = f"exposer-{index}"
    port = free_port()
    config = _config(scratch / f"{name}.yaml", ns, port)
    cmd = [sys.executable, "-m", "manager", "run", "--config", str(config)]
    cmd += ["--kubeconfig", kubeconfig]
    subject = Subject(
        name, cmd, scratch / f"{name}.log", {"POD_NAME": name, "PYTHONPATH": str(ROOT)}
    )
    return _Replica(subject, port)


def _create(target: Target, ns: str, n: int) -> None:
    started = time.monotonic()

    def post(i: int) -> None:
        target.raw.request(
            "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", deployment(f"d-{i}")
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(post, range(n)))
    print(f"[sharding] exposer: {n:,} Deployments in {time.monotonic() - started:.0f}s", flush=True)


def _status(target: Target, ns: str, n: int) -> None:
    """A status update per Deployment, as the deployment controller writes them."""

    def patch(i: int) -> None:
        status = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1}
        target.raw.request(
            "PATCH",
            f"/apis/apps/v1/namespaces/{ns}/deployments/d-{i}/status",
            {"status": status},
            content_type="application/merge-patch+json",
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(patch, range(n)))


def _wait(replicas: list[_Replica], exposed: int, what: str) -> list[dict[str, dict[str, float]]]:
    deadline = time.monotonic() + TIMEOUT
    last: list[Any] = []
    while time.monotonic() < deadline:
        for r in replicas:
            if not r.subject.alive():
                raise RuntimeError(f"{r.subject.name} exited:\n{r.subject.tail(2000)}")
        scraped = [r.try_scrape() for r in replicas]
        last = scraped
        if all(s is not None for s in scraped):
            totals = [s[0] for s in scraped if s is not None]
            if (
                all(t["members"] == len(replicas) for t in totals)
                and sum(t["exposed"] for t in totals) >= exposed
            ):
                return [s[1] for s in scraped if s is not None]
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not converged within {TIMEOUT:.0f}s: {last}")


def _settled(replicas: list[_Replica]) -> None:
    """Until no replica's watch event count moved for 3 s."""
    last: list[float] = []
    still = time.monotonic()
    deadline = still + TIMEOUT
    while time.monotonic() < deadline:
        now = [  # the shard Leases' renewals never stop: not theirs
            sum(f.get("events", 0.0) for name, f in r.scrape()[1].items() if "leases" not in name)
            for r in replicas
        ]
        if now != last:
            last, still = now, time.monotonic()
        elif time.monotonic() - still >= 3.0:
            return
        time.sleep(0.5)


def _run(
    target: Target, scratch: Path, ns: str, count: int, size: int
) -> tuple[list[float], list[float], list[dict[str, dict[str, float]]]]:
    """``count`` replicas on ``ns`` until ``size`` Deployments are exposed and a status
    churn settled: (peak RSS, RSS at the end, per informer figures) per replica."""
    replicas = [_start(i, ns, target.kubeconfig, scratch) for i in range(count)]
    try:
        _wait(replicas, size, f"{count} replica(s), {size} Deployments")
        if size:
            _status(target, ns, max(1, int(size * TOUCHED)))
            _settled(replicas)
        informers = [r.scrape()[1] for r in replicas]
        now = [r.rss() / MB for r in replicas]
        for r in replicas:
            r.subject.sampler.sample()
        peaks = [r.subject.sampler.peak_rss() / MB for r in replicas]
        return peaks, now, informers
    except Exception:
        for r in replicas:
            print(f"--- {r.subject.name} ---\n{r.subject.tail(2000)}", file=sys.stderr)
        raise
    finally:
        for r in replicas:
            r.subject.stop()


def _describe(count: int, size: int, peaks: list[float], base: float, informers: list[Any]) -> None:
    for i, (peak, figures) in enumerate(zip(peaks, informers, strict=True)):
        parts = ", ".join(
            f"{name}: {int(f.get('objects', 0))} cached, {int(f.get('listed', 0))} listed, "
            f"{int(f.get('events', 0))} events"
            for name, f in sorted(figures.items())
        )
        print(
            f"[sharding] exposer, {size:,} Deployments, {count} replica(s), #{i}: peak "
            f"{peak:.0f} MiB (growth {peak - base:.0f}); {parts}",
            flush=True,
        )


def exposer(scratch: Path, metrics: Metrics) -> None:
    """The exposer's shapes, on local API servers with the gate on."""
    with local_server(GATE) as target:
        ns = target.new_namespace("bench-exposer-base")
        peaks, _, informers = _run(target, scratch, ns, 1, 0)
        base = peaks[0]
        metrics["exposer_base_mb"] = base
        print(f"[sharding] exposer: base (empty namespace) {base:.0f} MiB", flush=True)
    for size in SIZES:
        growth: dict[int, float] = {}
        for count in REPLICAS:
            with local_server(GATE) as target:
                ns = target.new_namespace("bench-exposer")
                _create(target, ns, size)
                peaks, _, informers = _run(target, scratch, ns, count, size)
            _describe(count, size, peaks, base, informers)
            growth[count] = max(peaks) - base
            metrics[f"exposer_growth_mb_{count}_{size}"] = growth[count]
            metrics[f"exposer_peak_mb_{count}_{size}"] = max(peaks)
        metrics[f"exposer_growth_pct_3_{size}"] = growth[3] / growth[1] * 100
