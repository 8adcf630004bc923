"""The Deployment generator, run as its own process: ``python -m bench.deployments MODE``.

``create``
    POST ``--count`` opted-in Deployments (``<prefix>-<n>``) on ``--threads``
    keep-alive connections as fast as the server takes them; print one JSON line:
    ``{"started": t0, "created": {name: t}, "seconds": s}`` where ``t`` is the
    ``time.time()`` at which the server answered the POST (the object exists from then).
``update``
    Change the first container port of Deployments ``<prefix>-0`` .. ``<prefix>-<names-1>``
    round-robin at ``--rate`` updates/s for ``--seconds`` (a JSON merge patch of the
    containers; every update changes the Deployment's generation and so its Service).
    Update ``g`` (counting from ``--first``) goes to Deployment ``g % names`` and sets port
    :func:`port_of` ``(g, names)``: ports only grow, so the harness can tell when a
    Service reflects update ``g`` or a later one. Updates are paced on a schedule
    (``t0 + i / rate``), not back to back; prints
    ``{"writes": [[g, t], ...], "seconds": s, "late": n}``, ``late`` counting updates
    sent more than 50 ms behind schedule (the generator itself fell behind).

A separate process keeps the generator's CPU off the subject and the harness.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

import orjson

from bench.rawhttp import RawClient
from bench.workload import run_parallel

EXPOSE = {"overseer.io/expose": "true"}
BASE_PORT = 20_000
MAX_SECONDS = 600.0


def port_of(g: int, names: int) -> int:
    """The port update ``g`` sets on Deployment ``g % names`` (grows per Deployment)."""
    return BASE_PORT + g // names + 1


def containers(port: int) -> list[dict[str, Any]]:
    return [
        {
            "name": "app",
            "image": "registry.k8s.io/pause:3.9",
            "ports": [
                {"name": "http", "containerPort": port, "protocol": "TCP"},
                {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
            ],
        }
    ]


def deployment(name: str, port: int = BASE_PORT) -> dict[str, Any]:
    """An opted-in Deployment with two named container ports (``replicas: 0``)."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels, "annotations": dict(EXPOSE)},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": containers(port)}},
        },
    }


def _create(raw: RawClient, args: argparse.Namespace) -> dict[str, Any]:
    base = f"/apis/apps/v1/namespaces/{args.namespace}/deployments"
    created: dict[str, float] = {}

    def create(i: int) -> None:
        name = f"{args.prefix}-{i:05d}"
        raw.request("POST", base, deployment(name))
        created[name] = time.time()

    started = time.time()
    seconds, done = run_parallel(
        args.count, args.threads, create, deadline=time.monotonic() + MAX_SECONDS
    )
    return {"started": started, "created": created, "seconds": seconds, "done": done}


def _update(raw: RawClient, args: argparse.Namespace) -> dict[str, Any]:
    base = f"/apis/apps/v1/namespaces/{args.namespace}/deployments"
    total = int(args.rate * args.seconds)
    lock = threading.Lock()
    tickets = iter(range(total))
    writes: list[list[float]] = []
    late = [0]
    failures: list[BaseException] = []
    t0 = time.monotonic() + 0.05

    def worker() -> None:
        try:
            paced()
        except BaseException as exc:  # reported after the join
            failures.append(exc)

    def paced() -> None:
        while not failures:
            with lock:
                i = next(tickets, None)
            if i is None:
                return
            due = t0 + i / args.rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -0.05:
                late[0] += 1
            g = args.first + i
            name = f"{args.prefix}-{g % args.names:05d}"
            body = {
                "spec": {"template": {"spec": {"containers": containers(port_of(g, args.names))}}}
            }
            raw.request(
                "PATCH", f"{base}/{name}", body, content_type="application/merge-patch+json"
            )
            writes.append([g, time.time()])

    pool = [threading.Thread(target=worker, name=f"bench-updater/{n}") for n in range(args.threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if failures:
        raise failures[0]
    return {"writes": writes, "seconds": time.perf_counter() - start, "late": late[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.deployments")
    parser.add_argument("mode", choices=["create", "update"])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--prefix", default="app")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--count", type=int, default=0, help="create: Deployments")
    parser.add_argument("--names", type=int, default=1, help="update: Deployments updated")
    parser.add_argument("--rate", type=float, default=50.0, help="update: per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="update: duration")
    parser.add_argument("--first", type=int, default=0, help="update: first update number")
    args = parser.parse_args(argv)
    raw = RawClient(args.kubeconfig, pool_size=args.threads)
    result = _create(raw, args) if args.mode == "create" else _update(raw, args)
    raw.close()
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
