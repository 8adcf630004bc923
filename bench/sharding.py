"""Benchmark ``sharding``: a controller whose reconcile costs a fixed 20 ms of CPU, over
3,000 objects, on 1, 2 and 3 sharded replicas → throughput, and each replica's share.

Each replica is ``overseer run --plugin benchcpu=bench.cpu_plugin:CpuPlugin`` in its own
process, the controller ``sharded: true`` with 2 workers (the burn holds the GIL: one
process reconciles on one core at most), the default shard Lease timings. Per replica
count: the replicas start and process the objects once (warm-up, ring formed); then every
object gets a new tick in one burst and the harness waits until all carry it. Throughput
is objects over the time from the first tick to the last object done; the share is the
number of objects each replica did (``bench/by``) in that burst.
"""

from __future__ import annotations

import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench.exposers import ROOT, Subject, installed_controllers
from bench.registry import Goal, Metrics, Ratio, Run, benchmark
from bench.target import Target

OBJECTS = 3000
BURN_MS = 20.0
COUNTS = (1, 2, 3)
TIMEOUT = 600.0  # seconds for one burst (3,000 x 20 ms = 60 s of CPU on one replica)
MB = 1024 * 1024


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


def _replica(index: int, config: Path, kubeconfig: str, scratch: Path) -> Subject:
    name = f"shard-{index}"
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
        "benchcpu=bench.cpu_plugin:CpuPlugin",
    ]
    env = {"POD_NAME": name, "PYTHONPATH": str(ROOT)}
    return Subject(name, cmd, scratch / f"{name}.log", env)


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
""",
    units={
        **{f"throughput_{n}": "objects/s" for n in COUNTS},
        **{f"share_dev_{n}_pct": "%" for n in COUNTS},
        **{f"cpu_seconds_{n}": "s" for n in COUNTS},
    },
    ratios=[
        Ratio("speed-up, 2 replicas", "throughput_2", "throughput_1", ">= 1.5"),
        Ratio("speed-up, 3 replicas", "throughput_3", "throughput_1", ""),
    ],
    goals=[Goal("share_dev_2_pct", "<=", 15), Goal("share_dev_3_pct", "<=", 15)],
)
def sharding(run: Run) -> Metrics:
    target = run.target
    if "ns" not in run.state:
        _setup(run)
    ns = run.state["ns"]
    scratch = Path(run.scratch) / f"sharding-{run.index}"
    scratch.mkdir(parents=True, exist_ok=True)
    config = _config(scratch / "overseer.yaml", ns)
    metrics: Metrics = {}
    for count in COUNTS:
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
    return metrics
