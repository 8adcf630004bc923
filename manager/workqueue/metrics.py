"""Workqueue metrics, with client-go's names, on Overseer's registry.

Ports client-go ``util/workqueue/metrics.go`` together with the Prometheus provider
that controller-runtime installs for it (``pkg/metrics/workqueue.go``), so existing
workqueue dashboards work unchanged. Every series carries the labels ``name`` (the
queue's name) and ``controller`` (the controller that owns it, ``""`` if none):

================================================  =========  =================================
metric                                            type       meaning
================================================  =========  =================================
``workqueue_depth``                               gauge      items waiting in the queue
``workqueue_adds_total``                          counter    adds that were not de-duplicated
``workqueue_queue_duration_seconds``              histogram  add → get, observed on ``get``
``workqueue_work_duration_seconds``               histogram  get → done, observed on ``done``
``workqueue_unfinished_work_seconds``             gauge      sum of the ages of in-flight items
``workqueue_longest_running_processor_seconds``   gauge      age of the oldest in-flight item
``workqueue_retries_total``                       counter    ``add_after`` calls (so every
                                                             ``add_rate_limited``)
================================================  =========  =================================

The histograms use client-go's buckets: 1e-8 s * 10^i for i = 0..9 (10 ns to 10 s).

A queue created without a name records nothing, as in client-go.

Unfinished work: client-go runs a goroutine per named queue that refreshes the two
in-flight gauges every 500 ms. Overseer computes them instead when the registry is
collected (a scrape, or ``REGISTRY.get_sample_value``): a custom collector walks the live
named queues and reports, per label set, the sum and the maximum of the ages of the
items being processed, measured on each queue's clock. The values are therefore exact
at scrape time rather than up to 500 ms old, and no thread is started for them. A
queue's in-flight series disappear when the queue object is garbage collected.

Thread-safety: the recorders are called by the queues with the queue's lock held; the
collector takes that same lock to read the in-flight start times.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Hashable, Iterator

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from manager.clock import Clock
from manager.metrics import REGISTRY

__all__ = [
    "ADDS",
    "DEPTH",
    "DURATION_BUCKETS",
    "LONGEST_RUNNING_PROCESSOR",
    "QUEUE_DURATION",
    "RETRIES",
    "UNFINISHED_WORK",
    "WORK_DURATION",
    "QueueMetrics",
    "RetryMetrics",
    "new_queue_metrics",
    "new_retry_metrics",
    "remove_queue_metrics",
]

_LABELS = ("name", "controller")

DURATION_BUCKETS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)
"""client-go's ``ExponentialBuckets(10e-9, 10, 10)``."""

UNFINISHED_WORK = "workqueue_unfinished_work_seconds"
LONGEST_RUNNING_PROCESSOR = "workqueue_longest_running_processor_seconds"

DEPTH = Gauge(
    "workqueue_depth",
    "Current depth of workqueue",
    _LABELS,
    registry=REGISTRY,
)
ADDS = Counter(
    "workqueue_adds",
    "Total number of adds handled by workqueue",
    _LABELS,
    registry=REGISTRY,
)
QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    _LABELS,
    buckets=DURATION_BUCKETS,
    registry=REGISTRY,
)
WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes",
    _LABELS,
    buckets=DURATION_BUCKETS,
    registry=REGISTRY,
)
RETRIES = Counter(
    "workqueue_retries",
    "Total number of retries handled by workqueue",
    _LABELS,
    registry=REGISTRY,
)


class QueueMetrics:
    """Records one queue's metrics; every method is called with the queue's lock held.

    This base class is the no-op recorder used by unnamed queues.
    """

    def add(self, item: Hashable) -> None:
        """An item entered the dirty set."""

    def get(self, item: Hashable) -> None:
        """An item was handed to a worker."""

    def done(self, item: Hashable) -> None:
        """A worker finished an item."""


