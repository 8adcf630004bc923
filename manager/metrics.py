"""Overseer's Prometheus registry.

Every metric Overseer exports is registered on :data:`REGISTRY`, never on the
``prometheus_client`` global default registry, so that embedding Overseer in another
program (or running several managers in one test process) does not collide. Metric
names follow client-go and controller-runtime so existing dashboards work.

Safe to share between threads (prometheus_client metrics are thread-safe).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["REGISTRY", "AttachedWhileRunning", "ControllerMetrics", "metrics_route"]

REGISTRY = CollectorRegistry(auto_describe=True)


class ControllerMetrics(Collector):
    """A controller's own metrics, exported only while a manager runs the controller: a
    module imported for a controller that is not enabled exports nothing.

    Make the metrics with ``registry=None`` and register one of these on
    :data:`REGISTRY`; the controller's runnable (or setup) calls :meth:`attach` when it
    starts and :meth:`detach` when it stops. Attachments are counted (several managers
    in one process: the metrics are shared, as module-level ones are).
    """

    def __init__(self, metrics: Iterable[Collector]) -> None:
        self._metrics = tuple(metrics)
        self._lock = threading.Lock()
        self._attached = 0

    def attach(self) -> None:
        with self._lock:
            self._attached += 1

    def detach(self) -> None:
        with self._lock:
            self._attached = max(0, self._attached - 1)

    def runnable(self, name: str) -> AttachedWhileRunning:
        """A runnable that keeps these metrics attached while the manager runs it: add it
        in the controller's setup, ``mgr.add(metrics.runnable("x-metrics"),
        leader_only=False)``."""
        return AttachedWhileRunning(name, self)

    def describe(self) -> Iterator[Metric]:
        # names reserved at registration, attached or not: a clash fails at import
        for metric in self._metrics:
            yield from metric.describe()  # type: ignore[attr-defined]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            attached = self._attached > 0
        if attached:
            for metric in self._metrics:
                yield from metric.collect()


def metrics_route(query: str, sub: str | None) -> tuple[int, str, bytes]:
    """The ``/metrics`` answer: every metric of :data:`REGISTRY` in the text format."""
    return 200, CONTENT_TYPE_LATEST, generate_latest(REGISTRY)


class AttachedWhileRunning:
    """Runs (in the manager) for as long as the manager does, its metrics attached."""

    def __init__(self, name: str, metrics: ControllerMetrics) -> None:
        self.name = name
        self._metrics = metrics

    def run(self, stop: threading.Event) -> None:
        self._metrics.attach()
        try:
            stop.wait()
        finally:
            self._metrics.detach()
