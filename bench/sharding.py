"""Benchmark ``sharding``: a controller whose reconcile costs a fixed 20 ms of CPU, over
3,000 objects, on 1, 2 and 3 sharded replicas → throughput, and each replica's share.

Each replica is ``overseer run --plugin benchcpu=bench.cpu_plugin:CpuPlugin`` in its own
process, the controller ``sharded: true`` with 2 workers (the burn holds the GIL: one
process reconciles on one core at most), the default shard Lease timings. Per replica
count: the replicas start and process the objects once (warm-up, ring formed); then every
object gets a new tick in one burst and the harness waits until all carry it. Throughput
is objects over the time from the first tick to the last object done; the share is the
number of objects each replica did (``bench/by``) in that burst.

Then memory (:func:`memory`): ``BENCH_SHARDING_OBJECTS`` ConfigMaps (default 30,000), each
owning one Secret, read by ``bench.mem_plugin`` on 1, 2 and 3 replicas and at the join of a
third to two; each replica's figures come from its own /metrics (plain HTTP on
127.0.0.1). On the local API server, once with ``ShardedListAndWatch`` on and once off,
each in a server of its own; with ``--kubeconfig``, once, in whatever mode the cluster
serves. Then the exposer's shapes (:mod:`bench.shardexposer`): Deployments exposed by
the built-in exposer on 1 and 3 sharded replicas. ``BENCH_SHARDING_PARTS``
(``throughput,memory,exposer``) selects the parts.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench import mem_plugin, shardexposer
from bench.exposers import ROOT, Subject, free_port, installed_controllers, sharded_config
from bench.registry import Goal, Metrics, Ratio, Run, benchmark
from bench.target import Target, local_server

OBJECTS = 3000
BURN_MS = 20.0
COUNTS = (1, 2, 3)
TIMEOUT = 600.0  # seconds for one burst (3,000 x 20 ms = 60 s of CPU on one replica)
MB = 1024 * 1024
PARTS = os.environ.get("BENCH_SHARDING_PARTS", "throughput,memory,exposer").split(",")
MEM_LABELS = ("server", "client", "cluster")


def _config(path: Path, namespace: str) -> Path:
    controllers: dict[str, Any] = {name: {"enabled": False} for name in installed_controllers()}
    controllers["benchcpu"] = {"enabled": True, "sharded": True, "workers": 2, "burnMs": BURN_MS}
    doc = {
        "client": {"qps": 1000.0, "burst": 2000},
        "leaderElection": {"enabled": False},
        "sharding": {
            "ringName": "bench",
            "namespace": namespace,
            # the defaults: the burning replicas starve the API server of CPU on 2 cores
            "leaseDuration": 15.0,
            "renewDeadline": 10.0,
            "retryPeriod": 2.0,
        },
        "metricsBindAddress": "0",
        "healthProbeBindAddress": "0",
        "watchNamespace": namespace,
        "log": {"format": "json", "level": "warning"},
        "controllers": controllers,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _overseer(name: str, config: Path, kubeconfig: str, plugin: str, scratch: Path) -> Subject:
    """An ``overseer run`` replica named ``name`` (its Lease identity) with ``plugin``."""
    cmd = [
        sys.executable,
        "-m",
        "manager",
        "run",
        "--config",
        str(config),
        "--kubeconfig",
        kubeconfig,
        "--plugin",
        plugin,
    ]
    env = {"POD_NAME": name, "PYTHONPATH": str(ROOT)}
    return Subject(name, cmd, scratch / f"{name}.log", env)


def _replica(index: int, config: Path, kubeconfig: str, scratch: Path) -> Subject:
    return _overseer(
        f"shard-{index}", config, kubeconfig, "benchcpu=bench.cpu_plugin:CpuPlugin", scratch
    )


def _objects(target: Target, ns: str) -> list[dict[str, Any]]:
    path = f"/api/v1/namespaces/{ns}/configmaps?labelSelector=bench-cpu%3Dtrue"
    return list(orjson.loads(target.raw.request("GET", path))["items"])


def _done(target: Target, ns: str, tick: str) -> tuple[int, dict[str, int]]:
    by: dict[str, int] = {}
    done = 0
    for obj in _objects(target, ns):
        ann = obj["metadata"].get("annotations") or {}
        if ann.get("bench/done") == tick:
            done += 1
            who = str(ann.get("bench/by", "")).split("_", 1)[0]
            by[who] = by.get(who, 0) + 1
    return done, by


def _tick(target: Target, ns: str, tick: str) -> None:
    def patch(i: int) -> None:
        target.raw.request(
            "PATCH",
            f"/api/v1/namespaces/{ns}/configmaps/cpu-{i}",
            {"data": {"tick": tick}},
            content_type="application/merge-patch+json",
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(patch, range(OBJECTS)))


def _wait_done(target: Target, ns: str, tick: str, replicas: list[Subject]) -> float:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        done, _ = _done(target, ns, tick)
        if done == OBJECTS:
            return time.monotonic()
        for r in replicas:
            if not r.alive():
                raise RuntimeError(f"{r.name} exited:\n{r.tail(2000)}")
        time.sleep(0.25)
    raise RuntimeError(f"tick {tick}: not every object done within {TIMEOUT:.0f}s")


def _setup(run: Run) -> None:
    target = run.target
    ns = target.new_namespace("bench-sharding")
    run.state["ns"] = ns

    def create(i: int) -> None:
        body = {
            "metadata": {"name": f"cpu-{i}", "labels": {"bench-cpu": "true"}},
            "data": {"tick": "0"},
        }
        target.raw.request("POST", f"/api/v1/namespaces/{ns}/configmaps", body)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(OBJECTS)))


# -- memory: what each replica lists, watches and caches -------------------------------

MEM_OBJECTS = int(os.environ.get("BENCH_SHARDING_OBJECTS", "30000"))
MEM_TOUCHED = 0.1  # share of the primary objects updated once to count watch events
MEM_TIMEOUT = 900.0  # seconds for replicas to converge, or for one join
PAYLOAD = "x" * 512  # bytes of data per ConfigMap (a Secret carries half of it)
GATE = "ShardedListAndWatch"


def _mem_config(path: Path, namespace: str, port: int) -> Path:
    section = {"sharded": True, "workers": 4}
    return sharded_config(
        path, namespace, ring="benchmem", metrics_port=port, enable={"benchmem": section}
    )


@dataclass
class _Member:
    """One replica of the memory part and the /metrics it serves."""

    subject: Subject
    port: int
    started: float

    def scrape(self) -> dict[str, float]:
        """The figures of this replica now: objects cached (primary, owned), objects
        listed and watch events received by those two informers, distinct keys
        reconciled, ring members, and ``mode_server`` / ``mode_client`` (1.0 for the
        primary informer's mode)."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        out = {k: 0.0 for k in ("primary", "owned", "listed", "events", "reconciles", "members")}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                resource = s.labels.get("resource", "")
                which = (
                    "primary"
                    if mem_plugin.SELECTOR in resource
                    else "owned"
                    if mem_plugin.OWNED_SELECTOR in resource
                    else ""
                )
                if s.name == "overseer_informer_objects" and which:
                    out[which] += s.value
                elif s.name == "overseer_informer_listed_objects_total" and which:
                    out["listed"] += s.value
                elif s.name == "overseer_informer_watch_events_total" and which:
                    out["events"] += s.value
                elif s.name == "bench_mem_keys_reconciled":
                    out["reconciles"] = s.value
                elif s.name == "shard_ring_members":
                    out["members"] = max(out["members"], s.value)
                elif s.name == "overseer_shard_informer_mode" and which == "primary":
                    out[f"mode_{s.labels.get('mode')}"] = s.value
        return out

    def try_scrape(self) -> dict[str, float] | None:
        try:
            return self.scrape()
        except OSError:  # not serving yet
            return None


def _mem_start(index: int, ns: str, kubeconfig: str, scratch: Path) -> _Member:
    name = f"mem-{index}"
    port = free_port()
    config = _mem_config(scratch / f"{name}.yaml", ns, port)
    subject = _overseer(name, config, kubeconfig, "benchmem=bench.mem_plugin:MemPlugin", scratch)
    return _Member(subject, port, time.monotonic())


def _mem_setup(target: Target) -> str:
    """A namespace with MEM_OBJECTS ConfigMaps, each the controller owner of one Secret."""
    ns = target.new_namespace("bench-shardmem")
    started = time.monotonic()

    def create(i: int) -> None:
        body = {
            "metadata": {"name": f"mem-{i}", "labels": {"bench-mem": "true"}},
            "data": {"payload": PAYLOAD, "tick": "0"},
        }
        made = orjson.loads(target.raw.request("POST", f"/api/v1/namespaces/{ns}/configmaps", body))
        owner = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": f"mem-{i}",
            "uid": made["metadata"]["uid"],
            "controller": True,
        }
        secret = {
            "metadata": {
                "name": f"mem-{i}",
                "labels": {"bench-mem-owned": "true"},
                "ownerReferences": [owner],
            },
            "stringData": {"payload": PAYLOAD[: len(PAYLOAD) // 2]},
        }
        target.raw.request("POST", f"/api/v1/namespaces/{ns}/secrets", secret)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(MEM_OBJECTS)))
    print(
        f"[sharding] memory: {MEM_OBJECTS:,} ConfigMaps and their Secrets created in "
        f"{time.monotonic() - started:.0f}s",
        flush=True,
    )
    return ns


