"""Benchmark ``exposer-burst``: a burst of opted-in Deployments → seconds until every one
has its Service and its Ingress with ``overseer.io/exposed-url`` (DESIGN.md §6).
"""

from __future__ import annotations

import time

from bench.child import Child
from bench.registry import Metrics, Run, benchmark
from bench.workload import run_parallel

DEPLOYMENTS = 1_000
WORKERS = 3
QPS = 1000.0  # the subject's client-side limit; the default 20 QPS would bound the figure
BURST = 2000
WRITERS = 4
TIMEOUT = 600.0


def _deployment(i: int) -> dict[str, object]:
    name = f"app-{i:05d}"
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels, "annotations": {"overseer.io/expose": "true"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.9",
                            "ports": [
                                {"name": "http", "containerPort": 8080},
                                {"name": "metrics", "containerPort": 9090},
                            ],
                        }
                    ]
                },
            },
        },
    }


@benchmark(
    "exposer-burst",
    describe=f"""
{DEPLOYMENTS:,} opted-in Deployments (two named container ports each) are created in a
burst by {WRITERS} writer threads while the exposer runs in a fresh process with
{WORKERS} workers, scoped to the burst's namespace, its client limited to {QPS:g} QPS
(burst {BURST}) so that the figure is the controller's and the API server's, not the
client-side limit (at the default 20 QPS the three writes per Deployment — Service,
Ingress, Event — bound a burst of {DEPLOYMENTS:,} to about 150 s).
**exposed_seconds**: from the first create to the moment the exposer's caches show every
Service and every Ingress with its URL annotation.
**create_seconds**: the burst itself. **reconciles_per_deployment** and
**conflicts** (409 answers: AlreadyExists or stale updates) show redundant work.
""",
    units={
        "exposed_seconds": "s",
        "create_seconds": "s",
        "deployments_per_second": "1/s",
        "reconciles_per_deployment": "",
        "conflicts": "",
    },
)
def exposer_burst(run: Run) -> Metrics:
    target = run.target
    ns = target.new_namespace("bench-exposer")
    try:
        args = [
            "--kubeconfig",
            target.kubeconfig,
            "--namespace",
            ns,
            "--expect",
            str(DEPLOYMENTS),
            "--workers",
            str(WORKERS),
            "--qps",
            str(QPS),
            "--burst",
            str(BURST),
            "--timeout",
            str(TIMEOUT),
        ]
        with Child("bench.exposer_subject", *args) as child:
            child.next(60)  # ready
            base = f"/apis/apps/v1/namespaces/{ns}/deployments"
            started = time.time()
            create_seconds, done = run_parallel(
                DEPLOYMENTS,
                WRITERS,
                lambda i: target.raw.json("POST", base, _deployment(i)),
                deadline=time.monotonic() + TIMEOUT,
            )
            if done < DEPLOYMENTS:
                raise RuntimeError(f"created {done} of {DEPLOYMENTS} deployments")
            result = child.next(TIMEOUT + 30)
        exposed_seconds = result["done_at"] - started
        reconciles = sum(v for k, v in result.items() if k.startswith("reconciles_"))
        conflicts = sum(v for k, v in result.items() if k.startswith("requests_") and "409" in k)
        return {
            "exposed_seconds": exposed_seconds,
            "create_seconds": create_seconds,
            "deployments_per_second": DEPLOYMENTS / exposed_seconds,
            "reconciles_per_deployment": reconciles / DEPLOYMENTS,
            "conflicts": conflicts,
        }
    finally:
        target.delete_namespace(ns)
