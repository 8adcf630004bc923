"""The exposer under test, in a fresh process: ``python -m bench.exposer_subject ...``.

Runs a :class:`~manager.Manager` with the ``exposer`` plugin scoped to ``--namespace``
(leader election off), prints ``{"event": "ready"}`` once its caches have synced, then
watches its own caches until ``--expect`` Ingresses carry ``overseer.io/exposed-url``
and as many Services exist, and prints ``{"event": "done", ...}`` with the
wall-clock time of that moment (``time.time()``, compared by the harness with the time
it started the burst on the same machine) and counters from the metrics registry:
reconciles, API requests by verb and 409 answers. Ends with ``os._exit``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from typing import Any

import orjson

from controllers.exposer import ExposerConfig
from manager import REGISTRY, KubeClient, Manager, ManagerOptions, builtin
from manager.client import ClientOptions
from manager.plugins import ControllerSettings, PluginContext, load_path

POLL = 0.02  # seconds between checks of the caches
URL = "overseer.io/exposed-url"


def _emit(doc: dict[str, Any]) -> None:
    sys.stdout.write(orjson.dumps(doc).decode() + "\n")
    sys.stdout.flush()


def _counters() -> dict[str, float]:
    out: dict[str, float] = {}
    for metric in REGISTRY.collect():
        for s in metric.samples:
            if s.name == "controller_runtime_reconcile_total":
                key = f"reconciles_{s.labels['result']}"
                out[key] = out.get(key, 0.0) + s.value
            elif s.name == "rest_client_requests_total":
                key = f"requests_{s.labels['method']}_{s.labels['code']}"
                out[key] = out.get(key, 0.0) + s.value
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--qps", type=float, default=20.0)
    parser.add_argument("--burst", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    client = KubeClient.from_kubeconfig(
        args.kubeconfig, options=ClientOptions(qps=args.qps, burst=args.burst)
    )
    mgr = Manager(
        client,
        ManagerOptions(
            leader_election=False,
            metrics_bind_address="0",
            health_probe_bind_address="0",
            namespace=args.namespace,
        ),
    )
    plugin = load_path("exposer", "controllers.exposer:ExposerPlugin")
    ctx = PluginContext(
        "exposer",
        ExposerConfig(domain="bench.example.test"),
        ControllerSettings(workers=args.workers),
        mgr,
    )
    plugin.setup(mgr, ctx)
    services = mgr.lister(builtin("v1", "services"))
    ingresses = mgr.lister(builtin("networking.k8s.io/v1", "ingresses"))
    stop = threading.Event()
    runner = threading.Thread(target=mgr.run, args=(stop,), name="bench/manager")
    runner.start()
    deadline = time.monotonic() + args.timeout
    while not mgr.is_leader():  # without leader election: once caches synced
        if time.monotonic() > deadline:
            _emit({"ok": False, "error": "manager did not start"})
            os._exit(1)
        time.sleep(POLL)
    _emit({"event": "ready"})

    def exposed() -> int:
        urls = sum(
            1
            for i in ingresses.list(args.namespace)
            if URL in ((i.get("metadata") or {}).get("annotations") or {})
        )
        return min(urls, len(services.list(args.namespace)))

    while exposed() < args.expect:
        if time.monotonic() > deadline:
            _emit({"ok": False, "error": f"{exposed()} of {args.expect} exposed"})
            os._exit(1)
        time.sleep(POLL)
    done_at = time.time()
    time.sleep(1.0)  # let late, redundant reconciles show in the counters
    _emit({"event": "done", "done_at": done_at, **_counters()})
    stop.set()
    runner.join(30)
    os._exit(0)


if __name__ == "__main__":
    main()