def _converged(members: list[_Member], count: int) -> list[dict[str, float]] | None:
    """Every replica's figures once the ring has ``count`` members everywhere, the shares
    cover every primary object exactly once and every replica reconciled each of its keys."""
    figures = []
    for m in members:
        if not m.subject.alive():
            raise RuntimeError(f"{m.subject.name} exited:\n{m.subject.tail(2000)}")
        f = m.try_scrape()
        if f is None or f["members"] != count or f["reconciles"] < f["primary"]:
            return None
        if f["primary"] == 0:  # no share yet (or none at all: not at these sizes)
            return None
        figures.append(f)
    if sum(f["primary"] for f in figures) != MEM_OBJECTS:
        return None
    if sum(f["owned"] for f in figures) != MEM_OBJECTS:
        return None
    return figures


def _wait_converged(members: list[_Member], count: int) -> tuple[float, list[dict[str, float]]]:
    deadline = time.monotonic() + MEM_TIMEOUT
    while time.monotonic() < deadline:
        figures = _converged(members, count)
        if figures is not None:
            return time.monotonic(), figures
        time.sleep(0.5)
    last = [m.try_scrape() for m in members]
    raise RuntimeError(f"{count} replica(s) not converged within {MEM_TIMEOUT:.0f}s: {last}")


