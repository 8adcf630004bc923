"""OpenTelemetry tracing setup.

Overseer creates one span per reconcile (``manager.controller``) and a child span per
API write (``manager.client``) through the OpenTelemetry API; they cost next to nothing
until a tracer provider is installed. :func:`setup_tracing` installs one, with the
exporter chosen by configuration or the standard ``OTEL_TRACES_EXPORTER`` variable:

* ``none``: no provider (the default);
* ``console``: spans printed as JSON lines on stderr;
* ``otlp``: OTLP over HTTP/protobuf or gRPC when ``opentelemetry-exporter-otlp`` is
  installed (endpoint and headers from the standard ``OTEL_EXPORTER_OTLP_*`` variables).

``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` are honoured through the SDK's
resource detection.

Thread-safe: call once, at start-up, from the CLI.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import cast

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)

__all__ = ["EXPORTERS", "setup_tracing"]

logger = logging.getLogger(__name__)

EXPORTERS = ("none", "console", "otlp")


def _otlp_exporter() -> SpanExporter:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    module = (
        "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"
        if protocol == "grpc"
        else "opentelemetry.exporter.otlp.proto.http.trace_exporter"
    )
    try:
        exporter_class = importlib.import_module(module).OTLPSpanExporter
        return cast(SpanExporter, exporter_class())
    except ImportError as exc:
        raise ValueError(
            "tracing exporter 'otlp' needs the opentelemetry-exporter-otlp package "
            f"(pip install opentelemetry-exporter-otlp): {exc}"
        ) from None


def setup_tracing(
    exporter: str | None = None, *, service_name: str = "overseer"
) -> TracerProvider | None:
    """Install a tracer provider for ``exporter`` (default: ``$OTEL_TRACES_EXPORTER`` or none).

    Returns the provider (call ``shutdown()`` on it at exit to flush), or None for "none".

    Raises:
        ValueError: an unknown exporter, or otlp without its package.
    """
    name = (exporter or os.environ.get("OTEL_TRACES_EXPORTER") or "none").strip().lower()
    if name not in EXPORTERS:
        raise ValueError(f"unknown tracing exporter {name!r} (one of: {', '.join(EXPORTERS)})")
    if name == "none":
        return None
    span_exporter: SpanExporter = (
        ConsoleSpanExporter(out=sys.stderr, formatter=lambda span: span.to_json(indent=None) + "\n")
        if name == "console"
        else _otlp_exporter()
    )
    attributes = {"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(provider)
    logger.info("tracing enabled", extra={"exporter": name})
    return provider
