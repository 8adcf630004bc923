"""The podport controller's Prometheus figures, computed from the allocator at scrape.

``overseer_podport_addresses_used{network}`` and ``overseer_podport_addresses_free{network}``
(gauges) and ``overseer_podport_pods_waiting{network}`` (pods waiting for an address). One
collector is registered on :data:`manager.REGISTRY` at import; allocators are attached
while their controller runs, and with none attached nothing is exported. If two
allocators report the same network (two managers in one process, as in tests), the one
attached last wins. Fleet-wide (an allocator per cluster, attached with its cluster's
name), every sample has a ``cluster`` label too.

Thread-safe: the collector's table is guarded by a lock; allocators are thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controllers.podport.allocator import Allocator
from manager import REGISTRY

__all__ = ["PORT_METRICS", "PortMetrics"]


class PortMetrics(Collector):
    """Collects the address figures of every attached allocator."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_network: dict[tuple[str, str], Allocator] = {}  # (cluster, network)

    def attach(self, allocator: Allocator, cluster: str = "") -> None:
        with self._lock:
            for network in allocator.pools:
                self._by_network[(cluster, network)] = allocator

    def detach(self, allocator: Allocator) -> None:
        with self._lock:
            for key in [k for k, a in self._by_network.items() if a is allocator]:
                del self._by_network[key]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            table = sorted(self._by_network.items())
        if not table:
            return  # no podport runs here: no families either
        fleet = any(cluster for (cluster, _), _ in table)
        labels = ["network", "cluster"] if fleet else ["network"]
        used = GaugeMetricFamily(
            "overseer_podport_addresses_used",
            "Addresses of a network held by LogicalPorts (or being allocated).",
            labels=labels,
        )
        free = GaugeMetricFamily(
            "overseer_podport_addresses_free",
            "Addresses of a network that can still be allocated.",
            labels=labels,
        )
        waiting = GaugeMetricFamily(
            "overseer_podport_pods_waiting",
            "Pods waiting for an address of an exhausted network.",
            labels=labels,
        )
        for (cluster, network), allocator in table:
            values = [network, cluster] if fleet else [network]
            n_used, n_free = allocator.counts(network)
            used.add_metric(values, float(n_used))
            free.add_metric(values, float(n_free))
            waiting.add_metric(values, float(allocator.waiting(network)))
        yield used
        yield free
        yield waiting


PORT_METRICS = PortMetrics()
REGISTRY.register(PORT_METRICS)
