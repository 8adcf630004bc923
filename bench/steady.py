"""Benchmark ``steady-events``: Deployments updated at a steady rate R → event-to-reconcile
latency (update written → its Service updated) and the highest R each subject keeps up
with, for Overseer's exposer and the peers (:mod:`bench.exposers`).

Each update sets a new, growing first container port (:func:`bench.deployments.port_of`),
which every subject must copy into the Service; the harness watches Services and records
when each Deployment's Service first showed each port. An update's latency runs from the
generator's answered PATCH to the first Service event showing that port *or a later one*
(a subject that falls behind coalesces queued updates, and the later state includes the
earlier update).
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from pathlib import Path
from typing import Any

from bench import requests
from bench.child import Child
from bench.deployments import BASE_PORT, deployment, port_of
from bench.exposers import EXPOSERS, PAIRS, Subject, per_run_ratio, start_exposer, turn_order
from bench.exposure import Exposures, wait_exposed
from bench.latency import percentile, summary_ms
from bench.registry import Goal, Metrics, Ratio, Run, benchmark
from bench.settle import wait_settled
from bench.target import Target
from bench.watcher import ObjectWatch
from bench.workload import run_parallel

NAMES = 100  # Deployments updated round-robin: each is updated every NAMES / R seconds
RATES = tuple(int(r) for r in os.environ.get("BENCH_RATES", "50,100,200,400").split(","))
SECONDS = float(os.environ.get("BENCH_STEP_SECONDS", "10"))  # per rate
# Updates at the lowest rate, whose p99 is a goal: enough that the p99 is the 30th slowest
# of them, not the 5th of a 10 s step (which swung 10x between runs)
LOW_RATE_UPDATES = int(os.environ.get("BENCH_LOW_RATE_UPDATES", "3000"))
WORKERS = 4
GEN_THREADS = 8
DRAIN = 5.0  # seconds after the last write for the Service to catch up, to count as kept up
SETTLE = 30.0  # seconds to wait for a step to be fully reflected before the next
MB = 1024 * 1024
RESOURCES = ("deployments", "services", "ingresses", "events")


class Ports:
    """Per Service: the times at which it first showed each (growing) first port."""

    def __init__(self, target: Target, namespace: str) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[list[int], list[float]]] = {}
        self._watch = ObjectWatch(
            target.raw, f"/api/v1/namespaces/{namespace}/services", self._on
        ).start()

    def _on(self, kind: str, obj: dict[str, Any], now: float) -> None:
        ports = (obj.get("spec") or {}).get("ports") or []
        if kind == "DELETED" or not ports:
            return
        numbers = [int(p["port"]) for p in ports if int(p["port"]) >= BASE_PORT]
        if not numbers:
            return
        port = max(numbers)
        name = obj["metadata"]["name"]
        with self._lock:
            seen_ports, times = self._seen.setdefault(name, ([], []))
            if not seen_ports or port > seen_ports[-1]:
                seen_ports.append(port)
                times.append(now)

    def reflected_at(self, name: str, port: int) -> float | None:
        """When the Service ``name`` first showed ``port`` or higher (None: not yet)."""
        with self._lock:
            seen_ports, times = self._seen.get(name, ([], []))
            i = bisect.bisect_left(seen_ports, port)
            return times[i] if i < len(times) else None

    def stop(self) -> None:
        self._watch.stop()
        if self._watch.error is not None:
            raise self._watch.error


def step_seconds(rate: int) -> float:
    """How long the generator writes at ``rate``: :data:`SECONDS`, or for the lowest rate
    long enough for :data:`LOW_RATE_UPDATES` updates."""
    if rate == RATES[0]:
        return max(SECONDS, LOW_RATE_UPDATES / rate)
    return SECONDS


def _step(run: Run, ns: str, ports: Ports, subject: Subject, *, rate: int, first: int) -> Metrics:
    seconds = step_seconds(rate)
    with Child(
        "bench.deployments",
        "update",
        "--kubeconfig",
        run.target.kubeconfig,
        "--namespace",
        ns,
        "--prefix",
        "d",
        "--names",
        str(NAMES),
        "--rate",
        str(rate),
        "--seconds",
        str(seconds),
        "--first",
        str(first),
        "--threads",
        str(GEN_THREADS),
    ) as generator:
        result = generator.next(seconds * 3 + 60)
    writes: list[list[float]] = result["writes"]
    last_write = max(t for _, t in writes)
    deadline = time.monotonic() + SETTLE
    pending = writes
    while pending and time.monotonic() < deadline:
        if not subject.alive():
            raise RuntimeError(f"{subject.name} exited: {subject.tail()}")
        pending = [
            w
            for w in pending
            if ports.reflected_at(f"d-{int(w[0]) % NAMES:05d}", port_of(int(w[0]), NAMES)) is None
        ]
        time.sleep(0.05)
    latencies: list[float] = []
    now = time.time()
    for g, t in writes:
        seen = ports.reflected_at(f"d-{int(g) % NAMES:05d}", port_of(int(g), NAMES))
        latencies.append((seen if seen is not None else now) - t)  # unseen: a lower bound
    lags = sorted(latencies)
    caught_up = max(t + lat for (_, t), lat in zip(writes, latencies, strict=True)) - last_write
    # Kept up: 99% of updates were reconciled before the next update of the same
    # Deployment arrived. A subject that falls behind coalesces queued updates (a key is
    # queued once), so its queue stays bounded by the number of Deployments, and the
    # backlog shows as latency above the per-Deployment update interval instead.
    interval = NAMES / rate
    kept_up = not pending and caught_up <= DRAIN and percentile(lags, 99) < interval
    achieved = len(writes) / float(result["seconds"])
    key = f"{subject.name}_r{rate}"
    return {
        **summary_ms(lags, key),
        f"{key}_kept_up": 1.0 if kept_up else 0.0,
        f"{key}_writes_per_s": achieved,
        "updates": float(len(writes)),
    }


def _one(run: Run, kind: str) -> Metrics:
    target = run.target
    ns = target.new_namespace(f"bench-steady-{kind}")
    exposures = Exposures(target, ns)
    names = [f"d-{i:05d}" for i in range(NAMES)]
    base = f"/apis/apps/v1/namespaces/{ns}/deployments"
    run_parallel(
        NAMES,
        4,
        lambda i: target.raw.json("POST", base, deployment(names[i])),
        deadline=time.monotonic() + 120,
    )
    ports = Ports(target, ns)
    subject = start_exposer(kind, target.kubeconfig, ns, Path(run.scratch), workers=WORKERS)
    metrics: Metrics = {}
    try:
        wait_exposed(exposures, names, subject, 120.0, "deployments")
        # the subjects' follow-up work (Events, kopf's annotations) settles first
        cpu0, before = wait_settled(subject.sampler.cpu, target.requests, RESOURCES)
        assert cpu0 is not None
        updates = 0
        busy = 0.0
        highest = 0.0
        all_kept = True
        first = NAMES * 10  # port_of grows from here on
        for rate in RATES:
            t0 = time.monotonic()
            step = _step(run, ns, ports, subject, rate=rate, first=first)
            updates += int(step.pop("updates"))
            busy += time.monotonic() - t0
            first += int(rate * step_seconds(rate)) + NAMES
            metrics.update(step)
            kept = step[f"{kind}_r{rate}_kept_up"] > 0
            all_kept = all_kept and kept
            if all_kept:
                highest = float(rate)
            print(
                f"[steady-events]   {kind} R={rate}: p50 {step[f'{kind}_r{rate}_p50_ms']:.1f} "
                f"p99 {step[f'{kind}_r{rate}_p99_ms']:.1f} ms, kept up {kept}",
                flush=True,
            )
        metrics[f"{kind}_highest_rate"] = highest
        metrics[f"{kind}_cpu_seconds"] = subject.sampler.cpu() - cpu0
        metrics[f"{kind}_cpu_ms_per_update"] = (
            1000 * metrics[f"{kind}_cpu_seconds"] / sum(r * step_seconds(r) for r in RATES)
        )
        metrics[f"{kind}_peak_rss_mb"] = subject.sampler.peak_rss() / MB
        _, after = wait_settled(subject.sampler.cpu, target.requests, RESOURCES)
        if before is None or after is None:
            metrics.update(dict.fromkeys(requests.summary({}, 1, kind, "update"), float("nan")))
            return metrics
        # the generator's own PATCHes of the Deployments are not the subject's
        own = requests.subtract(
            requests.delta(after, before), {("patch", "apps", "deployments", ""): updates}
        )
        own = {k: n for k, n in own.items() if n and k[3] != "status"}
        requests.record(run.state, kind, own, updates)
        metrics.update(requests.summary(own, updates, kind, "update"))
        print(f"[steady-events]   {kind} requests per update: {requests.describe(own, updates)}")
        return metrics
    finally:
        subject.stop()
        exposures.stop()
        ports.stop()
        target.delete_namespace(ns)


@benchmark(
    "steady-events",
    describe=f"""
{NAMES} opted-in Deployments are exposed by one subject (its own process, {WORKERS}
workers, a fresh namespace; subjects as in `exposure-burst`); then a generator process
updates them round-robin at R = {", ".join(map(str, RATES))} updates/s, {SECONDS:g} s per
rate ({step_seconds(RATES[0]):g} s at {RATES[0]}/s: {int(RATES[0] * step_seconds(RATES[0])):,}
updates, so that its p99 is the {int(RATES[0] * step_seconds(RATES[0])) // 100}th slowest, not one
unlucky moment), paced on a schedule over {GEN_THREADS} connections. Every update sets a new first
container port, which the subject copies into the Service (for kopf, an `on.update`
handler on the containers; for the others, the level-based reconcile). **rR_p50/p95/p99_ms**:
from the answered PATCH to the harness's watch seeing the Service with that port or a
later one. **rR_kept_up** = 1 when every update was reflected within {DRAIN:g} s of the last
write and the p99 latency stayed below the interval between two updates of one Deployment
({NAMES} / R s): the subject handled each update before the next one of the same object
came. (A subject that falls behind does not grow an unbounded queue: its work queue
holds each Deployment once and coalesces its updates, so falling behind shows as latency
above that interval and as updates never seen one by one.)
**highest_rate**: the highest R of the ladder kept up, every lower R kept up too.
**rR_writes_per_s**: the rate the generator achieved. **cpu_seconds** of the subject over the
whole ladder, and per update; **peak_rss_mb**. **API requests per update** (`writes`,
`creates`, `updates`, `patches`, `deletes`, `reads`; by verb and resource in the table
after the figures): the API server's counts on Deployments, Services, Ingresses and Events
from before the ladder until the subject has settled after it, less the generator's own
PATCHes, divided by the updates (on a real cluster they include kube-controller-manager's
own writes to the Deployments: their revision annotation).
**overseer-noevent** (`exposedEvent: false`, no `Exposed` Event) runs back to back with
**overseer**; **r50_p99_event_ratio** is the p99 at the lowest rate of the one over the
other, taken inside each run. Both still post an `Updated` Event per changed Service (a
PATCH of one Event per Deployment, count + 1), so this compares the Event machinery's
load, not Events against none.
""",
    units={
        **{
            f"{s}_r{r}_{m}": u
            for s in EXPOSERS
            for r in RATES
            for m, u in (("p50_ms", "ms"), ("p95_ms", "ms"), ("p99_ms", "ms"), ("kept_up", ""))
        },
        **{f"{s}_r{r}_writes_per_s": "1/s" for s in EXPOSERS for r in RATES},
        **{f"{s}_highest_rate": "1/s" for s in EXPOSERS},
        **{f"{s}_cpu_seconds": "s" for s in EXPOSERS},
        **{f"{s}_cpu_ms_per_update": "ms" for s in EXPOSERS},
        **{f"{s}_peak_rss_mb": "MB" for s in EXPOSERS},
        **{f"{s}_r{RATES[0]}_p99_event_ratio": "x" for s in ("overseer", "baseline")},
    },
    ratios=[
        Ratio(
            f"p99 at {RATES[0]}/s, Overseer / overseer-noevent",
            f"overseer_r{RATES[0]}_p99_ms",
            f"overseer-noevent_r{RATES[0]}_p99_ms",
            "<= 1.2",
        ),
        Ratio(
            f"p99 at {RATES[0]}/s, Overseer / baseline",
            f"overseer_r{RATES[0]}_p99_ms",
            f"baseline_r{RATES[0]}_p99_ms",
        ),
        Ratio(
            "CPU seconds, Overseer / baseline",
            "overseer_cpu_seconds",
            "baseline_cpu_seconds",
        ),
    ]
    + [
        Ratio(f"p99 at {r}/s, Overseer / {p}", f"overseer_r{r}_p99_ms", f"{p}_r{r}_p99_ms")
        for r in RATES[:2]
        for p in ("official", "kopf")
    ]
    + [
        Ratio(f"CPU seconds, Overseer / {p}", "overseer_cpu_seconds", f"{p}_cpu_seconds")
        for p in ("official", "kopf")
    ],
    goals=[
        Goal("overseer_r50_p99_ms", "<=", 25),
        Goal("overseer_r100_kept_up", ">=", 1),
        Goal(f"overseer_r{RATES[0]}_p99_event_ratio", "<=", 1.2),
    ],
)
def steady_events(run: Run) -> Metrics:
    metrics: Metrics = {}
    for kind in turn_order(run.index):
        metrics.update(_one(run, kind))
    for on, off in PAIRS:
        # p99 at the lowest rate with and without the Event, back to back in this run
        ratio = per_run_ratio(metrics, f"r{RATES[0]}_p99_ms", on, off)
        if ratio is not None:
            metrics[f"{on}_r{RATES[0]}_p99_event_ratio"] = ratio
    return {k: metrics[k] for k in sorted(metrics, key=_order)}


def _order(metric: str) -> tuple[int, str]:
    kind, rest = metric.split("_", 1)
    rank = EXPOSERS.index(kind) if kind in EXPOSERS else 9
    if rest.startswith("r") and rest[1].isdigit():
        rate, tail = rest[1:].split("_", 1)
        return (rank, f"0{int(rate):06d}{tail}")
    return (rank, f"1{rest}")
