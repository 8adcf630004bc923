"""Benchmarks ``informer-sync`` and ``informer-events``: Overseer's informer against the
official client's ``kubernetes.informer.SharedInformer``, each in a fresh process
(:mod:`bench.subject`).
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import orjson

from bench.child import Child
from bench.registry import Goal, Metrics, Ratio, Run, benchmark, setup
from bench.workload import OWNERS, owner, pod, pod_status, run_parallel

PODS = int(os.environ.get("BENCH_INFORMER_PODS", "10000"))  # smaller while developing
POD_THREADS = 4
# $BENCH_BASELINE: another checkout (with its own .venv) whose informer runs as the subject
# "baseline", for before/after figures in one session
BASELINE = os.environ.get("BENCH_BASELINE", "")
_BASELINES = ("baseline",) if BASELINE else ()
# $BENCH_INFORMER_SUBJECTS (comma-separated): only these subjects, e.g. overseer,baseline
_CHOSEN = {n.strip() for n in os.environ.get("BENCH_INFORMER_SUBJECTS", "").split(",") if n.strip()}


def _subjects(*names: str) -> tuple[str, ...]:
    unknown = _CHOSEN - {"overseer", "paused", "official", "floor", "baseline"}
    if unknown:
        raise ValueError(
            f"BENCH_INFORMER_SUBJECTS: unknown subject(s) {', '.join(sorted(unknown))}"
        )
    return tuple(n for n in names if not _CHOSEN or n in _CHOSEN)


SYNC_SUBJECTS = _subjects("overseer", "paused", "official", "floor", *_BASELINES)
EVENT_SUBJECTS = _subjects("overseer", "official", *_BASELINES)
UPDATES = 20_000
CONFIGMAPS = 100
GEN_THREADS = 4
TIMEOUT = 240.0  # seconds, any one phase of one subject


def _subject(run: Run, mode: str, subject: str, *args: str) -> Child:
    if subject == "baseline":
        tree = Path(BASELINE)
        python = tree / ".venv" / "bin" / "python"
        if not python.exists():
            raise ValueError(f"BENCH_BASELINE={tree}: not a checkout with a .venv")
        rest = ("--kubeconfig", run.target.kubeconfig, *args)
        return Child("bench.subject", mode, "overseer", *rest, python=str(python), cwd=str(tree))
    return Child("bench.subject", mode, subject, "--kubeconfig", run.target.kubeconfig, *args)


# -- informer-sync ----------------------------------------------------------------------


@benchmark(
    "informer-sync",
    describe=f"""
