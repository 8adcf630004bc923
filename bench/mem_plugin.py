"""A controller that only reads its caches, for the memory part of ``python -m bench
sharding``: run with ``overseer run --plugin benchmem=bench.mem_plugin:MemPlugin``.

Its primary objects are ConfigMaps labelled ``bench-mem=true``; each owns one Secret
labelled ``bench-mem-owned=true`` (``ownerReferences`` with ``controller: true``). A
reconcile reads the ConfigMap and its Secret from the caches the controller's events
come from (sharded: this replica's share) and writes nothing, so what the bench measures
is what a replica lists, watches and holds, not its writes. ``bench_mem_keys_reconciled``
(on the manager's /metrics) counts the distinct keys it reconciled with their ConfigMap
in the cache: the bench's signal that a replica has taken up its share.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from prometheus_client import Gauge

from manager import Manager, PluginContext, Request, Result, builtin
from manager.metrics import REGISTRY

CONFIGMAPS = builtin("v1", "configmaps")
SECRETS = builtin("v1", "secrets")
SELECTOR = "bench-mem=true"
OWNED_SELECTOR = "bench-mem-owned=true"
KEYS_RECONCILED = Gauge(
    "bench_mem_keys_reconciled",
    "Distinct keys the bench's memory controller reconciled with their ConfigMap cached.",
    registry=REGISTRY,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class MemConfig:
    pass


class MemReconciler:
    def __init__(self, mgr: Manager, *, sharded: bool) -> None:
        self._primary = mgr.lister(
            CONFIGMAPS, label_selector=SELECTOR, shard="primary" if sharded else None
        )
        self._lock = threading.Lock()
        self._done: set[tuple[str, str]] = set()
        self._owned = mgr.lister(
            SECRETS, label_selector=OWNED_SELECTOR, shard="owned" if sharded else None
        )

    def reconcile(self, request: Request) -> Result:
        if self._primary.get(request.name, request.namespace) is None:
            return Result()
        self._owned.get(request.name, request.namespace)
        with self._lock:
            self._done.add((request.namespace, request.name))
            KEYS_RECONCILED.set(len(self._done))
        return Result()


class MemPlugin:
    config_class = MemConfig

    def setup(self, mgr: Manager, ctx: PluginContext[MemConfig]) -> None:
        reconciler = MemReconciler(mgr, sharded=ctx.settings.sharded)
        (
            ctx.controller(reconciler)
            .for_(CONFIGMAPS, label_selector=SELECTOR)
            .owns(SECRETS, label_selector=OWNED_SELECTOR)
            .complete()
        )
