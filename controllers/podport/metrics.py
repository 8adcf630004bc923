"""The podport controller's Prometheus figures, computed from the allocator at scrape.

``overseer_podport_addresses_used{network}`` and ``overseer_podport_addresses_free{network}``
(gauges) and ``overseer_podport_pods_waiting{network}`` (pods waiting for an address). One
collector is registered on :data:`manager.REGISTRY` at import; allocators are attached
while their controller runs, and with none attached nothing is exported. If two
allocators report the same network (two managers in one process, as in tests), the one
attached last wins.

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
        self._by_network: dict[str, Allocator] = {}

    def attach(self, allocator: Allocator) -> None:
        with self._lock:
            for network in allocator.pools:
                self._by_network[network] = allocator

    def detach(self, allocator: Allocator) -> None:
        with self._lock:
            for network in [n for n, a in self._by_network.items() if a is allocator]:
                del self._by_network[network]

    def collect(self) -> Iterator[Metric]:
        used = GaugeMetricFamily(
            "overseer_podport_addresses_used",
            "Addresses of a network held by LogicalPorts (or being allocated).",
            labels=["network"],
        )
        free = GaugeMetricFamily(
            "overseer_podport_addresses_free",
            "Addresses of a network that can still be allocated.",
            labels=["network"],
        )
        waiting = GaugeMetricFamily(
            "overseer_podport_pods_waiting",
            "Pods waiting for an address of an exhausted network.",
            labels=["network"],
        )
        with self._lock:
            table = sorted(self._by_network.items())
        if not table:
            return  # no podport runs here: no families either
        for network, allocator in table:
            n_used, n_free = allocator.counts(network)
            used.add_metric([network], float(n_used))
            free.add_metric([network], float(n_free))
            waiting.add_metric([network], float(allocator.waiting(network)))
        yield used
        yield free
        yield waiting


PORT_METRICS = PortMetrics()
REGISTRY.register(PORT_METRICS)
