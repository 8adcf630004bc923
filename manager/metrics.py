"""Overseer's Prometheus registry.

Every metric Overseer exports is registered on :data:`REGISTRY`, never on the
``prometheus_client`` global default registry, so that embedding Overseer in another
program (or running several managers in one test process) does not collide. Metric
names follow client-go and controller-runtime so existing dashboards work.

Safe to share between threads (prometheus_client metrics are thread-safe).
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["REGISTRY", "metrics_route"]

REGISTRY = CollectorRegistry(auto_describe=True)


def metrics_route(query: str, sub: str | None) -> tuple[int, str, bytes]:
    """The ``/metrics`` answer: every metric of :data:`REGISTRY` in the text format."""
    return 200, CONTENT_TYPE_LATEST, generate_latest(REGISTRY)
