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

With managed certificates (:data:`CERTIFICATE_METRICS`, exported while the replica
watches the Secret):

* ``certwatcher_read_certificate_total`` and ``certwatcher_read_certificate_errors_total``
  (controller-runtime's certwatcher names): versions of the Secret read, and those
  refused (the previous certificate stays served);
* ``overseer_webhook_certificate_expiration_timestamp_seconds``: when the certificate
  this replica serves ends (Unix time; alert well before it);
* ``overseer_webhook_certificate_rotations_total{step}``: the leader's writes of the
  Secret (``create``, ``regenerate``, ``issue``, ``rotate-ca``, ``trim``);
* ``overseer_webhook_ca_bundle_updates_total{kind}``: configurations and CRDs whose
  ``caBundle`` the leader changed.

Thread-safe: prometheus_client metrics are.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from manager.metrics import REGISTRY, ControllerMetrics

__all__ = [
    "CA_BUNDLE_UPDATES",
    "CERTIFICATE_METRICS",
    "CERT_EXPIRY",
    "CERT_READS",
    "CERT_READ_ERRORS",
    "CERT_ROTATIONS",
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

CERT_READS = Counter(
    "certwatcher_read_certificate", "Total number of certificate reads", registry=None
)
CERT_READ_ERRORS = Counter(
    "certwatcher_read_certificate_errors",
    "Total number of certificate read errors",
    registry=None,
)
CERT_EXPIRY = Gauge(
    "overseer_webhook_certificate_expiration_timestamp_seconds",
    "When the webhook serving certificate this replica serves ends (Unix time).",
    registry=None,
)
CERT_ROTATIONS = Counter(
    "overseer_webhook_certificate_rotations",
    "Writes of the managed webhook certificate Secret by the leader, by step.",
    ["step"],
    registry=None,
)
CA_BUNDLE_UPDATES = Counter(
    "overseer_webhook_ca_bundle_updates",
    "Webhook configurations and CRDs whose caBundle the leader changed, by kind.",
    ["kind"],
    registry=None,
)

CERTIFICATE_METRICS = ControllerMetrics(
    [CERT_READS, CERT_READ_ERRORS, CERT_EXPIRY, CERT_ROTATIONS, CA_BUNDLE_UPDATES]
)
REGISTRY.register(CERTIFICATE_METRICS)
