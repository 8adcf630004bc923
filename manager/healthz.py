"""Health probes and the small HTTP server behind ``/healthz``, ``/readyz`` and
``/metrics`` (controller-runtime ``pkg/healthz`` and its metrics server).

* ``/healthz`` (liveness): every registered health check passes — the process and its
  informer threads are alive.
* ``/readyz`` (readiness): every readiness check passes — caches are synced. A standby
  with synced caches is ready; readiness does not mean leadership.
* ``/healthz/<name>`` and ``/readyz/<name>`` run one check; ``?verbose`` lists them all.

A server may also hold *negotiated* routes (:class:`Negotiated`: they see the ``Accept``
header and may add response headers; ``/statusz``), and a *guard*
(:data:`Guard`: asked before any route with the request's path and headers; it may answer
instead, e.g. 401/403 for secure metrics), and serve TLS (an ``ssl.SSLContext`` factory,
asked once per connection so that a rotated certificate is picked up; the handshake
happens in the connection's thread, with a timeout).

Bind addresses follow controller-runtime: ``":8081"`` (all interfaces), ``"127.0.0.1:0"``
(a free port, see :attr:`EndpointServer.address`), ``"0"`` disables the server.

Thread-safe: checks are read under a lock; each server runs in one named, non-daemon
thread (``http/<name>``) plus one per connection, all joined by :meth:`EndpointServer.stop`.
"""

from __future__ import annotations

import logging
import ssl
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "BindError",
    "Check",
    "Checks",
    "EndpointServer",
    "Guard",
    "Negotiated",
    "Route",
    "parse_bind_address",
]

logger = logging.getLogger(__name__)

Check = Callable[[], str | None]  # None = healthy, else the reason it is not
# (query, sub-check name or None) -> (status, content type, body)
Route = Callable[[str, str | None], tuple[int, str, bytes]]
# (path, request headers) -> None to go on, or the answer (status, type, body, headers)
Guard = Callable[[str, Mapping[str, str]], tuple[int, str, bytes, Mapping[str, str]] | None]
_HANDSHAKE_TIMEOUT = 10.0  # seconds a TLS client gets to finish its handshake


@dataclass(frozen=True, slots=True)
class Negotiated:
    """A route that sees the ``Accept`` header: ``answer(query, accept)`` returns
    ``(status, content type, body, extra headers)``."""

    answer: Callable[[str, str], tuple[int, str, bytes, Mapping[str, str]]]


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """``":8080"`` → ``("0.0.0.0", 8080)``; ``"0"`` or ``""`` → None (disabled).

    Raises:
        ValueError: not ``[host]:port`` with a port in 0-65535.
    """
    if address in ("0", ""):
        return None
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"bind address {address!r}: expected [host]:port or 0")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"bind address {address!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"bind address {address!r}: port out of range")
    return (host.strip("[]") or "0.0.0.0", number)


class BindError(OSError):
    """A server's address cannot be bound (in use, not permitted): ``server`` is the
    server's name (``metrics``, ``probes``), ``address`` the ``host:port`` tried."""

    def __init__(self, server: str, address: str, cause: OSError) -> None:
        super().__init__(cause.errno, f"cannot listen on {address}: {cause.strerror or cause}")
        self.server = server
        self.address = address