class _PrometheusQueueMetrics(QueueMetrics):
    def __init__(self, name: str, controller: str, clock: Clock, lock: threading.Lock) -> None:
        self.labels = (name, controller)
        self._clock = clock
        self._lock = lock
        self._depth = DEPTH.labels(name, controller)
        self._adds = ADDS.labels(name, controller)
        self._latency = QUEUE_DURATION.labels(name, controller)
        self._work_duration = WORK_DURATION.labels(name, controller)
        self._add_times: dict[Hashable, float] = {}
        self._processing_start_times: dict[Hashable, float] = {}

    def add(self, item: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        if item not in self._add_times:
            self._add_times[item] = self._clock.now()

    def get(self, item: Hashable) -> None:
        now = self._clock.now()
        self._depth.dec()
        self._processing_start_times[item] = now
        start = self._add_times.pop(item, None)
        if start is not None:
            self._latency.observe(now - start)

    def done(self, item: Hashable) -> None:
        start = self._processing_start_times.pop(item, None)
        if start is not None:
            self._work_duration.observe(self._clock.now() - start)

    def unfinished_work(self) -> tuple[float, float]:
        """Return (sum of ages, oldest age) of the items in flight, in seconds."""
        with self._lock:
            now = self._clock.now()
            ages = [now - start for start in self._processing_start_times.values()]
        return sum(ages), max(ages, default=0.0)


class RetryMetrics:
    """Counts a delaying queue's retries; this base class is the no-op recorder."""

    def retry(self) -> None:
        """An item was scheduled with ``add_after``."""


class _PrometheusRetryMetrics(RetryMetrics):
    def __init__(self, name: str, controller: str) -> None:
        self._retries = RETRIES.labels(name, controller)

    def retry(self) -> None:
        self._retries.inc()


class _UnfinishedWorkCollector(Collector):
    """Reports the in-flight gauges of every live named queue, computed at collect time."""

    def __init__(self) -> None:
        self._queues: weakref.WeakSet[_PrometheusQueueMetrics] = weakref.WeakSet()
        self._lock = threading.Lock()

    def track(self, metrics: _PrometheusQueueMetrics) -> None:
        with self._lock:
            self._queues.add(metrics)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield from self._families({})

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            queues = list(self._queues)
        totals: dict[tuple[str, str], tuple[float, float]] = {}
        for metrics in queues:
            total, oldest = metrics.unfinished_work()
            prev_total, prev_oldest = totals.get(metrics.labels, (0.0, 0.0))
            totals[metrics.labels] = (prev_total + total, max(prev_oldest, oldest))
        yield from self._families(totals)

    @staticmethod
    def _families(
        totals: dict[tuple[str, str], tuple[float, float]],
    ) -> Iterator[GaugeMetricFamily]:
        unfinished = GaugeMetricFamily(
            UNFINISHED_WORK,
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads. One can deduce "
            "the number of stuck threads by observing the rate at which this increases.",
            labels=_LABELS,
        )
        longest = GaugeMetricFamily(
            LONGEST_RUNNING_PROCESSOR,
            "How many seconds has the longest running processor for workqueue been running.",
            labels=_LABELS,
        )
        for labels, (total, oldest) in sorted(totals.items()):
            unfinished.add_metric(labels, total)
            longest.add_metric(labels, oldest)
        yield unfinished
        yield longest


_UNFINISHED = _UnfinishedWorkCollector()
REGISTRY.register(_UNFINISHED)


def new_queue_metrics(
    name: str, controller: str, clock: Clock, lock: threading.Lock
) -> QueueMetrics:
    """Return the recorder for a queue: a no-op one when ``name`` is empty.

    Args:
        name: the queue's name (label ``name``).
        controller: the owning controller (label ``controller``).
        clock: the queue's clock, which times the durations.
        lock: the queue's lock, held by the queue around every recorder call.
    """
    if not name:
        return QueueMetrics()
    metrics = _PrometheusQueueMetrics(name, controller, clock, lock)
    _UNFINISHED.track(metrics)
    return metrics


def new_retry_metrics(name: str, controller: str) -> RetryMetrics:
    """Return the retry counter for a delaying queue: a no-op one when ``name`` is empty."""
    if not name:
        return RetryMetrics()
    return _PrometheusRetryMetrics(name, controller)


def remove_queue_metrics(name: str, controller: str) -> None:
    """Drop a queue's series (a queue that is gone for good: a fleet-wide controller's
    queue of a cluster that left), so that no stale depth or count stays exported."""
    for metric in (DEPTH, ADDS, QUEUE_DURATION, WORK_DURATION, RETRIES):
        with contextlib.suppress(KeyError):
            metric.remove(name, controller)
