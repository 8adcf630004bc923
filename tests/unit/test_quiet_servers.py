"""A client that goes away mid-request (a reset, a broken pipe, a TLS hang-up) is routine
for an HTTP server: the local API server and the manager's endpoint server log it at
debug level and print nothing. socketserver's default prints ``Exception occurred during
processing of request from (...)`` with a traceback to stderr, into every test's output.
Anything else is logged as an error, through logging, with its traceback."""

from __future__ import annotations

import logging
import ssl
import sys
from typing import Any

import pytest

from apiserver.http.server import _HttpServer
from manager.healthz import _Server


def _servers() -> list[Any]:
    local = _HttpServer.__new__(_HttpServer)
    endpoints = _Server.__new__(_Server)
    endpoints.name = "probes"
    return [local, endpoints]


@pytest.mark.parametrize("server", _servers(), ids=["local-apiserver", "endpoints"])
@pytest.mark.parametrize(
    "error",
    [
        ConnectionResetError(104, "Connection reset by peer"),
        BrokenPipeError(32, "Broken pipe"),
        TimeoutError("timed out"),
        ssl.SSLEOFError(8, "EOF occurred in violation of protocol"),
    ],
    ids=["reset", "broken-pipe", "timeout", "tls-eof"],
)
def test_a_client_going_away_prints_nothing(
    server: Any, error: Exception, capfd: pytest.CaptureFixture[str], caplog: Any
) -> None:
    with caplog.at_level(logging.DEBUG):
        try:
            raise error
        except Exception:
            server.handle_error(None, ("127.0.0.1", 40000))
    out, err = capfd.readouterr()
    assert "Exception occurred" not in err + out
    assert all(r.levelno <= logging.DEBUG for r in caplog.records)


@pytest.mark.parametrize("server", _servers(), ids=["local-apiserver", "endpoints"])
def test_anything_else_is_an_error_in_the_log(
    server: Any, capfd: pytest.CaptureFixture[str], caplog: Any
) -> None:
    try:
        raise ValueError("a bug")
    except ValueError:
        server.handle_error(None, ("127.0.0.1", 40000))
    _, err = capfd.readouterr()
    assert "Exception occurred" not in err
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.exc_info is not None and record.exc_info[0] is ValueError
    assert sys.exc_info() == (None, None, None)
