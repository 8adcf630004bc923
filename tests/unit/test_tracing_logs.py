"""Tracing exporter selection and structured log output."""

from __future__ import annotations

import importlib.util
import io
import logging

import orjson
import pytest

from manager.logs import JsonFormatter, TextFormatter, configure, reconcile_context
from manager.tracing import setup_tracing


def test_tracing_none_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    assert setup_tracing(None) is None
    assert setup_tracing("none") is None


def test_tracing_exporter_from_environment_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin-ish")
    with pytest.raises(ValueError, match="unknown tracing exporter 'zipkin-ish'"):
        setup_tracing(None)


def _otlp_installed() -> bool:
    try:
        return importlib.util.find_spec("opentelemetry.exporter.otlp") is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.skipif(_otlp_installed(), reason="opentelemetry-exporter-otlp is installed here")
def test_tracing_otlp_without_its_package_says_what_to_install() -> None:
    with pytest.raises(ValueError, match="opentelemetry-exporter-otlp"):
        setup_tracing("otlp")


def _record(msg: str, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("overseer.test", logging.INFO, __file__, 1, msg, None, None)
    for k, v in extra.items():
        setattr(record, k, v)
    return record


def test_json_logs_carry_extra_and_reconcile_context() -> None:
    token = reconcile_context.set(
        {"controller": "exposer", "namespace": "ns", "name": "web", "trace_id": "ab" * 16}
    )
    try:
        line = JsonFormatter().format(_record("reconcile done", requeues=2))
    finally:
        reconcile_context.reset(token)
    doc = orjson.loads(line)
    assert doc["msg"] == "reconcile done"
    assert doc["level"] == "info"
    assert doc["requeues"] == 2
    assert (doc["controller"], doc["namespace"], doc["name"]) == ("exposer", "ns", "web")
    assert doc["trace_id"] == "ab" * 16


def test_text_logs_append_key_values() -> None:
    line = TextFormatter().format(_record("listed", resource="v1/pods", items=3))
    assert "INFO" in line and "listed" in line
    assert "resource=v1/pods" in line and "items=3" in line


def test_configure_rejects_unknown_level_and_format() -> None:
    with pytest.raises(ValueError, match="unknown log level"):
        configure("loud", "text")
    with pytest.raises(ValueError, match="unknown log format"):
        configure("info", "xml")


def test_configure_installs_one_handler() -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        stream = io.StringIO()
        configure("warning", "json", stream=stream)
        configure("warning", "json", stream=stream)
        assert len(root.handlers) == 1
        logging.getLogger("overseer.x").warning("careful", extra={"k": "v"})
        assert orjson.loads(stream.getvalue().splitlines()[-1])["k"] == "v"
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_a_reconcile_without_tracing_logs_no_empty_trace_id() -> None:
    """Issue 22, item 7: text logs carried trace_id="" on every line with tracing off."""
    from opentelemetry import trace

    from manager.controller import log_context
    from manager.reconcile import Request

    ctx = log_context("mirror", Request("ns", "s"), trace.INVALID_SPAN_CONTEXT)
    assert ctx == {"controller": "mirror", "namespace": "ns", "name": "s"}
    token = reconcile_context.set(ctx)
    try:
        line = TextFormatter().format(_record("reconcile failed, requeued with backoff"))
    finally:
        reconcile_context.reset(token)
    assert line.endswith("controller=mirror namespace=ns name=s")
    valid = trace.SpanContext(trace_id=0xAB, span_id=1, is_remote=False)
    assert log_context("mirror", Request("ns", "s"), valid)["trace_id"] == f"{0xAB:032x}"


def test_the_context_formatter_puts_the_context_after_pytests_message() -> None:
    """Issue 22, item 7: pytest's captured "reconcile failed, requeued" lacked namespace
    and name; the kit's pytest plugin wraps pytest's formatters with this one."""
    from manager.logs import ContextFormatter

    inner = logging.Formatter("%(levelname)-8s %(name)s %(message)s")
    token = reconcile_context.set({"controller": "mirror", "namespace": "ns", "name": "s"})
    try:
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            import sys

            record = _record("reconcile failed, requeued with backoff", delay=0.5)
            record.exc_info = sys.exc_info()
        text = ContextFormatter(inner).format(record)
    finally:
        reconcile_context.reset(token)
    first, _, rest = text.partition("\n")
    assert first == (
        "INFO     overseer.test reconcile failed, requeued with backoff "
        "controller=mirror namespace=ns name=s delay=0.5"
    )
    assert "RuntimeError: boom" in rest
