"""The controller of the fleet end-to-end test (``e2e/test_fleet_e2e.py``): fleet-wide,
one reconciler per engaged cluster, it annotates every ConfigMap labelled
``fleet-e2e=true`` with ``fleet-e2e/seen: <cluster>`` and ``fleet-e2e/by: <replica>`` (a
merge patch carrying the resourceVersion it read), so that the test sees which objects of
which cluster were reconciled, by which replica, and that the name the fleet gave the
cluster is the one it came from."""

from __future__ import annotations

import os

from manager import Cluster, Conflict, Manager, NotFound, PluginContext, Request, Result, builtin

CONFIGMAPS = builtin("v1", "configmaps")
SELECTOR = "fleet-e2e=true"
SEEN = "fleet-e2e/seen"
BY = "fleet-e2e/by"


class Stamper:
    def __init__(self, cluster: Cluster) -> None:
        self._name = cluster.name
        self._client = cluster.client
        self._lister = cluster.lister(CONFIGMAPS, label_selector=SELECTOR)

    def reconcile(self, request: Request) -> Result:
        obj = self._lister.get(request.name, request.namespace)
        if obj is None:
            return Result()
        if (obj["metadata"].get("annotations") or {}).get(SEEN) == request.cluster:
            return Result()
        patch = {
            "metadata": {
                "resourceVersion": obj["metadata"]["resourceVersion"],
                "annotations": {SEEN: request.cluster, BY: os.environ.get("POD_NAME", "")},
            }
        }
        try:
            self._client.patch(CONFIGMAPS, request.name, patch, namespace=request.namespace)
        except (Conflict, NotFound):
            return Result(requeue=True)
        return Result()


class FleetE2EPlugin:
    def setup(self, mgr: Manager, ctx: PluginContext[None]) -> None:
        ctx.controller(Stamper).for_(CONFIGMAPS, label_selector=SELECTOR).complete()
