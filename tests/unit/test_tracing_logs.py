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
