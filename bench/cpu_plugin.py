"""A controller whose reconcile costs a fixed amount of CPU, for ``python -m bench
sharding``: run with ``overseer run --plugin benchcpu=bench.cpu_plugin:CpuPlugin``.

For each ConfigMap labelled ``bench-cpu=true`` whose ``data.tick`` differs from the
annotation ``bench/done``, it burns ``burnMs`` of its thread's CPU time (a busy loop on
:func:`time.thread_time`, so the cost does not depend on what else the machine does),
then writes ``bench/done=<tick>`` and ``bench/by=<identity>`` with the observed
resourceVersion.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from manager import Conflict, Manager, NotFound, PluginContext, Request, Result, builtin

CONFIGMAPS = builtin("v1", "configmaps")
SELECTOR = "bench-cpu=true"


@dataclass(frozen=True, kw_only=True, slots=True)
class CpuConfig:
    burn_ms: float = field(default=20.0, metadata={"min": 0.0, "help": "CPU per reconcile, ms"})


class CpuReconciler:
    def __init__(self, mgr: Manager, config: CpuConfig, *, sharded: bool) -> None:
        self._client = mgr.client
        # sharded: the cache of this replica's share, the one for_() is woken by
        shard = "primary" if sharded else None
        self._lister = mgr.lister(CONFIGMAPS, label_selector=SELECTOR, shard=shard)
        self._me = mgr.identity
        self._burn = config.burn_ms / 1000.0

    def reconcile(self, request: Request) -> Result:
        obj = self._lister.get(request.name, request.namespace)
        if obj is None:
            return Result()
        tick = (obj.get("data") or {}).get("tick", "")
        if (obj["metadata"].get("annotations") or {}).get("bench/done") == tick:
            return Result()
        until = time.thread_time() + self._burn
        while time.thread_time() < until:
            pass
        patch = {
            "metadata": {
                "resourceVersion": obj["metadata"]["resourceVersion"],
                "annotations": {"bench/done": tick, "bench/by": self._me},
            }
        }
        try:
            self._client.patch(CONFIGMAPS, request.name, patch, namespace=request.namespace)
        except (Conflict, NotFound):
            return Result(requeue=True)
        return Result()


class CpuPlugin:
    config_class = CpuConfig

    def setup(self, mgr: Manager, ctx: PluginContext[CpuConfig]) -> None:
        reconciler = CpuReconciler(mgr, ctx.config, sharded=ctx.settings.sharded)
        ctx.controller(reconciler).for_(CONFIGMAPS, label_selector=SELECTOR).complete()