def _touch(target: Target, ns: str, n: int, tick: str) -> None:
    def patch(i: int) -> None:
        target.raw.request(
            "PATCH",
            f"/api/v1/namespaces/{ns}/configmaps/mem-{i}",
            {"data": {"tick": tick}},
            content_type="application/merge-patch+json",
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(patch, range(n)))


def _events_settled(members: list[_Member], before: list[float], least: int) -> list[float]:
    """Watch events each replica received since ``before``, once the total reached
    ``least`` (every update delivered somewhere) and stayed still for 3 s."""
    deadline = time.monotonic() + MEM_TIMEOUT
    last: list[float] = []
    still_since = time.monotonic()
    while time.monotonic() < deadline:
        now = [m.scrape()["events"] - b for m, b in zip(members, before, strict=True)]
        if now != last:
            last, still_since = now, time.monotonic()
        elif sum(now) >= least and time.monotonic() - still_since >= 3.0:
            return now
        time.sleep(0.5)
    raise RuntimeError(f"watch events did not settle within {MEM_TIMEOUT:.0f}s: {last}")


def _mem_mode(target: Target, scratch: Path, label: str, metrics: Metrics) -> None:
    """Measure 1, 2, 3 replicas and the join of a third to two on ``target``."""
    ns = _mem_setup(target)
    total = 2 * MEM_OBJECTS  # primary + owned objects
    touched = max(1, int(MEM_OBJECTS * MEM_TOUCHED))
    rss: dict[int, float] = {}
    try:
        for count in COUNTS:
            members = [_mem_start(i, ns, target.kubeconfig, scratch) for i in range(count)]
            try:
                _, figures = _wait_converged(members, count)
                modes = [k[5:] for f in figures for k, v in f.items() if k[:5] == "mode_" and v]
                time.sleep(2.0)
                before = [m.scrape()["events"] for m in members]
                _touch(target, ns, touched, f"t{count}")
                events = _events_settled(members, before, touched)
                peaks = [m.subject.sampler.peak_rss() / MB for m in members]
                cached = [f["primary"] + f["owned"] for f in figures]
                rss[count] = max(peaks)
                metrics[f"{label}_rss_mb_{count}"] = max(peaks)
                metrics[f"{label}_rss_pct_{count}"] = max(peaks) / rss[1] * 100
                metrics[f"{label}_cached_pct_{count}"] = max(cached) / total * 100
                metrics[f"{label}_watch_pct_{count}"] = max(events) / touched * 100
                print(
                    f"[sharding] memory, {label} ({'/'.join(sorted(set(modes)))}), {count} "
                    f"replica(s): peak RSS {[round(p) for p in peaks]} MiB, cached "
                    f"{[int(c) for c in cached]} of {total:,}, watch events "
                    f"{[int(e) for e in events]} for {touched:,} updates",
                    flush=True,
                )
                if count == 2:
                    _join(
                        target,
                        members=members,
                        ns=ns,
                        scratch=scratch,
                        label=label,
                        metrics=metrics,
                    )
            except Exception:
                for m in members:
                    print(f"--- {m.subject.name} ---\n{m.subject.tail(2000)}", file=sys.stderr)
                raise
            finally:
                for m in members:
                    m.subject.stop()
    finally:
        target.delete_namespace(ns)


