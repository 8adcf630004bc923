"""The webhook server's metrics (controller-runtime ``pkg/webhook/internal/metrics``,
``pkg/webhook/admission/metrics``, ``pkg/webhook/conversion/metrics``), on
:data:`manager.metrics.REGISTRY`, exported only while a webhook server runs
(:class:`~manager.metrics.ControllerMetrics`: a process with no webhooks exports none):

* ``controller_runtime_webhook_requests_total{webhook,code}``: requests by HTTP status
  (``webhook`` is the path served, as controller-runtime labels it);
* ``controller_runtime_webhook_latency_seconds{webhook}``: histogram of the time from the
  request's first byte read to the answer written (controller-runtime's buckets, 10 ns
  to 1000 s by tenfolds);
* ``controller_runtime_webhook_requests_in_flight{webhook}``: requests being answered;
* ``controller_runtime_webhook_panics_total`` and
  ``controller_runtime_conversion_webhook_panics_total``: handlers that raised (Python's
  panics), as controller-runtime counts recovered panics;
* ``overseer_webhook_handler_errors_total{webhook}``: handlers that raised or answered
  what cannot be sent (a denial with code 500 each);
* ``overseer_webhook_late_answers_total{webhook}``: answers written after the API
  server's timeout for the request had passed (it had given up on them);
* ``overseer_webhook_rejected_total{webhook,reason}``: requests refused before a handler
  ran: ``busy`` (no free slot before the request's deadline, HTTP 429),
  ``bad_request`` (not a review, HTTP 400), ``not_found``.

Thread-safe: prometheus_client metrics are.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from manager.metrics import REGISTRY, ControllerMetrics

__all__ = [
    "CONVERSION_PANICS",
    "HANDLER_ERRORS",
    "IN_FLIGHT",
    "LATE",
    "LATENCY",
    "PANICS",
    "REJECTED",
    "REQUESTS",
    "WEBHOOK_METRICS",
]

REQUESTS = Counter(
    "controller_runtime_webhook_requests",
    "Total number of admission requests by HTTP status code.",
    ["webhook", "code"],
    registry=None,
)
LATENCY = Histogram(
    "controller_runtime_webhook_latency_seconds",
    "Histogram of the latency of processing admission requests",
    ["webhook"],
    buckets=(1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0, 1000.0),
    registry=None,
)
IN_FLIGHT = Gauge(
    "controller_runtime_webhook_requests_in_flight",
    "Current number of admission requests being served.",
    ["webhook"],
    registry=None,
)
PANICS = Counter(
    "controller_runtime_webhook_panics", "Total number of webhook panics", registry=None
)
CONVERSION_PANICS = Counter(
    "controller_runtime_conversion_webhook_panics",
    "Total number of conversion webhook panics",
    registry=None,
)
HANDLER_ERRORS = Counter(
    "overseer_webhook_handler_errors",
    "Webhook handlers that raised or answered what cannot be sent (answered 500).",
    ["webhook"],
    registry=None,
)
LATE = Counter(
    "overseer_webhook_late_answers",
    "Webhook answers written after the API server's timeout for the request.",
    ["webhook"],
    registry=None,
)
REJECTED = Counter(
    "overseer_webhook_rejected",
    "Webhook requests refused before a handler ran, by reason.",
    ["webhook", "reason"],
    registry=None,
)

WEBHOOK_METRICS = ControllerMetrics(
    [REQUESTS, LATENCY, IN_FLIGHT, PANICS, CONVERSION_PANICS, HANDLER_ERRORS, LATE, REJECTED]
)
REGISTRY.register(WEBHOOK_METRICS)
