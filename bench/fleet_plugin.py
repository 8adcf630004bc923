"""A fleet-wide controller for ``python -m bench fleet``: run with ``overseer run --plugin
benchfleet=bench.fleet_plugin:FleetPlugin`` and ``fleet: true`` in its section.

A uniform reconciler (one per engaged cluster, made by a factory): each ConfigMap
labelled ``bench-fleet=true`` whose annotation ``bench/stamp`` differs from the
configured ``stamp`` gets it (a merge patch with the observed resourceVersion), so a
replica started with a new stamp reconciles and writes every object of its clusters once.
``bench_fleet_stamped_total`` (on the manager's /metrics) counts the writes that landed:
the bench's signal that every object is done.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter

from manager import Cluster, Conflict, Manager, NotFound, PluginContext, Request, Result, builtin
from manager.metrics import REGISTRY

CONFIGMAPS = builtin("v1", "configmaps")
SELECTOR = "bench-fleet=true"
STAMPED = Counter(
    "bench_fleet_stamped",
    "ConfigMaps the bench's fleet controller stamped (writes that landed).",
    registry=REGISTRY,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetConfig:
    stamp: str = "s"  # what each ConfigMap is annotated with


class Stamper:
    """One cluster's reconciler."""

    def __init__(self, cluster: Cluster, stamp: str) -> None:
        self._client = cluster.client
        self._lister = cluster.lister(CONFIGMAPS, label_selector=SELECTOR)
        self._stamp = stamp

    def reconcile(self, request: Request) -> Result:
        obj = self._lister.get(request.name, request.namespace)
        if obj is None:
            return Result()
        if (obj["metadata"].get("annotations") or {}).get("bench/stamp") == self._stamp:
            return Result()
        patch = {
            "metadata": {
                "resourceVersion": obj["metadata"]["resourceVersion"],
                "annotations": {"bench/stamp": self._stamp},
            }
        }
        try:
            self._client.patch(CONFIGMAPS, request.name, patch, namespace=request.namespace)
        except (Conflict, NotFound):
            return Result(requeue=True)
        STAMPED.inc()
        return Result()


class FleetPlugin:
    config_class = FleetConfig

    def setup(self, mgr: Manager, ctx: PluginContext[FleetConfig]) -> None:
        stamp = ctx.config.stamp

        def make(cluster: Cluster) -> Stamper:
            return Stamper(cluster, stamp)

        ctx.controller(make).for_(CONFIGMAPS, label_selector=SELECTOR).complete()