Initial sync of {PODS:,} realistic Pods (labels, annotations, an owner, two containers with
env, ports, resources and volume mounts, a Running status with conditions and container
statuses; the stored size, managedFields included, is measured from a raw LIST). On a
real cluster they are kept as created: not bound to a node, naming a scheduler that does
not run, owned by ConfigMaps (see `bench/workload.py`). Each
subject runs in a fresh process: **seconds** from start to synced (cache holds every pod;
Overseer: `wait_for_cache_sync`), **CPU seconds** (user + sys) of the subject process in
that time, and **bytes per object**: RSS growth after `gc.collect()` divided by the pods
(and the peak RSS growth). The official informer has no has_synced: it counts as synced
when its cache holds every pod. **floor**: one urllib3 GET and `orjson.loads` into a dict.
Overseer drops `managedFields` by default (its transform); the others keep them.
**paused** is Overseer's informer with automatic garbage collection off until it has
synced, as `overseer run` has it (the other subjects leave it on). With
`BENCH_BASELINE=<checkout>`, **baseline** is Overseer's informer from that checkout, in the
same runs (before/after figures).
""",
    units={
        **{f"{s}_seconds": "s" for s in SYNC_SUBJECTS},
        **{f"{s}_cpu_seconds": "s" for s in SYNC_SUBJECTS},
        **{f"{s}_bytes_per_object": "B" for s in SYNC_SUBJECTS},
        **{f"{s}_peak_bytes_per_object": "B" for s in SYNC_SUBJECTS},
        "stored_bytes_per_pod": "B",
    },
    ratios=[
        Ratio(
            "time to synced, official / Overseer", "official_seconds", "overseer_seconds", ">= 5"
        ),
        Ratio(
            "memory per object, Overseer / official",
            "overseer_bytes_per_object",
            "official_bytes_per_object",
            "<= 0.35",
        ),
        Ratio(
            "peak memory per object, Overseer / official",
            "overseer_peak_bytes_per_object",
            "official_peak_bytes_per_object",
        ),
        Ratio("CPU seconds, official / Overseer", "official_cpu_seconds", "overseer_cpu_seconds"),
        Ratio("time to synced, Overseer / floor", "overseer_seconds", "floor_seconds"),
        Ratio("CPU seconds, Overseer / baseline", "overseer_cpu_seconds", "baseline_cpu_seconds"),
        Ratio("CPU seconds, paused / baseline", "paused_cpu_seconds", "baseline_cpu_seconds"),
        Ratio("CPU seconds, paused / Overseer", "paused_cpu_seconds", "overseer_cpu_seconds"),
        Ratio(
            "memory per object, Overseer / baseline",
            "overseer_bytes_per_object",
            "baseline_bytes_per_object",
        ),
        Ratio(
            "peak memory per object, Overseer / baseline",
            "overseer_peak_bytes_per_object",
            "baseline_peak_bytes_per_object",
        ),
    ],
)
def informer_sync(run: Run) -> Metrics:
    ns = run.state["pods_namespace"]
    scope = [] if run.target.local else ["--namespace", ns]
    metrics: Metrics = {"stored_bytes_per_pod": run.state["stored_bytes_per_pod"]}
    # Rotate the order so that no subject always runs first (page cache, server warmth).
    turn = run.index % len(SYNC_SUBJECTS)
    order = SYNC_SUBJECTS[turn:] + SYNC_SUBJECTS[:turn]
    for subject in order:
        args = ["--plural", "pods", "--expect", str(PODS), "--timeout", str(TIMEOUT), *scope]
        with _subject(run, "sync", subject, *args) as child:
            result = child.next(TIMEOUT + 30)
        if result["objects"] < PODS:
            raise RuntimeError(f"{subject} synced {result['objects']} of {PODS} pods")
        metrics[f"{subject}_seconds"] = result["seconds"]
        metrics[f"{subject}_cpu_seconds"] = result["cpu_seconds"]
        metrics[f"{subject}_bytes_per_object"] = result["rss_delta"] / PODS
        metrics[f"{subject}_peak_bytes_per_object"] = result["peak_delta"] / PODS
    return metrics


@setup("informer-sync")
def _create_pods(run: Run) -> None:
    """Create the pods once per session (with their owners and a Running status)."""
    target = run.target
    raw = target.raw
    ns = target.new_namespace("bench-pods")
    uids = [
        raw.json("POST", f"/api/v1/namespaces/{ns}/configmaps", owner(n, ns))["metadata"]["uid"]
        for n in range(OWNERS)
    ]
    base = f"/api/v1/namespaces/{ns}/pods"

    def create(i: int) -> None:
        created = orjson.loads(raw.request("POST", base, pod(i, ns, uids)))
        name = created["metadata"]["name"]
        raw.request("PUT", f"{base}/{name}/status", pod_status(i, created))

    seconds, done = run_parallel(PODS, POD_THREADS, create, deadline=time.monotonic() + 600)
    if done < PODS:
        raise RuntimeError(f"created {done} of {PODS} pods")
    data = raw.request("GET", base)
    items = orjson.loads(data)["items"]
    if len(items) != PODS:
        raise RuntimeError(f"listed {len(items)} pods, expected {PODS}")
    sizes = [len(orjson.dumps(o)) for o in items]
    run.state["pods_namespace"] = ns
    run.state["stored_bytes_per_pod"] = statistics.fmean(sizes)
    run.state["setup"] = {
        "pods": PODS,
        "seconds": round(seconds, 1),
        "pods_per_s (create + status)": round(done / seconds, 1),
        "stored_bytes_per_pod": round(statistics.fmean(sizes)),
        "list_bytes": len(data),
    }


# -- informer-events --------------------------------------------------------------------


@benchmark(
    "informer-events",
    describe=f"""