def _join(
    target: Target,
    *,
    members: list[_Member],
    ns: str,
    scratch: Path,
    label: str,
    metrics: Metrics,
) -> None:
    """A third replica joins two converged ones: objects listed because of it (by the
    old replicas, then by the newcomer) and seconds from its start until the ring has
    three members and it reconciled every key of its share. ``members`` gets it."""
    listed = [m.scrape()["listed"] for m in members]
    newcomer = _mem_start(len(members), ns, target.kubeconfig, scratch)
    members.append(newcomer)
    done, figures = _wait_converged(members, len(members))
    old = sum(f["listed"] for f in figures[:-1]) - sum(listed)
    new = figures[-1]["listed"]
    metrics[f"{label}_join_s"] = done - newcomer.started
    metrics[f"{label}_join_listed_old"] = old
    metrics[f"{label}_join_listed_new"] = new
    print(
        f"[sharding] memory, {label}: a third replica joined in "
        f"{done - newcomer.started:.1f}s (its share reconciled), objects listed: "
        f"{int(old)} by the two others, {int(new)} by it",
        flush=True,
    )


def memory(run: Run, metrics: Metrics) -> None:
    """The memory part: on the local API server with the gate on (server mode) and off
    (client filter), each in a server of its own; on a cluster, the mode it serves."""
    scratch = Path(run.scratch) / f"shardmem-{run.index}"
    scratch.mkdir(parents=True, exist_ok=True)
    if not run.target.local:
        _mem_mode(run.target, scratch, "cluster", metrics)
        return
    for label, gates in (("server", f"{GATE}=true"), ("client", f"{GATE}=false")):
        with local_server(gates) as target:
            _mem_mode(target, scratch, label, metrics)


