"""Structured logging: constant messages, key/value context, text or JSON output.

Library modules log with ``logging.getLogger(__name__)`` and pass values through
``extra={...}``; only the CLI calls :func:`configure`. While a reconcile runs, the
worker sets :data:`reconcile_context` so every record logged from that thread carries
``controller``, ``namespace``, ``name`` and the OpenTelemetry ``trace_id``.

Thread-safe: the context is a :class:`contextvars.ContextVar` (per thread).
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
import sys
from typing import Any, TextIO

import orjson

__all__ = [
    "ContextFormatter",
    "JsonFormatter",
    "TextFormatter",
    "configure",
    "context_text",
    "reconcile_context",
]

reconcile_context: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "overseer_reconcile_context", default=None
)

# Attributes every LogRecord has; anything else came from ``extra=``.
_STANDARD = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ctx = reconcile_context.get()
    if ctx:
        out.update(ctx)
    for key, value in vars(record).items():
        if key not in _STANDARD and not key.startswith("_"):
            out[key] = value
    return out


class TextFormatter(logging.Formatter):
    """``time level logger message key=value ...``"""

    def format(self, record: logging.LogRecord) -> str:
        ts = dt.datetime.fromtimestamp(record.created, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        line = f"{ts[:-4]}Z {record.levelname:<7} {record.name}: {record.getMessage()}"
        fields = _fields(record)
        if fields:
            line += " " + " ".join(f"{k}={_text(v)}" for k, v in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def context_text(record: logging.LogRecord) -> str:
    """The record's context as `` key=value ...`` (the reconcile's controller, namespace,
    name, trace id, then the ``extra`` values), or "" when it has none."""
    fields = _fields(record)
    return (" " + " ".join(f"{k}={_text(v)}" for k, v in fields.items())) if fields else ""


class ContextFormatter(logging.Formatter):
    """Another formatter's line with the context appended after the message (the test
    kit puts it around pytest's, so captured logs say which object failed)."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        text = self.inner.format(record)
        context = context_text(record)
        if not context:
            return text
        head, sep, tail = text.partition("\n")  # before a traceback, if any
        return head + context + sep + tail


def _text(value: Any) -> str:
    s = str(value)
    return f'"{s}"' if (" " in s or not s) else s


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg``, then the fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(_fields(record))
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


def configure(level: str = "info", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Install one handler on the root logger (the CLI calls this, libraries never do).

    Raises:
        ValueError: an unknown level or format.
    """
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    if fmt not in ("text", "json"):
        raise ValueError(f"unknown log format {fmt!r} (text or json)")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