Watch events applied to the cache and handed to one handler that counts them. The subject
syncs an informer on {CONFIGMAPS} ConfigMaps in a fresh process; then a generator process
sends {UPDATES:,} merge PATCHes on {GEN_THREADS} connections; events/s = handled events
over the time from the first to the last handler call. **live**: the subject runs while
the generator writes, so the figure is capped by the server's write rate
(**patches/s**). **backlog**: the subject is stopped (SIGSTOP) while the generator
writes and continued (SIGCONT) after, so it drains a queue of {UPDATES:,} events as fast
as it can: the informer's own capacity. A stopped reader makes the server's TCP send
window close; after SIGCONT the kernel's zero-window probe timer can leave the stream
idle for seconds (**max gap**; about 7 s after 20,000 events), which lowers the
wall-clock figure without any work being done, so **events per CPU second** (handled
events over the subject's user + sys CPU from ready to done) is reported too: it is
the capacity figure least disturbed by the other processes and by TCP. With
`BENCH_BASELINE=<checkout>`, **baseline** is Overseer's informer from that checkout.
""",
    units={
        **{f"{s}_{m}_events_per_s": "1/s" for s in EVENT_SUBJECTS for m in ("live", "backlog")},
        **{f"{s}_backlog_cpu_seconds": "s" for s in EVENT_SUBJECTS},
        **{f"{s}_events_per_cpu_second": "1/s" for s in EVENT_SUBJECTS},
        **{f"{s}_backlog_max_gap_ms": "ms" for s in EVENT_SUBJECTS},
        "patches_per_s": "1/s",
    },
    ratios=[
        Ratio(
            "backlog events/s, Overseer / official",
            "overseer_backlog_events_per_s",
            "official_backlog_events_per_s",
        ),
        Ratio(
            "events per CPU second, Overseer / official",
            "overseer_events_per_cpu_second",
            "official_events_per_cpu_second",
        ),
        Ratio(
            "live events/s, Overseer / official",
            "overseer_live_events_per_s",
            "official_live_events_per_s",
        ),
        Ratio(
            "events per CPU second, Overseer / baseline",
            "overseer_events_per_cpu_second",
            "baseline_events_per_cpu_second",
        ),
    ],
    goals=[
        Goal("overseer_events_per_cpu_second", ">=", 5000),
        Goal("overseer_live_events_per_s", ">=", 5000),
    ],
)
def informer_events(run: Run) -> Metrics:
    ns = run.state["configmaps_namespace"]
    metrics: Metrics = {}
    patches: list[float] = []
    turn = run.index % len(EVENT_SUBJECTS)
    order = EVENT_SUBJECTS[turn:] + EVENT_SUBJECTS[:turn]
    for mode in ("live", "backlog"):
        for subject in order:
            args = [
                "--plural",
                "configmaps",
                "--namespace",
                ns,
                "--names",
                str(CONFIGMAPS),
                "--expect",
                str(UPDATES),
                "--timeout",
                str(TIMEOUT),
            ]
            with _subject(run, "events", subject, *args) as child:
                child.next(TIMEOUT)  # ready: synced
                if mode == "backlog":
                    child.pause()
                try:
                    written = _generate(run, ns)
                finally:
                    child.resume()
                done = child.next(TIMEOUT + 30)
            if done["handled"] < UPDATES:
                raise RuntimeError(f"{subject} handled {done['handled']} of {UPDATES} events")
            patches.append(written)
            metrics[f"{subject}_{mode}_events_per_s"] = done["events_per_s"]
            if mode == "backlog":
                cpu = done["cpu_seconds"]
                metrics[f"{subject}_backlog_cpu_seconds"] = cpu
                metrics[f"{subject}_events_per_cpu_second"] = done["handled"] / cpu if cpu else 0
                metrics[f"{subject}_backlog_max_gap_ms"] = done["max_gap_seconds"] * 1000
    metrics["patches_per_s"] = statistics.median(patches)
    return metrics


def _generate(run: Run, ns: str) -> float:
    with Child(
        "bench.generate",
        "--kubeconfig",
        run.target.kubeconfig,
        "--namespace",
        ns,
        "--names",
        str(CONFIGMAPS),
        "--count",
        str(UPDATES),
        "--threads",
        str(GEN_THREADS),
    ) as generator:
        result = generator.next(TIMEOUT + 30)
    if result["writes"] < UPDATES:
        raise RuntimeError(f"generator wrote {result['writes']} of {UPDATES}")
    return float(result["writes_per_s"])


@setup("informer-events")
def _create_configmaps(run: Run) -> None:
    raw = run.target.raw
    ns = run.target.new_namespace("bench-events")
    base = f"/api/v1/namespaces/{ns}/configmaps"
    for n in range(CONFIGMAPS):
        raw.request("POST", base, {"metadata": {"name": f"cm-{n}"}, "data": {"seq": "0"}})
    run.state["configmaps_namespace"] = ns