@benchmark(
    "sharding",
    describe=f"""
A sharded controller whose reconcile burns {BURN_MS:g} ms of CPU (thread time) and then
writes one annotation, over {OBJECTS:,} ConfigMaps, on 1, 2 and 3 replicas (own
processes, 2 workers each, the default shard Lease timings). For each replica count the
replicas start and process every object once (ring formed, caches warm), then every
object gets a new tick in one burst: **throughput_N** is objects per second from the
first tick to the last object done, **share_dev_N_pct** the largest deviation of a
replica's share of that burst from an even split, **cpu_seconds_N** all replicas' CPU.
The machine has 2 cores, shared with the API server process and the load generator: one
replica uses at most one (the burn holds the GIL), so 2 replicas can at most double the
throughput and a third adds little here; on a real cluster each replica has its own
CPU.

**Memory** (then): {MEM_OBJECTS:,} ConfigMaps (512 bytes of data each), each the
controller owner of one Secret: {2 * MEM_OBJECTS:,} objects. The controller
(`bench/mem_plugin.py`, sharded, 4 workers) caches the ConfigMaps (`for_`) and the
Secrets (`owns`) and only reads them: what is measured is what a replica lists, watches
and holds. 1, 2 and 3 replicas (own processes, started together, default shard Lease
timings), each on the local API server with `ShardedListAndWatch` on (**server**: lists
and watches carry the shard selector) and off (**client**: the same ranges filtered on
the client), in servers of their own; with `--kubeconfig`, once, as **cluster** (server
mode only if that kube-apiserver runs with `--feature-gates=ShardedListAndWatch=true`;
the mode found is printed). Once every replica has reconciled its share:
**rss_mb_N** the largest peak RSS of a replica, **rss_pct_N** that as % of one replica's,
**cached_pct_N** the largest share of the objects one replica caches
(`overseer_informer_objects`), then {MEM_TOUCHED:.0%} of the ConfigMaps are updated once:
**watch_pct_N** the most watch events one replica received
(`overseer_informer_watch_events_total`, before any filter) as % of those updates. The
join: a third replica starts beside two converged ones; **join_s** seconds from its
start until the ring has three members and it reconciled every key of its share (at
least one lease duration, 15 s: a newcomer watches the ring that long before it starts a
key), **join_listed_old** objects the two others listed because of it (kept ranges are
never relisted), **join_listed_new** objects it listed. `BENCH_SHARDING_OBJECTS=N` sets the
primary objects (default 30,000), `BENCH_SHARDING_PARTS=memory` (or `throughput`) runs one
part.
""",
    units={
        **{f"throughput_{n}": "objects/s" for n in COUNTS},
        **{f"share_dev_{n}_pct": "%" for n in COUNTS},
        **{f"cpu_seconds_{n}": "s" for n in COUNTS},
        **{f"{m}_rss_mb_{n}": "MiB" for m in MEM_LABELS for n in COUNTS},
        **{f"{m}_rss_pct_{n}": "%" for m in MEM_LABELS for n in COUNTS},
        **{f"{m}_cached_pct_{n}": "%" for m in MEM_LABELS for n in COUNTS},
        **{f"{m}_watch_pct_{n}": "%" for m in MEM_LABELS for n in COUNTS},
        **{f"{m}_join_s": "s" for m in MEM_LABELS},
        **{f"{m}_join_listed_old": "objects" for m in MEM_LABELS},
        **{f"{m}_join_listed_new": "objects" for m in MEM_LABELS},
        "exposer_base_mb": "MiB",
        **{f"exposer_growth_mb_{r}_{n}": "MiB" for r in (1, 3) for n in shardexposer.SIZES},
        **{f"exposer_peak_mb_{r}_{n}": "MiB" for r in (1, 3) for n in shardexposer.SIZES},
        **{f"exposer_growth_pct_3_{n}": "%" for n in shardexposer.SIZES},
    },
    ratios=[
        Ratio("speed-up, 2 replicas", "throughput_2", "throughput_1", ">= 1.5"),
        Ratio("speed-up, 3 replicas", "throughput_3", "throughput_1", ""),
    ],
    goals=[
        Goal("share_dev_2_pct", "<=", 15),
        Goal("share_dev_3_pct", "<=", 15),
        Goal("server_cached_pct_3", "<=", 40),
        Goal("server_rss_pct_3", "<=", 50),
        *(Goal(f"exposer_growth_pct_3_{n}", "<=", 50) for n in shardexposer.SIZES),
    ],
)
def sharding(run: Run) -> Metrics:
    target = run.target
    if "throughput" in PARTS and "ns" not in run.state:
        _setup(run)
    ns = run.state.get("ns", "")
    scratch = Path(run.scratch) / f"sharding-{run.index}"
    scratch.mkdir(parents=True, exist_ok=True)
    config = _config(scratch / "overseer.yaml", ns)
    metrics: Metrics = {}
    for count in COUNTS if "throughput" in PARTS else ():
        warm = f"warm-{run.index}-{count}"
        burst = f"burst-{run.index}-{count}"
        replicas = [_replica(i, config, target.kubeconfig, scratch) for i in range(count)]
        try:
            _tick(target, ns, warm)
            _wait_done(target, ns, warm, replicas)
            time.sleep(2.0)  # every replica in the ring, nothing in flight
            cpu_before = sum(r.sampler.cpu() for r in replicas)
            started = time.monotonic()
            _tick(target, ns, burst)
            finished = _wait_done(target, ns, burst, replicas)
            cpu = sum(r.sampler.cpu() for r in replicas) - cpu_before
            _, by = _done(target, ns, burst)
        except Exception:
            for r in replicas:
                print(f"--- {r.name} ---\n{r.tail(2000)}", file=sys.stderr)
            raise
        finally:
            for r in replicas:
                r.stop()
        even = OBJECTS / count
        shares = [by.get(r.name, 0) for r in replicas]
        metrics[f"throughput_{count}"] = OBJECTS / (finished - started)
        metrics[f"share_dev_{count}_pct"] = max(abs(s - even) / even * 100 for s in shares)
        metrics[f"cpu_seconds_{count}"] = cpu
        print(
            f"[sharding] {count} replica(s): {OBJECTS / (finished - started):.1f} objects/s, "
            f"shares {shares} (mean {statistics.mean(shares):.0f})",
            flush=True,
        )
    if "memory" in PARTS:
        memory(run, metrics)
    if "exposer" in PARTS:
        scratch = Path(run.scratch) / f"shardexposer-{run.index}"
        scratch.mkdir(parents=True, exist_ok=True)
        shardexposer.exposer(scratch, metrics)
    return metrics
