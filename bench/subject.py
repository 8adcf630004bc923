"""One informer under test, in a fresh process: ``python -m bench.subject MODE SUBJECT ...``.

Modes:

``sync``
    Start the subject, wait until its cache holds ``--expect`` objects, and print one
    JSON line: seconds from start to synced, process CPU seconds (user + sys) spent in
    that time, and the RSS growth (after ``gc.collect()``) and peak RSS growth over the
    RSS measured just before the start.
``events``
    Sync the subject on ConfigMaps, print ``{"event": "ready"}``, then count the updates
    its one handler receives until ``--expect`` have arrived, and print
    ``{"event": "done", ...}`` with the time from the first to the last handler call.

Subjects: ``overseer`` (``manager.cache.SharedInformer``), ``paused`` (the same with
automatic garbage collection off until synced, as ``overseer run`` has it), ``official``
(``kubernetes.informer.SharedInformer``) and, for ``sync`` only, ``floor`` (one urllib3
GET and ``orjson.loads``: the least any Python informer can do).

A fresh process per measurement keeps RSS clean; every wait is bounded by ``--timeout``.
The process ends with ``os._exit`` so that a subject's daemon threads cannot hang it.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import psutil

POLL = 0.005  # seconds between checks of a cache's size


def _emit(doc: dict[str, Any]) -> None:
    sys.stdout.write(orjson.dumps(doc).decode() + "\n")
    sys.stdout.flush()


def _peak_rss() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _wait(cond: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL)
    return True


class _Counter:
    """Counts handler calls and remembers when the first and the last came."""

    def __init__(self) -> None:
        self.n = 0
        self.first = 0.0
        self.last = 0.0
        self.max_gap = 0.0

    def __call__(self, *args: object) -> None:
        now = time.perf_counter()
        if not self.n:
            self.first = now
        elif now - self.last > self.max_gap:
            self.max_gap = now - self.last
        self.n += 1
        self.last = now


# -- subjects -------------------------------------------------------------------------
# Each starter returns (size of the cache, stop); start() has begun syncing on return.


def _overseer(
    kubeconfig: str, plural: str, namespace: str | None, handler: _Counter | None
) -> tuple[Callable[[], int], Callable[[], None]]:
    from manager.cache.informer import HandlerFuncs, SharedInformer
    from manager.cache.listwatch import ResourceListWatch
    from manager.client import KubeClient
    from manager.resources import builtin

    client = KubeClient.from_kubeconfig(kubeconfig)
    informer = SharedInformer(ResourceListWatch(client, builtin("v1", plural), namespace=namespace))
    if handler is not None:
        informer.add_event_handler(HandlerFuncs(update=handler))
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), name="bench-informer")
    thread.start()

    def size() -> int:
        return len(informer.indexer) if informer.has_synced() else 0

    def halt() -> None:
        stop.set()
        thread.join(10)

    return size, halt


def _paused(
    kubeconfig: str, plural: str, namespace: str | None, handler: _Counter | None
) -> tuple[Callable[[], int], Callable[[], None]]:
    """Overseer's informer with automatic garbage collection off until it has synced, as
    ``overseer run`` has it (:func:`manager.cli._freeze_after_sync`)."""
    gc.disable()
    size, halt = _overseer(kubeconfig, plural, namespace, handler)

    def synced_size() -> int:
        n = size()  # 0 until synced
        if n:
            gc.enable()
        return n

    return synced_size, halt


def _official(
    kubeconfig: str, plural: str, namespace: str | None, handler: _Counter | None
) -> tuple[Callable[[], int], Callable[[], None]]:
    from kubernetes import client, config
    from kubernetes.informer import MODIFIED, SharedInformer

    api_client = config.new_client_from_config(config_file=kubeconfig)
    core = client.CoreV1Api(api_client)
    singular = {"pods": "pod", "configmaps": "config_map"}[plural]
    if namespace is None:
        informer = SharedInformer(getattr(core, f"list_{singular}_for_all_namespaces"))
    else:
        informer = SharedInformer(getattr(core, f"list_namespaced_{singular}"), namespace=namespace)
    if handler is not None:
        informer.add_event_handler(MODIFIED, handler)
    informer.start()

    def size() -> int:
        return len(informer.cache.list_keys())

    def halt() -> None:
        informer._stop_event.set()  # stop() would join a thread blocked in a read

    return size, halt


def _floor(
    kubeconfig: str, plural: str, namespace: str | None, handler: _Counter | None
) -> tuple[Callable[[], int], Callable[[], None]]:
    from bench.rawhttp import RawClient

    raw = RawClient(kubeconfig)
    path = f"/api/v1/namespaces/{namespace}/{plural}" if namespace else f"/api/v1/{plural}"
    items = orjson.loads(raw.request("GET", f"{path}?resourceVersion=0"))["items"]
    cache = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in items}
    del items
    return (lambda: len(cache)), raw.close


SUBJECTS = {"overseer": _overseer, "paused": _paused, "official": _official, "floor": _floor}
# Imported before the baseline is taken: a library's import cost is not per object.
PRELOAD = {
    "overseer": ["manager.cache.informer", "manager.cache.listwatch", "manager.client"],
    "paused": ["manager.cache.informer", "manager.cache.listwatch", "manager.client"],
    "official": ["kubernetes.client", "kubernetes.config", "kubernetes.informer"],
    "floor": ["bench.rawhttp", "kubernetes.client", "kubernetes.config"],
}


# -- modes ------------------------------------------------------------------------------


def _sync(args: argparse.Namespace) -> dict[str, Any]:
    proc = psutil.Process()
    starter = SUBJECTS[args.subject]
    for module in PRELOAD[args.subject]:
        importlib.import_module(module)
    gc.collect()
    rss0 = proc.memory_info().rss
    cpu0 = proc.cpu_times()
    t0 = time.perf_counter()
    size, halt = starter(args.kubeconfig, args.plural, args.namespace, None)
    ok = _wait(lambda: size() >= args.expect, args.timeout)
    seconds = time.perf_counter() - t0
    cpu1 = proc.cpu_times()
    peak = _peak_rss()
    gc.collect()
    rss1 = proc.memory_info().rss
    n = size()
    halt()
    return {
        "ok": ok,
        "objects": n,
        "seconds": seconds,
        "cpu_seconds": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
        "rss_delta": rss1 - rss0,
        "peak_delta": peak - rss0,
    }


def _events(args: argparse.Namespace) -> dict[str, Any]:
    proc = psutil.Process()
    counter = _Counter()
    size, halt = SUBJECTS[args.subject](args.kubeconfig, args.plural, args.namespace, counter)
    if not _wait(lambda: size() >= args.names, args.timeout):
        halt()
        return {"event": "done", "ok": False, "error": f"not synced: {size()} objects"}
    _emit({"event": "ready"})
    cpu0 = proc.cpu_times()
    ok = _wait(lambda: counter.n >= args.expect, args.timeout)
    cpu1 = proc.cpu_times()
    halt()
    seconds = counter.last - counter.first
    return {
        "event": "done",
        "ok": ok,
        "handled": counter.n,
        "seconds": seconds,
        "events_per_s": (counter.n - 1) / seconds if seconds > 0 else 0.0,
        "max_gap_seconds": counter.max_gap,
        "cpu_seconds": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.subject")
    parser.add_argument("mode", choices=["sync", "events"])
    parser.add_argument("subject", choices=sorted(SUBJECTS))
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--plural", default="pods")
    parser.add_argument("--namespace", default=None)
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--names", type=int, default=0, help="events: objects to sync first")
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args(argv)
    try:
        result = _sync(args) if args.mode == "sync" else _events(args)
    except BaseException as exc:
        result = {"event": "done", "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    _emit(result)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