class Checks:
    """Named checks; ``run`` answers ``(ok, report)``.

    Informational checks (:meth:`add_informational`: a source of named results, such as
    one per cluster of a fleet) are listed with the others in a verbose report and may
    be asked for one by one (``/readyz/cluster/east``, 500 when it fails), but do not
    make the whole answer fail."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._checks: dict[str, Check] = {}
        self._informational: list[Callable[[], Mapping[str, str | None]]] = []

    def add(self, name: str, check: Check) -> None:
        with self._lock:
            if name in self._checks:
                raise ValueError(f"check {name!r} already registered")
            self._checks[name] = check

    def add_informational(self, source: Callable[[], Mapping[str, str | None]]) -> None:
        """Add checks named by ``source`` (name → None when it passes, else the reason),
        asked on every report; they never fail the whole answer."""
        with self._lock:
            self._informational.append(source)

    def _informational_results(self) -> dict[str, str | None]:
        with self._lock:
            sources = list(self._informational)
        results: dict[str, str | None] = {}
        for source in sources:
            try:
                results.update(source())
            except Exception as exc:
                results[f"{getattr(source, '__name__', 'source')}"] = (
                    f"check raised {type(exc).__name__}: {exc}"
                )
        return results

    def run(self, only: str | None = None) -> tuple[bool, list[str]]:
        with self._lock:
            checks = dict(self._checks)
        informational = self._informational_results() if self._informational else {}
        if only is not None and only not in checks:
            if only not in informational:
                return False, [f"[-]{only} failed: no such check"]
            reason = informational[only]
            if reason is None:
                return True, [f"[+]{only} ok"]
            return False, [f"[-]{only} failed: {reason}"]
        if only is not None:
            checks = {only: checks[only]}
            informational = {}
        ok = True
        lines = []
        for name, check in sorted(checks.items()):
            try:
                reason = check()
            except Exception as exc:
                reason = f"check raised {type(exc).__name__}: {exc}"
            if reason is None:
                lines.append(f"[+]{name} ok")
            else:
                ok = False
                lines.append(f"[-]{name} failed: {reason}")
        for name, reason in sorted(informational.items()):
            if reason is None:
                lines.append(f"[+]{name} ok")
            else:
                lines.append(f"[-]{name} failed (informational): {reason}")
        return ok, lines

    def route(self, kind: str) -> Route:
        """A route answering ``ok`` or the failing checks, like kube's healthz."""

        def answer(query: str, only: str | None) -> tuple[int, str, bytes]:
            ok, lines = self.run(only)
            if ok and "verbose" not in query:
                return 200, "text/plain; charset=utf-8", b"ok"
            text = "\n".join(lines) + f"\n{kind} check {'passed' if ok else 'failed'}\n"
            return (200 if ok else 500), "text/plain; charset=utf-8", text.encode()

        return answer


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("probe request", extra={"line": format % args})

    def do_GET(self) -> None:
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        extra: Mapping[str, str] = {}
        guard = self.server.guard
        refused = None if guard is None else guard(split.path, dict(self.headers.items()))
        route = self.server.routes.get(path)
        if refused is not None:
            status, ctype, body, extra = refused
        elif isinstance(route, Negotiated):
            status, ctype, body, extra = route.answer(split.query, self.headers.get("Accept", ""))
        elif route is None:
            prefix, _, name = path.rpartition("/")
            for probe in ("/healthz", "/readyz"):  # a check's name may hold a slash
                if path.startswith(probe + "/"):
                    prefix, name = probe, path.removeprefix(probe + "/")
            base = self.server.routes.get(prefix)
            if (
                base is not None
                and not isinstance(base, Negotiated)
                and prefix
                in (
                    "/healthz",
                    "/readyz",
                )
            ):
                status, ctype, body = base(split.query, name)
            else:
                status, ctype, body = 404, "text/plain; charset=utf-8", b"404 page not found\n"
        else:
            status, ctype, body = route(split.query, None)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True

    def __init__(
        self,
        address: tuple[str, int],
        routes: Mapping[str, Route | Negotiated],
        name: str,
        guard: Guard | None,
        tls: Callable[[], ssl.SSLContext] | None,
    ) -> None:
        self.routes = dict(routes)
        self.name = name
        self.guard = guard
        self.tls = tls
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver's default prints a traceback to stderr: a client that went away is
        # routine (debug), anything else is a bug of ours, logged with its traceback
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError | ssl.SSLError):
            logger.debug(
                "client went away",
                extra={"server": self.name, "client": client_address, "error": str(error)},
            )
        else:
            logger.error(
                "request failed",
                extra={"server": self.name, "client": client_address},
                exc_info=True,
            )

    def finish_request(self, request: Any, client_address: Any) -> None:
        # In the connection's thread: a client that never finishes its TLS handshake
        # holds only this thread, and only for the handshake timeout.
        if self.tls is not None:
            request.settimeout(_HANDSHAKE_TIMEOUT)
            try:
                request = self.tls().wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError) as exc:
                logger.debug("TLS handshake failed", extra={"server": self.name, "error": str(exc)})
                request.close()
                return
            request.settimeout(None)
            try:
                super().finish_request(request, client_address)
            finally:
                request.close()
            return
        super().finish_request(request, client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"http/{self.name}/conn",
        )
        if self._threads is not None:  # type: ignore[attr-defined]
            self._threads.append(t)  # type: ignore[attr-defined]
        t.start()


class EndpointServer:
    """One HTTP server for a set of routes (``/metrics``, or ``/healthz`` + ``/readyz``)."""

    def __init__(
        self,
        name: str,
        bind_address: str,
        routes: Mapping[str, Route | Negotiated],
        *,
        guard: Guard | None = None,
        tls: Callable[[], ssl.SSLContext] | None = None,
    ) -> None:
        self.name = name
        self._bind = parse_bind_address(bind_address)
        self._routes = routes
        self._guard = guard
        self._tls = tls
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self._bind is not None

    @property
    def address(self) -> tuple[str, int] | None:
        """The bound ``(host, port)`` once started (port 0 resolved), else None."""
        if self._server is None:
            return None
        host, port = self._server.server_address[:2]
        return (host if isinstance(host, str) else host.decode(), port)

    def start(self) -> None:
        """Bind and serve in thread ``http/<name>``; no-op when disabled.

        Raises:
            BindError: the address cannot be bound (in use, not permitted).
        """
        if self._bind is None or self._server is not None:
            return
        try:
            self._server = _Server(self._bind, self._routes, self.name, self._guard, self._tls)
        except OSError as exc:
            host, port = self._bind
            raise BindError(self.name, f"{host}:{port}", exc) from exc
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=f"http/{self.name}",
        )
        self._thread.start()
        logger.info(
            "serving",
            extra={
                "server": self.name,
                "address": self.address,
                "scheme": "https" if self._tls else "http",
            },
        )

    @property
    def scheme(self) -> str:
        """``https`` when serving TLS, else ``http``."""
        return "https" if self._tls is not None else "http"

    def stop(self) -> None:
        """Stop serving and join every thread."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
